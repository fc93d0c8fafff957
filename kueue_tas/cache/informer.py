"""A generic asyncio informer: LIST, then WATCH from the list's resourceVersion.

One class serves every resource we read (core/v1 Nodes and Pods, batch/v1 Jobs,
Kueue CRDs, JobSets): a resource is named by group/version/plural.

* Requests go through a ``kubernetes_asyncio`` ``ApiClient`` (its host, TLS and
  auth, including refreshed tokens) with ``_preload_content=False``: responses are
  decoded with ``json`` into plain dicts and handed to ``transform``; no generated
  client models are built, which is what makes the stock watch slow.
* LIST is paginated (``limit``/``continue``); an expired continue token restarts it.
* WATCH asks for bookmarks (``allowWatchBookmarks=true``); every event and
  bookmark advances the resourceVersion.
* A broken stream (``aiohttp.ClientError`` including payload errors, timeouts,
  connection resets) or a server-side end of the watch re-watches from the last
  resourceVersion, so nothing is lost and nothing is replayed.
* 410 Gone (an ``ERROR`` event with code 410, or an HTTP 410) re-LISTs and
  reconciles the store with the list: objects missing from it are delivered as
  deletes, objects with a new resourceVersion as updates, new ones as adds.

Handlers are plain callables run on the event loop, in event order; they must be
quick (enqueue work, adjust counters). An exception in a handler is logged and
does not stop the informer.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final, Generic, TypeVar

import aiohttp
import structlog
from pydantic import BaseModel

from kueue_tas.api import constants as c
from kueue_tas.cache.stores import Store, object_key

log = structlog.get_logger(__name__)

T = TypeVar("T")

M = TypeVar("M", bound=BaseModel)

RawObject = dict[str, Any]

EVENT_ADDED: Final = "ADDED"
EVENT_MODIFIED: Final = "MODIFIED"
EVENT_DELETED: Final = "DELETED"
EVENT_BOOKMARK: Final = "BOOKMARK"
EVENT_ERROR: Final = "ERROR"


@dataclass(frozen=True, slots=True)
class Resource:
    """A listable, watchable resource. ``group`` is ``""`` for core/v1.

    ``strip_managed_fields`` drops ``metadata.managedFields`` from the response
    bytes before decoding (a quarter of a pod's JSON). It relies on the Go
    struct order of built-in types (``managedFields`` is the last field of
    ObjectMeta and ``spec`` follows metadata), so it is only set for built-in
    kinds that have a ``spec``; never for custom resources, whose keys are sorted.
    """

    group: str
    version: str
    plural: str
    namespaced: bool
    kind: str = ""
    strip_managed_fields: bool = False

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    def path(self, namespace: str | None = None) -> str:
        base = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        if namespace is not None:
            if not self.namespaced:
                raise ValueError(f"{self.plural} is cluster-scoped")
            return f"{base}/namespaces/{namespace}/{self.plural}"
        return f"{base}/{self.plural}"

    def __str__(self) -> str:
        return f"{self.plural}.{self.group}" if self.group else self.plural


NODES: Final = Resource("", "v1", "nodes", namespaced=False, kind=c.KIND_NODE, strip_managed_fields=True)
PODS: Final = Resource("", "v1", "pods", namespaced=True, kind=c.KIND_POD, strip_managed_fields=True)
JOBS: Final = Resource(c.BATCH_GROUP, "v1", "jobs", namespaced=True, kind=c.KIND_JOB, strip_managed_fields=True)
TOPOLOGIES: Final = Resource(c.KUEUE_GROUP, c.KUEUE_VERSION, "topologies", namespaced=False, kind=c.KIND_TOPOLOGY)
RESOURCE_FLAVORS: Final = Resource(
    c.KUEUE_GROUP, c.KUEUE_VERSION, "resourceflavors", namespaced=False, kind=c.KIND_RESOURCE_FLAVOR
)
ADMISSION_CHECKS: Final = Resource(
    c.KUEUE_GROUP, c.KUEUE_VERSION, "admissionchecks", namespaced=False, kind=c.KIND_ADMISSION_CHECK
)
CLUSTER_QUEUES: Final = Resource(
    c.KUEUE_GROUP, c.KUEUE_VERSION, "clusterqueues", namespaced=False, kind=c.KIND_CLUSTER_QUEUE
)
WORKLOADS: Final = Resource(c.KUEUE_GROUP, c.KUEUE_VERSION, "workloads", namespaced=True, kind=c.KIND_WORKLOAD)
JOBSETS: Final = Resource(c.JOBSET_GROUP, c.JOBSET_VERSION, "jobsets", namespaced=True, kind=c.KIND_JOBSET)


# --- decoding ---------------------------------------------------------------------------------

_MF_START: Final = b',"managedFields":['
_MF_END: Final = b']},"spec":'


def strip_managed_fields(data: bytes | bytearray) -> bytes | bytearray:
    """Remove every ``"managedFields":[...]`` of built-in objects from serialized JSON.

    The field is the last one of ObjectMeta and the next key after metadata is
    ``spec`` (Go struct order), so it ends at the first ``]},"spec":`` after its
    start: that byte sequence cannot occur inside managedFields (no key there is
    ``spec``; fieldsV1 keys carry an ``f:``/``k:``/``v:``/``i:`` prefix; inside a
    string the quote would be escaped). Input without the field is returned as is.
    """
    start = data.find(_MF_START)
    if start < 0:
        return data
    parts: list[bytes | bytearray] = []
    pos = 0
    while start >= 0:
        end = data.find(_MF_END, start)
        if end < 0:
            break
        parts.append(data[pos:start])
        pos = end + 1  # keep "},"spec":..."
        start = data.find(_MF_START, pos)
    if not parts:
        return data
    parts.append(data[pos:])
    return b"".join(parts)


_DECODER: Final = json.JSONDecoder()


def _loads(data: bytes | bytearray) -> Any:
    # The API server sends UTF-8 JSON; decoding the text ourselves skips json.loads's encoding sniffing.
    text = data.decode("utf-8")
    obj, end = _DECODER.raw_decode(text)
    if end != len(text) and text[end:].strip():
        raise ValueError(f"extra data after JSON document at offset {end}")
    return obj


def decode(data: bytes | bytearray, *, strip: bool = False) -> Any:
    """Decode one JSON document (a watch event line or a list page)."""
    if strip:
        try:
            return _loads(strip_managed_fields(data))
        except ValueError:
            pass  # not the shape we expected: decode the untouched bytes
    return _loads(data)


# --- errors -----------------------------------------------------------------------------------


class ApiStatusError(Exception):
    """A non-2xx response, or a watch ``ERROR`` event, with its ``Status``."""

    def __init__(self, code: int, reason: str = "", message: str = "") -> None:
        super().__init__(f"{code} {reason}: {message}".strip())
        self.code = code
        self.reason = reason
        self.message = message

    @classmethod
    def from_status(cls, status: Mapping[str, Any], default_code: int = 0) -> ApiStatusError:
        code = status.get("code")
        return cls(
            code if isinstance(code, int) else default_code,
            str(status.get("reason") or ""),
            str(status.get("message") or ""),
        )

    @property
    def gone(self) -> bool:
        return self.code == 410 or self.reason in ("Expired", "Gone")


# --- handlers and stats -----------------------------------------------------------------------

AddHandler = Callable[[T], None]
UpdateHandler = Callable[[T, T], None]
DeleteHandler = Callable[[T], None]


@dataclass(slots=True)
class InformerStats:
    """Counters and timestamps for metrics (wall-clock seconds, ``time.time()``)."""

    events: int = 0  # ADDED/MODIFIED/DELETED received on watches
    bookmarks: int = 0
    lists: int = 0  # completed LISTs (the first one included)
    relists: int = 0  # LISTs after a 410
    watches: int = 0  # watch requests opened
    watch_errors: int = 0  # broken streams, failed requests, non-410 errors
    transform_errors: int = 0
    handler_errors: int = 0
    last_event_time: float = 0.0  # last event or bookmark received
    last_list_time: float = 0.0
    last_list_seconds: float = 0.0
    watch_started_time: float = 0.0


class Informer(Generic[T]):
    """List + watch one resource into a ``Store``, calling handlers on every change.

    ``client`` is a ``kubernetes_asyncio.client.ApiClient``; the informer does not
    own it (close it yourself). ``transform`` turns a raw object dict into what the
    store keeps; ``None`` means "do not keep" (and an object that was kept and now
    transforms to None is delivered as a delete). An exception in ``transform`` is
    logged and treated as None.

    Handlers run after the store has been updated. ``on_update(old, new)`` gets the
    previously stored and the new object; ``on_delete`` gets the last stored object
    (what consumers saw last, so usage charged from it can be released exactly),
    both for watched deletes and for deletes found by a relist.
    """

    def __init__(
        self,
        client: Any,
        resource: Resource,
        transform: Callable[[RawObject], T | None],
        *,
        store: Store[T] | None = None,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        page_size: int = 500,
        watch_timeout_seconds: int = 290,
        read_timeout_seconds: float | None = None,
        list_timeout_seconds: float = 300.0,
        backoff_initial: float = 0.2,
        backoff_max: float = 30.0,
        suppress_unchanged: bool = False,
        name: str | None = None,
    ) -> None:
        """``read_timeout_seconds`` bounds silence on an open watch (default: the watch
        timeout + 60 s; bookmarks arrive about once a minute). ``suppress_unchanged``
        skips ``on_update`` when the transformed object compares equal to the stored one
        (the store still takes the new object)."""
        self._client = client
        self.resource = resource
        self._transform = transform
        self.store: Store[T] = store if store is not None else Store()
        self.namespace = namespace
        self.label_selector = label_selector
        self.field_selector = field_selector
        self.page_size = page_size
        self.watch_timeout_seconds = watch_timeout_seconds
        self.read_timeout_seconds = (
            read_timeout_seconds if read_timeout_seconds is not None else watch_timeout_seconds + 60.0
        )
        self.list_timeout_seconds = list_timeout_seconds
        self.backoff_initial = backoff_initial
        self.backoff_max = backoff_max
        self.suppress_unchanged = suppress_unchanged
        self.name = name or str(resource)
        self.synced = asyncio.Event()
        self.resource_version = ""
        self.stats = InformerStats()
        self.connected = False
        self._path = resource.path(namespace)
        self._strip = resource.strip_managed_fields
        self._on_add: list[AddHandler[T]] = []
        self._on_update: list[UpdateHandler[T]] = []
        self._on_delete: list[DeleteHandler[T]] = []
        self._task: asyncio.Task[None] | None = None
        self._log = log.bind(informer=self.name)

    # --- consumers --------------------------------------------------------------------------

    def add_handler(
        self,
        on_add: AddHandler[T] | None = None,
        on_update: UpdateHandler[T] | None = None,
        on_delete: DeleteHandler[T] | None = None,
        *,
        replay: bool = True,
    ) -> None:
        """Register handlers. With ``replay`` (default) ``on_add`` is called at once for
        every object already in the store, so a late consumer sees the same stream."""
        if on_add is not None:
            self._on_add.append(on_add)
            if replay:
                for obj in self.store.values():
                    self._call(on_add, obj)
        if on_update is not None:
            self._on_update.append(on_update)
        if on_delete is not None:
            self._on_delete.append(on_delete)

    async def wait_synced(self, timeout: float | None = None) -> None:
        await asyncio.wait_for(self.synced.wait(), timeout)

    def seconds_since_last_event(self, now: float | None = None) -> float | None:
        """Staleness: seconds since the last event or bookmark (None before the first list)."""
        last = max(self.stats.last_event_time, self.stats.last_list_time, self.stats.watch_started_time)
        if last == 0.0:
            return None
        return (time.time() if now is None else now) - last

    @property
    def lag_seconds(self) -> float | None:
        return self.seconds_since_last_event()

    # --- lifecycle --------------------------------------------------------------------------

    def start(self) -> asyncio.Task[None]:
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self.run(), name=f"informer-{self.name}")
        return self._task

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def run(self) -> None:
        """List, then watch forever (until cancelled)."""
        need_list = True
        failures = 0
        while True:
            try:
                if need_list:
                    await self._list()
                    need_list = False
                    if not self.synced.is_set():
                        self.synced.set()
                        self._log.info(
                            "informer_synced", objects=len(self.store), resource_version=self.resource_version
                        )
                started = time.monotonic()
                received = await self._watch()
                if received == 0 and time.monotonic() - started < 1.0:
                    # The server ended an empty watch at once; do not spin.
                    failures += 1
                    await asyncio.sleep(self._backoff(failures))
                else:
                    failures = 0
            except asyncio.CancelledError:
                raise
            except ApiStatusError as exc:
                self.connected = False
                if exc.gone:
                    self._log.info(
                        "informer_relist",
                        reason=exc.reason,
                        message=exc.message,
                        listing=need_list,
                        resource_version=self.resource_version,
                    )
                    if need_list:  # an expired continue token: list again, but not in a tight loop
                        failures += 1
                        await asyncio.sleep(self._backoff(failures))
                    else:
                        need_list = True
                        self.stats.relists += 1
                    continue
                failures += 1
                self.stats.watch_errors += 1
                delay = self._backoff(failures)
                self._log.warning(
                    "informer_request_failed",
                    code=exc.code,
                    reason=exc.reason,
                    message=exc.message,
                    retry_in=round(delay, 3),
                )
                await asyncio.sleep(delay)
            except (TimeoutError, aiohttp.ClientError, OSError, ValueError) as exc:
                # ClientError covers ClientPayloadError/TransferEncodingError and disconnects;
                # ValueError covers an undecodable line or list page.
                self.connected = False
                failures += 1
                self.stats.watch_errors += 1
                delay = self._backoff(failures)
                self._log.info(
                    "informer_stream_broken",
                    error=type(exc).__name__,
                    detail=str(exc)[:200],
                    listing=need_list,
                    resource_version=self.resource_version,
                    retry_in=round(delay, 3),
                )
                await asyncio.sleep(delay)
            except Exception:
                # A bug or an unexpected response shape must not end the informer silently.
                self.connected = False
                need_list = True
                failures += 1
                self.stats.watch_errors += 1
                delay = self._backoff(failures)
                self._log.exception("informer_unexpected_error", retry_in=round(delay, 3))
                await asyncio.sleep(delay)

    def _backoff(self, failures: int) -> float:
        if failures <= 1:
            return self.backoff_initial * random.random()  # first retry: almost at once
        delay: float = min(self.backoff_max, self.backoff_initial * 2 ** (failures - 1))
        return delay * (0.5 + random.random() / 2)

    # --- HTTP -------------------------------------------------------------------------------

    def _selectors(self) -> list[tuple[str, str]]:
        params: list[tuple[str, str]] = []
        if self.label_selector:
            params.append(("labelSelector", self.label_selector))
        if self.field_selector:
            params.append(("fieldSelector", self.field_selector))
        return params

    async def _get(self, params: list[tuple[str, str]], timeout: aiohttp.ClientTimeout) -> aiohttp.ClientResponse:
        response: aiohttp.ClientResponse = await self._client.call_api(
            self._path,
            "GET",
            query_params=params,
            header_params={"Accept": "application/json"},
            auth_settings=["BearerToken"],
            _preload_content=False,
            _request_timeout=timeout,
        )
        if response.status >= 300:
            try:
                body = await response.read()
            finally:
                response.release()
            raise self._status_error(response.status, body)
        return response

    @staticmethod
    def _status_error(http_status: int, body: bytes) -> ApiStatusError:
        try:
            status = json.loads(body)
        except ValueError:
            status = None
        if isinstance(status, dict) and status.get("kind") == "Status":
            err = ApiStatusError.from_status(status, default_code=http_status)
            if err.code == 0:
                err.code = http_status
            return err
        return ApiStatusError(http_status, "", body[:200].decode("utf-8", "replace"))

    # --- LIST -------------------------------------------------------------------------------

    async def _list(self) -> None:
        """Paginated LIST, applied to the store as a diff (adds, updates, deletes)."""
        began = time.monotonic()
        timeout = aiohttp.ClientTimeout(total=self.list_timeout_seconds)
        seen: set[str] = set()
        list_rv = ""
        token = ""
        while True:
            params = self._selectors()
            if self.page_size > 0:
                params.append(("limit", str(self.page_size)))
            if token:
                params.append(("continue", token))
            response = await self._get(params, timeout)
            try:
                body = await response.read()
            finally:
                response.release()
            page = decode(body, strip=self._strip)
            del body
            meta = page.get("metadata") or {}
            if not list_rv:
                list_rv = str(meta.get("resourceVersion") or "")
            for item in page.get("items") or ():
                imeta = item.get("metadata") or {}
                key = object_key(imeta.get("namespace"), imeta.get("name") or "")
                seen.add(key)
                item_rv = imeta.get("resourceVersion") or ""
                if item_rv and self.store.resource_version(key) == item_rv:
                    continue  # unchanged since we last saw it
                self._upsert(key, item, item_rv)
            token = str(meta.get("continue") or "")
            if not token:
                break
        for key in self.store:  # iterates over a copy of the keys
            if key not in seen:
                self._remove(key)
        self.resource_version = list_rv
        self.stats.lists += 1
        self.stats.last_list_time = time.time()
        self.stats.last_list_seconds = time.monotonic() - began
        self._log.debug(
            "informer_listed",
            objects=len(self.store),
            resource_version=list_rv,
            seconds=round(self.stats.last_list_seconds, 3),
        )

    # --- WATCH ------------------------------------------------------------------------------

    async def _watch(self) -> int:
        """One watch request from ``resource_version``; returns the number of lines handled.

        Returns normally when the server ends the watch; raises on errors."""
        params = [
            ("watch", "1"),
            ("resourceVersion", self.resource_version),
            ("allowWatchBookmarks", "true"),
            ("timeoutSeconds", str(self.watch_timeout_seconds)),
            *self._selectors(),
        ]
        timeout = aiohttp.ClientTimeout(total=None, sock_connect=30.0, sock_read=self.read_timeout_seconds)
        self.stats.watches += 1
        response = await self._get(params, timeout)
        self.connected = True
        self.stats.watch_started_time = time.time()
        handled = 0
        buf = bytearray()
        finished = False
        try:
            async for chunk in response.content.iter_any():
                scan = len(buf)  # no newline before this: do not rescan a long partial line
                buf += chunk
                start = 0
                while True:
                    end = buf.find(b"\n", scan)
                    if end < 0:
                        break
                    if end > start:
                        self.handle_line(buf[start:end])
                        handled += 1
                    start = scan = end + 1
                if start:
                    del buf[:start]
            if buf.strip():
                # A last event without its newline; only complete JSON is accepted.
                self.handle_line(buf)
                handled += 1
            finished = True
        finally:
            self.connected = False
            if finished:
                response.release()
            else:
                response.close()  # never pool a connection left in the middle of a stream
        return handled

    def handle_line(self, line: bytes | bytearray) -> None:
        """Decode and apply one watch event line (raises ApiStatusError for ERROR events)."""
        event = decode(line, strip=self._strip)
        self.handle_event(event.get("type") or "", event.get("object") or {})

    def handle_event(self, event_type: str, obj: RawObject) -> None:
        """Apply one decoded watch event to the store and the handlers."""
        meta = obj.get("metadata") or {}
        rv = meta.get("resourceVersion") or ""
        self.stats.last_event_time = time.time()
        if event_type == EVENT_BOOKMARK:
            self.stats.bookmarks += 1
            if rv:
                self.resource_version = rv
            return
        if event_type == EVENT_ERROR:
            raise ApiStatusError.from_status(obj)
        key = object_key(meta.get("namespace"), meta.get("name") or "")
        self.stats.events += 1
        if event_type == EVENT_DELETED:
            self._remove(key)
        elif event_type in (EVENT_ADDED, EVENT_MODIFIED):
            self._upsert(key, obj, rv)
        else:
            self._log.warning("informer_unknown_event", type=event_type, key=key)
        if rv:
            self.resource_version = rv

    # --- store + handlers -------------------------------------------------------------------

    def _upsert(self, key: str, raw: RawObject, rv: str) -> None:
        try:
            new = self._transform(raw)
        except Exception as exc:
            self.stats.transform_errors += 1
            self._log.warning("informer_transform_failed", key=key, error=type(exc).__name__, detail=str(exc)[:200])
            new = None
        if new is None:
            self._remove(key)
            return
        old = self.store.put(key, new, rv)
        if old is None:
            for on_add in self._on_add:
                self._call(on_add, new)
        elif not (self.suppress_unchanged and old == new):
            for on_update in self._on_update:
                self._call2(on_update, old, new)

    def _remove(self, key: str) -> None:
        old = self.store.pop(key)
        if old is not None:
            for on_delete in self._on_delete:
                self._call(on_delete, old)

    def _call(self, fn: Callable[[T], None], obj: T) -> None:
        try:
            fn(obj)
        except Exception:
            self.stats.handler_errors += 1
            self._log.exception("informer_handler_failed", handler=getattr(fn, "__qualname__", repr(fn)))

    def _call2(self, fn: Callable[[T, T], None], old: T, new: T) -> None:
        try:
            fn(old, new)
        except Exception:
            self.stats.handler_errors += 1
            self._log.exception("informer_handler_failed", handler=getattr(fn, "__qualname__", repr(fn)))


# --- ready-made transforms --------------------------------------------------------------------


def raw_transform(raw: RawObject) -> RawObject:
    """Keep the raw dict, without ``metadata.managedFields``."""
    meta = raw.get("metadata")
    if isinstance(meta, dict):
        meta.pop("managedFields", None)
    return raw


def model_transform(model: type[M]) -> Callable[[RawObject], M]:
    """Keep ``model.model_validate(raw)`` (a pydantic model class from ``kueue_tas.api.models``)."""

    def transform(raw: RawObject) -> M:
        return model.model_validate(raw)

    return transform


def informers_synced(informers: Iterable[Informer[Any]]) -> bool:
    return all(inf.synced.is_set() for inf in informers)
