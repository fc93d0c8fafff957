"""What a long first build says while it runs: which component, how far, for how long.

A cold ``make demo`` compiles five Go components, some for ten minutes each, and ``go`` itself
prints nothing a person sees (its output goes to the build log). This module turns that output
into progress: a line when a component or one of its steps starts, then one every
``heartbeat_s`` seconds while the step runs, with the step's and the whole build's elapsed time
and how many modules were downloaded or packages compiled so far (counted from ``go get``'s
``go: downloading`` lines and ``go build -v``'s package lines).

The clock, the output and the process are injected, so the logic is tested without a build
(``tests/project/test_build_progress.py``).
"""

from __future__ import annotations

import re
import subprocess
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import IO, Protocol

Clock = Callable[[], float]
Emit = Callable[[str], None]

HEARTBEAT_SECONDS = 30.0
_POLL_SECONDS = 1.0
# ``go build -v`` names each package as it compiles it, one import path per line; error output
# ("# pkg", "file.go:12: ...") and go's own notes ("go: ...") have spaces or colons.
_PACKAGE_LINE = re.compile(r"^[A-Za-z0-9_.~\-]+(/[A-Za-z0-9_.~\-]+)*$")
_DOWNLOAD_LINE = re.compile(r"^go: downloading \S+ \S+$")


def elapsed_text(seconds: float) -> str:
    """``42s``, ``4m05s``, ``1h02m``: short enough for a progress line."""
    whole = max(int(seconds), 0)
    if whole < 60:
        return f"{whole}s"
    minutes, secs = divmod(whole, 60)
    if minutes < 60:
        return f"{minutes}m{secs:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"


class StepProgress:
    """One command of a component's build: counts what go prints, says every heartbeat what it
    is doing. ``line`` is called from the thread that reads the output, ``tick`` from the one
    that waits for the process."""

    def __init__(self, build: BuildProgress, label: str, doing: str) -> None:
        self._build = build
        self.label = label
        self.doing = doing
        self.started = build.clock()
        self._last_said = self.started
        self._lock = threading.Lock()
        self.packages = 0
        self.downloads = 0

    def now(self) -> float:
        return self._build.clock()

    def line(self, text: str) -> None:
        text = text.strip()
        with self._lock:
            if _DOWNLOAD_LINE.match(text):
                self.downloads += 1
            elif _PACKAGE_LINE.match(text):
                self.packages += 1

    def counts(self) -> str:
        with self._lock:
            parts = []
            if self.downloads:
                parts.append(f"{self.downloads} module(s) downloaded")
            if self.packages:
                parts.append(f"{self.packages} package(s) compiled")
        return ", ".join(parts)

    def status(self) -> str:
        now = self._build.clock()
        counts = self.counts()
        return (
            f"{self.label}: still {self.doing}"
            + (f", {counts} so far" if counts else "")
            + f" ({elapsed_text(now - self.started)}; whole build {elapsed_text(now - self._build.started)})"
        )

    def tick(self) -> bool:
        """Say the status if a heartbeat has passed since the last one; True when it did."""
        now = self._build.clock()
        if now - self._last_said < self._build.heartbeat_s:
            return False
        self._last_said = now
        self._build.emit(self.status())
        return True


class BuildProgress:
    """Progress over the components of one build run: ``[n/N] name version: ...`` lines."""

    def __init__(
        self, total: int, emit: Emit, clock: Clock = time.monotonic, heartbeat_s: float = HEARTBEAT_SECONDS
    ) -> None:
        self.total = total
        self.emit = emit
        self.clock = clock
        self.heartbeat_s = heartbeat_s
        self.started = clock()
        self._index = 0

    def next_component(self, name: str, version: str) -> str:
        """The label of the next component (``[2/5] kubernetes v1.34.1``)."""
        self._index += 1
        return f"[{self._index}/{self.total}] {name} {version}"

    def say(self, label: str, what: str) -> None:
        self.emit(f"{label}: {what}; whole build {elapsed_text(self.clock() - self.started)}")

    def step(self, label: str, doing: str, note: str = "") -> StepProgress:
        """Announce a step (``note`` only here, not in its heartbeats) and return its progress."""
        self.emit(f"{label}: {doing}" + (f" ({note})" if note else ""))
        return StepProgress(self, label, doing)

    def finished(self) -> None:
        self.emit(f"{self.total} component(s) ready; whole build {elapsed_text(self.clock() - self.started)}")


class _Process(Protocol):
    """What ``run_with_progress`` needs of a ``subprocess.Popen``."""

    stdout: IO[str] | None

    def wait(self, timeout: float | None = None) -> int: ...

    def kill(self) -> None: ...


Popen = Callable[..., _Process]


def _pump(lines: Iterable[str], log: IO[str], step: StepProgress) -> None:
    for text in lines:
        log.write(text)
        log.flush()
        step.line(text)


def run_with_progress(
    cmd: Sequence[str],
    *,
    cwd: Path,
    env: Mapping[str, str],
    log: Path,
    timeout: float,
    step: StepProgress,
    popen: Popen = subprocess.Popen,
    poll_s: float = _POLL_SECONDS,
    shown: Sequence[str] | None = None,
) -> None:
    """Run ``cmd`` with its output appended to ``log`` and counted by ``step``, which speaks
    every heartbeat while the command runs. Raises ``CalledProcessError`` on a non-zero exit and
    ``TimeoutExpired`` (after killing it) when it runs longer than ``timeout``. ``shown`` is the
    command as the log names it (``cmd`` may carry a wrapper such as ``/usr/bin/time``)."""
    with log.open("a") as out:
        out.write(f"\n$ {' '.join(shown if shown is not None else cmd)}\n")
        out.flush()
        proc = popen(
            list(cmd), cwd=cwd, env=dict(env), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1
        )
        assert proc.stdout is not None
        reader = threading.Thread(target=_pump, args=(proc.stdout, out, step), daemon=True)
        reader.start()
        deadline = step.started + timeout
        while True:
            try:
                code = proc.wait(timeout=poll_s)
                break
            except subprocess.TimeoutExpired:
                step.tick()
                if step.now() > deadline:
                    proc.kill()
                    proc.wait()
                    reader.join()
                    raise subprocess.TimeoutExpired(list(cmd), timeout) from None
        reader.join()
    if code != 0:
        raise subprocess.CalledProcessError(code, list(cmd))
