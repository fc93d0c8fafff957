"""Builders of the Kubernetes/Kueue objects ``kueue-tas plan`` reads, as plain dicts.

The default cluster: Topology ``topo`` (block, rack, hostname), flavor ``gpu``
(nodeLabels ``node-group: gpu``) governed by AdmissionCheck ``tas`` through
ClusterQueue ``cq``, and 2 blocks x 2 racks x 2 hosts of 4 GPUs each.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

BLOCK = "cloud.provider.com/topology-block"
RACK = "cloud.provider.com/topology-rack"
HOST = "kubernetes.io/hostname"
GPU = "nvidia.com/gpu"
REQUIRED = "kueue-tas.io/podset-required-topology"
PREFERRED = "kueue-tas.io/podset-preferred-topology"
UNCONSTRAINED = "kueue-tas.io/podset-unconstrained-topology"
SLICE_LEVEL = "kueue-tas.io/podset-slice-required-topology"
SLICE_SIZE = "kueue-tas.io/podset-slice-size"
ASSIGNMENT = "kueue-tas.io/topology-assignment"
WORKLOAD_LABEL = "kueue-tas.io/workload"
CONTROLLER = "kueue-tas.io/topology"
NS = "team-a"

Obj = dict[str, Any]


def topology(name: str = "topo", levels: tuple[str, ...] = (BLOCK, RACK, HOST)) -> Obj:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Topology",
        "metadata": {"name": name},
        "spec": {"levels": [{"nodeLabel": level} for level in levels]},
    }


def flavor(name: str = "gpu", node_labels: dict[str, str] | None = None, **spec: Any) -> Obj:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ResourceFlavor",
        "metadata": {"name": name},
        "spec": {"nodeLabels": {"node-group": name} if node_labels is None else node_labels, **spec},
    }


def admission_check(name: str = "tas", topology_name: str = "topo", controller: str = CONTROLLER) -> Obj:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "AdmissionCheck",
        "metadata": {"name": name},
        "spec": {
            "controllerName": controller,
            "parameters": {"apiGroup": "kueue.x-k8s.io", "kind": "Topology", "name": topology_name},
        },
    }


def cluster_queue(
    name: str = "cq", flavors: tuple[str, ...] = ("gpu",), checks: dict[str, list[str]] | None = None
) -> Obj:
    rules = {"tas": list(flavors)} if checks is None else checks
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ClusterQueue",
        "metadata": {"name": name},
        "spec": {
            "resourceGroups": [
                {
                    "coveredResources": ["cpu", GPU],
                    "flavors": [
                        {
                            "name": f,
                            "resources": [
                                {"name": "cpu", "nominalQuota": 1000},
                                {"name": GPU, "nominalQuota": 1000},
                            ],
                        }
                        for f in flavors
                    ],
                }
            ],
            "admissionChecksStrategy": {
                "admissionChecks": [{"name": n, **({"onFlavors": on} if on else {})} for n, on in rules.items()]
            },
        },
    }


def node(
    name: str,
    block: str | None = "b0",
    rack: str | None = "b0-r0",
    *,
    gpus: int = 4,
    group: str = "gpu",
    ready: bool = True,
    unschedulable: bool = False,
    taints: list[Obj] | None = None,
    allocatable: dict[str, Any] | None = None,
) -> Obj:
    labels = {"node-group": group, HOST: name}
    if block is not None:
        labels[BLOCK] = block
    if rack is not None:
        labels[RACK] = rack
    spec: Obj = {}
    if unschedulable:
        spec["unschedulable"] = True
    if taints:
        spec["taints"] = taints
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": labels},
        "spec": spec,
        "status": {
            "allocatable": allocatable
            if allocatable is not None
            else {"cpu": "32", "memory": "256Gi", "pods": "110", GPU: str(gpus)},
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
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


def kueue_objects(flavors: tuple[str, ...] = ("gpu",)) -> list[Obj]:
    return [
        topology(),
        *(flavor(f) for f in flavors),
        admission_check(),
        cluster_queue(flavors=flavors),
    ]


def cluster(**grid: Any) -> list[Obj]:
    return [*kueue_objects(), *grid_nodes(**grid)]


def pod_template(annotations: dict[str, str] | None = None, gpus: int = 1, cpu: str | None = None, **spec: Any) -> Obj:
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
    pods: int,
    annotations: dict[str, str] | None = None,
    *,
    completions: int | None = None,
    uid: str | None = None,
    **template: Any,
) -> Obj:
    meta: Obj = {"name": name, "namespace": NS, "labels": {"kueue.x-k8s.io/queue-name": "lq"}}
    if uid:
        meta["uid"] = uid
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": meta,
        "spec": {
            "parallelism": pods,
            "completions": pods if completions is None else completions,
            "suspend": True,
            "template": pod_template(annotations, **template),
        },
    }


def required(level: str) -> dict[str, str]:
    return {REQUIRED: level}


def jobset(name: str, replicated: list[tuple[str, int, int, int, dict[str, str] | None]]) -> Obj:
    """replicated: (name, replicas, parallelism, completions, annotations)."""
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "replicatedJobs": [
                {
                    "name": rj,
                    "replicas": replicas,
                    "template": {
                        "spec": {
                            "parallelism": par,
                            "completions": comp,
                            "template": pod_template(ann),
                        }
                    },
                }
                for rj, replicas, par, comp, ann in replicated
            ]
        },
    }


def workload(
    name: str,
    count: int,
    annotations: dict[str, str] | None = None,
    *,
    admitted_flavor: str | None = None,
    check_state: str | None = None,
    assignment: str | None = None,
    owner: Obj | None = None,
    podset: str = "main",
) -> Obj:
    meta: Obj = {"name": name, "namespace": NS}
    if assignment is not None:
        meta["annotations"] = {ASSIGNMENT: assignment}
    if owner is not None:
        meta["ownerReferences"] = [
            {
                "apiVersion": owner["apiVersion"],
                "kind": owner["kind"],
                "name": owner["metadata"]["name"],
                "uid": owner["metadata"].get("uid", ""),
                "controller": True,
            }
        ]
    status: Obj = {}
    if admitted_flavor is not None:
        status["admission"] = {
            "clusterQueue": "cq",
            "podSetAssignments": [{"name": podset, "flavors": {GPU: admitted_flavor}, "count": count}],
        }
    if check_state is not None:
        status["admissionChecks"] = [
            {"name": "tas", "state": check_state, "message": "", "lastTransitionTime": "2024-01-01T00:00:00Z"}
        ]
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": meta,
        "spec": {
            "queueName": "lq",
            "podSets": [{"name": podset, "count": count, "template": pod_template(annotations)}],
        },
        "status": status,
    }


def pod(
    name: str,
    node_name: str | None,
    gpus: int,
    phase: str = "Running",
    labels: dict[str, str] | None = None,
    namespace: str = "kube-system",
) -> Obj:
    spec: Obj = {"containers": [{"name": "c", "resources": {"requests": {GPU: str(gpus)}}}]}
    if node_name is not None:
        spec["nodeName"] = node_name
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": dict(labels or {})},
        "spec": spec,
        "status": {"phase": phase},
    }


def write_yaml(path: Path, objects: list[Obj]) -> str:
    path.write_text(yaml.safe_dump_all(objects, sort_keys=False), encoding="utf-8")
    return str(path)


def write_json(path: Path, value: Any) -> str:
    path.write_text(json.dumps(value, indent=2), encoding="utf-8")
    return str(path)
