"""Free capacity of every domain of a snapshot, per resource: what `/metrics` exports.

Free of a leaf = allocatable minus non-TAS usage minus TAS usage (admitted and assumed
assignments), never below zero; free of a domain = the sum over its leaves. Amounts are in
the model's units (cpu in millicores, memory in bytes, ``pods`` a count).
"""

from __future__ import annotations

import numpy as np

from kueue_tas.topology.engine.capacity_matrix import Matrix, saturating_add_at
from kueue_tas.topology.engine.snapshot import TopologySnapshot
from kueue_tas.topology.engine.tree import TopologyTree, domain_id

# (level key, domain, resource) -> free amount
DomainFree = dict[tuple[str, str, str], int]


def domain_label(tree: TopologyTree, level: int, values: tuple[str, ...]) -> str:
    """How a domain is named: the hostname for a hostname leaf, else its level values joined
    with ',' (the whole path, so that rack names repeated across blocks stay apart)."""
    if level == tree.depth - 1 and tree.lowest_is_hostname:
        return values[-1]
    return domain_id(values)


def leaf_free(snap: TopologySnapshot) -> Matrix:
    """(leaves x resource columns) free capacity. An overcommitted leaf (usage above allocatable,
    e.g. a node that shrank) has nothing to give, but must not take from its siblings' free
    capacity in the sums above it; a sealed leaf (``CapacityMatrix.seal``) has nothing to give."""
    return snap.capacity.left()


def level_sums(tree: TopologyTree, per_leaf: Matrix) -> list[Matrix]:
    """Per level (top first): each domain's sum of the per-leaf rows below it."""
    if tree.depth == 0:
        return []
    per_level: list[Matrix] = [per_leaf] * tree.depth
    for lvl in range(tree.depth - 2, -1, -1):
        below = per_level[lvl + 1]
        sums = np.zeros((len(tree.levels[lvl]), below.shape[1]), dtype=np.int64)
        saturating_add_at(sums, tree.levels[lvl + 1].parent, below)
        per_level[lvl] = sums
    return per_level


def level_free(snap: TopologySnapshot) -> list[Matrix]:
    """Per level (top first): a (domains x resource columns) matrix of free capacity."""
    return level_sums(snap.tree, leaf_free(snap))


def domain_free(snap: TopologySnapshot) -> DomainFree:
    """Free capacity of every domain of every level, for every resource the snapshot knows."""
    tree = snap.tree
    columns = sorted(snap.capacity.columns.items(), key=lambda item: item[1])
    out: DomainFree = {}
    for lvl, matrix in enumerate(level_free(snap)):
        level = tree.levels[lvl]
        names = [domain_label(tree, lvl, values) for values in level.values]
        for resource, col in columns:
            amounts = matrix[:, col].tolist() if col < matrix.shape[1] else [0] * len(names)
            out.update(zip([(level.key, name, resource) for name in names], amounts, strict=True))
    return out
