"""An invariant monitor on a live cluster: watches nodes, pods and Workloads and feeds every event
to ``e2e.invariants.InvariantChecker``.

Each resource has its own list + watch loop on raw JSON (no generated models: they drop fields
and are slow). A watch that ends is resumed from its last resourceVersion; one that fails (the
apiserver restarted, the connection was cut, 410 Gone) is replaced by a fresh list, which
``InvariantChecker.resync`` turns into the deletions and changes the gap hid. The monitor must
outlive every fault a chaos run injects, so no error stops a loop; ``errors`` counts them.

Use from a test (``invariant_monitor`` fixture in ``e2e/tests/conftest.py``) or the chaos
campaign: ``await Monitor(api, checks=[...], namespace=ns, node_selector=...).start()``, then
``await monitor.stop()`` and read ``violations`` and ``checks``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Collection
from dataclasses import dataclass, field
from typing import Any

from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from e2e.invariants import InvariantChecker, Violation
from e2e.kube import KUEUE_GROUP, KUEUE_VERSION
from kueue_tas.api import constants as kc

WATCH_SECONDS = 30
RESOURCES = ("nodes", "pods", "workloads")
Call = Callable[..., Awaitable[Any]]


class _Gone(Exception):
    """The watch's resourceVersion is too old: list again."""


def _raise_for_status(status: int, body: bytes) -> None:
    if status == 410:
        raise _Gone()
    raise ApiException(status=status, reason=body[:200].decode(errors="replace"))


@dataclass
class Monitor:
    api: client.ApiClient
    checks: Collection[str]
    namespace: str | None = None
    node_selector: str | None = None
    pending_bound_s: float = 60.0
    confirm_s: float = 2.0
    tick_s: float = 0.5
    scheduling_gate: str = kc.SCHEDULING_GATE
    checker: InvariantChecker = field(init=False)
    errors: Counter[str] = field(init=False, default_factory=Counter)
    events: Counter[str] = field(init=False, default_factory=Counter)
    _tasks: list[asyncio.Task[None]] = field(init=False, default_factory=list)
    _synced: dict[str, asyncio.Event] = field(init=False, default_factory=dict)
    _down: set[str] = field(init=False, default_factory=set)  # resources whose stream failed, until listed again
    _started: float = field(init=False, default=0.0)

    def __post_init__(self) -> None:
        self.checker = InvariantChecker(
            set(self.checks), self.pending_bound_s, self.confirm_s, scheduling_gate=self.scheduling_gate
        )
        self._core = client.CoreV1Api(self.api)
        self._custom = client.CustomObjectsApi(self.api)

    def now(self) -> float:
        """Seconds since ``start`` (violations carry it)."""
        return time.monotonic() - self._started

    @property
    def running(self) -> bool:
        return bool(self._tasks)

    @property
    def violations(self) -> list[Violation]:
        return self.checker.violations

    async def start(self, sync_timeout_s: float = 30) -> Monitor:
        """Start watching; returns once each resource's first list is in."""
        self._started = time.monotonic()
        for r in RESOURCES:
            self._synced[r] = asyncio.Event()
            self._tasks.append(asyncio.create_task(self._loop(r), name=f"monitor-{r}"))
        self._tasks.append(asyncio.create_task(self._ticker(), name="monitor-tick"))
        await asyncio.wait_for(asyncio.gather(*(e.wait() for e in self._synced.values())), sync_timeout_s)
        return self

    async def stop(self) -> list[Violation]:
        """Stop watching, settle what is open, and return the violations."""
        for t in self._tasks:
            t.cancel()
        for t in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await t
        self._tasks.clear()
        self.checker.finish(self.now())
        return self.violations

    def report(self) -> str:
        checks = ", ".join(f"{k} {v}" for k, v in sorted(self.checker.checks.items()))
        lines = [f"invariant checks: {checks or 'none'}; violations: {len(self.violations)}"]
        lines += ["  " + v.line() for v in self.violations]
        return "\n".join(lines)

    # ------------------------------------------------------------------ watching

    def _call(self, resource: str) -> tuple[Call, tuple[Any, ...], dict[str, Any]]:
        ns = self.namespace
        if resource == "nodes":
            kw = {"label_selector": self.node_selector} if self.node_selector else {}
            return self._core.list_node, (), kw
        if resource == "pods":
            if ns:
                return self._core.list_namespaced_pod, (ns,), {}
            return self._core.list_pod_for_all_namespaces, (), {}
        if ns:
            return self._custom.list_namespaced_custom_object, (KUEUE_GROUP, KUEUE_VERSION, ns, "workloads"), {}
        return self._custom.list_cluster_custom_object, (KUEUE_GROUP, KUEUE_VERSION, "workloads"), {}

    def _feed(self, resource: str, kind: str, obj: dict[str, Any]) -> None:
        self.events[resource] += 1
        now = self.now()
        if resource == "nodes":
            self.checker.node_event(kind, obj, now)
        elif resource == "pods":
            self.checker.pod_event(kind, obj, now)
        else:
            self.checker.workload_event(kind, obj, now)

    async def _loop(self, resource: str) -> None:
        while True:
            try:
                rv = await self._list(resource)
                self._synced[resource].set()
                while True:
                    rv = await self._watch(resource, rv)
            except asyncio.CancelledError:
                raise
            except _Gone:
                self.errors[f"{resource}: 410 Gone"] += 1
            except Exception as e:  # the monitor must outlive every fault; counted in errors
                self.errors[f"{resource}: {type(e).__name__}"] += 1
                self._down.add(resource)
                self.checker.blinded(self.now())
                await asyncio.sleep(0.5)

    async def _list(self, resource: str) -> str:
        fn, args, kw = self._call(resource)
        resp = await fn(*args, **kw, _preload_content=False, _request_timeout=(5, 60))
        try:
            body = await resp.read()
            if resp.status != 200:
                _raise_for_status(resp.status, body)
            doc = json.loads(body)
        finally:
            resp.release()
        self.checker.resync(resource, doc.get("items") or [], self.now())
        self._down.discard(resource)
        if not self._down:
            self.checker.sighted(self.now())
        return str(doc["metadata"]["resourceVersion"])

    async def _watch(self, resource: str, rv: str) -> str:
        fn, args, kw = self._call(resource)
        resp = await fn(
            *args,
            **kw,
            watch=True,
            resource_version=rv,
            allow_watch_bookmarks=True,
            timeout_seconds=WATCH_SECONDS,
            _preload_content=False,
            _request_timeout=(5, WATCH_SECONDS + 15),
        )
        try:
            if resp.status != 200:
                _raise_for_status(resp.status, await resp.read())
            while True:
                line = await resp.content.readline(max_line_length=1 << 26)
                if not line:
                    return rv
                ev = json.loads(line)
                kind, obj = ev.get("type"), ev.get("object") or {}
                if kind == "ERROR":
                    if obj.get("code") == 410:
                        raise _Gone()
                    raise ValueError(f"watch error: {obj.get('message')}")
                rv = str((obj.get("metadata") or {}).get("resourceVersion") or rv)
                if kind in ("ADDED", "MODIFIED", "DELETED"):
                    self._feed(resource, kind, obj)
        finally:
            resp.release()

    async def _ticker(self) -> None:
        while True:
            await asyncio.sleep(self.tick_s)
            self.checker.tick(self.now())
