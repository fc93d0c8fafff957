from __future__ import annotations

from typing import Any

import builders as mk
import pydantic
import pytest

from kueue_tas.api import constants as c
from kueue_tas.api.core_objects import Job, JobSet, Node, Pod
from kueue_tas.api.kinds import model_class_for, parse_object
from kueue_tas.api.kueue_objects import AdmissionCheck, ClusterQueue, ResourceFlavor, Topology
from kueue_tas.api.workload import Workload


def topology(api_version: str) -> dict[str, Any]:
    levels = ("cloud.com/topology-block", "cloud.com/topology-rack", "kubernetes.io/hostname")
    return mk.topology("default", levels, api_version=api_version)


@pytest.mark.parametrize("version", ["v1alpha1", "v1beta1", "v1beta2"])
def test_topology_accepted_in_all_versions(version: str) -> None:
    obj = parse_object(topology(f"kueue.x-k8s.io/{version}"))
    assert isinstance(obj, Topology)
    assert obj.name == "default"
    assert obj.levels == ("cloud.com/topology-block", "cloud.com/topology-rack", "kubernetes.io/hostname")


def test_unknown_versions_and_kinds_are_none() -> None:
    assert parse_object(topology("kueue.x-k8s.io/v2")) is None
    assert parse_object(topology("other.io/v1beta2")) is None
    assert parse_object({"apiVersion": "v1", "kind": "ConfigMap"}) is None
    assert parse_object({"kind": "Pod"}) is None
    assert parse_object({"apiVersion": "kueue.x-k8s.io/v1alpha1", "kind": "Workload"}) is None
    assert model_class_for("kueue.x-k8s.io/v1beta1", "Workload") is Workload


def test_malformed_known_kind_raises_validation_error() -> None:
    bad = topology("kueue.x-k8s.io/v1beta2")
    bad["spec"]["levels"] = [{"wrong": "x"}]
    with pytest.raises(pydantic.ValidationError):
        parse_object(bad)


def test_resource_flavor() -> None:
    obj = parse_object(
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "ResourceFlavor",
            "metadata": {"name": "gpu"},
            "spec": {
                "nodeLabels": {"pool": "gpu"},
                "nodeTaints": [{"key": "gpu", "value": "true", "effect": "NoSchedule"}],
                "tolerations": [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}],
                "topologyName": "default",
                "somethingNew": 1,
            },
        }
    )
    assert isinstance(obj, ResourceFlavor)
    assert obj.spec.node_labels == {"pool": "gpu"}
    assert obj.spec.node_taints[0].effect == "NoSchedule"
    assert obj.spec.tolerations[0].operator == "Exists"
    assert obj.spec.topology_name == "default"


def test_admission_check() -> None:
    obj = parse_object(
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "AdmissionCheck",
            "metadata": {"name": "tas"},
            "spec": {
                "controllerName": "kueue-tas.io/topology",
                "parameters": {"apiGroup": "kueue.x-k8s.io", "kind": "Topology", "name": "default"},
            },
            "status": {"conditions": [{"type": "Active", "status": "True", "reason": "Active", "message": "ok"}]},
        }
    )
    assert isinstance(obj, AdmissionCheck)
    assert obj.spec.controller_name == "kueue-tas.io/topology"
    assert obj.active
    assert obj.spec.parameters is not None
    assert (obj.spec.parameters.api_group, obj.spec.parameters.kind, obj.spec.parameters.name) == (
        "kueue.x-k8s.io",
        "Topology",
        "default",
    )
    other = AdmissionCheck.model_validate({"spec": {"controllerName": "kueue.x-k8s.io/provisioning-request"}})
    assert other.spec.controller_name == "kueue.x-k8s.io/provisioning-request"
    assert not other.active
    assert other.spec.parameters is None


