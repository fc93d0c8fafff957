"""The engine's why-not (``topology.engine.why_not``): the numbers behind Kueue's "does not fit" text.

What must hold: every "does not fit" failure carries a ``WhyNot`` whose ``message()`` is the
failure's text word for word (same fit, needed, exclusions); its best domain is the domain of
the level holding the most pods (name order on ties), and what it holds, counted here by hand
from the hosts' free capacity, agrees; for required, the text's figure is that domain's; for
preferred and unconstrained, the whole level's. Both algorithms (the numpy fast path and
Kueue's general one) give the same numbers.
"""

from __future__ import annotations

from collections import defaultdict

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from vocab import GPU

from kueue_tas.topology.engine.find_assignment import PlaceOptions, find_topology_assignment
from kueue_tas.topology.engine.placement import PlacementFailure
from kueue_tas.topology.engine.snapshot import TopologySnapshot
from kueue_tas.topology.engine.why_not import Exclusions, WhyNot
from kueue_tas.topology.features import FeatureGates
from kueue_tas.topology.messages import ExclusionStats
from kueue_tas.topology.model import HOSTNAME_LABEL, NodeInfo, PodSetRequest, Taint, TopologyRequest

BLOCK, RACK, HOST = "block", "rack", HOSTNAME_LABEL
LEVELS = (BLOCK, RACK, HOST)
Path = tuple[str, str, str]


def snapshot(hosts: dict[Path, tuple[int, bool]]) -> TopologySnapshot:
    """Host path -> (free GPUs, tainted NoSchedule)."""
    nodes = [
        NodeInfo(
            p[2],
            dict(zip(LEVELS, p, strict=True)),
            {GPU: gpus, "cpu": 64_000, "pods": 110},
            (Taint("maint", "", "NoSchedule"),) if tainted else (),
        )
        for p, (gpus, tainted) in hosts.items()
    ]
    return TopologySnapshot.build(topology_name="t", levels=LEVELS, nodes=nodes)


def fail(
    snap: TopologySnapshot, topo: TopologyRequest, count: int, gpus: int, general: bool = False
) -> PlacementFailure:
    request = PodSetRequest("w", count, {GPU: gpus}, topology=topo)
    with pytest.raises(PlacementFailure) as caught:
        find_topology_assignment(snap, request, None, None, PlaceOptions(FeatureGates()), general_only=general)
    return caught.value


HOSTS: dict[Path, tuple[int, bool]] = {
    ("b1", "b1-r1", "h1"): (4, False),
    ("b1", "b1-r1", "h2"): (2, False),
    ("b1", "b1-r2", "h3"): (8, True),  # tainted: excluded, its GPUs do not count
    ("b1", "b1-r2", "h4"): (6, False),
    ("b2", "b2-r3", "h5"): (0, False),  # no GPU free: excluded for the resource
    ("b2", "b2-r3", "h6"): (6, False),
}


def test_required_names_the_best_domain_and_its_count_as_the_text_does() -> None:
    failure = fail(snapshot(HOSTS), TopologyRequest(required=RACK), 8, 1)
    w = failure.why_not
    assert w is not None
    assert str(failure) == w.message()
    assert str(failure) == (
        'topology "t" allows to fit only 6 out of 8 pod(s). Total nodes: 6; excluded: '
        'resource "nvidia.com/gpu": 1, taint "maint:NoSchedule": 1'
    )
    # b1-r1 holds 6 and b1-r2 (h4 only) holds 6 too, and so does b2-r3: the first in name order.
    assert (w.level, w.domain, w.domain_fit, w.fit, w.needed, w.one_domain) == (RACK, ("b1", "b1-r1"), 6, 6, 8, True)
    assert w.exclusions == Exclusions(6, ((GPU, 1),), (("maint:NoSchedule", 1),))
    assert w.exclusions.excluded == 2
    assert w.exclusions.reasons() == (("resource nvidia.com/gpu", 1), ("taint maint:NoSchedule", 1))
    assert w.unit == "pod"


def test_preferred_counts_the_whole_level_and_names_its_best_domain() -> None:
    failure = fail(snapshot(HOSTS), TopologyRequest(preferred=RACK), 20, 1)
    w = failure.why_not
    assert w is not None and str(failure) == w.message()
    # Preferred climbs to the top level: 12 in b1 + 6 in b2 = 18 of 20 over every block.
    assert (w.level, w.domain, w.domain_fit, w.fit, w.one_domain) == (BLOCK, ("b1",), 12, 18, False)


