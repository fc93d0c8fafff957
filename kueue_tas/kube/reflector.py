"""The reflector: LIST one resource, then WATCH it from the list's resourceVersion, forever.

It knows HTTP and the watch protocol, nothing about what is kept: every object it sees goes to
a :class:`Sink` (the informer's store and handlers) as an upsert or a remove.

* Requests go through :func:`kueue_tas.kube.client.send` (the ``ApiClient``'s host, TLS and
  auth, refreshed tokens included); bodies are decoded with ``json`` into plain dicts.
* LIST is paginated (``limit``/``continue``); an expired continue token restarts it. A LIST is
  applied as a diff: objects missing from it are removed, objects whose resourceVersion the
  sink already holds are skipped.
* WATCH asks for bookmarks (``allowWatchBookmarks=true``); every event and bookmark advances
  the resourceVersion.
* A broken stream (connection errors, payload errors, timeouts) or a server-side end of the
  watch re-watches from the last resourceVersion, so nothing is lost and nothing is replayed.
* 410 Gone (an ``ERROR`` event with code 410, or an HTTP 410) re-LISTs.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Final, Protocol

import aiohttp
import structlog

from kueue_tas.kube.catalogue import Resource
from kueue_tas.kube.client import send
from kueue_tas.kube.decoding import RawObject, decode
from kueue_tas.kube.errors import ApiError, TransportError, from_status
from kueue_tas.kube.stores import object_key

log = structlog.get_logger(__name__)

EVENT_ADDED: Final = "ADDED"
EVENT_MODIFIED: Final = "MODIFIED"
EVENT_DELETED: Final = "DELETED"
EVENT_BOOKMARK: Final = "BOOKMARK"
EVENT_ERROR: Final = "ERROR"


@dataclass(slots=True)
class InformerStats:
    """Counters and timestamps of one list/watch stream and its consumers (wall-clock seconds)."""

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


class Sink(Protocol):
    """Where a reflector puts what it sees (keys are ``namespace/name`` or ``name``)."""

    def version_of(self, key: str) -> str | None: ...

    def keys(self) -> Iterable[str]: ...

    def upsert(self, key: str, raw: RawObject, resource_version: str) -> None: ...

    def remove(self, key: str) -> None: ...


class Reflector:
    """List + watch one resource into a :class:`Sink`. ``client`` is a ``kubernetes_asyncio``
    ``ApiClient`` the reflector does not own. ``on_listed`` runs after every complete LIST."""

    def __init__(
        self,
        client: Any,
        resource: Resource,
        sink: Sink,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        page_size: int = 500,
        watch_timeout_seconds: int = 290,
        read_timeout_seconds: float | None = None,
        list_timeout_seconds: float = 300.0,
        backoff_initial: float = 0.2,
        backoff_max: float = 30.0,
        stats: InformerStats | None = None,
        on_listed: Callable[[], None] | None = None,
        name: str | None = None,
    ) -> None:
        """``read_timeout_seconds`` bounds silence on an open watch (default: the watch
        timeout + 60 s; bookmarks arrive about once a minute)."""
        self._client = client
        self.resource = resource
        self._sink = sink
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
        self.stats = stats if stats is not None else InformerStats()
        self.resource_version = ""
        self.connected = False
        self._on_listed = on_listed
        self._path = resource.path(namespace)
        self._strip = resource.strip_managed_fields
        self._log = log.bind(informer=name or str(resource))

    def seconds_since_last_event(self, now: float | None = None) -> float | None:
        """Staleness: seconds since the last event or bookmark (None before the first list)."""
        last = max(self.stats.last_event_time, self.stats.last_list_time, self.stats.watch_started_time)
        if last == 0.0:
            return None
        return (time.time() if now is None else now) - last

    # --- the loop ---------------------------------------------------------------------------

    async def run(self) -> None:
        """List, then watch forever (until cancelled)."""
        need_list = True
        failures = 0
        while True:
            try:
                if need_list:
                    await self._list()
                    need_list = False
                    if self._on_listed is not None:
                        self._on_listed()
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
            except (TransportError, aiohttp.ClientError, TimeoutError, OSError, ValueError) as exc:
                # ClientError covers ClientPayloadError/TransferEncodingError and disconnects
                # mid-stream; ValueError covers an undecodable line or list page.
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
            except ApiError as exc:
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
                    code=exc.status,
                    reason=exc.reason,
                    message=exc.message,
                    retry_in=round(delay, 3),
                )
                await asyncio.sleep(delay)
            except Exception:
                # A bug or an unexpected response shape must not end the reflector silently.
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

    def _selectors(self) -> list[tuple[str, str]]:
        params: list[tuple[str, str]] = []
        if self.label_selector:
            params.append(("labelSelector", self.label_selector))
        if self.field_selector:
            params.append(("fieldSelector", self.field_selector))
        return params

    # --- LIST -------------------------------------------------------------------------------

    async def _list(self) -> None:
        """Paginated LIST, applied to the sink as a diff (upserts, removes)."""
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
            response = await send(self._client, "GET", self._path, query=params, timeout=timeout)
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
                if item_rv and self._sink.version_of(key) == item_rv:
                    continue  # unchanged since we last saw it
                self._sink.upsert(key, item, item_rv)
            token = str(meta.get("continue") or "")
            if not token:
                break
        for key in list(self._sink.keys()):
            if key not in seen:
                self._sink.remove(key)
        self.resource_version = list_rv
        self.stats.lists += 1
        self.stats.last_list_time = time.time()
        self.stats.last_list_seconds = time.monotonic() - began
        self._log.debug("informer_listed", resource_version=list_rv, seconds=round(self.stats.last_list_seconds, 3))

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
        response = await send(self._client, "GET", self._path, query=params, timeout=timeout)
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
        """Decode and apply one watch event line (raises ApiError for ERROR events)."""
        event = decode(line, strip=self._strip)
        self.handle_event(event.get("type") or "", event.get("object") or {})

    def handle_event(self, event_type: str, obj: RawObject) -> None:
        """Apply one decoded watch event to the sink."""
        meta = obj.get("metadata") or {}
        rv = meta.get("resourceVersion") or ""
        self.stats.last_event_time = time.time()
        if event_type == EVENT_BOOKMARK:
            self.stats.bookmarks += 1
            if rv:
                self.resource_version = rv
            return
        if event_type == EVENT_ERROR:
            raise from_status(obj)
        key = object_key(meta.get("namespace"), meta.get("name") or "")
        self.stats.events += 1
        if event_type == EVENT_DELETED:
            self._sink.remove(key)
        elif event_type in (EVENT_ADDED, EVENT_MODIFIED):
            self._sink.upsert(key, obj, rv)
        else:
            self._log.warning("informer_unknown_event", type=event_type, key=key)
        if rv:
            self.resource_version = rv
