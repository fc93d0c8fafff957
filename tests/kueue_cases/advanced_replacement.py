"""Kueue's TAS node-replacement cases (a Workload admitted with a topology assignment whose
``status.unhealthyNodes`` names a node of it).

Sources (kubernetes-sigs/kueue v0.19.2), names are Kueue's:

* ``pkg/cache/scheduler/tas_cache_test.go``, ``TestFindTopologyAssignments``: the
  ``node replace...`` cases;
* the same file, ``TestFindTopologyAssignmentsMultiLayerReplacement`` (whole table; the
  ``multi-layer replacement: `` prefix is ours, to keep ids unique across tables);
* ``pkg/scheduler/scheduler_tas_test.go``, ``TestScheduleForTAS``: the second-pass
  ``workload with unhealthyNode ...`` cases that are decided by the placement (the expected
  assignment is the new admission's; a failure text is the event message without Kueue's
  ``couldn't assign flavors to pod set <ps>: `` prefix).

Mapping: the admitted assignment is ``PodSetCase.current``, the failed nodes are
``KueueCase.unhealthy_nodes`` and the workload's own usage is NOT in ``tas_usage``: the
engine charges the whole admitted assignment itself (as Kueue's cache holds the admitted
Workload's usage, the unhealthy node's share included), keeps its healthy part and
re-places only the pods of the unhealthy nodes. Node names equal their hostname label in
every case here, so "unhealthy node" means the same thing by node name and by hostname
(Kueue compares ``unhealthyNodes[].name`` with the hostname value of the assignment's
domains).

Harness differences, handled so the free capacity our engine sees equals Kueue's:

* ``TestFindTopologyAssignments*`` harnesses never charge the workload's own admitted usage
  (no ``priorOwnUsage``). Our engine charges it, so every node of the admitted assignment
  gets its allocatable raised by exactly the pods the assignment puts on it
  (``_room_for_admitted``): the free capacity, and so every choice and exclusion count, is
  Kueue's. (The unhealthy nodes of these cases are NotReady, so out of every count anyway.)
* ``TestScheduleForTAS`` keeps the whole admitted usage charged, including on the unhealthy
  node (which is why Kueue never picks it again when it is full): exactly what our engine
  charges, so nodes are unchanged.
* ``priorFlavorUsage`` (a sibling flavor sharing the hostnames) is ``other_flavor_usage``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from kueue_tas.topology.assignment import TopologyAssignment
from kueue_tas.topology.model import NodeInfo, SliceLayer, TopologyRequest

from .model import (
    BLOCK,
    GI,
    HOST,
    ONE_LEVEL,
    RACK,
    SWITCH,
    THREE_LEVELS,
    KueueCase,
    PodSetCase,
    UsageCase,
    node,
    on_hosts,
    preferred,
    required,
)
from .schedule_for_tas import SCHED_RACK, TAS_NODE

CPU1 = {"cpu": 1000}


def _room_for_admitted(
    nodes: tuple[NodeInfo, ...], current: TopologyAssignment, per_pod: Mapping[str, int]
) -> tuple[NodeInfo, ...]:
    """Raise each node's allocatable by the pods ``current`` puts on it (see module doc)."""
    extra = {d.values[-1]: d.count for d in current.domains}
    out = []
    for n in nodes:
        count = extra.get(n.labels.get(HOST, ""), 0)
        if count:
            alloc = dict(n.allocatable)
            for res, amount in {**per_pod, "pods": 1}.items():
                alloc[res] = alloc.get(res, 0) + amount * count
            n = replace(n, allocatable=alloc)
        out.append(n)
    return tuple(out)


# --- TestFindTopologyAssignments: node replacement --------------------------------------------

_X1_NOT_READY = (
    node("x1", host="x1", cpu=1000, pods=10, ready=False),
    node("x2", host="x2", cpu=1000, pods=10),
)


def _replaced_x1(name: str, note: str) -> KueueCase:
    return KueueCase(
        name=name,
        levels=ONE_LEVEL,
        nodes=_X1_NOT_READY,
        unhealthy_nodes=("x1",),
        podsets=(
            PodSetCase(
                count=1,
                requests=CPU1,
                topology=required(HOST),
                current=on_hosts(("x1", 1)),
                want=on_hosts(("x2", 1)),
            ),
        ),
        note=note,
    )


