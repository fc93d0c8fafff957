"""Elastic workload slices in the live admission controller, without a cluster
(``admission_harness``), the engine's ``place`` calls recorded through
``LiveCapacity.snapshot_class``.

The controller follows ``plan``'s rule (``kueue_tas.topology.slice_replacement``): with both
elastic gates on, a new slice replacing a slice our check admitted is placed from that slice's
assignment, whose usage the decision does not see; until Kueue finishes the old slice, the pair
holds the union of their assignments, once.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

import builders as mk
import pytest
from admission_harness import CHECK, GPU, HOST, RACK, Harness, configure, wire

from kueue_tas.api import constants as c
from kueue_tas.kube.errors import Conflict
from kueue_tas.topology.assignment import DomainAssignment, TopologyAssignment
from kueue_tas.topology.codec import decode_assignment_annotation, encode_assignment_annotation
from kueue_tas.topology.features import FeatureGates
from kueue_tas.topology.model import PodSetRequest
from kueue_tas.topology.results import PodSetResult
from kueue_tas.topology.snapshot import TopologySnapshot

HOSTS = ("h1", "h2")  # one rack, 4 GPUs each
ALLOCATABLE = {"cpu": "16", "pods": "110", GPU: "4"}
ELASTIC_ON = FeatureGates({"ElasticJobsViaWorkloadSlicesWithTAS": True})
UNCONSTRAINED = {"kueue-tas.io/podset-unconstrained-topology": "true"}


def on(*domains: tuple[str, int]) -> TopologyAssignment:
    return TopologyAssignment((HOST,), tuple(DomainAssignment((h,), n) for h, n in domains))


class RecordingSnapshot(TopologySnapshot):
    calls: ClassVar[list[dict[str, Any]]] = []

    def place(self, podsets: Sequence[PodSetRequest], **kwargs: Any) -> list[PodSetResult]:
        if not kwargs.get("allocatable_only"):
            RecordingSnapshot.calls.append(dict(kwargs))
        return super().place(podsets, **kwargs)


def workload(
    name: str,
    count: int,
    state: str = "Pending",
    *,
    assignment: TopologyAssignment | None = None,
    replaces: str | None = None,
    check: str = CHECK,
    finished: bool = False,
    rv: str = "1",
) -> dict[str, Any]:
    annotations = {}
    if assignment is not None:
        annotations[c.TOPOLOGY_ASSIGNMENT_ANNOTATION] = encode_assignment_annotation([("main", assignment)])
    if replaces is not None:
        annotations[c.KUEUE_SLICE_REPLACEMENT_ANNOTATION] = replaces
    conditions = [{"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved", "message": ""}]
    if finished:
        conditions.append({"type": "Finished", "status": "True", "reason": "WorkloadSliceReplaced", "message": ""})
    requests = {"requests": {GPU: "1"}}
    return {
        "metadata": {"name": name, "namespace": "ns", "uid": name, "resourceVersion": rv, "annotations": annotations},
        "spec": {
            "podSets": [
                {
                    "name": "main",
                    "count": count,
                    "template": {
                        "metadata": {"annotations": UNCONSTRAINED},
                        "spec": {"containers": [{"name": "c", "resources": requests}]},
                    },
                }
            ]
        },
        "status": {
            "conditions": [{**cond, "lastTransitionTime": "2026-01-01T00:00:00Z"} for cond in conditions],
            "admission": {
                "clusterQueue": "cq",
                "podSetAssignments": [{"name": "main", "flavors": {GPU: "gpu"}, "count": count}],
            },
            "admissionChecks": [
                {"name": check, "state": state, "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"}
            ],
        },
    }


def cluster(gates: FeatureGates) -> Harness:
    """Two 4-GPU hosts in one rack under the harness's Kueue configuration."""
    h = wire(gates, snapshot_class=RecordingSnapshot)
    for host in HOSTS:
        h.informers.nodes.handle_event(
            "ADDED",
            mk.node(host, labels={RACK: "r1", "pool": "gpu"}, allocatable=ALLOCATABLE, resource_version="1"),
        )
    configure(h.informers)
    return h


def add(h: Harness, obj: dict[str, Any], event: str = "ADDED") -> None:
    h.informers.workloads.handle_event(event, obj)


async def decide(h: Harness, name: str) -> tuple[str, TopologyAssignment | None]:
    """Decide ``ns/name``: (check state written, its assignment)."""
    RecordingSnapshot.calls.clear()
    h.admission._awaiting_write.clear()  # each test step stands for a fresh look
    checks, annotations = len(h.writes.checks), len(h.writes.annotations)
    await h.admission.reconcile(f"ns/{name}")
    [entry] = h.writes.checks[checks:]  # this decision's entry, and only it
    written = h.writes.annotations[annotations:]
    return entry["state"], dict(decode_assignment_annotation(written[-1]))["main"] if written else None


def used(h: Harness) -> dict[str, int]:
    """GPUs charged per host, over-commitment included (free capacity would floor at zero)."""
    snap = h.capacity.snapshot("gpu")
    assert snap is not None
    col = snap.capacity.columns[GPU]
    taken = {host: int(snap.capacity.tas[snap.tree.leaf_index_of((host,)), col]) for host in HOSTS}
    return {host: n for host, n in taken.items() if n}


OLD_ON_H1 = on(("h1", 4))


