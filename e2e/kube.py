"""Async helpers over kubernetes_asyncio for the e2e suite and the demo.

Creates the Kueue objects a test needs (ResourceFlavor, ClusterQueue, LocalQueue, Topology,
AdmissionCheck, all ``kueue.x-k8s.io/v1beta2``), kwok nodes, and waits with bounded polling.
Cluster-scoped objects created through a ``Kube`` are remembered and removed by ``cleanup()``.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, TypeVar, cast

from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from e2e.nodes import NodePool, is_ready
from kueue_tas.kube.client import make_api_client

KUEUE_GROUP = "kueue.x-k8s.io"
KUEUE_VERSION = "v1beta2"
JOBSET_GROUP = "jobset.x-k8s.io"
JOBSET_VERSION = "v1alpha2"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
MERGE_PATCH = "application/merge-patch+json"

T = TypeVar("T")


def as_body(manifest: Mapping[str, Any]) -> Any:
    """A plain manifest as a request body: the client serialises dicts as they are, while its
    typing stubs ask for its model classes (V1Pod, V1Node, ...)."""
    return manifest


def content_type(value: str) -> dict[str, Any]:
    """``_content_type=value`` for a patch call (the client takes it; its typing stubs omit it)."""
    return {"_content_type": value}


async def new_api_client(kubeconfig: str, pool_size: int = 64) -> client.ApiClient:
    api, _ = await make_api_client(kubeconfig, pool=pool_size)
    return api


async def eventually(
    what: str,
    fn: Callable[[], Awaitable[T | None]],
    timeout_s: float = 60.0,
    interval_s: float = 0.5,
) -> T:
    """Await ``fn`` until it returns something truthy; return it. TimeoutError after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    last: Any = None
    while True:
        try:
            last = await fn()
            if last:
                return cast(T, last)
        except ApiException as e:
            last = f"ApiException {e.status}: {e.reason}"
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout_s:.0f}s waiting for {what}; last value: {last!r}")
        await asyncio.sleep(interval_s)


async def consistently(
    what: str, fn: Callable[[], Awaitable[object]], duration_s: float = 3.0, interval_s: float = 0.5
) -> None:
    """Assert ``fn`` stays truthy for ``duration_s``."""
    deadline = time.monotonic() + duration_s
    while time.monotonic() < deadline:
        assert await fn(), f"expected to stay true: {what}"
        await asyncio.sleep(interval_s)


def condition(obj: dict[str, Any], ctype: str) -> dict[str, Any] | None:
    for c in (obj.get("status") or {}).get("conditions") or []:
        if c.get("type") == ctype:
            return dict(c)
    return None


def condition_true(obj: dict[str, Any], ctype: str) -> bool:
    c = condition(obj, ctype)
    return c is not None and c.get("status") == "True"


