"""``events.k8s.io/v1`` Events: what an Event is about, and the recorder that writes them."""

from __future__ import annotations

import socket
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final, Literal, Protocol

import structlog
from cachetools import TTLCache
from kubernetes_asyncio import client as k8s

from kueue_tas.api.constants import CONTROLLER_NAME
from kueue_tas.kube.client import DEFAULT_TIMEOUT_SECONDS, MERGE_PATCH, call_json, raw_kwargs
from kueue_tas.kube.errors import ApiError, NotFound, TooManyRequests, retry_after

log = structlog.get_logger(__name__)

EventType = Literal["Normal", "Warning"]


@dataclass(frozen=True, slots=True)
class ObjectRef:
    """What an Event is about."""

    api_version: str
    kind: str
    name: str
    namespace: str | None = None
    uid: str | None = None

    @classmethod
    def of(cls, obj: Mapping[str, Any]) -> ObjectRef:
        """From an object dict with apiVersion, kind and metadata."""
        meta = obj.get("metadata") or {}
        return cls(
            api_version=str(obj.get("apiVersion", "")),
            kind=str(obj.get("kind", "")),
            name=str(meta.get("name", "")),
            namespace=meta.get("namespace") or None,
            uid=meta.get("uid") or None,
        )

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"apiVersion": self.api_version, "kind": self.kind, "name": self.name}
        if self.namespace:
            out["namespace"] = self.namespace
        if self.uid:
            out["uid"] = self.uid
        return out


class EventSink(Protocol):
    """What reconcilers need of a recorder (tests pass a list-backed fake)."""

    async def emit_event(
        self, regarding: ObjectRef, *, reason: str, message: str, type: EventType = "Normal"
    ) -> bool: ...


def micro_time(dt: datetime) -> str:
    """Kubernetes MicroTime: RFC 3339 in UTC with exactly six fractional digits and 'Z'."""
    if dt.tzinfo is None:
        raise ValueError("naive datetime: pass an aware (UTC) datetime")
    return dt.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _truncate_utf8(text: str, limit: int) -> str:
    raw = text.encode("utf-8")
    if len(raw) <= limit:
        return text
    return raw[: limit - 3].decode("utf-8", "ignore") + "..."


@dataclass(slots=True)
class _Series:
    namespace: str
    name: str | None  # None while the create is in flight
    count: int


class EventRecorder:
    """Writes ``events.k8s.io/v1`` Events; an identical event (same object, type, reason,
    message) repeated within ``window_seconds`` of the previous one updates the existing
    Event's ``series`` (count, lastObservedTime) instead of creating another object.

    Emitting never raises (except cancellation): a failed write is logged and reported as
    ``False``, because an Event is never worth failing a reconcile over. After a 429 no Event
    is sent until the server's Retry-After (at most ``MAX_PAUSE_SECONDS``) has passed: Events
    are the first thing to shed when the apiserver is overloaded.
    """

    NOTE_LIMIT: Final = 1024  # bytes, events.k8s.io/v1 validation
    SHORT_LIMIT: Final = 128  # reason, action, reportingInstance
    MAX_PAUSE_SECONDS: Final = 60.0

    def __init__(
        self,
        api: k8s.ApiClient,
        *,
        controller: str = CONTROLLER_NAME,
        instance: str | None = None,
        window_seconds: float = 300.0,
        max_series: int = 8192,
        now: Callable[[], datetime] | None = None,
        timer: Callable[[], float] = time.monotonic,
    ) -> None:
        self._events = k8s.EventsV1Api(api)
        self.controller = controller
        self.instance = (instance or f"{controller}-{socket.gethostname()}")[: self.SHORT_LIMIT]
        self._now = now or (lambda: datetime.now(UTC))
        self._series: TTLCache[tuple[str, ...], _Series] = TTLCache(maxsize=max_series, ttl=window_seconds, timer=timer)
        self._timer = timer
        self._paused_until = 0.0

    async def emit_event(
        self,
        regarding: ObjectRef,
        *,
        reason: str,
        message: str,
        type: EventType = "Normal",
        action: str | None = None,
    ) -> bool:
        """Record an event on ``regarding``. Returns True when the API accepted it."""
        if type not in ("Normal", "Warning"):
            raise ValueError(f"event type must be Normal or Warning, got {type!r}")
        if self._timer() < self._paused_until:
            log.info("event_dropped_throttled", reason=reason, object=regarding.name)
            return False
        note = _truncate_utf8(message, self.NOTE_LIMIT)
        reason = reason[: self.SHORT_LIMIT]
        action = (action or reason)[: self.SHORT_LIMIT]
        key = (
            regarding.uid or "",
            regarding.api_version,
            regarding.kind,
            regarding.namespace or "",
            regarding.name,
            type,
            reason,
            action,
            note,
        )
        now = self._now()
        series = self._series.get(key)
        if series is not None:
            series.count += 1
            self._series[key] = series  # re-insert: the window runs from the latest repeat
            if series.name is None:
                return True  # first create still in flight; its count is reported next time
            try:
                await call_json(
                    self._events.patch_namespaced_event(
                        series.name,
                        series.namespace,
                        {"series": {"count": series.count, "lastObservedTime": micro_time(now)}},
                        **raw_kwargs(DEFAULT_TIMEOUT_SECONDS, _content_type=MERGE_PATCH),
                    )
                )
                return True
            except NotFound:
                self._series.pop(key, None)  # expired or deleted: start a new Event below
            except Exception as e:
                self._failed("event_update_failed", reason, regarding, e)
                return False

        namespace = regarding.namespace or "default"  # cluster-scoped objects: events go to default
        series = _Series(namespace=namespace, name=None, count=1)
        self._series[key] = series
        name = f"{regarding.name}.{time.time_ns():x}"
        body: Any = {  # a dict: the stubs ask for EventsV1Event, the client serialises either
            "apiVersion": "events.k8s.io/v1",
            "kind": "Event",
            "metadata": {"name": name, "namespace": namespace},
            "regarding": regarding.to_dict(),
            "reason": reason,
            "note": note,
            "type": type,
            "action": action,
            "eventTime": micro_time(now),
            "reportingController": self.controller,
            "reportingInstance": self.instance,
        }
        try:
            await call_json(
                self._events.create_namespaced_event(namespace, body, **raw_kwargs(DEFAULT_TIMEOUT_SECONDS))
            )
        except Exception as e:
            self._series.pop(key, None)
            self._failed("event_create_failed", reason, regarding, e)
            return False
        series.name = name
        return True

    def _failed(self, what: str, reason: str, regarding: ObjectRef, exc: Exception) -> None:
        error = str(exc) if isinstance(exc, ApiError) else f"{type(exc).__name__}: {exc}"
        log.warning(what, reason=reason, object=regarding.name, error=error)
        if isinstance(exc, TooManyRequests):
            self._paused_until = self._timer() + retry_after(exc, 1.0, self.MAX_PAUSE_SECONDS)
