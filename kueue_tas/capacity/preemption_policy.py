"""Topology-driven preemption's policy: the ClusterQueue's switch and who may be a victim, at
what cost (pure: the admission and ``plan`` judge alike).

A ClusterQueue opts in with ``<prefix>topology-preemption: Enabled | DryRun | Disabled``
(Disabled by default: Kueue's own behaviour). Which admitted workloads may be victims follows
the preemptor's ClusterQueue's own ``spec.preemption``, as Kueue reads it, so an admin
configures preemption once:

* in its own ClusterQueue when ``withinClusterQueue`` is ``LowerPriority`` or
  ``LowerOrNewerEqualPriority``;
* in another ClusterQueue of its cohort when ``reclaimWithinCohort`` is ``LowerPriority`` or
  ``Any``;

and always of strictly lower priority (``spec.priority``; none is 0, as Kueue's default), so a
victim can never preempt its preemptor back (no cascade). A victim must be admitted, not
finished, not being evicted, and held by the capacity model. Its ``work`` is the cost
resource it holds (``preemption_cost_resource``, GPUs by default; its pod count when it holds
none) times the seconds since it was admitted.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from enum import StrEnum

from kueue_tas.api import constants as c
from kueue_tas.api.kueue_objects import ClusterQueue
from kueue_tas.api.workload import Workload
from kueue_tas.capacity.feed import workload_key
from kueue_tas.capacity.live import LiveCapacity
from kueue_tas.capacity.preemption import Candidate

__all__ = ["Mode", "candidates", "mode_of", "priority_of"]

_WITHIN = frozenset({"LowerPriority", "LowerOrNewerEqualPriority"})
_RECLAIM = frozenset({"LowerPriority", "Any"})


class Mode(StrEnum):
    ENABLED = "Enabled"
    DRY_RUN = "DryRun"
    DISABLED = "Disabled"


def mode_of(queue: ClusterQueue | None, prefix: str) -> tuple[Mode, str | None]:
    """The ClusterQueue's switch, and a problem text for a value that is none of the three (then
    Disabled: an unreadable switch never evicts anything)."""
    if queue is None:
        return Mode.DISABLED, None
    key = f"{prefix}{c.SUFFIX_TOPOLOGY_PREEMPTION}"
    raw = queue.metadata.annotations.get(key)
    if raw is None:
        return Mode.DISABLED, None
    try:
        return Mode(raw), None
    except ValueError:
        return Mode.DISABLED, (
            f'ClusterQueue "{queue.name}": metadata.annotations[{key}]: Unsupported value: "{raw}": '
            'supported values: "Enabled", "DryRun", "Disabled"'
        )


def priority_of(wl: Workload) -> int:
    return wl.spec.priority if wl.spec.priority is not None else 0


def _may_take(preemptor_queue: ClusterQueue, victim_queue: ClusterQueue | None) -> bool:
    policy = preemptor_queue.spec.preemption
    if policy is None or victim_queue is None:
        return False
    if victim_queue.name == preemptor_queue.name:
        return policy.within_cluster_queue in _WITHIN
    cohort = preemptor_queue.cohort
    return bool(cohort) and victim_queue.cohort == cohort and policy.reclaim_within_cohort in _RECLAIM


def _held_amount(capacity: LiveCapacity, key: str, resource: str) -> int:
    amount = pods = 0
    for entry in capacity.entries(key):
        n = entry.assignment.total
        pods += n
        amount += n * int(entry.per_pod.get(resource, 0))
    return amount or pods


def candidates(
    preemptor: Workload,
    preemptor_queue: ClusterQueue,
    workloads: Iterable[Workload],
    queues: Mapping[str, ClusterQueue],
    capacity: LiveCapacity,
    *,
    now: datetime,
    cost_resource: str,
    exclude: Iterable[str] = (),
) -> list[Candidate]:
    """The admitted workloads ``preemptor`` may evict (see the module's note), with their cost;
    ``exclude``: keys that may not be victims (being evicted by an earlier preemption)."""
    floor = priority_of(preemptor)
    me = workload_key(preemptor)
    skip = set(exclude)
    out: list[Candidate] = []
    for wl in workloads:
        key = workload_key(wl)
        if key == me or key in skip or priority_of(wl) >= floor:
            continue
        if wl.status.admission is None or not wl.is_admitted or wl.is_finished or wl.is_evicted:
            continue
        if not capacity.holds(key) or not _may_take(preemptor_queue, queues.get(wl.status.admission.cluster_queue)):
            continue
        since = wl.admitted_at
        seconds = max(1.0, (now - since).total_seconds()) if since is not None else 1.0
        out.append(Candidate(key, priority_of(wl), _held_amount(capacity, key, cost_resource) * seconds))
    return out
