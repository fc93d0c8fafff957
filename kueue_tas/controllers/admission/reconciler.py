"""Workload admission: decide each Workload whose entry for one of our checks is Pending, and
write the decision (gates, assignment annotation, check entry, Event).

Decisions are serialised (one lock) but their writes are not: a decision is made under the lock
against the capacity left by every earlier one, including those still being written
("assumed"); a Ready decision's capacity is assumed before the lock is released, and its writes
then run outside it, ``admission_workers`` workloads at once. A write that conflicts or fails
drops the assumption and the workload is decided again from fresh state; a decision made
meanwhile saw less capacity than there was, never more, so capacity is never given twice.

A failed write (any error) counts ``admissions_total{outcome="error"}``, leaves a Warning Event
and is retried with backoff (a 429's Retry-After, capped). Its assumption is dropped unless
the failed write was our Ready entry and it may have landed (no response, timeout, 5xx): then
the capacity stays held and, once the apiserver can no longer be applying it, the Workload is
re-read before it is decided again. A write that succeeded but never comes back through the
informer is re-read the same way.

No Ready entry of ours on a Workload state we did not decide: the entry write is guarded by
the resourceVersion the decision saw (after our own annotation write), so an eviction that
lands in between refuses it (``Conflict``: the workload is decided afresh). A Ready entry
found on a Workload Kueue holds no quota for (an unguarded writer's: an older replica, a
write that outlived its leader) is reset to Pending, never kept as "landed".

A new elastic slice (``kueue_tas.topology.admitted.slice_replacement``, the rule ``plan`` follows) is
decided from the assignments of the slice it replaces, with that slice's usage hidden for
the decision only; once decided it is held together with that slice (``LiveCapacity``
charges the pair's union) until Kueue finishes the old one.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Callable, Mapping
from typing import Any, Final, Literal

import structlog

from kueue_tas.api import constants as c
from kueue_tas.api.workload import Workload
from kueue_tas.capacity.domain_records import hold_text
from kueue_tas.capacity.feed import workload_key
from kueue_tas.capacity.rules import annotated_usage, assignment_trusted, workload_identity
from kueue_tas.controllers.check_entry_writes import (
    EntryWriteUnknown,
    check_entry,
    merged_annotation,
    rfc3339,
    wait_started,
)
from kueue_tas.controllers.check_flavors import unusable_flavors
from kueue_tas.controllers.decide import Decision, Outcome, decide
from kueue_tas.controllers.decision_context import DecisionContext
from kueue_tas.controllers.informers import on_any_change
from kueue_tas.controllers.preemption import PreemptionStep, Preemptor, carry_out
from kueue_tas.controllers.reservation import Reserver, stamp, waiting_since
from kueue_tas.controllers.timings import UNKNOWN_WRITE_SETTLE_SECONDS, WRITE_RETRY_MAX_SECONDS
from kueue_tas.controllers.workload_events import workload_event
from kueue_tas.kube.errors import ApiError, Conflict, ServerError, may_have_applied, retry_after
from kueue_tas.runtime.workqueue import WorkQueue
from kueue_tas.topology.admitted import SliceRef, kept_slices_value, replaced_slice, slice_current
from kueue_tas.topology.assignment import TopologyAssignment
from kueue_tas.topology.codec import AssignmentFormatError

log = structlog.get_logger(__name__)

# After this long without seeing our entry write come back (e.g. missed across a relist), a
# still-Pending workload is decided again.
WRITE_OBSERVE_TIMEOUT_SECONDS: Final = 30.0
# A 5xx other than 504 is the apiserver's own answer: its handler has finished with the request
# (committed or not), so a quorum read a moment later settles it. A 504 is different: the
# apiserver's timeout filter answers while the handler may still commit. Without this, a write
# refused by a failing webhook left the workload silent for the whole settle time (chaos seed 7).
ANSWERED_WRITE_SETTLE_SECONDS: Final = 1.0
# A write refused because the Workload changed: decided again from the informer's newer copy.
CONFLICT_RETRY_SECONDS: Final = 0.5
# A preemptor whose victims are on their way out asks Kueue to requeue it this soon: its
# domain is held for it, so it should be back before the hold runs out.
PREEMPTOR_REQUEUE_SECONDS: Final = 5.0
# A workload with a reservation asks Kueue to requeue it at least this often (its backoff would
# otherwise grow to minutes while its domain frees).
RESERVED_REQUEUE_SECONDS: Final = 10.0

# Kubernetes' ValidateAnnotationsSize: the bytes of every annotation's key and value, together.
ANNOTATIONS_SIZE_LIMIT: Final = 256 * 1024
ASSIGNMENT_FIELD: Final = f"metadata.annotations[{c.TOPOLOGY_ASSIGNMENT_ANNOTATION}]"

_OUTCOME_METRIC: Final[dict[Outcome, Literal["ready", "retry", "rejected"]]] = {
    Outcome.READY: "ready",
    Outcome.RETRY: "retry",
    Outcome.REJECTED: "rejected",
}
_OUTCOME_REASON: Final = {
    Outcome.PENDING: "TopologyUnavailable",
    Outcome.READY: "TopologyAssigned",
    Outcome.RETRY: "TopologyNotFitting",
    Outcome.REJECTED: "TopologyRequestRejected",
}
STALE_READY_REASON: Final = "TopologyAdmissionReset"
STALE_READY_MESSAGE: Final = (
    "Reset to Pending by kueue-tas: the entry was Ready on a workload Kueue holds no quota for, a "
    "state no decision of kueue-tas was made on; its next admission is decided afresh"
)


class WorkloadAdmission:
    def __init__(self, ctx: DecisionContext, *, decided: Callable[[], None] = lambda: None) -> None:
        """``decided()`` is called after every decision (the capacity gauges' cue)."""
        self._ctx = ctx
        self._workloads = ctx.informers.workloads.store
        self._decided = decided
        self.queue: WorkQueue[str] = WorkQueue("workloads")
        self._retries: dict[str, int] = {}
        self._awaiting_write: dict[str, float] = {}  # workload -> deadline to observe our entry write
        self._write_failures: dict[str, int] = {}  # workload -> failed writes in a row (backoff)
        self._preemptor = Preemptor(ctx)
        self._reserver = Reserver(ctx)
        ctx.informers.workloads.add_handler(self._on_workload, lambda _o, w: self._on_workload(w), self._on_deleted)
        for config in ctx.informers.configuration():
            on_any_change(config, self.enqueue_all, spec_only=True)

    # --- events -------------------------------------------------------------------------------

    def enqueue_all(self) -> None:
        for wl in self._workloads.values():
            self._on_workload(wl)

    def _on_workload(self, wl: Workload) -> None:
        key = workload_key(wl)
        self._preemptor.observe(wl)
        self._reserver.observe(wl)
        # A copy no newer than the one our held decision was made on (a lagging watch) shows
        # nothing that decision does not supersede: not our write come back, no news to act on
        # (only a wait for our write, under way, still ends with a re-read).
        behind = self._ctx.capacity.behind(key, wl.metadata.resource_version)
        if behind and key not in self._awaiting_write:
            return
        if key in self._awaiting_write and not behind and self._entry_written(wl):
            del self._awaiting_write[key]
        if self._pending_check(wl) is not None:
            self.queue.add(key)
        elif not_admitting(wl) and (
            key in self._awaiting_write or self._ctx.capacity.assumes(key) or self._stale_ready(wl) is not None
        ):
            self.queue.add(key)  # evicted (or its quota withdrawn) mid-decision: let go of what it holds

    def _on_deleted(self, wl: Workload) -> None:
        key = workload_key(wl)
        if self._ctx.capacity.decided_for_other(key, wl.metadata.uid):
            return  # an earlier Workload of the name; our decision and its writes are the later one's
        self._ctx.workload_annotations.forget(wl)
        self._preemptor.forget(key)
        self._reserver.forget(key)
        self._retries.pop(key, None)
        self._awaiting_write.pop(key, None)
        self._write_failures.pop(key, None)

    def _entry_written(self, wl: Workload) -> bool:
        """Our entry is no longer Pending: the informer has caught up with our last write."""
        ours = self._ctx.checks.names()
        return any(st.name in ours and st.state != c.CHECK_STATE_PENDING for st in wl.status.admission_checks)

    def _stale_ready(self, wl: Workload) -> str | None:
        """Our check whose Ready entry no decision of ours stands behind: Kueue holds no quota
        for ``wl`` (it resets our entry to Pending when it withdraws the quota of an eviction),
        and it has not finished. Such an entry was written after, onto a state its writer never
        saw; kept, Kueue would admit the workload on that assignment as soon as it reserves quota
        again. An eviction Kueue is still carrying out (``Evicted``, the quota still reserved
        while the job stops) is not one: our entry there is the one we decided, and Kueue resets
        it itself when it withdraws the quota."""
        if wl.is_finished or (wl.has_quota_reservation and wl.status.admission is not None):
            return None
        ours = self._ctx.checks.names()
        return next(
            (st.name for st in wl.status.admission_checks if st.name in ours and st.state == c.CHECK_STATE_READY),
            None,
        )

    def _pending_check(self, wl: Workload) -> str | None:
        if not wl.has_quota_reservation or wl.status.admission is None or wl.is_finished or wl.is_evicted:
            return None
        ours = self._ctx.checks.names()
        for st in wl.status.admission_checks:
            if st.name in ours and st.state == c.CHECK_STATE_PENDING:
                return st.name
        return None

    # --- reconcile ----------------------------------------------------------------------------

    async def reconcile(self, key: str) -> float | None:
        wl = self._workloads.get(key)
        if wl is None:
            return None
        if key not in self._awaiting_write and self._ctx.capacity.behind(key, wl.metadata.resource_version):
            return None  # older than the copy our held decision was made on; a newer one queues it
        check = self._pending_check(wl)
        if check is None:
            return await self._let_go(wl) if not_admitting(wl) else None
        # Our last write has not come back through the informer yet: the Pending we see is
        # stale, and deciding again would count this workload's own assumption against it.
        wait = self._awaiting_write.get(key, 0.0) - self._ctx.clock()
        if wait > 0:
            return wait
        if key in self._awaiting_write:
            # Still not seen: ask the apiserver before giving the capacity to anyone else.
            try:
                fresh = await self._ctx.writer.read_workload(wl)
            except Exception as exc:
                log.warning("workload_reread_failed", workload=key, error=str(exc))
                return self._backoff(key, exc)
            if fresh is None:  # deleted; the informer will say so too
                self._on_deleted(wl)
                self._ctx.capacity.forget(key)
                return None
            if self._pending_check(fresh) is None:
                log.info("entry_write_confirmed", workload=key)
                self._awaiting_write[key] = self._ctx.clock() + WRITE_OBSERVE_TIMEOUT_SECONDS
                return WRITE_OBSERVE_TIMEOUT_SECONDS
            wl = fresh
        self._awaiting_write.pop(key, None)
        try:
            wide = await self._ctx.workload_annotations.of(wl)
        except Exception as exc:
            return await self._owner_unread(wl, exc)
        async with self._ctx.lock:
            decision, text, kept, step = self._decide(wl, check, wide)
        if decision.outcome is Outcome.PENDING and _entry_says(wl, check_entry(check, decision, wl)):
            return None  # already written; a configuration change decides it again
        # Outside the lock: the capacity a Ready decision takes is assumed already, so the
        # next decision can be made while these writes are on their way.
        try:
            await self._commit(wl, check, decision, text, kept, step)
        except Conflict:
            # The Workload changed after the state we decided on (e.g. Kueue evicted it): nothing
            # of ours landed on the newer state; decided afresh from the informer's copy.
            self._ctx.capacity.forget(key)
            log.info("workload_changed_while_deciding", workload=key)
            return CONFLICT_RETRY_SECONDS
        except EntryWriteUnknown as unknown:
            # Our Ready entry may be on the Workload: keep holding its capacity.
            cause = unknown.__cause__ or unknown
            settle = settle_seconds(cause)
            self._awaiting_write[key] = self._ctx.clock() + settle
            await self._write_failed(wl, cause, held=True)
            return settle
        except Exception as exc:
            self._ctx.capacity.forget(key)
            await self._write_failed(wl, exc, held=False)
            return self._backoff(key, exc)
        self._write_failures.pop(key, None)
        return None

    def fence_earlier_decisions(self) -> None:
        """Before the first decision: a decision of an earlier leader (or of this process before
        a restart) may still be in flight. Its Ready entry write, guarded by the version its own
        annotation write left, can land until the apiserver's request timeout has passed since
        that leader stopped, whatever this one decides meanwhile. So each Workload holding
        quota with our entry Pending under an assignment annotation holds that assignment while
        it stays at the version listed (any newer version refuses that write), at most until
        ``release_fences`` (issue 27, simulator handover seed 1131: another workload was given
        the same host)."""
        flavors = self._ctx.capacity.flavors()
        for wl in self._workloads.values():
            if self._pending_check(wl) is None:
                continue
            usage = annotated_usage(wl, flavors)
            if usage:
                self._ctx.capacity.fence(workload_key(wl), usage, wl.metadata.resource_version)

    def release_fences(self) -> None:
        """An earlier leader's writes can no longer land: its annotated decisions hold nothing."""
        for key in self._ctx.capacity.fenced():
            self._ctx.capacity.unfence(key)
        self._decided()

    def _decide(
        self, wl: Workload, check: str, wide: Mapping[str, str]
    ) -> tuple[Decision, str | None, str | None, PreemptionStep | None]:
        """The decision (with its annotation text and, for a new elastic slice, the record of the
        slices whose pods it keeps), and for Ready its capacity assumed; for a Retry that a
        preemption can end, that preemption (its hold in force). Called under the lock, without
        awaiting, so no other decision sees the capacity in between."""
        key = workload_key(wl)
        # Pending means we hold nothing for it (an earlier assumption is stale).
        self._ctx.capacity.forget(key)
        replaced, current, kept = self._replaced_slice(wl)
        started = time.perf_counter()
        governed = self._ctx.flavors_of(check)
        # An earlier leader's decision for this workload, maybe still landing, is not in its own
        # way; it stays held against every other decision until its version is gone.
        fence_at = self._ctx.capacity.fenced().get(key, "")
        fenced = self._ctx.capacity.unfence(key)
        with self._ctx.capacity.without(replaced):
            decision = decide(
                wl,
                governed,
                self._ctx.capacity,
                self._ctx.settings.annotation_prefix,
                self._ctx.gates,
                current=current,
                unusable=self._unusable(check, governed),
                workload_annotations=wide,
                now=None if current is not None else self._ctx.wall(),
                wait_started=wait_started(wl),
                # I14: what a preemption holds or a reservation keeps for another is closed here.
                closed=self._preemptor.closed_for(key),
                reservations=self._reserver.view(wl, governed) if current is None else None,
            )
        step = None
        if decision.outcome is Outcome.RETRY and decision.requests is not None and current is None:
            now = self._ctx.wall().timestamp()
            since = waiting_since(wl)
            if since is None:
                since = now
                if self._reserver.enabled or self._ctx.settings.preemption_after_seconds > 0:
                    decision.marks[c.WAITING_SINCE_ANNOTATION] = stamp(now)  # the wait counts from here
            step = self._preemptor.consider(wl, decision.requests, now - since)
            if step is not None:
                decision.message += step.preemptor_note()
                if not step.dry_run:
                    decision.retry_after = PREEMPTOR_REQUEUE_SECONDS
            if step is None or step.dry_run:
                decision.marks.update(self._reserver.consider(wl, decision.requests, since))
                held = self._ctx.reservations.of(workload_key(wl))
                if held is not None:
                    # Said on every Retry while it holds: each one replaces the entry's message.
                    decision.message += f"; {held.domain.named()} is reserved for this workload"
                    # Its domain may free at any moment: tried again soon, not after a long backoff.
                    decision.retry_after = min(
                        decision.retry_after or RESERVED_REQUEUE_SECONDS, RESERVED_REQUEUE_SECONDS
                    )
        if fenced:
            self._ctx.capacity.fence(key, fenced, fence_at)
        decision, text = with_annotation(wl, decision)
        if decision.outcome is Outcome.READY:
            self._ctx.capacity.assume(
                key,
                decision.usage(),
                replaces=replaced,
                decided_on=wl.metadata.resource_version,
                uid=wl.metadata.uid,
            )
        self._ctx.metrics.decision_seconds.observe(time.perf_counter() - started)
        self._decided()
        return decision, text, kept if text is not None else None, step

    async def _owner_unread(self, wl: Workload, exc: Exception) -> float:
        """The owner's annotations could not be read: nothing is decided without them (a
        workload-wide constraint would be missed); a Warning says why, and it is tried again."""
        key = workload_key(wl)
        owner = wl.metadata.controller_owner()
        what = f"{owner.kind} {owner.name}" if owner is not None else "the owner"
        error = str(exc) if isinstance(exc, ApiError) else f"{type(exc).__name__}: {exc}".rstrip(": ")
        log.warning("owner_read_failed", workload=key, owner=what, error=error)
        message = f"reading {what} for its workload-wide topology annotations failed: {error}"
        await workload_event(self._ctx.events, wl, "Warning", "TopologyAssignmentFailed", message)
        return self._backoff(key, exc)

    async def _let_go(self, wl: Workload) -> float | None:
        """A workload Kueue no longer admits (evicted, quota withdrawn, finished) keeps nothing
        of a decision of ours that never showed as Ready: its next admission is decided afresh.
        While our entry write may still land (no answer yet, or not seen come back) its
        capacity stays held; then the Workload is re-read, as for any unseen write. A Ready
        entry on it that no decision of ours stands behind is reset (``_stale_ready``)."""
        key = workload_key(wl)
        if key in self._awaiting_write:
            wait = self._awaiting_write[key] - self._ctx.clock()
            if wait > 0:
                return wait
            try:
                fresh = await self._ctx.writer.read_workload(wl)
            except Exception as exc:
                log.warning("workload_reread_failed", workload=key, error=str(exc))
                return self._backoff(key, exc)
            del self._awaiting_write[key]
            if fresh is not None:
                if self._entry_written(fresh) and self._stale_ready(fresh) is None:
                    # It landed after all: the informer will show it and its capacity is then trusted.
                    log.info("entry_write_confirmed", workload=key)
                    return None
                wl = fresh
        self._write_failures.pop(key, None)
        if self._ctx.capacity.assumes(key):
            self._ctx.capacity.forget(key)
            self._decided()
            log.info("assumed_capacity_released", workload=key, why="the workload is no longer being admitted")
        return await self._reset_stale_ready(wl)

    async def _reset_stale_ready(self, wl: Workload) -> float | None:
        """Our Ready entry on a workload Kueue does not admit, back to Pending (guarded by the
        copy that showed it), with a Warning Event: its next admission is decided afresh."""
        check = self._stale_ready(wl)
        if check is None:
            return None
        key = workload_key(wl)
        try:
            await self._ctx.writer.write_check(
                wl, check_entry(check, Decision(Outcome.PENDING, STALE_READY_MESSAGE), wl)
            )
        except Conflict:
            return CONFLICT_RETRY_SECONDS  # judged again on the newer copy
        except Exception as exc:
            log.warning("stale_ready_reset_failed", workload=key, error=str(exc))
            return self._backoff(key, exc)
        self._write_failures.pop(key, None)
        log.warning("stale_ready_reset", workload=key, check=check)
        await workload_event(self._ctx.events, wl, "Warning", STALE_READY_REASON, STALE_READY_MESSAGE)
        return None

    def _backoff(self, key: str, exc: BaseException) -> float:
        n = self._write_failures.get(key, 0)
        self._write_failures[key] = n + 1
        return retry_after(exc, min(2.0**n, WRITE_RETRY_MAX_SECONDS), WRITE_RETRY_MAX_SECONDS)

    async def _write_failed(self, wl: Workload, exc: BaseException, *, held: bool) -> None:
        self._ctx.metrics.record_admission("error")
        error = str(exc) if isinstance(exc, ApiError) else f"{type(exc).__name__}: {exc}".rstrip(": ")
        log.warning("admission_write_failed", workload=workload_key(wl), error=error, capacity_held=held)
        message = f"writing the topology assignment failed: {error}"
        if held:
            message += "; it may have been applied, so its capacity stays reserved until the Workload is read again"
        await workload_event(self._ctx.events, wl, "Warning", "TopologyAssignmentFailed", message)

    def _unusable(self, check: str, governed: set[str]) -> dict[str, str]:
        return unusable_flavors(
            check,
            self._ctx.checks.by_name(),
            self._ctx.informers.queues.store.values(),
            self._ctx.informers.topologies.store.get,
            self._ctx.informers.flavors.store.get,
            governed,
            self._ctx.checks.controller_name,
        )

    def _replaced_slice(self, wl: Workload) -> tuple[str | None, dict[str, TopologyAssignment] | None, str | None]:
        """(key, assignments, record of kept slices: ``kept_slices_value``) of the slice ``wl``
        replaces; (None, None, None) for an ordinary placement."""
        checks = self._ctx.checks.names()

        def find(ref: SliceRef) -> Workload | None:
            return self._workloads.get(f"{ref[0]}/{ref[1]}")

        old = replaced_slice(wl, find, lambda w: assignment_trusted(w, checks), self._ctx.gates)
        if old is None:
            return None, None, None
        try:
            current = slice_current(old)
        except AssignmentFormatError:
            # The capacity model does not hold such an assignment either (logged there).
            return None, None, None
        return workload_key(old), current, kept_slices_value(old, workload_identity(old), self._ctx.gates)

    async def _commit(
        self,
        wl: Workload,
        check: str,
        decision: Decision,
        text: str | None,
        kept: str | None = None,
        step: PreemptionStep | None = None,
    ) -> None:
        evicting = step is not None and not step.dry_run
        try:
            await self._commit_decision(wl, check, decision, text, kept, step if evicting else None)
        except BaseException:
            if evicting:
                # Nothing was evicted for it (the victims go last): no domain stays closed for it.
                self._ctx.holds.release(workload_key(wl))
            raise
        if step is not None:
            await carry_out(self._ctx, step)

    async def _commit_decision(
        self,
        wl: Workload,
        check: str,
        decision: Decision,
        text: str | None,
        kept: str | None,
        hold: PreemptionStep | None,
    ) -> None:
        key = workload_key(wl)
        requeue: int | None = None
        # The Workload as our last write left it: the state the entry is decided on (a write of
        # anyone else since, e.g. Kueue's eviction, refuses the entry with Conflict).
        decided_on = wl
        if decision.outcome is Outcome.READY:
            gated = {p.name for p in decision.placements if p.gated(self._ctx.gates.failed_node_replacement)}
            # The gate (on the Job/JobSet) and the annotation (on the Workload) do not depend on
            # each other, only the entry depends on both: send them together, fail as either.
            gates, annotated = await asyncio.gather(
                self._ctx.writer.inject_gates(wl, gated, self._ctx.settings.scheduling_gate),
                self._annotate(wl, text, kept),
                return_exceptions=True,
            )
            for outcome in (gates, annotated):
                if isinstance(outcome, BaseException):
                    raise outcome
            if isinstance(annotated, Workload):
                decided_on = annotated
            self._retries.pop(key, None)
        elif decision.outcome is Outcome.RETRY:
            n = self._retries.get(key, 0)
            self._retries[key] = n + 1
            base, cap = self._ctx.settings.retry_backoff_base_seconds, self._ctx.settings.retry_backoff_max_seconds
            requeue = int(min(base * 2**n, cap))
            if decision.retry_after is not None:  # a preferred wait: decided again when it ends
                requeue = max(1, min(requeue, math.ceil(decision.retry_after)))
            if decision.wait_started is not None and wait_started(wl) is None:
                decided_on = await self._ctx.writer.write_wait_start(wl, rfc3339(decision.wait_started))
            marks = dict(decision.marks)
            if hold is not None:
                marks[c.PREEMPTION_HOLD_ANNOTATION] = hold_text(hold.hold)
            if marks:  # recorded before the entry, which is guarded by what this write leaves
                decided_on = await self._ctx.writer.write_marks(decided_on, marks)
        try:
            entry = check_entry(check, decision, wl, requeue, repairs=self._ctx.gates.failed_node_replacement)
            await self._ctx.writer.write_check(decided_on, entry)
        except Exception as exc:
            if decision.outcome is Outcome.READY and may_have_applied(exc):
                raise EntryWriteUnknown() from exc
            raise
        if decision.outcome is not Outcome.PENDING:
            # A Pending entry cannot be told apart from Kueue's when it comes back; the
            # message check above stops it from being written twice instead.
            self._awaiting_write[key] = self._ctx.clock() + WRITE_OBSERVE_TIMEOUT_SECONDS
            self._ctx.metrics.record_admission(_OUTCOME_METRIC[decision.outcome])
            if decision.outcome is Outcome.RETRY and decision.reason:
                self._ctx.metrics.record_retry(decision.reason)
        kind: Literal["Normal", "Warning"] = "Normal" if decision.outcome is Outcome.READY else "Warning"
        await workload_event(self._ctx.events, wl, kind, _OUTCOME_REASON[decision.outcome], decision.message)
        log.info(
            "admission_decided", workload=key, check=check, outcome=decision.outcome.value, message=decision.message
        )

    async def _annotate(self, wl: Workload, text: str | None, kept: str | None) -> Workload | None:
        """Our annotation (guarded by ``wl``'s version), with the record of the slices whose pods
        a new elastic slice keeps when ``kept`` is set (in the same patch: those pods must stay
        its pods once the replaced Workload is gone, and only now do we know that slice's label);
        the Workload it left (None: no text)."""
        if text is None:
            return None
        if kept is not None:
            return await self._ctx.writer.write_annotation(wl, text, kept_slices=kept)
        return await self._ctx.writer.write_annotation(wl, text)

    # --- running ------------------------------------------------------------------------------

    async def run(self) -> None:
        """Look at every Workload once (the caches have synced), then decide one at a time and
        write up to ``admission_workers`` decisions at once."""
        self.fence_earlier_decisions()
        release = asyncio.get_running_loop().call_later(UNKNOWN_WRITE_SETTLE_SECONDS, self.release_fences)
        self.enqueue_all()
        log.info("workload_admission_started", workers=self._ctx.settings.admission_workers)
        try:
            await self.queue.run(self._ctx.settings.admission_workers, self.reconcile)
        finally:
            release.cancel()


def with_annotation(wl: Workload, decision: Decision) -> tuple[Decision, str | None]:
    """A Ready decision with its annotation text, or Rejected when that text cannot be stored:
    Kubernetes caps all annotations of an object together (keys and values) at 256 KiB, and
    writing past it would fail on every retry. The text is already Kueue's compact encoding
    (``kueue_tas.topology.codec.codec``); random host names defeat its prefix sharing."""
    if decision.outcome is not Outcome.READY or not decision.placements:
        return decision, None
    try:
        text = merged_annotation(wl, decision)
    except AssignmentFormatError as exc:
        return Decision(Outcome.REJECTED, f"{ASSIGNMENT_FIELD}: the assignment cannot be encoded: {exc}"), None
    others = sum(
        len(k.encode()) + len(v.encode())
        for k, v in wl.metadata.annotations.items()
        if k != c.TOPOLOGY_ASSIGNMENT_ANNOTATION and isinstance(v, str)
    )
    size = others + len(c.TOPOLOGY_ASSIGNMENT_ANNOTATION) + len(text.encode())
    if size <= ANNOTATIONS_SIZE_LIMIT:
        return decision, text
    domains = sum(len(p.assignment.domains) for p in decision.placements)
    return (
        Decision(
            Outcome.REJECTED,
            f"{ASSIGNMENT_FIELD}: the assignment of {domains} domains takes {len(text.encode())} bytes in Kueue's "
            f"compact encoding, {size} bytes with the Workload's other annotations: over Kubernetes' limit of "
            f"{ANNOTATIONS_SIZE_LIMIT} bytes (256 KiB) for all annotations of an object; ask for fewer, larger "
            "pods or a higher topology level",
        ),
        None,
    )


def not_admitting(wl: Workload) -> bool:
    """Kueue is not admitting ``wl`` now: evicted, without quota or admission, or finished. A
    later admission starts over (Kueue resets our entry to Pending on eviction)."""
    return wl.is_evicted or not wl.has_quota_reservation or wl.status.admission is None or wl.is_finished


def _entry_says(wl: Workload, entry: dict[str, Any]) -> bool:
    """``wl`` carries ``entry``'s state and message already."""
    return any(
        st.name == entry["name"] and st.state == entry["state"] and st.message == entry["message"]
        for st in wl.status.admission_checks
    )


def settle_seconds(exc: BaseException) -> float:
    """How long an entry write that failed with ``exc`` may still land before a re-read tells."""
    if isinstance(exc, ServerError) and exc.status != 504:
        return ANSWERED_WRITE_SETTLE_SECONDS
    return UNKNOWN_WRITE_SETTLE_SECONDS
