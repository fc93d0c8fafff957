"""The Manager against a small fake API server: shared informers, sync before any reconciler,
readiness, the informer-lag metric, and the one Event recorder."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer
from kubernetes_asyncio.client import ApiClient, Configuration

from kueue_tas.kube.catalogue import NODES, PODS
from kueue_tas.kube.client import ensure_no_proxy
from kueue_tas.kube.decoding import raw_transform
from kueue_tas.runtime.config import Settings
from kueue_tas.runtime.manager import Manager
from kueue_tas.runtime.metrics import Metrics

NODE = {"metadata": {"name": "n1", "resourceVersion": "3"}, "spec": {}, "status": {}}


class FakeApi:
    """LIST answers one node (no pods); WATCH stays open, silent, until the test ends."""

    def __init__(self) -> None:
        self.stopping = False
        self.lists: list[str] = []

    async def handle(self, request: web.Request) -> web.StreamResponse:
        if request.query.get("watch"):
            response = web.StreamResponse()
            await response.prepare(request)
            while not self.stopping:
                await asyncio.sleep(0.02)
            return response
        self.lists.append(request.path)
        items = [NODE] if request.path == "/api/v1/nodes" else []
        return web.json_response({"metadata": {"resourceVersion": "5"}, "items": items})


@pytest.fixture
async def api() -> AsyncIterator[tuple[FakeApi, ApiClient]]:
    ensure_no_proxy()
    fake = FakeApi()
    app = web.Application()
    app.router.add_get("/{tail:.*}", fake.handle)
    server = TestServer(app, host="127.0.0.1")
    await server.start_server()
    client = ApiClient(Configuration(host=f"http://127.0.0.1:{server.port}"))
    try:
        yield fake, client
    finally:
        fake.stopping = True
        await client.close()
        await server.close()


def settings(**kw: Any) -> Settings:
    return Settings(leader_election=False, **kw)


async def test_runnables_start_after_every_informer_synced_and_the_hooks_ran(
    api: tuple[FakeApi, ApiClient],
) -> None:
    fake, client = api
    metrics = Metrics()
    manager = Manager(client, settings(), metrics)
    nodes = manager.informer(NODES, raw_transform)
    pods = manager.informer(PODS, raw_transform)
    seen: list[Any] = []
    manager.on_synced(lambda: seen.append(("hook", len(nodes.store), manager.synced())))

    async def reconciler() -> None:
        seen.append(("run", manager.readiness()))

    manager.add("one", reconciler)
    assert manager.readiness() == (False, "informers not synced yet: nodes, pods")
    await asyncio.wait_for(manager.run(), 10)
    assert seen == [("hook", 1, True), ("run", (True, "informers synced"))]
    assert sorted(fake.lists) == ["/api/v1/nodes", "/api/v1/pods"]  # one LIST each: informers are shared
    assert not nodes.connected and not pods.connected  # stopped with the manager
    body = metrics.render()[0].decode()
    assert 'kueue_tas_informer_lag_seconds{resource="nodes"}' in body
    assert 'kueue_tas_informer_lag_seconds{resource="pods"}' in body


async def test_a_failing_reconciler_stops_the_manager(api: tuple[FakeApi, ApiClient]) -> None:
    _, client = api
    manager = Manager(client, settings(), Metrics())
    nodes = manager.informer(NODES, raw_transform)

    async def forever() -> None:
        await asyncio.Event().wait()

    async def broken() -> None:
        raise RuntimeError("boom")

    manager.add("forever", forever)
    manager.add("broken", broken)
    with pytest.raises(RuntimeError, match="boom"):
        await asyncio.wait_for(manager.run(), 10)
    assert not nodes.connected


def test_one_shared_informer_per_resource() -> None:
    manager = Manager(None, settings(), Metrics())
    first = manager.informer(NODES, raw_transform)
    assert manager.informer(NODES, raw_transform) is first
    with pytest.raises(ValueError, match="nodes"):
        manager.informer(NODES, lambda raw: raw)
    with pytest.raises(ValueError, match="already registered"):
        manager.add("x", lambda: asyncio.sleep(0))
        manager.add("x", lambda: asyncio.sleep(0))
    assert Manager(None, settings(), Metrics()).readiness() == (False, "informers not started")


async def test_one_event_recorder_reporting_the_configured_controller_name(api: tuple[FakeApi, ApiClient]) -> None:
    _, client = api
    manager = Manager(client, settings(controller_name="example.com/tas"), Metrics())
    assert manager.event_recorder is manager.event_recorder
    assert manager.event_recorder.controller == "example.com/tas"
