"""Kueue's general placement algorithm: leader-aware, multi-layer slices, preferred affinity.

A faithful port of ``findTopologyAssignment`` phase 2 (``findLevelWithFitDomains``,
``updateCountsToMinimumGeneric``, ``consumeWithLeadersGeneric``,
``prioritizeLeaderDomain``, the two descent loops) over the ``DomainState``
arrays of ``domain_state`` (see there for the representation). Requests that use
none of these features take the numpy fast path in ``placement`` instead; for them
both give the same result.

Domain lists are numpy index arrays of one level; loops that must run in Kueue's
order (leaders, mutation of the state) are plain Python over those, while the
leader-free greedy tails are vectorised with cumulative sums.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from kueue_tas.topology import messages
from kueue_tas.topology.engine.balanced import BalancedParams, apply_balanced, best_candidate
from kueue_tas.topology.engine.domain_state import (
    DomainState,
    LeafInputs,
    Ordering,
    best_fit,
    children,
    descendant_range,
    fill_in_counts,
    sorted_domains,
    sorted_with_leader,
)
from kueue_tas.topology.engine.placement import PlacementFailure, children_of, greedy_take
from kueue_tas.topology.engine.tree import IntArray, TopologyTree
from kueue_tas.topology.engine.why_not import why_not
from kueue_tas.topology.messages import ExclusionStats
from kueue_tas.topology.model import SliceLayer

Placed = list[tuple[int, int]]  # (leaf index, pod count)


@dataclass(frozen=True, slots=True)
class GeneralParams:
    count: int
    leader_count: int  # 0 or 1 (Kueue's PodSet groups have a single-replica leader)
    level_idx: int
    slice_level_idx: int
    slice_size: int
    required: bool
    unconstrained: bool
    order: Ordering
    size_at_level: dict[int, int] = field(default_factory=dict)
    layers: tuple[SliceLayer, ...] = ()  # set only with inner layers: selects the multi-layer text
    balanced: bool = False  # TASBalancedPlacement for this request (preferred only)
    top_idx: int = 0  # the highest level the search may climb to (PlacementParams.top_idx)


@dataclass
class Run:
    """One placement run: the inputs phase 2 needs besides the parameters."""

    tree: TopologyTree
    st: DomainState
    p: GeneralParams
    topology_name: str
    stats: ExclusionStats


def not_fit(run: Run, level: int, fit: int, needed: int) -> PlacementFailure:
    p = run.p
    if p.layers:
        return PlacementFailure(multi_layer_text(run, level))
    detail = why_not(
        run.tree,
        level,
        run.st.slices[level],
        topology_name=run.topology_name,
        fit=fit,
        needed=needed,
        slice_size=p.slice_size,
        one_domain=p.required,
        stats=run.stats,
    )
    return PlacementFailure(detail.message(), detail)


def multi_layer_text(run: Run, level: int) -> str:
    """Kueue's multiLayerNotFitMessage: slices per layer inside the level's domain with the
    most slices (ties: smallest domain id)."""
    tree, st = run.tree, run.st
    n = len(tree.levels[level])
    if n == 0:
        return messages.multi_layer_not_fit_message(run.topology_name, None, run.stats)
    ids: list[str] | None = None
    if level == tree.depth - 1 and tree.lowest_is_hostname:
        ids = [v[-1] for v in tree.levels[level].values]
    slices = st.slices[level]
    best = min(range(n), key=lambda d: (-int(slices[d]), ids[d] if ids is not None else "", d))
    fits: list[tuple[str, int, int]] = []
    for layer in run.p.layers:
        target = tree.level_index(layer.level)
        if target is None:
            continue
        lo, hi = descendant_range(tree, level, best, target)
        fit = int((st.pods[target][lo:hi] // layer.size).sum())
        fits.append((layer.level, fit, run.p.count // layer.size))
    return messages.multi_layer_not_fit_message(run.topology_name, fits, run.stats)


def prioritize_leader_domain(
    st: DomainState, lvl: int, doms: IntArray, count: int, leader_count: int, slice_size: int, use_slices: bool
) -> IntArray:
    """Kueue's prioritizeLeaderDomain: move to the front the first leader-capable domain whose
    leader penalty still leaves enough total capacity."""
    if leader_count == 0 or doms.size < 2:
        return doms
    if use_slices:
        cap, cap_l, required = st.slices[lvl][doms], st.slices_l[lvl][doms], count // slice_size
    else:
        cap, cap_l, required = st.pods[lvl][doms], st.pods_l[lvl][doms], count
    ok = (st.leader[lvl][doms] >= leader_count) & (int(cap.sum()) - (cap - cap_l) >= required)
    hits = np.flatnonzero(ok)
    if hits.size == 0 or hits[0] == 0:
        return doms
    i = int(hits[0])
    return np.concatenate([doms[i : i + 1], doms[:i], doms[i + 1 :]])


def greedy(run: Run, lvl: int, doms: IntArray, caps_of: IntArray, needed: int) -> tuple[list[int], int]:
    """Take domains whole in order until one covers the rest (BestFit swaps in the tightest
    covering one from there). Returns the domains taken and what is still missing."""
    if needed <= 0 or doms.size == 0:
        return [], needed
    taken = greedy_take(caps_of[doms], needed, best_fit=False)
    if taken is None:
        return doms.tolist(), needed - int(caps_of[doms].sum())
    i, _, rest = taken
    d = int(doms[i]) if run.p.order.lfc else best_fit(run.st, lvl, doms[i:], rest, caps_of, 0, run.p.order)
    return [*doms[:i].tolist(), d], rest - int(caps_of[d])


def find_level_with_fit_domains(run: Run, level: int) -> tuple[int, IntArray]:
    tree, st, p = run.tree, run.st, run.p
    order = p.order
    n = len(tree.levels[level])
    if n == 0:
        raise PlacementFailure(messages.no_domains_at_level(tree.level_keys[level]))
    srt = sorted_with_leader(st, level, np.arange(n, dtype=np.int64), order)
    sl, s, ld = st.slices_l[level], st.slices[level], st.leader[level]
    need, lead = p.count // p.slice_size, p.leader_count
    top = int(srt[0])
    if not order.lfc and sl[top] >= need and ld[top] >= lead:
        top = best_fit(st, level, srt, need, sl, lead, order)
    if order.lfc:
        caps = s[srt] if lead == 0 else np.where(ld[srt] >= lead, sl[srt], -1)
        fitting = np.flatnonzero(caps >= need)
        if fitting.size:
            return level, srt[fitting[:1]]
        if p.required:
            raise not_fit(run, level, int(st.pods[level][srt[-1]]), need)
    if sl[top] >= need and ld[top] >= lead:
        return level, np.array([top], dtype=np.int64)
    # Below the highest level allowed, climb; required stops there (required alone never climbs).
    if level > p.top_idx and not p.unconstrained:
        return find_level_with_fit_domains(run, level - 1)
    if p.required:
        if order.affinity:
            ok = np.flatnonzero((sl[srt[1:]] >= need) & (ld[srt[1:]] >= lead))
            if ok.size:
                i = int(ok[0]) + 1
                return level, np.array([best_fit(st, level, srt[i:], need, sl, lead, order)], dtype=np.int64)
        raise not_fit(run, level, int(s[top]), need)
    srt = prioritize_leader_domain(st, level, srt, p.count, lead, p.slice_size, True)
    results: list[int] = []
    rem, rem_lead, idx = need, lead, 0
    while rem_lead > 0 and idx < srt.size and ld[srt[idx]] > 0:
        d = int(srt[idx])
        if not order.lfc and sl[d] >= rem:
            d = best_fit(st, level, srt[idx:], rem, sl, rem_lead, order)
        results.append(d)
        rem_lead -= int(ld[d])
        rem -= int(sl[d])
        idx += 1
    if rem_lead > 0:
        raise not_fit(run, level, lead - rem_lead, need)
    taken, rem = greedy(run, level, sorted_domains(st, level, srt[idx:], order), s, rem)
    results.extend(taken)
    if rem > 0:
        raise not_fit(run, level, need - rem, need)
    return level, np.array(results, dtype=np.int64)


def update_counts_to_minimum(
    run: Run, lvl: int, doms: IntArray, count: int, leader_count: int, slice_size: int, use_slices: bool
) -> IntArray:
    """Kueue's updateCountsToMinimumGeneric (with consumeWithLeadersGeneric inlined): give the
    domains, in order, what they can take until ``count`` pods (and the leaders) are placed;
    the state of each domain used becomes what it was given. Empty when they cannot (Kueue
    then logs "code assumptions violated" and places nothing)."""
    st, order = run.st, run.p.order
    doms = prioritize_leader_domain(st, lvl, doms, count, leader_count, slice_size, use_slices)
    pods, ld = st.pods[lvl], st.leader[lvl]
    prim, with_l = (st.slices[lvl], st.slices_l[lvl]) if use_slices else (pods, st.pods_l[lvl])
    unit = slice_size if use_slices else 1
    rem = count // slice_size if use_slices else count
    rem_lead = leader_count
    result: list[int] = []
    i = 0
    while i < doms.size and rem_lead > 0:
        d = int(doms[i])
        if not order.lfc and with_l[d] >= rem and ld[d] >= rem_lead:
            d = best_fit(st, lvl, doms[i:], rem, with_l, rem_lead, order)
        result.append(d)
        if with_l[d] >= rem and ld[d] >= rem_lead:
            prim[d] = rem
            ld[d] = rem_lead
            pods[d] = rem * unit
            return np.array(result, dtype=np.int64)
        with_l[d] = min(int(with_l[d]), rem)
        ld[d] = min(int(ld[d]), rem_lead)
        prim[d] = with_l[d]
        pods[d] = with_l[d] * unit
        rem_lead -= int(ld[d])
        rem -= int(with_l[d])
        i += 1
    tail = doms[i:]
    if tail.size == 0:
        return np.zeros(0, dtype=np.int64)
    taken = greedy_take(prim[tail], rem, best_fit=False)
    if taken is None:
        return np.zeros(0, dtype=np.int64)
    k, _, last_rem = taken
    whole = tail[:k]
    ld[whole] = 0
    if use_slices:
        pods[whole] = prim[whole] * slice_size
    d = int(tail[k]) if order.lfc else best_fit(st, lvl, tail[k:], last_rem, prim, 0, order)
    ld[d] = 0
    pods[d] = last_rem * unit
    if use_slices:
        prim[d] = last_rem
    return np.array([*result, *whole.tolist(), d], dtype=np.int64)


def _balanced(run: Run) -> tuple[int, IntArray] | None:
    """Balanced placement's level and domains, switching the run to the chosen candidate's
    state; None falls back to BestFit on the untouched state."""
    p = run.p
    params = BalancedParams(p.count, p.leader_count, p.level_idx, p.slice_level_idx, p.slice_size, p.order)
    cand = best_candidate(run.tree, run.st, params)
    if cand is None:
        return None
    placed = apply_balanced(run.tree, cand, params)
    if placed is not None:
        run.st = cand.st
    return placed


def place_general(
    tree: TopologyTree, p: GeneralParams, leaf: LeafInputs, topology_name: str, stats: ExclusionStats
) -> tuple[Placed, Placed]:
    """(workers, leaders) as (leaf, count) pairs, or PlacementFailure with Kueue's text."""
    st = fill_in_counts(tree, leaf, p.slice_size, p.slice_level_idx, p.size_at_level, p.leader_count > 0)
    run = Run(tree, st, p, topology_name, stats)
    balanced = _balanced(run) if p.balanced else None
    if balanced is not None:
        st = run.st
        fit_level, fit = balanced
    else:
        fit_level, fit = find_level_with_fit_domains(run, p.level_idx)
    cur = update_counts_to_minimum(run, fit_level, fit, p.count, p.leader_count, p.slice_size, True)
    lvl = fit_level
    low = tree.depth - 1
    # Above the slice level the children of all chosen domains form one pool, filled from scratch
    # (balanced placement already chose the domains there).
    while balanced is None and lvl < min(low, p.slice_level_idx):
        pool = children_of(tree, lvl, cur.tolist())
        pool = sorted_domains(st, lvl + 1, pool, p.order)
        cur = update_counts_to_minimum(run, lvl + 1, pool, p.count, p.leader_count, p.slice_size, True)
        lvl += 1
    # At and below it each domain spreads what it was given over its own children.
    while lvl < low:
        size_on = p.slice_size if lvl < p.slice_level_idx else p.size_at_level.get(lvl + 1, 1)
        parts: list[IntArray] = []
        for d in cur.tolist():
            kids = sorted_domains(st, lvl + 1, children(tree, lvl, d), p.order)
            if size_on > 1:
                # Kueue recomputes the inner-layer slice counts after sorting the children.
                st.slices[lvl + 1][kids] = st.pods[lvl + 1][kids] // size_on
                st.slices_l[lvl + 1][kids] = st.pods_l[lvl + 1][kids] // size_on
            given, given_lead = int(st.pods[lvl][d]), int(st.leader[lvl][d])
            parts.append(update_counts_to_minimum(run, lvl + 1, kids, given, given_lead, size_on, size_on > 1))
        cur = np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)
        lvl += 1
    pods, lead = st.pods[low], st.leader[low]
    workers = [(d, int(pods[d])) for d in cur.tolist() if pods[d] > 0]
    leaders = [(d, int(lead[d])) for d in cur.tolist() if lead[d] > 0] if p.leader_count else []
    return workers, leaders
