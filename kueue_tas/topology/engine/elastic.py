"""Elastic workload slices with TAS (gates ElasticJobsViaWorkloadSlices + ...WithTAS).

Kueue's handleElasticWorkload: a new slice replaces an admitted one whose
assignment is ``previous``. If a previous assignment names a node that is gone,
the group is placed afresh (not handled here). Otherwise scale-up keeps the
previous pods where they are (charged as assumed) and places only the added
pods, scale-down cuts the previous assignment down (from its end), and the same
count reuses it. The leader keeps its previous assignment on every elastic path.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from kueue_tas.topology.assignment import DomainAssignment, TopologyAssignment
from kueue_tas.topology.engine.capacity_matrix import Matrix
from kueue_tas.topology.engine.find_assignment import PlaceOptions, find_topology_assignment
from kueue_tas.topology.engine.flavor_view import FlavorView
from kueue_tas.topology.engine.placement import PlacementFailure
from kueue_tas.topology.engine.replacement import merge, stale_domain
from kueue_tas.topology.model import PodSetRequest


@dataclass(frozen=True, slots=True)
class ElasticOutcome:
    """Assignments by PodSet name; on failure only the workers carry ``failure`` (the
    leader then has no result, as in Kueue)."""

    assignments: dict[str, TopologyAssignment | None]
    failure: str | None = None


def truncate(assignment: TopologyAssignment, count: int) -> TopologyAssignment:
    """Kueue's TruncateAssignment: keep domains in order until ``count`` pods."""
    out: list[DomainAssignment] = []
    left = count
    for d in assignment.domains:
        if left <= 0:
            break
        out.append(d if d.count <= left else DomainAssignment(d.values, left))
        left -= min(d.count, left)
    return TopologyAssignment(assignment.levels, tuple(out))


def place_elastic(
    snap: FlavorView,
    workers: PodSetRequest,
    leader: PodSetRequest | None,
    previous: TopologyAssignment,
    leader_previous: TopologyAssignment | None,
    assumed: Matrix | None,
    opts: PlaceOptions,
) -> ElasticOutcome | None:
    """The elastic decision, or None when a previous assignment is stale (place afresh)."""
    tree = snap.tree
    if stale_domain(tree, previous) is not None:
        return None
    if leader_previous is not None and stale_domain(tree, leader_previous) is not None:
        return None
    before = previous.total
    leader_out: dict[str, TopologyAssignment | None] = {}
    if leader is not None:
        leader_out[leader.name] = leader_previous
    if workers.count < before:
        return ElasticOutcome({workers.name: truncate(previous, workers.count), **leader_out})
    if workers.count == before:
        return ElasticOutcome({workers.name: previous, **leader_out})
    delta = dataclasses.replace(workers, count=workers.count - before)
    assumed = snap.capacity.add_assumed(assumed, previous, workers.requests)
    placement_leader = leader
    if leader is not None and leader_previous is not None:
        assumed = snap.capacity.add_assumed(assumed, leader_previous, leader.requests)
        placement_leader = None
    try:
        placed = find_topology_assignment(snap, delta, placement_leader, assumed, opts)
    except PlacementFailure as failure:
        return ElasticOutcome({workers.name: None}, str(failure))
    out: dict[str, TopologyAssignment | None] = {workers.name: merge(tree, placed[workers.name], previous)}
    if leader is not None:
        out[leader.name] = leader_previous if leader_previous is not None else placed[leader.name]
    return ElasticOutcome(out)
