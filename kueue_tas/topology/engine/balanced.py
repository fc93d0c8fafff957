"""Balanced placement (gate TASBalancedPlacement), a port of Kueue's tas_balanced_placement.go.

For preferred requests only. Each group of sibling domains at the requested level
(the children of one domain above it; all top-level domains when the requested
level is the top) is a candidate. For each, a greedy fill gives how many domains
the request needs, and from it a balance threshold: the most slices every used
domain can hold. Domains below the threshold are pruned (in a copy of the state,
Kueue's cloned domains), the best candidate (highest threshold, then fewest
requested-level domains) is kept, and an exact search picks the domain set with
the fewest domains and least spare capacity; every chosen domain then gets the
threshold plus a share of the rest. When no candidate reaches a threshold above 0,
or the chosen set cannot take everything, placement falls back to BestFit.

Kueue's clones are modelled by copying the whole ``DomainState``: the candidate's
copy replaces the run's state once it is chosen, so the descent continues on it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from kueue_tas.topology.engine.domain_state import (
    DomainState,
    Ordering,
    children,
    roll_up,
    sorted_domains,
    sorted_with_leader,
)
from kueue_tas.topology.engine.placement import children_of
from kueue_tas.topology.engine.tree import IntArray, TopologyTree

Domains = list[int]
Chain = tuple[int, "Chain"] | None  # a domain set as a linked list, last domain first


@dataclass(frozen=True, slots=True)
class BalancedParams:
    count: int
    leader_count: int
    level_idx: int
    slice_level_idx: int
    slice_size: int
    order: Ordering  # BestFit with the request's affinity setting


@dataclass(frozen=True, slots=True)
class Greedy:
    fits: bool
    used: int = 0
    last_with_leader: int | None = None
    last: int | None = None


def evaluate_greedy(
    st: DomainState, lvl: int, doms: IntArray, slice_count: int, leader_count: int, order: Ordering
) -> Greedy:
    """Kueue's evaluateGreedyAssignment: does the request fit these domains greedily, with how many."""
    used, rem, rem_lead = 0, slice_count, leader_count
    last_l: int | None = None
    last: int | None = None
    if leader_count > 0:
        srt = sorted_with_leader(st, lvl, doms, order)
        idx = 0
        while rem_lead > 0 and idx < srt.size and st.leader[lvl][srt[idx]] > 0:
            d = int(srt[idx])
            used += 1
            last_l = d
            rem_lead -= int(st.leader[lvl][d])
            rem -= int(st.slices_l[lvl][d])
            idx += 1
        workers = sorted_domains(st, lvl, srt[idx:], order)
    else:
        workers = sorted_domains(st, lvl, doms, order)
    if rem_lead > 0:
        return Greedy(False)
    slices = st.slices[lvl]
    for d in workers.tolist():
        if rem <= 0 or slices[d] <= 0:
            break
        used += 1
        last = d
        rem -= int(slices[d])
    if rem > 0:
        return Greedy(False)
    return Greedy(True, used, last_l, last)


def threshold_of(st: DomainState, lvl: int, slice_count: int, g: Greedy) -> int:
    """Kueue's balanceThresholdValue."""
    threshold = slice_count // g.used
    if g.last_with_leader is not None:
        threshold = min(threshold, int(st.slices_l[lvl][g.last_with_leader]))
    if g.last is not None:
        threshold = min(threshold, int(st.slices[lvl][g.last]))
    return threshold


def _prune_range(tree: TopologyTree, st: DomainState, lvl: int, lo: int, hi: int, threshold: int, lead: bool) -> None:
    """Kueue's pruneDomainNodeBelowThreshold for domains ``lo:hi`` of ``lvl``: a domain with fewer
    slices than the threshold loses its whole subtree's state (all but the affinity score); a
    leader domain that cannot keep the threshold next to its leader loses its leader capacity."""
    full = st.slices[lvl][lo:hi] < threshold
    leader_only = ~full & (st.leader[lvl][lo:hi] > 0) & (st.slices_l[lvl][lo:hi] < threshold) if lead else None
    for target in range(lvl, tree.depth):
        if target > lvl:
            level = tree.levels[target - 1]
            counts = level.child_end[lo:hi] - level.child_start[lo:hi]
            lo, hi = int(level.child_start[lo]), int(level.child_end[hi - 1])
            full = np.repeat(full, counts)
            leader_only = np.repeat(leader_only, counts) if leader_only is not None else None
        for arrays in (st.pods, st.slices, st.pods_l, st.slices_l, st.leader):
            arrays[target][lo:hi][full] = 0
        if leader_only is not None:
            for arrays in (st.pods_l, st.slices_l, st.leader):
                arrays[target][lo:hi][leader_only] = 0


