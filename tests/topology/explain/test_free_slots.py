"""Free slots per domain (kueue_tas/topology/explain/free_slots.py): pod shapes, hand-computed numbers on
a small tree, agreement with the free capacity and with the placement engine, and properties."""

from __future__ import annotations

import itertools
from collections.abc import Mapping

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from vocab import BLOCK, GPU, RACK

from kueue_tas.api.constants import HOSTNAME_LABEL
from kueue_tas.topology.assignment import DomainAssignment, TopologyAssignment
from kueue_tas.topology.engine.snapshot import TopologySnapshot
from kueue_tas.topology.explain.free import domain_free
from kueue_tas.topology.explain.free_slots import (
    DomainSlots,
    LevelSlots,
    PodShape,
    PodShapeError,
    free_slots,
    parse_pod_shape,
)
from kueue_tas.topology.model import NodeInfo, PodSetRequest, TopologyRequest

LEVELS = (BLOCK, RACK, HOSTNAME_LABEL)


# ---- pod shapes ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "requests"),
    [
        ("nvidia.com/gpu=8", {GPU: 8}),
        (" nvidia.com/gpu=8, cpu=16 ", {GPU: 8, "cpu": 16000}),  # cpu in millicores
        ("cpu=500m,memory=1Gi", {"cpu": 500, "memory": 2**30}),
        ("cpu=0.0001", {"cpu": 1}),  # rounded up, as Kueue's units are
        ("example.com/fpga=2", {"example.com/fpga": 2}),
    ],
)
def test_shapes_read_in_the_engines_units(text: str, requests: dict[str, int]) -> None:
    shape = parse_pod_shape(text)
    assert shape.text == text.strip()
    assert dict(shape.requests) == requests


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("gpu=x", "pod shape 'gpu=x': 'x' is not a quantity"),
        ("", "pod shape '': empty"),
        ("   ", "pod shape '': empty"),
        (GPU, "pod shape 'nvidia.com/gpu': 'nvidia.com/gpu' is not resource=quantity"),
        ("gpu=1,,cpu=1", "pod shape 'gpu=1,,cpu=1': '' is not resource=quantity"),
        ("=4", "pod shape '=4': '=4' is not resource=quantity"),
        ("gpu=1,gpu=2", "pod shape 'gpu=1,gpu=2': resource 'gpu' appears twice"),
        ("gpu=0", "pod shape 'gpu=0': gpu must be more than 0, got 0"),
        ("cpu=-1", "pod shape 'cpu=-1': cpu must be more than 0, got -1"),
        ("pods=2", "pod shape 'pods=2': 'pods' is not a request"),
        ("a b=1", "pod shape 'a b=1': 'a b' is not a resource name"),
        ("gpu=1e40", "pod shape 'gpu=1e40': 1e40 is beyond"),
    ],
)
def test_bad_shapes_are_one_line_naming_shape_and_problem(text: str, message: str) -> None:
    with pytest.raises(PodShapeError) as err:
        parse_pod_shape(text)
    assert str(err.value).startswith(message)
    assert "\n" not in str(err.value)
    assert isinstance(err.value, ValueError)


def test_shapes_are_values() -> None:
    assert parse_pod_shape("cpu=1,nvidia.com/gpu=1") == PodShape("cpu=1,nvidia.com/gpu=1", {"cpu": 1000, GPU: 1})
    assert len({parse_pod_shape("cpu=1"), parse_pod_shape("cpu=1")}) == 1


# ---- a small tree, numbers by hand -----------------------------------------------------------------


def node(name: str, block: str, rack: str, **allocatable: int) -> NodeInfo:
    amounts = {GPU if k == "gpu" else k: v for k, v in allocatable.items()}
    return NodeInfo(name, {BLOCK: block, RACK: rack, HOSTNAME_LABEL: name}, amounts)


