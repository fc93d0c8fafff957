"""The progress a cold ``make demo`` prints while it builds the Go components (e2e/build_progress.py),
with a fake clock and a fake process: no Go build runs here."""

from __future__ import annotations

import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from e2e.build_progress import BuildProgress, elapsed_text, run_with_progress


class FakeClock:
    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def make_progress(total: int = 5) -> tuple[BuildProgress, FakeClock, list[str]]:
    clock, said = FakeClock(), []
    return BuildProgress(total, said.append, clock=clock, heartbeat_s=30), clock, said


def test_elapsed_is_short_and_exact() -> None:
    assert [elapsed_text(s) for s in (0, 42.9, 60, 245, 3599, 3720, -3)] == [
        "0s",
        "42s",
        "1m00s",
        "4m05s",
        "59m59s",
        "1h02m",
        "0s",
    ]


def test_components_are_numbered_n_of_total() -> None:
    progress, clock, said = make_progress(total=3)
    labels = [progress.next_component(name, "v1") for name in ("etcd", "kubernetes", "kueue")]
    assert labels == ["[1/3] etcd v1", "[2/3] kubernetes v1", "[3/3] kueue v1"]
    clock.advance(125)
    progress.finished()
    assert said == ["3 component(s) ready; whole build 2m05s"]


def test_a_step_speaks_every_heartbeat_with_its_counts_and_both_elapsed_times() -> None:
    progress, clock, said = make_progress()
    clock.advance(90)  # earlier components took 90 s
    label = progress.next_component("kubernetes", "v1.34.1")
    step = progress.step(label, "compiling kube-apiserver", "modules ready after 12s")
    assert said == ["[1/5] kubernetes v1.34.1: compiling kube-apiserver (modules ready after 12s)"]
    for line in ("runtime\n", "k8s.io/apimachinery/pkg/util/sets\n", "gopkg.in/yaml.v3\n"):
        step.line(line)
    clock.advance(29)
    assert not step.tick()  # not a heartbeat yet
    clock.advance(1)
    assert step.tick()
    assert said[-1] == (
        "[1/5] kubernetes v1.34.1: still compiling kube-apiserver, 3 package(s) compiled so far "
        "(30s; whole build 2m00s)"
    )
    step.line("sigs.k8s.io/kueue/pkg/cache\n")
    clock.advance(10)
    assert not step.tick()  # the next heartbeat counts from the last one said
    clock.advance(20)
    assert step.tick()
    assert said[-1].endswith("4 package(s) compiled so far (1m00s; whole build 2m30s)")
    assert len(said) == 3


def test_downloads_are_counted_and_error_output_is_not_a_package() -> None:
    progress, clock, said = make_progress()
    step = progress.step("[2/5] kwok v0.7.0", "resolving and downloading modules")
    for line in (
        "go: downloading sigs.k8s.io/kwok v0.7.0\n",
        "go: downloading k8s.io/api v0.34.1\n",
        "go: added sigs.k8s.io/kwok v0.7.0\n",
        "# k8s.io/broken/pkg\n",
        "broken.go:12:3: undefined: x\n",
        "\n",
    ):
        step.line(line)
    assert (step.downloads, step.packages) == (2, 0)
    clock.advance(30)
    step.tick()
    assert said[-1] == (
        "[2/5] kwok v0.7.0: still resolving and downloading modules, 2 module(s) downloaded so far "
        "(30s; whole build 30s)"
    )


def test_a_quiet_step_still_says_it_is_alive() -> None:
    progress, clock, said = make_progress()
    step = progress.step("[5/5] kueue v0.19.2", "compiling kueue")
    clock.advance(31)
    step.tick()
    assert said[-1] == "[5/5] kueue v0.19.2: still compiling kueue (31s; whole build 31s)"


