"""How two placements of one case compare: the verdict the ``placement_vs_kueue`` table prints,
and, when they differ, where (level by level, then per domain). Assignments are the JSON both
sides print: ``{"levels": [...], "domains": [{"values": [...], "count": n}]}``."""

from __future__ import annotations

from collections import Counter
from typing import Any

HOSTNAME = "kubernetes.io/hostname"
Result = dict[str, Any]


def domain_counts(assignment: Result | None) -> dict[tuple[str, ...], int] | None:
    if assignment is None:
        return None
    counts: Counter[tuple[str, ...]] = Counter()
    for d in assignment["domains"]:
        counts[tuple(d["values"])] += d["count"]
    return dict(counts)


def verdict(kueue: Result, ours: Result) -> str:
    ka, oa = kueue["assignment"], ours["assignment"]
    if ka is None and oa is None:
        return "yes (no fit)"
    if ka is None or oa is None:
        return "NO (fit)"
    if ka["levels"] != oa["levels"]:
        return "NO (levels)"
    return "yes" if domain_counts(ka) == domain_counts(oa) else "NO"


class Locator:
    """Where a domain lies, level by level, from the scenario's node labels (an assignment
    whose lowest level is the hostname names the node only)."""

    def __init__(self, scenario: Result) -> None:
        self.levels: list[str] = scenario["topology"]["levels"]
        self.labels: dict[str, dict[str, str]] = {n["name"]: n["labels"] for n in scenario["nodes"]}

    def per_level(self, assignment: Result) -> dict[str, Counter[str]]:
        out: dict[str, Counter[str]] = {level: Counter() for level in self.levels}
        for d in assignment["domains"]:
            where = dict(zip(assignment["levels"], d["values"], strict=True))
            node = where.get(HOSTNAME)
            if node is not None:
                where = {**self.labels.get(node, {}), **where}
            for level in self.levels:
                if level in where:
                    out[level][where[level]] += d["count"]
        return out


def _top(counter: Counter[str], n: int = 6) -> str:
    items = sorted(counter.items(), key=lambda kv: (-kv[1], kv[0]))
    text = ", ".join(f"{k}={v}" for k, v in items[:n])
    return text + (f", ... ({len(items)} in all)" if len(items) > n else "")


def explain(kueue: Result, ours: Result, locator: Locator) -> list[str]:
    """How two assignments of one case differ: fit, then level by level, then per domain."""
    ka, oa = kueue["assignment"], ours["assignment"]
    if ka is None or oa is None:
        return [
            f"  Kueue: fits={ka is not None} {kueue.get('reason') or ''}".rstrip(),
            f"  ours:  fits={oa is not None} {ours.get('reason') or ''}".rstrip(),
        ]
    lines = []
    kc, oc = domain_counts(ka) or {}, domain_counts(oa) or {}
    lines.append(
        f"  Kueue: {len(kc)} domains, {sum(kc.values())} pods; ours: {len(oc)} domains, {sum(oc.values())} pods"
    )
    kl, ol = locator.per_level(ka), locator.per_level(oa)
    for level in locator.levels:
        if kl[level] != ol[level]:
            diff = Counter(kl[level])
            diff.subtract(ol[level])
            delta = Counter({k: v for k, v in diff.items() if v})
            lines.append(f"  {level}: Kueue {_top(kl[level])}")
            lines.append(f"  {' ' * len(level)}  ours  {_top(ol[level])}")
            lines.append(f"  {' ' * len(level)}  Kueue minus ours: {_top(delta)}")
            break  # the highest differing level says where the two searches parted
    only_k = sorted(set(kc) - set(oc))
    only_o = sorted(set(oc) - set(kc))
    changed = sorted(k for k in set(kc) & set(oc) if kc[k] != oc[k])
    if only_k:
        lines.append(f"  only Kueue ({len(only_k)}): " + ", ".join(f"{'/'.join(k)}={kc[k]}" for k in only_k[:8]))
    if only_o:
        lines.append(f"  only ours ({len(only_o)}): " + ", ".join(f"{'/'.join(k)}={oc[k]}" for k in only_o[:8]))
    if changed:
        lines.append(
            f"  different counts ({len(changed)}): "
            + ", ".join(f"{'/'.join(k)} Kueue={kc[k]} ours={oc[k]}" for k in changed[:8])
        )
    return lines
