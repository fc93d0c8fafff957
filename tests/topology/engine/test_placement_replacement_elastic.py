"""Node replacement with several unhealthy nodes, and elastic slices, through ``place``.

Kueue's own single-node replacement and elastic cases run in
``tests/kueue_cases/test_placement_advanced.py``; these cover what goes beyond them: several
unhealthy nodes in one decision, the admitted assignment being charged, the gates.
"""

from __future__ import annotations

from functools import partial

import builders as mk

from kueue_tas.topology.assignment import DomainAssignment, TopologyAssignment
from kueue_tas.topology.engine.snapshot import TopologySnapshot
from kueue_tas.topology.features import FeatureGates
from kueue_tas.topology.model import HOSTNAME_LABEL, NodeInfo, PodSetRequest, TopologyRequest

BLOCK, RACK = "block", "rack"
LEVELS = (BLOCK, RACK, HOSTNAME_LABEL)
CPU = {"cpu": 1000}
R1, R2 = {BLOCK: "b1", RACK: "r1"}, {BLOCK: "b1", RACK: "r2"}
host = partial(mk.node_info, cpu=2000, pods=10)


def _hosts(*domains: tuple[str, int]) -> TopologyAssignment:
    return TopologyAssignment((HOSTNAME_LABEL,), tuple(DomainAssignment((h,), c) for h, c in domains))


def _snap(nodes: list[NodeInfo]) -> TopologySnapshot:
    return TopologySnapshot.build(topology_name="t", levels=LEVELS, nodes=nodes)


def test_several_unhealthy_nodes_are_replaced_in_one_decision() -> None:
    # r1: x1, x2 failed (NotReady); x3 keeps one pod and has room for one more; x7 is empty.
    nodes = [
        host("x1", R1, ready=False),
        host("x2", R1, ready=False),
        host("x3", R1),
        host("x7", R1),
        host("x4", R2),
    ]
    ps = PodSetRequest("main", 3, CPU, topology=TopologyRequest(required=RACK))
    current = {"main": _hosts(("x1", 1), ("x2", 1), ("x3", 1))}
    [res] = _snap(nodes).place([ps], current=current, unhealthy_nodes=["x1", "x2"])
    # Both missing pods stay in the required rack r1; BestFit puts them together on x7.
    assert res.assignment == _hosts(("x3", 1), ("x7", 2))


def test_replacement_failure_counts_the_kept_pods_and_the_other_domains() -> None:
    nodes = [host("x1", R1, ready=False), host("x2", R1, ready=False), host("x3", R1), host("x4", R2)]
    ps = PodSetRequest("main", 5, CPU, topology=TopologyRequest(required=RACK))
    current = {"main": _hosts(("x1", 2), ("x2", 2), ("x3", 1))}
    [res] = _snap(nodes).place([ps], current=current, unhealthy_nodes=["x1", "x2"])
    assert res.assignment is None
    assert res.message == (
        'topology "t" allows to fit only 1 out of 4 pod(s). Total nodes: 2; excluded: topologyDomain: 1'
    )


def test_no_replacement_names_every_removed_node() -> None:
    # Slices of 4 pods per rack; the missing pods complete no slice anywhere, so Kueue's
    # algorithm places nothing (fewer pods than one slice) and reports the removed nodes.
    nodes = [host("x1", R1), host("x2", R1), host("x3", R2), host("x4", R2)]
    ps = PodSetRequest("main", 3, CPU, topology=TopologyRequest(required=BLOCK, slice_level=RACK, slice_size=4))
    snap = _snap(nodes)
    [res] = snap.place([ps], current={"main": _hosts(("x1", 1), ("x3", 2))}, unhealthy_nodes=["x1"])
    assert res.assignment is None
    assert res.message == "cannot find replacement assignment for unhealthy node: x1"
    current = {"main": _hosts(("x1", 1), ("x2", 1), ("x3", 1))}
    [res] = snap.place([ps], current=current, unhealthy_nodes=["x2", "x1"])
    assert res.message == "cannot find replacement assignment for unhealthy node: x1, x2"


