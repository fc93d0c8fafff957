"""The figures of one run, read from a finished ``Sim``, and their summary over seeds.

Per run (one shape, policy and seed), over the measured window ``[start, end)``:

* ``stranded_pct``: GPUs free while at least one job waits, as % of the cluster's GPUs,
  time-averaged over the window (after each pass every waiting job is one that cannot start);
* ``utilisation_pct``: GPU-hours busy / (GPUs x window); ``offered_pct``: GPU-hours of the jobs
  that arrived in the window / the same (what the trace asked for);
* waits, of the jobs that arrived in the window, in minutes: the time each spent queued (an
  evicted job's waits add up; a job still waiting at the end counts up to the end, and
  ``unstarted`` says how many did): p50 / p95 and mean by size, and the load-weighted mean
  (weighted by GPUs x true runtime) over all sizes (``lw_wait_all``) and per size;
* ``room_<size>``: % of the size's jobs that waited at some moment while enough GPUs were free in
  total (blocked by fragmentation, or by a policy);
* ``preemptions``, ``victims_per_preemption`` and ``lost_pct`` (GPU-hours the victims had run,
  as % of the GPU-hours delivered in the window); ``reserved_idle_pct``: GPUs a policy held
  free for a reservation, % of GPUs, time-averaged.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field

import numpy as np

from .sim import Sim
from .trace import SIZES

# (key, label) of every figure, in table order.
FIGURES: tuple[tuple[str, str], ...] = (
    ("stranded_pct", "stranded GPUs while jobs wait (%)"),
    ("utilisation_pct", "utilisation (%)"),
    ("offered_pct", "offered load (%)"),
    ("lw_wait_all", "load-weighted mean wait, all (min)"),
    *((f"lw_wait_{s}", f"load-weighted mean wait, {s} (min)") for s in SIZES),
    *((f"mean_wait_{s}", f"mean wait, {s} (min)") for s in SIZES),
    *((f"p50_wait_{s}", f"p50 wait, {s} (min)") for s in SIZES),
    *((f"p95_wait_{s}", f"p95 wait, {s} (min)") for s in SIZES),
    *((f"room_{s}", f"{s} jobs that waited with enough GPUs free (%)") for s in SIZES),
    ("preemptions", "preemptions"),
    ("victims_per_preemption", "victims per preemption"),
    ("lost_pct", "GPU-hours lost to preemption (% of delivered)"),
    ("reserved_idle_pct", "reserved-but-idle GPUs (%)"),
    ("jobs", "jobs measured"),
    ("unstarted", "measured jobs still waiting at the end (waits censored)"),
)


@dataclass
class RunFigures:
    shape: str
    policy: str
    seed: int
    values: dict[str, float] = field(default_factory=dict)
    sim_hours: float = 0.0  # simulated, warm-up and drain included
    wall_s: float = 0.0
    cpu_s: float = 0.0  # this process's CPU time (the machine may be shared)
    placements: int = 0  # engine calls


def _percentile(values: list[float], q: float) -> float:
    return float(np.percentile(values, q)) if values else math.nan


def _weighted_mean(pairs: list[tuple[float, float]]) -> float:
    total = sum(w for _, w in pairs)
    return sum(v * w for v, w in pairs) / total if total else math.nan


def run_figures(sim: Sim, policy: str, seed: int) -> RunFigures:
    start, end = sim.window
    span = end - start
    gpus = sim.shape.gpus
    measured = [r for r in sim.records if start <= r.job.arrival < end]
    waits: dict[str, list[tuple[float, float]]] = {s: [] for s in SIZES}  # (minutes, weight)
    room: dict[str, list[bool]] = {s: [] for s in SIZES}
    unstarted = 0
    for rec in measured:
        wait = rec.waited
        if rec.queued_since is not None:
            wait += sim.now - rec.queued_since
            unstarted += 1
        waits[rec.job.size].append((wait * 60, rec.job.work))
        room[rec.job.size].append(rec.saw_room)
    totals = sim.totals
    values: dict[str, float] = {
        "stranded_pct": 100 * totals.stranded / (gpus * span),
        "utilisation_pct": 100 * totals.busy / (gpus * span),
        "offered_pct": 100 * sum(r.job.work for r in measured) / (gpus * span),
        "lw_wait_all": _weighted_mean([p for s in SIZES for p in waits[s]]),
        "preemptions": float(len(totals.victims)),
        "victims_per_preemption": statistics.fmean(totals.victims) if totals.victims else 0.0,
        "lost_pct": 100 * totals.lost / totals.busy if totals.busy else 0.0,
        "reserved_idle_pct": 100 * totals.reserved_idle / (gpus * span),
        "jobs": float(len(measured)),
        "unstarted": float(unstarted),
    }
    for size in SIZES:
        minutes = [w for w, _ in waits[size]]
        values[f"lw_wait_{size}"] = _weighted_mean(waits[size])
        values[f"mean_wait_{size}"] = statistics.fmean(minutes) if minutes else math.nan
        values[f"p50_wait_{size}"] = _percentile(minutes, 50)
        values[f"p95_wait_{size}"] = _percentile(minutes, 95)
        values[f"room_{size}"] = 100 * statistics.fmean(room[size]) if room[size] else math.nan
    return RunFigures(sim.shape.name, policy, seed, values, sim_hours=sim.now, placements=sim.placements)


@dataclass(frozen=True, slots=True)
class Spread:
    median: float
    low: float
    high: float


def spread(values: list[float]) -> Spread:
    finite = [v for v in values if not math.isnan(v)]
    if not finite:
        return Spread(math.nan, math.nan, math.nan)
    return Spread(statistics.median(finite), min(finite), max(finite))


def ratio(value: float, baseline: float) -> float:
    """``value / baseline``; NaN when the baseline is 0 or unknown (1 when both are 0)."""
    if math.isnan(value) or math.isnan(baseline):
        return math.nan
    if baseline == 0:
        return 1.0 if value == 0 else math.nan
    return value / baseline


def summarize(runs: list[RunFigures], baseline: list[RunFigures]) -> dict[str, dict[str, Spread]]:
    """Per figure: the spread over seeds of ``runs`` ("value") and of their ratios to the
    ``baseline`` run of the same seed ("ratio")."""
    base = {r.seed: r for r in baseline}
    out: dict[str, dict[str, Spread]] = {}
    for key, _ in FIGURES:
        values = [r.values[key] for r in runs]
        ratios = [ratio(r.values[key], base[r.seed].values[key]) for r in runs if r.seed in base]
        out[key] = {"value": spread(values), "ratio": spread(ratios)}
    return out
