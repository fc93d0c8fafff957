"""One workload's placement, written once: its PodSets' requests, then the engine per flavor.

Pure: plain inputs and the capacity model in, plain results out. The admission decision
(``controllers/decide.py``), ``kueue-tas plan`` (``cli/planner.py``) and the trial placement that
``describe`` and the map show (``capacity/trial_placement.py``) call these two functions and only
word what they return, so the three cannot answer differently for the same workload. Kueue has
this step once too: ``WorkloadsTopologyRequests`` (the requests, or why not) then
``FindTopologyAssignmentsForWorkload`` (the placement), shared by its scheduler, preemption and
flavor assigner.

* ``workload_requests``: each governed PodSet's request read (template annotations, else
  ``topologyRequest``; implied on a governed flavor when it asks for nothing), its level names
  resolved against its flavor's Topology, its levels checked, the PodSet groups checked, and the
  workload-wide constraint read and checked. The first problem comes back as data
  (``RequestProblem``): each caller words it for its reader (a check message, an input error
  naming the field's path, a line of ``describe``).
* ``place_workload``: one engine call per flavor, in the order the flavors first appear; the
  first failure stops it (what follows is not tried, as Kueue does). ``follow_up`` places an
  admitted workload again around what it holds (a node repair, a new elastic slice);
  ``without`` places as if those workloads were gone (preemption's question); ``closed`` as if
  those domains offered nothing (reservations, drain windows).

Never: write, read the API, or word a message for a reader (the engine's own failure text
aside, which every caller shows as it is).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from typing import Any

import pydantic

from kueue_tas.api.quantity import QuantityError
from kueue_tas.api.workload import PodSetTopologyRequestModel
from kueue_tas.capacity.live import LiveCapacity
from kueue_tas.capacity.rules import UsageEntry
from kueue_tas.capacity.workload_scope import leaves_the_domain, workload_scope
from kueue_tas.topology.admitted import place_options
from kueue_tas.topology.assignment import TopologyAssignment
from kueue_tas.topology.engine import PodSetResult, TopologySnapshot, WorkloadTopology
from kueue_tas.topology.features import DEFAULT_GATES, FeatureGates
from kueue_tas.topology.level_names import resolve_request
from kueue_tas.topology.model import PodSetRequest
from kueue_tas.topology.requests import (
    GroupMember,
    LevelProblem,
    TopologyRequestError,
    group_errors,
    level_problem,
    podset_request,
    requests_topology,
    template_annotations,
    uses_field,
)

__all__ = [
    "BadGroups",
    "BadScope",
    "Domain",
    "FollowUp",
    "InvalidRequest",
    "LevelRefused",
    "NoTopology",
    "PodSetInput",
    "RequestProblem",
    "WorkloadPlacement",
    "WorkloadRequests",
    "place_workload",
    "workload_requests",
]

# What reading a PodSet's request can raise on input nobody validated (a dump, a Workload written
# past the webhook): each is a problem of that PodSet, never a traceback.
_READ_ERRORS = (TopologyRequestError, QuantityError, pydantic.ValidationError, ValueError, TypeError)


@dataclass(frozen=True, slots=True)
class PodSetInput:
    """One PodSet of a workload as the pipeline reads it. ``index``: its position among the
    object's PodSets (callers name field paths with it); ``flavor``: the governed flavor it is
    placed on."""

    name: str
    count: int
    template: Mapping[str, Any]
    flavor: str
    index: int = 0
    topology_field: PodSetTopologyRequestModel | None = None


@dataclass(frozen=True, slots=True)
class InvalidRequest:
    """The PodSet's request cannot be read: ``error`` is what reading it raised."""

    podset: PodSetInput
    error: Exception


@dataclass(frozen=True, slots=True)
class NoTopology:
    """The PodSet's flavor has no usable Topology (yet)."""

    podset: PodSetInput


@dataclass(frozen=True, slots=True)
class LevelRefused:
    """A level the flavor's Topology lacks, or levels out of order (``levels.level_problem``)."""

    podset: PodSetInput
    request: PodSetRequest
    problem: LevelProblem
    from_field: bool  # the request came from ``topologyRequest``, not the template's annotations
    snapshot: TopologySnapshot


@dataclass(frozen=True, slots=True)
class BadGroups:
    """PodSet groups that are not leader + workers pairs; ``members`` as (PodSet, its resolved
    request, from ``topologyRequest``): the caller words the ``group_errors`` with its paths."""

    members: tuple[tuple[PodSetInput, PodSetRequest, bool], ...]