class Kube:
    """Thin async facade used by tests; remembers cluster-scoped objects for cleanup."""

    def __init__(self, api: client.ApiClient) -> None:
        self.api = api
        self.core = client.CoreV1Api(api)
        self.batch = client.BatchV1Api(api)
        self.custom = client.CustomObjectsApi(api)
        self._cluster_objects: list[tuple[str, str, str, str]] = []  # group, version, plural, name
        self._nodes: list[str] = []

    # -------------------------------------------------------------- generic custom objects

    async def create_cluster_object(self, group: str, version: str, plural: str, body: dict[str, Any]) -> Any:
        obj = await self.custom.create_cluster_custom_object(group, version, plural, body)
        self._cluster_objects.append((group, version, plural, body["metadata"]["name"]))
        return obj

    async def get_cluster_object(self, group: str, version: str, plural: str, name: str) -> Any:
        return await self.custom.get_cluster_custom_object(group, version, plural, name)

    async def list_namespaced(self, group: str, version: str, plural: str, namespace: str) -> list[dict[str, Any]]:
        res = await self.custom.list_namespaced_custom_object(group, version, namespace, plural)
        return list(res.get("items", []))

    # -------------------------------------------------------------- Kueue objects

    async def create_resource_flavor(
        self, name: str, node_labels: dict[str, str] | None = None, topology_name: str | None = None
    ) -> Any:
        spec: dict[str, Any] = {}
        if node_labels:
            spec["nodeLabels"] = node_labels
        if topology_name:
            spec["topologyName"] = topology_name
        body = {
            "apiVersion": f"{KUEUE_GROUP}/{KUEUE_VERSION}",
            "kind": "ResourceFlavor",
            "metadata": {"name": name},
            "spec": spec,
        }
        return await self.create_cluster_object(KUEUE_GROUP, KUEUE_VERSION, "resourceflavors", body)

    async def create_cluster_queue(
        self,
        name: str,
        flavor_quotas: dict[str, dict[str, str]],
        *,
        admission_checks: list[dict[str, Any]] | None = None,
        namespace_selector: dict[str, Any] | None = None,
    ) -> Any:
        """``flavor_quotas``: flavor name -> {resource: nominal quota}; one resource group."""
        resources = sorted({r for q in flavor_quotas.values() for r in q})
        spec: dict[str, Any] = {
            "namespaceSelector": namespace_selector if namespace_selector is not None else {},
            "resourceGroups": [
                {
                    "coveredResources": resources,
                    "flavors": [
                        {"name": f, "resources": [{"name": r, "nominalQuota": q.get(r, "0")} for r in resources]}
                        for f, q in flavor_quotas.items()
                    ],
                }
            ],
        }
        if admission_checks:
            spec["admissionChecksStrategy"] = {"admissionChecks": admission_checks}
        body = {
            "apiVersion": f"{KUEUE_GROUP}/{KUEUE_VERSION}",
            "kind": "ClusterQueue",
            "metadata": {"name": name},
            "spec": spec,
        }
        return await self.create_cluster_object(KUEUE_GROUP, KUEUE_VERSION, "clusterqueues", body)

    async def create_local_queue(self, namespace: str, name: str, cluster_queue: str) -> Any:
        body = {
            "apiVersion": f"{KUEUE_GROUP}/{KUEUE_VERSION}",
            "kind": "LocalQueue",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"clusterQueue": cluster_queue},
        }
        return await self.custom.create_namespaced_custom_object(
            KUEUE_GROUP, KUEUE_VERSION, namespace, "localqueues", body
        )

    async def create_topology(self, name: str, levels: list[str]) -> Any:
        body = {
            "apiVersion": f"{KUEUE_GROUP}/{KUEUE_VERSION}",
            "kind": "Topology",
            "metadata": {"name": name},
            "spec": {"levels": [{"nodeLabel": lv} for lv in levels]},
        }
        return await self.create_cluster_object(KUEUE_GROUP, KUEUE_VERSION, "topologies", body)

    async def create_admission_check(
        self, name: str, controller_name: str, parameters: dict[str, str] | None = None
    ) -> Any:
        spec: dict[str, Any] = {"controllerName": controller_name}
        if parameters:
            spec["parameters"] = parameters
        body = {
            "apiVersion": f"{KUEUE_GROUP}/{KUEUE_VERSION}",
            "kind": "AdmissionCheck",
            "metadata": {"name": name},
            "spec": spec,
        }
        return await self.create_cluster_object(KUEUE_GROUP, KUEUE_VERSION, "admissionchecks", body)

    async def set_admission_check_active(self, name: str, active: bool = True) -> Any:
        """Play an AdmissionCheck controller: set the ``Active`` condition (merge patch on status)."""
        ac = await self.get_cluster_object(KUEUE_GROUP, KUEUE_VERSION, "admissionchecks", name)
        cond = {
            "type": "Active",
            "status": "True" if active else "False",
            "reason": "Active" if active else "Inactive",
            "message": "set by the e2e harness",
            "observedGeneration": ac["metadata"]["generation"],
            "lastTransitionTime": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        }
        return await self.custom.patch_cluster_custom_object_status(
            KUEUE_GROUP,
            KUEUE_VERSION,
            "admissionchecks",
            name,
            {"status": {"conditions": [cond]}},
            **content_type(MERGE_PATCH),
        )

    async def wait_cluster_queue_active(self, name: str, timeout_s: float = 60) -> dict[str, Any]:
        async def active() -> dict[str, Any] | None:
            cq = await self.get_cluster_object(KUEUE_GROUP, KUEUE_VERSION, "clusterqueues", name)
            return dict(cq) if condition_true(cq, "Active") else None

        return await eventually(f"ClusterQueue {name} Active", active, timeout_s)

    async def workloads(self, namespace: str) -> list[dict[str, Any]]:
        return await self.list_namespaced(KUEUE_GROUP, KUEUE_VERSION, "workloads", namespace)

    # -------------------------------------------------------------- nodes

    async def create_nodes(self, pool: NodePool, timeout_s: float = 120) -> list[str]:
        names = []
        for node in pool.node_objects():
            await self.core.create_node(as_body(node))
            names.append(node["metadata"]["name"])
            self._nodes.append(node["metadata"]["name"])
        wanted = set(names)

        async def ready() -> bool:
            nodes = await self.core.list_node(label_selector=f"e2e.kueue-tas.io/pool={pool.selector_value}")
            got = {n.metadata.name for n in nodes.items if is_ready(self.api.sanitize_for_serialization(n))}
            return wanted <= got

        await eventually(f"{len(names)} nodes of pool {pool.name} Ready", ready, timeout_s)
        return names

    # -------------------------------------------------------------- cleanup

    async def cleanup(self) -> None:
        """Delete remembered cluster-scoped objects (newest first) and nodes; ignore 404s."""
        for group, version, plural, name in reversed(self._cluster_objects):
            with contextlib.suppress(ApiException):
                await self.custom.delete_cluster_custom_object(group, version, plural, name)
        self._cluster_objects.clear()
        for name in self._nodes:
            with contextlib.suppress(ApiException):
                await self.core.delete_node(name)
        self._nodes.clear()


async def set_workload_check_state(
    kube: Kube,
    namespace: str,
    workload: str,
    check: str,
    state: str,
    *,
    message: str = "",
    pod_set_updates: list[dict[str, Any]] | None = None,
    field_manager: str = "kueue-tas-e2e",
) -> Any:
    """Play an AdmissionCheck controller: server-side apply one check entry on ``workloads/status``."""
    entry: dict[str, Any] = {
        "name": check,
        "state": state,
        "message": message,
        "lastTransitionTime": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    if pod_set_updates is not None:
        entry["podSetUpdates"] = pod_set_updates
    body = {
        "apiVersion": f"{KUEUE_GROUP}/{KUEUE_VERSION}",
        "kind": "Workload",
        "metadata": {"name": workload, "namespace": namespace},
        "status": {"admissionChecks": [entry]},
    }
    return await kube.custom.patch_namespaced_custom_object_status(
        KUEUE_GROUP,
        KUEUE_VERSION,
        namespace,
        "workloads",
        workload,
        body,
        field_manager=field_manager,
        force=True,
        **content_type("application/apply-patch+yaml"),
    )
