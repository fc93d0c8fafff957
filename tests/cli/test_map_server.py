"""The topology map served by the controller (``cli/map_server``, ``cli/map_sources``), through
aiohttp's test client: the leader's page from its informers' live model, a standby's from a
cluster read kept a few seconds, failures as one-line 500s, and off unless ``map_bind`` is set.

The cluster is ``map_scene``'s: 6 drawn nodes; ``ns/train`` admitted on h11 and h12, ``ns/big``
pending (does not fit), ``ns/small`` would fit.
"""

from __future__ import annotations

import asyncio
import base64
import copy
import hashlib
import json
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import builders as mk
import map_scene as scene
import pytest
import structlog
from aiohttp.test_utils import TestClient, TestServer
from map_scene import parse_page

from kueue_tas.cli.cluster_read import ClusterReadError, ClusterState
from kueue_tas.cli.map_server import FAILURE_MAX_AGE, SOURCE_HEADER, MapServer
from kueue_tas.cli.map_sources import LIVE_MAX_AGE, READ_MAX_AGE, LiveSource, ReadSource
from kueue_tas.cli.run import map_server
from kueue_tas.controllers.setup import LiveState, setup_controllers
from kueue_tas.runtime.config import ConfigError, Settings
from kueue_tas.runtime.listen import BindError
from kueue_tas.runtime.manager import Manager
from kueue_tas.runtime.metrics import Metrics

Client = TestClient[aiohttp.web.Request, aiohttp.web.Application]


pytestmark = pytest.mark.usefixtures("no_settings_env")


def settings(**kw: Any) -> Settings:
    return Settings(leader_election=False, **kw)


@dataclass
class Clock:
    now: float = 1000.0

    def __call__(self) -> float:
        return self.now


@dataclass
class Elector:
    is_leader: bool = True
    identity: str = "kueue-tas-0"


@dataclass
class CountingRead:
    """A cluster read that counts its calls; ``fail`` makes the next ones raise it."""

    calls: int = 0
    fail: BaseException | None = None
    started: asyncio.Event = field(default_factory=asyncio.Event)
    release: asyncio.Event | None = None

    async def __call__(self) -> ClusterState:
        self.calls += 1
        self.started.set()
        if self.release is not None:
            await self.release.wait()
        if self.fail is not None:
            raise self.fail
        return ClusterState(scene.kueue_config(), scene.nodes(), scene.pods(), scene.workloads())


def never_read() -> Callable[[], Awaitable[ClusterState]]:
    async def read() -> ClusterState:
        raise AssertionError("the leader read the cluster")

    return read


