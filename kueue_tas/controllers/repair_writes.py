"""The writes of a node repair, and what each failure does to the capacity held for it.

Order (``node_repair`` holds the added slots with ``LiveCapacity.hold_extra`` before step 0):

0. Our Ready entry announcing the repair: the record as it is, tagged with the new assignment's
   digests (``capacity.assignment_record``). Retried with backoff until it lands. From here a
   restart loses nothing: the annotation may hold either assignment, and whoever finds the tag
   with no repair of ours writing it settles it (``assignment_guard``).
1. The new assignment into our annotation, guarded by the resourceVersion of the Workload as
   re-read after step 0 (still the old annotation, our announcement standing; else dropped and
   decided again: the announcement itself changed the version we decided on). A
   ``Conflict`` wrote nothing: the extra slots are released and the workload is decided again
   from a fresh copy. Another refusal (4xx) likewise. An unknown outcome (no answer, 5xx) keeps
   them; once the apiserver can no longer be applying it, the Workload is re-read: our text
   there means it landed, anything else that it did not (released, decided again).
2. Our Ready entry with the new record, same ``podSetUpdates``. Retried with backoff until it
   lands (server-side apply is idempotent): the annotation already holds the new assignment,
   so the slots stay held.
3. A Normal Event ``TopologyRepaired``; the extra hold ends when the informer shows the new
   annotation matching the new record (it is then the workload's trusted usage).

While between steps 1 and 2 the annotation departs from our record; ``OurRewrites`` tells the
assignment guard that this is us.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final, Literal

import structlog

from kueue_tas.api import constants as c
from kueue_tas.api.workload import Workload
from kueue_tas.capacity.assignment_record import assignment_tampering, repairing, repairs_of
from kueue_tas.capacity.feed import workload_key
from kueue_tas.controllers.admission import UNKNOWN_WRITE_SETTLE_SECONDS, WRITE_RETRY_MAX_SECONDS
from kueue_tas.controllers.assignment_guard import OurRewrites
from kueue_tas.controllers.decision_context import DecisionContext
from kueue_tas.controllers.workload_events import workload_event
from kueue_tas.kube.errors import ApiError, Conflict, may_have_applied, retry_after

log = structlog.get_logger(__name__)

CONFLICT_RETRY_SECONDS: Final = 0.5
# A written repair not yet seen through the informer is looked at again this often.
OBSERVE_POLL_SECONDS: Final = 1.0


@dataclass
class _Write:
    text: str
    announce: dict[str, Any]
    entry: dict[str, Any]
    summary: str
    detected: float  # when its nodes were counted failed: the repair latency starts there
    announced: bool = False
    # The Workload as the apiserver had it after our announcement: the annotation write's
    # precondition (the announcement itself changed the resourceVersion we decided on).
    base: Workload | None = None
    annotation: Literal["todo", "unknown", "written"] = "todo"
    entry_written: bool = False
    not_before: float = 0.0
    failures: int = 0


class RepairWrites:
    def __init__(self, ctx: DecisionContext, rewrites: OurRewrites) -> None:
        self._ctx = ctx
        self._rewrites = rewrites
        self._writes: dict[str, _Write] = {}
        self._dropped: dict[str, float] = {}  # key -> detected, of repairs to be decided again

    def __contains__(self, key: str) -> bool:
        return key in self._writes

    def start(
        self, key: str, text: str, announce: dict[str, Any], entry: dict[str, Any], summary: str, detected: float
    ) -> None:
        self._writes[key] = _Write(text, announce, entry, summary, detected)
        self._rewrites.expect(key, text)

    def drop(self, key: str, *, decided_again: bool = False) -> None:
        """Nothing of it will land (or the workload is gone): release what it held.
        ``decided_again``: the repair will be decided anew, and its latency still runs from
        when its nodes were counted failed (``detected_before``)."""
        w = self._writes.pop(key, None)
        if w is not None:
            self._rewrites.done(key)
            self._ctx.capacity.release_extra(key)
            if decided_again:
                self._dropped[key] = w.detected

    def detected_before(self, key: str) -> float | None:
        """When the nodes of a repair dropped to be decided again were counted failed (once)."""
        return self._dropped.pop(key, None)

    def forget_detected(self, key: str) -> None:
        """The episode of ``key`` is over (recovered, or the workload is gone): no clock runs on."""
        self._dropped.pop(key, None)

    def observed(self, wl: Workload) -> None:
        """An informer event: a finished repair shown whole ends; an evicted workload ends it."""
        key = workload_key(wl)
        w = self._writes.get(key)
        if w is None:
            return
        if wl.is_evicted or wl.is_finished:
            self.drop(key)
        elif w.entry_written and self._shows(wl, w):
            self._end(key)

    def _shows(self, wl: Workload, w: _Write) -> bool:
        """The informer shows the repair whole: new annotation, new record, no announcement."""
        checks = self._ctx.checks.names()
        return (
            wl.metadata.annotations.get(c.TOPOLOGY_ASSIGNMENT_ANNOTATION) == w.text
            and not repairs_of(wl, checks)
            and assignment_tampering(wl, checks) is None
        )

    def _end(self, key: str) -> None:
        del self._writes[key]
        self._rewrites.done(key)
        self._ctx.capacity.release_extra(key)  # now held as the trusted assignment itself

    async def advance(self, wl: Workload, key: str) -> float | None:
        """Take the writes as far as they go now; seconds until they should be looked at again."""
        w = self._writes[key]
        now = self._ctx.clock()
        if w.entry_written:
            if self._shows(wl, w):
                self._end(key)
                return None
            return OBSERVE_POLL_SECONDS
        if now < w.not_before:
            return w.not_before - now
        if not w.announced:
            retry = await self._write_entry(wl, w, w.announce, "announcing")
            if retry is not None:
                return retry
            w.announced, w.failures = True, 0
        if w.annotation == "todo" and w.base is None:
            try:
                fresh = await self._ctx.writer.read_workload(wl)
            except Exception as exc:
                return self._later(w, exc)
            old = wl.metadata.annotations.get(c.TOPOLOGY_ASSIGNMENT_ANNOTATION)
            if (
                fresh is None
                or fresh.is_evicted
                or fresh.is_finished
                or fresh.metadata.annotations.get(c.TOPOLOGY_ASSIGNMENT_ANNOTATION) != old
                or repairs_of(fresh, self._ctx.checks.names()) != repairing(w.announce["message"])
            ):
                self.drop(key, decided_again=True)  # changed under us since the decision: decide again
                return CONFLICT_RETRY_SECONDS
            w.base = fresh
        if w.annotation == "unknown":
            try:
                fresh = await self._ctx.writer.read_workload(wl)
            except Exception as exc:
                return self._later(w, exc)
            if fresh is None or fresh.metadata.annotations.get(c.TOPOLOGY_ASSIGNMENT_ANNOTATION) != w.text:
                self.drop(key, decided_again=True)
                return CONFLICT_RETRY_SECONDS
            w.annotation = "written"
        if w.annotation == "todo":
            try:
                await self._ctx.writer.write_annotation(w.base or wl, w.text)
            except Conflict:
                self.drop(key, decided_again=True)
                return CONFLICT_RETRY_SECONDS
            except Exception as exc:
                await workload_event(
                    self._ctx.events,
                    wl,
                    "Warning",
                    "TopologyRepairFailed",
                    f"writing the repaired assignment failed: {error_text(exc)}",
                )
                if not may_have_applied(exc):
                    self.drop(key, decided_again=True)
                    return retry_after(exc, 2.0, WRITE_RETRY_MAX_SECONDS)
                w.annotation = "unknown"
                w.not_before = now + UNKNOWN_WRITE_SETTLE_SECONDS
                return UNKNOWN_WRITE_SETTLE_SECONDS
            w.annotation = "written"
        retry = await self._write_entry(wl, w, w.entry, "recording")
        if retry is not None:
            return retry
        w.entry_written = True
        self._ctx.metrics.node_repairs_total.labels("done").inc()
        self._ctx.metrics.node_repair_seconds.observe(max(self._ctx.clock() - w.detected, 0.0))
        log.info("node_repaired", workload=key, summary=w.summary)
        await workload_event(self._ctx.events, wl, "Normal", "TopologyRepaired", w.summary)
        return OBSERVE_POLL_SECONDS

    async def _write_entry(self, wl: Workload, w: _Write, entry: dict[str, Any], doing: str) -> float | None:
        """One of our entry writes; the seconds until it is tried again if it failed (a Warning
        Event on the first failure: server-side apply is idempotent, so it is simply retried)."""
        try:
            await self._ctx.writer.write_check(wl, entry)
        except Exception as exc:
            if w.failures == 0:
                message = f"{doing} the repaired assignment failed: {error_text(exc)}; retrying"
                await workload_event(self._ctx.events, wl, "Warning", "TopologyRepairFailed", message)
            return self._later(w, exc)
        return None

    def _later(self, w: _Write, exc: BaseException) -> float:
        delay = retry_after(exc, min(2.0**w.failures, WRITE_RETRY_MAX_SECONDS), WRITE_RETRY_MAX_SECONDS)
        w.failures += 1
        w.not_before = self._ctx.clock() + delay
        return delay


def error_text(exc: BaseException) -> str:
    return str(exc) if isinstance(exc, ApiError) else f"{type(exc).__name__}: {exc}".rstrip(": ")
