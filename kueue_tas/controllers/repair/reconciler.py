"""Node repair: keep an admitted workload's shape when nodes under it fail.

One pass (a single queue key) looks at every admitted workload whose assignment names nodes
(hostname level), finds the failed ones by the rule in ``kueue_tas.capacity.node_health``, and
repairs each affected workload in one decision covering all its failed nodes
(``repair.plan``: the engine's node replacement; only the pods of those nodes move, the rest
stays, the PodSet's required level and slice domains are honoured).

The added slots are held (``LiveCapacity.hold_extra``) from the decision on, under the lock
every admission decision holds, so no other decision can take them; the writes (annotation
with a resourceVersion precondition, then our Ready entry with the same ``podSetUpdates`` and
the new record, then an Event) and what each failure does are in ``repair.writes``. They run
per workload on a queue of their own (``writing``, key: the workload), so the pass decides
while earlier repairs write, and one workload's slow write holds up no other's.

The ungater then sends the gated pods the Job controller recreates to the new domains.

When nothing fits (or a PodSet is pinned to its one domain by nodeSelector), the policy
decides: ``Wait`` notes it once (entry message + Warning Event ``TopologyRepairPending``) and
tries again as nodes, pods and workloads change; ``Requeue`` does the same, then after
``node_failure_requeue_after_seconds`` sets our entry to Retry with the reason, so Kueue
evicts and requeues the workload.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Final

import structlog

from kueue_tas.api import constants as c
from kueue_tas.api.object_base import parse_rfc3339
from kueue_tas.api.workload import Workload
from kueue_tas.capacity.assignment_record import assignment_tampering
from kueue_tas.capacity.domain_usage import domains_apart
from kueue_tas.capacity.feed import workload_key
from kueue_tas.capacity.node_health import (
    NodeFailure,
    PodTermination,
    describe_failures,
    failed_nodes,
    podset_hosts,
)
from kueue_tas.capacity.rules import UsageEntry, assignment_trusted, workload_identity
from kueue_tas.capacity.workload_placement import Domain
from kueue_tas.controllers.check_entry_writes import check_entry, entry_with_message, merged_annotation
from kueue_tas.controllers.decide import Decision, Outcome, decide
from kueue_tas.controllers.decision_context import DecisionContext
from kueue_tas.controllers.health_note import note_of, with_note
from kueue_tas.controllers.informers import SlimNode
from kueue_tas.controllers.repair.plan import (
    added_assignment,
    moved_summary,
    our_entry,
    pinned,
    ready_entry,
    with_old_record,
)
from kueue_tas.controllers.repair.writes import CONFLICT_RETRY_SECONDS, RepairWrites, error_text
from kueue_tas.controllers.rewrites import OurRewrites
from kueue_tas.controllers.timings import WRITE_RETRY_MAX_SECONDS
from kueue_tas.controllers.workload_events import workload_event
from kueue_tas.kube.errors import Conflict, retry_after
from kueue_tas.kube.slim import SlimPod
from kueue_tas.runtime.workqueue import WorkQueue
from kueue_tas.topology.assignment import TopologyAssignment
from kueue_tas.topology.codec import decode_assignment_annotation

log = structlog.get_logger(__name__)

SCAN: Final = "scan"
# How long a workload change may wait for the scan it asks for (node changes do not wait).
WORKLOAD_SCAN_DELAY: Final = 1.0
# A pending repair is decided again at least this often, besides every relevant change.
PENDING_RETRY_SECONDS: Final = 30.0
# The owner's annotations (a workload-wide constraint) could not be read: tried again after.
OWNER_RETRY_SECONDS: Final = 5.0
# What a Wait note says it waits for: only what can end the wait.
WAIT_FOR_CAPACITY: Final = "waiting for capacity"
WAIT_FOR_NODE: Final = "waiting for the node to serve again"
WAIT_FOR_NODES: Final = "waiting for the failed nodes to serve again or for new nodes"


@dataclass
class _Episode:
    """A workload on failed nodes, from detection until it is repaired or the nodes recover."""

    detected: float
    failures: dict[str, NodeFailure]
    stuck_since: float | None = None
    noted: str | None = None  # the pending note written on the entry
    requeued: bool = False


class NodeRepair:
    def __init__(self, ctx: DecisionContext, *, rewrites: OurRewrites, wall: Callable[[], float] = time.time) -> None:
        """``ctx``: the admission's (its lock serialises the decisions of both); ``wall``: epoch
        seconds (to read how long a node has been NotReady from its Ready condition)."""
        self._ctx = ctx
        self._workloads = ctx.informers.workloads.store
        self._hosts = ctx.informers.hosts  # assignments name hosts by label: never look them up as Node names
        self._wall = wall
        self.queue: WorkQueue[str] = WorkQueue("node-repair")
        # Each decided repair's writes, by workload, on workers of their own: one workload's slow
        # write (an apiserver timing out on it) holds up no other's repair (DST seed 1003508: a
        # pass awaiting one workload's write for 60 s left another's stray pod running 63 s).
        self.writing: WorkQueue[str] = WorkQueue("node-repair-writes")
        self._not_ready_since: dict[str, float] = {}  # by Node name
        self._counted: set[str] = set()  # failed hosts already counted in failed_nodes_seen_total
        self._spared: set[str] = set()  # failed Nodes (by name) its workloads' progressing pods keep serving
        self._episodes: dict[str, _Episode] = {}
        self._writes = RepairWrites(ctx, rewrites)
        ctx.informers.nodes.add_handler(self._on_node, self._on_node_changed, self._on_node_deleted)
        ctx.informers.workloads.add_handler(self._on_workload, self._on_workload_changed, self._on_workload_deleted)
        ctx.informers.pods.add_handler(lambda _p: None, self._on_pod_changed, self._on_pod_deleted)

    # --- events -------------------------------------------------------------------------------

    def _on_node(self, node: SlimNode) -> None:
        if node.ready:
            self._not_ready_since.pop(node.name, None)
        elif node.name not in self._not_ready_since:
            self._not_ready_since[node.name] = self._since(node.ready_since)
        self.queue.add(SCAN)

    def _on_node_changed(self, old: SlimNode, new: SlimNode) -> None:
        if old != new:
            self._on_node(new)

    def _on_node_deleted(self, node: SlimNode) -> None:
        self._not_ready_since.pop(node.name, None)
        self.queue.add(SCAN)

    def _since(self, transition: str) -> float:
        """The monotonic time a node turned NotReady: its condition's lastTransitionTime when it
        parses (a restart keeps the grace already served), else now."""
        now = self._ctx.clock()
        try:
            at = parse_rfc3339(transition).timestamp()
        except ValueError:
            return now
        return now - min(max(self._wall() - at, 0.0), 86400.0)

    def _scan_soon(self) -> None:
        """A scan within ``WORKLOAD_SCAN_DELAY`` for a workload change: a burst of admissions (each
        one a change of a trusted workload) costs one pass over every workload per delay instead
        of one per admission (issue 15: 14 % of the controller's CPU). Node changes, which are
        what fails a placement, still scan at once."""
        self.queue.add_after(SCAN, WORKLOAD_SCAN_DELAY)

    def _on_workload(self, wl: Workload) -> None:
        if assignment_trusted(wl, self._ctx.checks.names()):
            self._scan_soon()

    def _on_workload_changed(self, old: Workload, new: Workload) -> None:
        key = workload_key(new)
        ours = self._ctx.checks.names()
        self._writes.observed(new)
        if key in self._writes:
            self.writing.add(key)  # its writes coming back move it on
        trusted = assignment_trusted(new, ours)
        if trusted != assignment_trusted(old, ours):
            self._capacity_freed() if not trusted else self._scan_soon()
        elif trusted and key in self._episodes:
            self.queue.add(SCAN)  # a repair in progress: its writes coming back move it on
        elif trusted and old.metadata.annotations.get(c.TOPOLOGY_ASSIGNMENT_ANNOTATION) != new.metadata.annotations.get(
            c.TOPOLOGY_ASSIGNMENT_ANNOTATION
        ):
            self._scan_soon()

    def _on_workload_deleted(self, wl: Workload) -> None:
        key = workload_key(wl)
        self._writes.drop(key)
        self._writes.forget_detected(key)
        self._episodes.pop(key, None)
        self._capacity_freed()

    def _on_pod_changed(self, old: SlimPod, new: SlimPod) -> None:
        if new.is_terminal and not old.is_terminal:
            self._capacity_freed()
        if _progressing(old) and not _progressing(new):
            self._pod_left(old.node_name)

    def _on_pod_deleted(self, pod: SlimPod) -> None:
        self._capacity_freed()
        if _progressing(pod):
            self._pod_left(pod.node_name)

    def _pod_left(self, node: str) -> None:
        """A pod stopped progressing on Node ``node``: if the node is failing, what held its workload
        there (Kueue's TASReplaceNodeOnPodTermination) may be gone."""
        if node in self._spared:
            self.queue.add(SCAN)

    def _progressing(self, wl: Workload) -> set[str]:
        """The Nodes (by name) a pod of ``wl`` runs or waits on, neither finished nor being deleted."""
        pods = self._ctx.informers.pod_store.of_workload(wl.namespace or "", workload_identity(wl))
        return {p.node_name for p in pods if _progressing(p)}

    def _capacity_freed(self) -> None:
        if any(ep.stuck_since is not None for ep in self._episodes.values()):
            self.queue.add(SCAN)

    def _not_ready_for(self, name: str) -> float | None:
        since = self._not_ready_since.get(name)
        return None if since is None else self._ctx.clock() - since

    # --- the pass -----------------------------------------------------------------------------

    async def reconcile(self, _key: str) -> float | None:
        now = self._ctx.clock()
        ours = self._ctx.checks.names()
        specs = self._ctx.capacity.flavors()
        grace = self._ctx.settings.node_failure_grace_seconds
        gates = self._ctx.gates
        rule = PodTermination(gates.replace_on_pod_termination, gates.replace_not_ready_fixed_time)
        wakes: list[float] = []
        spared: set[str] = set()
        affected: set[str] = set()
        failed_now: set[str] = set()
        for wl in self._workloads.values():
            key = workload_key(wl)
            if key in self._writes and not self._writes.writes_for(wl):
                self._writes.gone(key)  # a Workload re-created under the name: nothing of the old is its
            if key in self._writes:
                self.writing.add(key)
                continue
            if not assignment_trusted(wl, ours) or wl.is_evicted or assignment_tampering(wl, ours) is not None:
                continue
            entry = our_entry(wl, ours)
            if entry is None:
                continue
            try:
                current = dict(decode_assignment_annotation(wl.metadata.annotations[c.TOPOLOGY_ASSIGNMENT_ANNOTATION]))
            except ValueError:
                continue  # holds nothing; the assignment guard deals with it
            failures, wait = failed_nodes(
                podset_hosts(wl, current, specs),
                self._hosts,
                self._not_ready_for,
                grace,
                progressing=self._progressing(wl),
                gates=rule,
                spared=spared,
            )
            if wait is not None:
                wakes.append(wait)
            if not failures:
                self._writes.forget_detected(key)  # a dropped repair's clock ends with its failures
                retry = await self._recovered(wl, key)
                if retry is not None:
                    wakes.append(retry)
                    affected.add(key)  # its note is said again on the next pass
                continue
            affected.add(key)
            failed_now.update(failures)
            episode = self._episodes.get(key)
            if episode is None:
                # A repair whose writes were dropped is the same episode: its latency runs on.
                before = self._writes.detected_before(key)
                episode = self._episodes[key] = _Episode(now if before is None else before, failures)
            episode.failures = failures
            if wait is not None or episode.requeued:
                continue  # another node of it is still in its grace: one decision for all of them
            delay = await self._repair(wl, key, current, failures, episode)
            if delay is not None:
                wakes.append(delay)
        self._spared = spared
        for key in set(self._episodes) - affected:
            del self._episodes[key]
        self._ctx.metrics.failed_nodes_seen_total.inc(len(failed_now - self._counted))
        # A node stays counted until it serves again (its workloads may be repaired away meanwhile).
        self._counted = failed_now | {h for h in self._counted if not self._hosts.serves(h)}
        self._ctx.metrics.node_repairs_pending.set(sum(ep.stuck_since is not None for ep in self._episodes.values()))
        return min(wakes) if wakes else None

    async def _repair(
        self,
        wl: Workload,
        key: str,
        current: dict[str, TopologyAssignment],
        failures: dict[str, NodeFailure],
        ep: _Episode,
    ) -> float | None:
        entry = our_entry(wl, self._ctx.checks.names())
        assert entry is not None
        stuck = pinned(entry, current, failures)
        if stuck:
            return await self._stuck(
                wl,
                key,
                ep,
                f'PodSet "{stuck[0]}" runs in one domain, pinned there by the nodeSelector of the check\'s '
                "podSetUpdates, which Kueue keeps unchanged while the workload is admitted",
                WAIT_FOR_NODE,
            )
        try:
            wide = await self._ctx.workload_annotations.of(wl)
        except Exception as exc:
            log.warning("owner_read_failed", workload=key, error=str(exc))
            return OWNER_RETRY_SECONDS
        async with self._ctx.lock:
            live = self._workloads.get(key)
            if live is None or live.metadata.uid != wl.metadata.uid:
                # Deleted (or re-created under the name) while the pass waited: the copy it
                # started from is all that is left of it; nothing is decided or held for it.
                return None
            with self._ctx.capacity.without(key):
                decision = decide(
                    wl,
                    self._ctx.flavors_of(entry.name),
                    self._ctx.capacity,
                    self._ctx.settings.annotation_prefix,
                    self._ctx.gates,
                    current=current,
                    unhealthy_nodes=tuple(sorted(failures)),
                    workload_annotations=wide,
                    closed=self._kept_for_others(key, current),
                )
            moved = [p for p in decision.placements if current.get(p.name) != p.assignment]
            # Rejected means no domain could hold it even empty: more capacity in use elsewhere
            # will not help, only the failed nodes coming back or new ones.
            waiting_for = WAIT_FOR_NODES if decision.outcome is Outcome.REJECTED else WAIT_FOR_CAPACITY
            if decision.outcome is not Outcome.READY or not moved:
                reason = decision.message if decision.outcome is not Outcome.READY else "nothing could be moved"
                if not self._ctx.gates.failed_node_replacement:
                    reason, waiting_for = "the TASFailedNodeReplacement feature gate is off", WAIT_FOR_NODE
            else:
                extra = tuple(
                    UsageEntry(p.flavor, added_assignment(current[p.name], p.assignment), p.per_pod)
                    for p in moved
                    if p.name in current
                )
                self._ctx.capacity.hold_extra(key, extra)
                reason = ""
        if reason:
            return await self._stuck(wl, key, ep, reason, waiting_for)
        spec = self._ctx.capacity.flavors().get(moved[0].flavor)
        parent = spec.levels[-2] if spec is not None and len(spec.levels) > 1 else None
        # The domain the new hosts share, from the labels of the Node each hostname names.
        named = {d.values[-1] for p in decision.placements for d in p.assignment.domains}
        labels = {h: node.labels for h in named if (node := self._hosts.node(h)) is not None}
        summary = moved_summary(failures, current, decision.placements, labels, parent)
        text = merged_annotation(wl, decision)
        announce = ready_entry(entry, wl, summary, decision.placements, announce=True)
        final = ready_entry(entry, wl, summary, decision.placements)
        self._writes.start(wl, text, announce, final, summary, ep.detected)
        log.info("node_repair_decided", workload=key, summary=summary)
        self._episodes.pop(key, None)  # decided: what is left is writing it
        self.writing.add(key)
        return None

    async def advance_writes(self, key: str) -> float | None:
        """One workload's repair writes, as far as they go now; the seconds until they are looked
        at again. A repair that ended or was dropped hands the workload back to the pass."""
        wl = self._workloads.get(key)
        if wl is None or key not in self._writes:
            return None
        if not self._writes.writes_for(wl):
            self._writes.gone(key)  # a Workload re-created under the name: nothing of the old is its
            self.queue.add(SCAN)
            return None
        delay = await self._writes.advance(wl, key)
        if key not in self._writes:
            self.queue.add_after(SCAN, delay or 0.0)  # decided again (or done) by the pass
        return delay

    def _kept_for_others(self, key: str, current: Mapping[str, TopologyAssignment]) -> list[Domain]:
        """I14: the domains a preemption holds or a reservation keeps for another workload, closed
        to this repair where the workload does not run already."""
        now = self._ctx.wall().timestamp()
        kept = [
            *self._ctx.holds.closed_for(key, now),
            *(r.domain for r in self._ctx.reservations.all() if r.holder != key),
        ]
        return domains_apart(self._ctx.capacity, kept, current) if kept else []

    async def _stuck(
        self, wl: Workload, key: str, ep: _Episode, reason: str, waiting_for: str = WAIT_FOR_CAPACITY
    ) -> float | None:
        """No repair fits now: note it once, and apply the policy."""
        now = self._ctx.clock()
        if ep.stuck_since is None:
            ep.stuck_since = now
        why = f"{describe_failures(ep.failures.values())}: no replacement fits: {reason}"
        after = self._ctx.settings.node_failure_requeue_after_seconds
        entry = our_entry(wl, self._ctx.checks.names())
        if entry is None:
            return None
        if self._ctx.settings.node_failure_policy == "Requeue":
            left = ep.stuck_since + after - now
            if left <= 0:
                message = f"{why}; requeued after {after:g}s without a replacement (nodeFailurePolicy Requeue)"
                requeue = int(self._ctx.settings.retry_backoff_base_seconds)
                try:
                    await self._ctx.writer.write_check(
                        wl, check_entry(entry.name, Decision(Outcome.RETRY, message), wl, requeue)
                    )
                except Conflict:
                    return CONFLICT_RETRY_SECONDS  # changed since the pass copied it: judged again
                except Exception as exc:
                    log.warning("node_repair_requeue_failed", workload=key, error=error_text(exc))
                    return retry_after(exc, 5.0, WRITE_RETRY_MAX_SECONDS)
                ep.requeued = True
                self._ctx.metrics.node_repairs_total.labels("impossible").inc()
                await workload_event(self._ctx.events, wl, "Warning", "TopologyRepairImpossible", message)
                return None
            note = f"{why}; requeued in {left:g}s unless a replacement fits (nodeFailurePolicy Requeue)"
            wait = min(left, PENDING_RETRY_SECONDS)
        else:
            note = f"{why}; {waiting_for} (nodeFailurePolicy Wait)"
            wait = PENDING_RETRY_SECONDS
        if ep.noted is None:
            retry = await self._note(wl, entry.name, note)
            if retry is not None:
                return min(retry, wait)  # not noted: said on a later pass, from a newer copy
            ep.noted = note
            await workload_event(self._ctx.events, wl, "Warning", "TopologyRepairPending", note)
        return wait

    async def _recovered(self, wl: Workload, key: str) -> float | None:
        """Its nodes serve again: a pending note on the entry says so; when the Workload changed
        under that note, the seconds until it is decided again (the episode is kept until then)."""
        ep = self._episodes.pop(key, None)
        if ep is None or ep.noted is None:
            return None
        entry = our_entry(wl, self._ctx.checks.names())
        if entry is None:
            return None
        retry = await self._note(wl, entry.name, f"{', '.join(sorted(ep.failures))}: serving again; nothing moved")
        if retry is not None:
            self._episodes[key] = ep
        return retry

    async def _note(self, wl: Workload, check: str, message: str) -> float | None:
        """Our Ready entry with ``message`` and the record it holds (moves no pod), only onto
        ``wl`` as the pass copied it (a Workload changed since, e.g. evicted, refuses it); the
        seconds until it is decided again when refused so, else None."""
        entry = our_entry(wl, {check})
        if entry is None:
            return None
        note = note_of(entry.message)  # the topology-health note stays in front (see ready_entry)
        body = entry_with_message(entry, with_note(with_old_record(entry, message), [note] if note else []))
        try:
            await self._ctx.writer.write_check(wl, body)
        except Conflict:
            return CONFLICT_RETRY_SECONDS  # the note is decided again from the newer copy
        except Exception as exc:
            # A note moves nothing: the Event carries it (and the next one replaces it).
            log.warning("node_repair_note_failed", workload=workload_key(wl), error=error_text(exc))
        return None

    async def run(self, writers: int = 4) -> None:
        self.queue.add(SCAN)
        log.info("node_repair_started", grace_seconds=self._ctx.settings.node_failure_grace_seconds)
        await asyncio.gather(self.queue.run(1, self.reconcile), self.writing.run(writers, self.advance_writes))


def _progressing(pod: SlimPod) -> bool:
    return bool(pod.node_name) and not pod.terminating and not pod.is_terminal
