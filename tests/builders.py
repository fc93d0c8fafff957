"""Builders of the Kubernetes and Kueue objects the unit tests feed in, as plain dicts.

One builder per kind, keyword arguments for the common variations; a test needing an odd
shape edits the returned dict. Defaults describe the default ``kueue-tas plan`` cluster:
Topology ``topo`` (block, rack, hostname), flavor ``gpu`` (nodeLabels ``node-group: gpu``)
governed by AdmissionCheck ``tas`` through ClusterQueue ``cq``, nodes of 4 GPUs, Jobs and
Workloads in namespace ``team-a`` on LocalQueue ``lq``. Tests with other label keys or names
pass them; ``grid_nodes``, ``kueue_objects`` and ``cluster`` build that whole cluster.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

import yaml

# The shared keys, also as ``mk.RACK``, ``mk.REQUIRED``, ... for the tests that build with them.
from vocab import ASSIGNMENT as ASSIGNMENT
from vocab import BLOCK as BLOCK
from vocab import CONTROLLER as CONTROLLER
from vocab import GPU as GPU
from vocab import HOST as HOST
from vocab import PREFERRED as PREFERRED
from vocab import RACK as RACK
from vocab import REQUIRED as REQUIRED
from vocab import SLICE_LEVEL as SLICE_LEVEL
from vocab import SLICE_SIZE as SLICE_SIZE
from vocab import UNCONSTRAINED as UNCONSTRAINED
from vocab import WORKLOAD_LABEL as WORKLOAD_LABEL

from kueue_tas.topology.assignment import TopologyAssignment
from kueue_tas.topology.codec.codec import encode_assignment_annotation
from kueue_tas.topology.model import NodeInfo

KUEUE_API = "kueue.x-k8s.io/v1beta2"
NS = "team-a"
CHECK_TIME = "2024-01-01T00:00:00Z"

Obj = dict[str, Any]


def _given(**fields: Any) -> Obj:
    """The fields that are not None."""
    return {k: v for k, v in fields.items() if v is not None}


def _meta(name: str, namespace: str | None = None, **fields: Any) -> Obj:
    return {"name": name, **_given(namespace=namespace, **fields)}


def required(level: str) -> dict[str, str]:
    return {REQUIRED: level}


def condition(
    type: str,
    status: bool | str = True,
    *,
    reason: str | None = None,
    message: str | None = None,
    time: str | None = None,
) -> Obj:
    text = status if isinstance(status, str) else str(status)
    return {"type": type, "status": text, **_given(reason=reason, message=message, lastTransitionTime=time)}


# --- Kueue configuration ------------------------------------------------------------------------


def topology(
    name: str = "topo",
    levels: Sequence[str] = (BLOCK, RACK, HOST),
    *,
    api_version: str = KUEUE_API,
    resource_version: str | None = None,
) -> Obj:
    return {
        "apiVersion": api_version,
        "kind": "Topology",
        "metadata": _meta(name, resourceVersion=resource_version),
        "spec": {"levels": [{"nodeLabel": level} for level in levels]},
    }


def flavor(
    name: str = "gpu", node_labels: Mapping[str, str] | None = None, *, resource_version: str | None = None, **spec: Any
) -> Obj:
    """A ResourceFlavor; nodeLabels default to ``node-group: <name>``; ``spec`` adds camelCase fields."""
    return {
        "apiVersion": KUEUE_API,
        "kind": "ResourceFlavor",
        "metadata": _meta(name, resourceVersion=resource_version),
        "spec": {"nodeLabels": {"node-group": name} if node_labels is None else dict(node_labels), **spec},
    }


def admission_check(
    name: str = "tas",
    topology_name: str | None = "topo",
    controller: str = CONTROLLER,
    *,
    resource_version: str | None = None,
    generation: int | None = None,
    conditions: Sequence[Obj] | None = None,
) -> Obj:
    """An AdmissionCheck whose parameters name Topology ``topology_name`` (none if None)."""
    spec: Obj = {"controllerName": controller}
    if topology_name is not None:
        spec["parameters"] = {"apiGroup": "kueue.x-k8s.io", "kind": "Topology", "name": topology_name}
    meta = _meta(name, resourceVersion=resource_version, generation=generation)
    status = _given(status=None if conditions is None else {"conditions": list(conditions)})
    return {"apiVersion": KUEUE_API, "kind": "AdmissionCheck", "metadata": meta, "spec": spec, **status}


def cluster_queue(
    name: str = "cq",
    flavors: Sequence[str] = ("gpu",),
    checks: Mapping[str, Sequence[str]] | None = None,
    *,
    covered: Sequence[str] = ("cpu", GPU),
    quota: int | str | None = 1000,
    resource_groups: list[Obj] | None = None,
    api_version: str = KUEUE_API,
    resource_version: str | None = None,
    **spec: Any,
) -> Obj:
    """A ClusterQueue over ``flavors`` (each with ``quota`` of every covered resource, or no
    resources if None). ``checks``: check name -> onFlavors (empty = every flavor); by default
    ``tas`` on every flavor; ``{}``: no admissionChecksStrategy. ``resource_groups`` replaces the
    generated group; ``spec`` adds fields."""
    rules = {"tas": list(flavors)} if checks is None else checks
    resources = [] if quota is None else [{"name": r, "nominalQuota": quota} for r in covered]
    groups = resource_groups or [
        {"coveredResources": list(covered), "flavors": [{"name": f, "resources": list(resources)} for f in flavors]}
    ]
    if rules:
        strategy = [{"name": n, **({"onFlavors": list(on)} if on else {})} for n, on in rules.items()]
        spec = {"admissionChecksStrategy": {"admissionChecks": strategy}, **spec}
    return {
        "apiVersion": api_version,
        "kind": "ClusterQueue",
        "metadata": _meta(name, resourceVersion=resource_version),
        "spec": {"resourceGroups": groups, **spec},
    }


# --- nodes and pods -----------------------------------------------------------------------------


def node(
    name: str,
    block: str | None = "b0",
    rack: str | None = "b0-r0",
    *,
    group: str = "gpu",
    labels: Mapping[str, str] | None = None,
    hostname: str | None = None,
    gpus: int | None = 4,
    allocatable: Mapping[str, Any] | None = None,
    ready: bool = True,
    conditions: Sequence[Obj] | None = None,
    unschedulable: bool = False,
    taints: list[Obj] | None = None,
    resource_version: str | None = None,
) -> Obj:
    """A Node labelled hostname = ``hostname`` or its name, plus ``labels`` if given, else the plan
    cluster's block/rack (omitted if None) and ``node-group``. Allocatable: 32 cpu, 256Gi, 110 pods
    and ``gpus`` GPUs (none if None), unless ``allocatable``; one Ready condition unless ``conditions``."""
    if labels is None:
        labels = {"node-group": group} | ({BLOCK: block} if block is not None else {})
        labels |= {RACK: rack} if rack is not None else {}
    spec = _given(unschedulable=unschedulable or None, taints=taints or None)
    if allocatable is None:
        allocatable = {"cpu": "32", "memory": "256Gi", "pods": "110"} | ({GPU: str(gpus)} if gpus is not None else {})
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": _meta(name, labels={HOST: hostname or name, **labels}, resourceVersion=resource_version),
        "spec": spec,
        "status": {
            "allocatable": dict(allocatable),
            "conditions": [condition("Ready", ready)] if conditions is None else list(conditions),
        },
    }


def grid_nodes(blocks: int = 2, racks: int = 2, hosts: int = 2, *, group: str = "gpu", gpus: int = 4) -> list[Obj]:
    """Nodes named b<i>-r<j>-h<k> (with a ``<group>-`` prefix unless the group is ``gpu``)."""
    prefix = "" if group == "gpu" else f"{group}-"
    return [
        node(f"{prefix}b{b}-r{r}-h{h}", f"{prefix}b{b}", f"{prefix}b{b}-r{r}", group=group, gpus=gpus)
        for b in range(blocks)
        for r in range(racks)
        for h in range(hosts)
    ]


def node_info(
    name: str,
    labels: Mapping[str, str],
    *,
    cpu: int | None = None,
    pods: int | None = None,
    gpus: int | None = None,
    ready: bool = True,
) -> NodeInfo:
    """The engine's node, labelled ``labels`` plus hostname = its name; allocatable only the
    resources given (cpu in millicores)."""
    amounts = {"cpu": cpu, "pods": pods, GPU: gpus}
    allocatable = {r: n for r, n in amounts.items() if n is not None}
    return NodeInfo(name, {**labels, HOST: name}, allocatable, ready=ready)


def pod(
    name: str,
    node: str | None = None,
    *,
    namespace: str = NS,
    gpus: int | None = None,
    requests: Mapping[str, str] | None = None,
    phase: str = "Running",
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    uid: str | None = None,
    resource_version: str | None = None,
    gates: Sequence[str] = (),
    selector: Mapping[str, str] | None = None,
    overhead: Mapping[str, str] | None = None,
    deleting: bool = False,
    owner: Obj | None = None,
) -> Obj:
    """A Pod bound to ``node`` (unbound if None) with one container requesting ``requests`` plus
    ``gpus`` GPUs (no resources if neither), held by scheduling ``gates``; ``owner``: the object
    controlling it (an ownerReference with ``controller: true``)."""
    spec = _given(
        nodeName=node,
        schedulingGates=[{"name": g} for g in gates] or None,
        nodeSelector=None if selector is None else dict(selector),
    )
    want = dict(requests or {}) | ({GPU: str(gpus)} if gpus is not None else {})
    spec["containers"] = [{"name": "c", "resources": {"requests": want}} if want else {"name": "c"}]
    spec |= _given(overhead=None if overhead is None else dict(overhead))
    meta = _meta(
        name,
        namespace,
        uid=uid,
        resourceVersion=resource_version,
        labels=dict(labels or {}),
        annotations=None if annotations is None else dict(annotations),
        deletionTimestamp=CHECK_TIME if deleting else None,
        ownerReferences=None if owner is None else [controller_ref(owner)],
    )
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec, "status": {"phase": phase}}


def controller_ref(owner: Obj) -> Obj:
    """An ownerReference naming ``owner`` as the controller."""
    meta = owner["metadata"]
    return {
        "apiVersion": owner["apiVersion"],
        "kind": owner["kind"],
        "name": meta["name"],
        "uid": meta["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }


def daemonset(
    name: str,
    *,
    namespace: str = "kube-system",
    uid: str | None = None,
    requests: Mapping[str, str] | None = None,
    node_selector: Mapping[str, str] | None = None,
    tolerations: Sequence[Obj] | None = None,
    affinity: Obj | None = None,
    host_network: bool | None = None,
    node_name: str | None = None,
    deleting: bool = False,
) -> Obj:
    """An apps/v1 DaemonSet (UID ``uid-<name>`` unless given) whose pod has one container
    requesting ``requests`` (none if None)."""
    container: Obj = {"name": "d", "image": "x"}
    if requests:
        container["resources"] = {"requests": dict(requests)}
    pod_spec = _given(
        nodeSelector=None if node_selector is None else dict(node_selector),
        tolerations=None if tolerations is None else list(tolerations),
        affinity=affinity,
        hostNetwork=host_network,
        nodeName=node_name,
    )
    labels = {"app": name}
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": _meta(
            name, namespace, uid=uid or f"uid-{name}", deletionTimestamp=CHECK_TIME if deleting else None
        ),
        "spec": {
            "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": {"containers": [container], **pod_spec}},
        },
    }


# --- jobs and workloads -------------------------------------------------------------------------


def pod_template(
    annotations: Mapping[str, str] | None = None, gpus: int = 1, cpu: str | None = None, **spec: Any
) -> Obj:
    """A Job/PodSet pod template: one container requesting ``gpus`` GPUs (none if 0) and ``cpu``."""
    requests: dict[str, str] = {GPU: str(gpus)} if gpus else {}
    if cpu is not None:
        requests["cpu"] = cpu
    return {
        "metadata": {"annotations": dict(annotations or {})},
        "spec": {
            "restartPolicy": "Never",
            "containers": [{"name": "c", "image": "x", "resources": {"requests": requests}}],
            **spec,
        },
    }


def job(
    name: str,
    parallelism: int | None,
    annotations: Mapping[str, str] | None = None,
    *,
    completions: int | Literal["parallelism"] | None = "parallelism",
    namespace: str = NS,
    uid: str | None = None,
    template: Obj | None = None,
    **template_args: Any,
) -> Obj:
    """A suspended batch/v1 Job on LocalQueue ``lq``; parallelism/completions unset if None.
    The pod template is ``template`` or ``pod_template(annotations, **template_args)``."""
    done = parallelism if completions == "parallelism" else completions
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": _meta(name, namespace, labels={"kueue.x-k8s.io/queue-name": "lq"}, uid=uid),
        "spec": {
            **_given(parallelism=parallelism, completions=done),
            "suspend": True,
            "template": pod_template(annotations, **template_args) if template is None else template,
        },
    }


def replicated_job(
    name: str,
    replicas: int | None,
    parallelism: int | None,
    completions: int | None,
    annotations: Mapping[str, str] | None = None,
    *,
    template: Obj | None = None,
) -> Obj:
    """A JobSet replicatedJob; replicas, parallelism, completions unset if None."""
    jspec = _given(parallelism=parallelism, completions=completions)
    jspec["template"] = pod_template(annotations) if template is None else template
    return {"name": name, **_given(replicas=replicas), "template": {"spec": jspec}}


def jobset(name: str, replicated: Sequence[Obj], *, namespace: str = NS) -> Obj:
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": _meta(name, namespace),
        "spec": {"replicatedJobs": list(replicated)},
    }


def podset(
    name: str = "main",
    count: int = 1,
    annotations: Mapping[str, str] | None = None,
    *,
    template: Obj | None = None,
    topology_request: Obj | None = None,
    **template_args: Any,
) -> Obj:
    """A Workload PodSet; the template is ``template`` or ``pod_template(annotations, **template_args)``."""
    chosen = pod_template(annotations, **template_args) if template is None else template
    return {"name": name, "count": count, "template": chosen, **_given(topologyRequest=topology_request)}


def workload(
    name: str,
    count: int = 1,
    annotations: Mapping[str, str] | None = None,
    *,
    podsets: Sequence[Obj] | None = None,
    podset_name: str = "main",
    gpus: int = 1,
    namespace: str = NS,
    uid: str | None = None,
    resource_version: str | None = None,
    workload_annotations: Mapping[str, str] | None = None,
    assignment: str | TopologyAssignment | None = None,
    owner: Obj | None = None,
    queue: str | None = "lq",
    admitted_flavor: str | Mapping[str, str] | None = None,
    check: str = "tas",
    check_state: str | None = None,
    check_message: str = "",
    check_time: str | None = CHECK_TIME,
    conditions: Sequence[Obj] | None = None,
) -> Obj:
    """A Workload with ``podsets`` (default: one ``podset(podset_name, count, annotations)`` of
    ``gpus``-GPU pods).

    ``assignment``: the topology-assignment annotation (text, or one assignment of the first
    PodSet). ``admitted_flavor``: status.admission in ClusterQueue ``cq`` giving every PodSet
    that flavor for GPUs (a str) or those resource -> flavor. ``check_state``: the entry of
    AdmissionCheck ``check``. ``owner``: the controlling object."""
    sets = [podset(podset_name, count, annotations, gpus=gpus)] if podsets is None else list(podsets)
    ann = dict(workload_annotations or {})
    if isinstance(assignment, TopologyAssignment):
        assignment = encode_assignment_annotation([(sets[0]["name"], assignment)])
    if assignment is not None:
        ann[ASSIGNMENT] = assignment
    owners = None
    if owner is not None:
        ref = {"apiVersion": owner["apiVersion"], "kind": owner["kind"], "name": owner["metadata"]["name"]}
        owners = [{**ref, "uid": owner["metadata"].get("uid", ""), "controller": True}]
    meta = _meta(
        name, namespace, uid=uid, resourceVersion=resource_version, annotations=ann or None, ownerReferences=owners
    )
    status = _given(conditions=None if conditions is None else list(conditions))
    if admitted_flavor is not None:
        flavors = {GPU: admitted_flavor} if isinstance(admitted_flavor, str) else dict(admitted_flavor)
        status["admission"] = {
            "clusterQueue": "cq",
            "podSetAssignments": [{"name": ps["name"], "flavors": flavors, "count": ps["count"]} for ps in sets],
        }
    if check_state is not None:
        entry = {"name": check, "state": check_state, "message": check_message}
        status["admissionChecks"] = [entry | ({"lastTransitionTime": check_time} if check_time else {})]
    spec = {**_given(queueName=queue), "podSets": sets}
    return {"apiVersion": KUEUE_API, "kind": "Workload", "metadata": meta, "spec": spec, "status": status}


# --- the default plan cluster, and files ---------------------------------------------------------


def kueue_objects(flavors: tuple[str, ...] = ("gpu",)) -> list[Obj]:
    return [topology(), *(flavor(f) for f in flavors), admission_check(), cluster_queue(flavors=flavors)]


def cluster(**grid: Any) -> list[Obj]:
    return [*kueue_objects(), *grid_nodes(**grid)]


def write_yaml(path: Path, objects: list[Obj]) -> str:
    path.write_text(yaml.safe_dump_all(objects, sort_keys=False), encoding="utf-8")
    return str(path)


def write_json(path: Path, value: Any) -> str:
    path.write_text(json.dumps(value, indent=2), encoding="utf-8")
    return str(path)
