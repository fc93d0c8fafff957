"""``kueue-tas plan`` and the admission decision: where a PodSet's request comes from (annotations or
Kueue's ``topologyRequest`` field), and the checks needing the Topology or the whole workload."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import builders as mk
import pytest
from vocab import BLOCK, GROUP_NAME, RACK, SLICE_CONSTRAINTS

from kueue_tas.api.workload import Workload
from kueue_tas.capacity.live import LiveCapacity
from kueue_tas.capacity.rules import FlavorSpec
from kueue_tas.cli.main import main
from kueue_tas.controllers.decide import Outcome, decide
from kueue_tas.topology.model import HOSTNAME_LABEL

NOT_FIT_RACK_9 = 'topology "topo" allows to fit only 8 out of 9 pod(s)'


def run_plan(tmp_path: Path, capsys: pytest.CaptureFixture[str], objects: list[dict[str, Any]]) -> tuple[int, Any, str]:
    path = mk.write_yaml(tmp_path / "in.yaml", objects)
    capsys.readouterr()
    code = main(["plan", "-f", path, "-o", "json"])
    cap = capsys.readouterr()
    return code, (json.loads(cap.out) if cap.out else None), cap.err.strip()


def with_field(wl: dict[str, Any], **field: Any) -> dict[str, Any]:
    out = copy.deepcopy(wl)
    out["spec"]["podSets"][0]["topologyRequest"] = field
    return out


def racks_of(ps: dict[str, Any]) -> set[str]:
    return {d["values"][0].rsplit("-", 1)[0] for d in ps["domains"]}


# --- plan: Kueue's topologyRequest field -------------------------------------------------------


def test_field_is_the_request_when_no_annotation(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    fits = with_field(mk.workload("w8", 8, {}, admitted_flavor="gpu"), required=mk.RACK, podIndexLabel="idx")
    too_big = with_field(mk.workload("w9", 9, {}, admitted_flavor="gpu"), required=mk.RACK)
    code, out, err = run_plan(tmp_path, capsys, [*mk.cluster(), fits, too_big])
    assert code == 0, err
    w8, w9 = out["workloads"]
    assert w8["fits"] is True and len(racks_of(w8["podSets"][0])) == 1
    # without the field 9 pods would be implied (anywhere) and fit
    assert w9["fits"] is False
    assert w9["podSets"][0]["message"].startswith(NOT_FIT_RACK_9)


def test_only_index_labels_in_the_field_means_implied(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    wl = with_field(mk.workload("w", 9, {}, admitted_flavor="gpu"), podIndexLabel="idx", subGroupCount=1)
    code, out, err = run_plan(tmp_path, capsys, [*mk.cluster(), wl])
    assert code == 0, err
    assert out["workloads"][0]["fits"] is True


def test_annotations_win_over_the_field(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    wl = with_field(mk.workload("w", 9, mk.required(mk.BLOCK), admitted_flavor="gpu"), required=mk.RACK)
    code, out, err = run_plan(tmp_path, capsys, [*mk.cluster(), wl])
    assert code == 0, err
    assert out["workloads"][0]["fits"] is True  # one block holds 16


def test_field_unknown_level_and_invalid_field(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    wl = with_field(mk.workload("w", 2, {}, admitted_flavor="gpu"), preferred="zone")
    code, out, err = run_plan(tmp_path, capsys, [*mk.cluster(), wl])
    assert code == 1 and out is None
    assert err == (
        'error: Workload/team-a/w: spec.podSets[0].topologyRequest.preferred: unknown topology level "zone"; '
        f'Topology "topo" has levels {mk.BLOCK}, {mk.RACK}, {mk.HOST}; level names: host'
    )
    too_long = with_field(mk.workload("w", 2, {}, admitted_flavor="gpu"), required="x" * 64)
    code, _, err = run_plan(tmp_path, capsys, [*mk.cluster(), too_long])
    assert code == 1
    assert err == (
        "error: Workload/team-a/w: spec.podSets[0].topologyRequest.required: Too long: may not be more than 63 bytes"
    )


def test_field_slice_level_without_size_gets_kueues_answer(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # Not Kueue's Workload webhook (it guards writes only) but its scheduler, as for a stored Workload.
    no_size = with_field(mk.workload("w", 2, {}, admitted_flavor="gpu"), podSetSliceRequiredTopology=mk.RACK)
    code, out, err = run_plan(tmp_path, capsys, [*mk.cluster(), no_size])
    assert code == 0, err
    [wl] = out["workloads"]
    assert wl["fits"] is False
    assert wl["podSets"][0]["message"] == "slice topology requested, but slice size not provided"
    # a size without a level asks for no slices
    size_only = with_field(mk.workload("w", 8, {}, admitted_flavor="gpu"), required=mk.RACK, podSetSliceSize=3)
    code, out, err = run_plan(tmp_path, capsys, [*mk.cluster(), size_only])
    assert code == 0, err
    assert out["workloads"][0]["fits"] is True


# --- plan: levels of the slice layers, groups ----------------------------------------------------


def test_layer_level_problems_are_invalid_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    unknown = json.dumps([{"topology": mk.RACK, "size": 4}, {"topology": "gpu-tray", "size": 2}])
    code, _, err = run_plan(
        tmp_path, capsys, [*mk.cluster(), mk.job("j", 8, {mk.REQUIRED: mk.BLOCK, SLICE_CONSTRAINTS: unknown})]
    )
    assert code == 1
    assert err.startswith(
        f"error: Job/team-a/j: spec.template.metadata.annotations[{SLICE_CONSTRAINTS}[1].topology]: "
        'unknown topology level "gpu-tray"'
    )
    upside_down = json.dumps([{"topology": mk.HOST, "size": 4}, {"topology": mk.RACK, "size": 2}])
    job = mk.job("j", 8, {mk.REQUIRED: mk.BLOCK, SLICE_CONSTRAINTS: upside_down})
    code, _, err = run_plan(tmp_path, capsys, [*mk.cluster(), job])
    assert code == 1
    assert err == (
        f"error: Job/team-a/j: spec.template.metadata.annotations[{SLICE_CONSTRAINTS}[1].topology]: "
        f"additional slice layer topology {mk.RACK} must be at a lower level than {mk.HOST}"
    )


def test_malformed_layers_are_invalid_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_plan(
        tmp_path, capsys, [*mk.cluster(), mk.job("j", 8, {mk.REQUIRED: mk.BLOCK, SLICE_CONSTRAINTS: "[]"})]
    )
    assert code == 1
    assert "topology constraints must contain between 1 and 3 entries" in err
    assert err.startswith("error: Job/team-a/j: spec.template.metadata.annotations: ")


def lws(leader: dict[str, str], workers: dict[str, str], worker_pods: int = 4) -> dict[str, Any]:
    return mk.jobset(
        "lws",
        [
            mk.replicated_job("leader", 1, 1, 1, leader),
            mk.replicated_job("workers", 1, worker_pods, worker_pods, workers),
        ],
    )


def test_group_rules_are_invalid_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rack = {mk.REQUIRED: mk.RACK, GROUP_NAME: "g"}
    code, _, err = run_plan(tmp_path, capsys, [*mk.cluster(), lws(rack, {mk.REQUIRED: mk.BLOCK, GROUP_NAME: "g"})])
    assert code == 1
    leader_path = "spec.replicatedJobs[0].template.spec.template.metadata.annotations"
    workers_path = "spec.replicatedJobs[1].template.spec.template.metadata.annotations"
    assert err == (
        "error: JobSet/team-a/lws: "
        f"must specify '{mk.REQUIRED}' or '{mk.PREFERRED}' topology consistent with '{workers_path}' in group 'g'; "
        f"must specify '{mk.REQUIRED}' or '{mk.PREFERRED}' topology consistent with '{leader_path}' in group 'g'"
    )
    code, _, err = run_plan(tmp_path, capsys, [*mk.cluster(), lws(rack, {mk.REQUIRED: mk.RACK})])
    assert code == 1
    assert err == (
        f'error: JobSet/team-a/lws: {leader_path}[{GROUP_NAME}]: invalid value "g": '
        "can only define groups of exactly 2 pod sets, got: 1 pod set(s)"
    )


def test_valid_group_is_placed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rack = {mk.REQUIRED: mk.RACK, GROUP_NAME: "g"}
    code, out, err = run_plan(tmp_path, capsys, [*mk.cluster(), lws(rack, rack)])
    assert code == 0, err
    [wl] = out["workloads"]
    assert wl["fits"] is True
    assert [ps["name"] for ps in wl["podSets"]] == ["leader", "workers"]


def test_field_group_of_unconstrained_members_is_placed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    group = {"unconstrained": True, "podSetGroupName": "g"}
    wl = mk.workload(
        "w",
        podsets=[mk.podset("leader", 1, topology_request=group), mk.podset("workers", 4, topology_request=group)],
        admitted_flavor="gpu",
    )
    code, out, err = run_plan(tmp_path, capsys, [*mk.cluster(), wl])
    assert code == 0, err
    [plan] = out["workloads"]
    assert plan["fits"] is True
    assert [sum(d["count"] for d in ps["domains"]) for ps in plan["podSets"]] == [1, 4]


def test_podset_after_a_failed_group_is_not_placed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # Groups are placed in order of first appearance: g (a + c) fails, so b is never tried.
    group = {"required": mk.RACK, "podSetGroupName": "g"}
    rack = {"required": mk.RACK}
    podsets = [
        mk.podset("a", 1, topology_request=group),
        mk.podset("b", 1, topology_request=rack),
        mk.podset("c", 8, topology_request=group),
    ]
    wl = mk.workload("w", podsets=podsets, admitted_flavor="gpu")
    code, out, err = run_plan(tmp_path, capsys, [*mk.cluster(), wl])
    assert code == 0, err
    [plan] = out["workloads"]
    assert plan["fits"] is False
    a, b, c = plan["podSets"]
    assert a["message"] == c["message"] and "out of" in a["message"]
    assert b.get("domains") is None
    assert b["message"] == "not placed: an earlier PodSet of this workload does not fit"


# --- the admission decision ---------------------------------------------------------------------


def live_capacity() -> LiveCapacity:
    live = LiveCapacity()
    live.set_flavors({"gpu": FlavorSpec("gpu", "topo", (BLOCK, RACK, HOSTNAME_LABEL), {"pool": "gpu"})})
    for r in ("b1-r1", "b1-r2"):
        for h in range(2):
            labels = {BLOCK: "b1", RACK: r, "pool": "gpu"}
            live.upsert_node(mk.node_info(f"{r}-h{h}", labels, cpu=16000, pods=110, gpus=4))
    return live


def kueue_workload(podsets: list[tuple[str, int, dict[str, str], dict[str, Any] | None]]) -> Workload:
    """Workload ns/w of those (name, count, annotations, topologyRequest) PodSets, admitted on ``gpu``."""
    sets = [mk.podset(n, c, ann, topology_request=field) for n, c, ann, field in podsets]
    return Workload.model_validate(mk.workload("w", namespace="ns", podsets=sets, queue=None, admitted_flavor="gpu"))


def test_decide_honours_the_field() -> None:
    live = live_capacity()
    assert decide(kueue_workload([("main", 9, {}, {"required": RACK})]), {"gpu"}, live).outcome is Outcome.REJECTED
    ready = decide(kueue_workload([("main", 8, {}, {"required": RACK})]), {"gpu"}, live)
    assert ready.outcome is Outcome.READY
    assert {d.values[0].rsplit("-", 1)[0] for d in ready.placements[0].assignment.domains} in ({"b1-r1"}, {"b1-r2"})


def test_decide_rejects_unknown_field_level_and_bad_groups() -> None:
    d = decide(kueue_workload([("main", 2, {}, {"preferred": "zone"})]), {"gpu"}, live_capacity())
    assert d.outcome is Outcome.REJECTED
    assert d.message == (
        'PodSet "main": topologyRequest.preferred: unknown topology level "zone"; '
        f'Topology "topo" has levels {BLOCK}, {RACK}, {HOSTNAME_LABEL}'
    )
    both = {mk.REQUIRED: RACK, GROUP_NAME: "g"}
    d = decide(kueue_workload([("a", 2, both, None), ("b", 2, both, None)]), {"gpu"}, live_capacity())
    assert d.outcome is Outcome.REJECTED
    assert d.message.startswith(
        f'PodSet "a": annotation {GROUP_NAME}: invalid value "g": can only define groups where at least one pod set '
        "has only 1 replica, got: 2 replica(s) and 2 replica(s) in the group"
    )


def test_decide_rejects_layers_out_of_order() -> None:
    layers = json.dumps([{"topology": HOSTNAME_LABEL, "size": 2}, {"topology": RACK, "size": 1}])
    d = decide(
        kueue_workload([("main", 4, {mk.REQUIRED: BLOCK, SLICE_CONSTRAINTS: layers}, None)]), {"gpu"}, live_capacity()
    )
    assert d.outcome is Outcome.REJECTED
    assert d.message == (
        f'PodSet "main": annotation {SLICE_CONSTRAINTS}[1].topology: '
        f"additional slice layer topology {RACK} must be at a lower level than {HOSTNAME_LABEL}"
    )


def test_group_is_placed_together(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A leader + 7 workers fit one rack (8 GPUs) together; a leader + 8 workers do not, though
    each PodSet alone would."""
    rack = {mk.REQUIRED: mk.RACK, GROUP_NAME: "g"}
    ok = mk.jobset("ok", [mk.replicated_job("leader", 1, 1, 1, rack), mk.replicated_job("workers", 1, 7, 7, rack)])
    code, out, err = run_plan(tmp_path, capsys, [*mk.cluster(), ok])
    assert code == 0, err
    leader, workers = out["workloads"][0]["podSets"]
    assert racks_of(leader) == racks_of(workers) and len(racks_of(workers)) == 1
    too_big = mk.jobset(
        "big", [mk.replicated_job("leader", 1, 1, 1, rack), mk.replicated_job("workers", 1, 8, 8, rack)]
    )
    code, out, err = run_plan(tmp_path, capsys, [*mk.cluster(), too_big])
    assert code == 0, err
    [wl] = out["workloads"]
    assert wl["fits"] is False
    # separately each PodSet would fit a rack; together they do not
    messages = {ps["message"] for ps in wl["podSets"]}
    assert len(messages) == 1 and "out of" in messages.pop()
