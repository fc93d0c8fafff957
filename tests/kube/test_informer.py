"""The informer against a fake API server (aiohttp.web on 127.0.0.1).

The fake server keeps pods with resourceVersions and an event history, and
implements paginated LIST and WATCH (chunked JSON lines) with bookmarks. Tests
drive it through a dropped connection (mid-line), a period where watches are
refused while objects change, history compaction (410 Gone as an ERROR event and
as an HTTP 410), and check that the informer's store converges to the server's
truth with each change delivered to handlers exactly once.
"""

from __future__ import annotations

import asyncio
import copy
import json
import sys
import tracemalloc
from collections.abc import AsyncIterator, Callable
from typing import Any

import builders as mk
import pytest
from aiohttp import web
from kubernetes_asyncio.client import ApiClient, Configuration
from vocab import GPU, HOST, REQUIRED

from kueue_tas.api import constants as c
from kueue_tas.api.resources import pod_requests
from kueue_tas.controllers.informers import slim_node
from kueue_tas.kube.catalogue import NODES, PODS, WORKLOADS, Resource
from kueue_tas.kube.decoding import decode, raw_transform, strip_managed_fields
from kueue_tas.kube.errors import ApiError, ServerError, from_status
from kueue_tas.kube.informer import Informer
from kueue_tas.kube.slim import SlimPod, slim_pod
from kueue_tas.kube.stores import PodStore, Store
from kueue_tas.topology.requests.inputs import node_info

# --- fake API server ------------------------------------------------------------------------------