@dataclass(frozen=True, slots=True)
class BadScope:
    """The workload-wide constraint is refused; ``text`` names both settings."""

    text: str


RequestProblem = InvalidRequest | NoTopology | LevelRefused | BadGroups | BadScope


@dataclass(frozen=True, slots=True)
class WorkloadRequests:
    """The governed PodSets' resolved requests, in PodSet order, and the workload's resolved
    constraint (None: it has none)."""

    podsets: tuple[tuple[PodSetInput, PodSetRequest], ...]
    scope: WorkloadTopology | None = None

    def grouped(self) -> dict[str, list[tuple[PodSetInput, PodSetRequest]]]:
        """Flavor -> its PodSets and their requests, flavors in the order they first appear (the
        order they are placed in)."""
        out: dict[str, list[tuple[PodSetInput, PodSetRequest]]] = {}
        for ps, request in self.podsets:
            out.setdefault(ps.flavor, []).append((ps, request))
        return out

    def by_flavor(self) -> dict[str, list[PodSetRequest]]:
        """Flavor -> its requests, flavors in the order they first appear."""
        return {flavor: [r for _, r in members] for flavor, members in self.grouped().items()}

    def only(self, flavor: str) -> WorkloadRequests:
        """The requests on ``flavor`` alone (a failure judged again on its own flavor)."""
        return WorkloadRequests(tuple(p for p in self.podsets if p[0].flavor == flavor), self.scope)


def _read_request(ps: PodSetInput, prefix: str, gates: FeatureGates) -> tuple[PodSetRequest, bool]:
    """The PodSet's request as written (level names not yet resolved) and whether it came from
    ``topologyRequest``; raises one of ``_READ_ERRORS`` for a request that cannot be read."""
    from_field = uses_field(template_annotations(ps.template), ps.topology_field, prefix)
    implied = not requests_topology(ps.template, ps.topology_field, prefix)
    request = podset_request(
        ps.name, ps.count, ps.template, prefix=prefix, implied=implied, gates=gates, topology_field=ps.topology_field
    )
    return request, from_field


def workload_requests(
    podsets: Iterable[PodSetInput],
    capacity: LiveCapacity,
    *,
    prefix: str,
    gates: FeatureGates = DEFAULT_GATES,
    workload_annotations: Mapping[str, str] | None = None,
) -> WorkloadRequests | RequestProblem:
    """The requests of ``podsets`` (each on a governed flavor), or the first problem: per PodSet
    in order its request, its flavor's Topology, its levels; then the groups; then the
    workload-wide constraint read from ``workload_annotations``."""
    resolved: list[tuple[PodSetInput, PodSetRequest]] = []
    members: list[tuple[PodSetInput, PodSetRequest, bool]] = []
    for ps in podsets:
        try:
            request, from_field = _read_request(ps, prefix, gates)
        except _READ_ERRORS as exc:
            return InvalidRequest(ps, exc)
        snap = capacity.snapshot(ps.flavor)
        if snap is None:
            return NoTopology(ps)
        request = resolve_request(request, snap.levels, snap.level_names)
        problem = level_problem(snap.levels, request.topology)
        if problem is not None:
            return LevelRefused(ps, request, problem, from_field, snap)
        resolved.append((ps, request))
        members.append((ps, request, from_field))
    if group_errors([_neutral_member(r, f) for _, r, f in members], prefix):
        return BadGroups(tuple(members))
    requests = WorkloadRequests(tuple(resolved))
    scope = workload_scope(workload_annotations or {}, requests.by_flavor(), capacity, prefix)
    if isinstance(scope, str):
        return BadScope(scope)
    return WorkloadRequests(requests.podsets, scope)


def _neutral_member(request: PodSetRequest, from_field: bool) -> GroupMember:
    """A group member whose texts are left to the caller: here only whether there is an error."""
    return GroupMember(request.name, request.count, request.topology, "", "", from_field)


@dataclass(frozen=True, slots=True)
class FollowUp:
    """An admitted workload placed again around what it holds: ``current`` (PodSet ->
    assignment; the caller keeps the workload's own usage out of the model). With
    ``unhealthy_nodes``, a node repair (each PodSet keeps its healthy part; the pods of those
    nodes are placed again); without, a new elastic slice growing around the one it replaces."""

    current: Mapping[str, TopologyAssignment]
    unhealthy_nodes: tuple[str, ...] = ()

    @property
    def repair(self) -> bool:
        return bool(self.unhealthy_nodes)

    def options(self, podsets: Iterable[str]) -> dict[str, Any]:
        return place_options(self.current, podsets, unhealthy_nodes=self.unhealthy_nodes, elastic=not self.repair)


