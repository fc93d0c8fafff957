"""Properties of the general placement path: PodSet groups and multi-layer slices.

Also: Kueue's core cases give the same results through the general algorithm as
through the fast path. On random three-level clusters (block > rack > host), whenever a
placement succeeds:
counts sum to the request; every slice of every layer lies whole within one domain
of its level; a group's leader and workers share one domain of the required level;
and leader plus workers never exceed a node's capacity. Failures carry the same
text for every member of the group.
"""

from __future__ import annotations

import functools
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kueue_tas.topology.assignment import TopologyAssignment
from kueue_tas.topology.engine import snapshot as snapshot_module
from kueue_tas.topology.engine.results import PodSetResult
from kueue_tas.topology.engine.snapshot import TopologySnapshot
from kueue_tas.topology.features import FeatureGates
from kueue_tas.topology.model import HOSTNAME_LABEL, NodeInfo, PodSetRequest, SliceLayer, TopologyRequest

try:  # tests/ is not a package: pytest puts tests/ itself on sys.path
    from kueue_cases.find_topology_assignments import CASES as FIND_CASES
    from kueue_cases.model import KueueCase
    from kueue_cases.run import run_case
    from kueue_cases.schedule_for_tas import SCHEDULE_CASES
    from kueue_cases.simulate_empty import SIMULATE_EMPTY_CASES
except ImportError:  # pragma: no cover
    from tests.kueue_cases.find_topology_assignments import CASES as FIND_CASES
    from tests.kueue_cases.model import KueueCase
    from tests.kueue_cases.run import run_case
    from tests.kueue_cases.schedule_for_tas import SCHEDULE_CASES
    from tests.kueue_cases.simulate_empty import SIMULATE_EMPTY_CASES

BLOCK, RACK = "block", "rack"
LEVELS = (BLOCK, RACK, HOSTNAME_LABEL)


@st.composite
def clusters(draw: st.DrawFn) -> list[NodeInfo]:
    nodes = []
    for b in range(draw(st.integers(1, 3))):
        for r in range(draw(st.integers(1, 3))):
            for h in range(draw(st.integers(1, 4))):
                name = f"b{b}-r{r}-h{h}"
                cpu = draw(st.integers(0, 8)) * 1000
                labels = {BLOCK: f"b{b}", RACK: f"b{b}-r{r}", HOSTNAME_LABEL: name}
                nodes.append(NodeInfo(name, labels, {"cpu": cpu, "pods": 20}))
    return nodes


@st.composite
def layered_requests(draw: st.DrawFn) -> tuple[TopologyRequest, int]:
    """A required/preferred block request with 1-3 slice layers (sizes dividing each other)."""
    host_size = draw(st.integers(1, 3))
    rack_size = host_size * draw(st.integers(1, 3))
    candidates = [
        (SliceLayer(RACK, rack_size), SliceLayer(HOSTNAME_LABEL, host_size)),
        (SliceLayer(BLOCK, rack_size * 2), SliceLayer(RACK, rack_size), SliceLayer(HOSTNAME_LABEL, host_size)),
        (SliceLayer(RACK, rack_size),),
    ]
    layers = draw(st.sampled_from(candidates))
    count = layers[0].size * draw(st.integers(1, 4))
    mode = draw(st.sampled_from(["required", "preferred"]))
    topo = TopologyRequest(required=BLOCK, slice_layers=layers) if mode == "required" else None
    topo = topo or TopologyRequest(preferred=BLOCK, slice_layers=layers)
    return topo, count


def _domain_of(snap: TopologySnapshot, host: str, level: int) -> tuple[str, ...]:
    leaf = snap.tree.leaf_index_of((host,))
    assert leaf is not None
    return snap.tree.leaves.values[leaf][: level + 1]


def _per_domain(snap: TopologySnapshot, a: TopologyAssignment, level: int) -> Counter[tuple[str, ...]]:
    out: Counter[tuple[str, ...]] = Counter()
    for d in a.domains:
        out[_domain_of(snap, d.values[-1], level)] += d.count
    return out


@settings(max_examples=150, deadline=None)
@given(nodes=clusters(), req=layered_requests())
def test_every_slice_of_every_layer_lies_in_one_domain(nodes: list[NodeInfo], req: tuple[TopologyRequest, int]) -> None:
    topo, count = req
    snap = TopologySnapshot.build(topology_name="t", levels=LEVELS, nodes=nodes)
    [res] = snap.place([PodSetRequest("w", count, {"cpu": 1000}, topology=topo)])
    if res.assignment is None:
        assert res.message
        return
    assert res.assignment.total == count
    for layer in topo.slice_layers:
        level = LEVELS.index(layer.level)
        for dom, pods in _per_domain(snap, res.assignment, level).items():
            assert pods % layer.size == 0, (layer, dom, pods)
    if topo.required:
        assert len(_per_domain(snap, res.assignment, 0)) == 1


