"""Issue 12, defect 7: a PodSet count that its slice size does not divide was admitted with only
floor(count/size)*size pods assigned (one domain: every pod pinned to a host charged for fewer;
several domains: the rest gated forever). One rule (``slice_count_problem``, applied where a
PodSet becomes a request) now refuses it, for the live controller and for ``plan`` alike."""

from __future__ import annotations

import json
from pathlib import Path

import builders as mk
import pytest
from vocab import PREFERRED, RACK, REQUIRED, SLICE_CONSTRAINTS, SLICE_LEVEL, SLICE_SIZE

from kueue_tas.api.constants import HOSTNAME_LABEL
from kueue_tas.api.workload import Workload
from kueue_tas.capacity.live import LiveCapacity
from kueue_tas.capacity.rules import FlavorSpec
from kueue_tas.cli.main import main
from kueue_tas.controllers.decide import Outcome, decide
from kueue_tas.topology.requests.request import TopologyRequestError, parse_topology_request, slice_count_problem


def capacity() -> LiveCapacity:
    """Two racks of two 8-GPU hosts."""
    live = LiveCapacity()
    live.set_flavors({"gpu": FlavorSpec("gpu", "topo", (RACK, HOSTNAME_LABEL), {"pool": "gpu"})})
    for r in ("r1", "r2"):
        for h in range(2):
            live.upsert_node(mk.node_info(f"{r}-h{h}", {RACK: r, "pool": "gpu"}, cpu=64000, pods=110, gpus=8))
    return live


def admitted(count: int, annotations: dict[str, str]) -> Workload:
    return Workload.model_validate(
        mk.workload("a", count, annotations, namespace="ns", queue=None, admitted_flavor="gpu")
    )


def test_slice_count_problem() -> None:
    assert slice_count_problem(2, 8) is None and slice_count_problem(1, 7) is None and slice_count_problem(3, 0) is None
    assert slice_count_problem(3, 8) == "must evenly divide pod set count 8"
    assert slice_count_problem(0, 8) is None  # refused by Kueue's own ">= 1" check instead


def test_slice_not_dividing_count_single_domain_is_rejected() -> None:
    # Before: 2 of 3 pods assigned to one host, all 3 pinned there by the nodeSelector.
    d = decide(admitted(3, {PREFERRED: RACK, SLICE_LEVEL: HOSTNAME_LABEL, SLICE_SIZE: "2"}), {"gpu"}, capacity())
    assert d.outcome is Outcome.REJECTED and d.placements == []
    assert d.message == (
        f'PodSet "main": annotation {SLICE_SIZE!r}: invalid value "2": must evenly divide pod set count 3'
    )


def test_slice_not_dividing_count_several_domains_is_rejected() -> None:
    # Before: 8 of 10 pods assigned over two hosts, the other 2 gated forever.
    d = decide(admitted(10, {REQUIRED: RACK, SLICE_LEVEL: HOSTNAME_LABEL, SLICE_SIZE: "4"}), {"gpu"}, capacity())
    assert d.outcome is Outcome.REJECTED and d.placements == []
    assert d.message.endswith('invalid value "4": must evenly divide pod set count 10')


def test_dividing_slices_still_place_every_pod() -> None:
    d = decide(admitted(12, {REQUIRED: RACK, SLICE_LEVEL: HOSTNAME_LABEL, SLICE_SIZE: "4"}), {"gpu"}, capacity())
    assert d.outcome is Outcome.READY and d.placements[0].assignment.total == 12


def test_multi_layer_first_layer_not_dividing_count_is_rejected() -> None:
    layers = json.dumps([{"topology": RACK, "size": 4}, {"topology": HOSTNAME_LABEL, "size": 2}])
    d = decide(admitted(6, {SLICE_CONSTRAINTS: layers}), {"gpu"}, capacity())
    assert d.outcome is Outcome.REJECTED
    assert (
        d.message
        == f'PodSet "main": annotation {SLICE_CONSTRAINTS!r}: invalid value 4: must evenly divide pod set count 6'
    )


def test_topology_request_field_not_dividing_count_is_rejected() -> None:
    field = {"required": RACK, "podSetSliceRequiredTopology": HOSTNAME_LABEL, "podSetSliceSize": 4}
    wl = Workload.model_validate(
        mk.workload(
            "a",
            queue=None,
            namespace="ns",
            admitted_flavor="gpu",
            podsets=[mk.podset("main", 6, topology_request=field)],
        )
    )
    d = decide(wl, {"gpu"}, capacity())
    assert d.outcome is Outcome.REJECTED
    assert d.message == (
        'PodSet "main": topologyRequest.podSetSliceSize: Invalid value: 4: must evenly divide pod set count 6'
    )


def test_partially_admitted_count_is_the_one_checked() -> None:
    # Kueue admitted 6 of 8 (partial admission): the 8 in the spec divides by 4, the 6 does not.
    sliced = {REQUIRED: RACK, SLICE_LEVEL: HOSTNAME_LABEL, SLICE_SIZE: "4"}
    wl = mk.workload("a", 8, sliced, queue=None, admitted_flavor="gpu")
    wl["status"]["admission"]["podSetAssignments"][0]["count"] = 6
    d = decide(Workload.model_validate(wl), {"gpu"}, capacity())
    assert d.outcome is Outcome.REJECTED and "must evenly divide pod set count 6" in d.message


def test_plan_refuses_it_with_the_same_rule(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    job = mk.job("j", 10, {REQUIRED: mk.BLOCK, SLICE_LEVEL: mk.RACK, SLICE_SIZE: "4"})
    path = mk.write_yaml(tmp_path / "in.yaml", [*mk.cluster(), job])
    assert main(["plan", "-f", path, "-o", "json"]) == 1
    out, err = capsys.readouterr()
    assert out == ""
    [line] = err.strip().splitlines()
    assert "Job/team-a/j" in line and 'invalid value "4": must evenly divide pod set count 10' in line


def test_request_error_lists_it_with_other_problems() -> None:
    with pytest.raises(TopologyRequestError) as exc:
        parse_topology_request({SLICE_LEVEL: RACK, SLICE_SIZE: "3", REQUIRED: "Not A Label!"}, count=7)
    assert any("must evenly divide pod set count 7" in e for e in exc.value.errors)
    assert len(exc.value.errors) >= 2
