"""Kueue's TAS placement algorithm for one PodSet, over numpy arrays.

Phase 1 counts how many pods (and slices) fit in every domain, bottom-up.
Phase 2 picks the level and the domains there (BestFit for required and
preferred, LeastFreeCapacity for unconstrained and implied: Kueue v0.19's
default TASProfileMixed), then descends level by level to the leaves. Required
with preferred (kueue-tas's extension) climbs as preferred does, from the preferred
level, and stops at the required level as required does.

Greedy walks are vectorised with cumulative sums: a walk takes domains whole
until the first one whose capacity covers what is still needed; BestFit then
swaps in the tightest domain from there on that still covers it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from kueue_tas.api.object_base import INT32_MAX
from kueue_tas.topology import messages
from kueue_tas.topology.assignment import TopologyAssignment, domain_assignments
from kueue_tas.topology.engine.tree import IntArray, TopologyTree
from kueue_tas.topology.engine.why_not import WhyNot, why_not
from kueue_tas.topology.messages import ExclusionStats
from kueue_tas.topology.model import HOSTNAME_LABEL, TopologyRequest

_INT64_MAX = np.iinfo(np.int64).max  # np.iinfo is slow to build; placements read it often


class PlacementFailure(Exception):
    """The PodSet cannot be placed; ``str(exc)`` is Kueue's failure text, and ``why_not`` its
    numbers when it is a "does not fit" text (``why_not``)."""

    def __init__(self, message: str, why_not: WhyNot | None = None) -> None:
        super().__init__(message)
        self.why_not = why_not


@dataclass(frozen=True, slots=True)
class PlacementParams:
    count: int
    level_idx: int  # the level the search starts at
    slice_level_idx: int
    slice_size: int
    required: bool
    unconstrained: bool  # also selects LeastFreeCapacity ordering
    # The highest level the search may climb to (0 is the top): the required level with
    # required, so required alone never climbs and required + preferred climbs from the
    # preferred level up to it; the top otherwise.
    top_idx: int = 0


def requested_level_key(tree: TopologyTree, topology: TopologyRequest | None, implied: bool) -> str | None:
    """Kueue's levelKeyWithImpliedFallback: required, preferred, the top level for a
    slice-only request, the lowest level for unconstrained or implied; None otherwise."""
    keys = tree.level_keys
    if topology is not None:
        if topology.required is not None:
            return topology.required
        if topology.preferred is not None:
            return topology.preferred
        if topology.slice_level is not None or topology.slice_layers:
            return keys[0] if keys else None
        if topology.unconstrained:
            return keys[-1] if keys else None
    return keys[-1] if implied and keys else None


def resolve_params(tree: TopologyTree, count: int, topology: TopologyRequest | None, implied: bool) -> PlacementParams:
    """Kueue's checks before placing, in Kueue's order, each with its message."""
    slice_size = 1
    if topology is not None and topology.slice_level is not None:
        if topology.slice_size is None or topology.slice_size <= 0:
            raise PlacementFailure(messages.SLICE_SIZE_MISSING)
        slice_size = topology.slice_size
    required = topology is not None and topology.required is not None
    slice_only = (
        topology is not None
        and topology.required is None
        and topology.preferred is None
        and topology.slice_level is not None
    )
    unconstrained = bool(topology is not None and topology.unconstrained) or implied or slice_only
    keys = tree.level_keys
    key = requested_level_key(tree, topology, implied)
    if key is None:
        raise PlacementFailure(messages.NO_LEVEL_SPECIFIED)
    level_idx = tree.level_index(key)
    if level_idx is None:
        raise PlacementFailure(messages.no_requested_level(key))
    slice_key = keys[-1]
    if topology is not None and topology.slice_level is not None:
        slice_key = topology.slice_level
    slice_level_idx = tree.level_index(slice_key)
    if slice_level_idx is None:
        raise PlacementFailure(messages.no_requested_slice_level(slice_key))
    top_idx = level_idx if required else 0
    if topology is not None and topology.preferred is not None and topology.preferred_in_required:
        # kueue-tas's required + preferred: the search starts at the preferred level.
        preferred = topology.preferred
        start = tree.level_index(preferred)
        if start is None:
            raise PlacementFailure(messages.no_requested_level(preferred))
        if start < level_idx:
            raise PlacementFailure(f"preferred topology {preferred} is above the required topology {key}")
        key, level_idx = preferred, start
    if level_idx > slice_level_idx:
        raise PlacementFailure(messages.slice_above_podset(slice_key, key))
    return PlacementParams(count, level_idx, slice_level_idx, slice_size, required, unconstrained, top_idx)


@dataclass
class DomainCounts:
    """Phase-1 capacities per level: pods that fit, and slices that fit."""

    pods: list[IntArray]
    slices: list[IntArray]


def requested_columns(request: IntArray, column_names: Sequence[str]) -> list[int]:
    """The columns ``request`` asks for, in the alphabetical order of their resource names: then
    the first column that limits a leaf is the alphabetically smallest, as Kueue breaks ties."""
    cols: list[int] = np.flatnonzero(request).tolist()
    cols.sort(key=column_names.__getitem__)
    return cols


def leaf_counts(
    rows: Sequence[IntArray],
    per_pod: Sequence[int],
    names: Sequence[str],
    eligible: npt.NDArray[np.bool_],
    stats: ExclusionStats,
) -> IntArray:
    """Pods that fit in each leaf: ``rows`` are the leaves' remaining capacity of the requested
    resources (``requested_columns`` order), ``per_pod`` what one pod asks of each and
    ``names`` their names; limiting resources go into stats.

    Resource by resource into one array: clipping commutes with the minimum, and whole
    leaves x resources temporaries would cost more than the divisions."""
    n = eligible.shape[0]
    if not rows:
        return np.zeros(n, dtype=np.int64)
    # A pod asks one of ``pods`` (and often one GPU): no division for those.
    counts: IntArray = rows[0].copy() if per_pod[0] == 1 else np.floor_divide(rows[0], per_pod[0])
    part = np.empty_like(counts)
    for row, amount in zip(rows[1:], per_pod[1:], strict=True):
        if amount == 1:
            np.minimum(counts, row, out=counts)
        else:
            np.floor_divide(row, amount, out=part)
            np.minimum(counts, part, out=counts)
    np.maximum(counts, 0, out=counts)
    np.minimum(counts, INT32_MAX, out=counts)
    everywhere = bool(eligible.all())
    if not everywhere:
        counts[~eligible] = 0
    zero = np.flatnonzero(counts == 0)
    if not everywhere:
        zero = zero[eligible[zero]]
    if zero.size:
        # The limiting resource of a leaf is the first whose count (clipped at 0) is its minimum, 0.
        short = np.stack([row[zero] // amount <= 0 for row, amount in zip(rows, per_pod, strict=True)])
        for pos, num in enumerate(np.bincount(short.argmax(axis=0), minlength=len(rows)).tolist()):
            if num:
                stats.resources[names[pos]] = stats.resources.get(names[pos], 0) + num
    return counts


def fill_in_counts(tree: TopologyTree, leaf_pods: IntArray, p: PlacementParams) -> DomainCounts:
    """Phase 1. Where a level's slices are its pods (slices of one pod, at and above the slice
    level) they are the same array: nothing here writes to them, and ``sort_domains`` tells."""
    depth = tree.depth
    pods: list[IntArray] = [np.zeros(0, dtype=np.int64)] * depth
    slices: list[IntArray] = [np.zeros(0, dtype=np.int64)] * depth
    pods[depth - 1] = leaf_pods
    for lvl in range(depth - 1, -1, -1):
        starts = tree.levels[lvl].child_start
        if lvl < depth - 1:
            pods[lvl] = np.add.reduceat(pods[lvl + 1], starts) if len(starts) else np.zeros(0, dtype=np.int64)
        if lvl == p.slice_level_idx:
            slices[lvl] = pods[lvl] if p.slice_size == 1 else pods[lvl] // p.slice_size
        elif lvl < p.slice_level_idx:
            if slices[lvl + 1] is pods[lvl + 1]:
                slices[lvl] = pods[lvl]
            else:
                slices[lvl] = np.add.reduceat(slices[lvl + 1], starts) if len(starts) else np.zeros(0, dtype=np.int64)
        else:
            slices[lvl] = np.zeros(len(tree.levels[lvl]), dtype=np.int64)
    return DomainCounts(pods, slices)


def sort_domains(counts: DomainCounts, lvl: int, idx: IntArray, lfc: bool) -> IntArray:
    """Kueue's sortedDomains: slices (desc for BestFit, asc for LFC), pods asc, name.

    ``idx`` must be ascending: stable sorts then break the last ties by name."""
    if idx.size <= 1:
        return idx
    pods = counts.pods[lvl][idx]
    if counts.slices[lvl] is counts.pods[lvl]:
        # One key: slices asc then pods asc is pods asc, slices desc then pods asc is pods desc.
        key = pods if lfc else -pods
        # NumPy's stable sort is a radix sort for 16-bit keys; counts of pods usually fit.
        if idx.size > 64 and int(key.min()) > -(2**15) and int(key.max()) < 2**15:
            key = key.astype(np.int16)
        return idx[np.argsort(key, kind="stable")]
    s = counts.slices[lvl][idx]
    return idx[np.lexsort((pods, s if lfc else -s))]


def best_fit_position(caps: IntArray, needed: int) -> int:
    """Index of the tightest capacity >= needed (first on ties); 0 when none covers it."""
    fitting = caps >= needed
    if not fitting.any():
        return 0
    masked = np.where(fitting, caps, _INT64_MAX)
    return int(masked.argmin())


def tightest_fit(slices: IntArray, pods: IntArray, needed: int) -> int | None:
    """The domain that Kueue's findLevelWithFitDomains takes alone, None when no domain covers
    ``needed``: of those that do, the fewest slices, then the fewest pods, then the name. It is
    BestFit's tightest and LeastFreeCapacity's first in sortedDomains order alike, found
    without sorting every domain."""
    tight = np.where(slices >= needed, slices, _INT64_MAX)
    least = tight.min()
    if least == _INT64_MAX:
        return None
    ties = np.flatnonzero(tight == least)
    if ties.size == 1 or slices is pods:
        return int(ties[0])
    return int(ties[int(pods[ties].argmin())])


def greedy_take(caps: IntArray, needed: int, best_fit: bool) -> tuple[int, int, int] | None:
    """Walk domains in order taking each whole until one covers the remainder.

    Returns (number taken whole, position of the covering domain, remainder it gets),
    or None when all of them together do not cover ``needed``.
    """
    # A domain covers the remainder exactly when the running total up to it reaches ``needed``.
    total = np.cumsum(caps)
    reached = total >= needed
    i = int(reached.argmax())
    if not reached[i]:
        return None
    rem = needed - int(total[i] - caps[i])
    j = i + best_fit_position(caps[i:], rem) if best_fit else i
    return i, j, rem


def update_counts_to_minimum(
    domains: IntArray, caps: IntArray, needed: int, unit: int, best_fit: bool
) -> tuple[IntArray, IntArray]:
    """Kueue's updateCountsToMinimum: the domains used, in walk order, and the pods of each."""
    taken = greedy_take(caps, needed, best_fit)
    if taken is None:  # capacities are consistent by construction
        raise AssertionError("placement capacities inconsistent: remaining count not covered")
    i, j, rem = taken
    used = np.empty(i + 1, dtype=np.int64)
    used[:i] = domains[:i]
    used[i] = domains[j]
    pods = np.empty(i + 1, dtype=np.int64)
    np.multiply(caps[:i], unit, out=pods[:i])
    pods[i] = rem * unit
    return used, pods


