"""A complete kueue-tas setup for one e2e test, and the Jobs/JobSets tests submit to it.

``tas_stack`` creates a private pool of kwok nodes (blocks x racks x hosts), a Topology over
its block/rack/hostname labels, a ResourceFlavor selecting the pool, an AdmissionCheck for the
controller group under test (its ``controller_name``), a ClusterQueue with generous quota that
lists the check on that flavor, and a LocalQueue ``lq`` in the test's namespace. Quota never
limits these tests: the topology does.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from e2e.kube import (
    JOBSET_GROUP,
    JOBSET_VERSION,
    KUEUE_GROUP,
    QUEUE_LABEL,
    Kube,
    as_body,
    condition,
    condition_true,
    eventually,
)
from e2e.manifests import POD_COMPLETE_DELAY_ANNOTATION
from e2e.nodes import GPU, POOL_LABEL, NodePool, is_ready
from kueue_tas.api import constants as kc
from kueue_tas.api.constants import HOSTNAME_LABEL

PREFIX = kc.DEFAULT_ANNOTATION_PREFIX
REQUIRED = PREFIX + kc.SUFFIX_REQUIRED_TOPOLOGY
PREFERRED = PREFIX + kc.SUFFIX_PREFERRED_TOPOLOGY
ASSIGNMENT_ANNOTATION = kc.TOPOLOGY_ASSIGNMENT_ANNOTATION
GATE = kc.SCHEDULING_GATE
WORKLOAD_LABEL = kc.WORKLOAD_LABEL
PODSET_LABEL = kc.PODSET_LABEL


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


def container(gpu: int = 1, cpu: str = "100m") -> dict[str, Any]:
    requests: dict[str, str] = {"cpu": cpu, "memory": "64Mi"}
    limits: dict[str, str] = {}
    if gpu:
        requests[GPU] = str(gpu)
        limits[GPU] = str(gpu)  # extended resources need limits
    return {"name": "main", "image": "registry.invalid/fake:1", "resources": {"requests": requests, "limits": limits}}


def pod_template(
    *,
    gpu: int = 1,
    required: str | None = None,
    preferred: str | None = None,
    annotations: dict[str, str] | None = None,
    run_for: str = "1h",
) -> dict[str, Any]:
    ann = {POD_COMPLETE_DELAY_ANNOTATION: run_for}
    if required:
        ann[REQUIRED] = required
    if preferred:
        ann[PREFERRED] = preferred
    ann.update(annotations or {})
    return {"metadata": {"annotations": ann}, "spec": {"restartPolicy": "Never", "containers": [container(gpu)]}}


def job(
    name: str,
    parallelism: int,
    *,
    gpu: int = 1,
    required: str | None = None,
    preferred: str | None = None,
    annotations: dict[str, str] | None = None,
    queue: str = "lq",
    indexed: bool = True,
    run_for: str = "1h",
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "suspend": True,
        "parallelism": parallelism,
        "completions": parallelism,
        "template": pod_template(
            gpu=gpu, required=required, preferred=preferred, annotations=annotations, run_for=run_for
        ),
    }
    if indexed:
        spec["completionMode"] = "Indexed"
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "labels": {QUEUE_LABEL: queue}},
        "spec": spec,
    }


def jobset(name: str, replicated: list[tuple[str, int, int, dict[str, Any]]], *, queue: str = "lq") -> dict[str, Any]:
    """``replicated``: (name, replicas, parallelism, pod template) per replicated job."""
    return {
        "apiVersion": f"{JOBSET_GROUP}/{JOBSET_VERSION}",
        "kind": "JobSet",
        "metadata": {"name": name, "labels": {QUEUE_LABEL: queue}},
        "spec": {
            "suspend": True,
            "replicatedJobs": [
                {
                    "name": rj,
                    "replicas": replicas,
                    "template": {
                        "spec": {
                            "parallelism": par,
                            "completions": par,
                            "completionMode": "Indexed",
                            "backoffLimit": 0,
                            "template": tmpl,
                        }
                    },
                }
                for rj, replicas, par, tmpl in replicated
            ],
        },
    }


async def create_job(kube: Kube, namespace: str, body: dict[str, Any]) -> None:
    await kube.batch.create_namespaced_job(namespace, as_body(body))


async def create_jobset(kube: Kube, namespace: str, body: dict[str, Any]) -> None:
    await kube.custom.create_namespaced_custom_object(JOBSET_GROUP, JOBSET_VERSION, namespace, "jobsets", body)


async def workload_of(kube: Kube, namespace: str, owner_name: str, owner_kind: str = "Job") -> dict[str, Any] | None:
    for wl in await kube.workloads(namespace):
        for ref in wl["metadata"].get("ownerReferences") or []:
            if ref["kind"] == owner_kind and ref["name"] == owner_name:
                return dict(wl)
    return None


def check_entry(wl: dict[str, Any], check: str) -> dict[str, Any] | None:
    for entry in (wl.get("status") or {}).get("admissionChecks") or []:
        if entry.get("name") == check:
            return dict(entry)
    return None


def require_entry(wl: dict[str, Any], check: str) -> dict[str, Any]:
    """The Workload's entry for ``check``; fails the test when there is none."""
    entry = check_entry(wl, check)
    assert entry is not None, wl.get("status")
    return entry


