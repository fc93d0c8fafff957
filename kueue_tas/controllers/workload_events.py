"""Events about a Workload, as its owner sees them (``kubectl describe workload``)."""

from __future__ import annotations

import structlog

from kueue_tas.api import constants as c
from kueue_tas.api.workload import Workload
from kueue_tas.capacity.feed import workload_key
from kueue_tas.kube.events import EventSink, EventType, ObjectRef

log = structlog.get_logger(__name__)


def workload_ref(wl: Workload) -> ObjectRef:
    return ObjectRef(c.KUEUE_API_VERSION, c.KIND_WORKLOAD, wl.name, wl.namespace, wl.metadata.uid)


async def workload_event(events: EventSink, wl: Workload, kind: EventType, reason: str, message: str) -> None:
    """Best effort: an Event reports writes already made (and said in our entry too); failing
    to write it must never undo them, so a failure is logged and dropped."""
    try:
        await events.emit_event(workload_ref(wl), reason=reason, message=message, type=kind)
    except Exception as exc:
        log.warning("event_failed", workload=workload_key(wl), reason=reason, error=str(exc))
