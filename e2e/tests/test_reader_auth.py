"""Who may look, on a real API server: the controller started as deployed for readers
(``metrics_secure``, ``metrics_auth``, ``map_secure``, ``map_auth`` all on, the manifests' RBAC)
serves ``/metrics`` and the topology map over HTTPS, and answers

* no token: 401;
* a ServiceAccount token without the reader ClusterRoles: 403 from both;
* a ServiceAccount token bound to ``kueue-tas-metrics-reader`` and ``kueue-tas-map-reader``
  (``manifests/base/reader-clusterroles.yaml``): 200 from both;

while the health probes stay plain HTTP without a token (the group's readiness waits on them).
"""

from __future__ import annotations

import asyncio
import ssl
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import pytest_asyncio
from kubernetes_asyncio import client

from e2e.cluster_state import State
from e2e.controller import LOCAL_DEV_OPEN, ControllerGroup, metric_value
from kueue_tas.cli.map_server import PATHS
from kueue_tas.runtime.exposition import MAX_AGE as EXPOSITION_MAX_AGE

READER_ROLES = ("kueue-tas-metrics-reader", "kueue-tas-map-reader")
SECURED = {key: "true" for key in LOCAL_DEV_OPEN}
RBAC_PROPAGATION_S = 30.0


@pytest_asyncio.fixture(loop_scope="session")
async def secured(controller_kubeconfig: str, cluster_state: State) -> AsyncIterator[ControllerGroup]:
    group = ControllerGroup(
        controller_kubeconfig,
        Path(cluster_state.kubeconfig).parent / "logs" / "kueue-tas",
        replicas=1,
        leader_election=False,
        map_server=True,
        extra_env=SECURED,
    )
    await group.start()  # ready: /readyz answered over plain HTTP without a token
    try:
        yield group
    finally:
        group.stop()


async def _token(api: client.ApiClient, namespace: str, name: str) -> str:
    core = client.CoreV1Api(api)
    account: Any = {"metadata": {"name": name}}
    await core.create_namespaced_service_account(namespace, account)
    body: Any = {"spec": {"expirationSeconds": 600}}
    request = await core.create_namespaced_service_account_token(name, namespace, body)
    return str(request.status.token)


async def _allowed(api: client.ApiClient, user: str, path: str) -> bool:
    body: Any = {"spec": {"user": user, "nonResourceAttributes": {"path": path, "verb": "get"}}}
    review = await client.AuthorizationV1Api(api).create_subject_access_review(body)
    return bool(review.status.allowed)


async def _status(session: aiohttp.ClientSession, url: str, token: str | None) -> tuple[int, str]:
    headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
    async with session.get(url, headers=headers, ssl=_UNVERIFIED) as resp:
        return resp.status, await resp.text()


# The controller's certificate is its own (serving_cert_dir unset), as the ServiceMonitor scrapes it.
_UNVERIFIED = ssl.create_default_context()
_UNVERIFIED.check_hostname = False
_UNVERIFIED.verify_mode = ssl.CERT_NONE


async def test_a_token_without_the_reader_roles_gets_403_and_with_them_200(
    secured: ControllerGroup, api_client: client.ApiClient, namespace: str, unique: str
) -> None:
    (proc,) = secured.processes
    assert proc.metrics_url.startswith("https://") and proc.map_url.startswith("https://")
    reader, nobody = f"reader-{unique}", f"nobody-{unique}"
    reader_token = await _token(api_client, namespace, reader)
    nobody_token = await _token(api_client, namespace, nobody)
    rbac = client.RbacAuthorizationV1Api(api_client)
    bindings = [f"{role}-{unique}" for role in READER_ROLES]
    for binding, role in zip(bindings, READER_ROLES, strict=True):
        body: Any = {
            "metadata": {"name": binding},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
            "subjects": [{"kind": "ServiceAccount", "name": reader, "namespace": namespace}],
        }
        await rbac.create_cluster_role_binding(body)
    try:
        # Ask the controller only once the authorizer has the bindings: it caches a denial 30 s.
        reader_user = f"system:serviceaccount:{namespace}:{reader}"
        deadline = time.monotonic() + RBAC_PROPAGATION_S
        for path in ("/metrics", *PATHS):
            while not await _allowed(api_client, reader_user, path):
                assert time.monotonic() < deadline, f"the reader's binding is not effective for {path}"
                await asyncio.sleep(0.2)

        map_urls = [proc.map_url.rstrip("/") + path for path in PATHS]
        async with aiohttp.ClientSession() as session:
            for url in [proc.metrics_url, *map_urls]:
                status, text = await _status(session, url, None)
                assert (status, text) == (401, "Unauthorized: a bearer token is required\n"), url
                status, text = await _status(session, url, "not-a-token")
                assert status == 401, (url, text)
                status, text = await _status(session, url, nobody_token)
                assert status == 403, (url, text)
                assert f"system:serviceaccount:{namespace}:{nobody}" in text and text.count("\n") == 1
                assert "kueue_tas_" not in text and "<html" not in text.lower()
                status, text = await _status(session, url, reader_token)
                assert status == 200, (url, text)
            status, text = await _status(session, proc.metrics_url, reader_token)
            assert "kueue_tas_admissions_total" in text
            # Plain HTTP is not served where TLS is.
            with pytest.raises(aiohttp.ClientError):
                async with session.get(proc.metrics_url.replace("https://", "http://")) as resp:
                    await resp.read()
            # The probes: plain HTTP, no token.
            async with session.get(f"http://127.0.0.1:{proc.health_port}/readyz") as resp:
                assert resp.status == 200
        # Counted without the token, the user or the path in a label. A scrape's body is served
        # again for a few seconds (runtime/exposition.py), so the counts show up after that.
        deadline = time.monotonic() + 2 * EXPOSITION_MAX_AGE + 5
        async with aiohttp.ClientSession() as session:
            while True:
                _, metrics = await _status(session, proc.metrics_url, reader_token)
                forbidden = metric_value(metrics, "kueue_tas_http_auth_total", server="metrics", result="forbidden")
                allowed = metric_value(metrics, "kueue_tas_http_auth_total", server="map", result="allowed")
                if ((forbidden or 0) >= 1 and (allowed or 0) >= 3) or time.monotonic() > deadline:
                    break
                await asyncio.sleep(0.5)
        assert (forbidden or 0) >= 1 and (allowed or 0) >= 3, metrics
        assert reader_token not in proc.log_text() and nobody_token not in proc.log_text()
    finally:
        for binding in bindings:
            await rbac.delete_cluster_role_binding(binding)