class FakeProcess:
    """A process that prints ``lines`` and exits with ``code`` after ``runs_for`` seconds of the
    fake clock; each ``wait(timeout)`` lets ``timeout`` seconds pass."""

    def __init__(self, clock: FakeClock, lines: list[str], runs_for: float, code: int = 0) -> None:
        self.clock, self.runs_for, self.code = clock, runs_for, code
        self.started = clock()
        self.killed = False
        self._drained = threading.Event()
        self.stdout = self._output(lines)

    def _output(self, lines: list[str]) -> Iterator[str]:
        yield from lines
        # Reached only once the reader asked for the line after the last: every line is counted.
        self._drained.set()

    def wait(self, timeout: float | None = None) -> int:
        assert self._drained.wait(5), "the reader thread consumed the output"
        if self.killed:
            return -9
        if timeout is not None and self.clock() - self.started + timeout < self.runs_for:
            self.clock.advance(timeout)
            raise subprocess.TimeoutExpired("go", timeout)
        self.clock.now = self.started + self.runs_for
        return self.code

    def kill(self) -> None:
        self.killed = True


def fake_popen(process: FakeProcess, calls: list[dict[str, Any]]) -> Any:
    def popen(cmd: list[str], **kwargs: Any) -> FakeProcess:
        calls.append({"cmd": cmd, **kwargs})
        return process

    return popen


def test_a_long_build_says_something_every_30_seconds_and_logs_everything(tmp_path: Path) -> None:
    progress, clock, said = make_progress()
    packages = [f"example.com/pkg{i}\n" for i in range(250)]
    process = FakeProcess(clock, packages, runs_for=95)
    calls: list[dict[str, Any]] = []
    step = progress.step("[3/5] jobset v0.12.0", "compiling jobset")
    log = tmp_path / "jobset.log"
    run_with_progress(
        ["/usr/bin/time", "-f", "%M", "go", "build", "-v"],
        cwd=tmp_path,
        env={"GOFLAGS": "-trimpath"},
        log=log,
        timeout=600,
        step=step,
        popen=fake_popen(process, calls),
        shown=["go", "build", "-v"],
    )
    heartbeats = said[1:]
    assert heartbeats == [
        f"[3/5] jobset v0.12.0: still compiling jobset, 250 package(s) compiled so far ({t}; whole build {t})"
        for t in ("30s", "1m00s", "1m30s")
    ]
    text = log.read_text()
    assert text.startswith("\n$ go build -v\n")
    assert text.count("example.com/pkg") == 250
    (call,) = calls
    assert call["stderr"] == subprocess.STDOUT and call["env"] == {"GOFLAGS": "-trimpath"}


def test_a_failed_build_raises_with_its_exit_code(tmp_path: Path) -> None:
    progress, clock, _ = make_progress()
    process = FakeProcess(clock, ["# pkg\n", "a.go:1: nope\n"], runs_for=3, code=2)
    step = progress.step("[1/5] etcd v3.6.5", "compiling etcd")
    with pytest.raises(subprocess.CalledProcessError) as failed:
        run_with_progress(
            ["go", "build"],
            cwd=tmp_path,
            env={},
            log=tmp_path / "l",
            timeout=60,
            step=step,
            popen=fake_popen(process, []),
        )
    assert failed.value.returncode == 2
    assert "a.go:1: nope" in (tmp_path / "l").read_text()


def test_a_build_past_its_timeout_is_killed(tmp_path: Path) -> None:
    progress, clock, said = make_progress()
    process = FakeProcess(clock, [], runs_for=10_000)
    step = progress.step("[2/5] kubernetes v1.34.1", "compiling kubectl")
    with pytest.raises(subprocess.TimeoutExpired):
        run_with_progress(
            ["go", "build"],
            cwd=tmp_path,
            env={},
            log=tmp_path / "l",
            timeout=100,
            step=step,
            popen=fake_popen(process, []),
        )
    assert process.killed
    assert len(said) == 1 + 3  # the announcement, then heartbeats at 30, 60 and 90 s