def _refill(tree: TopologyTree, st: DomainState, lvl: int, lo: int, hi: int, p: BalancedParams) -> None:
    """Kueue's fillInCountsHelper on the subtrees of domains ``lo:hi`` (no inner slice layers,
    as Kueue calls it here)."""
    low = tree.depth - 1
    ranges = [(lo, hi)]
    for target in range(lvl, low):
        level = tree.levels[target]
        ranges.append((int(level.child_start[ranges[-1][0]]), int(level.child_end[ranges[-1][1] - 1])))
    if p.slice_level_idx == low:
        leaf_lo, leaf_hi = ranges[-1]
        st.slices[low][leaf_lo:leaf_hi] = st.pods[low][leaf_lo:leaf_hi] // p.slice_size
        st.slices_l[low][leaf_lo:leaf_hi] = st.pods_l[low][leaf_lo:leaf_hi] // p.slice_size
    for target in range(low - 1, lvl - 1, -1):
        r_lo, r_hi = ranges[target - lvl]
        roll_up(tree, st, target, r_lo, r_hi, p.slice_size, p.slice_level_idx, {}, p.leader_count > 0)


def prune_below(
    tree: TopologyTree, st: DomainState, lvl: int, doms: Domains, threshold: int, p: BalancedParams
) -> None:
    """Kueue's pruneDomainsBelowThreshold, for sibling domains (a contiguous index range)."""
    if not doms:
        return
    lo, hi = doms[0], doms[-1] + 1
    assert hi - lo == len(doms), "balanced candidates are the children of one domain"
    lead = p.leader_count > 0
    if lvl + 1 < tree.depth:
        level = tree.levels[lvl]
        _prune_range(tree, st, lvl + 1, int(level.child_start[lo]), int(level.child_end[hi - 1]), threshold, lead)
    _refill(tree, st, lvl, lo, hi, p)
    _prune_range(tree, st, lvl, lo, hi, threshold, lead)


def _entropy(st: DomainState, lvl: int, kids: IntArray) -> float:
    if kids.size == 0:
        return 0.0
    pods = st.pods[lvl][kids]
    total = int(pods.sum())
    if total == 0:
        return 0.0
    entropy = 0.0
    for c in pods.tolist():
        if c > 0:
            share = c / total
            entropy += -share * math.log2(share)
    return entropy


def select_optimal(
    tree: TopologyTree, st: DomainState, lvl: int, doms: Domains, p: BalancedParams, slice_count: int, entropy: bool
) -> Domains | None:
    """Kueue's selectOptimalDomainSetToFit: among the sets of as many domains as the greedy fill
    uses, the first found that fits leaders and pods with the least capacity to spare."""
    g = evaluate_greedy(st, lvl, np.array(doms, dtype=np.int64), slice_count, p.leader_count, p.order)
    if not g.fits:
        return None
    if entropy:
        ent = {d: _entropy(st, lvl + 1, children(tree, lvl, d)) for d in doms}
        ordered = sorted(doms, key=lambda d: (-int(st.leader[lvl][d]), -int(st.slices_l[lvl][d]), -ent[d], d))
    else:
        ordered = sorted(doms)
    n = g.used
    # table[i][leaders left][pods left] = the first set of i domains found leaving that much, as a
    # chain (domain, rest). Within one step the sources of one row never collide, so only the
    # row order matters (ascending, as Kueue iterates): a row's own entries win over the leader
    # entries the next row produces into it.
    table: list[dict[int, dict[int, Chain]]] = [{} for _ in range(n + 1)]
    table[0][p.leader_count] = {slice_count * p.slice_size: None}
    pods, pods_l, lead, slices = st.pods[lvl], st.pods_l[lvl], st.leader[lvl], st.slices[lvl]
    for d in ordered:
        d_pods, d_pods_l, d_lead, d_slices = int(pods[d]), int(pods_l[d]), int(lead[d]), int(slices[d])
        for i in range(n, 0, -1):
            prev, cur = table[i - 1], table[i]
            for before_lead in sorted(prev):
                row = prev[before_lead]
                # A set that already placed everything is not extended.
                items = [(bp, chain) for bp, chain in row.items() if bp > 0 or before_lead > 0]
                if not items:
                    continue
                if before_lead > 0 and d_lead > 0:
                    target = cur.setdefault(before_lead - d_lead, {})
                    for bp, chain in items:
                        key = bp - d_pods_l
                        if key not in target:
                            target[key] = (d, chain)
                if d_slices > 0:
                    target = cur.setdefault(before_lead, {})
                    for bp, chain in items:
                        key = bp - d_pods
                        if key not in target:
                            target[key] = (d, chain)
    done = table[n].get(0, {})
    left = [k for k in done if k <= 0]
    if not left:
        return None
    chosen: Domains = []
    link = done[max(left)]
    while link is not None:
        chosen.append(link[0])
        link = link[1]
    return chosen[::-1]


