"""``describe workload``'s description of one Workload, built from plain objects (no I/O)."""

from __future__ import annotations

from collections.abc import Container, Iterable, Mapping
from typing import Any

from kueue_tas.api import constants as c
from kueue_tas.api.object_base import find_condition
from kueue_tas.api.workload import Workload
from kueue_tas.capacity.daemonsets import Reservation
from kueue_tas.capacity.domain_records import hold_from, reservation_from, stamp
from kueue_tas.capacity.hostnames import NodeHosts
from kueue_tas.capacity.live import LiveCapacity
from kueue_tas.capacity.pod_counts import domain_paths, podset_pod_counts
from kueue_tas.capacity.rules import assignment_trusted
from kueue_tas.capacity.trial_placement import PodSetTrial, trial_placement
from kueue_tas.capacity.workload_health import workload_placement_problems
from kueue_tas.cli.cluster_read import TasConfig
from kueue_tas.cli.describe_model import (
    SHOWN_CONDITIONS,
    CheckStatus,
    DomainStatus,
    EventView,
    PodSetStatus,
    WorkloadDescription,
)
from kueue_tas.cli.describe_reasons import why_unplaced
from kueue_tas.kube.slim import SlimPod
from kueue_tas.topology.assignment import TopologyAssignment
from kueue_tas.topology.codec import decode_assignment_annotation
from kueue_tas.topology.explain import NodeIndex
from kueue_tas.topology.features import DEFAULT_GATES, FeatureGates
from kueue_tas.topology.model import NodeInfo, TopologyRequest
from kueue_tas.topology.requests import TopologyRequestError, parse_template_topology_request

MAX_EVENTS = 10


def _request_dict(req: TopologyRequest | None, implied: bool) -> dict[str, Any] | None:
    if req is None:
        return {"implied": True} if implied else None
    out: dict[str, Any] = {}
    if req.required is not None:
        out["required"] = req.required
    if req.preferred is not None:
        out["preferred"] = req.preferred
    if req.unconstrained is not None:
        out["unconstrained"] = req.unconstrained
    if req.slice_level is not None:
        out["sliceLevel"] = req.slice_level
        out["sliceSize"] = req.slice_size
    return out


def _event_time(raw: Mapping[str, Any]) -> str:
    series = raw.get("series") or {}
    return str(
        series.get("lastObservedTime")
        or raw.get("lastTimestamp")
        or raw.get("eventTime")
        or raw.get("firstTimestamp")
        or (raw.get("metadata") or {}).get("creationTimestamp")
        or ""
    )


def event_view(raw: Mapping[str, Any]) -> EventView:
    """A core/v1 Event (as the API serves events.k8s.io/v1 ones too) in a few fields."""
    series = raw.get("series") or {}
    when = _event_time(raw)
    if len(when) > 20 and when[19] == ".":
        when = when[:19] + "Z"  # MicroTime: seconds are enough to read
    source = raw.get("reportingComponent") or (raw.get("source") or {}).get("component") or ""
    count = int(series.get("count") or raw.get("count") or 1)
    return EventView(
        when,
        str(raw.get("type") or ""),
        str(raw.get("reason") or ""),
        str(source),
        str(raw.get("message") or ""),
        count,
    )


def wants_trial(wl: Workload, checks: Container[str]) -> bool:
    """Whether a trial placement says more about ``wl``: it holds no assignment in force and is
    neither finished nor deactivated."""
    return not assignment_trusted(wl, checks) and not wl.is_finished and wl.spec.active is not False


def _kept_for_it(wl: Workload) -> list[str]:
    """What a preemption or a reservation keeps for the workload, as recorded on it (both are
    removed when it is placed)."""
    out = []
    hold = hold_from(wl)
    if hold is not None:
        victims = f" (told to leave: {', '.join(hold.victims)})" if hold.victims else ""
        out.append(f"topology preemption: {hold.domain.named()} is held for it until {stamp(hold.until)}{victims}")
    reserved = reservation_from(wl)
    if reserved is not None:
        when = (
            f"expected to fit at {stamp(reserved.expected_fit)}"
            if reserved.expected_fit is not None
            else "expected to fit once its occupants end (not all declare a runtime)"
        )
        out.append(f"reservation: {reserved.domain.named()} is reserved for it since {stamp(reserved.since)}; {when}")
    return out


