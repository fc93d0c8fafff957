"""The client layer against a fake API server (aiohttp) that records what goes over the wire."""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import AsyncIterator, Awaitable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer
from kubernetes_asyncio import client as k8s
from kubernetes_asyncio.client.exceptions import ApiException

from kueue_tas.kube.client import (
    APPLY_PATCH,
    MERGE_PATCH,
    STRATEGIC_MERGE_PATCH,
    RateLimitedApiClient,
    apply_status,
    call_json,
    delete_pod,
    ensure_no_proxy,
    map_api_exception,
    merge_patch_custom,
    patch_pod,
    request_json,
)
from kueue_tas.kube.errors import (
    AlreadyExists,
    ApiError,
    Conflict,
    Gone,
    Invalid,
    NotFound,
    NotLeading,
    ServerError,
    TransportError,
    error_from_response,
    may_have_applied,
)
from kueue_tas.kube.events import EventRecorder, ObjectRef, micro_time
from kueue_tas.kube.lease import KubeLeaseApi, LeaseRecord
from kueue_tas.runtime.config import ConfigError, Settings
from kueue_tas.runtime.manager import connect, pool_size


@dataclass
class Seen:
    method: str
    path: str
    query: dict[str, str]
    content_type: str
    body: Any


@dataclass
class FakeApiServer:
    requests: list[Seen] = field(default_factory=list)
    # (method, path) -> (status, body); default 200 echo
    responses: dict[tuple[str, str], tuple[int, Any]] = field(default_factory=dict)

    async def handle(self, request: web.Request) -> web.Response:
        raw = await request.read()
        body = json.loads(raw) if raw else None
        self.requests.append(
            Seen(request.method, request.path, dict(request.query), request.headers.get("Content-Type", ""), body)
        )
        status, out = self.responses.get((request.method, request.path), (200, None))
        if out is None:
            out = body if isinstance(body, dict) else {}
            out = {**out, "metadata": {**(out.get("metadata") or {}), "resourceVersion": "42"}}
        return web.json_response(out, status=status)


STATUS_409 = {"kind": "Status", "status": "Failure", "reason": "Conflict", "message": "the object has been modified"}


@pytest.fixture
async def fake(tmp_path: Path) -> AsyncIterator[tuple[FakeApiServer, k8s.ApiClient, Path]]:
    ensure_no_proxy()
    srv = FakeApiServer()
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", srv.handle)
    server = TestServer(app, host="127.0.0.1")
    await server.start_server()
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        f"""
apiVersion: v1
kind: Config
clusters: [{{name: c, cluster: {{server: "http://127.0.0.1:{server.port}"}}}}]
users: [{{name: u, user: {{token: t0ken}}}}]
contexts: [{{name: x, context: {{cluster: c, user: u}}}}]
current-context: x
"""
    )
    api = await connect(Settings(kubeconfig=kubeconfig, patch_concurrency=5, admission_workers=3))
    try:
        yield srv, api, kubeconfig
    finally:
        await api.close()
        await server.close()


async def test_make_api_client_sizes_pool_and_sets_no_proxy(fake: tuple[FakeApiServer, k8s.ApiClient, Path]) -> None:
    _, api, _ = fake
    expected = pool_size(Settings(patch_concurrency=5, admission_workers=3))
    assert api.configuration.connection_pool_maxsize == expected == 8 + 5 + 3 + 8
    assert api.configuration.api_key.get("BearerToken", "").endswith("t0ken")
    assert "127.0.0.1" in os.environ["NO_PROXY"].split(",")
    assert "localhost" in os.environ["no_proxy"].split(",")


