"""Turn a ``KueueCase`` into the objects and command line ``kueue-tas plan`` reads.

What an outside harness would hand to ``plan``: plain Kubernetes/Kueue manifests (dicts,
camelCase), no engine types. The cluster is

* the case's Nodes (labels, allocatable, taints, ``unschedulable``, a ``Ready`` condition);
* one Running Pod per non-TAS pod, bound by ``spec.nodeName``;
* a Topology with the case's name and levels; the ResourceFlavor ``tas-flavor`` (the case's
  node labels and tolerations) and, when the case has other-flavor usage, ``other-flavor``
  with the same nodes; an AdmissionCheck ``kueue-tas`` (controllerName
  ``kueue-tas.io/topology``, parameters naming the Topology); a ClusterQueue listing both
  flavors under ``admissionChecksStrategy`` ``onFlavors``;
* one admitted Workload per usage entry: quota reserved on its flavor, our check ``Ready``,
  the ``kueue-tas.io/topology-assignment`` annotation, the per-pod requests in its template;
* the Workload to place, ``default/case``: quota reserved on ``tas-flavor``, our check
  ``Pending``, each PodSet's request as ``spec.podSets[].topologyRequest`` (Kueue's field
  names) and/or as our pod-template annotations (``RequestVia``).

Node replacement: the Workload to place is itself admitted (check ``Ready``, the assignment
annotation holding ``PodSetCase.current``) and lists ``status.unhealthyNodes``. Elastic
slices: the old slice ``default/case-old`` is admitted with the ``current`` assignments and
the Workload to place carries ``kueue.x-k8s.io/workload-slice-replacement-for: default/case-old``.
``KueueCase.gates`` become ``--feature-gates``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any

from kueue_tas.api import constants as c
from kueue_tas.topology.assignment import TopologyAssignment
from kueue_tas.topology.codec.codec import encode_assignment_annotation
from kueue_tas.topology.model import (
    NodeInfo,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    Toleration,
    TopologyRequest,
)

from .model import KueueCase, PodSetCase, UsageCase

NAMESPACE = "default"
TARGET = "case"
OLD_SLICE = "case-old"
FLAVOR = "tas-flavor"
OTHER_FLAVOR = "other-flavor"
CHECK = "kueue-tas"
QUEUE = "cq"
_KUEUE = c.KUEUE_API_VERSION


class RequestVia(Enum):
    """Where the Workload to place states each PodSet's topology request."""

    ANNOTATIONS = "annotations"  # our pod-template annotations only (what plan read before topologyRequest)
    TOPOLOGY_REQUEST = "topologyRequest"  # spec.podSets[].topologyRequest only (what Kueue writes)


class NotExpressible(ValueError):
    """The case's request has no pod-template annotation form (groups, multi-layer slices)."""


@dataclass(frozen=True)
class PlanInput:
    objects: list[dict[str, Any]]
    argv: list[str]  # arguments after the program name, reading the objects from stdin
    namespace: str = NAMESPACE
    name: str = TARGET

    @property
    def stdin(self) -> str:
        return json.dumps({"apiVersion": "v1", "kind": "List", "items": self.objects})


def quantity(resource: str, amount: int) -> str:
    return f"{amount}m" if resource == "cpu" else str(amount)


def resource_list(amounts: Mapping[str, int]) -> dict[str, str]:
    return {r: quantity(r, v) for r, v in amounts.items()}


