"""The controller manager (controller-runtime's shape): it owns the API client, ONE shared
informer per resource, their start and sync, the readiness check and the informer-lag metric,
and runs the registered reconcilers once every cache has synced.

Reconcilers never start informers or poll for sync themselves: the manager starts the
informers, waits until each has listed once, runs the ``on_synced`` hooks (in registration
order, e.g. rebuilding a model from the full caches), and only then starts the runnables.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from kueue_tas.kube.catalogue import Resource
from kueue_tas.kube.client import ClientConfigError, make_api_client
from kueue_tas.kube.decoding import RawObject
from kueue_tas.kube.events import EventRecorder
from kueue_tas.kube.informer import Informer
from kueue_tas.kube.stores import Store
from kueue_tas.runtime.config import ConfigError, Settings
from kueue_tas.runtime.logging import get_logger
from kueue_tas.runtime.metrics import Metrics

log = get_logger(__name__)

T = TypeVar("T")

Runnable = Callable[[], Awaitable[None]]


def pool_size(settings: Settings, *, watches: int = 8, margin: int = 8) -> int:
    """Every open watch pins one HTTP/1.1 connection; patches run ``patch_concurrency`` wide,
    admission writes ``admission_workers`` wide."""
    return watches + settings.patch_concurrency + settings.admission_workers + margin


async def connect(settings: Settings, *, watches: int = 8, margin: int = 8) -> Any:
    """An ApiClient from ``settings.kubeconfig``, else in-cluster, else ``$KUBECONFIG`` /
    ``~/.kube/config``; a bad configuration is a ConfigError. Close it with ``await api.close()``."""
    try:
        api, source = await make_api_client(
            settings.kubeconfig,
            pool=pool_size(settings, watches=watches, margin=margin),
            qps=settings.api_qps,
            burst=settings.api_burst,
        )
    except ClientConfigError as exc:
        raise ConfigError(str(exc)) from exc
    cfg = api.configuration
    log.info(
        "api_client_ready",
        source=source,
        host=cfg.host,
        pool=cfg.connection_pool_maxsize,
        qps=settings.api_qps,
        burst=settings.api_burst,
    )
    return api


class Manager:
    def __init__(self, api: Any, settings: Settings, metrics: Metrics) -> None:
        self.api = api
        self.settings = settings
        self.metrics = metrics
        self._informers: dict[Resource, Informer[Any]] = {}
        self._transforms: dict[Resource, Callable[[RawObject], Any]] = {}
        self._synced_hooks: list[Callable[[], None]] = []
        self._runnables: dict[str, Runnable] = {}
        self._events: EventRecorder | None = None
        metrics.set_collect_hook("informer_lag", self.publish_lag)

    # --- what reconcilers are given -------------------------------------------------------------

    def informer(
        self,
        resource: Resource,
        transform: Callable[[RawObject], T | None],
        *,
        store: Store[T] | None = None,
        name: str | None = None,
    ) -> Informer[T]:
        """The shared informer of ``resource`` (created on first request). Every consumer of a
        resource shares its store, so a second request must name the same ``transform``."""
        existing = self._informers.get(resource)
        if existing is not None:
            if self._transforms[resource] is not transform or (store is not None and store is not existing.store):
                raise ValueError(f"the shared informer of {resource} already keeps another form of the objects")
            return existing
        created: Informer[T] = Informer(self.api, resource, transform, store=store, name=name)
        self._informers[resource] = created
        self._transforms[resource] = transform
        return created

    @property
    def event_recorder(self) -> EventRecorder:
        """The one Event recorder, reporting as the configured ``controller_name``."""
        if self._events is None:
            self._events = EventRecorder(self.api, controller=self.settings.controller_name)
        return self._events

    def on_synced(self, hook: Callable[[], None]) -> None:
        """Run ``hook`` once every informer has synced, before any runnable starts."""
        self._synced_hooks.append(hook)

    def add(self, name: str, runnable: Runnable) -> None:
        """Run ``runnable()`` after the caches synced, until the manager stops."""
        if name in self._runnables:
            raise ValueError(f"a runnable named {name!r} is already registered")
        self._runnables[name] = runnable

    # --- sync and readiness ---------------------------------------------------------------------

    def synced(self) -> bool:
        return all(i.synced.is_set() for i in self._informers.values())

    async def wait_for_sync(self) -> None:
        for informer in self._informers.values():
            await informer.wait_synced()

    def readiness(self) -> tuple[bool, str]:
        """The ``informers`` readiness check: every shared informer has listed once."""
        waiting = sorted(i.name for i in self._informers.values() if not i.synced.is_set())
        if not self._informers:
            return False, "informers not started"
        if waiting:
            return False, f"informers not synced yet: {', '.join(waiting)}"
        return True, "informers synced"

    def publish_lag(self) -> None:
        """``kueue_tas_informer_lag_seconds`` per resource (read at every scrape)."""
        for informer in self._informers.values():
            lag = informer.seconds_since_last_event()
            if lag is not None:
                self.metrics.informer_lag_seconds.labels(str(informer.resource)).set(max(lag, 0.0))

    # --- running --------------------------------------------------------------------------------

    async def run(self) -> None:
        """Start the informers, wait for every one to sync, run the hooks, then the runnables
        until one of them ends or fails (or this is cancelled); the informers stop with it."""
        for informer in self._informers.values():
            informer.start()
        tasks: list[asyncio.Task[None]] = []
        try:
            await self.wait_for_sync()
            for hook in self._synced_hooks:
                hook()
            log.info("caches_synced", informers=sorted(i.name for i in self._informers.values()))
            tasks = [asyncio.create_task(self._call(run), name=name) for name, run in self._runnables.items()]
            if tasks:
                done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
                for task in done:
                    task.result()  # a failed runnable fails the manager
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            for informer in self._informers.values():
                await informer.stop()

    @staticmethod
    async def _call(run: Runnable) -> None:
        await run()