def find_level_with_fit_domains(
    tree: TopologyTree,
    counts: DomainCounts,
    p: PlacementParams,
    level: int,
    topology_name: str,
    stats: ExclusionStats,
) -> tuple[int, IntArray]:
    lfc = p.unconstrained
    n = len(tree.levels[level])
    if n == 0:
        raise PlacementFailure(messages.no_domains_at_level(tree.level_keys[level]))
    slices = counts.slices[level]
    needed = p.count // p.slice_size
    alone = tightest_fit(slices, counts.pods[level], needed)
    if alone is not None:
        return level, np.array([alone], dtype=np.int64)
    # No domain fits alone: climb while allowed; at the required level that is the end.
    if level > p.top_idx and not p.unconstrained:
        return find_level_with_fit_domains(tree, counts, p, level - 1, topology_name, stats)
    if p.required:
        top = int(slices.min() if lfc else slices.max())  # the first of sortedDomains
        raise _not_fit(tree, level, slices, topology_name, top, needed, p, stats)
    ordered = sort_domains(counts, level, np.arange(n, dtype=np.int64), lfc)
    caps = slices[ordered]
    taken = greedy_take(caps, needed, best_fit=not lfc)
    if taken is None:
        raise _not_fit(tree, level, slices, topology_name, int(caps.sum()), needed, p, stats)
    i, j, _ = taken
    chosen = np.concatenate([ordered[:i], ordered[j : j + 1]])
    return level, chosen


