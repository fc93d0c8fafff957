"""PodSet groups: which PodSets of a workload are placed together, and who leads.

As Kueue's FindTopologyAssignmentsForFlavor: PodSets sharing ``topology.group``
form one group (an ungrouped PodSet is its own group, keyed by its position as
Kueue keys it), groups are placed in order of first appearance, and in a group
the first PodSet is the workers unless the second has more pods; the other one
is the leader (Kueue's validation allows exactly two members, one of them with
a single pod). Members beyond the second are not placed (Kueue ignores them too).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from kueue_tas.topology.engine.results import PodSetResult
from kueue_tas.topology.model import PodSetRequest


@dataclass(frozen=True, slots=True)
class PlacementGroup:
    members: tuple[int, ...]  # positions in the request list, in order
    workers: int
    leader: int | None


def group_podsets(podsets: Sequence[PodSetRequest]) -> list[PlacementGroup]:
    if all(ps.topology is None or ps.topology.group is None for ps in podsets):
        return [PlacementGroup((idx,), idx, None) for idx in range(len(podsets))]
    keyed: dict[str, list[int]] = {}
    for idx, ps in enumerate(podsets):
        group = ps.topology.group if ps.topology is not None else None
        keyed.setdefault(group if group is not None else str(idx), []).append(idx)
    out: list[PlacementGroup] = []
    for members in keyed.values():
        workers, leader = members[0], None
        if len(members) > 1:
            leader = members[1]
            if podsets[leader].count > podsets[workers].count:
                workers, leader = leader, workers
        out.append(PlacementGroup(tuple(members), workers, leader))
    return out


def ordered_results(podsets: Sequence[PodSetRequest], got: Mapping[int, PodSetResult]) -> list[PodSetResult]:
    """Results in request order, up to the last PodSet that has one; a PodSet before it that
    was not placed (its group came after the failing one) gets an empty "not placed" result."""
    if not got:
        return []
    last = max(got)
    return [got.get(i, PodSetResult(podsets[i].name, None)) for i in range(last + 1)]
