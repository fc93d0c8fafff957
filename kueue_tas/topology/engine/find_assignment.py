"""One run of Kueue's findTopologyAssignment: a PodSet (the workers) and its optional leader.

Checks the request in Kueue's order, computes what fits in every leaf, then takes
the numpy fast path (``placement``) when the request uses none of the features
only the general algorithm has (a leader, inner slice layers, preferred node
affinity, BestFit for unconstrained with TASProfileMixed off), else the general
one (``general``). Both give Kueue's assignment or raise PlacementFailure with
Kueue's text.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from kueue_tas.api.object_base import INT32_MAX
from kueue_tas.topology.assignment import TopologyAssignment
from kueue_tas.topology.engine.affinity import preferred_scores
from kueue_tas.topology.engine.capacity_matrix import Matrix
from kueue_tas.topology.engine.domain_state import LeafInputs, Ordering, descendant_range
from kueue_tas.topology.engine.filters import InvalidSelectorError, eligible_leaves
from kueue_tas.topology.engine.flavor_view import FlavorView
from kueue_tas.topology.engine.general import GeneralParams, place_general
from kueue_tas.topology.engine.layers import as_single_layer, effective_layers, inner_layers
from kueue_tas.topology.engine.placement import (
    PlacementFailure,
    build_assignment,
    leaf_counts,
    place_podset,
    requested_columns,
    resolve_params,
)
from kueue_tas.topology.engine.tree import IntArray
from kueue_tas.topology.features import FeatureGates
from kueue_tas.topology.messages import ExclusionStats
from kueue_tas.topology.model import PODS, PodSetRequest

PROFILE_MIXED = "TASProfileMixed"


@dataclass(frozen=True, slots=True)
class PlaceOptions:
    gates: FeatureGates
    simulate_empty: bool = False
    allocatable_only: bool = False


@dataclass(frozen=True, slots=True)
class DomainLimit:
    """Kueue's requiredReplacementDomain: only leaves under domain ``index`` of ``level``."""

    level: int
    index: int


def find_topology_assignment(
    snap: FlavorView,
    workers: PodSetRequest,
    leader: PodSetRequest | None,
    assumed: Matrix | None,
    opts: PlaceOptions,
    *,
    limit: DomainLimit | None = None,
    general_only: bool = False,
) -> dict[str, TopologyAssignment]:
    """Assignments by PodSet name (the leader's too, when there is one). ``general_only``
    skips the fast path (tests cross-check the two algorithms with it)."""
    tree = snap.tree
    gates = opts.gates
    layers = effective_layers(workers.topology, gates)
    params = resolve_params(tree, workers.count, as_single_layer(workers.topology, layers), workers.implied)
    inner = inner_layers(tree, layers, params.slice_size, params.slice_level_idx)
    if isinstance(inner, str):
        raise PlacementFailure(inner)
    stats = ExclusionStats(total_nodes=len(tree.leaves))
    try:
        eligible = eligible_leaves(
            tree,
            tuple(workers.tolerations) + snap.flavor_tolerations,
            workers.node_selector,
            workers.required_affinity,
            stats,
        )
    except InvalidSelectorError as exc:
        raise PlacementFailure(f"invalid affinity node selectors: {exc}") from exc
    if limit is not None:
        lo, hi = descendant_range(tree, limit.level, limit.index, tree.depth - 1)
        inside = np.zeros(len(tree.leaves), dtype=np.bool_)
        inside[lo:hi] = True
        stats.topology_domain += int((eligible & ~inside).sum())
        eligible = eligible & inside
    cap = snap.capacity
    # Every vector exists before the capacity is read, so they all have its width.
    request = cap.vector({**workers.requests, PODS: 1})
    leader_request = cap.vector({**leader.requests, PODS: 1}) if leader is not None else None
    column_names = sorted(cap.columns, key=cap.columns.__getitem__)
    cols = requested_columns(request, column_names)
    rows = cap.remaining_columns(
        cols, simulate_empty=opts.simulate_empty, assumed=assumed, allocatable_only=opts.allocatable_only
    )
    per_pod = [int(request[c]) for c in cols]
    pods = leaf_counts(rows, per_pod, [column_names[c] for c in cols], eligible, stats)
    # Gates are read only when the request could use what they switch on.
    lfc = params.unconstrained and gates.enabled(PROFILE_MIXED)
    balanced = not params.required and not params.unconstrained and gates.balanced
    scores = None
    if workers.preferred_affinity and gates.node_affinity_preferred:
        scores = preferred_scores(tree, workers.preferred_affinity, eligible)
    fast = (
        not general_only
        and leader is None
        and not inner.size_at_level
        and lfc == params.unconstrained
        and not balanced
        and (scores is None or not scores.any())
    )
    if fast:
        return {workers.name: place_podset(tree, params, pods, snap.topology_name, stats)}
    order = Ordering(lfc=lfc, affinity=gates.node_affinity_preferred)
    remaining = None
    if leader_request is not None:
        remaining = cap.remaining(
            simulate_empty=opts.simulate_empty, assumed=assumed, allocatable_only=opts.allocatable_only
        )
    leaf = _leaf_inputs(remaining, request, leader_request, eligible, pods, scores)
    general = GeneralParams(
        count=params.count,
        leader_count=1 if leader is not None else 0,
        level_idx=params.level_idx,
        slice_level_idx=params.slice_level_idx,
        slice_size=params.slice_size,
        required=params.required,
        unconstrained=params.unconstrained,
        order=order,
        size_at_level=inner.size_at_level,
        layers=inner.layers,
        balanced=balanced,
        top_idx=params.top_idx,
    )
    placed, leaders = place_general(tree, general, leaf, snap.topology_name, stats)
    out = {workers.name: build_assignment(tree, placed)}
    if leader is not None:
        out[leader.name] = build_assignment(tree, leaders)
    return out


def _count_in(remaining: Matrix, request: IntArray) -> IntArray:
    """Kueue's Requests.CountIn per leaf: how many times ``request`` fits."""
    cols = np.flatnonzero(request)
    if cols.size == 0:
        return np.zeros(remaining.shape[0], dtype=np.int64)
    counts: IntArray = np.clip(remaining[:, cols] // request[cols], 0, INT32_MAX).min(axis=1)
    return counts


def _leaf_inputs(
    remaining: Matrix | None,
    request: IntArray,
    leader_request: IntArray | None,
    eligible: npt.NDArray[np.bool_],
    pods: IntArray,
    scores: IntArray | None,
) -> LeafInputs:
    """Kueue's fillLeafCounts: a leader fits where its request fits once; the workers' count
    next to it is taken from what the leader leaves."""
    n = pods.shape[0]
    affinity = scores if scores is not None else np.zeros(n, dtype=np.int64)
    if leader_request is None or remaining is None:
        return LeafInputs(pods, pods, np.zeros(n, dtype=np.int64), affinity)
    leader = ((_count_in(remaining, leader_request) > 0) & eligible).astype(np.int64)
    with_leader = np.where(leader > 0, _count_in(remaining - leader_request, request), pods)
    with_leader[~eligible] = 0
    return LeafInputs(pods, with_leader, leader, affinity)
