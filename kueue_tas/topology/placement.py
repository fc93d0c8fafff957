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

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from kueue_tas.api.object_base import INT32_MAX
from kueue_tas.topology import messages
from kueue_tas.topology.assignment import DomainAssignment, TopologyAssignment
from kueue_tas.topology.capacity import Matrix
from kueue_tas.topology.messages import ExclusionStats
from kueue_tas.topology.model import HOSTNAME_LABEL, TopologyRequest
from kueue_tas.topology.tree import IntArray, TopologyTree

_INT64_MAX = np.iinfo(np.int64).max  # np.iinfo is slow to build; placements read it often


class PlacementFailure(Exception):
    """The PodSet cannot be placed; ``str(exc)`` is Kueue's failure text."""


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


def leaf_counts(
    remaining: Matrix,
    request: npt.NDArray[np.int64],
    column_names: list[str],
    eligible: npt.NDArray[np.bool_],
    stats: ExclusionStats,
) -> IntArray:
    """Pods of ``request`` (pods included) that fit in each leaf; limiting resources into stats."""
    n = remaining.shape[0]
    cols = [c for c in np.flatnonzero(request).tolist()]
    # Alphabetical column order makes argmin's first-minimum pick the alphabetically
    # smallest limiting resource, as Kueue breaks ties.
    cols.sort(key=lambda c: column_names[c])
    if not cols:
        return np.zeros(n, dtype=np.int64)
    fits = np.clip(remaining[:, cols] // request[cols], 0, INT32_MAX)
    counts: IntArray = fits.min(axis=1)
    counts[~eligible] = 0
    zero = np.flatnonzero(eligible & (counts == 0))
    if zero.size:
        limiting = fits[zero].argmin(axis=1)
        for pos, num in zip(*np.unique(limiting, return_counts=True), strict=True):
            name = column_names[cols[int(pos)]]
            stats.resources[name] = stats.resources.get(name, 0) + int(num)
    return counts


def fill_in_counts(tree: TopologyTree, leaf_pods: IntArray, p: PlacementParams) -> DomainCounts:
    depth = tree.depth
    pods: list[IntArray] = [np.zeros(0, dtype=np.int64)] * depth
    slices: list[IntArray] = [np.zeros(0, dtype=np.int64)] * depth
    pods[depth - 1] = leaf_pods
    for lvl in range(depth - 1, -1, -1):
        if lvl < depth - 1:
            pods[lvl] = (
                np.add.reduceat(pods[lvl + 1], tree.levels[lvl].child_start)
                if len(tree.levels[lvl])
                else np.zeros(0, dtype=np.int64)
            )
        if lvl == p.slice_level_idx:
            slices[lvl] = pods[lvl] // p.slice_size
        elif lvl < p.slice_level_idx:
            slices[lvl] = (
                np.add.reduceat(slices[lvl + 1], tree.levels[lvl].child_start)
                if len(tree.levels[lvl])
                else np.zeros(0, dtype=np.int64)
            )
        else:
            slices[lvl] = np.zeros(len(tree.levels[lvl]), dtype=np.int64)
    return DomainCounts(pods, slices)


def sort_domains(counts: DomainCounts, lvl: int, idx: IntArray, lfc: bool) -> IntArray:
    """Kueue's sortedDomains: slices (desc for BestFit, asc for LFC), pods asc, name."""
    if idx.size <= 1:
        return idx
    s = counts.slices[lvl][idx]
    order = np.lexsort((idx, counts.pods[lvl][idx], s if lfc else -s))
    return idx[order]


def best_fit_position(caps: IntArray, needed: int) -> int:
    """Index of the tightest capacity >= needed (first on ties); 0 when none covers it."""
    fitting = caps >= needed
    if not fitting.any():
        return 0
    masked = np.where(fitting, caps, _INT64_MAX)
    return int(masked.argmin())


def greedy_take(caps: IntArray, needed: int, best_fit: bool) -> tuple[int, int, int] | None:
    """Walk domains in order taking each whole until one covers the remainder.

    Returns (number taken whole, position of the covering domain, remainder it gets),
    or None when all of them together do not cover ``needed``.
    """
    before = np.cumsum(caps) - caps
    covers = caps >= needed - before
    if not covers.any():
        return None
    i = int(covers.argmax())
    rem = needed - int(before[i])
    j = i + best_fit_position(caps[i:], rem) if best_fit else i
    return i, j, rem


def update_counts_to_minimum(
    domains: IntArray, caps: IntArray, needed: int, unit: int, best_fit: bool
) -> list[tuple[int, int]]:
    """Kueue's updateCountsToMinimum: (domain, pods) for the domains used, in walk order."""
    taken = greedy_take(caps, needed, best_fit)
    if taken is None:  # capacities are consistent by construction
        raise AssertionError("placement capacities inconsistent: remaining count not covered")
    i, j, rem = taken
    out = [(int(d), int(c) * unit) for d, c in zip(domains[:i].tolist(), caps[:i].tolist(), strict=True)]
    out.append((int(domains[j]), rem * unit))
    return out


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
    ordered = sort_domains(counts, level, np.arange(n, dtype=np.int64), lfc)
    caps = counts.slices[level][ordered]
    needed = p.count // p.slice_size
    if lfc:
        fitting = np.flatnonzero(caps >= needed)
        if fitting.size:
            return level, ordered[fitting[:1]]
    elif caps[0] >= needed:
        return level, ordered[[best_fit_position(caps, needed)]]
    # The top domain does not fit: climb while allowed; at the required level that is the end.
    if level > p.top_idx and not p.unconstrained:
        return find_level_with_fit_domains(tree, counts, p, level - 1, topology_name, stats)
    if p.required:
        raise PlacementFailure(messages.not_fit_message(topology_name, int(caps[0]), needed, p.slice_size, stats))
    taken = greedy_take(caps, needed, best_fit=not lfc)
    if taken is None:
        raise PlacementFailure(messages.not_fit_message(topology_name, int(caps.sum()), needed, p.slice_size, stats))
    i, j, _ = taken
    chosen = np.concatenate([ordered[:i], ordered[j : j + 1]])
    return level, chosen


def children_of(tree: TopologyTree, lvl: int, domains: list[int]) -> IntArray:
    level = tree.levels[lvl]
    parts = [np.arange(level.child_start[d], level.child_end[d], dtype=np.int64) for d in domains]
    return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)


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
    current = update_counts_to_minimum(
        fit_domains, counts.slices[fit_level][fit_domains], slice_units, p.slice_size, best_fit
    )
    lvl = fit_level
    # Above the slice level, the children of all chosen domains form one pool and
    # are filled again from scratch (the parents' counts are not respected).
    while lvl < min(tree.depth - 1, p.slice_level_idx):
        pool = sort_domains(counts, lvl + 1, children_of(tree, lvl, [d for d, _ in current]), p.unconstrained)
        current = update_counts_to_minimum(pool, counts.slices[lvl + 1][pool], slice_units, p.slice_size, best_fit)
        lvl += 1
    # At and below the slice level, each parent spreads its own pods over its children.
    while lvl < tree.depth - 1:
        level = tree.levels[lvl]
        nxt: list[tuple[int, int]] = []
        for d, pods in current:
            kids = np.arange(level.child_start[d], level.child_end[d], dtype=np.int64)
            kids = sort_domains(counts, lvl + 1, kids, p.unconstrained)
            nxt.extend(update_counts_to_minimum(kids, counts.pods[lvl + 1][kids], pods, 1, best_fit))
        current = nxt
        lvl += 1
    return build_assignment(tree, current)


def build_assignment(tree: TopologyTree, leaves: list[tuple[int, int]]) -> TopologyAssignment:
    used = sorted((d, c) for d, c in leaves if c > 0)
    leaf_values = tree.leaves.values
    if tree.lowest_is_hostname:
        return TopologyAssignment(
            (HOSTNAME_LABEL,),
            tuple(DomainAssignment((leaf_values[d][-1],), c) for d, c in used),
        )
    return TopologyAssignment(tree.level_keys, tuple(DomainAssignment(leaf_values[d], c) for d, c in used))