def describe_workload(
    wl: Workload,
    tas: TasConfig,
    nodes: Iterable[NodeInfo],
    pods: Iterable[SlimPod],
    prefix: str = c.DEFAULT_ANNOTATION_PREFIX,
    events: Iterable[Mapping[str, Any]] = (),
    capacity: LiveCapacity | None = None,
    gates: FeatureGates = DEFAULT_GATES,
) -> WorkloadDescription:
    """What ``describe workload`` shows, from plain objects (no I/O). ``capacity``: the cluster's
    capacity model (``wants_trial``), to tell where a PodSet with no assignment in force would
    go now, or why not."""
    node_by_name = {n.name: n for n in nodes}
    hosts = NodeHosts.of(node_by_name.values())
    entries = {
        st.name: CheckStatus(st.name, st.state, st.message, st.last_transition_time)
        for st in wl.status.admission_checks
        if st.name in tas.checks
    }
    notes: list[str] = []
    if not entries:
        notes.append(f"no AdmissionCheck of controller {tas.controller_name} is on this Workload")

    assignments: dict[str, TopologyAssignment] = {}
    text = wl.metadata.annotations.get(c.TOPOLOGY_ASSIGNMENT_ANNOTATION)
    if text is not None:
        try:
            assignments = dict(decode_assignment_annotation(text))
        except ValueError as exc:
            notes.append(f"annotation {c.TOPOLOGY_ASSIGNMENT_ANNOTATION} is malformed: {exc}")

    trusted = assignment_trusted(wl, tas.checks)
    trials: dict[str, PodSetTrial] = {}
    if capacity is not None and wants_trial(wl, tas.checks):
        trials = {t.name: t for t in trial_placement(wl, capacity, tas.check_flavors, prefix, gates)}
    by_podset: dict[str, list[SlimPod]] = {}
    for pod in pods:
        by_podset.setdefault(pod.podset or pod.kueue_podset or "", []).append(pod)

    podsets: list[PodSetStatus] = []
    for ps in wl.spec.pod_sets:
        psa = wl.pod_set_assignment(ps.name)
        count = psa.count if psa is not None and psa.count is not None else ps.count
        given = list(dict.fromkeys(psa.flavors.values())) if psa is not None else []
        flavor = next((f for f in given if f in tas.specs), given[0] if given else None)
        spec = tas.specs.get(flavor) if flavor is not None else None
        check = next((name for name, fl in tas.check_flavors.items() if flavor in fl and name in entries), None)
        entry = entries.get(check) if check is not None else None

        message = ""
        request: dict[str, Any] | None = None
        try:
            parsed = parse_template_topology_request(ps.template, prefix=prefix, count=count)
            request = _request_dict(parsed, implied=spec is not None)
        except TopologyRequestError as exc:
            message = "invalid topology annotations: " + "; ".join(exc.errors)

        # In force only while the controller trusts it (the same rule that charges it as usage):
        # an assignment left from an earlier admission says nothing about where pods go now.
        assignment = assignments.get(ps.name) if trusted else None
        if not message and assignment is None:
            message = why_unplaced(wl, flavor, spec is not None, entry, ps.name in assignments, tas.controller_name)

        topology_levels = spec.levels if spec is not None else (assignment.levels if assignment else ())
        counts, bound, pending = podset_pod_counts(by_podset.get(ps.name, ()), assignment, node_by_name)
        domains: list[DomainStatus] | None = None
        if assignment is not None:
            paths = domain_paths(assignment, topology_levels, hosts)
            domains = [
                DomainStatus(d.values, path, d.count, bound[i], pending[i])
                for i, (d, path) in enumerate(zip(assignment.domains, paths, strict=True))
            ]
        podsets.append(
            PodSetStatus(
                name=ps.name,
                count=count,
                flavor=flavor,
                topology=spec.topology if spec else None,
                request=request,
                topology_levels=topology_levels,
                levels=assignment.levels if assignment else (),
                level_names={lbl: n for n, lbl in spec.level_names.labels.items()} if spec else {},
                domains=domains,
                pods=counts,
                message=message,
                trial=trials.get(ps.name) if assignment is None else None,
            )
        )

    notes.extend(_kept_for_it(wl))

    def nodes_of(flavor: str) -> NodeIndex:
        rf = tas.flavors.get(flavor)
        return NodeIndex(node_by_name.values(), rf.spec.node_labels if rf is not None else {})

    # The controller's own rule (``controllers.health``), judged on what was read just now.
    problems = workload_placement_problems(wl, tas.checks, tas.bindings, tas.topologies.get, nodes_of, prefix)
    admission = wl.status.admission
    return WorkloadDescription(
        namespace=wl.namespace or "",
        name=wl.name,
        uid=wl.metadata.uid or "",
        queue=wl.spec.queue_name,
        cluster_queue=admission.cluster_queue if admission is not None else None,
        conditions={t: cond for t in SHOWN_CONDITIONS if (cond := find_condition(wl.status.conditions, t))},
        checks=list(entries.values()),
        podsets=podsets,
        notes=notes,
        events=[event_view(e) for e in sorted(events, key=_event_time)[-MAX_EVENTS:]],
        placement_not_enforced=problems or [],
        daemonset_reservations=_daemonset_holds(capacity, trials.values()),
    )


def _daemonset_holds(capacity: LiveCapacity | None, trials: Iterable[PodSetTrial]) -> list[Reservation]:
    """The DaemonSet reservations on the nodes of the flavors it was placed on now."""
    if capacity is None:
        return []
    nodes: set[str] = set()
    for flavor in {t.flavor for t in trials if t.flavor is not None}:
        snap = capacity.snapshot(flavor)
        if snap is not None:
            nodes.update(snap.tree.leaf_by_node_name)
    return [r for r in capacity.daemonset_reservations() if r.node in nodes]
