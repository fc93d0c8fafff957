"""An informer: one reflector feeding a typed store, with handlers called on every change.

``transform`` turns a raw object dict into what the store keeps; ``None`` means "do not keep"
(an object that was kept and now transforms to None is delivered as a delete). An exception in
``transform`` is logged and treated as None.

Handlers run on the event loop, in event order, after the store has been updated; they must be
quick (enqueue work, adjust counters). ``on_update(old, new)`` gets the previously stored and
the new object; ``on_delete`` gets the last stored object (what consumers saw last, so usage
charged from it can be released exactly), for watched deletes and for deletes found by a relist.
An exception in a handler is logged and does not stop the informer.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Iterable
from typing import Any, Generic, TypeVar

import structlog

from kueue_tas.kube.catalogue import Resource
from kueue_tas.kube.decoding import RawObject
from kueue_tas.kube.reflector import InformerStats, Reflector
from kueue_tas.kube.stores import Store

log = structlog.get_logger(__name__)

T = TypeVar("T")

AddHandler = Callable[[T], None]
UpdateHandler = Callable[[T, T], None]
DeleteHandler = Callable[[T], None]


class Informer(Generic[T]):
    """See the module docstring. ``client`` is a ``kubernetes_asyncio`` ``ApiClient`` (not owned).

    ``suppress_unchanged`` skips ``on_update`` when the transformed object compares equal to the
    stored one (the store still takes the new object). The other keywords tune the reflector.
    """

    def __init__(
        self,
        client: Any,
        resource: Resource,
        transform: Callable[[RawObject], T | None],
        *,
        store: Store[T] | None = None,
        suppress_unchanged: bool = False,
        name: str | None = None,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        page_size: int = 500,
        watch_timeout_seconds: int = 290,
        read_timeout_seconds: float | None = None,
        list_timeout_seconds: float = 300.0,
        backoff_initial: float = 0.2,
        backoff_max: float = 30.0,
    ) -> None:
        self.resource = resource
        self.name = name or str(resource)
        self.store: Store[T] = store if store is not None else Store()
        self.suppress_unchanged = suppress_unchanged
        self.synced = asyncio.Event()
        self.stats = InformerStats()
        self._transform = transform
        self._on_add: list[AddHandler[T]] = []
        self._on_update: list[UpdateHandler[T]] = []
        self._on_delete: list[DeleteHandler[T]] = []
        self._task: asyncio.Task[None] | None = None
        self._log = log.bind(informer=self.name)
        self.reflector = Reflector(
            client,
            resource,
            self,
            namespace=namespace,
            label_selector=label_selector,
            field_selector=field_selector,
            page_size=page_size,
            watch_timeout_seconds=watch_timeout_seconds,
            read_timeout_seconds=read_timeout_seconds,
            list_timeout_seconds=list_timeout_seconds,
            backoff_initial=backoff_initial,
            backoff_max=backoff_max,
            stats=self.stats,
            on_listed=self._listed,
            name=self.name,
        )

    # --- what the reflector reports -------------------------------------------------------------

    @property
    def resource_version(self) -> str:
        return self.reflector.resource_version

    @property
    def connected(self) -> bool:
        return self.reflector.connected

    def seconds_since_last_event(self, now: float | None = None) -> float | None:
        return self.reflector.seconds_since_last_event(now)

    def handle_line(self, line: bytes | bytearray) -> None:
        self.reflector.handle_line(line)

    def handle_event(self, event_type: str, obj: RawObject) -> None:
        self.reflector.handle_event(event_type, obj)

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

    # --- lifecycle --------------------------------------------------------------------------

    def start(self) -> asyncio.Task[None]:
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self.reflector.run(), name=f"informer-{self.name}")
        return self._task

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    def _listed(self) -> None:
        if not self.synced.is_set():
            self.synced.set()
            self._log.info("informer_synced", objects=len(self.store), resource_version=self.resource_version)

    # --- the reflector's sink: store + handlers ----------------------------------------------

    def version_of(self, key: str) -> str | None:
        return self.store.resource_version(key)

    def keys(self) -> Iterable[str]:
        return self.store.keys()

    def upsert(self, key: str, raw: RawObject, resource_version: str) -> None:
        try:
            new = self._transform(raw)
        except Exception as exc:
            self.stats.transform_errors += 1
            self._log.warning("informer_transform_failed", key=key, error=type(exc).__name__, detail=str(exc)[:200])
            new = None
        if new is None:
            self.remove(key)
            return
        old = self.store.put(key, new, resource_version)
        if old is None:
            for on_add in self._on_add:
                self._call(on_add, new)
        elif not (self.suppress_unchanged and old == new):
            for on_update in self._on_update:
                self._call2(on_update, old, new)

    def remove(self, key: str) -> None:
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