@settings(max_examples=150, deadline=None)
@given(
    nodes=clusters(),
    workers=st.integers(1, 12),
    worker_cpu=st.integers(1, 3),
    leader_cpu=st.integers(1, 4),
    level=st.sampled_from([BLOCK, RACK]),
    leader_first=st.booleans(),
    host_slices=st.booleans(),
)
def test_group_members_share_the_required_domain(
    nodes: list[NodeInfo],
    workers: int,
    worker_cpu: int,
    leader_cpu: int,
    level: str,
    leader_first: bool,
    host_slices: bool,
) -> None:
    slice_kw = {"slice_level": HOSTNAME_LABEL, "slice_size": 1} if host_slices else {}
    topo = TopologyRequest(required=level, group="g", **slice_kw)  # type: ignore[arg-type]
    lead = PodSetRequest("leader", 1, {"cpu": leader_cpu * 1000}, topology=topo)
    work = PodSetRequest("workers", workers, {"cpu": worker_cpu * 1000}, topology=topo)
    snap = TopologySnapshot.build(topology_name="t", levels=LEVELS, nodes=nodes)
    results = snap.place([lead, work] if leader_first else [work, lead], gates=FeatureGates())
    by = {r.name: r for r in results}
    assert set(by) == {"leader", "workers"}
    if by["workers"].assignment is None:
        assert by["leader"].assignment is None
        assert by["leader"].message == by["workers"].message != ""
        return
    la, wa = by["leader"].assignment, by["workers"].assignment
    assert la is not None and wa is not None
    assert la.total == 1 and wa.total == workers
    lvl = LEVELS.index(level)
    assert len(set(_per_domain(snap, la, lvl)) | set(_per_domain(snap, wa, lvl))) == 1
    cpu = {n.labels[HOSTNAME_LABEL]: n.allocatable["cpu"] for n in nodes}
    used: Counter[str] = Counter()
    for d in la.domains:
        used[d.values[-1]] += d.count * leader_cpu * 1000
    for d in wa.domains:
        used[d.values[-1]] += d.count * worker_cpu * 1000
    assert all(used[h] <= cpu[h] for h in used), "leader and workers overbook a node"


def test_gate_off_keeps_only_the_first_slice_layer() -> None:
    """With TASMultiLayerTopology off the inner layers are ignored (Kueue's parser never
    reads them): 4 hosts of 1 pod each hold a rack slice of 4, but no host slice of 2."""
    nodes = [
        NodeInfo(f"h{i}", {BLOCK: "b", RACK: "r", HOSTNAME_LABEL: f"h{i}"}, {"cpu": 1000, "pods": 10}) for i in range(4)
    ]
    topo = TopologyRequest(required=BLOCK, slice_layers=(SliceLayer(RACK, 4), SliceLayer(HOSTNAME_LABEL, 2)))
    request = [PodSetRequest("w", 4, {"cpu": 1000}, topology=topo)]
    snap = TopologySnapshot.build(topology_name="t", levels=LEVELS, nodes=nodes)
    [on] = snap.place(request)
    assert on.assignment is None
    assert on.message == (
        'topology "t" doesn\'t allow to fit; 0/1 slice(s) fit on level rack; 0/2 slice(s) fit on level '
        "kubernetes.io/hostname"
    )
    [off] = snap.place(request, gates=FeatureGates({"TASMultiLayerTopology": False}))
    assert off.assignment is not None and off.assignment.total == 4


def _core_cases() -> list[KueueCase]:
    return [*FIND_CASES, *SCHEDULE_CASES, *SIMULATE_EMPTY_CASES]


@pytest.mark.parametrize("case", _core_cases(), ids=lambda c: c.name)
def test_general_path_agrees_with_the_fast_path(case: KueueCase, monkeypatch: pytest.MonkeyPatch) -> None:
    """Kueue's core cases (no groups, no layers, default gates) placed by the general
    algorithm give exactly the fast path's results, failure texts included."""
    fast = _run_core(case)
    general = functools.partial(snapshot_module.find_topology_assignment, general_only=True)
    monkeypatch.setattr(snapshot_module, "find_topology_assignment", general)
    assert _run_core(case) == fast


def _run_core(case: KueueCase) -> list[PodSetResult]:
    return run_case(case)