def place_balanced(
    tree: TopologyTree, st: DomainState, lvl: int, doms: Domains, p: BalancedParams, threshold: int
) -> Domains | None:
    """Kueue's placeSlicesOnDomainsBalanced: every chosen domain gets the threshold, leaders
    first, then the rest in order; the state of each becomes what it was given."""
    slice_count = p.count // p.slice_size
    chosen = select_optimal(tree, st, lvl, doms, p, slice_count, entropy=False)
    if chosen is None or slice_count < len(chosen) * threshold:
        return None
    ordered: Domains = sorted_with_leader(st, lvl, np.array(chosen, dtype=np.int64), p.order).tolist()
    extra, leaders_left = slice_count - len(ordered) * threshold, p.leader_count
    for d in ordered:
        if leaders_left > 0:
            take = min(int(st.slices_l[lvl][d]) - threshold, extra)
            st.leader[lvl][d] = 1
            leaders_left -= 1
        elif extra > 0:
            take = min(int(st.slices[lvl][d]) - threshold, extra)
            st.leader[lvl][d] = 0
        else:
            take = 0
            st.leader[lvl][d] = 0
        st.slices[lvl][d] = st.slices_l[lvl][d] = threshold + take
        st.pods[lvl][d] = (threshold + take) * p.slice_size
        st.pods_l[lvl][d] = st.pods[lvl][d] - st.leader[lvl][d]
        extra -= take
    if extra > 0 or leaders_left > 0:
        return None
    return ordered


@dataclass
class Candidate:
    st: DomainState
    domains: Domains  # at the requested level
    threshold: int


def best_candidate(tree: TopologyTree, st: DomainState, p: BalancedParams) -> Candidate | None:
    """Kueue's findBestDomainsForBalancedPlacement (None: threshold 0, use BestFit)."""
    lvl = p.level_idx
    slice_count = p.count // p.slice_size
    if lvl == 0:
        groups = [list(range(len(tree.levels[0])))]
    else:
        groups = [children(tree, lvl - 1, h).tolist() for h in range(len(tree.levels[lvl - 1]))]
    best: Candidate | None = None
    best_threshold, best_count = 0, 0
    for group in groups:
        cand = st  # read only until a group is worth pruning
        below = lvl < p.slice_level_idx
        lower = children_of(tree, lvl, group) if below else np.array(group, dtype=np.int64)
        g = evaluate_greedy(cand, lvl + 1 if below else lvl, lower, slice_count, p.leader_count, p.order)
        if not g.fits:
            continue
        threshold = threshold_of(cand, lvl + 1 if below else lvl, slice_count, g)
        with_reservation = threshold
        if p.leader_count > 0 and g.last is not None:
            with_reservation = min(threshold, int(cand.slices_l[lvl + 1 if below else lvl][g.last]))
        if threshold < best_threshold:
            continue
        group_arr = np.array(group, dtype=np.int64)
        cand = st.copy()
        prune_below(tree, cand, lvl, group, threshold, p)
        after = evaluate_greedy(cand, lvl, group_arr, slice_count, p.leader_count, p.order)
        if not after.fits and with_reservation < threshold:
            if with_reservation <= 0 or with_reservation < best_threshold:
                continue
            threshold = with_reservation
            cand = st.copy()
            prune_below(tree, cand, lvl, group, threshold, p)
            after = evaluate_greedy(cand, lvl, group_arr, slice_count, p.leader_count, p.order)
        if not after.fits:
            continue
        if threshold > best_threshold or (threshold == best_threshold and after.used < best_count):
            best_threshold, best_count = threshold, after.used
            best = Candidate(cand, group, threshold)
    return best if best is not None and best_threshold > 0 else None


def apply_balanced(tree: TopologyTree, cand: Candidate, p: BalancedParams) -> tuple[int, IntArray] | None:
    """Kueue's applyBalancedPlacementAlgorithm: (fit level, domains there) on ``cand.st``, or
    None when it cannot place everything (then BestFit is used)."""
    slice_count = p.count // p.slice_size
    lvl, doms = p.level_idx, cand.domains
    if p.level_idx < p.slice_level_idx:
        chosen = select_optimal(tree, cand.st, lvl, doms, p, slice_count, entropy=True)
        if chosen is None:
            return None
        doms = np.concatenate([children(tree, lvl, d) for d in chosen]).tolist()
        lvl += 1
    placed = place_balanced(tree, cand.st, lvl, doms, p, cand.threshold)
    if placed is None:
        return None
    return lvl, np.array(placed, dtype=np.int64)