def small_tree() -> TopologySnapshot:
    """b1: r1 (h1, h2), r2 (h3); b2: r3 (h4: 2 pods only, h5: no GPU). A daemon pod (100m, one of
    ``pods``) on every node, a 3-GPU non-TAS pod on h2, a TAS pod of 2 GPUs on h3."""
    nodes = [
        node("h1", "b1", "r1", gpu=8, cpu=32000, pods=110),
        node("h2", "b1", "r1", gpu=8, cpu=32000, pods=110),
        node("h3", "b1", "r2", gpu=4, cpu=16000, pods=110),
        node("h4", "b2", "r3", gpu=8, cpu=32000, pods=2),
        node("h5", "b2", "r3", cpu=64000, pods=110),
    ]
    snap = TopologySnapshot.build(topology_name="topo", levels=LEVELS, nodes=nodes)
    for n in nodes:
        snap.add_non_tas_usage(n.name, {"cpu": 100, "pods": 1})
    snap.add_non_tas_usage("h2", {GPU: 3, "cpu": 1000, "pods": 1})
    snap.add_tas_usage(TopologyAssignment((HOSTNAME_LABEL,), (DomainAssignment(("h3",), 1),)), {GPU: 2, "cpu": 2000})
    return snap


def table(levels: tuple[LevelSlots, ...]) -> dict[str, dict[str, tuple[int, bool]]]:
    return {lvl.level: {d.values[-1]: (d.fit, d.free) for d in lvl.domains} for lvl in levels}


def test_whole_nodes_of_eight_gpus() -> None:
    got = free_slots(small_tree(), parse_pod_shape("nvidia.com/gpu=8"))
    assert [lvl.level for lvl in got] == list(LEVELS)
    assert table(got) == {
        # h2 has 5 GPUs left, h3 2 of 4, h5 none: one slot each on h1 and h4.
        # Free: nothing took a slot (h1, h4: the daemon pod takes no GPU and h4 keeps 1 of its 2 pods).
        BLOCK: {"b1": (1, False), "b2": (1, True)},
        RACK: {"r1": (1, False), "r2": (0, False), "r3": (1, True)},
        HOSTNAME_LABEL: {"h1": (1, True), "h2": (0, False), "h3": (0, False), "h4": (1, True), "h5": (0, False)},
    }
    assert [lvl.free_domains for lvl in got] == [1, 1, 2]
    assert got[1].domains[0] == DomainSlots(("b1", "r1"), 1, False)


def test_single_gpus_and_the_pods_limit() -> None:
    got = table(free_slots(small_tree(), parse_pod_shape("nvidia.com/gpu=1")))
    # h4: 8 GPUs but 2 pods, one taken by the daemon pod: 1 slot, and so not free.
    assert got[HOSTNAME_LABEL] == {
        "h1": (8, True),
        "h2": (5, False),
        "h3": (2, False),
        "h4": (1, False),
        "h5": (0, False),
    }
    assert got[RACK] == {"r1": (13, False), "r2": (2, False), "r3": (1, False)}
    assert got[BLOCK] == {"b1": (15, False), "b2": (1, False)}


def test_shapes_of_several_resources_take_the_scarcest() -> None:
    got = table(free_slots(small_tree(), parse_pod_shape("cpu=8,nvidia.com/gpu=1")))
    # cpu left: h1 31.9, h2 30.9, h3 13.9, h4 31.9 cores; h4 has one pod left, h5 no GPU.
    assert {h: fit for h, (fit, _) in got[HOSTNAME_LABEL].items()} == {"h1": 3, "h2": 3, "h3": 1, "h4": 1, "h5": 0}
    # The daemon pods' 100m cost every GPU node its 4th slot: no domain is free for this shape.
    assert not any(free for level in got.values() for _, free in level.values())


def test_a_resource_the_flavor_does_not_track_fits_nothing_and_the_snapshot_is_untouched() -> None:
    snap = small_tree()
    columns = dict(snap.capacity.columns)
    got = free_slots(snap, parse_pod_shape("example.com/fpga=1"))
    assert all(d.fit == 0 and not d.free for lvl in got for d in lvl.domains)
    assert snap.capacity.columns == columns


def test_overcommitted_host_gives_nothing_and_takes_nothing_from_its_rack() -> None:
    snap = small_tree()
    snap.add_non_tas_usage("h1", {GPU: 12, "pods": 1})  # more than it has
    got = table(free_slots(snap, parse_pod_shape("nvidia.com/gpu=1")))
    assert got[HOSTNAME_LABEL]["h1"] == (0, False)
    assert got[RACK]["r1"] == (5, False)  # h2's 5, not 5 - 4