def _meta(name: str, namespace: str | None = None, **extra: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if namespace is not None:
        meta["namespace"] = namespace
    meta.update({k: v for k, v in extra.items() if v})
    return meta


def node_object(n: NodeInfo) -> dict[str, Any]:
    spec: dict[str, Any] = {}
    if n.unschedulable:
        spec["unschedulable"] = True
    if n.taints:
        spec["taints"] = [{"key": t.key, "value": t.value, "effect": t.effect} for t in n.taints]
    return {
        "apiVersion": "v1",
        "kind": c.KIND_NODE,
        "metadata": _meta(n.name, labels=dict(n.labels)),
        "spec": spec,
        "status": {
            "allocatable": resource_list(n.allocatable),
            "conditions": [{"type": "Ready", "status": "True" if n.ready else "False"}],
        },
    }


def _containers(requests: Mapping[str, int]) -> list[dict[str, Any]]:
    amounts = {r: v for r, v in requests.items() if r != "pods"}
    resources = {"requests": resource_list(amounts)} if amounts else {}
    return [{"name": "c", "image": "busybox", "resources": resources}]


def non_tas_pod(index: int, node_name: str, usage: Mapping[str, int]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": c.KIND_POD,
        "metadata": _meta(f"non-tas-{index}", NAMESPACE),
        "spec": {"nodeName": node_name, "containers": _containers(usage)},
        "status": {"phase": "Running"},
    }


def _tolerations(items: Sequence[Toleration]) -> list[dict[str, str]]:
    out = []
    for t in items:
        d = {"key": t.key, "operator": t.operator, "value": t.value, "effect": t.effect}
        out.append({k: v for k, v in d.items() if v})
    return out


def _requirement(r: NodeSelectorRequirement) -> dict[str, Any]:
    out: dict[str, Any] = {"key": r.key, "operator": r.operator}
    if r.values:
        out["values"] = list(r.values)
    return out


def _term(t: NodeSelectorTerm) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if t.match_expressions:
        out["matchExpressions"] = [_requirement(r) for r in t.match_expressions]
    if t.match_fields:
        out["matchFields"] = [_requirement(r) for r in t.match_fields]
    return out


def pod_spec(ps: PodSetCase) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": _containers(ps.requests)}
    if ps.tolerations:
        spec["tolerations"] = _tolerations(ps.tolerations)
    if ps.node_selector:
        spec["nodeSelector"] = dict(ps.node_selector)
    affinity: dict[str, Any] = {}
    if ps.required_affinity is not None:
        affinity["requiredDuringSchedulingIgnoredDuringExecution"] = {
            "nodeSelectorTerms": [_term(t) for t in ps.required_affinity]
        }
    if ps.preferred_affinity:
        affinity["preferredDuringSchedulingIgnoredDuringExecution"] = [
            {"weight": p.weight, "preference": _term(p.preference)} for p in ps.preferred_affinity
        ]
    if affinity:
        spec["affinity"] = {"nodeAffinity": affinity}
    return spec


def topology_request(t: TopologyRequest) -> dict[str, Any]:
    """Kueue's ``PodSetTopologyRequest`` (workload_types.go field names)."""
    out: dict[str, Any] = {}
    if t.required is not None:
        out["required"] = t.required
    if t.preferred is not None:
        out["preferred"] = t.preferred
    if t.unconstrained is not None:
        out["unconstrained"] = t.unconstrained
    if t.group is not None:
        out["podSetGroupName"] = t.group
    if t.slice_level is not None:
        out["podSetSliceRequiredTopology"] = t.slice_level
    if t.slice_size is not None:
        out["podSetSliceSize"] = t.slice_size
    if t.slice_layers:
        out["podsetSliceRequiredTopologyConstraints"] = [{"topology": x.level, "size": x.size} for x in t.slice_layers]
    return out


def topology_annotations(t: TopologyRequest, prefix: str = c.DEFAULT_ANNOTATION_PREFIX) -> dict[str, str]:
    """Our pod-template annotations for a request; NotExpressible for groups and multi-layer slices."""
    if t.group is not None or t.slice_layers:
        raise NotExpressible("podSetGroupName / podsetSliceRequiredTopologyConstraints have no annotation here")
    out: dict[str, str] = {}
    if t.required is not None:
        out[prefix + c.SUFFIX_REQUIRED_TOPOLOGY] = t.required
    if t.preferred is not None:
        out[prefix + c.SUFFIX_PREFERRED_TOPOLOGY] = t.preferred
    if t.unconstrained is not None:
        out[prefix + c.SUFFIX_UNCONSTRAINED_TOPOLOGY] = "true" if t.unconstrained else "false"
    if t.slice_level is not None:
        out[prefix + c.SUFFIX_SLICE_REQUIRED_TOPOLOGY] = t.slice_level
    if t.slice_size is not None:
        out[prefix + c.SUFFIX_SLICE_SIZE] = str(t.slice_size)
    return out


def _podset(ps: PodSetCase, via: RequestVia) -> dict[str, Any]:
    template: dict[str, Any] = {"spec": pod_spec(ps)}
    out: dict[str, Any] = {"name": ps.name, "count": ps.count, "template": template}
    if ps.topology is not None:
        if via is RequestVia.ANNOTATIONS:
            template["metadata"] = {"annotations": topology_annotations(ps.topology)}
        else:
            out["topologyRequest"] = topology_request(ps.topology)
    return out


def _admission(flavor: str, podsets: Sequence[tuple[str, int, Mapping[str, int]]]) -> dict[str, Any]:
    return {
        "clusterQueue": QUEUE,
        "podSetAssignments": [
            {"name": name, "count": count, "flavors": {r: flavor for r in (requests or {"cpu": 0}) if r != "pods"}}
            for name, count, requests in podsets
        ],
    }


def _status(flavor: str, podsets: Sequence[tuple[str, int, Mapping[str, int]]], ready: bool) -> dict[str, Any]:
    conditions = [{"type": c.CONDITION_QUOTA_RESERVED, "status": "True"}]
    if ready:
        conditions.append({"type": c.CONDITION_ADMITTED, "status": "True"})
    return {
        "admission": _admission(flavor, podsets),
        "conditions": conditions,
        "admissionChecks": [{"name": CHECK, "state": c.CHECK_STATE_READY if ready else c.CHECK_STATE_PENDING}],
    }


def _assignment_annotation(assignments: Sequence[tuple[str, TopologyAssignment]]) -> dict[str, str]:
    return {c.TOPOLOGY_ASSIGNMENT_ANNOTATION: encode_assignment_annotation(list(assignments))}


def usage_workload(name: str, flavor: str, usage: UsageCase) -> dict[str, Any]:
    """An admitted Workload holding ``usage`` (one PodSet ``main``)."""
    count = sum(d.count for d in usage.assignment.domains)
    return {
        "apiVersion": _KUEUE,
        "kind": c.KIND_WORKLOAD,
        "metadata": _meta(name, NAMESPACE, annotations=_assignment_annotation([("main", usage.assignment)])),
        "spec": {
            "queueName": "lq",
            "podSets": [
                {"name": "main", "count": count, "template": {"spec": {"containers": _containers(usage.per_pod)}}}
            ],
        },
        "status": _status(flavor, [("main", count, usage.per_pod)], ready=True),
    }


def _current(case: KueueCase) -> list[tuple[str, TopologyAssignment]]:
    return [(ps.name, ps.current) for ps in case.podsets if ps.current is not None]


def old_slice(case: KueueCase, via: RequestVia) -> dict[str, Any]:
    """The admitted slice an elastic case replaces: each PodSet with its ``current`` count."""
    counts = {ps.name: sum(d.count for d in ps.current.domains) for ps in case.podsets if ps.current is not None}
    podsets = [{**_podset(ps, via), "count": counts[ps.name]} for ps in case.podsets if ps.current is not None]
    return {
        "apiVersion": _KUEUE,
        "kind": c.KIND_WORKLOAD,
        "metadata": _meta(OLD_SLICE, NAMESPACE, annotations=_assignment_annotation(_current(case))),
        "spec": {"queueName": "lq", "podSets": podsets},
        "status": _status(FLAVOR, [(p["name"], p["count"], _requests(case, p["name"])) for p in podsets], ready=True),
    }


def _requests(case: KueueCase, name: str) -> Mapping[str, int]:
    return next(ps.requests for ps in case.podsets if ps.name == name)


def target_workload(case: KueueCase, via: RequestVia) -> dict[str, Any]:
    replacing = bool(case.unhealthy_nodes)
    annotations: dict[str, str] = {}
    if replacing:
        annotations.update(_assignment_annotation(_current(case)))
    if case.elastic:
        annotations[c.KUEUE_SLICE_REPLACEMENT_ANNOTATION] = f"{NAMESPACE}/{OLD_SLICE}"
    status = _status(FLAVOR, [(ps.name, ps.count, ps.requests) for ps in case.podsets], ready=replacing)
    if replacing:
        status["unhealthyNodes"] = [{"name": n} for n in case.unhealthy_nodes]
    return {
        "apiVersion": _KUEUE,
        "kind": c.KIND_WORKLOAD,
        "metadata": _meta(TARGET, NAMESPACE, annotations=annotations),
        "spec": {"queueName": "lq", "podSets": [_podset(ps, via) for ps in case.podsets]},
        "status": status,
    }


def kueue_objects(case: KueueCase) -> list[dict[str, Any]]:
    flavors = [FLAVOR, OTHER_FLAVOR] if case.other_flavor_usage else [FLAVOR]
    rf_spec: dict[str, Any] = {"topologyName": case.topology_name}
    if case.node_labels:
        rf_spec["nodeLabels"] = dict(case.node_labels)
    if case.flavor_tolerations:
        rf_spec["tolerations"] = _tolerations(case.flavor_tolerations)
    return [
        {
            "apiVersion": _KUEUE,
            "kind": c.KIND_TOPOLOGY,
            "metadata": _meta(case.topology_name),
            "spec": {"levels": [{"nodeLabel": level} for level in case.levels]},
        },
        *(
            {"apiVersion": _KUEUE, "kind": c.KIND_RESOURCE_FLAVOR, "metadata": _meta(f), "spec": rf_spec}
            for f in flavors
        ),
        {
            "apiVersion": _KUEUE,
            "kind": c.KIND_ADMISSION_CHECK,
            "metadata": _meta(CHECK),
            "spec": {
                "controllerName": c.CONTROLLER_NAME,
                "parameters": {"apiGroup": c.KUEUE_GROUP, "kind": c.KIND_TOPOLOGY, "name": case.topology_name},
            },
            "status": {"conditions": [{"type": c.CONDITION_ACTIVE, "status": "True"}]},
        },
        {
            "apiVersion": _KUEUE,
            "kind": c.KIND_CLUSTER_QUEUE,
            "metadata": _meta(QUEUE),
            "spec": {
                "resourceGroups": [
                    {
                        "coveredResources": ["cpu"],
                        "flavors": [
                            {"name": f, "resources": [{"name": "cpu", "nominalQuota": "1000"}]} for f in flavors
                        ],
                    }
                ],
                "admissionChecksStrategy": {"admissionChecks": [{"name": CHECK, "onFlavors": flavors}]},
            },
        },
    ]


def feature_gates_flag(gates: Mapping[str, bool]) -> list[str]:
    if not gates:
        return []
    return ["--feature-gates", ",".join(f"{k}={'true' if v else 'false'}" for k, v in sorted(gates.items()))]


def to_plan(case: KueueCase, via: RequestVia = RequestVia.TOPOLOGY_REQUEST) -> PlanInput:
    """The manifests and ``plan`` arguments for one case; the Workload to place is ``default/case``."""
    objects: list[dict[str, Any]] = [node_object(n) for n in case.nodes]
    objects += [non_tas_pod(i, name, usage) for i, (name, usage) in enumerate(case.non_tas_pods)]
    objects += kueue_objects(case)
    objects += [usage_workload(f"admitted-{i}", FLAVOR, u) for i, u in enumerate(case.tas_usage)]
    objects += [usage_workload(f"other-{i}", OTHER_FLAVOR, u) for i, u in enumerate(case.other_flavor_usage)]
    if case.elastic:
        objects.append(old_slice(case, via))
    objects.append(target_workload(case, via))
    argv = ["plan", "-f", "-", "-o", "json", *feature_gates_flag(case.gates)]
    return PlanInput(objects=objects, argv=argv)
