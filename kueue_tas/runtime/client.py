"""The one small client layer between kueue-tas and the API server.

Everything that writes to the API server goes through here:

- :func:`make_api_client` builds a ``kubernetes_asyncio`` ``ApiClient`` (kubeconfig or in-cluster),
  with a connection pool large enough for our watches plus ``patch_concurrency`` requests, and
  with loopback excluded from any HTTP(S) proxy (aiohttp honours ``HTTPS_PROXY``).
- :func:`merge_patch_custom`, :func:`apply_status`, :func:`patch_pod` send the content types the
  generated client gets wrong by default (a dict to a CRD would go out as JSON-patch).
- :class:`EventRecorder` writes ``events.k8s.io/v1`` Events and folds repeats into a series.
- :class:`ApiError` and its subclasses replace ``ApiException``: callers catch ``Conflict`` /
  ``NotFound`` instead of comparing status codes.

Responses are returned as plain JSON dicts (read raw, never deserialised into models), which is
both faster and immune to the generated models' datetime handling.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import json
import os
import socket
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final, Literal

import aiohttp
from cachetools import TTLCache
from kubernetes_asyncio import client as k8s
from kubernetes_asyncio import config as k8s_config
from kubernetes_asyncio.client.exceptions import ApiException

from kueue_tas.api.constants import CONTROLLER_NAME, FIELD_MANAGER
from kueue_tas.runtime.config import ConfigError, Settings
from kueue_tas.runtime.logging import get_logger

log = get_logger(__name__)

MERGE_PATCH: Final = "application/merge-patch+json"
STRATEGIC_MERGE_PATCH: Final = "application/strategic-merge-patch+json"
JSON_PATCH: Final = "application/json-patch+json"
APPLY_PATCH: Final = "application/apply-patch+yaml"

DEFAULT_TIMEOUT_SECONDS: Final = 30.0
LOOPBACK_HOSTS: Final = ("127.0.0.1", "localhost", "::1")

EventType = Literal["Normal", "Warning"]
Timeout = float | aiohttp.ClientTimeout | None


# ---- errors -------------------------------------------------------------------------------------


class ApiError(Exception):
    """A failed API request. ``status`` is the HTTP code (0 when no response), ``reason`` the
    Kubernetes ``Status.reason`` (e.g. ``AlreadyExists``), ``message`` the server's words."""

    def __init__(self, status: int, reason: str = "", message: str = "", body: Mapping[str, Any] | None = None):
        self.status = status
        self.reason = reason
        self.message = message
        self.body: Mapping[str, Any] | None = body
        super().__init__(f"{status} {reason}: {message}" if message else f"{status} {reason}")


class BadRequest(ApiError):
    """400."""


class Unauthorized(ApiError):
    """401."""


class Forbidden(ApiError):
    """403."""


class NotFound(ApiError):
    """404: the object (or its namespace) does not exist."""


class Conflict(ApiError):
    """409: stale resourceVersion on update/patch, or (subclass AlreadyExists) on create."""


class AlreadyExists(Conflict):
    """409 with reason AlreadyExists (create of an existing name)."""


class Gone(ApiError):
    """410: resourceVersion too old (re-list)."""


class Invalid(ApiError):
    """422: the object failed validation (or a webhook refused it)."""


class TooManyRequests(ApiError):
    """429: throttled by API priority and fairness."""


class ServerError(ApiError):
    """5xx, or no response at all (status 0)."""


_BY_STATUS: Final[dict[int, type[ApiError]]] = {
    400: BadRequest,
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    409: Conflict,
    410: Gone,
    422: Invalid,
    429: TooManyRequests,
}


def error_from_response(status: int, http_reason: str | None, body: bytes | str | None) -> ApiError:
    """Build the right ApiError from a status code and a (possibly Status-shaped) JSON body."""
    parsed: Mapping[str, Any] | None = None
    if body:
        try:
            raw = json.loads(body)
            if isinstance(raw, dict):
                parsed = raw
        except (ValueError, UnicodeDecodeError):
            parsed = None
    reason = str(parsed.get("reason") or "") if parsed else ""
    message = str(parsed.get("message") or "") if parsed else ""
    if not message and body:
        message = (body.decode("utf-8", "replace") if isinstance(body, bytes) else body)[:500]
    reason = reason or (http_reason or "")
    if status == 409 and reason == "AlreadyExists":
        cls: type[ApiError] = AlreadyExists
    else:
        cls = _BY_STATUS.get(status, ServerError if status >= 500 or status == 0 else ApiError)
    return cls(status, reason, message, parsed)


