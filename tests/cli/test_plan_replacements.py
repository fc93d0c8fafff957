"""``kueue-tas plan``: node replacement and elastic slices reach ``place`` with the right arguments,
and the assignments they replace do not count as usage.

The snapshot is a real ``TopologySnapshot`` that records each ``place`` call (``Planner.snapshot_class``);
the last tests check the engine's answers end to end."""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any, ClassVar

import builders as mk
from vocab import PODSET_LABEL

from kueue_tas.api.kinds import parse_object
from kueue_tas.cli.planner import Planner, WorkloadPlan
from kueue_tas.topology.assignment import DomainAssignment, TopologyAssignment
from kueue_tas.topology.engine.results import PodSetResult
from kueue_tas.topology.engine.snapshot import TopologySnapshot
from kueue_tas.topology.features import FeatureGates
from kueue_tas.topology.model import PodSetRequest

SLICE_FOR = "kueue.x-k8s.io/workload-slice-replacement-for"
ELASTIC_ON = FeatureGates({"ElasticJobsViaWorkloadSlicesWithTAS": True})
ON_H0 = TopologyAssignment((mk.HOST,), (DomainAssignment(("b0-r0-h0",), 4),))


class RecordingSnapshot(TopologySnapshot):
    calls: ClassVar[list[tuple[tuple[str, ...], dict[str, Any]]]] = []

    def place(self, podsets: Sequence[PodSetRequest], **kwargs: Any) -> list[PodSetResult]:
        RecordingSnapshot.calls.append((tuple(p.name for p in podsets), dict(kwargs)))
        return super().place(podsets, **kwargs)


class RecordingPlanner(Planner):
    snapshot_class = RecordingSnapshot


def run(objects: list[dict[str, Any]], gates: FeatureGates | None = None) -> dict[str, WorkloadPlan]:
    RecordingSnapshot.calls.clear()
    models = [m for m in (parse_object(o) for o in objects) if m is not None]
    planner = RecordingPlanner(models, **({"gates": gates} if gates is not None else {}))
    return {p.name: p for p in planner.run()}


def one_rack() -> list[dict[str, Any]]:
    return [*mk.kueue_objects(), *mk.grid_nodes(1, 1, 2)]  # 2 hosts x 4 GPUs


def ready(name: str, unhealthy: list[str] | None = None) -> dict[str, Any]:
    wl = mk.workload(name, 4, admitted_flavor="gpu", check_state="Ready", assignment=ON_H0)
    if unhealthy is not None:
        wl["status"]["unhealthyNodes"] = [{"name": n} for n in unhealthy]
    return wl


def slice_for(target: str, count: int = 6) -> dict[str, Any]:
    annotations = {SLICE_FOR: target}
    return mk.workload("slice-2", count, mk.required(mk.RACK), admitted_flavor="gpu", workload_annotations=annotations)


def calls_for(podset_names: tuple[str, ...]) -> list[dict[str, Any]]:
    return [kw for names, kw in RecordingSnapshot.calls if names == podset_names]


# --- node replacement ---------------------------------------------------------------------------


def test_unhealthy_node_workload_is_replaced_and_not_counted() -> None:
    # "first" needs the whole rack: it fits only if the broken workload's old assignment is not usage
    plans = run([*one_rack(), mk.job("first", 8, mk.required(mk.RACK)), ready("broken", ["b0-r0-h0"])])
    assert list(plans) == ["first", "broken"]
    assert plans["first"].fits
    [first_call, broken_call] = RecordingSnapshot.calls
    assert "current" not in first_call[1] and "elastic" not in first_call[1]
    assert broken_call == (
        ("main",),
        {"gates": FeatureGates(), "current": {"main": ON_H0}, "unhealthy_nodes": ("b0-r0-h0",), "elastic": False},
    )
    # the rack is full after "first": the broken workload cannot be placed again
    assert not plans["broken"].fits
    assert plans["broken"].podsets[0].message