def test_stale_kept_domain_refuses_the_replacement() -> None:
    nodes = [host("x1", R1), host("x2", R1)]
    ps = PodSetRequest("main", 2, CPU, topology=TopologyRequest(required=RACK))
    current = {"main": _hosts(("x1", 1), ("gone", 1))}
    [res] = _snap(nodes).place([ps], current=current, unhealthy_nodes=["x1"])
    assert res.message == (
        "Cannot replace the node, because the existing topologyAssignment is invalid, as it contains the stale "
        "domain gone"
    )


def test_untouched_podsets_keep_their_assignment_and_hold_its_capacity() -> None:
    # x3 is full with PodSet a; b lost its only node, and its required rack r1 has no room left.
    nodes = [host("x1", R1, ready=False), host("x3", R1), host("x4", R2), host("x5", R2)]
    a = PodSetRequest("a", 2, CPU, topology=TopologyRequest(required=RACK))
    b = PodSetRequest("b", 1, CPU, topology=TopologyRequest(required=RACK))
    current = {"a": _hosts(("x3", 2)), "b": _hosts(("x1", 1))}
    res = _snap(nodes).place([a, b], current=current, unhealthy_nodes=["x1"])
    assert [r.assignment for r in res] == [_hosts(("x3", 2)), _hosts(("x4", 1))]


def test_the_admitted_assignment_stays_charged_on_a_ready_unhealthy_node() -> None:
    # As in Kueue's cache, the Workload's admitted usage holds until the new assignment is
    # admitted: x1 (unhealthy but Ready, 3 cpus) still holds its 2 lost pods, so only 1 cpu is
    # free there and both replacement pods go to x2 (4 cpus, 1 held by the kept pod).
    nodes = [host("x1", R1, cpu=3000), host("x2", R1, cpu=4000), host("x3", R2, cpu=8000)]
    ps = PodSetRequest("main", 3, CPU, topology=TopologyRequest(required=RACK))
    current = {"main": _hosts(("x1", 2), ("x2", 1))}
    [res] = _snap(nodes).place([ps], current=current, unhealthy_nodes=["x1"])
    assert res.assignment == _hosts(("x2", 3))


def test_replacement_gate_off_keeps_current() -> None:
    nodes = [host("x1", R1, ready=False), host("x3", R1)]
    ps = PodSetRequest("main", 1, CPU, topology=TopologyRequest(required=RACK))
    current = {"main": _hosts(("x1", 1))}
    gates = FeatureGates({"TASFailedNodeReplacement": False})
    [res] = _snap(nodes).place([ps], current=current, unhealthy_nodes=["x1"], gates=gates)
    assert res.assignment == current["main"]


def test_elastic_needs_both_gates() -> None:
    nodes = [host("x1", R1, cpu=1000), host("x2", R1, cpu=4000)]
    ps = PodSetRequest("main", 3, CPU, topology=TopologyRequest(unconstrained=True))
    previous = {"main": _hosts(("x1", 1))}
    snap = _snap(nodes)
    on = FeatureGates({"ElasticJobsViaWorkloadSlicesWithTAS": True})
    [kept] = snap.place([ps], current=previous, elastic=True, gates=on)
    assert kept.assignment == _hosts(("x1", 1), ("x2", 2))
    [fresh] = snap.place([ps], current=previous, elastic=True)
    assert fresh.assignment == _hosts(("x2", 3))
    [down] = snap.place(
        [PodSetRequest("main", 1, CPU, topology=ps.topology)], current=kept_current(), elastic=True, gates=on
    )
    assert down.assignment == _hosts(("x1", 1))


def kept_current() -> dict[str, TopologyAssignment]:
    return {"main": _hosts(("x1", 1), ("x2", 2))}


def test_elastic_scale_up_failure_reports_on_the_workers_only() -> None:
    nodes = [host("x1", R1, cpu=1000)]
    lead = PodSetRequest("leader", 1, CPU, topology=TopologyRequest(unconstrained=True, group="g"))
    work = PodSetRequest("workers", 2, CPU, topology=TopologyRequest(unconstrained=True, group="g"))
    previous = {"workers": _hosts(("x1", 1)), "leader": _hosts(("x1", 1))}
    on = FeatureGates({"ElasticJobsViaWorkloadSlicesWithTAS": True})
    res = _snap(nodes).place([lead, work], current=previous, elastic=True, gates=on)
    by = {r.name: r for r in res}
    assert by["workers"].assignment is None and by["workers"].message.startswith('topology "t" doesn\'t allow')
    assert by["leader"].assignment is None and by["leader"].message == ""
