"""The workload-wide constraint of one decision: read, checked against the Topology, and
kept after a repair (pure; the placement itself is ``kueue_tas.topology.engine.workload_domain``).

The constraint is the Job's or JobSet's (``kueue-tas.io/workload-required-topology`` /
``-preferred-topology`` in its metadata; the caller reads them, the Workload's own annotations
first). Every governed PodSet must be on one flavor, so that one Topology holds them all; a
PodSet's own level above the workload's, an unknown level, or a preferred level above the
required one is refused with a line naming both settings.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from kueue_tas.capacity.live import LiveCapacity
from kueue_tas.topology.engine import (
    PodSetResult,
    TopologySnapshot,
    WorkloadTopology,
    parse_workload_topology,
    podset_level_problem,
    resolve_workload_topology,
    workload_keys,
    workload_level_problem,
)
from kueue_tas.topology.level_names import LevelNames
from kueue_tas.topology.model import PodSetRequest
from kueue_tas.topology.requests import TopologyRequestError


def workload_scope(
    annotations: Mapping[str, str],
    groups: Mapping[str, Sequence[PodSetRequest]],
    capacity: LiveCapacity,
    prefix: str,
) -> WorkloadTopology | str | None:
    """The resolved constraint (None: the workload has none), or why it is refused."""
    try:
        scope = parse_workload_topology(annotations, prefix)
    except TopologyRequestError as exc:
        return "workload: " + "; ".join(exc.errors)
    if scope is None or not groups:
        return None
    if len(groups) > 1:
        on = ", ".join(f'"{flavor}" ({", ".join(r.name for r in rs)})' for flavor, rs in groups.items())
        return (
            f"workload: a workload-wide topology needs every PodSet on one flavor's Topology; "
            f"the PodSets are on flavors {on}"
        )
    flavor, requests = next(iter(groups.items()))
    snap = capacity.snapshot(flavor)
    if snap is None:  # decide refuses this before; kept for the type
        return f'workload: flavor "{flavor}" has no usable Topology'
    scope = resolve_workload_topology(scope, snap.levels, snap.level_names)
    problem = workload_levels_rejection(scope, requests, snap.levels, snap.level_names, snap.topology_name, prefix)
    return scope if problem is None else problem


def workload_levels_rejection(
    scope: WorkloadTopology,
    requests: Sequence[PodSetRequest],
    levels: Sequence[str],
    names: LevelNames,
    topology_name: str,
    prefix: str,
) -> str | None:
    """Why the resolved ``scope`` does not suit a Topology with ``levels`` and the PodSets'
    resolved ``requests``, in one line, or None (the admitter, ``plan`` and the webhook)."""
    problem = workload_level_problem(scope, levels, names, topology_name, prefix)
    if problem is not None:
        return f"workload: {problem}"
    required_key, preferred_key = workload_keys(prefix)
    bound_key = required_key if scope.required is not None else preferred_key
    bound = scope.required if scope.required is not None else scope.preferred
    for request in requests:
        above = podset_level_problem(request, levels, scope)
        if above is not None:
            setting, level = above
            return (
                f'PodSet "{request.name}": its {setting} level "{names.called(level)}" is broader than the '
                f"workload's level \"{names.called(bound or '')}\" (annotation {bound_key}); a PodSet's levels "
                "must be the workload's level or below it"
            )
    return None


def leaves_the_domain(
    snap: TopologySnapshot, level: str, requests: Sequence[PodSetRequest], results: Sequence[PodSetResult]
) -> PodSetResult | None:
    """A failure when ``results`` (a repair's: it keeps each pod's own domain, and may move the
    pods of a PodSet without a level of its own anywhere) use more than one domain of
    ``level``; None when they stay in one."""
    if len(snap.domains_at((r.assignment for r in results if r.assignment is not None), level)) <= 1:
        return None
    name = requests[0].name if requests else ""
    return PodSetResult(
        name, None, f'the placement would leave the workload\'s one domain of level "{snap.level_names.called(level)}"'
    )