def test_replaced_workload_commits_its_new_assignment() -> None:
    plans = run([*one_rack(), ready("broken", ["b0-r0-h0"]), mk.job("after", 5, mk.required(mk.RACK))])
    assert plans["broken"].fits
    assert plans["broken"].podsets[0].assignment is not None
    assert not plans["after"].fits  # 4 of the rack's 8 GPUs are held by the replaced assignment


def test_unhealthy_node_outside_the_assignment_changes_nothing() -> None:
    plans = run([*one_rack(), ready("running", ["b0-r0-h1", "elsewhere"]), mk.job("new", 8, mk.required(mk.RACK))])
    assert list(plans) == ["new"]  # not placed again
    assert not plans["new"].fits  # still holds its 4 GPUs
    assert all("current" not in kw for _, kw in RecordingSnapshot.calls)


def test_node_replacement_follows_its_gate() -> None:
    off = FeatureGates({"TASFailedNodeReplacement": False})
    plans = run([*one_rack(), ready("broken", ["b0-r0-h0"]), mk.job("new", 8, mk.required(mk.RACK))], off)
    assert list(plans) == ["new"] and not plans["new"].fits


# --- elastic slices ------------------------------------------------------------------------------


def test_new_slice_is_placed_from_the_old_one_which_is_not_counted() -> None:
    objs = [*one_rack(), ready("slice-1"), mk.job("first", 2, mk.required(mk.RACK)), slice_for("team-a/slice-1")]
    plans = run(objs, ELASTIC_ON)
    assert list(plans) == ["first", "slice-2"]  # the old slice is neither placed nor listed
    assert plans["first"].fits and plans["slice-2"].fits  # 2 + 6 = 8: the old slice's 4 GPUs are free
    assert calls_for(("main",))[-1] == {
        "gates": ELASTIC_ON,
        "current": {"main": ON_H0},
        "unhealthy_nodes": (),
        "elastic": True,
    }


def test_with_an_elastic_gate_off_the_old_slice_counts_and_the_new_one_is_placed_afresh() -> None:
    # The controller's rule (kueue_tas.topology.admitted.slice_replacement): both gates, or no replacement.
    for gates in (FeatureGates(), FeatureGates({"ElasticJobsViaWorkloadSlices": False, **ELASTIC_ON.overrides})):
        plans = run([*one_rack(), ready("slice-1"), slice_for("team-a/slice-1", 6)], gates)
        assert not plans["slice-2"].fits  # 6 > the 4 GPUs the old slice leaves
        plans = run([*one_rack(), ready("slice-1"), slice_for("team-a/slice-1", 4)], gates)
        assert plans["slice-2"].podsets[0].assignment == TopologyAssignment(
            (mk.HOST,), (DomainAssignment(("b0-r0-h1",), 4),)
        )
        assert all("current" not in kw for _, kw in RecordingSnapshot.calls)


def test_slice_naming_no_admitted_workload_is_an_ordinary_placement() -> None:
    pending = copy.deepcopy(ready("slice-1"))
    pending["status"]["admissionChecks"][0]["state"] = "Pending"
    elsewhere = copy.deepcopy(ready("slice-1"))
    elsewhere["metadata"]["namespace"] = "other-ns"
    for target in ("team-a/missing", "other-ns/slice-1"):
        plans = run([*one_rack(), ready("slice-1"), slice_for(target, 5)], ELASTIC_ON)
        assert not plans["slice-2"].fits  # the old slice still holds 4 of 8 GPUs
        assert all("current" not in kw for _, kw in RecordingSnapshot.calls)
    # Kueue replaces a slice of the new one's namespace only, even when the named one exists.
    run([*one_rack(), elsewhere, slice_for("other-ns/slice-1", 4)], ELASTIC_ON)
    assert all("current" not in kw for _, kw in RecordingSnapshot.calls)
    plans = run([*one_rack(), pending, slice_for("team-a/slice-1", 5)], ELASTIC_ON)
    assert "current" not in RecordingSnapshot.calls[-1][1]