def _not_fit(
    tree: TopologyTree,
    level: int,
    slices: IntArray,
    topology_name: str,
    fit: int,
    needed: int,
    p: PlacementParams,
    stats: ExclusionStats,
) -> PlacementFailure:
    """Kueue's "does not fit" failure, with its numbers (``why_not``)."""
    detail = why_not(
        tree,
        level,
        slices,
        topology_name=topology_name,
        fit=fit,
        needed=needed,
        slice_size=p.slice_size,
        one_domain=p.required,
        stats=stats,
    )
    return PlacementFailure(detail.message(), detail)


def children_of(tree: TopologyTree, lvl: int, domains: Sequence[int] | IntArray) -> IntArray:
    """The children of ``domains`` (of level ``lvl``), domain after domain, each's in name order."""
    level = tree.levels[lvl]
    doms = np.asarray(domains, dtype=np.int64)
    if doms.size == 1:  # the common case, without the index arithmetic
        return np.arange(level.child_start[doms[0]], level.child_end[doms[0]], dtype=np.int64)
    starts = level.child_start[doms]
    sizes = level.child_end[doms] - starts
    # A child's index is its domain's first child plus its position among that domain's children.
    shift = np.repeat(starts - (np.cumsum(sizes) - sizes), sizes)
    kids: IntArray = np.arange(int(sizes.sum()), dtype=np.int64) + shift
    return kids