FIND_CASES = [
    _replaced_x1(
        "node replaced for Job-owned workload; gate on",
        "SkipReassignmentForPodOwnedWorkloads=true only matters for Pod-owned workloads.",
    ),
    _replaced_x1(
        "node replaced for pod-group workload with two Pod owners; gate on",
        "Two Pod owners: not a single-Pod-owned workload, so the node is replaced.",
    ),
    _replaced_x1(
        "node replaced for size-1 pod-group workload (is-group-workload annotation); gate on",
        "A pod group (is-group-workload annotation) is not single-Pod-owned: replaced.",
    ),
    _replaced_x1(
        "node replaced for single-Pod-owned workload; gate off",
        "SkipReassignmentForPodOwnedWorkloads=false is not one of our gates; kueue-tas always replaces.",
    ),
]

# --- TestFindTopologyAssignmentsMultiLayerReplacement -----------------------------------------

SWITCH_LEVELS = (BLOCK, RACK, SWITCH, HOST)


def _n(block: str, rack: str, host: str, cores: float, *, ready: bool = True, switch: str | None = None) -> NodeInfo:
    labels = {SWITCH: switch} if switch else {}
    return node(host, block=block, rack=rack, host=host, labels=labels, cpu=int(cores * 1000), pods=10, ready=ready)


def _multi_layer(
    name: str,
    *,
    nodes: tuple[NodeInfo, ...],
    current: TopologyAssignment,
    unhealthy: str,
    topology: TopologyRequest,
    count: int,
    levels: tuple[str, ...] = THREE_LEVELS,
    other: tuple[UsageCase, ...] = (),
    want: TopologyAssignment | None = None,
    reason: str = "",
    note: str = "",
) -> KueueCase:
    return KueueCase(
        name=f"multi-layer replacement: {name}",
        levels=levels,
        nodes=_room_for_admitted(nodes, current, CPU1),
        unhealthy_nodes=(unhealthy,),
        other_flavor_usage=other,
        gates={"TASMultiLayerTopology": True},
        podsets=(PodSetCase(count=count, requests=CPU1, topology=topology, current=current, want=want, reason=reason),),
        note=note,
    )


def _block_with_layers(*layers: tuple[str, int]) -> TopologyRequest:
    return TopologyRequest(required=BLOCK, slice_layers=tuple(SliceLayer(level, size) for level, size in layers))