@dataclass(frozen=True, slots=True)
class Domain:
    """A domain of a flavor's Topology: ``level`` (a label key) and the values of every level
    from the top down to it (two racks of one name in two blocks are two domains)."""

    flavor: str
    level: str
    values: tuple[str, ...]

    def named(self) -> str:
        """``<level> "<value>"``: how messages name it."""
        return f'{self.level} "{self.values[-1]}"' if self.values else self.level


@dataclass
class WorkloadPlacement:
    """``results``: PodSet -> the engine's answer, for every PodSet tried (those of a flavor after
    the first failure are absent; a member of the failing flavor the engine did not reach has an
    empty result). ``failed``: the first failure, None when everything fits."""

    results: dict[str, PodSetResult] = field(default_factory=dict)
    failed: PodSetResult | None = None
    failed_flavor: str | None = None

    @property
    def fits(self) -> bool:
        return self.failed is None

    def assignments(self) -> dict[str, TopologyAssignment]:
        return {n: r.assignment for n, r in self.results.items() if r.assignment is not None}

    def usage(self, requests: WorkloadRequests) -> tuple[UsageEntry, ...]:
        """What holding this placement charges the model: one entry per placed PodSet, with its
        per-pod requests, named for the PodSet whose pods will fill its slots (as a decision's)."""
        per_pod = {r.name: (ps.flavor, r.requests) for ps, r in requests.podsets}
        return tuple(
            UsageEntry(per_pod[name][0], assignment, dict(per_pod[name][1]), name)
            for name, assignment in self.assignments().items()
            if name in per_pod
        )


def place_workload(
    requests: WorkloadRequests,
    capacity: LiveCapacity,
    *,
    gates: FeatureGates = DEFAULT_GATES,
    follow_up: FollowUp | None = None,
    allocatable_only: bool = False,
    without: Collection[str] = (),
    closed: Collection[Domain] = (),
) -> WorkloadPlacement:
    """Place ``requests`` on ``capacity``, holding nothing (see the module's note).
    ``allocatable_only``: on the empty cluster (can it ever fit? ``closed`` is then moot: a
    closed domain opens again). ``without``: workload keys whose usage is left out;
    ``closed``: domains that offer nothing to this placement."""
    out = WorkloadPlacement()
    with _hidden(capacity, without):
        for flavor, flavor_requests in requests.by_flavor().items():
            snap = capacity.snapshot(flavor)
            if snap is None:  # workload_requests refuses this before; kept for the type
                out.failed = PodSetResult(flavor_requests[0].name, None, f'flavor "{flavor}" has no usable Topology')
                out.failed_flavor = flavor
                return out
            snap = _with_closed(snap, [d for d in closed if d.flavor == flavor])
            extra: dict[str, Any] = {} if follow_up is None else follow_up.options(r.name for r in flavor_requests)
            if requests.scope is not None:
                extra["workload"] = requests.scope
            if allocatable_only:
                extra["allocatable_only"] = True
            results = snap.place(flavor_requests, gates=gates, **extra)
            out.results.update((r.name, r) for r in results)
            failed = next((r for r in results if r.assignment is None), None)
            scope = requests.scope
            # On the empty cluster the question is only whether the engine can place them at all.
            if failed is None and not allocatable_only and scope is not None and scope.required is not None:
                failed = leaves_the_domain(snap, scope.required, flavor_requests, results)
            if failed is not None:
                out.failed, out.failed_flavor = failed, flavor
                return out
    return out


@contextmanager
def _hidden(capacity: LiveCapacity, keys: Collection[str]) -> Iterator[None]:
    with ExitStack() as stack:
        for key in keys:
            stack.enter_context(capacity.without(key))
        yield


def _with_closed(snap: TopologySnapshot, closed: Sequence[Domain]) -> TopologySnapshot:
    """``snap``, or a copy of it whose leaves under ``closed`` offer nothing (the live snapshot
    stays as it is)."""
    if not closed:
        return snap
    tree = snap.tree
    shut: set[int] = set()
    for domain in closed:
        depth = tree.level_index(domain.level)
        if depth is None:
            continue
        shut.update(tree.leaf_range(depth, domain.values[: depth + 1]))
    if not shut:
        return snap
    copy = snap.copy()
    copy.capacity.seal_many(shut)
    return copy