async def wait_check(
    kube: Kube,
    stack: TasStack,
    owner_name: str,
    states: tuple[str, ...],
    *,
    owner_kind: str = "Job",
    timeout_s: float = 60,
) -> dict[str, Any]:
    """The Workload once our check entry is in one of ``states``."""

    async def reached() -> dict[str, Any] | None:
        wl = await workload_of(kube, stack.namespace, owner_name, owner_kind)
        entry = check_entry(wl, stack.check) if wl else None
        return wl if entry and entry.get("state") in states else None

    try:
        return await eventually(f"check {stack.check} of {owner_kind} {owner_name} in {states}", reached, timeout_s)
    except TimeoutError as e:
        raise TimeoutError(f"{e}\n{await workloads_summary(kube, stack.namespace)}") from None


async def workloads_summary(kube: Kube, namespace: str) -> str:
    """One line per Workload: conditions and check entries (for failure messages)."""
    lines = []
    for wl in await kube.workloads(namespace):
        conds = ",".join(
            f"{c['type']}={c['status']}({c.get('reason', '')})"
            for c in (wl.get("status") or {}).get("conditions") or []
        )
        checks = "; ".join(
            f"{e['name']}={e.get('state')}: {e.get('message', '')}"
            for e in (wl.get("status") or {}).get("admissionChecks") or []
        )
        lines.append(f"  {wl['metadata']['name']}: {conds} | {checks}")
    return "workloads:\n" + "\n".join(lines)


async def wait_admitted(
    kube: Kube, stack: TasStack, owner_name: str, *, owner_kind: str = "Job", timeout_s: float = 60
) -> dict[str, Any]:
    async def admitted() -> dict[str, Any] | None:
        wl = await workload_of(kube, stack.namespace, owner_name, owner_kind)
        return wl if wl and condition_true(wl, "Admitted") else None

    return await eventually(f"{owner_kind} {owner_name} Admitted", admitted, timeout_s)


def assignment(wl: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """PodSet name -> its TopologyAssignment (v1beta2 shape) from our Workload annotation."""
    text = (wl["metadata"].get("annotations") or {}).get(ASSIGNMENT_ANNOTATION)
    if not text:
        return {}
    return {ps["name"]: ps["topologyAssignment"] for ps in json.loads(text)["podSets"]}


def domain_counts(wl: dict[str, Any], podset: str) -> dict[tuple[str, ...], int]:
    """Domain values -> count of one PodSet's assignment, decoded with the product's codec."""
    from kueue_tas.topology.codec import decode_assignment_annotation

    text = wl["metadata"]["annotations"][ASSIGNMENT_ANNOTATION]
    for name, ta in decode_assignment_annotation(text):
        if name == podset:
            return {d.values: d.count for d in ta.domains}
    raise KeyError(podset)


async def events_for(kube: Kube, namespace: str, name: str, kind: str = "Workload") -> list[dict[str, Any]]:
    """events.k8s.io Events regarding one object."""
    res = await kube.custom.list_namespaced_custom_object("events.k8s.io", "v1", namespace, "events")
    return [
        e
        for e in res.get("items", [])
        if (e.get("regarding") or {}).get("name") == name and (e.get("regarding") or {}).get("kind") == kind
    ]


async def pods_of(kube: Kube, namespace: str, selector: str) -> list[dict[str, Any]]:
    res = await kube.core.list_namespaced_pod(namespace, label_selector=selector)
    return [kube.api.sanitize_for_serialization(p) for p in res.items]


# --- pods of ungated workloads (used by test_ungater.py and benchmarks/ungater.py) ------------------


async def pods_raw(kube: Kube, namespace: str, selector: str = "") -> list[dict[str, Any]]:
    """Pods as plain JSON dicts, without building the generated models (fast enough to poll 1,000 pods)."""
    resp: Any = await kube.core.list_namespaced_pod(namespace, label_selector=selector, _preload_content=False)
    try:
        data = await resp.read()
    finally:
        resp.release()
    return list(json.loads(data).get("items") or [])


def is_live(pod: dict[str, Any]) -> bool:
    """Not terminating and not terminal: the pod holds a slot of its domain."""
    return not pod["metadata"].get("deletionTimestamp") and (pod.get("status") or {}).get("phase") not in (
        "Succeeded",
        "Failed",
    )


def is_gated(pod: dict[str, Any], gate: str = GATE) -> bool:
    return any(g.get("name") == gate for g in pod["spec"].get("schedulingGates") or [])


def podset_levels(wl: dict[str, Any], podset: str) -> tuple[str, ...]:
    """The level keys of one PodSet's assignment (the keys the ungater puts in nodeSelectors)."""
    from kueue_tas.topology.codec import decode_assignment_annotation

    for name, ta in decode_assignment_annotation(wl["metadata"]["annotations"][ASSIGNMENT_ANNOTATION]):
        if name == podset:
            return tuple(ta.levels)
    raise KeyError(podset)


def slots(wl: dict[str, Any], podset: str) -> list[tuple[str, ...]]:
    """The assignment's domains expanded in assignment order: rank i -> domain of slot i."""
    return [d for d, n in domain_counts(wl, podset).items() for _ in range(n)]


def selector_domain(pod: dict[str, Any], levels: tuple[str, ...]) -> tuple[str, ...] | None:
    """The domain a pod's nodeSelector pins it to (None when a level key is missing)."""
    sel = pod["spec"].get("nodeSelector") or {}
    return tuple(sel[k] for k in levels) if all(k in sel for k in levels) else None


# --- more helpers (admission tests) -------------------------------------------------------------

SLICE_REQUIRED = PREFIX + "podset-slice-required-topology"
SLICE_SIZE = PREFIX + "podset-slice-size"


def host_racks(pool: NodePool) -> dict[str, str]:
    """Hostname -> rack label value, for the pool's nodes."""
    return {
        n["metadata"]["labels"][HOSTNAME_LABEL]: n["metadata"]["labels"][pool.rack_label] for n in pool.node_objects()
    }


def racks_of(wl: dict[str, Any], podset: str, racks: dict[str, str]) -> dict[str, int]:
    """Rack -> pods of one PodSet's assignment (hostname-level domains mapped with ``racks``)."""
    out: dict[str, int] = {}
    for values, count in domain_counts(wl, podset).items():
        rack = racks[values[-1]]
        out[rack] = out.get(rack, 0) + count
    return out


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


async def create_bound_pod(
    kube: Kube, namespace: str, name: str, node: str, *, gpu: int = 1, cpu: str = "100m"
) -> None:
    """A pod outside any queue, bound to ``node`` by ``spec.nodeName`` (like a DaemonSet's), that
    kwok keeps running."""
    body = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {"nodeName": node, "containers": [container(gpu, cpu)], "tolerations": [{"operator": "Exists"}]},
    }
    await kube.core.create_namespaced_pod(namespace, as_body(body))

    async def running() -> bool:
        pod = await kube.core.read_namespaced_pod(name, namespace)
        return bool(pod.status and pod.status.phase == "Running")

    await eventually(f"pod {namespace}/{name} Running", running, 60)