MULTI_LAYER_CASES = [
    _multi_layer(
        "replacement does not cross a string-prefix sibling domain",
        nodes=(
            _n("b1", "rack-a", "x1", 1, ready=False),
            _n("b1", "rack-a", "x2", 1),
            _n("b1", "rack-ab", "x3", 1),
        ),
        current=on_hosts(("x1", 1), ("x2", 1)),
        unhealthy="x1",
        topology=required(RACK),
        count=2,
        other=(UsageCase(assignment=on_hosts(("x2", 1)), per_pod=CPU1),),
        reason=(
            'topology "default" doesn\'t allow to fit any of 1 pod(s). Total nodes: 2; excluded: '
            'resource "cpu": 1, topologyDomain: 1'
        ),
        note="x2 keeps the replacement in rack-a and is full; rack-ab (x3) must not be used.",
    ),
    _multi_layer(
        "replace unhealthy node in incomplete rack slice",
        nodes=(
            _n("b1", "r1", "x1", 1),
            _n("b1", "r1", "x2", 1),
            _n("b1", "r2", "x3", 1, ready=False),
            _n("b1", "r2", "x4", 1),
            _n("b1", "r2", "x5", 2),
        ),
        current=on_hosts(("x1", 1), ("x2", 1), ("x3", 1), ("x4", 1)),
        unhealthy="x3",
        topology=_block_with_layers((RACK, 2)),
        count=4,
        want=on_hosts(("x1", 1), ("x2", 1), ("x4", 2)),
        note="Confined to rack r2; BestFit picks x4 (1 cpu free) over x5 (2 free).",
    ),
    _multi_layer(
        "replacement fails when no capacity in incomplete slice domain",
        nodes=(
            _n("b1", "r1", "x1", 1),
            _n("b1", "r1", "x2", 1),
            _n("b1", "r2", "x3", 1, ready=False),
            _n("b1", "r2", "x4", 0.5),
        ),
        current=on_hosts(("x1", 1), ("x2", 1), ("x3", 1), ("x4", 1)),
        unhealthy="x3",
        topology=_block_with_layers((RACK, 2)),
        count=4,
        reason=(
            'topology "default" doesn\'t allow to fit any of 1 pod(s). Total nodes: 3; excluded: '
            'resource "cpu": 1, topologyDomain: 2'
        ),
    ),
    _multi_layer(
        "3-layer: innermost broken domain confines replacement to correct switch",
        levels=SWITCH_LEVELS,
        nodes=(
            _n("b1", "r1", "x1", 4, switch="s1"),
            _n("b1", "r1", "x2", 4, switch="s1"),
            _n("b1", "r1", "x3", 4, switch="s2", ready=False),
            _n("b1", "r1", "x4", 8, switch="s2"),
            _n("b1", "r2", "x5", 4, switch="s3"),
            _n("b1", "r2", "x6", 4, switch="s3"),
            _n("b1", "r2", "x7", 4, switch="s4"),
            _n("b1", "r2", "x8", 4, switch="s4"),
        ),
        current=on_hosts(*((f"x{i}", 2) for i in range(1, 9))),
        unhealthy="x3",
        topology=_block_with_layers((RACK, 8), (SWITCH, 4), (HOST, 2)),
        count=16,
        want=on_hosts(("x1", 2), ("x2", 2), ("x4", 4), ("x5", 2), ("x6", 2), ("x7", 2), ("x8", 2)),
        note="The innermost broken layer (switch) confines the replacement to s2: only x4.",
    ),
    _multi_layer(
        "2-layer: sliceSize=2 prevents scattered single-pod placement across hosts",
        nodes=(
            _n("b1", "r1", "x1", 2),
            _n("b1", "r1", "x2", 2),
            _n("b1", "r2", "x3", 2, ready=False),
            _n("b1", "r2", "x4", 1),
            _n("b1", "r2", "x5", 1),
        ),
        current=on_hosts(("x1", 2), ("x2", 2), ("x3", 2), ("x4", 2)),
        unhealthy="x3",
        topology=_block_with_layers((RACK, 4), (HOST, 2)),
        count=8,
        reason=(
            'topology "default" doesn\'t allow to fit any of 1 slice(s). Total nodes: 4; excluded: topologyDomain: 2'
        ),
        note="The 2 lost pods must land together on one host of r2; neither x4 nor x5 has room for 2.",
    ),
    _multi_layer(
        "sibling-flavor aggregatedDomainUsages on replacement candidate blocks the replacement",
        nodes=(
            _n("b1", "r1", "x1", 1),
            _n("b1", "r1", "x2", 1),
            _n("b1", "r2", "x3", 1, ready=False),
            _n("b1", "r2", "x4", 1),
        ),
        current=on_hosts(("x1", 1), ("x2", 1), ("x3", 1), ("x4", 1)),
        unhealthy="x3",
        topology=_block_with_layers((RACK, 2)),
        count=4,
        other=(UsageCase(assignment=on_hosts(("x4", 1)), per_pod=CPU1),),
        reason=(
            'topology "default" doesn\'t allow to fit any of 1 pod(s). Total nodes: 3; excluded: '
            'resource "cpu": 1, topologyDomain: 2'
        ),
    ),
]

# --- TestScheduleForTAS: second-pass replacement ----------------------------------------------

SCHED_THREE = "tas-three-level"
SCHED_LEVELS = (BLOCK, SCHED_RACK, HOST)


def _s(block: str, rack: str, host: str, cores: int, memory_gi: int, pods: int) -> NodeInfo:
    return node(
        host,
        host=host,
        labels={**TAS_NODE, BLOCK: block, SCHED_RACK: rack},
        cpu=cores * 1000,
        memory=memory_gi * GI,
        pods=pods,
    )


#        b1                   b2
#     /      \             /      \
#    r1       r2          r1       r2
#    |     /  |  \        |        |
#   x1    x2  x3  x4      x5       x6
SCHED_NODES = (
    _s("b1", "r1", "x1", 1, 1, 10),
    _s("b1", "r2", "x2", 1, 1, 10),
    _s("b1", "r2", "x3", 1, 1, 10),
    _s("b1", "r2", "x4", 1, 1, 10),
    _s("b2", "r1", "x5", 1, 1, 10),
    _s("b2", "r2", "x6", 2, 4, 40),
)

NO_FAIL_FAST = {"TASFailedNodeReplacementFailFast": False}