# --- gates off: as before ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "gates", [FeatureGates(), FeatureGates({"ElasticJobsViaWorkloadSlices": False, **ELASTIC_ON.overrides})]
)
async def test_with_an_elastic_gate_off_the_new_slice_is_placed_afresh_and_both_are_charged(
    gates: FeatureGates,
) -> None:
    k = cluster(gates)
    add(k, workload("slice-1", 4, "Ready", assignment=OLD_ON_H1))
    add(k, workload("slice-2", 6, replaces="ns/slice-1"))
    assert await decide(k, "slice-2") == ("Retry", None)  # 4 + 6 > 8: the old slice still counts
    assert all("current" not in kw for kw in RecordingSnapshot.calls)
    add(k, workload("slice-2", 4, replaces="ns/slice-1", rv="2"), "MODIFIED")
    assert await decide(k, "slice-2") == ("Ready", on(("h2", 4)))
    add(k, workload("slice-2", 4, "Ready", assignment=on(("h2", 4)), replaces="ns/slice-1", rv="3"), "MODIFIED")
    assert used(k) == {"h1": 4, "h2": 4}


# --- gates on: what plan does ------------------------------------------------------------------------


async def test_scale_up_keeps_the_old_domains_adds_the_delta_and_charges_the_union_once() -> None:
    k = cluster(ELASTIC_ON)
    add(k, workload("slice-1", 4, "Ready", assignment=OLD_ON_H1))
    add(k, workload("big", 5))
    add(k, workload("other", 3))
    add(k, workload("slice-2", 6, replaces="ns/slice-1"))
    assert await decide(k, "big") == ("Retry", None)  # other decisions see the old slice

    state, assignment = await decide(k, "slice-2")
    assert (state, assignment) == ("Ready", on(("h1", 4), ("h2", 2)))  # the old pods stay on h1
    assert RecordingSnapshot.calls[-1]["current"] == {"main": OLD_ON_H1}
    assert RecordingSnapshot.calls[-1]["elastic"] is True
    assert used(k) == {"h1": 4, "h2": 2}, "the kept pods are charged once"
    assert await decide(k, "other") == ("Retry", None)  # 3 > the 2 GPUs left
    # Our Ready comes back: committed, still the union; Kueue then finishes the old slice.
    add(k, workload("slice-2", 6, "Ready", assignment=assignment, replaces="ns/slice-1", rv="2"), "MODIFIED")
    assert used(k) == {"h1": 4, "h2": 2}
    add(k, workload("slice-1", 4, "Ready", assignment=OLD_ON_H1, finished=True, rv="2"), "MODIFIED")
    assert used(k) == {"h1": 4, "h2": 2}
    k.informers.workloads.handle_event("DELETED", workload("slice-1", 4, "Ready", assignment=OLD_ON_H1, rv="3"))
    assert used(k) == {"h1": 4, "h2": 2}


async def test_scale_down_truncates_and_the_old_slice_holds_its_pods_until_it_is_finished() -> None:
    k = cluster(ELASTIC_ON)
    old = on(("h1", 4), ("h2", 2))
    add(k, workload("slice-1", 6, "Ready", assignment=old))
    add(k, workload("slice-2", 3, replaces="ns/slice-1"))
    state, assignment = await decide(k, "slice-2")
    assert (state, assignment) == ("Ready", on(("h1", 3)))
    assert RecordingSnapshot.calls[-1]["current"] == {"main": old}
    assert used(k) == {"h1": 4, "h2": 2}  # the old pods run until Kueue finishes the old slice
    add(k, workload("slice-2", 3, "Ready", assignment=assignment, replaces="ns/slice-1", rv="2"), "MODIFIED")
    assert used(k) == {"h1": 4, "h2": 2}
    add(k, workload("slice-1", 6, "Ready", assignment=old, finished=True, rv="2"), "MODIFIED")
    assert used(k) == {"h1": 3}, "only the new slice is charged"


async def test_a_dropped_decision_for_the_new_slice_gives_the_old_one_its_whole_charge() -> None:
    k = cluster(ELASTIC_ON)
    add(k, workload("slice-1", 4, "Ready", assignment=OLD_ON_H1))
    add(k, workload("slice-2", 3, replaces="ns/slice-1"))
    k.writes.fail_check = Conflict(409, "Conflict", "modified")
    assert await k.admission.reconcile("ns/slice-2") == 0.5
    assert used(k) == {"h1": 4} and not k.capacity.holds("ns/slice-2")


@pytest.mark.parametrize(
    "old",
    [
        workload("slice-1", 4, "Pending", assignment=OLD_ON_H1),  # not Ready
        workload("slice-1", 4, "Ready", assignment=OLD_ON_H1, check="someone-else"),  # not ours
        workload("slice-1", 4, "Ready", assignment=OLD_ON_H1, finished=True),  # finished already
        workload("slice-9", 4, "Ready", assignment=OLD_ON_H1),  # not the one named
    ],
    ids=["not-ready", "not-ours", "finished", "missing"],
)
async def test_naming_a_slice_our_check_does_not_hold_is_an_ordinary_placement(old: dict[str, Any]) -> None:
    k = cluster(ELASTIC_ON)
    add(k, old)
    add(k, workload("slice-2", 4, replaces="ns/slice-1"))
    state, _ = await decide(k, "slice-2")
    assert state == "Ready"
    assert all("current" not in kw for kw in RecordingSnapshot.calls)


async def test_the_decision_does_not_see_the_old_slice_only_what_the_engine_keeps_of_it() -> None:
    k = cluster(ELASTIC_ON)
    add(k, workload("slice-1", 2, "Ready", assignment=on(("h1", 2))))
    add(k, workload("slice-2", 4, replaces="ns/slice-1"))
    # The 2 added pods fit beside the kept ones on h1 only if those are not charged twice.
    assert await decide(k, "slice-2") == ("Ready", on(("h1", 4)))
    assert used(k) == {"h1": 4}