async def test_the_environment_is_read_once_not_on_every_request(
    fake: tuple[FakeApiServer, k8s.ApiClient, Path], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """No netrc or proxy lookup per request (aiohttp does both in a worker thread when its
    session trusts the environment); a proxy the variables name for the apiserver is still
    used, found once when the client is made."""
    srv, api, kubeconfig = fake
    assert not api.rest_client.pool_manager.trust_env
    assert api.rest_client.proxy is None  # the fake is on loopback, which NO_PROXY covers
    lookups: list[str] = []
    monkeypatch.setattr("aiohttp.client.get_env_proxy_for_url", lambda url: lookups.append(str(url)) or ("", None))
    await asyncio.gather(*(request_json(api, "GET", f"/api/v1/namespaces/{i}") for i in range(3)))
    assert lookups == [] and len(srv.requests) == 3

    monkeypatch.setenv("NO_PROXY", "")
    monkeypatch.setenv("no_proxy", "")
    monkeypatch.setenv("HTTPS_PROXY", "http://user:pw@proxy.example:3128")
    monkeypatch.setenv("HTTP_PROXY", "http://user:pw@proxy.example:3128")
    monkeypatch.setattr("kueue_tas.kube.client.ensure_no_proxy", lambda: None)
    proxied = await connect(Settings(kubeconfig=kubeconfig))
    try:
        assert proxied.rest_client.proxy == "http://proxy.example:3128"
        assert proxied.rest_client.proxy_headers["Proxy-Authorization"].startswith("Basic ")
        assert not proxied.rest_client.pool_manager.trust_env
    finally:
        await proxied.close()


async def test_api_qps_spaces_out_requests_after_the_burst(fake: tuple[FakeApiServer, k8s.ApiClient, Path]) -> None:
    """qps 10, burst 2: two requests go at once, the next four wait for the bucket (>= 0.3 s in
    all; a lower bound only, so a slow machine cannot fail it)."""
    srv, _, kubeconfig = fake
    for qps, burst, at_least in ((10.0, 2, 0.3), (0.0, 1, 0.0)):
        api = await connect(Settings(kubeconfig=kubeconfig, api_qps=qps, api_burst=burst))
        try:
            started = time.monotonic()
            await asyncio.gather(*(request_json(api, "GET", f"/api/v1/namespaces/{i}") for i in range(6)))
            took = time.monotonic() - started
        finally:
            await api.close()
        assert took >= at_least, f"qps={qps} burst={burst}: 6 requests in {took:.3f}s"
    assert len(srv.requests) == 12


async def test_make_api_client_bad_kubeconfig_is_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot load Kubernetes client configuration"):
        await connect(Settings(kubeconfig=tmp_path / "missing"))


async def annotate_wl(api: k8s.ApiClient, annotations: dict[str, str]) -> dict[str, Any]:
    """A merge patch of Workload ns/wl's annotations, guarded by resourceVersion 7."""
    return await merge_patch_custom(
        api,
        group="kueue.x-k8s.io",
        version="v1beta2",
        plural="workloads",
        namespace="ns",
        name="wl",
        patch={"metadata": {"annotations": annotations}},
        resource_version="7",
    )


async def test_merge_patch_custom_sends_merge_patch(fake: tuple[FakeApiServer, k8s.ApiClient, Path]) -> None:
    srv, api, _ = fake
    out = await annotate_wl(api, {"k": "v"})
    req = srv.requests[-1]
    assert req.method == "PATCH"
    assert req.path == "/apis/kueue.x-k8s.io/v1beta2/namespaces/ns/workloads/wl"
    assert req.content_type == MERGE_PATCH
    assert req.query["fieldManager"] == "kueue-tas"
    assert req.body == {"metadata": {"annotations": {"k": "v"}, "resourceVersion": "7"}}
    assert out["metadata"]["resourceVersion"] == "42"

    await merge_patch_custom(
        api, group="kueue.x-k8s.io", version="v1beta2", plural="admissionchecks", name="ac", patch={"status": {}},
        subresource="status",
    )  # fmt: skip
    assert srv.requests[-1].path == "/apis/kueue.x-k8s.io/v1beta2/admissionchecks/ac/status"


async def test_apply_status_is_server_side_apply(fake: tuple[FakeApiServer, k8s.ApiClient, Path]) -> None:
    srv, api, _ = fake
    status = {"admissionChecks": [{"name": "tas", "state": "Ready", "message": "ok"}]}
    await apply_status(
        api,
        group="kueue.x-k8s.io",
        version="v1beta2",
        plural="workloads",
        kind="Workload",
        namespace="ns",
        name="wl",
        status=status,
    )
    req = srv.requests[-1]
    assert req.method == "PATCH"
    assert req.path == "/apis/kueue.x-k8s.io/v1beta2/namespaces/ns/workloads/wl/status"
    assert req.content_type == APPLY_PATCH
    assert req.query == {"fieldManager": "kueue-tas", "force": "true"}
    assert req.body == {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {"name": "wl", "namespace": "ns"},
        "status": status,
    }


async def test_patch_pod_merge_and_strategic(fake: tuple[FakeApiServer, k8s.ApiClient, Path]) -> None:
    srv, api, _ = fake
    patch = {"spec": {"schedulingGates": None, "nodeSelector": {"rack": "r1"}}}
    await patch_pod(api, namespace="ns", name="p", patch=patch, resource_version="11")
    req = srv.requests[-1]
    assert (req.method, req.path, req.content_type) == ("PATCH", "/api/v1/namespaces/ns/pods/p", MERGE_PATCH)
    assert req.body == {**patch, "metadata": {"resourceVersion": "11"}}
    assert patch == {"spec": {"schedulingGates": None, "nodeSelector": {"rack": "r1"}}}  # caller's dict untouched

    smp = {"spec": {"schedulingGates": [{"$patch": "delete", "name": "kueue-tas.io/topology"}]}}
    await patch_pod(api, namespace="ns", name="p", patch=smp, strategy="strategic")
    assert srv.requests[-1].content_type == STRATEGIC_MERGE_PATCH
    assert srv.requests[-1].body == smp


async def test_patch_pod_conflict_and_not_found(fake: tuple[FakeApiServer, k8s.ApiClient, Path]) -> None:
    srv, api, _ = fake
    srv.responses[("PATCH", "/api/v1/namespaces/ns/pods/p")] = (409, STATUS_409)
    with pytest.raises(Conflict) as ei:
        await patch_pod(api, namespace="ns", name="p", patch={}, resource_version="1")
    assert ei.value.status == 409 and "modified" in ei.value.message
    srv.responses[("PATCH", "/api/v1/namespaces/ns/pods/p")] = (404, {"reason": "NotFound", "message": "gone"})
    with pytest.raises(NotFound):
        await patch_pod(api, namespace="ns", name="p", patch={})


async def test_delete_pod_is_guarded_by_the_uid(fake: tuple[FakeApiServer, k8s.ApiClient, Path]) -> None:
    srv, api, _ = fake
    await delete_pod(api, namespace="ns", name="p", uid="u-1")
    req = srv.requests[-1]
    assert (req.method, req.path) == ("DELETE", "/api/v1/namespaces/ns/pods/p")
    assert req.body["preconditions"] == {"uid": "u-1"}
    assert "gracePeriodSeconds" not in req.body  # the pod's own grace period
    srv.responses[("DELETE", "/api/v1/namespaces/ns/pods/p")] = (409, STATUS_409)  # another incarnation
    with pytest.raises(Conflict):
        await delete_pod(api, namespace="ns", name="p", uid="u-1")


async def test_kube_lease_api_wire_format(fake: tuple[FakeApiServer, k8s.ApiClient, Path]) -> None:
    srv, api, _ = fake
    leases = KubeLeaseApi(api)
    t = datetime(2030, 1, 2, 3, 4, 5, tzinfo=UTC)
    rec = LeaseRecord("me", 15, t, t, 3, "5")
    out = await leases.replace("sys", "l", rec)
    req = srv.requests[-1]
    assert (req.method, req.path) == ("PUT", "/apis/coordination.k8s.io/v1/namespaces/sys/leases/l")
    assert req.body["spec"] == {
        "holderIdentity": "me",
        "leaseDurationSeconds": 15,
        "acquireTime": "2030-01-02T03:04:05.000000Z",
        "renewTime": "2030-01-02T03:04:05.000000Z",
        "leaseTransitions": 3,
    }
    assert req.body["metadata"]["resourceVersion"] == "5"
    assert out.holder_identity == "me" and out.renew_time == t and out.resource_version == "42"
    srv.responses[("GET", "/apis/coordination.k8s.io/v1/namespaces/sys/leases/l")] = (404, {"reason": "NotFound"})
    with pytest.raises(NotFound):
        await leases.get("sys", "l")
    srv.responses[("POST", "/apis/coordination.k8s.io/v1/namespaces/sys/leases")] = (
        409,
        {"reason": "AlreadyExists", "message": "exists"},
    )
    with pytest.raises(AlreadyExists):
        await leases.create("sys", "l", rec)


async def test_event_recorder_creates_then_aggregates(fake: tuple[FakeApiServer, k8s.ApiClient, Path]) -> None:
    srv, api, _ = fake
    now = datetime(2030, 1, 1, tzinfo=UTC)
    ticks = [0.0]
    rec = EventRecorder(api, instance="kueue-tas-0", now=lambda: now, timer=lambda: ticks[0], window_seconds=60)
    wl = ObjectRef("kueue.x-k8s.io/v1beta2", "Workload", "wl", "ns", "uid-1")
    assert await rec.emit_event(wl, reason="TopologyNotFit", message="only 3 pods fit", type="Warning")
    create = srv.requests[-1]
    assert (create.method, create.path) == ("POST", "/apis/events.k8s.io/v1/namespaces/ns/events")
    body = create.body
    assert body["regarding"] == {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "name": "wl",
        "namespace": "ns",
        "uid": "uid-1",
    }
    assert body["reason"] == "TopologyNotFit" and body["action"] == "TopologyNotFit"
    assert body["note"] == "only 3 pods fit" and body["type"] == "Warning"
    assert body["reportingController"] == "kueue-tas.io/topology"
    assert body["reportingInstance"] == "kueue-tas-0"
    assert body["eventTime"] == "2030-01-01T00:00:00.000000Z"
    assert body["metadata"]["name"].startswith("wl.")
    name = body["metadata"]["name"]

    ticks[0] = 30.0
    assert await rec.emit_event(wl, reason="TopologyNotFit", message="only 3 pods fit", type="Warning")
    assert await rec.emit_event(wl, reason="TopologyNotFit", message="only 3 pods fit", type="Warning")
    patch = srv.requests[-1]
    assert (patch.method, patch.path) == ("PATCH", f"/apis/events.k8s.io/v1/namespaces/ns/events/{name}")
    assert patch.content_type == MERGE_PATCH
    assert patch.body == {"series": {"count": 3, "lastObservedTime": "2030-01-01T00:00:00.000000Z"}}
    assert len(srv.requests) == 3

    # a different message is a different event; after the window a repeat makes a new Event
    await rec.emit_event(wl, reason="TopologyNotFit", message="only 2 pods fit", type="Warning")
    assert srv.requests[-1].method == "POST"
    ticks[0] = 200.0
    await rec.emit_event(wl, reason="TopologyNotFit", message="only 3 pods fit", type="Warning")
    assert srv.requests[-1].method == "POST"


async def test_event_on_cluster_scoped_object_goes_to_default(
    fake: tuple[FakeApiServer, k8s.ApiClient, Path],
) -> None:
    srv, api, _ = fake
    rec = EventRecorder(api)
    ac = ObjectRef.of({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "AdmissionCheck", "metadata": {"name": "tas"}})
    assert await rec.emit_event(ac, reason="TopologyMissing", message="x" * 5000, type="Warning", action="Check")
    req = srv.requests[-1]
    assert req.path == "/apis/events.k8s.io/v1/namespaces/default/events"
    assert "namespace" not in req.body["regarding"]
    assert len(req.body["note"].encode()) <= 1024
    assert req.body["action"] == "Check"


async def test_event_failures_are_swallowed(fake: tuple[FakeApiServer, k8s.ApiClient, Path]) -> None:
    srv, api, _ = fake
    srv.responses[("POST", "/apis/events.k8s.io/v1/namespaces/ns/events")] = (403, {"reason": "Forbidden"})
    rec = EventRecorder(api)
    ref = ObjectRef("v1", "Pod", "p", "ns")
    assert not await rec.emit_event(ref, reason="R", message="m")
    with pytest.raises(ValueError):
        await rec.emit_event(ref, reason="R", message="m", type="Info")  # type: ignore[arg-type]


def test_error_mapping() -> None:
    assert isinstance(error_from_response(404, "Not Found", b'{"reason":"NotFound","message":"x"}'), NotFound)
    assert type(error_from_response(409, None, json.dumps(STATUS_409))) is Conflict
    assert isinstance(error_from_response(409, None, b'{"reason":"AlreadyExists"}'), AlreadyExists)
    assert isinstance(error_from_response(409, None, b'{"reason":"AlreadyExists"}'), Conflict)
    assert isinstance(error_from_response(410, None, b""), Gone)
    assert isinstance(error_from_response(422, None, b"{}"), Invalid)
    assert isinstance(error_from_response(503, "Unavailable", b"not json"), ServerError)
    assert isinstance(error_from_response(0, None, None), ServerError)
    e = error_from_response(418, "Teapot", b"plain text")
    assert type(e) is ApiError and e.message == "plain text" and e.reason == "Teapot"

    exc = ApiException(status=409, reason="Conflict")
    exc.body = json.dumps(STATUS_409).encode()
    mapped = map_api_exception(exc)
    assert isinstance(mapped, Conflict) and mapped.message == "the object has been modified"

    async def refused() -> None:
        raise ApiException(status=404, reason="Not Found")

    with pytest.raises(NotFound):
        asyncio.run(call_json(refused()))


async def test_raw_requests_and_transport_errors(fake: tuple[FakeApiServer, k8s.ApiClient, Path]) -> None:
    srv, api, _ = fake
    out = await request_json(
        api, "PATCH", "/api/v1/namespaces/ns/configmaps/x", body={"data": {}}, content_type=APPLY_PATCH
    )
    assert out["metadata"]["resourceVersion"] == "42" and srv.requests[-1].content_type == APPLY_PATCH
    srv.responses[("GET", "/api/v1/nodes")] = (403, {"reason": "Forbidden", "message": "no"})
    with pytest.raises(ApiError) as ei:
        await request_json(api, "GET", "/api/v1/nodes")
    assert ei.value.status == 403 and str(ei.value).startswith("GET /api/v1/nodes -> 403 Forbidden")
    closed = k8s.ApiClient(k8s.Configuration(host="http://127.0.0.1:9"))
    try:
        with pytest.raises(TransportError) as te:
            await request_json(closed, "GET", "/api/v1/nodes", timeout=5)
        assert te.value.status == 0 and isinstance(te.value, ApiError)
        with pytest.raises(TransportError):
            await call_json(k8s.CoreV1Api(closed).list_node(_preload_content=False, _request_timeout=5))
    finally:
        await closed.close()


def test_micro_time() -> None:
    assert micro_time(datetime(2030, 1, 1, tzinfo=UTC)) == "2030-01-01T00:00:00.000000Z"
    with pytest.raises(ValueError):
        micro_time(datetime(2030, 1, 1))


async def test_a_fenced_client_sends_no_write_but_its_leases_once_told_no(
    fake: tuple[FakeApiServer, k8s.ApiClient, Path],
) -> None:
    """``fence_writes``: asked just before each write is sent; reads and the Lease's own writes
    pass, every other write is refused before it reaches the wire, and the refusal says it
    cannot have landed."""
    srv, api, _ = fake
    assert isinstance(api, RateLimitedApiClient)
    leading = [True]
    api.fence_writes(lambda: leading[0])

    def patch() -> Awaitable[dict[str, Any]]:
        return annotate_wl(api, {"a": "b"})

    await patch()
    assert [r.method for r in srv.requests] == ["PATCH"]
    leading[0] = False
    with pytest.raises(NotLeading) as refused:
        await patch()
    assert not may_have_applied(refused.value)
    assert "PATCH /apis/kueue.x-k8s.io/v1beta2/namespaces/ns/workloads/wl" in str(refused.value)
    await request_json(api, "GET", "/apis/kueue.x-k8s.io/v1beta2/namespaces/ns/workloads/wl")
    lease = LeaseRecord(holder_identity=None, lease_duration_seconds=1)
    await KubeLeaseApi(api).replace("kube-system", "tas", lease)
    assert [(r.method, r.path.rsplit("/", 2)[-2]) for r in srv.requests] == [
        ("PATCH", "workloads"),
        ("GET", "workloads"),
        ("PUT", "leases"),
    ]
