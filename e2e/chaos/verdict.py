"""How a chaos run's workloads must end: admitted and finished, or pending with a message on our
check entry. A submission planned never to fit must never finish."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from e2e.kube import condition, condition_true
from e2e.workloads import check_entry


@dataclass
class Verdict:
    outcomes: Counter[str] = field(default_factory=Counter)  # finished / pending with a message
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


def _owner(wl: dict[str, Any]) -> tuple[str, str] | None:
    for ref in wl["metadata"].get("ownerReferences") or []:
        if ref.get("kind") in ("Job", "JobSet"):
            return str(ref["kind"]), str(ref["name"])
    return None


def _summary(wl: dict[str, Any], check: str) -> str:
    conds = ",".join(
        f"{c['type']}={c['status']}({c.get('reason', '')})" for c in (wl.get("status") or {}).get("conditions") or []
    )
    entry = check_entry(wl, check) or {}
    return f"conditions {conds or 'none'}; check entry {entry.get('state')}: {entry.get('message', '')!r}"


def judge(workloads: list[dict[str, Any]], submitted: dict[str, dict[str, Any]], check: str) -> Verdict:
    """``submitted``: name -> planned spec of every Job/JobSet that was created."""
    by_owner = {o: wl for wl in workloads if (o := _owner(wl)) is not None}
    v = Verdict()
    for name, spec in sorted(submitted.items()):
        kind = "Job" if spec["workload"] == "job" else "JobSet"
        wl = by_owner.get((kind, name))
        if wl is None:
            v.problems.append(f"{kind} {name}: no Workload")
            continue
        finished = condition(wl, "Finished")
        entry = check_entry(wl, check) or {}
        if finished is not None and finished.get("status") == "True":
            if spec.get("never_fits"):
                v.problems.append(f"{kind} {name} can never fit, yet it ran and finished: {_summary(wl, check)}")
            v.outcomes[f"finished ({finished.get('reason', '')})"] += 1
        elif not condition_true(wl, "Admitted") and entry.get("message"):
            v.outcomes[f"pending with a message ({entry.get('state')})"] += 1
        else:
            v.problems.append(f"{kind} {name}: neither finished nor pending with a message: {_summary(wl, check)}")
    return v
