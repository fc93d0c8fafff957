"""How a chaos run's workloads must end: admitted and finished, or pending with a message on our
check entry. A submission planned never to fit must never finish.

A Job whose own counts say it has failed (more failed pods than its ``backoffLimit``) has ended
as surely as one the Job controller has marked Failed: the mark can come minutes later, after
apiserver restarts leave the controller's informer behind and its retries backed off (chaos
seed 5060: failed 10 of backoffLimit 6, no condition 7 minutes on), and Kueue finishes the
Workload only then. It ends as "failed (backoffLimit exceeded)"."""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection
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


DEFAULT_BACKOFF_LIMIT = 6  # batch/v1 Job's default


def failed_jobs(jobs: list[dict[str, Any]]) -> set[str]:
    """The Jobs whose failed pods exceed their ``backoffLimit`` (with no per-index limit, which
    counts otherwise): failed, whether or not the Job controller has said so yet."""
    out = set()
    for job in jobs:
        spec, status = job.get("spec") or {}, job.get("status") or {}
        if spec.get("backoffLimitPerIndex") is not None:
            continue
        limit = spec.get("backoffLimit")
        if int(status.get("failed") or 0) > (DEFAULT_BACKOFF_LIMIT if limit is None else int(limit)):
            out.add(str(job["metadata"]["name"]))
    return out


def judge(
    workloads: list[dict[str, Any]],
    submitted: dict[str, dict[str, Any]],
    check: str,
    failed: Collection[str] = (),
) -> Verdict:
    """``submitted``: name -> planned spec of every Job/JobSet that was created; ``failed``: the
    Jobs ``failed_jobs`` finds failed."""
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
        elif kind == "Job" and name in failed:
            if spec.get("never_fits"):
                v.problems.append(f"{kind} {name} can never fit, yet it ran and failed: {_summary(wl, check)}")
            v.outcomes["failed (backoffLimit exceeded)"] += 1
        else:
            v.problems.append(f"{kind} {name}: neither finished nor pending with a message: {_summary(wl, check)}")
    return v