def _second_pass(
    name: str,
    unhealthy: str,
    podsets: tuple[PodSetCase, ...],
    gates: Mapping[str, bool] | None = None,
    note: str = "",
) -> KueueCase:
    return KueueCase(
        name=name,
        topology_name=SCHED_THREE,
        levels=SCHED_LEVELS,
        nodes=SCHED_NODES,
        node_labels=TAS_NODE,
        unhealthy_nodes=(unhealthy,),
        gates=dict(gates or {}),
        podsets=podsets,
        note=note,
    )


def _one(
    count: int,
    requests: Mapping[str, int],
    topology: TopologyRequest,
    current: TopologyAssignment,
    want: TopologyAssignment | None = None,
    reason: str = "",
) -> tuple[PodSetCase, ...]:
    return (
        PodSetCase(
            name="one", count=count, requests=requests, topology=topology, current=current, want=want, reason=reason
        ),
    )


SCHEDULE_CASES = [
    _second_pass(
        "workload with unhealthyNode annotation; second pass; baseline scenario",
        "x0",
        _one(1, CPU1, preferred(HOST), on_hosts(("x0", 1)), want=on_hosts(("x1", 1))),
        note="x0 is not a node of the cluster.",
    ),
    _second_pass(
        "workload with unhealthyNode annotation; second pass; preferred; fit in different rack",
        "x0",
        _one(2, {"cpu": 500}, preferred(SCHED_RACK), on_hosts(("x0", 1), ("x1", 1)), want=on_hosts(("x1", 2))),
    ),
    _second_pass(
        "workload with unhealthyNode annotation; second pass; preferred; no fit",
        "x0",
        _one(
            1,
            {"cpu": 3000},
            preferred(SCHED_RACK),
            on_hosts(("x0", 1)),
            reason=(
                'topology "tas-three-level" doesn\'t allow to fit any of 1 pod(s). '
                'Total nodes: 6; excluded: resource "cpu": 6'
            ),
        ),
        gates=NO_FAIL_FAST,
    ),
    _second_pass(
        "workload with unhealthyNode annotation; second pass; podspec constraints apply",
        "x0",
        _one(1, {"cpu": 1000, "memory": 2 * GI}, preferred(SCHED_RACK), on_hosts(("x0", 1)), want=on_hosts(("x6", 1))),
        gates=NO_FAIL_FAST,
        note="Only x6 has 2Gi of memory.",
    ),
    _second_pass(
        "workload with unhealthyNode annotation; second pass; required rack; fit",
        "x0",
        _one(2, CPU1, required(SCHED_RACK), on_hosts(("x0", 1), ("x2", 1)), want=on_hosts(("x2", 1), ("x3", 1))),
        note="The healthy pod on x2 keeps the replacement in rack b1/r2.",
    ),
    _second_pass(
        "workload with unhealthyNode annotation; second pass; required rack for a single node; fit",
        "x0",
        _one(1, CPU1, required(SCHED_RACK), on_hosts(("x0", 1)), want=on_hosts(("x1", 1))),
    ),
    _second_pass(
        "workload with unhealthyNode annotation; second pass; required rack; no fit",
        "x0",
        _one(
            2,
            CPU1,
            required(SCHED_RACK),
            on_hosts(("x0", 1), ("x1", 1)),
            reason=(
                'topology "tas-three-level" doesn\'t allow to fit any of 1 pod(s). '
                'Total nodes: 6; excluded: resource "cpu": 1, topologyDomain: 5'
            ),
        ),
        gates=NO_FAIL_FAST,
        note="x1 (rack b1/r1, alone) is full with the healthy pod.",
    ),
    _second_pass(
        "workload with unhealthyNode annotation; second pass; two podsets",
        "x0",
        (
            PodSetCase(
                name="one",
                count=1,
                requests=CPU1,
                topology=preferred(HOST),
                current=on_hosts(("x0", 1)),
                want=on_hosts(("x2", 1)),
            ),
            PodSetCase(
                name="two",
                count=1,
                requests=CPU1,
                topology=preferred(HOST),
                current=on_hosts(("x1", 1)),
                want=on_hosts(("x1", 1)),
            ),
        ),
        note="Only PodSet one lost a node; two keeps x1, which is therefore full.",
    ),
    _second_pass(
        "workload with unhealthyNode; second pass; slices; baseline",
        "x2",
        _one(
            2,
            CPU1,
            TopologyRequest(preferred=BLOCK, slice_level=SCHED_RACK, slice_size=2),
            on_hosts(("x2", 1), ("x3", 1)),
            want=on_hosts(("x3", 1), ("x4", 1)),
        ),
        note="x2 is Ready but unhealthy: it must not be picked again.",
    ),
    _second_pass(
        "workload with unhealthyNode; second pass; slices; unhealthy node hosts incomplete slice",
        "x2",
        _one(
            8,
            {"cpu": 250},
            TopologyRequest(preferred=BLOCK, slice_level=SCHED_RACK, slice_size=8),
            on_hosts(("x2", 4), ("x3", 4)),
            want=on_hosts(("x3", 4), ("x4", 4)),
        ),
    ),
    _second_pass(
        "workload with unhealthyNode; second pass; slices; unhealthy node hosts whole slices",
        "x3",
        _one(
            12,
            {"cpu": 250},
            TopologyRequest(required=BLOCK, slice_level=SCHED_RACK, slice_size=4),
            on_hosts(("x2", 4), ("x3", 4), ("x4", 4)),
            want=on_hosts(("x1", 4), ("x2", 4), ("x4", 4)),
        ),
    ),
    _second_pass(
        "workload with unhealthyNode; second pass; slices; unhealthy node hosts whole slice and incomplete slice",
        "x1",
        _one(
            8,
            {"cpu": 200},
            TopologyRequest(required=BLOCK, slice_level=SCHED_RACK, slice_size=2),
            on_hosts(("x1", 3), ("x2", 5)),
            want=on_hosts(("x2", 5), ("x3", 3)),
        ),
    ),
    _second_pass(
        "workload with unhealthyNode; second pass; slices; unhealthy node hosts the whole workload",
        "x1",
        _one(
            4,
            {"cpu": 250},
            TopologyRequest(required=SCHED_RACK, slice_level=HOST, slice_size=2),
            on_hosts(("x1", 4)),
            want=on_hosts(("x5", 4)),
        ),
        note="Fresh placement; x1 (unhealthy, its usage still charged in Kueue) must not be reused.",
    ),
    _second_pass(
        "workload with unhealthyNode; second pass; slices; finds correct slice domain",
        "x7",
        _one(
            8,
            {"cpu": 500},
            TopologyRequest(preferred=BLOCK, slice_level=BLOCK, slice_size=4),
            on_hosts(("x1", 2), ("x3", 2), ("x5", 2), ("x7", 2)),
            want=on_hosts(("x1", 2), ("x3", 2), ("x5", 2), ("x6", 2)),
        ),
        note="x7 is not a node of the cluster; block b2 holds the incomplete slice.",
    ),
]

