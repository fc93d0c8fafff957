"""Conversions to the engine's plain input types (kueue_tas.topology.requests.inputs)."""

from __future__ import annotations

from typing import Any

import pytest
from vocab import GPU, HOST, REQUIRED, SLICE_LEVEL, SLICE_SIZE

from kueue_tas.api.core_objects import Node
from kueue_tas.api.quantity import QuantityError
from kueue_tas.topology.model import (
    NodeInfo,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    Taint,
    Toleration,
    TopologyRequest,
)
from kueue_tas.topology.requests.inputs import (
    node_constraints,
    node_info,
    podset_request,
    taint,
    toleration,
    tolerations,
)
from kueue_tas.topology.requests.request import TopologyRequestError

NODE: dict[str, Any] = {
    "apiVersion": "v1",
    "kind": "Node",
    "metadata": {"name": "n1", "labels": {HOST: "n1", "rack": "r1"}},
    "spec": {"taints": [{"key": "gpu", "value": "true", "effect": "NoSchedule"}, {"key": "x", "effect": "NoExecute"}]},
    "status": {
        "allocatable": {
            "cpu": "7910m",
            "memory": "31Gi",
            "pods": "110",
            GPU: "8",
            "ephemeral-storage": "1.5",
        },
        "conditions": [{"type": "Ready", "status": "True"}],
    },
}


def test_node_info_from_dict_and_model() -> None:
    expected = NodeInfo(
        name="n1",
        labels={HOST: "n1", "rack": "r1"},
        allocatable={"cpu": 7910, "memory": 31 * 1024**3, "pods": 110, GPU: 8, "ephemeral-storage": 2},
        taints=(Taint("gpu", "true", "NoSchedule"), Taint("x", "", "NoExecute")),
        ready=True,
        unschedulable=False,
    )
    assert node_info(NODE) == expected
    assert node_info(Node.model_validate(NODE)) == expected


def test_node_info_not_ready_and_cordoned() -> None:
    raw = {**NODE, "spec": {"unschedulable": True}, "status": {"conditions": [{"type": "Ready", "status": "False"}]}}
    info = node_info(raw)
    assert not info.ready and info.unschedulable and info.allocatable == {}


def test_node_info_bad_quantity() -> None:
    raw = {**NODE, "status": {"allocatable": {"cpu": "eight"}}}
    with pytest.raises(QuantityError, match="'cpu'"):
        node_info(raw)


def test_tolerations_and_taints() -> None:
    assert toleration(
        {"key": "gpu", "operator": "Exists", "effect": "NoSchedule", "tolerationSeconds": 5}
    ) == Toleration(key="gpu", operator="Exists", value="", effect="NoSchedule")
    assert toleration({"operator": "Exists"}) == Toleration(operator="Exists")
    assert tolerations(None) == ()
    assert tolerations([{"key": "a", "value": "b"}]) == (Toleration(key="a", value="b"),)
    assert taint({"key": "k", "effect": "PreferNoSchedule"}) == Taint("k", "", "PreferNoSchedule")


def test_node_constraints() -> None:
    spec = {
        "nodeSelector": {"pool": "gpu"},
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {"matchExpressions": [{"key": "rack", "operator": "In", "values": ["r1", "r2"]}]},
                        {
                            "matchExpressions": [{"key": "gpu", "operator": "Exists"}],
                            "matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": ["n9"]}],
                        },
                    ]
                },
                "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 1, "preference": {}}],
            }
        },
    }
    selector, terms = node_constraints(spec)
    assert selector == {"pool": "gpu"}
    assert terms == (
        NodeSelectorTerm(match_expressions=(NodeSelectorRequirement("rack", "In", ("r1", "r2")),)),
        NodeSelectorTerm(
            match_expressions=(NodeSelectorRequirement("gpu", "Exists"),),
            match_fields=(NodeSelectorRequirement("metadata.name", "NotIn", ("n9",)),),
        ),
    )


def test_node_constraints_absent_vs_empty() -> None:
    assert node_constraints({}) == ({}, None)
    assert node_constraints({"affinity": {"podAffinity": {}}}) == ({}, None)
    # a required section with no terms matches nothing: keep it as an empty tuple, not None
    empty: dict[str, Any] = {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {}}}}
    assert node_constraints(empty) == ({}, ())


TEMPLATE: dict[str, Any] = {
    "metadata": {"annotations": {REQUIRED: "rack"}},
    "spec": {
        "nodeSelector": {"pool": "gpu"},
        "tolerations": [{"key": "gpu", "operator": "Exists"}],
        "initContainers": [{"name": "side", "restartPolicy": "Always", "resources": {"requests": {"cpu": "100m"}}}],
        "containers": [{"name": "c", "resources": {"limits": {"cpu": "2", GPU: "1"}}}],
    },
}


def test_podset_request() -> None:
    req = podset_request("workers", 4, TEMPLATE)
    assert req.name == "workers" and req.count == 4
    assert req.requests == {"cpu": 2100, GPU: 1}
    assert "pods" not in req.requests
    assert req.topology == TopologyRequest(required="rack")
    assert not req.implied
    assert req.tolerations == (Toleration(key="gpu", operator="Exists"),)
    assert req.node_selector == {"pool": "gpu"}
    assert req.required_affinity is None


def test_podset_request_implied_and_prefix() -> None:
    req = podset_request("main", 2, TEMPLATE, prefix="kueue.x-k8s.io/", implied=True)
    assert req.topology is None and req.implied


def test_podset_request_validates_against_count() -> None:
    template = {
        "metadata": {
            "annotations": {
                SLICE_LEVEL: "rack",
                SLICE_SIZE: "5",
            }
        }
    }
    with pytest.raises(TopologyRequestError, match="must not be greater than pod set count 4"):
        podset_request("main", 4, template)
    assert podset_request("main", 5, template).topology == TopologyRequest(slice_level="rack", slice_size=5)