def map_api_exception(exc: ApiException) -> ApiError:
    """``ApiException`` (kubernetes_asyncio) -> the matching :class:`ApiError` subclass."""
    return error_from_response(int(exc.status or 0), exc.reason, exc.body)


@contextlib.contextmanager
def translate_api_errors() -> Iterator[None]:
    """``with translate_api_errors(): await api.read_x(...)`` raises ApiError subclasses."""
    try:
        yield
    except ApiException as e:
        raise map_api_exception(e) from e


async def call_json(request: Awaitable[Any]) -> dict[str, Any]:
    """Await a generated-client call made with ``_preload_content=False``; return the JSON body.

    Non-2xx responses raise :class:`ApiError` subclasses; transport failures (aiohttp.ClientError,
    TimeoutError) propagate unchanged.
    """
    try:
        resp = await request
    except ApiException as e:
        raise map_api_exception(e) from e
    try:
        status: int = resp.status
        data: bytes = await resp.read()
        http_reason: str | None = resp.reason
    finally:
        resp.release()
    if not 200 <= status <= 299:
        raise error_from_response(status, http_reason, data)
    if not data:
        return {}
    out = json.loads(data)
    return out if isinstance(out, dict) else {"items": out}


def raw_kwargs(timeout: Timeout, **kw: Any) -> dict[str, Any]:
    """Keyword arguments the typing stubs do not declare (``_content_type``), plus raw reads."""
    kw["_preload_content"] = False
    if timeout is not None:
        kw["_request_timeout"] = timeout
    return kw


# ---- client construction ------------------------------------------------------------------------


# The library function is unannotated; give it its real signature once.
_load_incluster_config: Callable[..., None] = k8s_config.load_incluster_config


def ensure_no_proxy(hosts: tuple[str, ...] = LOOPBACK_HOSTS) -> None:
    """Add loopback to NO_PROXY/no_proxy so aiohttp (trust_env=True) never proxies 127.0.0.1."""
    for var in ("NO_PROXY", "no_proxy"):
        current = [x.strip() for x in os.environ.get(var, "").split(",") if x.strip()]
        missing = [h for h in hosts if h not in current]
        if missing or var not in os.environ:
            os.environ[var] = ",".join([*current, *missing])


def pool_size(settings: Settings, *, watches: int = 8, margin: int = 8) -> int:
    """Every open watch pins one HTTP/1.1 connection; patches run ``patch_concurrency`` wide."""
    return watches + settings.patch_concurrency + margin


async def make_api_client(settings: Settings, *, watches: int = 8, margin: int = 8) -> k8s.ApiClient:
    """An ApiClient from ``settings.kubeconfig``, else in-cluster (service account), else
    ``$KUBECONFIG`` / ``~/.kube/config``. Close it with ``await api.close()``."""
    ensure_no_proxy()
    cfg = k8s.Configuration()
    try:
        if settings.kubeconfig is not None:
            await k8s_config.load_kube_config(config_file=str(settings.kubeconfig), client_configuration=cfg)
            source = str(settings.kubeconfig)
        elif os.environ.get("KUBERNETES_SERVICE_HOST"):
            _load_incluster_config(client_configuration=cfg)
            source = "in-cluster"
        else:
            path = os.environ.get("KUBECONFIG") or os.path.expanduser("~/.kube/config")
            await k8s_config.load_kube_config(config_file=path, client_configuration=cfg)
            source = path
    except (k8s_config.ConfigException, OSError) as e:
        raise ConfigError(f"cannot load Kubernetes client configuration: {e}") from e
    cfg.connection_pool_maxsize = pool_size(settings, watches=watches, margin=margin)
    api = k8s.ApiClient(cfg)
    api.user_agent = "kueue-tas/0.1"
    log.info("api_client_ready", source=source, host=cfg.host, pool=cfg.connection_pool_maxsize)
    return api


# ---- writes -------------------------------------------------------------------------------------


def _with_resource_version(patch: Mapping[str, Any], resource_version: str | None) -> dict[str, Any]:
    body = copy.deepcopy(dict(patch))
    if resource_version is not None:
        meta = dict(body.get("metadata") or {})
        meta["resourceVersion"] = resource_version
        body["metadata"] = meta
    return body