def cluster_queue(spec_extra: dict[str, Any], version: str = "v1beta2") -> ClusterQueue:
    groups = [
        {
            "coveredResources": ["cpu", "memory"],
            "flavors": [
                {"name": "a", "resources": [{"name": "cpu", "nominalQuota": 10}]},
                {"name": "b", "resources": [{"name": "cpu", "nominalQuota": 10}]},
            ],
        },
        {"coveredResources": ["nvidia.com/gpu"], "flavors": [{"name": "gpu"}, {"name": "a"}]},
    ]
    api_version = f"kueue.x-k8s.io/{version}"
    obj = parse_object(mk.cluster_queue("cq", checks={}, resource_groups=groups, api_version=api_version, **spec_extra))
    assert isinstance(obj, ClusterQueue)
    return obj


def test_cluster_queue_strategy() -> None:
    cq = cluster_queue(
        {"admissionChecksStrategy": {"admissionChecks": [{"name": "tas", "onFlavors": ["gpu"]}, {"name": "prov"}]}}
    )
    assert cq.flavor_names() == ["a", "b", "gpu"]
    assert cq.flavors_for_check("tas") == ["gpu"]
    assert cq.flavors_for_check("prov") == ["a", "b", "gpu"]  # empty onFlavors = every flavor
    assert cq.flavors_for_check("missing") is None


def test_cluster_queue_v1beta1_plain_admission_checks() -> None:
    cq = cluster_queue({"admissionChecks": ["tas"]}, version="v1beta1")
    assert [r.name for r in cq.check_rules()] == ["tas"]
    assert cq.flavors_for_check("tas") == ["a", "b", "gpu"]


WORKLOAD: dict[str, Any] = {
    "apiVersion": "kueue.x-k8s.io/v1beta2",
    "kind": "Workload",
    "metadata": {
        "name": "job-train-1a2b3",
        "namespace": "team",
        "uid": "u-1",
        "resourceVersion": "42",
        "labels": {"kueue.x-k8s.io/job-uid": "j-1"},
        "ownerReferences": [
            {"apiVersion": "batch/v1", "kind": "Job", "name": "train", "uid": "j-1", "controller": True}
        ],
    },
    "spec": {
        "queueName": "lq",
        "podSets": [
            {
                "name": "main",
                "count": 4,
                "template": {
                    "metadata": {"annotations": {"kueue-tas.io/podset-required-topology": "rack"}},
                    "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]},
                },
                "topologyRequest": {"podIndexLabel": "batch.kubernetes.io/job-completion-index"},
            }
        ],
    },
    "status": {
        "admission": {
            "clusterQueue": "cq",
            "podSetAssignments": [
                {"name": "main", "flavors": {"cpu": "gpu"}, "resourceUsage": {"cpu": "4"}, "count": 4}
            ],
        },
        "admissionChecks": [
            {
                "name": "tas",
                "state": "Ready",
                "message": "",
                "lastTransitionTime": "2026-01-01T00:00:00Z",
                "podSetUpdates": [
                    {"name": "main", "labels": {"kueue-tas.io/workload": "job-train-1a2b3"}, "nodeSelector": {"r": "1"}}
                ],
            }
        ],
        "conditions": [
            {"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved"},
            {"type": "Admitted", "status": "True", "reason": "Admitted"},
        ],
    },
}


def test_workload() -> None:
    wl = parse_object(WORKLOAD)
    assert isinstance(wl, Workload)
    assert wl.metadata.controller_owner() is not None
    assert wl.metadata.resource_version == "42"
    ps = wl.pod_set("main")
    assert ps is not None and ps.count == 4
    assert ps.template["metadata"]["annotations"]["kueue-tas.io/podset-required-topology"] == "rack"
    assert ps.topology_request is not None
    assert ps.topology_request.pod_index_label == c.JOB_COMPLETION_INDEX_LABEL
    assert wl.status.admission is not None and wl.status.admission.cluster_queue == "cq"
    psa = wl.pod_set_assignment("main")
    assert psa is not None and psa.flavors == {"cpu": "gpu"} and psa.count == 4
    check = wl.admission_check("tas")
    assert check is not None and check.state == "Ready"
    assert check.pod_set_updates[0].node_selector == {"r": "1"}
    assert wl.has_quota_reservation and wl.is_admitted and not wl.is_finished and not wl.is_evicted
    assert wl.admission_check("other") is None