# What the apiserver adds to every pod it serves; decoding strips it.
MANAGED_FIELDS = [{"manager": "kubelet", "operation": "Update", "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {}}}]


def served(pod: dict[str, Any]) -> dict[str, Any]:
    pod["metadata"]["managedFields"] = copy.deepcopy(MANAGED_FIELDS)
    return pod


class FakeAPIServer:
    """Pods only, cluster-wide LIST/WATCH at /api/v1/pods."""

    def __init__(self) -> None:
        self.rv = 100
        self.objects: dict[str, dict[str, Any]] = {}
        self.history: list[tuple[int, str, dict[str, Any]]] = []  # (rv, type, object)
        self.compacted_rv = 0  # watches from an older rv get 410
        self.watch_410_as_http = False
        self.refuse_watches = False  # watches get 503 (the client is "disconnected")
        self.hold_events = False  # record history but do not stream it (a lagging watch cache)
        self.expire_continue = False  # the next continue token is answered with 410
        self.watchers: list[asyncio.Queue[tuple[str, Any]]] = []
        self.list_requests: list[dict[str, str]] = []
        self.watch_requests: list[dict[str, str]] = []
        self.app = web.Application()
        self.app.router.add_get("/api/v1/pods", self.handle)
        self.runner: web.AppRunner | None = None
        self.url = ""

    async def start(self) -> None:
        self.runner = web.AppRunner(self.app, handle_signals=False)
        await self.runner.setup()
        site = web.TCPSite(self.runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self.url = f"http://127.0.0.1:{port}"

    async def stop(self) -> None:
        for q in self.watchers:
            q.put_nowait(("end", None))
        if self.runner is not None:
            await self.runner.cleanup()

    # --- mutations ---------------------------------------------------------------------------

    def _record(self, etype: str, obj: dict[str, Any]) -> None:
        self.history.append((self.rv, etype, copy.deepcopy(obj)))
        if not self.hold_events:
            for q in self.watchers:
                q.put_nowait(("event", (etype, copy.deepcopy(obj))))

    def create(self, namespace: str, name: str, *, phase: str = "Pending", **pod_args: Any) -> dict[str, Any]:
        """A pod asking 500m + 1Gi; ``pod_args`` go to ``builders.pod``."""
        self.rv += 1
        pod = served(
            mk.pod(
                name,
                namespace=namespace,
                uid=f"uid-{namespace}-{name}",
                resource_version=str(self.rv),
                requests={"cpu": "500m", "memory": "1Gi"},
                phase=phase,
                **pod_args,
            )
        )
        self.objects[f"{namespace}/{name}"] = pod
        self._record("ADDED", pod)
        return pod

    def update(self, key: str, mutate: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
        self.rv += 1
        pod = self.objects[key]
        mutate(pod)
        pod["metadata"]["resourceVersion"] = str(self.rv)
        self._record("MODIFIED", pod)
        return pod

    def delete(self, key: str) -> None:
        self.rv += 1
        pod = self.objects.pop(key)
        pod["metadata"]["resourceVersion"] = str(self.rv)
        self._record("DELETED", pod)

    def compact(self) -> None:
        self.compacted_rv = self.rv

    def bookmark(self) -> int:
        """Advance the rv (changes elsewhere) and send a bookmark at it."""
        self.rv += 5
        for q in self.watchers:
            q.put_nowait(("bookmark", self.rv))
        return self.rv

    def send_gone(self) -> None:
        for q in self.watchers:
            q.put_nowait(("gone", None))

    def drop(self, partial: bool = True) -> None:
        for q in self.watchers:
            q.put_nowait(("drop", partial))

    def truth(self) -> dict[str, str]:
        return {k: o["metadata"]["resourceVersion"] for k, o in self.objects.items()}

    # --- HTTP --------------------------------------------------------------------------------

    @staticmethod
    def _status(code: int, reason: str, message: str) -> dict[str, Any]:
        return {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": message,
            "reason": reason,
            "code": code,
        }

    async def handle(self, request: web.Request) -> web.StreamResponse:
        if request.query.get("watch") in ("1", "true"):
            return await self._watch(request)
        return self._list(request)

    def _list(self, request: web.Request) -> web.Response:
        q = dict(request.query)
        self.list_requests.append(q)
        keys = sorted(self.objects)
        offset = 0
        list_rv = self.rv
        if "continue" in q:
            if self.expire_continue:
                self.expire_continue = False
                return web.json_response(self._status(410, "Expired", "continue token expired"), status=410)
            token = json.loads(q["continue"])
            offset, list_rv = token["offset"], token["rv"]
        limit = int(q.get("limit", "0")) or len(keys)
        page = keys[offset : offset + limit]
        meta: dict[str, Any] = {"resourceVersion": str(list_rv)}
        if offset + limit < len(keys):
            meta["continue"] = json.dumps({"offset": offset + limit, "rv": list_rv})
        items = [self.objects[k] for k in page]
        body = {"kind": "PodList", "apiVersion": "v1", "metadata": meta, "items": items}
        return web.Response(body=json.dumps(body, separators=(",", ":")).encode(), content_type="application/json")

    async def _watch(self, request: web.Request) -> web.StreamResponse:
        q = dict(request.query)
        self.watch_requests.append(q)
        assert q.get("allowWatchBookmarks") == "true"
        if self.refuse_watches:
            return web.json_response(self._status(503, "ServiceUnavailable", "not now"), status=503)
        since = int(q["resourceVersion"])
        if since < self.compacted_rv and self.watch_410_as_http:
            return web.json_response(self._status(410, "Expired", "too old resource version"), status=410)
        resp = web.StreamResponse()
        resp.content_type = "application/json"
        resp.enable_chunked_encoding()
        await resp.prepare(request)

        async def send(obj: dict[str, Any]) -> None:
            await resp.write(json.dumps(obj, separators=(",", ":")).encode() + b"\n")

        if since < self.compacted_rv:
            await send({"type": "ERROR", "object": self._status(410, "Expired", f"too old resource version: {since}")})
            return resp
        queue: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()
        backlog = [(t, copy.deepcopy(o)) for rv, t, o in self.history if rv > since]
        self.watchers.append(queue)
        try:
            for etype, obj in backlog:
                await send({"type": etype, "object": obj})
            timeout = float(q.get("timeoutSeconds", "30"))
            loop = asyncio.get_running_loop()
            deadline = loop.time() + timeout
            while True:
                try:
                    kind, payload = await asyncio.wait_for(queue.get(), max(0.0, deadline - loop.time()))
                except TimeoutError:
                    return resp  # server-side end of the watch
                if kind == "event":
                    etype, obj = payload
                    await send({"type": etype, "object": obj})
                elif kind == "bookmark":
                    meta = {"resourceVersion": str(payload), "annotations": {"k8s.io/initial-events-end": "true"}}
                    await send({"type": "BOOKMARK", "object": {"kind": "Pod", "apiVersion": "v1", "metadata": meta}})
                elif kind == "gone":
                    await send({"type": "ERROR", "object": self._status(410, "Expired", "too old resource version")})
                    return resp
                elif kind == "drop":
                    if payload:  # half an event line, then the connection dies
                        await resp.write(b'{"type":"MODIFIED","object":{"metadata":{"name":"ghost","resourceV')
                    assert request.transport is not None
                    request.transport.abort()
                    return resp
                else:
                    return resp
        finally:
            self.watchers.remove(queue)


class Recorder:
    def __init__(self) -> None:
        self.events: list[tuple[str, str, str]] = []  # (kind, key, rv)

    def add(self, obj: dict[str, Any]) -> None:
        self.events.append(("add", _key(obj), obj["metadata"]["resourceVersion"]))

    def update(self, old: dict[str, Any], new: dict[str, Any]) -> None:
        assert _key(old) == _key(new)
        assert int(new["metadata"]["resourceVersion"]) > int(old["metadata"]["resourceVersion"])
        self.events.append(("update", _key(new), new["metadata"]["resourceVersion"]))

    def delete(self, obj: dict[str, Any]) -> None:
        # on_delete gets the last stored object (what consumers saw), so its rv is the stored one.
        self.events.append(("delete", _key(obj), obj["metadata"]["resourceVersion"]))

    def take(self) -> list[tuple[str, str, str]]:
        out, self.events = self.events, []
        return out


def _key(obj: dict[str, Any]) -> str:
    return f"{obj['metadata']['namespace']}/{obj['metadata']['name']}"


@pytest.fixture
async def server() -> AsyncIterator[FakeAPIServer]:
    srv = FakeAPIServer()
    await srv.start()
    yield srv
    await srv.stop()


@pytest.fixture
async def client(server: FakeAPIServer) -> AsyncIterator[ApiClient]:
    cfg = Configuration(host=server.url)
    api = ApiClient(configuration=cfg)
    yield api
    await api.close()


def make_informer(client: ApiClient, **kw: Any) -> tuple[Informer[dict[str, Any]], Recorder]:
    kw.setdefault("page_size", 2)
    kw.setdefault("backoff_initial", 0.01)
    kw.setdefault("backoff_max", 0.05)
    kw.setdefault("watch_timeout_seconds", 30)
    informer: Informer[dict[str, Any]] = Informer(client, PODS, raw_transform, **kw)
    rec = Recorder()
    informer.add_handler(rec.add, rec.update, rec.delete)
    return informer, rec


async def converge(informer: Informer[Any], server: FakeAPIServer, timeout: float = 5.0) -> None:
    """Wait until the store holds exactly the server's objects at their resourceVersions."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        have = {k: informer.store.resource_version(k) for k in informer.store}
        if have == server.truth() and informer.connected:
            return
        if loop.time() > deadline:
            raise AssertionError(f"store {have} != server {server.truth()}")
        await asyncio.sleep(0.01)


async def until(cond: Callable[[], bool], timeout: float = 5.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not cond():
        if loop.time() > deadline:
            raise AssertionError("condition not reached")
        await asyncio.sleep(0.01)


def set_phase(phase: str) -> Callable[[dict[str, Any]], None]:
    def mutate(pod: dict[str, Any]) -> None:
        pod["status"]["phase"] = phase

    return mutate


# --- tests ----------------------------------------------------------------------------------------


async def test_list_then_watch(server: FakeAPIServer, client: ApiClient) -> None:
    for i in range(5):
        server.create("ns", f"p{i}")
    informer, rec = make_informer(client)
    informer.start()
    try:
        await informer.wait_synced(5)
        assert len(server.list_requests) == 3  # 5 objects, pages of 2
        assert informer.resource_version == str(server.rv)
        assert sorted(rec.take()) == sorted(("add", f"ns/p{i}", str(101 + i)) for i in range(5))
        await until(lambda: informer.connected)

        server.create("ns", "p5")
        server.update("ns/p0", set_phase("Running"))
        server.delete("ns/p1")
        await converge(informer, server)
        assert rec.take() == [("add", "ns/p5", "106"), ("update", "ns/p0", "107"), ("delete", "ns/p1", "102")]
        assert informer.resource_version == "108"
        assert informer.stats.events == 3
        assert informer.stats.lists == 1 and informer.stats.relists == 0
        assert informer.seconds_since_last_event() is not None
        assert all("managedFields" not in o["metadata"] for o in informer.store.values())  # stripped on decode
    finally:
        await informer.stop()


async def test_bookmark_advances_resource_version(server: FakeAPIServer, client: ApiClient) -> None:
    server.create("ns", "a")
    informer, rec = make_informer(client)
    informer.start()
    try:
        await informer.wait_synced(5)
        await until(lambda: informer.connected)
        rv = server.bookmark()
        await until(lambda: informer.resource_version == str(rv))
        assert informer.stats.bookmarks == 1
        server.drop(partial=False)
        await until(lambda: len(server.watch_requests) == 2 and informer.connected)
        assert server.watch_requests[1]["resourceVersion"] == str(rv)  # resumed from the bookmark
        assert rec.take() == [("add", "ns/a", "101")]
    finally:
        await informer.stop()


async def test_dropped_connection_resumes_without_loss_or_replay(server: FakeAPIServer, client: ApiClient) -> None:
    for name in ("a", "b", "c"):
        server.create("ns", name)
    informer, rec = make_informer(client)
    informer.start()
    try:
        await informer.wait_synced(5)
        await until(lambda: informer.connected)
        rec.take()
        server.update("ns/a", set_phase("Running"))
        await converge(informer, server)
        assert rec.take() == [("update", "ns/a", "104")]

        # The connection dies in the middle of an event line; watches are refused for a while.
        server.refuse_watches = True
        server.drop(partial=True)
        await until(lambda: not informer.connected and informer.stats.watch_errors >= 2)
        server.delete("ns/b")  # happened while disconnected
        server.update("ns/c", set_phase("Running"))
        server.create("ns", "d")
        server.refuse_watches = False
        await converge(informer, server)

        assert rec.take() == [("delete", "ns/b", "102"), ("update", "ns/c", "106"), ("add", "ns/d", "107")]
        assert informer.stats.lists == 1  # resumed from the resourceVersion, no relist
        assert all(r["resourceVersion"] == "104" for r in server.watch_requests[1:])
        assert "ns/ghost" not in informer.store  # the half line was never applied
    finally:
        await informer.stop()


async def test_410_error_event_mid_stream_relists_and_reconciles(server: FakeAPIServer, client: ApiClient) -> None:
    for name in ("a", "b", "c", "d"):
        server.create("ns", name)
    informer, rec = make_informer(client)
    informer.start()
    try:
        await informer.wait_synced(5)
        await until(lambda: informer.connected)
        rec.take()
        # The watch stops delivering (a lagging cache), history is compacted, then 410.
        server.hold_events = True
        server.delete("ns/a")
        server.update("ns/b", set_phase("Running"))
        server.update("ns/b", set_phase("Succeeded"))
        server.create("ns", "e")
        server.compact()
        server.send_gone()
        server.hold_events = False
        await converge(informer, server)

        events = rec.take()
        assert sorted(events) == [("add", "ns/e", "108"), ("delete", "ns/a", "101"), ("update", "ns/b", "107")]
        assert informer.stats.relists == 1 and informer.stats.lists == 2
        assert informer.resource_version == "108"
        # "c" and "d" are unchanged: the relist did not re-deliver them.
        server.create("ns", "f")
        await converge(informer, server)
        assert rec.take() == [("add", "ns/f", "109")]
    finally:
        await informer.stop()


async def test_http_410_after_disconnect_reconciles_deletes(server: FakeAPIServer, client: ApiClient) -> None:
    server.watch_410_as_http = True
    for name in ("a", "b", "c"):
        server.create("ns", name)
    informer, rec = make_informer(client)
    informer.start()
    try:
        await informer.wait_synced(5)
        await until(lambda: informer.connected)
        rec.take()
        server.refuse_watches = True
        server.drop(partial=False)
        await until(lambda: not informer.connected and informer.stats.watch_errors >= 1)
        server.delete("ns/a")  # deleted while we were away; its DELETED event is compacted away
        server.update("ns/c", set_phase("Running"))
        server.create("ns", "d")
        server.compact()
        server.refuse_watches = False
        await converge(informer, server)

        assert sorted(rec.take()) == [("add", "ns/d", "106"), ("delete", "ns/a", "101"), ("update", "ns/c", "105")]
        assert informer.stats.relists == 1
    finally:
        await informer.stop()


async def test_expired_continue_token_restarts_the_list(server: FakeAPIServer, client: ApiClient) -> None:
    for i in range(5):
        server.create("ns", f"p{i}")
    server.expire_continue = True
    informer, rec = make_informer(client)
    informer.start()
    try:
        await informer.wait_synced(5)
        await converge(informer, server)
        assert sorted(k for _, k, _ in rec.take()) == [f"ns/p{i}" for i in range(5)]  # each added once
        assert informer.stats.lists == 1
    finally:
        await informer.stop()


async def test_handler_errors_and_transform_none(server: FakeAPIServer, client: ApiClient) -> None:
    server.create("ns", "keep")
    server.create("ns", "skip", labels={"skip": "1"})

    def transform(raw: dict[str, Any]) -> dict[str, Any] | None:
        return None if raw["metadata"]["labels"].get("skip") else raw

    informer: Informer[dict[str, Any]] = Informer(client, PODS, transform, backoff_initial=0.01)
    rec = Recorder()

    def boom(_obj: dict[str, Any]) -> None:
        raise RuntimeError("handler bug")

    informer.add_handler(on_add=boom)
    informer.add_handler(rec.add, rec.update, rec.delete)
    informer.start()
    try:
        await informer.wait_synced(5)
        await until(lambda: informer.connected)
        assert informer.store.keys() == ["ns/keep"]
        assert informer.stats.handler_errors == 1
        # A kept object that starts transforming to None is delivered as a delete.
        server.update("ns/keep", lambda p: p["metadata"]["labels"].update(skip="1"))
        await until(lambda: len(informer.store) == 0)
        assert rec.take() == [("add", "ns/keep", "101"), ("delete", "ns/keep", "101")]
        # A late handler gets the current objects replayed.
        late = Recorder()
        server.update("ns/skip", lambda p: p["metadata"]["labels"].pop("skip"))
        await until(lambda: len(informer.store) == 1)
        informer.add_handler(on_add=late.add)
        assert late.take() == [("add", "ns/skip", "104")]
    finally:
        await informer.stop()


async def test_slim_pod_informer_with_indexes(server: FakeAPIServer, client: ApiClient) -> None:
    server.create(
        "team",
        "w-0",
        labels={c.WORKLOAD_LABEL: "wl", c.PODSET_LABEL: "main", c.JOB_COMPLETION_INDEX_LABEL: "0"},
        gates=(c.SCHEDULING_GATE,),
        selector={"rack": "r1"},
    )
    server.create("team", "other", node="n1", phase="Running")
    store = PodStore()
    informer: Informer[SlimPod] = Informer(client, PODS, slim_pod, store=store, backoff_initial=0.01)
    informer.start()
    try:
        await informer.wait_synced(5)
        await until(lambda: informer.connected)
        [gated] = store.of_workload("team", "wl")
        assert gated.gated and gated.is_tas and gated.podset == "main" and gated.completion_index == 0
        assert gated.node_selector == (("rack", "r1"),) and not gated.counts_on_node
        assert store.of_workload("team", "other-wl") == []

        def bind(pod: dict[str, Any]) -> None:
            pod["spec"]["schedulingGates"] = []
            pod["spec"]["nodeName"] = "n1"

        server.update("team/w-0", bind)
        await until(lambda: [p.node_name for p in store.of_workload("team", "wl")] == ["n1"])
        assert store.get("team/w-0") is not None and not store["team/w-0"].gated

        def relabel(pod: dict[str, Any]) -> None:
            pod["metadata"]["labels"][c.WORKLOAD_LABEL] = "other-wl"

        server.update("team/w-0", relabel)
        await until(lambda: [p.name for p in store.of_workload("team", "other-wl")] == ["w-0"])
        assert store.of_workload("team", "wl") == []
        server.delete("team/w-0")
        await until(lambda: store.of_workload("team", "other-wl") == [])
    finally:
        await informer.stop()


async def test_server_side_watch_timeout_rewatches_from_rv(server: FakeAPIServer, client: ApiClient) -> None:
    server.create("ns", "a")
    informer, rec = make_informer(client, watch_timeout_seconds=1)
    informer.start()
    try:
        await informer.wait_synced(5)
        await until(lambda: len(server.watch_requests) >= 2, timeout=5)
        assert [r["timeoutSeconds"] for r in server.watch_requests[:2]] == ["1", "1"]
        server.update("ns/a", set_phase("Running"))
        await converge(informer, server)
        assert rec.take() == [("add", "ns/a", "101"), ("update", "ns/a", "102")]
        assert informer.stats.lists == 1
    finally:
        await informer.stop()


async def test_large_objects_span_many_chunks(server: FakeAPIServer, client: ApiClient) -> None:
    informer, rec = make_informer(client)
    informer.start()
    try:
        await informer.wait_synced(5)
        await until(lambda: informer.connected)
        big = "x" * (6 * 2**20)  # beyond aiohttp's readline limit and its read buffer

        def annotate(pod: dict[str, Any]) -> None:
            pod["metadata"]["annotations"] = {"big": big}

        server.create("ns", "small")
        server.create("ns", "big")
        server.update("ns/big", annotate)
        server.create("ns", "after")
        await converge(informer, server, timeout=10)
        assert informer.store["ns/big"]["metadata"]["annotations"]["big"] == big
        assert [k for _, k, _ in rec.take()] == ["ns/small", "ns/big", "ns/big", "ns/after"]
    finally:
        await informer.stop()


async def test_request_errors_back_off_and_recover(client: ApiClient, server: FakeAPIServer) -> None:
    server.create("ns", "a")
    server.refuse_watches = True
    informer, rec = make_informer(client)
    informer.start()
    try:
        await informer.wait_synced(5)
        await until(lambda: informer.stats.watch_errors >= 3)
        server.refuse_watches = False
        server.create("ns", "b")
        await converge(informer, server)
        assert sorted(rec.take()) == [("add", "ns/a", "101"), ("add", "ns/b", "102")]
    finally:
        await informer.stop()


async def test_unreachable_server_keeps_retrying() -> None:
    api = ApiClient(configuration=Configuration(host="http://127.0.0.1:9"))
    informer: Informer[dict[str, Any]] = Informer(api, NODES, raw_transform, backoff_initial=0.01, backoff_max=0.02)
    informer.start()
    try:
        await until(lambda: informer.stats.watch_errors >= 3)
        assert not informer.synced.is_set()
    finally:
        await informer.stop()
        await api.close()


# --- pieces -------------------------------------------------------------------------------------


def test_resource_paths() -> None:
    assert PODS.path() == "/api/v1/pods"
    assert PODS.path("ns") == "/api/v1/namespaces/ns/pods"
    assert WORKLOADS.path("ns") == "/apis/kueue.x-k8s.io/v1beta2/namespaces/ns/workloads"
    assert Resource("jobset.x-k8s.io", "v1alpha2", "jobsets", True).api_version == "jobset.x-k8s.io/v1alpha2"
    with pytest.raises(ValueError):
        NODES.path("ns")


def test_strip_managed_fields_keeps_everything_else() -> None:
    pods = [served(mk.pod(f"p{i}", namespace="ns", resource_version=str(100 + i))) for i in range(3)]
    pods[1]["metadata"].pop("managedFields")
    pods[2]["metadata"]["managedFields"][0]["fieldsV1"] = {"f:metadata": {"f:labels": {"f:spec": {}}}, "k:]},": {}}
    body = json.dumps({"items": pods, "metadata": {}}, separators=(",", ":")).encode()
    out = json.loads(strip_managed_fields(body))
    expected = copy.deepcopy(pods)
    for p in expected:
        p["metadata"].pop("managedFields", None)
    assert out["items"] == expected
    assert decode(body, strip=True)["items"] == expected
    assert strip_managed_fields(b'{"a":1}') == b'{"a":1}'


def test_api_status_error() -> None:
    err = from_status({"kind": "Status", "code": 410, "reason": "Expired", "message": "old"})
    assert err.gone and err.status == 410 and err.message == "old"
    assert not ServerError(500, "InternalError").gone


def test_store_indexes_follow_updates() -> None:
    store: Store[tuple[str, str]] = Store({"second": lambda o: (o[1],)})
    store.put("a", ("a", "x"), "1")
    store.put("b", ("b", "x"), "1")
    assert sorted(store.by_index("second", "x")) == [("a", "x"), ("b", "x")]
    store.put("a", ("a", "y"), "2")
    assert store.by_index("second", "x") == [("b", "x")] and store.by_index("second", "y") == [("a", "y")]
    assert store.resource_version("a") == "2"
    store.pop("b")
    assert store.by_index("second", "x") == []
    with pytest.raises(KeyError):
        store.by_index("first", "a")


def test_suppress_unchanged_updates() -> None:
    informer: Informer[SlimPod] = Informer(None, PODS, slim_pod, store=PodStore(), suppress_unchanged=True)
    updates: list[tuple[SlimPod, SlimPod]] = []
    informer.add_handler(on_update=lambda old, new: updates.append((old, new)))
    raw = copy.deepcopy(REAL_POD)
    informer.handle_event("ADDED", raw)
    raw = copy.deepcopy(raw)
    raw["metadata"]["resourceVersion"] = "987655"
    raw["status"]["conditions"] = [{"type": "Ready", "status": "True"}]  # nothing we keep
    informer.handle_event("MODIFIED", raw)
    assert updates == [] and informer.store.resource_version("team-a/job-0-abcde") == "987655"
    raw = copy.deepcopy(raw)
    raw["metadata"]["resourceVersion"] = "987656"
    raw["status"]["phase"] = "Succeeded"
    informer.handle_event("MODIFIED", raw)
    assert [(o.phase, n.phase) for o, n in updates] == [("Running", "Succeeded")]
    assert informer.resource_version == "987656"
    with pytest.raises(ApiError):
        informer.handle_event("ERROR", {"kind": "Status", "code": 410, "reason": "Expired"})


# --- slim forms -------------------------------------------------------------------------------------

REAL_POD: dict[str, Any] = {
    "metadata": {
        "name": "job-0-abcde",
        "namespace": "team-a",
        "uid": "0f0e0d0c-0b0a-0908-0706-050403020100",
        "resourceVersion": "987654",
        "labels": {
            c.WORKLOAD_LABEL: "job-job-1a2b3",
            c.PODSET_LABEL: "main",
            c.KUEUE_PODSET_LABEL: "main",
            c.JOB_COMPLETION_INDEX_LABEL: "12",
            c.JOBSET_JOB_INDEX_LABEL: "3",
        },
        "annotations": {REQUIRED: "rack"},
        "deletionTimestamp": "2026-01-01T00:00:00Z",
    },
    "spec": {
        "nodeName": "node-1",
        "nodeSelector": {"rack": "r1", "block": "b1"},
        "schedulingGates": [{"name": "other"}],
        "initContainers": [
            {"name": "sidecar", "restartPolicy": "Always", "resources": {"requests": {"cpu": "100m"}}},
            {"name": "init", "resources": {"requests": {"cpu": "4", "memory": "1Gi"}}},
        ],
        "containers": [
            {
                "name": "main",
                "resources": {"requests": {"cpu": "2"}, "limits": {GPU: "8", "memory": "2Gi"}},
            }
        ],
        "overhead": {"cpu": "10m"},
    },
    "status": {"phase": "Running"},
}


def test_slim_pod_matches_inputs_conversions() -> None:
    pod = slim_pod(REAL_POD)
    assert pod.counts_on_node
    assert pod.node_name == REAL_POD["spec"]["nodeName"]
    assert pod.usage_map() == {**pod_requests(REAL_POD["spec"]), "pods": 1}
    assert pod.is_tas is True
    assert not pod.gated and pod.terminating
    assert (pod.completion_index, pod.job_index, pod.workload, pod.podset, pod.kueue_podset) == (
        12,
        3,
        "job-job-1a2b3",
        "main",
        "main",
    )
    assert pod.node_selector_map() == {"rack": "r1", "block": "b1"}
    assert pod.workload_key == "team-a/job-job-1a2b3" and pod.key == "team-a/job-0-abcde"

    plain = copy.deepcopy(REAL_POD)
    plain["metadata"]["labels"] = {}
    plain["metadata"]["annotations"] = {"kueue.x-k8s.io/podset-required-topology": "rack"}
    assert slim_pod(plain).is_tas is False
    assert slim_pod(plain, prefix="kueue.x-k8s.io/").is_tas is True
    plain["status"]["phase"] = "Succeeded"
    assert not slim_pod(plain).counts_on_node

    # Shared values: same requests and selector => the same tuples; equality ignores the rv.
    other = copy.deepcopy(REAL_POD)
    other["metadata"]["resourceVersion"] = "987655"
    twin = slim_pod(other)
    assert twin.usage is pod.usage and twin.node_selector is pod.node_selector
    assert twin == pod and twin.resource_version != pod.resource_version


def test_slim_node_is_node_info() -> None:
    raw = {
        "metadata": {"name": "n1", "labels": {HOST: "n1", "rack": "r1"}},
        "spec": {"taints": [{"key": "gpu", "effect": "NoSchedule"}]},
        "status": {"allocatable": {"cpu": "8", "pods": "110"}, "conditions": [{"type": "Ready", "status": "True"}]},
    }
    info = slim_node(raw)
    assert info == node_info(raw)
    assert info.labels["rack"] is sys.intern("r1")


def test_slim_pod_memory_under_1kib() -> None:
    pods = []
    for i in range(2000):
        raw = copy.deepcopy(REAL_POD)
        raw["metadata"]["name"] = f"job-{i // 64}-{i:05d}"
        raw["metadata"]["uid"] = f"0f0e0d0c-0b0a-0908-0706-{i:012d}"
        raw["metadata"]["resourceVersion"] = str(10_000_000 + i)
        raw["metadata"]["labels"][c.WORKLOAD_LABEL] = f"job-{i // 64}"
        raw["metadata"]["labels"][c.JOB_COMPLETION_INDEX_LABEL] = str(i % 64 + 300)
        raw["spec"]["nodeName"] = f"node-{i % 500}"
        pods.append(json.dumps(raw).encode())
    store = PodStore()
    tracemalloc.start()
    try:
        before = tracemalloc.take_snapshot()
        for data in pods:
            obj = json.loads(data)
            slim = slim_pod(obj)
            store.put(slim.key, slim, slim.resource_version)
            del obj
        after = tracemalloc.take_snapshot()
    finally:
        tracemalloc.stop()
    per_pod = sum(s.size_diff for s in after.compare_to(before, "filename")) / len(pods)
    assert per_pod < 1024, per_pod