def with_rv(obj: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(obj)
    out["metadata"]["resourceVersion"] = "1"
    return out


def fed_leader(s: Settings) -> tuple[Manager, LiveState]:
    """The controller's reconcilers registered as ``run`` does, their informers fed the scene."""
    manager = Manager(None, s, Metrics())
    live = setup_controllers(manager, s)
    inf = live.informers
    inf.topologies.handle_event("ADDED", with_rv(mk.topology("topo", (scene.BLOCK, scene.RACK, scene.HOST))))
    inf.flavors.handle_event("ADDED", with_rv(mk.flavor("gpu", {"pool": "a"})))
    inf.checks.handle_event("ADDED", with_rv(mk.admission_check("tas", "topo")))
    cq = mk.cluster_queue("cq", ("gpu",), {"tas": ["gpu"]}, covered=(scene.GPU,), quota=None)
    inf.queues.handle_event("ADDED", with_rv(cq))
    for node in scene.node_objects():
        inf.nodes.handle_event("ADDED", with_rv(node))
    for pod in scene.pod_objects():
        inf.pods.handle_event("ADDED", with_rv(pod))
    for wl in scene.workload_objects():
        inf.workloads.handle_event("ADDED", with_rv(wl))
    return manager, live


def synced(manager: Manager) -> None:
    """What ``Manager.run`` does once every informer has listed."""
    for hook in manager._synced_hooks:
        hook()


def live_source(
    s: Settings, live: LiveState, leading: Callable[[], bool] = lambda: True, *, synced: bool = True
) -> LiveSource:
    """The leader's source as ``run.map_server`` makes it (``synced``: its manager hook has run)."""
    return LiveSource(
        live.capacity,
        live.informers.workloads.store.values,
        live.informers.pod_store.values,
        live.cache.check_flavors,
        leading,
        s,
        synced=synced,
    )


@pytest.fixture
async def clients() -> AsyncIterator[Callable[[MapServer], Awaitable[Client]]]:
    made: list[Client] = []

    async def client(server: MapServer) -> Client:
        c: Client = TestClient(TestServer(server.make_app()))
        await c.start_server()
        made.append(c)
        return c

    yield client
    for c in made:
        await c.close()


async def get_page(c: Client, path: str = "/") -> tuple[aiohttp.ClientResponse, scene.Element]:
    r = await c.get(path)
    assert r.status == 200, await r.text()
    return r, parse_page(await r.text())


def drawn(doc: scene.Element) -> set[str]:
    return {h.attrs["data-node"] for h in doc.find_all("i", "h") if "data-node" in h.attrs}


def workloads_listed(doc: scene.Element) -> dict[str, set[str]]:
    return {li.attrs["data-workload"]: li.classes for li in doc.find_all("li", "wl")}


# --- off by default ---------------------------------------------------------------------------


async def test_off_by_default_and_bind_checked() -> None:
    s = settings()
    assert (s.map_bind, s.map_address(), s.map_refresh_seconds) == ("0", None, 30)
    manager = Manager(None, s, Metrics())
    assert map_server(None, s, manager, setup_controllers(manager, s), Elector()) is None
    on = settings(map_bind="127.0.0.1:8082")
    manager = Manager(None, on, Metrics())
    assert isinstance(map_server(None, on, manager, setup_controllers(manager, on), Elector()), MapServer)
    with pytest.raises(ConfigError, match=r"map_bind: .*must look like 'host:port'"):
        Settings.load(leader_election=False, map_bind="8082")
    with pytest.raises(ConfigError, match="map_refresh_seconds"):
        Settings.load(leader_election=False, map_refresh_seconds=-1)


# --- the leader -------------------------------------------------------------------------------


async def test_leader_serves_its_live_model_without_api_calls(clients: Callable[..., Awaitable[Client]]) -> None:
    s = settings(map_bind="127.0.0.1:0", map_refresh_seconds=15)
    manager, live = fed_leader(s)
    server = map_server(None, s, manager, live, Elector())
    assert server is not None
    synced(manager)
    c = await clients(server)
    r, doc = await get_page(c)
    assert r.headers[SOURCE_HEADER] == "live" and r.content_type == "text/html"
    assert drawn(doc) == set(scene.DRAWN)
    listed = workloads_listed(doc)
    assert set(listed) == {"ns/train", "ns/big", "ns/small"}
    assert "st-admitted" in listed["ns/train"] and "st-pending" in listed["ns/big"]
    # train's assignment is what the page highlights: h11 and h12, 2 pods each
    rows = doc.find("section", "wl-detail", data_workload="ns/train").find_all("tr", "dom")
    assert {r.attrs["data-domain"]: r.find("td", "assigned").all_text() for r in rows} == {
        "b1/b1-r1/h11": "2",
        "b1/b1-r1/h12": "2",
    }
    source = next(e for e in doc.iter() if e.attrs.get("id") == "map-source").all_text()
    assert source.startswith("Live model of the leader kueue-tas-0, ")
    assert doc.find("body").attrs["data-refresh"] == "15"
    # the same page at /topology
    r2, _ = await get_page(c, "/topology")
    assert r2.headers[SOURCE_HEADER] == "live"


async def test_leader_page_follows_the_live_model(clients: Callable[..., Awaitable[Client]]) -> None:
    s = settings(map_bind="127.0.0.1:0")
    manager, live = fed_leader(s)
    synced(manager)
    clock = Clock()
    server = MapServer(s.map_bind, ReadSource(never_read(), s), live_source(s, live), replica="r0", clock=clock)
    c = await clients(server)
    _, before = await get_page(c)
    assert "h33" not in drawn(before)
    # A node joins rack b2-r3 and the pending "big" (3 pods of 8 GPUs in one rack) now fits there.
    node = mk.node("h33", labels={scene.BLOCK: "b2", scene.RACK: "b2-r3", "pool": "a"}, gpus=8)
    live.informers.nodes.handle_event("ADDED", with_rv(node))
    _, cached = await get_page(c)
    assert drawn(cached) == drawn(before), "served again within LIVE_MAX_AGE"
    clock.now += LIVE_MAX_AGE
    _, after = await get_page(c)
    assert drawn(after) == drawn(before) | {"h33"}
    assert "st-fits" in workloads_listed(after)["ns/big"] and "st-pending" in workloads_listed(before)["ns/big"]


async def test_leader_reads_the_cluster_until_its_caches_synced(clients: Callable[..., Awaitable[Client]]) -> None:
    s = settings(map_bind="127.0.0.1:0")
    manager, live = fed_leader(s)
    read = CountingRead()
    leading = Elector(is_leader=False)
    source = live_source(s, live, lambda: leading.is_leader, synced=False)
    manager.on_synced(source.mark_synced)
    clock = Clock()
    c = await clients(MapServer(s.map_bind, ReadSource(read, s), source, replica="r0", clock=clock))
    r, _ = await get_page(c)
    assert (r.headers[SOURCE_HEADER], read.calls) == ("read", 1)
    leading.is_leader = True  # elected, informers not synced yet: still the read
    clock.now += READ_MAX_AGE
    r, _ = await get_page(c)
    assert (r.headers[SOURCE_HEADER], read.calls) == ("read", 2)
    synced(manager)
    r, _ = await get_page(c)
    assert (r.headers[SOURCE_HEADER], read.calls) == ("live", 2)


# --- a standby --------------------------------------------------------------------------------


async def test_standby_reads_the_cluster_once_per_max_age(clients: Callable[..., Awaitable[Client]]) -> None:
    s = settings(map_bind="127.0.0.1:0")
    manager, live = fed_leader(s)
    synced(manager)
    read = CountingRead(release=asyncio.Event())
    clock = Clock()
    standby = live_source(s, live, lambda: False)
    c = await clients(MapServer(s.map_bind, ReadSource(read, s), standby, replica="kueue-tas-1", clock=clock))
    # Five browsers at once: one read, shared.
    pages = [asyncio.create_task(get_page(c)) for _ in range(5)]
    await read.started.wait()
    read.release.set()  # type: ignore[union-attr]
    done = await asyncio.gather(*pages)
    assert read.calls == 1
    assert all(r.headers[SOURCE_HEADER] == "read" for r, _ in done)
    _, doc = done[0]
    assert drawn(doc) == set(scene.DRAWN)
    source = next(e for e in doc.iter() if e.attrs.get("id") == "map-source").all_text()
    assert source.startswith("Read from the API server by kueue-tas-1, ")
    # The read gives the page the leader's live model gives.
    leader = MapServer(s.map_bind, ReadSource(never_read(), s), live_source(s, live), replica="r0")
    _, live_doc = await get_page(await clients(leader))
    assert workloads_listed(doc) == workloads_listed(live_doc)
    for wl in ("ns/train", "ns/big"):
        here = doc.find("section", "wl-detail", data_workload=wl).all_text()
        there = live_doc.find("section", "wl-detail", data_workload=wl).all_text()
        assert here == there, wl
    # Refreshes within READ_MAX_AGE cost no read; the first one after it reads again.
    clock.now += READ_MAX_AGE - 0.5
    await get_page(c)
    await get_page(c, "/topology.json")
    assert read.calls == 1
    clock.now += 0.5
    await get_page(c)
    assert read.calls == 2


# --- failures -----------------------------------------------------------------------------------


async def test_failures_answer_500_with_one_line_and_the_server_goes_on(
    clients: Callable[..., Awaitable[Client]],
) -> None:
    s = settings(map_bind="127.0.0.1:0")
    read = CountingRead(fail=ClusterReadError("cannot list nodes: forbidden: nodes is forbidden"))
    clock = Clock()
    c = await clients(MapServer(s.map_bind, ReadSource(read, s), replica="r1", clock=clock))
    with structlog.testing.capture_logs() as logs:
        r = await c.get("/")
        text = await r.text()
    assert r.status == 500
    request_id = failed_request_id(text)
    # The page names no exception (issue 30): the log line with the same request id does.
    assert "forbidden" not in text and "nodes" not in text
    (line,) = [e for e in logs if e["event"] == "map_failed"]
    assert line["request_id"] == request_id and line["error"] == "cannot list nodes: forbidden: nodes is forbidden"
    read.fail = RuntimeError("boom\n  in a second line")
    clock.now += FAILURE_MAX_AGE
    with structlog.testing.capture_logs() as logs:
        r = await c.get("/topology.json")
        text = await r.text()
    assert r.status == 500 and "boom" not in text and "RuntimeError" not in text and "Traceback" not in text
    (line,) = [e for e in logs if e["event"] == "map_failed"]
    assert line["request_id"] == failed_request_id(text) != request_id
    assert line["error"] == "RuntimeError: boom\n  in a second line"
    # A failure is kept a short time only: then the next request builds again, and succeeds.
    read.fail = None
    clock.now += FAILURE_MAX_AGE
    r, doc = await get_page(c)
    assert drawn(doc) == set(scene.DRAWN) and read.calls == 3


def failed_request_id(text: str) -> str:
    """The request id of a generic one-line 500."""
    match = re.fullmatch(r"error: the topology map could not be built \(request id ([0-9a-f]{16})[^\n]*\)\n", text)
    assert match is not None, text
    return match.group(1)


async def test_a_failed_read_is_remembered_so_a_slow_apiserver_gets_one_read_not_twenty(
    clients: Callable[..., Awaitable[Client]],
) -> None:
    """Issue 30: during an apiserver slowdown every request started its own full LIST of nodes
    and pods; now the requests of a read share it, and its failure answers the next ones."""
    s = settings(map_bind="127.0.0.1:0")
    read = CountingRead(
        fail=ClusterReadError("cannot reach the Kubernetes API server: timeout"), release=asyncio.Event()
    )
    clock = Clock()
    c = await clients(MapServer(s.map_bind, ReadSource(read, s), replica="r1", clock=clock))
    first = [asyncio.create_task(c.get(path)) for path in ("/", "/topology", "/topology.json") * 3]
    await read.started.wait()
    read.release.set()  # type: ignore[union-attr]
    answers = await asyncio.gather(*first)
    later = [await c.get("/") for _ in range(11)]  # the slowdown goes on: remembered
    assert {r.status for r in [*answers, *later]} == {500}
    assert read.calls == 1
    clock.now += FAILURE_MAX_AGE - 0.1
    assert (await c.get("/")).status == 500 and read.calls == 1
    clock.now += 0.1
    read.fail = None
    await get_page(c)
    assert read.calls == 2


async def test_a_request_that_gives_up_does_not_cancel_the_read_others_wait_for(
    clients: Callable[..., Awaitable[Client]],
) -> None:
    s = settings(map_bind="127.0.0.1:0")
    read = CountingRead(release=asyncio.Event())
    server = MapServer(s.map_bind, ReadSource(read, s), replica="r1", clock=Clock())
    impatient = asyncio.create_task(server.current())
    patient = asyncio.create_task(server.current())
    await read.started.wait()
    impatient.cancel()
    read.release.set()  # type: ignore[union-attr]
    build = await patient
    assert impatient.cancelled() and build.kind == "read" and read.calls == 1


async def test_a_failing_live_build_is_a_500(clients: Callable[..., Awaitable[Client]]) -> None:
    s = settings(map_bind="127.0.0.1:0")
    manager, live = fed_leader(s)
    synced(manager)

    def broken() -> dict[str, set[str]]:
        raise KeyError("tas")

    source = live_source(s, live)
    source.check_flavors = broken
    c = await clients(MapServer(s.map_bind, ReadSource(never_read(), s), source, replica="r0"))
    with structlog.testing.capture_logs() as logs:
        r = await c.get("/")
        text = await r.text()
    assert r.status == 500 and "KeyError" not in text and "tas" not in text
    (line,) = [e for e in logs if e["event"] == "map_failed"]
    assert line["request_id"] == failed_request_id(text) and line["error"] == "KeyError: 'tas'"


async def test_read_only(clients: Callable[..., Awaitable[Client]]) -> None:
    s = settings(map_bind="127.0.0.1:0")
    c = await clients(MapServer(s.map_bind, ReadSource(CountingRead(), s), replica="r1"))
    for method in ("POST", "PUT", "DELETE", "PATCH"):
        r = await c.request(method, "/")
        assert r.status == 405, method
    assert (await c.get("/nothing")).status == 404


# --- the JSON and the socket ------------------------------------------------------------------


async def test_topology_json_is_the_pages_model(clients: Callable[..., Awaitable[Client]]) -> None:
    s = settings(map_bind="127.0.0.1:0")
    read = CountingRead()
    c = await clients(MapServer(s.map_bind, ReadSource(read, s), replica="kueue-tas-1"))
    r = await c.get("/topology.json")
    assert r.status == 200 and r.headers[SOURCE_HEADER] == "read"
    doc = json.loads(await r.text())
    assert doc["source"]["kind"] == "read" and doc["source"]["replica"] == "kueue-tas-1"
    (flavor,) = doc["map"]["flavors"]
    assert flavor["flavor"] == "gpu" and flavor["topology"] == "topo"

    def hosts(d: dict[str, Any]) -> list[str]:
        return [h["node"] for h in d["hosts"]] + [n for child in d["children"] for n in hosts(child)]

    assert sorted(n for d in flavor["domains"] for n in hosts(d)) == sorted(scene.DRAWN)
    big = next(w for w in doc["map"]["workloads"] if w["name"] == "big")
    assert big["state"] == "pending" and big["podsets"][0]["why_not"]["needed"] == 3
    assert read.calls == 1, "the page and the JSON share one build"


async def test_listens_on_map_bind_and_names_it_when_it_cannot() -> None:
    s = settings(map_bind="127.0.0.1:0")
    server = MapServer(s.map_bind, ReadSource(CountingRead(), s), replica="r1")
    await server.start()
    try:
        ((host, port),) = server.addresses
        async with aiohttp.ClientSession() as session, session.get(f"http://{host}:{port}/") as r:
            assert r.status == 200 and r.headers[SOURCE_HEADER] == "read"
            assert "Content-Security-Policy" in r.headers
        taken = MapServer(f"127.0.0.1:{port}", ReadSource(CountingRead(), s), replica="r2")
        with pytest.raises(BindError, match=rf"^map_bind '127.0.0.1:{port}': cannot listen on 127.0.0.1:{port}: "):
            await taken.start()
    finally:
        await server.stop()


async def test_the_content_security_policy_allows_only_the_pages_own_script_and_style(
    clients: Callable[..., Awaitable[Client]],
) -> None:
    """Issue 30: no 'unsafe-inline'. The page's one script and one style sheet are constants, so
    the policy names their sha256; anything else inline (an injected script, an event handler,
    a style attribute) would not run."""
    s = settings(map_bind="127.0.0.1:0")
    c = await clients(MapServer(s.map_bind, ReadSource(CountingRead(), s), replica="r1", refresh_seconds=30))
    for path in ("/", "/topology.json"):
        r = await c.get(path)
        assert r.status == 200
        policy = dict(
            (d.split()[0], d.split()[1:]) for d in r.headers["Content-Security-Policy"].split(";") if d.strip()
        )
        assert "'unsafe-inline'" not in r.headers["Content-Security-Policy"]
        assert policy["default-src"] == ["'none'"] and policy["frame-ancestors"] == ["'none'"]
    page = await (await c.get("/")).text()

    def digest(text: str) -> str:
        return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode() + "'"

    scripts = re.findall(r"<script>(.*?)</script>", page, re.S)
    styles = re.findall(r"<style>(.*?)</style>", page, re.S)
    assert len(scripts) == 1 and len(styles) == 1
    assert policy["script-src"] == [digest(scripts[0])] and policy["style-src"] == [digest(styles[0])]
    # Everything else inline is data, never run: the JSON blob, no handlers, no style attributes.
    assert re.findall(r"<script(?: [^>]*)?>", page) == ['<script type="application/json" id="map-data">', "<script>"]
    assert not re.search(r"\s(on[a-z]+|style)=", page)
