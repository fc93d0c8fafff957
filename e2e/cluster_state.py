"""The local cluster's state file (run directory, ports, processes, pinned versions), the lock on
its run directory, and what a child process or a client of the cluster needs from it."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from e2e import pki, versions
from e2e.components import Layout
from e2e.paths import run_dir
from e2e.procs import ProcInfo
from e2e.rest import Rest


@dataclass
class State:
    run_dir: str
    kubeconfig: str
    log_dir: str
    ports: dict[str, int]
    procs: list[ProcInfo] = field(default_factory=list)
    started_at: float = 0.0
    ready_after_s: float | None = None
    versions: dict[str, str] = field(default_factory=dict)

    @property
    def layout(self) -> Layout:
        return Layout(Path(self.run_dir))

    def to_json(self) -> str:
        return json.dumps(
            {
                "run_dir": self.run_dir,
                "kubeconfig": self.kubeconfig,
                "log_dir": self.log_dir,
                "ports": self.ports,
                "procs": [p.to_dict() for p in self.procs],
                "started_at": self.started_at,
                "ready_after_s": self.ready_after_s,
                "versions": self.versions,
            },
            indent=2,
        )

    @staticmethod
    def from_json(text: str) -> State:
        d = json.loads(text)
        return State(
            run_dir=d["run_dir"],
            kubeconfig=d["kubeconfig"],
            log_dir=d["log_dir"],
            ports={k: int(v) for k, v in d["ports"].items()},
            procs=[ProcInfo.from_dict(p) for p in d.get("procs", [])],
            started_at=float(d.get("started_at", 0.0)),
            ready_after_s=d.get("ready_after_s"),
            versions=dict(d.get("versions", {})),
        )

    def save(self) -> None:
        path = self.layout.state
        tmp = path.with_suffix(".tmp")
        tmp.write_text(self.to_json())
        tmp.replace(path)

    def proc(self, name: str) -> ProcInfo | None:
        return next((p for p in self.procs if p.name == name), None)


def pinned_versions() -> dict[str, str]:
    return {
        "kubernetes": versions.KUBERNETES,
        "etcd": versions.ETCD,
        "kwok": versions.KWOK,
        "kueue": versions.KUEUE,
        "jobset": versions.JOBSET,
    }


def load_state(rdir: Path | None = None) -> State | None:
    path = Layout(rdir or run_dir()).state
    try:
        return State.from_json(path.read_text())
    except (OSError, ValueError, KeyError):
        return None


@contextlib.contextmanager
def run_dir_lock(rdir: Path) -> Iterator[None]:
    """Exclusive lock so two ``up``/``down`` never race on the same run directory."""
    rdir.parent.mkdir(parents=True, exist_ok=True)
    with (rdir.parent / f".{rdir.name}.lock").open("w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def child_env(state: State, layout: Layout) -> dict[str, str]:
    env = dict(os.environ)
    env["KUBECONFIG"] = state.kubeconfig
    env["NO_PROXY"] = env["no_proxy"] = "127.0.0.1,localhost"
    env["HOME"] = str(layout.home)
    return env


def rest_client(state: State) -> Rest:
    p = pki.Pki(state.layout.pki_dir)
    return Rest("127.0.0.1", state.ports["apiserver"], str(p.ca_crt), str(p.admin_crt), str(p.admin_key))