async def delete_job(kube: Kube, namespace: str, name: str) -> None:
    await kube.batch.delete_namespaced_job(name, namespace, propagation_policy="Background")


async def wait_workload_gone(
    kube: Kube, namespace: str, owner_name: str, owner_kind: str = "Job", timeout_s: float = 60
) -> None:
    async def gone() -> bool:
        return await workload_of(kube, namespace, owner_name, owner_kind) is None

    await eventually(f"Workload of {owner_kind} {owner_name} deleted", gone, timeout_s)


async def job_gates(kube: Kube, namespace: str, name: str) -> list[str]:
    job = await kube.batch.read_namespaced_job(name, namespace)
    gates = job.spec.template.spec.scheduling_gates or []
    return [g.name for g in gates]


async def jobset_gates(kube: Kube, namespace: str, name: str) -> dict[str, list[str]]:
    """Replicated job name -> scheduling gates of its pod template."""
    js = await kube.custom.get_namespaced_custom_object(JOBSET_GROUP, JOBSET_VERSION, namespace, "jobsets", name)
    return {
        rj["name"]: [g["name"] for g in rj["template"]["spec"]["template"]["spec"].get("schedulingGates") or []]
        for rj in js["spec"]["replicatedJobs"]
    }


def pod_set_updates(entry: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """PodSet name -> its podSetUpdate in a check entry."""
    return {u["name"]: u for u in entry.get("podSetUpdates") or []}


def parse_metrics(text: str) -> list[tuple[str, dict[str, str], float]]:
    """(name, labels, value) of every sample of a Prometheus text exposition."""
    from prometheus_client.parser import text_string_to_metric_families

    return [(s.name, dict(s.labels), s.value) for fam in text_string_to_metric_families(text) for s in fam.samples]


async def wait_rejected(
    kube: Kube, stack: TasStack, owner_name: str, *, owner_kind: str = "Job", timeout_s: float = 60
) -> tuple[dict[str, Any], str]:
    """(Workload, message) once our check Rejected it. Kueue deactivates a rejected Workload at
    once and resets the entry to Pending ("... Previously: Rejected"), so either form counts;
    the message is the entry's, or the one Kueue copied into the Evicted condition."""

    async def rejected() -> tuple[dict[str, Any], str] | None:
        wl = await workload_of(kube, stack.namespace, owner_name, owner_kind)
        if wl is None:
            return None
        entry = check_entry(wl, stack.check) or {}
        if entry.get("state") == "Rejected":
            return wl, str(entry.get("message", ""))
        evicted = condition(wl, "Evicted") or {}
        if (
            wl["spec"].get("active") is False
            and evicted.get("reason") == "DeactivatedDueToAdmissionCheck"
            and "Previously: Rejected" in str(entry.get("message", ""))
        ):
            return wl, str(evicted.get("message", ""))
        return None

    return await eventually(f"check {stack.check} of {owner_kind} {owner_name} Rejected", rejected, timeout_s)