# --- end to end with the engine ------------------------------------------------------------------


def test_pods_of_the_failed_node_move_and_the_rest_stay() -> None:
    nodes = [mk.node("b0-r0-h0", ready=False), mk.node("b0-r0-h1")]
    plans = run([*mk.kueue_objects(), *nodes, ready("broken", ["b0-r0-h0"])])
    (ps,) = plans["broken"].podsets
    assert plans["broken"].fits
    assert ps.assignment == TopologyAssignment((mk.HOST,), (DomainAssignment(("b0-r0-h1",), 4),))


def test_elastic_slice_keeps_the_old_pods_where_they_are_with_its_gates() -> None:
    on_h1 = TopologyAssignment((mk.HOST,), (DomainAssignment(("b0-r0-h1",), 4),))
    old = mk.workload(
        "slice-1",
        4,
        admitted_flavor="gpu",
        check_state="Ready",
        assignment=on_h1,
    )
    objs = [*one_rack(), old, slice_for("team-a/slice-1")]
    assert not run(objs)["slice-2"].fits  # ElasticJobsViaWorkloadSlicesWithTAS is off by default: both count
    elastic = run(objs, ELASTIC_ON)["slice-2"].podsets[0].assignment
    assert elastic == TopologyAssignment(
        (mk.HOST,), (DomainAssignment(("b0-r0-h0",), 2), DomainAssignment(("b0-r0-h1",), 4))
    )


def running(workload: str, host: str, n: int) -> list[dict[str, Any]]:
    """``n`` one-GPU pods of ``workload`` (labelled by name: it has no UID) released onto ``host``."""
    labels = {mk.WORKLOAD_LABEL: workload, PODSET_LABEL: "main"}
    return [mk.pod(f"{workload}-{host}-{i}", host, gpus=1, labels=labels, selector={mk.HOST: host}) for i in range(n)]


def test_running_pods_of_a_replaced_slice_are_not_counted_twice() -> None:
    # Issue 12, defect 2: pods of ours are charged on their nodes unless they fill a slot; the slice
    # the new one replaces is the engine's ``current``, so its pods are out of the count with it.
    on_h1 = TopologyAssignment((mk.HOST,), (DomainAssignment(("b0-r0-h1",), 2),))
    old = mk.workload("slice-1", 2, admitted_flavor="gpu", check_state="Ready", assignment=on_h1)
    objs = [*one_rack(), old, slice_for("team-a/slice-1", count=4)]
    without_pods = run(objs, ELASTIC_ON)["slice-2"].podsets[0].assignment
    with_pods = run([*objs, *running("slice-1", "b0-r0-h1", 2)], ELASTIC_ON)["slice-2"].podsets[0].assignment
    assert with_pods == without_pods


def test_running_pods_of_a_workload_replaced_in_place_are_not_counted_twice() -> None:
    split = TopologyAssignment((mk.HOST,), (DomainAssignment(("b0-r0-h0",), 2), DomainAssignment(("b0-r0-h1",), 2)))
    broken = mk.workload("broken", 4, admitted_flavor="gpu", check_state="Ready", assignment=split)
    broken["status"]["unhealthyNodes"] = [{"name": "b0-r0-h0"}]
    nodes = [mk.node("b0-r0-h0", ready=False), mk.node("b0-r0-h1")]
    plans = run([*mk.kueue_objects(), *nodes, broken, *running("broken", "b0-r0-h1", 2)])
    assert plans["broken"].fits  # h1's 4 GPUs: the 2 pods it keeps there and the 2 it moves
    assert plans["broken"].podsets[0].assignment == TopologyAssignment(
        (mk.HOST,), (DomainAssignment(("b0-r0-h1",), 4),)
    )
