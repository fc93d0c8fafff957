"""One run: a shape, a policy and a seed through the simulator, timed."""

from __future__ import annotations

import itertools
import time
from dataclasses import dataclass, field

from .figures import RunFigures, run_figures
from .registry import POLICIES
from .shapes import Shape
from .sim import Sim
from .trace import DEFAULT_MIX, JobMix, arrivals


@dataclass(frozen=True, slots=True)
class Settings:
    """``hours`` measured after ``warmup`` hours; arrivals go on after the window (the same load)
    until every job that arrived in it has started, for at most ``hours`` more."""

    hours: float = 300.0
    warmup: float = 48.0
    load: float = 0.9
    runtimes: bool = True
    priorities: bool = False
    mix: JobMix = field(default_factory=lambda: DEFAULT_MIX)

    @property
    def window(self) -> tuple[float, float]:
        return (self.warmup, self.warmup + self.hours)

    @property
    def until(self) -> float:
        return self.warmup + 2 * self.hours


def simulate(shape: Shape, policy: str, seed: int, settings: Settings) -> tuple[Sim, RunFigures]:
    trace = arrivals(
        shape, seed, load=settings.load, runtimes=settings.runtimes, priorities=settings.priorities, mix=settings.mix
    )
    jobs = itertools.takewhile(lambda job: job.arrival <= settings.until, trace)
    sim = Sim(shape, POLICIES[policy](), jobs, window=settings.window)
    started, cpu = time.perf_counter(), time.process_time()
    sim.run(settings.until)
    figures = run_figures(sim, policy, seed)
    figures.wall_s = time.perf_counter() - started
    figures.cpu_s = time.process_time() - cpu
    return sim, figures
