"""The one workload placement (``capacity/workload_placement``): its requests as data or the
first problem, and the placement "as if": these workloads gone (preemption), these domains
closed (reservations, drain windows), without a copy of the pipeline and without changing the
live model."""

from __future__ import annotations

from typing import Any

import builders as mk
import pytest
from placement_inputs import PREFIX, capacity_of, inputs, requests_of

from kueue_tas.capacity.rules import UsageEntry
from kueue_tas.capacity.workload_placement import (
    BadGroups,
    BadScope,
    Domain,
    InvalidRequest,
    LevelRefused,
    PodSetInput,
    place_workload,
    workload_requests,
)
from kueue_tas.topology.assignment import DomainAssignment, TopologyAssignment


def racks(placed: Any, name: str = "main") -> set[str]:
    assignment = placed.results[name].assignment
    assert assignment is not None
    return {d.values[-1].rsplit("-h", 1)[0] for d in assignment.domains}


def test_a_rack_closed_sends_the_workload_to_another_and_leaves_the_model_alone() -> None:
    capacity = capacity_of()
    requests = requests_of(capacity, inputs())
    first = racks(place_workload(requests, capacity))
    assert len(first) == 1
    (rack,) = first
    block = rack.split("-")[0]
    closed = [Domain("gpu", mk.RACK, (block, rack))]
    moved = place_workload(requests, capacity, closed=closed)
    assert moved.fits and rack not in racks(moved)
    # The live snapshot was not touched: the same question without ``closed`` answers as before.
    assert racks(place_workload(requests, capacity)) == first
    snap = capacity.snapshot("gpu")
    assert snap is not None and not any(snap.capacity.sealed(i) for i in range(len(snap.tree.leaves)))


def test_every_rack_closed_fits_nowhere_and_a_closed_block_closes_its_racks() -> None:
    capacity = capacity_of()
    requests = requests_of(capacity, inputs())
    blocks = [Domain("gpu", mk.BLOCK, (b,)) for b in ("b0", "b1")]
    assert not place_workload(requests, capacity, closed=blocks).fits
    only_b1 = place_workload(requests, capacity, closed=blocks[:1])
    assert only_b1.fits and all(r.startswith("b1-") for r in racks(only_b1))
    # Another flavor's domain, or a level the Topology lacks, closes nothing here.
    other = [Domain("other", mk.BLOCK, ("b0",)), Domain("gpu", "example.com/none", ("b0",))]
    assert place_workload(requests, capacity, closed=other).fits


def test_as_if_a_workload_were_gone() -> None:
    """Every host of rack b0-r0 and b0-r1 and b1-r0 is held by workload "big": an 8-pod rack
    request fits only in b1-r1; with b1-r1 closed too it fits only as if "big" were gone."""
    capacity = capacity_of()
    held = [
        UsageEntry("gpu", TopologyAssignment((mk.HOST,), (DomainAssignment((f"{r}-h{h}",), 4),)), {mk.GPU: 1})
        for r in ("b0-r0", "b0-r1", "b1-r0")
        for h in range(2)
    ]
    capacity.assume("team-a/big", tuple(held))
    requests = requests_of(capacity, inputs())
    assert racks(place_workload(requests, capacity)) == {"b1-r1"}
    closed = [Domain("gpu", mk.RACK, ("b1", "b1-r1"))]
    assert not place_workload(requests, capacity, closed=closed).fits
    gone = place_workload(requests, capacity, closed=closed, without=["team-a/big"])
    assert gone.fits and racks(gone) != {"b1-r1"}
    # "big" is held again once the question is answered.
    assert not place_workload(requests, capacity, closed=closed).fits


def test_the_first_failure_stops_the_placement() -> None:
    capacity = capacity_of()
    requests = requests_of(capacity, inputs(64, name="huge"), inputs(1, name="small"))
    placed = place_workload(requests, capacity)
    assert placed.failed is not None and placed.failed.name == "huge" and placed.failed_flavor == "gpu"
    assert "small" not in placed.assignments()


@pytest.mark.parametrize(
    ("podsets", "scope", "expected"),
    [
        ([inputs(annotations={mk.REQUIRED: "example.com/nope"})], None, LevelRefused),
        ([inputs(annotations={mk.REQUIRED: mk.RACK, mk.SLICE_SIZE: "two"})], None, InvalidRequest),
        (
            [
                inputs(1, {mk.REQUIRED: mk.RACK, "kueue-tas.io/podset-group-name": "g"}, "a"),
                inputs(2, {mk.REQUIRED: mk.BLOCK, "kueue-tas.io/podset-group-name": "g"}, "b"),
            ],
            None,
            BadGroups,
        ),
        ([inputs()], {"kueue-tas.io/workload-required-topology": mk.HOST}, BadScope),
    ],
    ids=["unknown-level", "bad-slice-size", "group-levels-differ", "podset-broader-than-workload"],
)
def test_a_refused_request_comes_back_as_data(
    podsets: list[PodSetInput], scope: dict[str, str] | None, expected: type
) -> None:
    got = workload_requests(podsets, capacity_of(), prefix=PREFIX, workload_annotations=scope)
    assert isinstance(got, expected), got
