"""The writes of a node repair, and what each failure does to the capacity held for it.

Order (``repair.reconciler`` holds the added slots with ``LiveCapacity.hold_extra`` before step 0):

0. Our Ready entry announcing the repair: the record as it is, tagged with the new assignment's
   digests (``capacity.assignment_record``), guarded by the resourceVersion of the copy the
   repair was decided on. Retried with backoff until it lands. From here a
   restart loses nothing: the annotation may hold either assignment, and whoever finds the tag
   with no repair of ours writing it settles it (``controllers.guard``).
1. The new assignment into our annotation, guarded by the resourceVersion of the Workload as
   re-read after step 0 (still the old annotation, our announcement standing; else dropped and
   decided again: the announcement itself changed the version we decided on). A
   ``Conflict`` wrote nothing: the extra slots are released and the workload is decided again
   from a fresh copy. Another refusal (4xx) likewise. An unknown outcome (no answer, 5xx) keeps
   them, and the Workload is re-read ``UNKNOWN_WRITE_RECHECK_SECONDS`` later: our text there
   under our announcement means it landed (a write lands late but never un-lands), so the
   repair goes on at once instead of leaving the stray-pod rule waiting (DST seed 300116).
   Without it, the write may still be applied: once the apiserver can no longer be applying it
   (``UNKNOWN_WRITE_SETTLE_SECONDS`` after the failure) a last re-read without our text means
   it did not land (released, decided again). A re-read copy Kueue evicted drops the repair
   (step 2 would be guarded by that copy's version, and land).
2. Our Ready entry with the new record, same ``podSetUpdates``, guarded by the resourceVersion
   the annotation write left. Retried with backoff until it lands: the annotation already
   holds the new assignment, so the slots stay held.
3. A Normal Event ``TopologyRepaired``; the extra hold ends when the informer shows the new
   annotation matching the new record (it is then the workload's trusted usage).

While between steps 1 and 2 the annotation departs from our record; ``OurRewrites`` tells the
assignment guard that this is us.

No entry write lands on a Workload newer than the one it was decided on. A ``Conflict`` on
either entry write is never retried blindly: the Workload is re-read (a quorum read) and the
write counts as landed when it shows our entry already (an earlier try whose answer was lost),
is tried again on the re-read copy only when that copy still holds what the write was decided
from (step 0: the old annotation and our record unchanged; step 2: our announcement and the new
annotation), and otherwise the repair is dropped and decided again (evicted: dropped for good).

A Workload gone (404, a re-read finding nothing) or re-created under the name (another UID)
drops everything held for the key at once: the extra slots and ``OurRewrites``, so a later
Workload of that name is ungated and judged as any other.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final, Literal

import structlog

from kueue_tas.api import constants as c
from kueue_tas.api.workload import Workload
from kueue_tas.capacity.assignment_record import assignment_tampering, repairing, repairs_of
from kueue_tas.capacity.feed import workload_key
from kueue_tas.controllers.decision_context import DecisionContext
from kueue_tas.controllers.repair.plan import our_entry
from kueue_tas.controllers.rewrites import OurRewrites
from kueue_tas.controllers.timings import UNKNOWN_WRITE_SETTLE_SECONDS, WRITE_RETRY_MAX_SECONDS
from kueue_tas.controllers.workload_events import workload_event
from kueue_tas.kube.errors import ApiError, Conflict, NotFound, may_have_applied, retry_after

log = structlog.get_logger(__name__)

CONFLICT_RETRY_SECONDS: Final = 0.5
# An annotation write with no answer is looked for this soon (it may have landed).
UNKNOWN_WRITE_RECHECK_SECONDS: Final = 1.0
# A written repair not yet seen through the informer is looked at again this often.
OBSERVE_POLL_SECONDS: Final = 1.0


@dataclass
class _Write:
    decided_on: Workload  # the copy the repair was decided on: the announcement's precondition
    text: str
    announce: dict[str, Any]
    entry: dict[str, Any]
    summary: str
    detected: float  # when its nodes were counted failed: the repair latency starts there
    announced: bool = False
    # The Workload as the apiserver had it after our announcement: the annotation write's
    # precondition (the announcement itself changed the resourceVersion we decided on); after
    # the annotation write, the Workload it left: the final entry's precondition.
    base: Workload | None = None
    annotation: Literal["todo", "unknown", "written"] = "todo"
    entry_written: bool = False
    not_before: float = 0.0
    settled_at: float = 0.0  # an unknown annotation write can no longer land after this
    failures: int = 0


class RepairWrites:
    def __init__(self, ctx: DecisionContext, rewrites: OurRewrites) -> None:
        self._ctx = ctx
        self._rewrites = rewrites
        self._writes: dict[str, _Write] = {}
        self._dropped: dict[str, float] = {}  # key -> detected, of repairs to be decided again

    def __contains__(self, key: str) -> bool:
        return key in self._writes

    def writes_for(self, wl: Workload) -> bool:
        """Whether the repair in progress under ``wl``'s key was decided for ``wl`` itself (not
        for a Workload deleted since and re-created under the name)."""
        w = self._writes.get(workload_key(wl))
        return w is not None and w.decided_on.metadata.uid == wl.metadata.uid

    def start(
        self, wl: Workload, text: str, announce: dict[str, Any], entry: dict[str, Any], summary: str, detected: float
    ) -> None:
        """The repair of ``wl`` (the copy it was decided on) is to be written."""
        key = workload_key(wl)
        self._writes[key] = _Write(wl, text, announce, entry, summary, detected)
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

    def gone(self, key: str) -> None:
        """The Workload the repair was decided for no longer exists: release everything."""
        self.drop(key)
        self.forget_detected(key)

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
        if wl.metadata.uid != w.decided_on.metadata.uid:
            self.gone(key)  # re-created under the name (a relist shows it as a change)
        elif wl.is_evicted or wl.is_finished:
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
            retry = await self._write_entry(key, w, w.decided_on, w.announce, "announcing")
            if retry is not None:
                return retry
            w.announced, w.failures = True, 0
        if w.annotation == "todo" and w.base is None:
            fresh = await self._reread(key, w)
            if not isinstance(fresh, Workload):
                return fresh
            old = w.decided_on.metadata.annotations.get(c.TOPOLOGY_ASSIGNMENT_ANNOTATION)
            if (
                fresh.is_evicted
                or fresh.is_finished
                or fresh.metadata.annotations.get(c.TOPOLOGY_ASSIGNMENT_ANNOTATION) != old
                or repairs_of(fresh, self._ctx.checks.names()) != repairing(w.announce["message"])
            ):
                self.drop(key, decided_again=True)  # changed under us since the decision: decide again
                return CONFLICT_RETRY_SECONDS
            w.base = fresh
        if w.annotation == "unknown":
            fresh = await self._reread(key, w)
            if not isinstance(fresh, Workload):
                return fresh
            if fresh.is_evicted or fresh.is_finished:
                # The final entry would be guarded by this copy's version and land Ready on it.
                self.drop(key)
                return CONFLICT_RETRY_SECONDS
            if not self._still_stands(fresh, w, announcing=False):
                now = self._ctx.clock()
                if now < w.settled_at and self._awaits_landing(fresh, w):
                    w.not_before = w.settled_at
                    return w.settled_at - now  # not landed yet, but it still may
                self.drop(key, decided_again=True)  # not landed, or our announcement reset since
                return CONFLICT_RETRY_SECONDS
            w.annotation, w.base = "written", fresh
        if w.annotation == "todo":
            try:
                w.base = await self._ctx.writer.write_annotation(w.base or wl, w.text)
            except Conflict:
                self.drop(key, decided_again=True)
                return CONFLICT_RETRY_SECONDS
            except NotFound:
                self.gone(key)
                return None
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
                failed_at = self._ctx.clock()
                w.settled_at = failed_at + UNKNOWN_WRITE_SETTLE_SECONDS
                w.not_before = failed_at + UNKNOWN_WRITE_RECHECK_SECONDS
                return UNKNOWN_WRITE_RECHECK_SECONDS
            if self._writes.get(key) is not w:
                return None  # deleted meanwhile: everything was released
            w.annotation = "written"
        retry = await self._write_entry(key, w, w.base or wl, w.entry, "recording")
        if retry is not None:
            return retry
        w.entry_written = True
        self._ctx.metrics.node_repairs_total.labels("done").inc()
        self._ctx.metrics.node_repair_seconds.observe(max(self._ctx.clock() - w.detected, 0.0))
        log.info("node_repaired", workload=key, summary=w.summary)
        await workload_event(self._ctx.events, wl, "Normal", "TopologyRepaired", w.summary)
        return OBSERVE_POLL_SECONDS

    async def _reread(self, key: str, w: _Write) -> Workload | float | None:
        """The Workload as the apiserver has it now; else when to look again (the Workload gone,
        or re-created under the name: everything released, None)."""
        try:
            fresh = await self._ctx.writer.read_workload(w.decided_on)
        except Exception as exc:
            return self._later(w, exc)
        if self._writes.get(key) is not w:
            return None  # deleted meanwhile: everything was released
        if fresh is None or fresh.metadata.uid != w.decided_on.metadata.uid:
            self.gone(key)
            return None
        return fresh

    async def _write_entry(
        self, key: str, w: _Write, base: Workload, entry: dict[str, Any], doing: str
    ) -> float | None:
        """One of our entry writes, only onto ``base`` (the state it was decided on); None when it
        landed, else the seconds until the repair is looked at again (a Warning Event on the
        first failure; a Conflict is judged on a re-read, never retried blindly)."""
        try:
            await self._ctx.writer.write_check(base, entry)
        except Conflict:
            return await self._refused(key, w, entry)
        except NotFound:
            self.gone(key)
            return CONFLICT_RETRY_SECONDS  # not landed: nothing more is written for it
        except Exception as exc:
            if w.failures == 0:
                message = f"{doing} the repaired assignment failed: {error_text(exc)}; retrying"
                await workload_event(self._ctx.events, base, "Warning", "TopologyRepairFailed", message)
            return self._later(w, exc)
        if self._writes.get(key) is not w:
            return CONFLICT_RETRY_SECONDS  # deleted meanwhile: everything was released
        return None

    async def _refused(self, key: str, w: _Write, entry: dict[str, Any]) -> float | None:
        """``entry`` was refused: the Workload changed since the copy it was decided on. None when
        a re-read shows it landed already (an earlier try whose answer was lost); tried again on
        the re-read copy when that still holds what the write was decided from; otherwise the
        repair is dropped (and decided again unless Kueue evicted or finished the workload)."""
        fresh = await self._reread(key, w)
        if not isinstance(fresh, Workload):
            return CONFLICT_RETRY_SECONDS if fresh is None else fresh
        if fresh.is_evicted or fresh.is_finished:
            self.drop(key)
            return CONFLICT_RETRY_SECONDS
        ours = our_entry(fresh, self._ctx.checks.names())
        if ours is not None and ours.message == entry["message"]:
            return None
        announcing = entry is w.announce
        if not self._still_stands(fresh, w, announcing=announcing):
            self.drop(key, decided_again=True)
            return CONFLICT_RETRY_SECONDS
        if announcing:
            w.decided_on = fresh
        else:
            w.base = fresh
        return CONFLICT_RETRY_SECONDS

    def _still_stands(self, fresh: Workload, w: _Write, *, announcing: bool) -> bool:
        """``fresh`` (admitted, same UID) still holds what the refused write was decided from:
        for the announcement, the annotation and our Ready entry as the repair saw them; for the
        final entry, our announcement standing over the new annotation."""
        checks = self._ctx.checks.names()
        ours = our_entry(fresh, checks)
        if ours is None:
            return False
        annotation = fresh.metadata.annotations.get(c.TOPOLOGY_ASSIGNMENT_ANNOTATION)
        if not announcing:
            return annotation == w.text and repairs_of(fresh, checks) == repairing(w.announce["message"])
        before = our_entry(w.decided_on, checks)
        return (
            before is not None
            and ours.message == before.message
            and annotation == w.decided_on.metadata.annotations.get(c.TOPOLOGY_ASSIGNMENT_ANNOTATION)
        )

    def _awaits_landing(self, fresh: Workload, w: _Write) -> bool:
        """``fresh`` is still the state the unknown annotation write was sent onto (the old
        annotation under our announcement): the write may yet land on it."""
        checks = self._ctx.checks.names()
        old = w.decided_on.metadata.annotations.get(c.TOPOLOGY_ASSIGNMENT_ANNOTATION)
        return fresh.metadata.annotations.get(c.TOPOLOGY_ASSIGNMENT_ANNOTATION) == old and repairs_of(
            fresh, checks
        ) == repairing(w.announce["message"])

    def _later(self, w: _Write, exc: BaseException) -> float:
        delay = retry_after(exc, min(2.0**w.failures, WRITE_RETRY_MAX_SECONDS), WRITE_RETRY_MAX_SECONDS)
        w.failures += 1
        w.not_before = self._ctx.clock() + delay
        return delay


def error_text(exc: BaseException) -> str:
    return str(exc) if isinstance(exc, ApiError) else f"{type(exc).__name__}: {exc}".rstrip(": ")
