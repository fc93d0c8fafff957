"""Per-domain state of Kueue's general (leader-aware) placement, and its orderings.

Representation (shared by the general algorithm and anything built on top of it,
e.g. balanced placement):

* A domain is addressed by ``(level index, domain index)``; domain indices are the
  ``TopologyTree`` ones, i.e. name order within a level, so comparing indices is
  Kueue's final tie-break (``compareDomainLevelValues``), and the children of a
  domain are the contiguous range ``tree.levels[lvl].child_start[d]:child_end[d]``.
* ``DomainState`` holds one int64 numpy array per level for each of Kueue's
  ``domainState`` fields: ``pods`` (podCount), ``slices`` (sliceCount),
  ``pods_l`` (podCountWithLeader), ``slices_l`` (sliceCountWithLeader),
  ``leader`` (leaderCount) and ``affinity`` (affinityScore).
* Phase 1 (``fill_in_counts``) computes them bottom-up, vectorised per level.
  Phase 2 mutates entries in place exactly where Kueue mutates its domain state
  (after the mutation ``pods`` is what the domain was given, as in Kueue).
* A list of domains of one level is an ``IntArray`` of domain indices.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from kueue_tas.topology.engine.tree import IntArray, TopologyTree

_BIG = np.iinfo(np.int64).max // 4


@dataclass
class DomainState:
    pods: list[IntArray]
    slices: list[IntArray]
    pods_l: list[IntArray]
    slices_l: list[IntArray]
    leader: list[IntArray]
    affinity: list[IntArray]

    def copy(self) -> DomainState:
        """Independent state (Kueue's cloneDomains gives cloned domains their own state)."""
        return DomainState(
            [a.copy() for a in self.pods],
            [a.copy() for a in self.slices],
            [a.copy() for a in self.pods_l],
            [a.copy() for a in self.slices_l],
            [a.copy() for a in self.leader],
            [a.copy() for a in self.affinity],
        )


@dataclass(frozen=True, slots=True)
class LeafInputs:
    """Phase-1 leaf values: pods that fit, pods that fit next to a leader, whether a
    leader fits (0/1), and the preferred-affinity score (all 0 for ineligible leaves)."""

    pods: IntArray
    pods_l: IntArray
    leader: IntArray
    affinity: IntArray


def fill_in_counts(
    tree: TopologyTree,
    leaf: LeafInputs,
    slice_size: int,
    slice_level_idx: int,
    size_at_level: dict[int, int],
    leader_required: bool,
) -> DomainState:
    """Kueue's fillInCountsHelper for every level at once.

    With inner slice layers a child contributes only whole inner slices to its
    parent; a parent's with-leader capacity subtracts the smallest with-leader
    penalty among the children that can host the leader.
    """
    depth = tree.depth
    low = depth - 1
    st = DomainState(
        pods=[np.zeros(0, dtype=np.int64)] * depth,
        slices=[np.zeros(0, dtype=np.int64)] * depth,
        pods_l=[np.zeros(0, dtype=np.int64)] * depth,
        slices_l=[np.zeros(0, dtype=np.int64)] * depth,
        leader=[np.zeros(0, dtype=np.int64)] * depth,
        affinity=[np.zeros(0, dtype=np.int64)] * depth,
    )
    for lvl in range(low):
        n = len(tree.levels[lvl])
        st.pods[lvl], st.slices[lvl], st.pods_l[lvl] = (np.zeros(n, dtype=np.int64) for _ in range(3))
        st.slices_l[lvl], st.leader[lvl], st.affinity[lvl] = (np.zeros(n, dtype=np.int64) for _ in range(3))
    st.pods[low] = leaf.pods.copy()
    st.pods_l[low] = leaf.pods_l.copy()
    st.leader[low] = leaf.leader.copy()
    st.affinity[low] = leaf.affinity.copy()
    if low == slice_level_idx:
        st.slices[low] = leaf.pods // slice_size
        st.slices_l[low] = leaf.pods_l // slice_size
    else:
        st.slices[low] = np.zeros(len(leaf.pods), dtype=np.int64)
        st.slices_l[low] = np.zeros(len(leaf.pods), dtype=np.int64)
    for lvl in range(low - 1, -1, -1):
        roll_up(tree, st, lvl, 0, len(tree.levels[lvl]), slice_size, slice_level_idx, size_at_level, leader_required)
    return st


def roll_up(
    tree: TopologyTree,
    st: DomainState,
    lvl: int,
    lo: int,
    hi: int,
    slice_size: int,
    slice_level_idx: int,
    size_at_level: dict[int, int],
    leader_required: bool,
) -> None:
    """Recompute domains ``lo:hi`` of level ``lvl`` from their children (Kueue's parent step of
    fillInCountsHelper)."""
    if hi <= lo:
        return
    level = tree.levels[lvl]
    c_lo, c_hi = int(level.child_start[lo]), int(level.child_end[hi - 1])
    starts = level.child_start[lo:hi] - c_lo
    child = lvl + 1
    cp, cpl = st.pods[child][c_lo:c_hi], st.pods_l[child][c_lo:c_hi]
    cs, csl = st.slices[child][c_lo:c_hi], st.slices_l[child][c_lo:c_hi]
    inner = size_at_level.get(child)
    if inner is not None:
        cp = cp // inner * inner
        cpl = cpl // inner * inner
    pods = np.add.reduceat(cp, starts)
    slice_cap = np.add.reduceat(cs, starts)
    contrib = st.leader[child][c_lo:c_hi] > 0 if leader_required else np.ones(len(cp), dtype=np.bool_)
    has = np.logical_or.reduceat(contrib, starts)
    pod_diff = np.minimum.reduceat(np.where(contrib, cp - cpl, _BIG), starts)
    slice_diff = np.minimum.reduceat(np.where(contrib, cs - csl, _BIG), starts)
    st.pods[lvl][lo:hi] = pods
    st.pods_l[lvl][lo:hi] = np.where(has, pods - pod_diff, 0)
    st.leader[lvl][lo:hi] = np.maximum.reduceat(st.leader[child][c_lo:c_hi], starts)
    st.affinity[lvl][lo:hi] = np.add.reduceat(st.affinity[child][c_lo:c_hi], starts)
    if lvl == slice_level_idx:
        st.slices[lvl][lo:hi] = pods // slice_size
        st.slices_l[lvl][lo:hi] = st.pods_l[lvl][lo:hi] // slice_size
    else:
        st.slices[lvl][lo:hi] = slice_cap
        st.slices_l[lvl][lo:hi] = np.where(has, slice_cap - slice_diff, 0)


@dataclass(frozen=True, slots=True)
class Ordering:
    """How phase 2 orders and picks domains: LeastFreeCapacity (``lfc``) or BestFit,
    and whether preferred node affinity ranks first (TASRespectNodeAffinityPreferred)."""

    lfc: bool
    affinity: bool


def sorted_with_leader(st: DomainState, lvl: int, idx: IntArray, order: Ordering) -> IntArray:
    """Kueue's sortedDomainsWithLeader: leaders desc, [affinity desc], slices-with-leader
    (asc for LFC, desc for BestFit), pods-with-leader asc, name."""
    if idx.size <= 1:
        return idx
    s = st.slices_l[lvl][idx]
    keys: list[IntArray] = [idx, st.pods_l[lvl][idx], s if order.lfc else -s]
    if order.affinity:
        keys.append(-st.affinity[lvl][idx])
    keys.append(-st.leader[lvl][idx])
    return idx[np.lexsort(keys)]


def sorted_domains(st: DomainState, lvl: int, idx: IntArray, order: Ordering) -> IntArray:
    """Kueue's sortedDomains: [affinity desc], slices (asc for LFC, desc for BestFit), pods asc, name."""
    if idx.size <= 1:
        return idx
    s = st.slices[lvl][idx]
    keys: list[IntArray] = [idx, st.pods[lvl][idx], s if order.lfc else -s]
    if order.affinity:
        keys.append(-st.affinity[lvl][idx])
    return idx[np.lexsort(keys)]


def top_affinity_tier(st: DomainState, lvl: int, idx: IntArray, order: Ordering) -> IntArray:
    """Kueue's topAffinityTierDomains: the leading run sharing the first domain's score."""
    if not order.affinity or idx.size == 0:
        return idx
    scores = st.affinity[lvl][idx]
    differ = np.flatnonzero(scores != scores[0])
    return idx[: int(differ[0])] if differ.size else idx


def best_fit(
    st: DomainState, lvl: int, idx: IntArray, needed: int, counts: IntArray, leader_count: int, order: Ordering
) -> int:
    """Kueue's findBestFitDomainBy: the first domain of the top affinity tier with the smallest
    count >= needed that can host ``leader_count`` leaders; the first candidate when none does."""
    cands = top_affinity_tier(st, lvl, idx, order)
    c = counts[cands]
    ok = (st.leader[lvl][cands] >= leader_count) & (c >= needed)
    if not ok.any():
        return int(cands[0])
    return int(cands[int(np.where(ok, c, _BIG).argmin())])


def children(tree: TopologyTree, lvl: int, d: int) -> IntArray:
    level = tree.levels[lvl]
    return np.arange(level.child_start[d], level.child_end[d], dtype=np.int64)


def descendant_range(tree: TopologyTree, lvl: int, d: int, target: int) -> tuple[int, int]:
    """Index range of the descendants of domain ``d`` (at ``lvl``) on level ``target``."""
    lo, hi = d, d + 1
    for cur in range(lvl, target):
        level = tree.levels[cur]
        lo, hi = int(level.child_start[lo]), int(level.child_end[hi - 1])
    return lo, hi
