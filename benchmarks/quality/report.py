"""The side-by-side table (Markdown) and the JSON document of a set of runs."""

from __future__ import annotations

import math
from dataclasses import asdict
from typing import Any

from .figures import FIGURES, RunFigures, Spread, summarize
from .policies import BASELINE

# Figures printed without decimals (counts).
_COUNTS = {"preemptions", "jobs", "unstarted"}


def _number(value: float, key: str) -> str:
    if math.isnan(value):
        return "-"
    if key in _COUNTS or abs(value) >= 100:
        return f"{value:,.0f}"
    return f"{value:.2f}" if abs(value) < 10 else f"{value:.1f}"


def _cell(s: Spread, key: str, suffix: str = "") -> str:
    if math.isnan(s.median):
        return "-"
    if s.low == s.high:
        return _number(s.median, key) + suffix
    return f"{_number(s.median, key)}{suffix} [{_number(s.low, key)}-{_number(s.high, key)}]"


def table(title: str, by_policy: dict[str, list[RunFigures]]) -> str:
    """One shape: a row per figure, per policy the median over seeds [lowest-highest] and, beside
    each policy but the baseline, the median [spread] of its per-seed ratios to the baseline."""
    baseline = by_policy.get(BASELINE, [])
    summaries = {policy: summarize(runs, baseline) for policy, runs in by_policy.items()}
    header = ["figure"]
    for policy in by_policy:
        header.append(policy)
        if policy != BASELINE and baseline:
            header.append(f"{policy} / {BASELINE}")
    lines = [f"**{title}**", "", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for key, label in FIGURES:
        cells = [label]
        for policy, summary in summaries.items():
            cells.append(_cell(summary[key]["value"], key))
            if policy != BASELINE and baseline:
                cells.append(_cell(summary[key]["ratio"], "ratio", "x"))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _plain(value: Any) -> Any:
    """NaN as null (JSON has no NaN)."""
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def document(settings: dict[str, Any], runs: list[RunFigures]) -> dict[str, Any]:
    """Every run's figures and, per shape and policy, the summary over seeds."""
    summary: dict[str, dict[str, Any]] = {}
    for shape in dict.fromkeys(r.shape for r in runs):
        of_shape = [r for r in runs if r.shape == shape]
        baseline = [r for r in of_shape if r.policy == BASELINE]
        summary[shape] = {}
        for policy in dict.fromkeys(r.policy for r in of_shape):
            mine = [r for r in of_shape if r.policy == policy]
            summary[shape][policy] = {
                key: {kind: asdict(s) for kind, s in spreads.items()}
                for key, spreads in summarize(mine, baseline).items()
            }
    out: dict[str, Any] = _plain({"settings": settings, "runs": [asdict(r) for r in runs], "summary": summary})
    return out
