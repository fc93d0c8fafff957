"""Closing domains for a placement (``place_workload(closed=...)``: reservations, drain windows) on
large trees: a domain's leaves read as one contiguous range of the tree (``leaf_range``) and sealed
at once (``seal_many``), the same as looking every leaf up and sealing them one by one."""

from __future__ import annotations

import random

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from vocab import BLOCK, GPU, HOST, RACK

from kueue_tas.topology.engine import TopologySnapshot
from kueue_tas.topology.model import NodeInfo

LEVELS = (BLOCK, RACK, HOST)


def snapshot(seed: int) -> TopologySnapshot:
    """Blocks and racks of uneven sizes, named so that name order is not creation order."""
    rng = random.Random(seed)
    nodes = []
    for b in range(rng.randint(1, 4)):
        for r in range(rng.randint(1, 5)):
            for h in range(rng.randint(1, 4)):
                name = f"n{rng.randrange(10**6)}-{b}-{r}-{h}"
                labels = {BLOCK: f"b{9 - b}", RACK: f"r{rng.randrange(3)}{r}", HOST: name}
                nodes.append(NodeInfo(name, labels, {GPU: rng.randint(1, 8), "pods": 10}))
    return TopologySnapshot.build(topology_name="t", levels=LEVELS, nodes=nodes)


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 10**6))
def test_a_domains_leaf_range_is_every_leaf_under_it(seed: int) -> None:
    tree = snapshot(seed).tree
    for depth, level in enumerate(tree.levels):
        for values in level.values:
            under = [i for i, leaf in enumerate(tree.leaves.values) if leaf[: depth + 1] == values]
            assert list(tree.leaf_range(depth, values)) == under
    assert tree.leaf_range(1, ("no-such-block", "r00")) == range(0)


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 10**6), st.data())
def test_sealing_many_leaves_is_sealing_each(seed: int, data: st.DataObject) -> None:
    snap = snapshot(seed)
    n = len(snap.tree.leaves)
    already = data.draw(st.sets(st.integers(0, n - 1)))
    leaves = data.draw(st.lists(st.integers(0, n - 1)))
    one, many = snap.copy(), snap.copy()
    for leaf in already:
        one.capacity.seal(leaf)
        many.capacity.seal(leaf)
    for leaf in sorted(set(leaves)):
        one.capacity.seal(leaf)
    many.capacity.seal_many(leaves)
    assert np.array_equal(one.capacity.left(), many.capacity.left())
    for leaf in range(n):
        assert one.capacity.sealed(leaf) == many.capacity.sealed(leaf)
        # One lift each undoes what the bulk seal added: the counts are the same too.
        if leaf in set(leaves):
            one.capacity.seal(leaf, -1)
            many.capacity.seal(leaf, -1)
    assert np.array_equal(one.capacity.left(), many.capacity.left())
