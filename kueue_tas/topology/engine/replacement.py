"""Node replacement: re-place the pods of failed nodes, keep the rest of the assignment.

Kueue's findReplacementAssignment, for one PodSet: drop the failed node's domain
from the admitted assignment, refuse when what is left names a node that is gone
("stale"), confine the new pods to the domain the kept ones require (the
required-level domain, or the domain of the slice left incomplete), place only the
missing pods, and merge them into what is kept.

Generalisation: Kueue handles only the workload's first unhealthy node; here every
unhealthy node is handled in one decision. All their domains are removed from the
assignment, the missing count is the sum of their pods, and that count is placed
in one run with the required / incomplete-slice domain computed from the kept part
exactly as Kueue computes it for one node. With one unhealthy node this is Kueue's
behaviour; the "cannot find replacement" text then names all removed nodes,
comma-separated. When several domains could complete an incomplete slice, Kueue
picks one in map order (random); here the first in name order.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection

from kueue_tas.topology import messages
from kueue_tas.topology.assignment import DomainAssignment, TopologyAssignment
from kueue_tas.topology.engine.capacity_matrix import Matrix
from kueue_tas.topology.engine.find_assignment import DomainLimit, PlaceOptions, find_topology_assignment
from kueue_tas.topology.engine.flavor_view import FlavorView
from kueue_tas.topology.engine.layers import effective_layers
from kueue_tas.topology.engine.placement import PlacementFailure, requested_level_key
from kueue_tas.topology.engine.tree import TopologyTree
from kueue_tas.topology.features import FeatureGates
from kueue_tas.topology.model import PodSetRequest, TopologyRequest


def touches(assignment: TopologyAssignment, nodes: Collection[str]) -> bool:
    return any(d.values[-1] in nodes for d in assignment.domains)


def stale_domain(tree: TopologyTree, assignment: TopologyAssignment) -> str | None:
    """Kueue's IsTopologyAssignmentStale: the first value of a domain that is not a leaf now."""
    for d in assignment.domains:
        if tree.leaf_index_of(d.values) is None:
            return d.values[0]
    return None


def merge(tree: TopologyTree, a: TopologyAssignment, b: TopologyAssignment) -> TopologyAssignment:
    """Kueue's mergeTopologyAssignments: both lists in leaf name order, same domains summed."""

    def key(d: DomainAssignment) -> tuple[str, ...]:
        leaf = tree.leaf_index_of(d.values)
        return tree.leaves.values[leaf] if leaf is not None else tuple(d.values)

    merged: list[DomainAssignment] = []
    for d in sorted((*a.domains, *b.domains), key=key):
        if merged and merged[-1].values == d.values:
            merged[-1] = DomainAssignment(d.values, merged[-1].count + d.count)
        else:
            merged.append(d)
    return TopologyAssignment(a.levels, tuple(merged))


def _ancestor(tree: TopologyTree, leaf: int, level: int) -> int:
    d = leaf
    for lvl in range(tree.depth - 1, level, -1):
        d = int(tree.levels[lvl].parent[d])
    return d


def _incomplete_slice_domain(
    tree: TopologyTree, kept: TopologyAssignment, missing: int, size: int, level_key: str
) -> DomainLimit | None:
    """Kueue's findIncompleteSliceDomain: the slice-level domain whose kept pods plus the
    missing ones make whole slices."""
    level = tree.level_index(level_key)
    if level is None:
        return None
    pods: dict[int, int] = {}
    for d in kept.domains:
        leaf = tree.leaf_index_of(d.values)
        if leaf is not None:
            dom = _ancestor(tree, leaf, level)
            pods[dom] = pods.get(dom, 0) + d.count
    for dom in sorted(pods):
        if (pods[dom] + missing) % size == 0:
            return DomainLimit(level, dom)
    return None


def required_replacement_domain(
    tree: TopologyTree, ps: PodSetRequest, kept: TopologyAssignment, missing: int, gates: FeatureGates
) -> DomainLimit | None:
    """Kueue's requiredReplacementDomain (None: anywhere)."""
    key = requested_level_key(tree, ps.topology, ps.implied)
    level = tree.level_index(key) if key is not None else None
    if level is None or not kept.domains:
        return None
    layers = effective_layers(ps.topology, gates)
    slice_size = layers[0].size if layers else 1
    if slice_size <= 0:
        return None
    if layers and missing % slice_size != 0:
        if len(layers) > 1:
            for layer in reversed(layers):
                if missing % layer.size != 0:
                    return _incomplete_slice_domain(tree, kept, missing, layer.size, layer.level)
        return _incomplete_slice_domain(tree, kept, missing, slice_size, layers[0].level)
    if ps.topology is None or ps.topology.required is None:
        return None
    leaf = tree.leaf_index_of(kept.domains[0].values)
    return DomainLimit(level, _ancestor(tree, leaf, level)) if leaf is not None else None


def _replacement_request(ps: PodSetRequest, missing: int, confined: bool, gates: FeatureGates) -> PodSetRequest:
    """The missing pods as a request; when confined to a domain and they are not whole
    slices, slice by the innermost layer whose size divides them (else not at all)."""
    topology: TopologyRequest | None = ps.topology
    layers = effective_layers(topology, gates)
    if topology is not None and layers and confined and missing % layers[0].size != 0:
        inner = next((layer for layer in reversed(layers) if missing % layer.size == 0), None)
        topology = dataclasses.replace(
            topology,
            slice_layers=(),
            slice_level=inner.level if inner is not None else None,
            slice_size=inner.size if inner is not None else None,
        )
    return dataclasses.replace(ps, count=missing, topology=topology)


def replace_nodes(
    snap: FlavorView,
    ps: PodSetRequest,
    current: TopologyAssignment,
    unhealthy: Collection[str],
    assumed: Matrix | None,
    opts: PlaceOptions,
) -> tuple[TopologyAssignment, TopologyAssignment]:
    """(merged assignment, replacement part), or PlacementFailure with Kueue's text."""
    tree = snap.tree
    removed = [d for d in current.domains if d.values[-1] in unhealthy]
    kept = TopologyAssignment(current.levels, tuple(d for d in current.domains if d.values[-1] not in unhealthy))
    missing = sum(d.count for d in removed)
    stale = stale_domain(tree, kept)
    if stale is not None:
        raise PlacementFailure(messages.stale_assignment(stale))
    limit = required_replacement_domain(tree, ps, kept, missing, opts.gates)
    request = _replacement_request(ps, missing, limit is not None, opts.gates)
    # Kueue never simulates an empty cluster for a replacement.
    run_opts = dataclasses.replace(opts, simulate_empty=False)
    replacement = find_topology_assignment(snap, request, None, assumed, run_opts, limit=limit)[ps.name]
    if not replacement.domains:
        names = ", ".join(dict.fromkeys(d.values[-1] for d in removed))
        raise PlacementFailure(messages.no_replacement_found(names))
    return merge(tree, replacement, kept), replacement
