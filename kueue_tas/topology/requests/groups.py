"""Checks across the PodSets of one workload that share a group name (Kueue's PodSet groups).

Kueue's job webhooks (``ValidatePodSetGroupingTopology`` in ``jobframework/tas_validation.go``)
allow a group only as a leader + workers pair: exactly 2 PodSets, at least one of them with a
single pod, both asking for the same ``required`` (or the same ``preferred``) level; with
kueue-tas's required + preferred, the same level for each of the two. The
engine relies on the pair shape (the smaller PodSet is the leader, placed as one pod), so a
workload breaking it is refused here, with Kueue's texts.

The level rule is the job webhooks' only: Kueue's Workload webhook does not check groups,
and its scheduler places a pair stated in ``spec.podSets[].topologyRequest`` whatever the
members' levels (the workers' request decides; Kueue's own cases group unconstrained
PodSets). So it applies only when both members state their request in our annotations.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

from kueue_tas.api import constants as c
from kueue_tas.topology.model import TopologyRequest


@dataclass(frozen=True, slots=True)
class GroupMember:
    """One PodSet as the group checks see it.

    ``group_field`` names where its group name was given (an annotation key or a Workload
    field path); ``where`` names the PodSet in the other member's messages.
    """

    podset: str
    count: int
    request: TopologyRequest | None
    group_field: str
    where: str
    from_field: bool = False  # the request is a Workload's topologyRequest (Kueue's scheduler input)


@dataclass(frozen=True, slots=True)
class GroupError:
    podset: str
    message: str


def _consistent(a: TopologyRequest, b: TopologyRequest) -> bool:
    if (a.required is None and a.preferred is None) or (b.required is None and b.preferred is None):
        return False
    return a.required == b.required and a.preferred == b.preferred


def group_errors(members: Sequence[GroupMember], prefix: str = c.DEFAULT_ANNOTATION_PREFIX) -> list[GroupError]:
    """Every problem with the groups of one workload's PodSets, in Kueue's wording ([] when valid)."""
    groups: dict[str, list[GroupMember]] = {}
    for m in members:
        if m.request is not None and m.request.group is not None:
            groups.setdefault(m.request.group, []).append(m)
    errors: list[GroupError] = []
    for name, group in groups.items():
        shown = json.dumps(name)
        if len(group) != 2:
            errors.extend(
                GroupError(
                    m.podset,
                    f"{m.group_field}: invalid value {shown}: can only define groups of exactly 2 pod sets, "
                    f"got: {len(group)} pod set(s)",
                )
                for m in group
            )
            continue
        first, second = group
        if first.count != 1 and second.count != 1:
            text = (
                "can only define groups where at least one pod set has only 1 replica, got: "
                f"{first.count} replica(s) and {second.count} replica(s) in the group"
            )
            errors.extend(GroupError(m.podset, f"{m.group_field}: invalid value {shown}: {text}") for m in group)
        assert first.request is not None and second.request is not None
        from_annotations = not (first.from_field or second.from_field)
        if from_annotations and not _consistent(first.request, second.request):
            required = prefix + c.SUFFIX_REQUIRED_TOPOLOGY
            preferred = prefix + c.SUFFIX_PREFERRED_TOPOLOGY
            for m, other in ((first, second), (second, first)):
                errors.append(
                    GroupError(
                        m.podset,
                        f"must specify '{required}' or '{preferred}' topology consistent with "
                        f"'{other.where}' in group '{name}'",
                    )
                )
    return errors
