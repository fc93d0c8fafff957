"""The workload-wide constraint in the engine (``topology/workload_domain``).

An NVL72-like cluster, 2 zones > blocks > racks (gpu-clique) > hosts, one GPU pod per slot:

* zone z1: block z1-b1 with rack z1-r1 (4 hosts x 1 GPU: a tight rack of 4) only;
* zone z2: block z2-b1 with racks z2-r1 and z2-r2 (4 hosts x 2 GPUs each: 8 per rack).

The OSMO case: two model instances of 4 pods, each required in one rack. Per-PodSet best fit
alone puts model1 in the tight rack z1-r1 (the only rack of z1) and model2 in z2: two zones. With
``workload-required-topology: zone`` both land in z2, each still in one rack.
"""

from __future__ import annotations

from collections import Counter

import pytest
from vocab import GPU

from kueue_tas.topology.engine.results import PodSetResult
from kueue_tas.topology.engine.snapshot import TopologySnapshot
from kueue_tas.topology.engine.workload_domain import WorkloadTopology, podset_level_problem
from kueue_tas.topology.model import HOSTNAME_LABEL, NodeInfo, PodSetRequest, TopologyRequest

ZONE, BLOCK, RACK, HOST = "zone", "block", "rack", HOSTNAME_LABEL
LEVELS = (ZONE, BLOCK, RACK, HOST)


def node(zone: str, block: str, rack: str, host: str, gpus: int) -> NodeInfo:
    return NodeInfo(host, {ZONE: zone, BLOCK: block, RACK: rack, HOST: host}, {GPU: gpus, "pods": 110})


def cluster() -> TopologySnapshot:
    nodes = [node("z1", "z1-b1", "z1-r1", f"z1-r1-h{i}", 1) for i in range(4)]
    nodes += [node("z2", "z2-b1", r, f"{r}-h{i}", 2) for r in ("z2-r1", "z2-r2") for i in range(4)]
    return TopologySnapshot.build(topology_name="nvl", levels=LEVELS, nodes=nodes)


def ps(name: str, count: int, **topology: str) -> PodSetRequest:
    if not topology:  # no annotation: Kueue's implied request (the lowest level)
        return PodSetRequest(name, count, {GPU: 1}, implied=True)
    return PodSetRequest(name, count, {GPU: 1}, topology=TopologyRequest(**topology))


def zone_of(host: str) -> str:
    return host.split("-")[0]


def rack_of(host: str) -> str:
    return host.rsplit("-", 1)[0]


def hosts(result: PodSetResult) -> Counter[str]:
    assert result.assignment is not None, result.message
    return Counter({d.values[-1]: d.count for d in result.assignment.domains})


def models() -> list[PodSetRequest]:
    return [ps("model1", 4, required=RACK), ps("model2", 4, required=RACK)]


def test_per_podset_best_fit_alone_spreads_the_instances_over_two_zones() -> None:
    # What Kueue does: each PodSet's tightest rack, whatever the other's zone.
    r1, r2 = cluster().place(models())
    assert {zone_of(h) for h in hosts(r1)} == {"z1"} and {zone_of(h) for h in hosts(r2)} == {"z2"}


def test_workload_required_zone_puts_both_instances_in_the_one_zone_that_holds_them() -> None:
    results = cluster().place(models(), workload=WorkloadTopology(required=ZONE))
    zones = {zone_of(h) for r in results for h in hosts(r)}
    assert zones == {"z2"}
    for r in results:
        assert len({rack_of(h) for h in hosts(r)}) == 1, "each instance still in one rack"
        assert sum(hosts(r).values()) == 4


def test_the_tightest_domain_that_holds_everything_wins() -> None:
    # 4 single pods fit in z1 (4 slots) and in z2 (16): z1 is the tighter zone.
    results = cluster().place([ps("a", 2), ps("b", 2)], workload=WorkloadTopology(required=ZONE))
    assert {zone_of(h) for r in results for h in hosts(r)} == {"z1"}


def test_nothing_fits_in_one_domain_every_podset_fails_with_the_roomiest_domains_reason() -> None:
    # z2 has room for 10 pods in aggregate, but no rack of it holds 9.
    results = cluster().place([ps("a", 9, required=RACK), ps("b", 1)], workload=WorkloadTopology(required=ZONE))
    assert results[0].assignment is None
    assert results[0].message.startswith('not every PodSet fits in one domain of level "zone"; in the roomiest, "z2": ')
    assert results[0].message.endswith(
        'topology "nvl" allows to fit only 8 out of 9 pod(s). Total nodes: 12; excluded: topologyDomain: 4'
    )


def test_no_domain_with_aggregate_room_says_so() -> None:
    results = cluster().place([ps("a", 17), ps("b", 1)], workload=WorkloadTopology(required=ZONE))
    assert [r.message for r in results] == [
        'no domain of level "zone" has room for every PodSet of the workload together'
    ] * 2


def test_workload_preferred_climbs_then_falls_back_to_no_constraint() -> None:
    snap = cluster()
    # 12 pods do not fit in one rack (8) but do in block z2-b1 (16): preferred rack climbs to block.
    results = snap.place([ps("a", 6), ps("b", 6)], workload=WorkloadTopology(preferred=RACK))
    assert {rack_of(h)[:5] for r in results for h in hosts(r)} == {"z2-r1", "z2-r2"}
    assert {zone_of(h) for r in results for h in hosts(r)} == {"z2"}
    # 18 pods fit in no zone (4 + 16 = 20 in all): placed as without the constraint.
    spread = snap.place([ps("a", 9), ps("b", 9)], workload=WorkloadTopology(preferred=ZONE))
    assert all(r.assignment is not None for r in spread)
    assert {zone_of(h) for r in spread for h in hosts(r)} == {"z1", "z2"}


def test_workload_required_and_preferred_climb_no_higher_than_required() -> None:
    snap = cluster()
    got = snap.place([ps("a", 6), ps("b", 6)], workload=WorkloadTopology(required=BLOCK, preferred=RACK))
    assert all(r.assignment is not None for r in got)
    failed = snap.place([ps("a", 6), ps("b", 6)], workload=WorkloadTopology(required=RACK, preferred=RACK))
    assert failed[0].assignment is None


def test_an_unconstrained_or_implied_podset_is_held_inside_the_domain_too() -> None:
    results = cluster().place(
        [ps("frontend", 2, unconstrained="true"), ps("worker", 4, required=BLOCK)],  # type: ignore[arg-type]
        workload=WorkloadTopology(required=ZONE),
    )
    zones = {zone_of(h) for r in results for h in hosts(r)}
    assert len(zones) == 1


@pytest.mark.parametrize(
    ("topology", "expected"),
    [
        ({"required": ZONE}, ("required", ZONE)),
        ({"preferred": ZONE}, ("preferred", ZONE)),
        ({"required": BLOCK}, None),
        ({"required": RACK, "preferred": HOST}, None),
        ({"slice_level": ZONE, "slice_size": 1}, ("slice-required", ZONE)),
    ],
)
def test_a_podset_level_above_the_workloads_is_named(
    topology: dict[str, object], expected: tuple[str, str] | None
) -> None:
    request = PodSetRequest("w", 4, {GPU: 1}, topology=TopologyRequest(**topology))  # type: ignore[arg-type]
    assert podset_level_problem(request, LEVELS, WorkloadTopology(required=BLOCK)) == expected
