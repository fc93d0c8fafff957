"""Fixtures for the e2e suite: one real local cluster per session (or a healthy running one).

Every test here runs on the session event loop (session-scoped async fixtures need it), is
marked ``e2e``, and gets a fresh namespace. Set ``KUEUE_TAS_E2E_KEEP=1`` to leave a cluster this
session started running afterwards (one that was already up is never stopped).
"""

from __future__ import annotations

import os
import uuid
import warnings
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException
from pytest_asyncio import is_async_test

from e2e import cluster
from e2e.cluster_health import is_healthy
from e2e.cluster_state import State, load_state
from e2e.controller import ControllerGroup
from e2e.kube import Kube, as_body, eventually, new_api_client
from e2e.monitor import Monitor
from kueue_tas.kube.client import ensure_no_proxy

ensure_no_proxy()

_SESSION = pytest.mark.asyncio(loop_scope="session")
NAMESPACE_DRAIN_S = 60.0


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if item.path.is_relative_to(here):
            item.add_marker(pytest.mark.e2e)
            if is_async_test(item):
                item.add_marker(_SESSION, append=False)


@pytest.fixture(scope="session")
def cluster_state() -> Iterator[State]:
    """The running cluster; started here (and stopped at the end) unless one was already healthy."""
    was_up = is_healthy(load_state())
    state = cluster.up()
    yield state
    if not was_up and not os.environ.get("KUEUE_TAS_E2E_KEEP"):
        cluster.down()


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def api_client(cluster_state: State) -> AsyncIterator[client.ApiClient]:
    api = await new_api_client(cluster_state.kubeconfig)
    try:
        yield api
    finally:
        await api.close()


@pytest_asyncio.fixture(loop_scope="session")
async def kube(api_client: client.ApiClient) -> AsyncIterator[Kube]:
    """Helpers; cluster-scoped objects and nodes a test creates through it are deleted afterwards."""
    k = Kube(api_client)
    try:
        yield k
    finally:
        await k.cleanup()


@pytest_asyncio.fixture(loop_scope="session")
async def namespace(kube: Kube) -> AsyncIterator[str]:
    """A fresh namespace, deleted after the test.

    Teardown waits (bounded) until the namespace's pods are gone, before ``kube`` (set up first,
    so torn down last) deletes the test's nodes: kwok only finalizes pods on nodes it manages.
    """
    core = kube.core
    name = f"e2e-{uuid.uuid4().hex[:8]}"
    await core.create_namespace(as_body({"metadata": {"name": name}}))
    try:
        yield name
    finally:
        try:
            # Terminating first (no new pods can appear), then force-delete the pods so the drain
            # does not wait for the namespace controller's pass.
            await core.delete_namespace(name, propagation_policy="Background")
            await core.delete_collection_namespaced_pod(name, grace_period_seconds=0)
        except ApiException as e:
            if e.status != 404:
                raise

        async def no_pods() -> bool:
            return not (await core.list_namespaced_pod(name)).items

        try:
            await eventually(f"pods of namespace {name} deleted", no_pods, NAMESPACE_DRAIN_S)
        except TimeoutError as e:
            warnings.warn(str(e), stacklevel=1)


@pytest_asyncio.fixture(loop_scope="session")
async def invariant_monitor(
    api_client: client.ApiClient, namespace: str
) -> AsyncIterator[Callable[..., Awaitable[Monitor]]]:
    """Start an invariant monitor (``e2e/monitor.py``) on the test's namespace:
    ``await invariant_monitor([stack.check], node_selector=...)``. The test fails at teardown
    when the monitor recorded a violation (set up after ``namespace``, so it stops before the
    namespace's pods are deleted)."""
    monitors: list[Monitor] = []

    async def start(checks: list[str], node_selector: str | None = None, **options: Any) -> Monitor:
        m = Monitor(api_client, checks=checks, namespace=namespace, node_selector=node_selector, **options)
        monitors.append(await m.start())
        return m

    yield start
    reports = []
    for m in monitors:
        if await m.stop():
            reports.append(m.report())
    assert not reports, "invariant violations:\n" + "\n".join(reports)


@pytest.fixture
def unique() -> str:
    """A short unique suffix for cluster-scoped object names."""
    return uuid.uuid4().hex[:6]


# --- kueue-tas itself -------------------------------------------------------------------------


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def controller_kubeconfig(api_client: client.ApiClient, cluster_state: State) -> str:
    """A kubeconfig bound to the ServiceAccount of ``manifests/base`` (exactly its RBAC)."""
    from e2e.rbac import service_account_kubeconfig

    out = Path(cluster_state.kubeconfig).parent / "kueue-tas-sa.kubeconfig"
    return str(await service_account_kubeconfig(api_client, cluster_state.kubeconfig, out))


def _log_dir(cluster_state: State) -> Path:
    return Path(cluster_state.kubeconfig).parent / "logs" / "kueue-tas"


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def tas(controller_kubeconfig: str, cluster_state: State) -> AsyncIterator[ControllerGroup]:
    """kueue-tas as deployed: two replicas with leader election, under the manifests' RBAC, each
    also serving the topology map (``process.map_url``; off in the manifests).

    Shared by the tests that do not kill it; create AdmissionChecks with ``tas.controller_name``.
    """
    group = ControllerGroup(controller_kubeconfig, _log_dir(cluster_state), replicas=2, map_server=True)
    await group.start()
    try:
        yield group
    finally:
        group.stop()


@pytest_asyncio.fixture(loop_scope="session")
async def tas_factory(
    controller_kubeconfig: str, cluster_state: State
) -> AsyncIterator[Callable[..., Awaitable[ControllerGroup]]]:
    """Start private controller groups (for tests that kill or restart them); all stopped afterwards."""
    groups: list[ControllerGroup] = []

    async def start(replicas: int = 1, leader_election: bool = True, **env: str) -> ControllerGroup:
        group = ControllerGroup(
            controller_kubeconfig,
            _log_dir(cluster_state),
            replicas=replicas,
            leader_election=leader_election,
            extra_env=dict(env),
        )
        groups.append(group)
        await group.start()
        return group

    try:
        yield start
    finally:
        for g in groups:
            g.kill_all()
