"""Tampering with our assignment annotation on an admitted Workload: restore it, or re-place.

While an edit is outstanding the capacity model keeps charging what we decided
(``kueue_tas.capacity.feed``) and the ungater releases no pod (both check
``assignment_tampering``). This reconciler ends the episode, with a Warning Event
``TopologyAssignmentTampered`` naming the field and the problem:

* when the informer showed us the annotation matching our record just before the edit, we
  write that text back (our record wins);
* otherwise (the controller restarted since, or the edit came in a relist) we cannot know what
  we wrote, only that this is not it: our entry turns ``Retry``, so Kueue evicts the workload
  and admits it again, and we place it afresh. Until Kueue has done so the edited assignment
  is charged as far as it decodes, and the message says so.
"""

from __future__ import annotations

from collections.abc import Container
from typing import Final

import structlog

from kueue_tas.api import constants as c
from kueue_tas.api.workload import Workload
from kueue_tas.capacity.assignment_record import (
    assignment_tampering,
    records_of,
    repairing,
    repairs_of,
    settled_message,
    without_record,
)
from kueue_tas.capacity.feed import workload_key
from kueue_tas.controllers.check_entry_writes import AdmissionWriter, check_entry, entry_with_message
from kueue_tas.controllers.decide import Decision, Outcome
from kueue_tas.controllers.deps import ControllerDeps
from kueue_tas.controllers.rewrites import OurRewrites
from kueue_tas.controllers.workload_events import workload_ref
from kueue_tas.kube.errors import Conflict, retry_after
from kueue_tas.runtime.workqueue import WorkQueue
from kueue_tas.topology.codec import decode_assignment_annotation

log = structlog.get_logger(__name__)

REASON: Final = "TopologyAssignmentTampered"
# A write refused because the Workload changed since the copy it was decided from.
CONFLICT_RETRY_SECONDS: Final = 0.5


class AssignmentGuard:
    def __init__(
        self,
        deps: ControllerDeps,
        *,
        writer: AdmissionWriter,
        rewrites: OurRewrites | None = None,
    ) -> None:
        """``rewrites``: our own rewrites of the annotation in progress (never restored)."""
        informers = deps.informers
        self._workloads = informers.workloads.store
        self._rewrites = rewrites or OurRewrites()
        self._checks = deps.checks
        self._writer = writer
        self._events = deps.events
        self._settings = deps.settings
        self._restore: dict[str, str] = {}  # workload -> the annotation text that matched our record
        self.queue: WorkQueue[str] = WorkQueue("assignment-guard")
        self._rewrites.when_done(self.queue.add)  # a repair's tag it left behind gets settled
        informers.workloads.add_handler(lambda wl: self._seen(None, wl), self._seen, self._on_deleted)

    def _seen(self, old: Workload | None, new: Workload) -> None:
        ours = self._checks.names()
        if self._rewrites.ours(new) or assignment_tampering(new, ours) is None:
            self._restore.pop(workload_key(new), None)
            if repairs_of(new, ours) and not self._rewrites.writing(workload_key(new)):
                self.queue.add(workload_key(new))
            return
        key = workload_key(new)
        text = None if old is None else old.metadata.annotations.get(c.TOPOLOGY_ASSIGNMENT_ANNOTATION)
        if (
            key not in self._restore
            and old is not None
            and text is not None
            and old.metadata.uid == new.metadata.uid
            and records_of(old, ours) == records_of(new, ours)
            and assignment_tampering(old, ours) is None
        ):
            self._restore[key] = text
        self.queue.add(key)

    def _on_deleted(self, wl: Workload) -> None:
        self._restore.pop(workload_key(wl), None)

    async def reconcile(self, key: str) -> float | None:
        wl = self._workloads.get(key)
        if wl is None:
            return None
        ours = self._checks.names()
        problem = None if self._rewrites.ours(wl) else assignment_tampering(wl, ours)
        if problem is None:
            self._restore.pop(key, None)
            if not self._rewrites.writing(key):
                return await self._settle(wl, key, ours)
            return None
        text = self._restore.get(key)
        check = next(
            (
                st.name
                for st in wl.status.admission_checks
                if st.name in ours and st.state == c.CHECK_STATE_READY and records_of(wl, {st.name})
            ),
            None,
        )
        if check is None:
            return None
        try:
            if text is not None:
                await self._writer.write_annotation(wl, text)
                message = f"{problem}; restored the assignment kueue-tas recorded"
            else:
                message = (
                    f"{problem}; kueue-tas no longer holds what it wrote (it restarted since), so the "
                    "workload is re-placed; until Kueue evicts it, the edited assignment is charged as far "
                    "as it decodes"
                )
                requeue = int(self._settings.retry_backoff_base_seconds)
                await self._writer.write_check(wl, check_entry(check, Decision(Outcome.RETRY, message), wl, requeue))
        except Conflict:
            return CONFLICT_RETRY_SECONDS
        except Exception as exc:
            # Nothing here holds capacity (the model charges what we decided meanwhile): try
            # again, after the server's Retry-After when it sent one.
            log.warning("assignment_restore_failed", workload=key, error=f"{type(exc).__name__}: {exc}")
            return retry_after(exc, 5.0, 60.0)
        log.warning("assignment_annotation_tampered", workload=key, problem=problem, restored=text is not None)
        await self._events.emit_event(workload_ref(wl), reason=REASON, message=message, type="Warning")
        self._restore.pop(key, None)
        return None

    async def _settle(self, wl: Workload, key: str, ours: Container[str]) -> float | None:
        """A repair's tag no repair of ours is writing any more (it was dropped, or we restarted
        between its writes): record what the annotation holds, so the tag cannot outlive it."""
        entry = next(
            (
                st
                for st in wl.status.admission_checks
                if st.name in ours and st.state == c.CHECK_STATE_READY and repairing(st.message)
            ),
            None,
        )
        text = wl.metadata.annotations.get(c.TOPOLOGY_ASSIGNMENT_ANNOTATION)
        if entry is None or text is None:
            return None
        try:
            held = decode_assignment_annotation(text)
        except ValueError:
            return None  # tampering, handled above once the informer shows it
        message, landed = settled_message(entry.message, wl.metadata.uid or "", held)
        body = entry_with_message(entry, message)
        try:
            # Only onto the copy it was decided from: a Workload Kueue evicted since (our entry
            # reset) refuses it, and the newer copy is judged again.
            await self._writer.write_check(wl, body)
        except Conflict:
            return CONFLICT_RETRY_SECONDS
        except Exception as exc:
            log.warning("repair_tag_settle_failed", workload=key, error=f"{type(exc).__name__}: {exc}")
            return retry_after(exc, 5.0, 60.0)
        log.info("repair_tag_settled", workload=key, landed=landed)
        if landed:
            summary = without_record(message)
            await self._events.emit_event(workload_ref(wl), reason="TopologyRepaired", message=summary)
        return None

    async def run(self) -> None:
        for wl in self._workloads.values():
            self._seen(None, wl)
        await self.queue.run(1, self.reconcile)
