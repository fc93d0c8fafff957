"""From the timelines of runs to the figures the benchmark prints (pure).

Per run: wall time (first Job created -> last Job finished), creation -> admission and creation
-> all pods bound (p50/p90/p99 over Jobs), the median time spent in each stage, correctness
(every Job that required a rack has all its pods in one rack). Over the A/B pairs: the median
of each figure per variant, and the ratio kueue-tas / Kueue both of those medians and per pair.
"""

from __future__ import annotations

import itertools
import os
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from .timeline import STAGES, JobTimeline
from .trace import JobSpec

QUANTILES = (50, 90, 99)
CPUS = os.cpu_count() or 1


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (``q`` in 0..100) of a non-empty sequence."""
    if not values:
        raise ValueError("no values")
    ordered = sorted(values)
    rank = max(1, -(-len(ordered) * q // 100))  # ceil without floats
    return ordered[min(len(ordered), int(rank)) - 1]


@dataclass
class RunFigures:
    variant: str
    wall_s: float
    to_admission: dict[int, float]
    to_bound: dict[int, float]
    stages: dict[str, float]  # "a->b" -> median seconds over Jobs
    cpu: dict[str, float] = field(default_factory=dict)  # process -> CPU seconds
    peak_rss_mib: dict[str, float] = field(default_factory=dict)
    required_jobs: int = 0
    required_split: list[str] = field(default_factory=list)  # required Jobs found in more than one rack
    preferred_racks: dict[int, int] = field(default_factory=dict)  # racks used -> Jobs
    jobs: int = 0
    writes: dict[str, int] = field(default_factory=dict)  # "VERB resource" -> apiserver requests in the run


def figures(
    variant: str,
    trace: Sequence[JobSpec],
    timelines: Mapping[str, JobTimeline],
    rack_of: Mapping[str, str],
) -> RunFigures:
    """Figures of one run; every Job of ``trace`` must have finished."""
    created = {j.name: timelines[j.name].at["created"] for j in trace}
    finished = [timelines[j.name].finished for j in trace]
    if any(f is None for f in finished):
        raise ValueError("a Job of the trace did not finish")
    wall = max(f for f in finished if f is not None) - min(created.values())
    to_admission = [timelines[j.name].at["admitted"] - created[j.name] for j in trace]
    to_bound = [timelines[j.name].at["bound"] - created[j.name] for j in trace]
    out = RunFigures(
        variant,
        wall,
        {q: percentile(to_admission, q) for q in QUANTILES},
        {q: percentile(to_bound, q) for q in QUANTILES},
        stage_medians([timelines[j.name] for j in trace]),
        jobs=len(trace),
    )
    for job in trace:
        racks = {rack_of.get(node, "?") for node in timelines[job.name].nodes.values()}
        if job.mode == "required":
            out.required_jobs += 1
            if len(racks) != 1:
                out.required_split.append(f"{job.name}: {sorted(racks)}")
        else:
            out.preferred_racks[len(racks)] = out.preferred_racks.get(len(racks), 0) + 1
    return out


def stage_medians(timelines: Sequence[JobTimeline]) -> dict[str, float]:
    """Median seconds from each stage to the next one the Job reached (skipped stages are
    folded into the next: Kueue's TAS goes from quota reserved straight to admitted)."""
    spans: dict[str, list[float]] = {}
    for tl in timelines:
        reached = [s for s in STAGES if s in tl.at]
        for a, b in itertools.pairwise(reached):
            spans.setdefault(f"{a}->{b}", []).append(tl.at[b] - tl.at[a])
    return {k: statistics.median(spans[k]) for k in sorted(spans, key=stage_order)}


def stage_order(span: str) -> tuple[int, int]:
    """Sort key of ``"a->b"``: by where it starts, then where it ends."""
    a, b = span.split("->")
    return STAGES.index(a), STAGES.index(b)


def headline(run: RunFigures) -> dict[str, float]:
    """The figures compared between variants, by name."""
    out = {"wall_s": run.wall_s}
    for q in QUANTILES:
        out[f"admission_p{q}_s"] = run.to_admission[q]
    for q in QUANTILES:
        out[f"bound_p{q}_s"] = run.to_bound[q]
    return out


def medians(runs: Sequence[RunFigures]) -> dict[str, float]:
    keys = headline(runs[0]).keys()
    return {k: statistics.median(headline(r)[k] for r in runs) for k in keys}


def pair_ratios(pairs: Sequence[tuple[RunFigures, RunFigures]]) -> dict[str, list[float]]:
    """Per headline figure, kueue-tas / Kueue in each (kueue, tas) pair."""
    out: dict[str, list[float]] = {}
    for kueue, tas in pairs:
        k, t = headline(kueue), headline(tas)
        for name in k:
            out.setdefault(name, []).append(t[name] / k[name] if k[name] > 0 else float("inf"))
    return out


def table(shape: str, pairs: Sequence[tuple[RunFigures, RunFigures]]) -> str:
    """The text the benchmark prints for one shape."""
    kueue = [k for k, _ in pairs]
    tas = [t for _, t in pairs]
    km, tm = medians(kueue), medians(tas)
    ratios = pair_ratios(pairs)
    lines = [f"== {shape}: {len(pairs)} pairs (median per variant; T/K = kueue-tas / Kueue)"]
    lines.append(f"{'figure':<20}{'Kueue TAS':>12}{'kueue-tas':>12}{'T/K':>8}   per pair T/K")
    for name in km:
        per_pair = " ".join(f"{r:.2f}" for r in ratios[name])
        ratio = tm[name] / km[name] if km[name] > 0 else float("inf")
        lines.append(f"{name:<20}{km[name]:>12.2f}{tm[name]:>12.2f}{ratio:>8.2f}   {per_pair}")
    lines.append("stage medians (s), median over runs:")
    stage_names = sorted({s for r in [*kueue, *tas] for s in r.stages}, key=stage_order)
    for stage in stage_names:
        kv = [r.stages[stage] for r in kueue if stage in r.stages]
        tv = [r.stages[stage] for r in tas if stage in r.stages]
        ks = f"{statistics.median(kv):.3f}" if kv else "-"
        ts = f"{statistics.median(tv):.3f}" if tv else "-"
        lines.append(f"  {stage:<28}{ks:>10}{ts:>10}")
    lines.append("CPU seconds / peak RSS MiB per run (median):")
    for label, runs in (("Kueue TAS run", kueue), ("kueue-tas run", tas)):
        parts = [
            f"{p} {statistics.median(r.cpu[p] for r in runs if p in r.cpu):.1f} s / "
            f"{statistics.median(r.peak_rss_mib[p] for r in runs if p in r.peak_rss_mib):.0f} MiB"
            for p in ("kueue", "kueue-tas")
            if any(p in r.cpu for r in runs)
        ]
        total = statistics.median(sum(r.cpu.values()) for r in runs)
        # How much of the machine the run kept busy: near 100 % the wall time is the work of
        # every process together divided by the CPUs, whoever does it.
        busy = statistics.median(sum(r.cpu.values()) / (CPUS * r.wall_s) for r in runs if r.wall_s > 0)
        others = ", ".join(
            f"{p} {statistics.median(r.cpu.get(p, 0.0) for r in runs):.1f}"
            for p in sorted({p for r in runs for p in r.cpu} - {"kueue", "kueue-tas"})
        )
        lines.append(
            f"  {label}: " + ", ".join(parts) + f"; all processes {total:.1f} s CPU ({others}); "
            f"{100 * busy:.0f} % of {CPUS} CPUs over the wall time"
        )
    lines.append("apiserver write requests per Job (median over runs; every client's):")
    for label, runs in (("Kueue TAS", kueue), ("kueue-tas", tas)):
        keys = sorted({k for r in runs for k in r.writes})
        per_job = {k: statistics.median(r.writes.get(k, 0) / max(1, r.jobs) for r in runs) for k in keys}
        shown = ", ".join(f"{k} {v:.2f}" for k, v in sorted(per_job.items(), key=lambda kv: -kv[1]) if v >= 0.05)
        lines.append(f"  {label}: total {sum(per_job.values()):.2f}: {shown}")
    for label, runs in (("Kueue TAS", kueue), ("kueue-tas", tas)):
        split = [s for r in runs for s in r.required_split]
        spread: dict[int, int] = {}
        for r in runs:
            for n, c in r.preferred_racks.items():
                spread[n] = spread.get(n, 0) + c
        verdict = "all in one rack" if not split else f"{len(split)} split: {split[:3]}"
        lines.append(
            f"  correctness {label}: {sum(r.required_jobs for r in runs)} required Jobs, {verdict}; "
            f"preferred Jobs by racks used {dict(sorted(spread.items()))}"
        )
    return "\n".join(lines)
