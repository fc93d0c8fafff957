"""Clusters whose hostname label is not the Node name (EKS clusters made by eksctl, kops, ...): Node
names, the ungater wired as ``run`` wires it, and the Nodes the map marks failed."""

from __future__ import annotations

from typing import Any

import builders as mk
from ungater_harness import Harness
from vocab import HOST, RACK

from kueue_tas.api import constants as c
from kueue_tas.api.workload import Workload
from kueue_tas.capacity.live import LiveCapacity
from kueue_tas.controllers.deps import ControllerDeps
from kueue_tas.controllers.ungate import reconciler as uc
from kueue_tas.mapview.workloads import WorkloadInputs, workload_views
from kueue_tas.topology.assignment import DomainAssignment, TopologyAssignment
from kueue_tas.topology.codec.codec import encode_assignment_annotation
from kueue_tas.topology.model import NodeInfo

SUFFIX = ".ec2.internal"


def eks(host: str) -> str:
    return host + SUFFIX


def info(name: str, host: str | None, **kw: Any) -> NodeInfo:
    labels = {HOST: host} if host is not None else {}
    return NodeInfo(name, {**labels, RACK: "r1"}, {"cpu": 1000}, **kw)


def eks_ungater(h: Harness) -> None:
    """The ungater as ``run`` wires it: a node serves when the index says so."""
    h.ungater = uc.Ungater(
        ControllerDeps(
            informers=h.ungater_informers, checks=h.checks, events=h.rec, metrics=h.metrics, settings=h.ungater.settings
        ),
        patcher=h.rec,
        node_problem=h.ungater_informers.hosts.problem,
    )


def map_failures(live: LiveCapacity) -> set[str]:
    """The Nodes the map marks failed for a workload admitted with one pod on hostname h1."""
    text = encode_assignment_annotation([("main", TopologyAssignment((HOST,), (DomainAssignment(("h1",), 1),)))])
    wl = Workload.model_validate(
        mk.workload(
            "wl",
            1,
            namespace="ns",
            uid="u1",
            queue=None,
            admitted_flavor="gpu",
            check="tas",
            check_state="Ready",
            check_time="2026-01-01T00:00:00Z",
            workload_annotations={c.TOPOLOGY_ASSIGNMENT_ANNOTATION: text},
        )
    )
    _, failed = workload_views(WorkloadInputs(live, {"tas": {"gpu"}}), [wl], [])
    return set(failed)