CASES: list[KueueCase] = [*FIND_CASES, *MULTI_LAYER_CASES, *SCHEDULE_CASES]

_FAIL_FAST = (
    "same placement input as its FailFast-disabled twin; with TASFailedNodeReplacementFailFast on Kueue "
    "evicts the workload and asserts only the eviction (a controller action, no failure text)"
)

NOT_TRANSCRIBED: dict[str, str] = {
    "node replacement skipped for single-Pod-owned workload; gate on": (
        "depends on the workload's owner kind (a single Pod owner keeps the broken assignment under "
        "SkipReassignmentForPodOwnedWorkloads); the engine API has no owner input and that gate is not one of ours"
    ),
    "second pass replacement must not take a domain claimed by another workload in the same cycle": (
        "two workloads decided in one scheduling cycle (replacement, then a new workload)"
    ),
    "workload with unhealthyNode annotation; second pass; preferred; no fit; FailFast": _FAIL_FAST,
    "workload with unhealthyNode annotation; second pass; preferred; no fit; FailFast (not found error on patch)": (
        _FAIL_FAST + "; also an API error on the status patch"
    ),
    "workload with unhealthyNode annotation; second pass; preferred; no fit; FailFast (test error on patch)": (
        _FAIL_FAST + "; also an API error on the status patch"
    ),
    "workload with unhealthyNode annotation; second pass; preferred; no fit when using slices; FailFast": (
        "asserts only the eviction event of FailFast; Kueue does not assert a failure text"
    ),
    "use patch in evictWorkloadAfterFailedTASReplacement": (
        "TestScheduleForTASWhenWorkloadModifiedConcurrently: how the eviction is written, not a placement"
    ),
    "TestSecondPassSkipsWaitForPodsReadyBlock": "waitForPodsReady queueing of a second pass, not a placement",
}