def test_host_fit_agrees_with_the_exported_free_capacity() -> None:
    snap = small_tree()
    free = domain_free(snap)
    shape = parse_pod_shape("cpu=4,nvidia.com/gpu=2")
    (*_, hosts) = free_slots(snap, shape)
    for d in hosts.domains:
        host = d.values[-1]
        expected = min(
            free[(HOSTNAME_LABEL, host, "pods")],
            *(free[(HOSTNAME_LABEL, host, r)] // n for r, n in shape.requests.items()),
        )
        assert d.fit == expected, host


def test_lowest_level_not_the_hostname_counts_its_nodes_as_one_host() -> None:
    """As the engine counts them: a leaf's nodes share one capacity row."""
    nodes = [
        NodeInfo("n1", {BLOCK: "b1", RACK: "r1"}, {GPU: 8, "pods": 10}),
        NodeInfo("n2", {BLOCK: "b1", RACK: "r1"}, {GPU: 8, "pods": 10}),
    ]
    snap = TopologySnapshot.build(topology_name="t", levels=(BLOCK, RACK), nodes=nodes)
    snap.add_non_tas_usage("n1", {GPU: 5, "pods": 1})
    got = free_slots(snap, parse_pod_shape("nvidia.com/gpu=8"))
    assert table(got) == {BLOCK: {"b1": (1, False)}, RACK: {"r1": (1, False)}}  # 11 GPUs left in one row


def test_an_empty_topology_has_no_domains() -> None:
    snap = TopologySnapshot.build(topology_name="t", levels=LEVELS, nodes=[])
    got = free_slots(snap, parse_pod_shape("cpu=1"))
    assert [(lvl.level, lvl.domains, lvl.free_domains) for lvl in got] == [(lvl, (), 0) for lvl in LEVELS]


# ---- properties -----------------------------------------------------------------------------------


@st.composite
def clusters(
    draw: st.DrawFn,
) -> tuple[list[NodeInfo], list[tuple[str, dict[str, int]]], list[tuple[str, int, dict[str, int]]]]:
    """Nodes of up to 2 x 3 x 3, non-TAS pods (node, requests + pods) and TAS usage (node, count, per pod)."""
    nodes: list[NodeInfo] = []
    for b in range(draw(st.integers(1, 2))):
        for r in range(draw(st.integers(1, 3))):
            for h in range(draw(st.integers(1, 3))):
                alloc = {"pods": draw(st.integers(0, 6)), "cpu": draw(st.sampled_from([0, 4000, 16000, 32000]))}
                gpus = draw(st.sampled_from([None, 0, 1, 4, 8]))
                if gpus is not None:
                    alloc[GPU] = gpus
                name = f"b{b}-r{r}-h{h}"
                nodes.append(NodeInfo(name, {BLOCK: f"b{b}", RACK: f"b{b}-r{r}", HOSTNAME_LABEL: name}, alloc))
    names = st.sampled_from([n.name for n in nodes])
    per_pod = st.fixed_dictionaries({"cpu": st.sampled_from([0, 100, 1000, 8000]), GPU: st.integers(0, 4)})
    pods = draw(st.lists(st.tuples(names, per_pod.map(lambda r: {**r, "pods": 1})), max_size=8))
    tas = draw(st.lists(st.tuples(names, st.integers(1, 3), per_pod), max_size=4))
    return nodes, pods, tas


shapes = (
    st.tuples(
        st.sampled_from(["", "nvidia.com/gpu=1", "nvidia.com/gpu=2", "nvidia.com/gpu=8"]),
        st.sampled_from(["", "cpu=1", "cpu=4", "cpu=100m"]),
        st.sampled_from(["", "", "", "example.com/fpga=1"]),
    )
    .map(lambda parts: ",".join(p for p in parts if p))
    .filter(bool)
    .map(parse_pod_shape)
)


def build(
    nodes: list[NodeInfo],
    pods: list[tuple[str, dict[str, int]]] | None = None,
    tas: list[tuple[str, int, dict[str, int]]] | None = None,
) -> TopologySnapshot:
    snap = TopologySnapshot.build(topology_name="t", levels=LEVELS, nodes=nodes)
    for name, usage in pods or ():
        snap.add_non_tas_usage(name, usage)
    for name, count, per_pod in tas or ():
        snap.add_tas_usage(TopologyAssignment((HOSTNAME_LABEL,), (DomainAssignment((name,), count),)), per_pod)
    return snap


def by_values(levels: tuple[LevelSlots, ...]) -> dict[tuple[str, ...], DomainSlots]:
    return {d.values: d for lvl in levels for d in lvl.domains}


def host_fit(alloc: Mapping[str, int], used: Mapping[str, int], shape: PodShape) -> int:
    """The oracle, in plain integers: each resource's free amount (never below zero) // request."""
    wanted = {**shape.requests, "pods": 1}
    return min(max(alloc.get(r, 0) - used.get(r, 0), 0) // n for r, n in wanted.items())


@settings(max_examples=100, deadline=None)
@given(clusters(), shapes)
def test_fits_add_up_and_match_an_independent_count(
    cluster: tuple[list[NodeInfo], list[tuple[str, dict[str, int]]], list[tuple[str, int, dict[str, int]]]],
    shape: PodShape,
) -> None:
    nodes, pods, tas = cluster
    got = free_slots(build(nodes, pods, tas), shape)
    used: dict[str, dict[str, int]] = {n.name: {} for n in nodes}
    for name, usage in pods:
        for r, v in usage.items():
            used[name][r] = used[name].get(r, 0) + v
    for name, count, per_pod in tas:
        for r, v in {**per_pod, "pods": 1}.items():
            used[name][r] = used[name].get(r, 0) + v * count
    hosts = {d.values[-1]: d.fit for d in got[-1].domains}
    assert hosts == {n.name: host_fit(n.allocatable, used[n.name], shape) for n in nodes}
    # Pods fit per host, so a domain's fit is the sum of its children's.
    for above, below in itertools.pairwise(got):
        for d in above.domains:
            assert d.fit == sum(c.fit for c in below.domains if c.values[: len(d.values)] == d.values)
        assert [d.values for d in above.domains] == sorted(d.values for d in above.domains)


@settings(max_examples=100, deadline=None)
@given(clusters(), shapes, st.data())
def test_fit_never_grows_when_usage_is_added(
    cluster: tuple[list[NodeInfo], list[tuple[str, dict[str, int]]], list[tuple[str, int, dict[str, int]]]],
    shape: PodShape,
    data: st.DataObject,
) -> None:
    nodes, pods, tas = cluster
    before = by_values(free_slots(build(nodes, pods, tas), shape))
    extra = data.draw(st.sampled_from(nodes))
    usage = data.draw(st.fixed_dictionaries({"cpu": st.integers(0, 9000), GPU: st.integers(0, 3)}))
    after = by_values(free_slots(build(nodes, [*pods, (extra.name, {**usage, "pods": 1})], tas), shape))
    assert after.keys() == before.keys()
    assert all(after[v].fit <= before[v].fit for v in before)
    # Only the domains above the new pod change, and one that lost a slot is not free.
    path = tuple(extra.labels[level] for level in LEVELS)
    for values, d in after.items():
        if path[: len(values)] != values:
            assert d == before[values]
        elif d.fit < before[values].fit:
            assert not d.free


@settings(max_examples=100, deadline=None)
@given(clusters(), shapes)
def test_a_free_domain_fits_what_it_would_empty(
    cluster: tuple[list[NodeInfo], list[tuple[str, dict[str, int]]], list[tuple[str, int, dict[str, int]]]],
    shape: PodShape,
) -> None:
    nodes, pods, tas = cluster
    now = by_values(free_slots(build(nodes, pods, tas), shape))
    empty = by_values(free_slots(build(nodes), shape))
    for values, d in now.items():
        # free <=> no host below lost a slot of the shape, and there is at least one
        assert d.free == (d.fit > 0 and d.fit == empty[values].fit), values
        assert empty[values].free == (empty[values].fit > 0)


@settings(max_examples=60, deadline=None)
@given(clusters(), shapes, st.sampled_from([BLOCK, RACK, HOSTNAME_LABEL]))
def test_the_engine_places_exactly_the_largest_domains_fit(
    cluster: tuple[list[NodeInfo], list[tuple[str, dict[str, int]]], list[tuple[str, int, dict[str, int]]]],
    shape: PodShape,
    level: str,
) -> None:
    """Required at a level: as many pods as the best domain's fit are placed, one more are not."""
    nodes, pods, tas = cluster
    got = free_slots(build(nodes, pods, tas), shape)
    best = max((d.fit for d in got[LEVELS.index(level)].domains), default=0)

    def fits(count: int) -> bool:
        request = PodSetRequest("main", count, dict(shape.requests), TopologyRequest(required=level))
        (result,) = build(nodes, pods, tas).place([request])
        return result.fits

    assert fits(best + 1) is False
    if best:
        assert fits(best) is True