def test_slices_count_slices() -> None:
    failure = fail(snapshot(HOSTS), TopologyRequest(required=BLOCK, slice_level=HOST, slice_size=2), 24, 1)
    w = failure.why_not
    assert w is not None and str(failure) == w.message()
    # Slices of 2 pods per host: b1 holds 2 + 1 + 3 = 6 slices, b2 3.
    assert (w.unit, w.slice_size, w.domain, w.domain_fit, w.fit, w.needed) == ("slice", 2, ("b1",), 6, 6, 12)


def test_a_failure_that_is_not_about_room_has_no_numbers() -> None:
    failure = fail(snapshot(HOSTS), TopologyRequest(required="zone"), 2, 1)
    assert failure.why_not is None
    assert "no requested topology level" in str(failure)


def test_exclusions_go_back_to_the_engines_stats() -> None:
    stats = ExclusionStats(5, 1, 2, 3, {"a:NoSchedule": 4}, {"cpu": 5})
    assert Exclusions.of(stats).stats() == stats


@st.composite
def clusters(draw: st.DrawFn) -> dict[Path, tuple[int, bool]]:
    out: dict[Path, tuple[int, bool]] = {}
    for b in range(draw(st.integers(1, 3))):
        for r in range(draw(st.integers(1, 3))):
            for h in range(draw(st.integers(1, 3))):
                out[(f"b{b}", f"b{b}-r{r}", f"b{b}-r{r}-h{h}")] = (draw(st.integers(0, 8)), draw(st.booleans()))
    return out


def by_hand(
    hosts: dict[Path, tuple[int, bool]], level: int, per_pod: int, slice_size: int
) -> dict[tuple[str, ...], int]:
    """Slices fitting in each domain of ``level``, from the hosts' free GPUs: tainted hosts hold
    none, and slices are cut per host (the slice level here is the host)."""
    out: dict[tuple[str, ...], int] = defaultdict(int)
    for path, (gpus, tainted) in hosts.items():
        out[path[: level + 1]] += (0 if tainted else gpus // per_pod) // slice_size
    return out


MODES = st.sampled_from(["required", "preferred", "unconstrained"])


@settings(max_examples=150, deadline=None)
@given(
    clusters(),
    MODES,
    st.sampled_from(LEVELS),
    st.integers(1, 40),
    st.integers(1, 3),
    st.sampled_from([1, 2]),
    st.booleans(),
)
def test_numbers_agree_with_the_text_and_with_a_count_by_hand(
    hosts: dict[Path, tuple[int, bool]], mode: str, level: str, count: int, gpus: int, size: int, general: bool
) -> None:
    count = count * size
    slices = {"slice_level": HOST, "slice_size": size} if size > 1 else {}
    topo = {
        "required": TopologyRequest(required=level, **slices),
        "preferred": TopologyRequest(preferred=level, **slices),
        "unconstrained": TopologyRequest(unconstrained=True, **slices),
    }[mode]
    snap = snapshot(hosts)
    request = PodSetRequest("w", count, {GPU: gpus}, topology=topo)
    try:
        find_topology_assignment(snap, request, None, None, PlaceOptions(FeatureGates()), general_only=general)
    except PlacementFailure as failure:
        w: WhyNot | None = failure.why_not
        text = str(failure)
    else:
        return
    assert (w is None) == (not text.startswith('topology "t"')), text
    if w is None:
        return
    assert w.message() == text
    assert w.needed == count // size and w.slice_size == size
    assert w.exclusions.total_nodes == len(hosts)
    assert dict(w.exclusions.taints) == ({"maint:NoSchedule": n} if (n := sum(t for _, t in hosts.values())) else {})
    depth = LEVELS.index(w.level)
    counted = by_hand(hosts, depth, gpus, size)
    best = max(counted.values())
    assert w.domain_fit == best == counted[w.domain]
    assert w.domain == min(d for d, n in counted.items() if n == best)  # name order on ties
    if w.one_domain:
        assert mode == "required" and w.fit == w.domain_fit and w.level == level
    else:
        assert w.fit == sum(counted.values())
