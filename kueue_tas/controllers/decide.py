"""The admission decision for one Workload and one of our checks: pure, no I/O.

Ready: every PodSet the check governs fits; here are the assignments.
Retry: something does not fit now; the message says what the best domain could
hold and what limited it (Kueue's own text).
Rejected: the request can never be satisfied (malformed annotation, unknown
level, more pods than the topology holds even when empty).
Pending: a PodSet is on a flavor meant to be ours that cannot be placed on (its Topology is
missing, the flavor is put on two Topologies, ...), or asks for a topology on a flavor the
check does not govern while no PodSet is governed. Never Ready with nothing assigned: the
pods would then be charged nowhere. The configuration's next change decides it again.

A new elastic slice is decided with ``current``, the assignments of the slice it replaces
(``kueue_tas.topology.admitted.slice_replacement``, the rule ``plan`` follows too); the caller keeps
that slice's usage out of ``capacity`` for the decision.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Final

from kueue_tas.api import constants as c
from kueue_tas.api.object_base import INT32_MAX
from kueue_tas.api.workload import MAX_PODSETS, Workload, podset_count_fault
from kueue_tas.capacity.assignment_record import record_suffix
from kueue_tas.capacity.live import LiveCapacity
from kueue_tas.capacity.problem_text import problem_message
from kueue_tas.capacity.reservation import ReservationView, place_respecting
from kueue_tas.capacity.rules import UsageEntry
from kueue_tas.capacity.workload_placement import (
    Domain,
    FollowUp,
    NoTopology,
    PodSetInput,
    WorkloadPlacement,
    WorkloadRequests,
    place_workload,
    workload_requests,
)
from kueue_tas.topology.assignment import TopologyAssignment
from kueue_tas.topology.explain import hold
from kueue_tas.topology.features import DEFAULT_GATES, FeatureGates
from kueue_tas.topology.requests import requests_topology

# Kueue's Workload API limit (v1beta2): admissionChecks[].message maxLength (podSets maxItems: MAX_PODSETS).
CHECK_MESSAGE_LIMIT: Final = 32768


class Outcome(StrEnum):
    PENDING = c.CHECK_STATE_PENDING
    READY = c.CHECK_STATE_READY
    RETRY = c.CHECK_STATE_RETRY
    REJECTED = c.CHECK_STATE_REJECTED


@dataclass(frozen=True, slots=True)
class PodSetPlacement:
    name: str
    flavor: str
    assignment: TopologyAssignment
    per_pod: dict[str, int]

    @property
    def multi_domain(self) -> bool:
        return len(self.assignment.domains) > 1

    def gated(self, repairs: bool) -> bool:
        """Whether its pods get our scheduling gate and their domain from the ungater.

        A multi-domain PodSet always does. A single-domain one is pinned by the check's
        ``podSetUpdates`` nodeSelector instead (one write, no pod patches), unless node repairs
        are on and it sits on named hosts: Kueue keeps ``podSetUpdates`` unchanged while the
        workload is admitted, so only pods the ungater places can follow a repair (Kueue's own
        TAS gates every pod for the same reason)."""
        if self.multi_domain:
            return True
        return repairs and bool(self.assignment.levels) and self.assignment.levels[-1] == c.HOSTNAME_LABEL

    def node_selector(self, repairs: bool) -> dict[str, str]:
        """For a single-domain PodSet that is not gated: the labels that pin every pod to that domain."""
        if len(self.assignment.domains) != 1 or self.gated(repairs):
            return {}
        return dict(zip(self.assignment.levels, self.assignment.domains[0].values, strict=True))


@dataclass
class Decision:
    """``wait_started`` / ``retry_after``: a Retry that holds a PodSet for its preferred level
    (kueue-tas's patience): when the wait began, and the seconds left of it."""

    outcome: Outcome
    message: str
    placements: list[PodSetPlacement] = field(default_factory=list)
    wait_started: datetime | None = None
    retry_after: float | None = None
    # Why a Retry (``RETRY_REASONS``), for ``kueue_tas_retries_total``.
    reason: str = ""
    # A Retry because it does not fit now: what was placed (topology-driven preemption asks
    # again "as if some workloads were gone").
    requests: WorkloadRequests | None = None
    # Annotations the Retry records on the Workload before its entry (a reservation, when its
    # wait for a domain began): what survives Kueue's requeue of it.
    marks: dict[str, str] = field(default_factory=dict)

    def usage(self) -> tuple[UsageEntry, ...]:
        return tuple(UsageEntry(p.flavor, p.assignment, p.per_pod, p.name) for p in self.placements)


def governed_podsets(workload: Workload, check_flavors: set[str]) -> list[tuple[str, int, dict[str, object], str]]:
    """(name, admitted count, template, flavor) of each PodSet assigned one of the check's flavors."""
    out = []
    for ps in workload.spec.pod_sets:
        psa = workload.pod_set_assignment(ps.name)
        if psa is None:
            continue
        flavors = [f for f in dict.fromkeys(psa.flavors.values()) if f in check_flavors]
        if not flavors:
            continue
        count = psa.count if psa.count is not None else ps.count
        out.append((ps.name, count, ps.template, flavors[0]))
    return out


def _unusable_problem(workload: Workload, unusable: Mapping[str, str]) -> str | None:
    """PodSets on a flavor that is meant to be ours but cannot be placed on, by problem."""
    by_problem: dict[str, list[str]] = {}
    for ps in workload.spec.pod_sets:
        psa = workload.pod_set_assignment(ps.name)
        if psa is None:
            continue
        for flavor in dict.fromkeys(psa.flavors.values()):
            if flavor in unusable:
                by_problem.setdefault(unusable[flavor], []).append(ps.name)
    if not by_problem:
        return None
    parts = []
    for problem, names in by_problem.items():
        quoted = ", ".join(f'"{n}"' for n in names)
        parts.append(f"{'PodSet' if len(names) == 1 else 'PodSets'} {quoted}: {problem}")
    return "; ".join(parts)


def _ungoverned_request(workload: Workload, check_flavors: set[str], prefix: str) -> str | None:
    """The first PodSet that asks for a topology on a flavor ``check_flavors`` lacks."""
    for ps in workload.spec.pod_sets:
        psa = workload.pod_set_assignment(ps.name)
        if psa is None or not requests_topology(ps.template, ps.topology_request, prefix):
            continue
        flavors = [f for f in dict.fromkeys(psa.flavors.values()) if f not in check_flavors]
        if flavors:
            return (
                f'PodSet "{ps.name}" requests a topology, but its ResourceFlavor "{flavors[0]}" is not '
                "one this AdmissionCheck governs (onFlavors of the ClusterQueue's admissionChecksStrategy)"
            )
    return None


def _podsets_problem(workload: Workload) -> str | None:
    """What Kueue's Workload schema refuses in the PodSets and their counts (one line, in the
    API server's words), or None. The rule is ``api.workload.podset_count_fault``."""
    fault = podset_count_fault(workload)
    if fault is None:
        return None
    if fault.kind == "empty":
        return "spec.podSets: Required value: must have at least 1 item"
    if fault.kind == "too_many":
        return f"spec.podSets: Too many: {fault.total}: must have at most {MAX_PODSETS} items"
    path = (
        f"status.admission.podSetAssignments[{fault.podset}].count"
        if fault.admitted
        else f"spec.podSets[{fault.index}].count"
    )
    bound = "greater than or equal to 0" if fault.count < 0 else f"less than or equal to {INT32_MAX}"
    return f'PodSet "{fault.podset}": {path}: Invalid value: {fault.count}: must be {bound}'


def decide(
    workload: Workload,
    check_flavors: set[str],
    capacity: LiveCapacity,
    prefix: str = c.DEFAULT_ANNOTATION_PREFIX,
    gates: FeatureGates = DEFAULT_GATES,
    *,
    current: Mapping[str, TopologyAssignment] | None = None,
    unhealthy_nodes: tuple[str, ...] = (),
    unusable: Mapping[str, str] | None = None,
    workload_annotations: Mapping[str, str] | None = None,
    now: datetime | None = None,
    wait_started: datetime | None = None,
    closed: Collection[Domain] = (),
    reservations: ReservationView | None = None,
) -> Decision:
    """``current`` with ``unhealthy_nodes``: the node repair of an admitted workload (the engine
    keeps each assignment's healthy part and places the pods of those nodes again; the caller
    keeps the workload's own usage out of ``capacity``); ``current`` alone: a new elastic slice.
    ``unusable``: flavor -> problem, for flavors meant to be under the check that cannot be
    placed on (``kueue_tas.controllers.check_flavors``); a PodSet on one keeps the entry Pending.
    ``workload_annotations``: the Job's or JobSet's own annotations (or the Workload's), read
    for kueue-tas's workload-wide constraint (``kueue_tas.topology.engine.workload_domain``).
    ``now`` (wall time) turns on the patience of PodSets with a preferred wait
    (``kueue_tas.topology.explain.patience``), counted from ``wait_started`` when an earlier decision
    already held the workload; without ``now`` (a repair, an elastic slice) nothing waits.
    ``closed``: domains held for other workloads (a preemption's), which it may not use;
    ``reservations``: the domains reserved for others, entered only as backfill or leaving
    their holder room (``capacity.reservation.place_respecting``)."""
    problem = _podsets_problem(workload)
    if problem is not None:
        return Decision(Outcome.REJECTED, problem)
    problem = _unusable_problem(workload, unusable or {})
    if problem is not None:
        return Decision(Outcome.PENDING, problem)
    requests = workload_requests(
        inputs_of(workload, check_flavors),
        capacity,
        prefix=prefix,
        gates=gates,
        workload_annotations=workload_annotations,
    )
    if not isinstance(requests, WorkloadRequests):
        if isinstance(requests, NoTopology):
            return Decision(Outcome.RETRY, problem_message(requests, prefix), reason="no_topology")
        return Decision(Outcome.REJECTED, problem_message(requests, prefix))
    follow_up = None if current is None else FollowUp(current, unhealthy_nodes)
    if reservations is not None and reservations.reservations and follow_up is None:
        placed, _ = place_respecting(
            requests,
            capacity,
            reservations.key,
            reservations.reservations,
            reservations.holder_requests,
            reservations.occupants,
            now=reservations.now,
            runtime_s=reservations.runtime_s,
            gates=gates,
            closed=list(closed),
        )
    else:
        placed = place_workload(requests, capacity, gates=gates, follow_up=follow_up, closed=closed)
    placements: list[PodSetPlacement] = []
    # Flavor by flavor as they were placed: a flavor's preferred wait is judged before a later
    # flavor's failure (which the engine reached only because the earlier one fitted).
    for flavor, members in requests.grouped().items():
        if flavor == placed.failed_flavor:
            return _not_placed(requests, capacity, gates, follow_up, placed)
        snap = capacity.snapshot(flavor)
        assert snap is not None
        for _, request in members:
            assignment = placed.results[request.name].assignment
            assert assignment is not None
            waits = now is not None and current is None  # a repair or an elastic slice never waits
            held = hold(snap, request, assignment, wait_started or now, now) if waits and now is not None else None
            if held is not None:
                return Decision(
                    Outcome.RETRY,
                    held.message(snap.level_names.called(held.level)),
                    wait_started=wait_started or now,
                    retry_after=(held.until - now).total_seconds() if now is not None else None,
                    reason="preferred_wait",
                )
            placements.append(PodSetPlacement(request.name, flavor, assignment, dict(request.requests)))
    if not placements:
        problem = _ungoverned_request(workload, check_flavors, prefix)
        if problem is not None:
            return Decision(Outcome.PENDING, problem)
        return Decision(Outcome.READY, "no PodSet needs a topology assignment")
    return Decision(Outcome.READY, _ready_message(workload, placements), placements)


def inputs_of(workload: Workload, check_flavors: set[str]) -> list[PodSetInput]:
    """The governed PodSets, as the placement pipeline reads them."""
    out = []
    for name, count, template, flavor in governed_podsets(workload, check_flavors):
        spec_ps = workload.pod_set(name)
        field = spec_ps.topology_request if spec_ps is not None else None
        out.append(PodSetInput(name, count, template, flavor, topology_field=field))
    return out


def _not_placed(
    requests: WorkloadRequests,
    capacity: LiveCapacity,
    gates: FeatureGates,
    follow_up: FollowUp | None,
    placed: WorkloadPlacement,
) -> Decision:
    """Retry, or Rejected when the failing flavor's PodSets could never fit. Judged without
    ``current`` for an elastic slice: failing to grow around the pods it keeps says nothing
    about the request itself, so it is retried, not rejected. A repair is judged with it: its
    pods must stay in their domain, so "never" there means no other workload's leaving can make
    room (only nodes can). Otherwise "never" counts the nodes cordoned or NotReady now as
    serving: a pool drained for an upgrade, or a rack down for a while, is no reason to have
    Kueue deactivate the workloads that wait for it (DST seed 3301264's history)."""
    failed, flavor = placed.failed, placed.failed_flavor
    assert failed is not None and flavor is not None
    repair = follow_up is not None and follow_up.repair
    only = requests.only(flavor)
    never = place_workload(only, capacity, gates=gates, follow_up=follow_up if repair else None, allocatable_only=True)
    message = f'PodSet "{failed.name}": {failed.message}'
    if never.failed is not None and repair:
        where = "in its domain, even with every other workload gone"
        return Decision(
            Outcome.REJECTED, f'PodSet "{never.failed.name}" can never fit, {where}: {never.failed.message}'
        )
    if never.failed is not None:
        serving = place_workload(only, capacity.every_node_serving(), gates=gates, allocatable_only=True)
        if serving.failed is not None:
            where = "even on an empty cluster"
            return Decision(
                Outcome.REJECTED, f'PodSet "{serving.failed.name}" can never fit, {where}: {serving.failed.message}'
            )
        message += "; it fits only once nodes cordoned or NotReady now serve again"
    return Decision(Outcome.RETRY, message, reason="does_not_fit", requests=requests)


def _ready_message(workload: Workload, placements: list[PodSetPlacement]) -> str:
    """The summary, then our record of what we assigned (``assignment_record``): the record
    is what tells an edited annotation apart, so it is never the part cut to fit the limit."""
    record = record_suffix(workload.metadata.uid or "", ((p.name, p.assignment) for p in placements))
    summary = "topology assignment: " + ", ".join(
        f"{p.name}: {p.assignment.total} pods in {len(p.assignment.domains)} domain(s)" for p in placements
    )
    room = CHECK_MESSAGE_LIMIT - len(record)
    if len(summary) > room:
        summary = summary[: room - 3] + "..."
    return summary + record
