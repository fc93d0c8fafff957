"""Topology-driven preemption in the admission: when a workload holding quota does not fit
now, and its ClusterQueue opted in, find the cheapest lower-priority victims that clear a
domain for it (``capacity.preemption``) and have Kueue evict them.

The step is decided under the admission lock, against the same capacity model as every
decision: the hold on the cleared domain is registered there and then, so no decision made
after it (a victim's own, once requeued) can be placed into that domain. The writes follow
outside the lock (``writes``): the hold recorded on the preemptor, then each victim's check
entry turned Retry with a message naming the preemptor and the domain (Kueue evicts and
requeues it), each guarded by the version it was decided on.

DryRun decides the same and only reports it: the preemptor's message and a Normal Event say
what would be evicted, the metric counts it, nothing is held or evicted.

Never: more than ``preemption_max_victims`` victims or ``preemption_per_minute`` preemptions;
a second preemption for a workload whose hold is in force; a victim already told to go.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime

import structlog

from kueue_tas.api.kueue_objects import ClusterQueue
from kueue_tas.api.workload import Workload
from kueue_tas.capacity.domain_records import Hold, hold_from
from kueue_tas.capacity.feed import workload_key
from kueue_tas.capacity.preemption import Preemption, find_preemption
from kueue_tas.capacity.preemption_policy import Mode, candidates, mode_of, priority_of
from kueue_tas.capacity.workload_placement import Domain, WorkloadRequests
from kueue_tas.controllers.decision_context import DecisionContext

__all__ = ["PreemptionStep", "Preemptor"]

log = structlog.get_logger(__name__)


@dataclass(frozen=True, slots=True)
class PreemptionStep:
    """A preemption decided for ``preemptor``: ``victims`` (their Workloads as decided on) to
    evict from ``hold.domain`` (``dry_run``: only reported)."""

    preemptor: Workload
    found: Preemption
    victims: tuple[Workload, ...]
    hold: Hold
    dry_run: bool

    def preemptor_note(self) -> str:
        """What the preemptor's Retry message adds."""
        names = ", ".join(f"{v.namespace}/{v.name}" for v in self.victims)
        n = len(self.victims)
        where = self.hold.domain.named()
        if self.dry_run:
            return f"; topology preemption (DryRun) would evict {n} workload(s) of lower priority from {where}: {names}"
        until = datetime.fromtimestamp(self.hold.until, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        return (
            f"; preempting {n} workload(s) of lower priority to clear {where}: {names}; "
            f"the domain is held for this workload until {until}"
        )

    def victim_message(self) -> str:
        p = self.preemptor
        return (
            f'preempted by kueue-tas for workload "{p.namespace}/{p.name}" (priority {priority_of(p)}), '
            f"which needs {self.hold.domain.named()}: evicted to clear that domain"
        )


class Preemptor:
    """Topology-driven preemption for the admission (see the module's note); its holds live on
    the decision context, shared by every decision."""

    def __init__(self, ctx: DecisionContext) -> None:
        self._ctx = ctx

    def now(self) -> float:
        return self._ctx.wall().timestamp()

    def closed_for(self, key: str) -> list[Domain]:
        """Domains held for other preemptors: closed to ``key``'s placement."""
        holds = self._ctx.holds
        holds.expire(self.now())
        return holds.closed_for(key, self.now())

    def observe(self, wl: Workload) -> None:
        """A Workload as the informer shows it: a hold recorded on it is in force (after a
        restart or a requeue) until it is placed, finishes, is deleted or runs out of time."""
        key = workload_key(wl)
        if wl.is_finished or self._placed(wl):
            if self._ctx.holds.release(key) is not None:
                log.info("preemption_hold_released", workload=key)
            return
        # A copy without the record does not end a hold: it may predate our write of it.
        recorded = hold_from(wl)
        now = self.now()
        if recorded is None or recorded.until <= now or self._ctx.holds.held_for(key, now) is not None:
            return
        # Only what this controller could have written (the admission policy kueue-tas-records
        # keeps everyone else from writing it; this is the second line): a hold no longer than
        # the setting allows, for a workload whose ClusterQueue has the switch Enabled.
        if wl.status.admission is not None:
            queues = [self._queue(wl.status.admission.cluster_queue)]
        else:
            # Kueue requeued it after our Retry and holds no quota for it yet, so its copy names
            # no ClusterQueue: any that opted in could have been its.
            queues = list(self._ctx.informers.queues.store.values())
        enabled = any(mode_of(q, self._ctx.settings.annotation_prefix)[0] is Mode.ENABLED for q in queues)
        if not enabled or recorded.until - now > self._ctx.settings.preemption_hold_seconds + 60:
            log.warning("preemption_hold_ignored", workload=key, why="not one this controller would hold")
            return
        self._ctx.holds.add(recorded)

    def _queue(self, name: str) -> ClusterQueue | None:
        return next((q for q in self._ctx.informers.queues.store.values() if q.name == name), None)

    def forget(self, key: str) -> None:
        if self._ctx.holds.release(key) is not None:
            log.info("preemption_hold_released", workload=key, why="deleted")

    def _placed(self, wl: Workload) -> bool:
        ours = self._ctx.checks.names()
        return wl.is_admitted and any(st.name in ours and st.state == "Ready" for st in wl.status.admission_checks)

    def consider(self, wl: Workload, requests: WorkloadRequests, waited_s: float) -> PreemptionStep | None:
        """Under the admission lock: the preemption for ``wl`` (which does not fit now and has
        waited ``waited_s`` for a domain), if its ClusterQueue opted in, it has waited
        ``preemption_after_seconds``, and one exists; an Enabled one's hold is in force on return."""
        if wl.status.admission is None:
            return None
        queues: Mapping[str, ClusterQueue] = {q.name: q for q in self._ctx.informers.queues.store.values()}
        queue = queues.get(wl.status.admission.cluster_queue)
        settings = self._ctx.settings
        mode, problem = mode_of(queue, settings.annotation_prefix)
        if problem is not None:
            log.warning("topology_preemption_switch_unreadable", problem=problem)
        if mode is Mode.DISABLED or queue is None or waited_s < settings.preemption_after_seconds:
            return None
        key = workload_key(wl)
        now = self.now()
        holds = self._ctx.holds
        if holds.held_for(key, now) is not None:
            return None  # its victims are on their way out
        pool = candidates(
            wl,
            queue,
            self._ctx.informers.workloads.store.values(),
            queues,
            self._ctx.capacity,
            now=self._ctx.wall(),
            cost_resource=settings.preemption_cost_resource,
            exclude=holds.in_flight(now),
        )
        if not pool:
            return None
        found = find_preemption(
            requests,
            self._ctx.capacity,
            pool,
            max_victims=settings.preemption_max_victims,
            gates=self._ctx.gates,
            closed=holds.closed_for(key, now),
        )
        if found is None:
            return None
        store = self._ctx.informers.workloads.store
        victims = tuple(v for v in (store.get(c.key) for c in found.victims) if v is not None)
        if len(victims) != len(found.victims):
            return None  # one is gone already; decided again on the next pass
        dry_run = mode is Mode.DRY_RUN
        if not dry_run and not holds.allow(now, settings.preemption_per_minute):
            log.info("topology_preemption_rate_limited", workload=key)
            return None
        hold = Hold(key, found.domain, now + settings.preemption_hold_seconds, tuple(c.key for c in found.victims))
        if not dry_run:
            holds.add(hold)
        self._ctx.metrics.record_preemption("dry_run" if dry_run else "enabled", len(victims))
        log.info(
            "topology_preemption",
            workload=key,
            dry_run=dry_run,
            domain=list(found.domain.values),
            victims=[c.key for c in found.victims],
            cost=list(found.cost),
            exact=found.exact,
        )
        return PreemptionStep(wl, found, victims, hold, dry_run)
