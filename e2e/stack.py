"""A complete kueue-tas setup for one e2e test, and the nodes tests add to its pool.

``tas_stack`` creates a private pool of kwok nodes (blocks x racks x hosts), a Topology over
its block/rack/hostname labels, a ResourceFlavor selecting the pool, an AdmissionCheck for the
controller group under test (its ``controller_name``), a ClusterQueue with generous quota that
lists the check on that flavor, and a LocalQueue ``lq`` in the test's namespace. Quota never
limits these tests: the topology does. The Jobs and JobSets tests submit are in ``e2e.jobs``,
reading their Workloads in ``e2e.workloads``, their pods in ``e2e.pods``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from e2e.kube import KUEUE_GROUP, KUEUE_VERSION, Kube, as_body, eventually
from e2e.nodes import GPU, POOL_LABEL, NodePool, is_ready
from kueue_tas.api.constants import HOSTNAME_LABEL


@dataclass(frozen=True)
class TasStack:
    namespace: str
    pool: NodePool
    topology: str
    flavor: str
    check: str
    cluster_queue: str
    local_queue: str = "lq"

    @property
    def levels(self) -> list[str]:
        return self.pool.level_labels()


async def tas_stack(
    kube: Kube,
    namespace: str,
    controller_name: str,
    pool: NodePool,
    *,
    levels: list[str] | None = None,
    create_nodes: bool = True,
) -> TasStack:
    """Nodes, Topology, ResourceFlavor, AdmissionCheck, ClusterQueue and LocalQueue ``lq``; waits
    until the ClusterQueue is Active (which needs our controller to have set the check Active)."""
    u = pool.name
    stack = TasStack(namespace, pool, f"topo-{u}", f"rf-{u}", f"ac-{u}", f"cq-{u}")
    if create_nodes:
        await kube.create_nodes(pool)
    await kube.create_topology(stack.topology, levels or pool.level_labels())
    await kube.create_resource_flavor(stack.flavor, node_labels={POOL_LABEL: pool.name})
    await kube.create_admission_check(
        stack.check, controller_name, {"apiGroup": KUEUE_GROUP, "kind": "Topology", "name": stack.topology}
    )
    quota = {"cpu": "100000", "memory": "1000Ti", GPU: "100000"}
    await kube.create_cluster_queue(
        stack.cluster_queue,
        {stack.flavor: quota},
        admission_checks=[{"name": stack.check, "onFlavors": [stack.flavor]}],
    )
    await kube.wait_cluster_queue_active(stack.cluster_queue, timeout_s=60)
    await kube.create_local_queue(namespace, stack.local_queue, stack.cluster_queue)
    return stack


def host_racks(pool: NodePool) -> dict[str, str]:
    """Hostname -> rack label value, for the pool's nodes."""
    return {
        n["metadata"]["labels"][HOSTNAME_LABEL]: n["metadata"]["labels"][pool.rack_label] for n in pool.node_objects()
    }


async def add_node(kube: Kube, pool: NodePool, block: int, rack: int, host: int, timeout_s: float = 60) -> str:
    """One more kwok node of ``pool`` in block ``block``, rack ``rack`` (1-based, as the pool names
    them); deleted by ``kube.cleanup()``. Returns its name once Ready."""
    body = pool._node(block, rack, host)
    name = str(body["metadata"]["name"])
    await kube.core.create_node(as_body(body))
    kube._nodes.append(name)

    async def ready() -> bool:
        node = await kube.core.read_node(name)
        return is_ready(kube.api.sanitize_for_serialization(node))

    await eventually(f"node {name} Ready", ready, timeout_s)
    return name


PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"


async def priority_stack(
    kube: Kube,
    namespace: str,
    controller_name: str,
    pool: NodePool,
    *,
    gpu_quota: int,
    annotations: dict[str, str] | None = None,
) -> TasStack:
    """As ``tas_stack``, but the ClusterQueue's GPU quota is ``gpu_quota``, it preempts lower
    priorities within itself, and carries ``annotations``; WorkloadPriorityClasses ``low-<u>``
    (10) and ``high-<u>`` (1000) for ``prioritised``."""
    u = pool.name
    s = TasStack(namespace, pool, f"topo-{u}", f"rf-{u}", f"ac-{u}", f"cq-{u}")
    await kube.create_nodes(pool)
    await kube.create_topology(s.topology, pool.level_labels())
    await kube.create_resource_flavor(s.flavor, node_labels={POOL_LABEL: pool.name})
    await kube.create_admission_check(
        s.check, controller_name, {"apiGroup": KUEUE_GROUP, "kind": "Topology", "name": s.topology}
    )
    for name, value in ((f"low-{u}", 10), (f"high-{u}", 1000)):
        body = {
            "apiVersion": f"{KUEUE_GROUP}/{KUEUE_VERSION}",
            "kind": "WorkloadPriorityClass",
            "metadata": {"name": name},
            "value": value,
        }
        await kube.create_cluster_object(KUEUE_GROUP, KUEUE_VERSION, "workloadpriorityclasses", body)
    resources = ["cpu", "memory", GPU]
    quota = {"cpu": "100000", "memory": "1000Ti", GPU: str(gpu_quota)}
    flavor_quota = {"name": s.flavor, "resources": [{"name": r, "nominalQuota": quota[r]} for r in resources]}
    cq: dict[str, Any] = {
        "apiVersion": f"{KUEUE_GROUP}/{KUEUE_VERSION}",
        "kind": "ClusterQueue",
        "metadata": {"name": s.cluster_queue, **({"annotations": annotations} if annotations else {})},
        "spec": {
            "namespaceSelector": {},
            "preemption": {"withinClusterQueue": "LowerPriority"},
            "resourceGroups": [{"coveredResources": resources, "flavors": [flavor_quota]}],
            "admissionChecksStrategy": {"admissionChecks": [{"name": s.check, "onFlavors": [s.flavor]}]},
        },
    }
    await kube.create_cluster_object(KUEUE_GROUP, KUEUE_VERSION, "clusterqueues", cq)
    await kube.wait_cluster_queue_active(s.cluster_queue, timeout_s=60)
    await kube.create_local_queue(namespace, s.local_queue, s.cluster_queue)
    return s


def prioritised(body: dict[str, Any], priority_class: str) -> dict[str, Any]:
    """A Job or JobSet with Kueue's priority-class label."""
    body["metadata"].setdefault("labels", {})[PRIORITY_LABEL] = priority_class
    return body
