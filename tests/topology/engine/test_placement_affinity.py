"""Preferred node affinity (TASRespectNodeAffinityPreferred) in the engine.

Kueue's own cases for it run in ``tests/kueue_cases/test_placement_advanced.py``; these check the
vectorised term matching against the per-node matcher, and the gate.
"""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from kueue_tas.topology.engine.affinity import preferred_scores, term_mask
from kueue_tas.topology.engine.filters import term_matches
from kueue_tas.topology.engine.snapshot import TopologySnapshot
from kueue_tas.topology.engine.tree import TopologyTree
from kueue_tas.topology.features import FeatureGates
from kueue_tas.topology.model import (
    HOSTNAME_LABEL,
    NodeInfo,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    PodSetRequest,
    PreferredSchedulingTerm,
    TopologyRequest,
)

KEYS = ("zone", "gen", "tier")
VALUES = ("a", "b", "1", "7", "x9")


@st.composite
def trees(draw: st.DrawFn) -> TopologyTree:
    nodes = []
    for i in range(draw(st.integers(1, 12))):
        labels = {HOSTNAME_LABEL: f"n{i}"}
        for key in KEYS:
            if draw(st.booleans()):
                labels[key] = draw(st.sampled_from(VALUES))
        nodes.append(NodeInfo(f"n{i}", labels, {"cpu": 1000}))
    return TopologyTree.build((HOSTNAME_LABEL,), nodes)


requirements = st.one_of(
    st.builds(
        NodeSelectorRequirement,
        st.sampled_from(KEYS),
        st.sampled_from(["In", "NotIn"]),
        st.lists(st.sampled_from(VALUES), min_size=1, max_size=3).map(tuple),
    ),
    st.builds(NodeSelectorRequirement, st.sampled_from(KEYS), st.sampled_from(["Exists", "DoesNotExist"])),
    st.builds(
        NodeSelectorRequirement,
        st.sampled_from(KEYS),
        st.sampled_from(["Gt", "Lt"]),
        st.sampled_from(["0", "5"]).map(lambda v: (v,)),
    ),
)


@settings(max_examples=200, deadline=None)
@given(tree=trees(), reqs=st.lists(requirements, min_size=1, max_size=3))
def test_vectorised_term_matching_agrees_with_the_node_matcher(
    tree: TopologyTree, reqs: list[NodeSelectorRequirement]
) -> None:
    term = NodeSelectorTerm(tuple(reqs))
    want = [term_matches(term, nodes[0]) for nodes in tree.leaf_nodes]
    assert term_mask(tree, term).tolist() == want


def test_scores_sum_matching_weights_on_eligible_leaves_only() -> None:
    nodes = [
        NodeInfo("n0", {HOSTNAME_LABEL: "n0", "zone": "a", "gen": "7"}, {"cpu": 1000}),
        NodeInfo("n1", {HOSTNAME_LABEL: "n1", "zone": "a"}, {"cpu": 1000}),
        NodeInfo("n2", {HOSTNAME_LABEL: "n2", "zone": "b", "gen": "7"}, {"cpu": 1000}),
    ]
    tree = TopologyTree.build((HOSTNAME_LABEL,), nodes)
    terms = (
        PreferredSchedulingTerm(10, NodeSelectorTerm((NodeSelectorRequirement("zone", "In", ("a",)),))),
        PreferredSchedulingTerm(3, NodeSelectorTerm((NodeSelectorRequirement("gen", "Gt", ("5",)),))),
        PreferredSchedulingTerm(0, NodeSelectorTerm((NodeSelectorRequirement("zone", "Exists"),))),
    )
    eligible = np.array([True, True, False])
    assert preferred_scores(tree, terms, eligible).tolist() == [13, 10, 0]


def test_preferred_affinity_only_counts_with_the_gate() -> None:
    # Two racks; BestFit picks the tighter one (r1), the preferred zone is the other (r2).
    nodes = [
        NodeInfo("h1", {"rack": "r1", HOSTNAME_LABEL: "h1", "zone": "a"}, {"cpu": 2000, "pods": 10}),
        NodeInfo("h2", {"rack": "r2", HOSTNAME_LABEL: "h2", "zone": "b"}, {"cpu": 4000, "pods": 10}),
    ]
    prefer_b = (PreferredSchedulingTerm(5, NodeSelectorTerm((NodeSelectorRequirement("zone", "In", ("b",)),))),)
    ps = PodSetRequest("main", 2, {"cpu": 1000}, topology=TopologyRequest(required="rack"), preferred_affinity=prefer_b)
    snap = TopologySnapshot.build(topology_name="t", levels=("rack", HOSTNAME_LABEL), nodes=nodes)
    [off] = snap.place([ps])
    [on] = snap.place([ps], gates=FeatureGates({"TASRespectNodeAffinityPreferred": True}))
    assert off.assignment is not None and [d.values for d in off.assignment.domains] == [("h1",)]
    assert on.assignment is not None and [d.values for d in on.assignment.domains] == [("h2",)]