def test_workload_round_trips_camel_case() -> None:
    wl = Workload.model_validate(WORKLOAD)
    dumped = wl.model_dump(by_alias=True, exclude_none=True)
    assert dumped["spec"]["podSets"][0]["template"] == WORKLOAD["spec"]["podSets"][0]["template"]
    assert dumped["status"]["admissionChecks"][0]["podSetUpdates"][0]["nodeSelector"] == {"r": "1"}


def test_unadmitted_workload_defaults() -> None:
    wl = Workload.model_validate({"metadata": {"name": "w"}, "spec": {"podSets": [{"count": 2}]}})
    assert wl.spec.pod_sets[0].name == "main"
    assert wl.status.admission is None
    assert wl.pod_set_assignment("main") is None
    assert not wl.has_quota_reservation


def node(conditions: list[dict[str, Any]], **spec: Any) -> Node:
    allocatable = {"cpu": "8", "memory": "32Gi", "pods": "110"}
    obj = parse_object(mk.node("n1", labels={}, allocatable=allocatable, conditions=conditions, **spec))
    assert isinstance(obj, Node)
    return obj


def test_node_ready_uses_first_ready_condition() -> None:
    assert node([{"type": "MemoryPressure", "status": "False"}, {"type": "Ready", "status": "True"}]).ready
    assert not node([{"type": "Ready", "status": "False"}, {"type": "Ready", "status": "True"}]).ready
    assert node([{"type": "Ready", "status": "True"}, {"type": "Ready", "status": "False"}]).ready
    assert not node([{"type": "Ready", "status": "Unknown"}]).ready
    assert not node([]).ready


def test_node_fields() -> None:
    n = node(
        [{"type": "Ready", "status": "True"}],
        unschedulable=True,
        taints=[{"key": "k", "value": "v", "effect": "NoExecute"}],
    )
    assert n.spec.unschedulable
    assert n.spec.taints[0].key == "k"
    assert n.labels == {"kubernetes.io/hostname": "n1"}
    assert n.status.allocatable["memory"] == "32Gi"


def test_pod() -> None:
    obj = parse_object(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": "p",
                "namespace": "ns",
                "labels": {"kueue-tas.io/workload": "w"},
                "ownerReferences": [
                    {"apiVersion": "batch/v1", "kind": "Job", "name": "j", "uid": "u", "controller": True}
                ],
            },
            "spec": {
                "nodeName": "n1",
                "nodeSelector": {"a": "b"},
                "schedulingGates": [{"name": "kueue-tas.io/topology"}],
                "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}],
                "initContainers": [{"name": "i", "restartPolicy": "Always"}],
                "overhead": {"cpu": "10m"},
            },
            "status": {"phase": "Succeeded"},
        }
    )
    assert isinstance(obj, Pod)
    assert obj.has_gate(c.SCHEDULING_GATE)
    assert not obj.has_gate(c.KUEUE_TOPOLOGY_GATE)
    assert obj.is_terminal
    assert obj.spec.node_name == "n1"
    owner = obj.metadata.controller_owner()
    assert owner is not None and owner.kind == "Job"
    spec = obj.spec.as_dict()
    assert spec["initContainers"][0]["restartPolicy"] == "Always"
    assert spec["overhead"] == {"cpu": "10m"}


def test_job_and_jobset_parse() -> None:
    job = parse_object({"apiVersion": "batch/v1", "kind": "Job", "spec": {"parallelism": 3, "template": {}}})
    assert isinstance(job, Job) and job.spec.parallelism == 3 and job.spec.completions is None
    js = parse_object(
        {
            "apiVersion": "jobset.x-k8s.io/v1alpha2",
            "kind": "JobSet",
            "spec": {"replicatedJobs": [{"name": "w", "template": {"spec": {"template": {"spec": {}}}}}]},
        }
    )
    assert isinstance(js, JobSet)
    assert js.spec.replicated_jobs[0].replicas == 1
    assert parse_object({"apiVersion": "jobset.x-k8s.io/v1alpha1", "kind": "JobSet"}) is None


def test_snake_case_population_also_works() -> None:
    t = Topology.model_validate({"spec": {"levels": [{"node_label": "x"}]}})
    assert t.levels == ("x",)
