"""CPU seconds and peak resident memory of a process over a run (Linux ``/proc``)."""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from pathlib import Path


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of ``pid`` so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def peak_rss_mib(pid: int) -> float:
    """``VmHWM``: the most resident memory since start or since :func:`reset_peak`."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmHWM for pid {pid}")


def reset_peak(pid: int) -> None:
    """Start ``VmHWM`` again from the current RSS (``clear_refs`` 5; needs the process's owner
    or root; without it the peak is since the process started)."""
    with contextlib.suppress(OSError):
        Path(f"/proc/{pid}/clear_refs").write_text("5")


@dataclass
class ProcUsage:
    pid: int
    cpu_before: float

    @classmethod
    def start(cls, pid: int) -> ProcUsage:
        reset_peak(pid)
        return cls(pid, cpu_seconds(pid))

    def stop(self) -> tuple[float, float]:
        """(CPU seconds since start, peak RSS MiB since start)."""
        return cpu_seconds(self.pid) - self.cpu_before, peak_rss_mib(self.pid)