async def merge_patch_custom(
    api: k8s.ApiClient,
    *,
    group: str,
    version: str,
    plural: str,
    name: str,
    patch: Mapping[str, Any],
    namespace: str | None = None,
    subresource: Literal["status"] | None = None,
    resource_version: str | None = None,
    field_manager: str = FIELD_MANAGER,
    timeout: Timeout = DEFAULT_TIMEOUT_SECONDS,
) -> dict[str, Any]:
    """JSON merge patch (RFC 7386) of a custom object or its status; with ``resource_version``
    the write fails with :class:`Conflict` if the object changed. Returns the updated object."""
    co = k8s.CustomObjectsApi(api)
    body = _with_resource_version(patch, resource_version)
    kw = raw_kwargs(timeout, _content_type=MERGE_PATCH, field_manager=field_manager)
    if namespace is None:
        fn = co.patch_cluster_custom_object_status if subresource == "status" else co.patch_cluster_custom_object
        return await call_json(fn(group, version, plural, name, body, **kw))
    nfn = co.patch_namespaced_custom_object_status if subresource == "status" else co.patch_namespaced_custom_object
    return await call_json(nfn(group, version, namespace, plural, name, body, **kw))


async def apply_status(
    api: k8s.ApiClient,
    *,
    group: str,
    version: str,
    plural: str,
    kind: str,
    name: str,
    status: Mapping[str, Any],
    namespace: str | None = None,
    field_manager: str = FIELD_MANAGER,
    force: bool = True,
    timeout: Timeout = DEFAULT_TIMEOUT_SECONDS,
) -> dict[str, Any]:
    """Server-side apply of ``status`` on the status subresource, as ``field_manager``.

    Only the fields in ``status`` become ours (e.g. one ``admissionChecks`` entry, a map-list
    keyed by name); ``force`` takes them over from another manager (Kueue created the entry)."""
    metadata: dict[str, Any] = {"name": name}
    if namespace is not None:
        metadata["namespace"] = namespace
    body = {"apiVersion": f"{group}/{version}", "kind": kind, "metadata": metadata, "status": dict(status)}
    co = k8s.CustomObjectsApi(api)
    # "true"/"false", not Python's "True" (the generated client urlencodes the bool as is).
    kw = raw_kwargs(timeout, _content_type=APPLY_PATCH, field_manager=field_manager, force="true" if force else "false")
    if namespace is None:
        return await call_json(co.patch_cluster_custom_object_status(group, version, plural, name, body, **kw))
    return await call_json(
        co.patch_namespaced_custom_object_status(group, version, namespace, plural, name, body, **kw)
    )


async def patch_pod(
    api: k8s.ApiClient,
    *,
    namespace: str,
    name: str,
    patch: Mapping[str, Any],
    resource_version: str | None = None,
    strategy: Literal["merge", "strategic"] = "merge",
    field_manager: str = FIELD_MANAGER,
    timeout: Timeout = DEFAULT_TIMEOUT_SECONDS,
) -> dict[str, Any]:
    """Patch a pod. ``strategy="merge"``: RFC 7386 (lists replaced whole, e.g. the remaining
    ``schedulingGates`` or null); ``"strategic"``: SMP (``{"$patch": "delete", "name": g}``
    removes one gate). With ``resource_version`` a changed pod gives :class:`Conflict`.
    Returns the patched pod as a dict."""
    body = _with_resource_version(patch, resource_version)
    content_type = MERGE_PATCH if strategy == "merge" else STRATEGIC_MERGE_PATCH
    core = k8s.CoreV1Api(api)
    kw = raw_kwargs(timeout, _content_type=content_type, field_manager=field_manager)
    return await call_json(core.patch_namespaced_pod(name, namespace, body, **kw))


# ---- events -------------------------------------------------------------------------------------


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
    ``False``, because an Event is never worth failing a reconcile over.
    """

    NOTE_LIMIT: Final = 1024  # bytes, events.k8s.io/v1 validation
    SHORT_LIMIT: Final = 128  # reason, action, reportingInstance

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
            except (ApiError, aiohttp.ClientError, TimeoutError) as e:
                log.warning("event_update_failed", reason=reason, object=regarding.name, error=str(e))
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
        except (ApiError, aiohttp.ClientError, TimeoutError) as e:
            self._series.pop(key, None)
            log.warning("event_create_failed", reason=reason, object=regarding.name, error=str(e))
            return False
        series.name = name
        return True


async def close_quietly(api: k8s.ApiClient) -> None:
    """Close an ApiClient, ignoring errors (shutdown path)."""
    with contextlib.suppress(Exception):
        await asyncio.shield(api.close())