def place_podset(
    tree: TopologyTree,
    p: PlacementParams,
    leaf_pods: IntArray,
    topology_name: str,
    stats: ExclusionStats,
) -> TopologyAssignment:
    counts = fill_in_counts(tree, leaf_pods, p)
    best_fit = not p.unconstrained
    fit_level, fit_domains = find_level_with_fit_domains(tree, counts, p, p.level_idx, topology_name, stats)
    slice_units = p.count // p.slice_size
    used, pods = update_counts_to_minimum(
        fit_domains, counts.slices[fit_level][fit_domains], slice_units, p.slice_size, best_fit
    )
    lvl = fit_level
    # Above the slice level, the children of all chosen domains form one pool and
    # are filled again from scratch (the parents' counts are not respected).
    while lvl < min(tree.depth - 1, p.slice_level_idx):
        # In name order, so that the pool is too, as sort_domains needs.
        pool = sort_domains(counts, lvl + 1, children_of(tree, lvl, np.sort(used)), p.unconstrained)
        used, pods = update_counts_to_minimum(pool, counts.slices[lvl + 1][pool], slice_units, p.slice_size, best_fit)
        lvl += 1
    # At and below the slice level, each parent spreads its own pods over its children.
    while lvl < tree.depth - 1:
        level = tree.levels[lvl]
        parts: list[tuple[IntArray, IntArray]] = []
        for d, given in zip(used.tolist(), pods.tolist(), strict=True):
            kids = np.arange(level.child_start[d], level.child_end[d], dtype=np.int64)
            kids = sort_domains(counts, lvl + 1, kids, p.unconstrained)
            parts.append(update_counts_to_minimum(kids, counts.pods[lvl + 1][kids], given, 1, best_fit))
        used = np.concatenate([u for u, _ in parts])
        pods = np.concatenate([c for _, c in parts])
        lvl += 1
    keep = pods > 0
    used, pods = used[keep], pods[keep]
    order = np.argsort(used)  # a leaf is used once: no ties
    return _assignment(tree, used[order].tolist(), pods[order].tolist())


def build_assignment(tree: TopologyTree, leaves: list[tuple[int, int]]) -> TopologyAssignment:
    """The assignment of (leaf, pods) pairs, in leaf (name) order; pairs with no pods are left out."""
    used = sorted((d, c) for d, c in leaves if c > 0)
    return _assignment(tree, [d for d, _ in used], [c for _, c in used])


def _assignment(tree: TopologyTree, leaves: list[int], pods: list[int]) -> TopologyAssignment:
    levels = (HOSTNAME_LABEL,) if tree.lowest_is_hostname else tree.level_keys
    values = tree.assignment_values
    return TopologyAssignment(levels, domain_assignments(list(map(values.__getitem__, leaves)), pods))
