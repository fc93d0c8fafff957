"""Start and stop the cluster's processes: one process group each, logs to files, no strays."""

from __future__ import annotations

import contextlib
import os
import resource
import signal
import socket
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

# Popen objects of processes started by this Python process, so they can be reaped (no zombies,
# no "still running" ResourceWarning at garbage collection).
_CHILDREN: dict[int, subprocess.Popen[bytes]] = {}


@dataclass(frozen=True)
class ProcInfo:
    """What is needed to find (and safely kill) a process we started."""

    name: str
    pid: int
    start_ticks: int  # /proc/<pid>/stat field 22: guards against pid reuse
    log: str

    def to_dict(self) -> dict[str, object]:
        return {"name": self.name, "pid": self.pid, "start_ticks": self.start_ticks, "log": self.log}

    @staticmethod
    def from_dict(d: dict[str, object]) -> ProcInfo:
        return ProcInfo(str(d["name"]), int(str(d["pid"])), int(str(d["start_ticks"])), str(d["log"]))


def free_port() -> int:
    """A currently free TCP port on 127.0.0.1 (bind-0 probe)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def free_ports(names: Sequence[str]) -> dict[str, int]:
    ports: dict[str, int] = {}
    while len(ports) < len(names):
        p = free_port()
        if p not in ports.values():
            ports[names[len(ports)]] = p
    return ports


def _start_ticks(pid: int) -> int | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # the command name (field 2) may contain spaces; fields after the closing paren are fixed
    fields = stat.rsplit(")", 1)[1].split()
    return int(fields[19])


def _raise_nofile() -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = hard if hard != resource.RLIM_INFINITY else 1 << 20
    if soft < target:
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))


def start(
    name: str, argv: Sequence[str], log_dir: Path, env: dict[str, str] | None = None, cwd: Path | None = None
) -> ProcInfo:
    """Start ``argv`` in a new session (its own process group), output appended to ``<log_dir>/<name>.log``."""
    log_dir.mkdir(parents=True, exist_ok=True)
    log = log_dir / f"{name}.log"
    with log.open("ab") as out:
        out.write(f"\n==== {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())} {' '.join(argv)}\n".encode())
        out.flush()
        p = subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env=env,
            cwd=cwd,
            preexec_fn=_raise_nofile,
        )
    _CHILDREN[p.pid] = p
    ticks = _start_ticks(p.pid) or 0
    return ProcInfo(name, p.pid, ticks, str(log))


def is_alive(info: ProcInfo) -> bool:
    ticks = _start_ticks(info.pid)
    if ticks is None or ticks != info.start_ticks:
        return False
    try:
        state = Path(f"/proc/{info.pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _reap(pid: int) -> None:
    child = _CHILDREN.get(pid)
    if child is not None:
        if child.poll() is not None:
            del _CHILDREN[pid]
        return
    with contextlib.suppress(ChildProcessError, OSError):
        os.waitpid(pid, os.WNOHANG)


def stop(info: ProcInfo, grace_s: float = 10.0) -> str:
    """SIGTERM the process group, then SIGKILL after ``grace_s``. Returns what happened."""
    if _start_ticks(info.pid) != info.start_ticks:
        # The leader is gone (or the pid was reused): only its group may linger.
        if _group_alive(info.pid) and _start_ticks(info.pid) is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(info.pid, signal.SIGKILL)
            return "group killed (leader already gone)"
        return "not running"
    with contextlib.suppress(ProcessLookupError):
        os.killpg(info.pid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline:
        _reap(info.pid)
        if not _group_alive(info.pid):
            return "stopped"
        time.sleep(0.1)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(info.pid, signal.SIGKILL)
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        _reap(info.pid)
        if not _group_alive(info.pid):
            break
        time.sleep(0.1)
    return "killed"


def tail(path: str | Path, lines: int = 25) -> str:
    try:
        return "\n".join(Path(path).read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


def stop_all(infos: Sequence[ProcInfo], grace_s: float = 10.0) -> list[tuple[str, str]]:
    """SIGTERM every process group at once (in the given order), SIGKILL what is left after ``grace_s``.

    The components are independent processes, so stopping them together bounds ``down`` by the
    slowest one instead of the sum.
    """
    pending: list[ProcInfo] = []
    results: dict[str, str] = {}
    for info in infos:
        if _start_ticks(info.pid) != info.start_ticks:
            results[info.name] = stop(info, grace_s=0)  # leader gone: only strays to clean up
            continue
        with contextlib.suppress(ProcessLookupError):
            os.killpg(info.pid, signal.SIGTERM)
        pending.append(info)
    t0 = time.monotonic()
    deadline = t0 + grace_s
    while pending and time.monotonic() < deadline:
        for info in list(pending):
            _reap(info.pid)
            if not _group_alive(info.pid):
                results[info.name] = f"stopped ({time.monotonic() - t0:.1f}s)"
                pending.remove(info)
        time.sleep(0.1)
    for info in pending:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(info.pid, signal.SIGKILL)
    kill_deadline = time.monotonic() + 5
    while pending and time.monotonic() < kill_deadline:
        for info in list(pending):
            _reap(info.pid)
            if not _group_alive(info.pid):
                results[info.name] = f"killed after {grace_s:.0f}s grace"
                pending.remove(info)
        time.sleep(0.1)
    for info in pending:
        results[info.name] = "STILL RUNNING after SIGKILL"
    return [(i.name, results[i.name]) for i in infos]
