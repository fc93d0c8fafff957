"""``kueue-tas describe workload``: where a Workload's pods were assigned, and where they are.

For each PodSet: the flavor and Topology, the topology request, and the assignment as a tree
of domains; each leaf domain shows its assigned count, the pods bound to a node of that
domain and the pods released to it but not bound yet ("pending"). Pods still carrying the
scheduling gate have no domain yet and are counted per PodSet ("gated"). With no assignment,
the check entry's state and message say why.

``-o json`` prints, with these keys only::

    {"namespace", "name", "uid", "queue", "clusterQueue",
     "conditions": {"QuotaReserved"|"Admitted"|"Evicted"|"Finished": {"status", "reason", "message"}},
     "events": [{"time", "type", "reason", "from", "message", "count"}],
     "checks": [{"name", "state", "message", "lastTransitionTime"}],
     "podSets": [{"name", "count", "flavor", "topology", "request", "topologyLevels", "levels",
                  "domains": [{"values", "path", "assigned", "bound", "pending"}] | null,
                  "pods": {"total", "bound", "pending", "gated", "finished", "boundElsewhere", "unplaced"},
                  "message"}]}

``checks`` lists only the entries of our AdmissionChecks; ``conditions`` only those present;
``events`` the Workload's last 10 Events, oldest first (Kueue's and ours: when Kueue evicts a
Workload it resets our entry to Pending, and the reason lives on in the Evicted condition and
the Events).
``levels`` and ``values`` are the assignment's (only ``kubernetes.io/hostname`` when it is the
lowest level, as Kueue writes it); ``path`` is the domain's values along ``topologyLevels``
(null when the node behind a hostname is gone). ``request`` is the PodSet's topology request
(``{"required": level}``, ``{"preferred": level}``, ``{"unconstrained": true}``, plus
``sliceLevel``/``sliceSize``; ``{"implied": true}`` without annotations) or null when unknown.
Pod counts: ``bound`` in an assigned domain, ``boundElsewhere`` on a node outside every assigned
domain, ``pending`` released to a domain and not bound yet, ``gated`` still gated, ``unplaced``
neither gated nor bound nor selecting an assigned domain, ``finished`` Succeeded or Failed.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kueue_tas.api import constants as c
from kueue_tas.api.constants import HOSTNAME_LABEL
from kueue_tas.api.models import Condition, Workload, find_condition
from kueue_tas.capacity.rules import assignment_trusted
from kueue_tas.cli.cluster_read import (
    ClusterReadError,
    TasConfig,
    default_namespace,
    load_settings,
    read_events,
    read_kueue_config,
    read_nodes,
    read_workload,
    read_workload_pods,
    run_read,
    tas_config,
)
from kueue_tas.cli.render import domain_tree_lines
from kueue_tas.kube.slim import SlimPod
from kueue_tas.topology.assignment import TopologyAssignment
from kueue_tas.topology.codec import decode_assignment_annotation
from kueue_tas.topology.model import NodeInfo, TopologyRequest
from kueue_tas.topology.request import TopologyRequestError, parse_template_topology_request

SHOWN_CONDITIONS = (c.CONDITION_QUOTA_RESERVED, c.CONDITION_ADMITTED, c.CONDITION_EVICTED, c.CONDITION_FINISHED)
ALWAYS_SHOWN = (c.CONDITION_QUOTA_RESERVED, c.CONDITION_ADMITTED)
MAX_EVENTS = 10


@dataclass(frozen=True, slots=True)
class DomainStatus:
    values: tuple[str, ...]  # as in the assignment
    path: tuple[str, ...] | None  # along the Topology's levels; None when unknown
    assigned: int
    bound: int = 0
    pending: int = 0


@dataclass
class PodCounts:
    total: int = 0
    bound: int = 0
    pending: int = 0
    gated: int = 0
    finished: int = 0
    bound_elsewhere: int = 0
    unplaced: int = 0


@dataclass
class PodSetStatus:
    name: str
    count: int
    flavor: str | None
    topology: str | None
    request: dict[str, Any] | None
    topology_levels: tuple[str, ...]
    levels: tuple[str, ...]
    domains: list[DomainStatus] | None
    pods: PodCounts
    message: str


@dataclass(frozen=True, slots=True)
class CheckStatus:
    name: str
    state: str
    message: str
    last_transition_time: str | None


@dataclass(frozen=True, slots=True)
class EventView:
    time: str
    type: str
    reason: str
    source: str
    message: str
    count: int = 1


@dataclass
class WorkloadDescription:
    namespace: str
    name: str
    uid: str
    queue: str | None
    cluster_queue: str | None
    conditions: dict[str, Condition]
    checks: list[CheckStatus]
    podsets: list[PodSetStatus]
    notes: list[str] = field(default_factory=list)
    events: list[EventView] = field(default_factory=list)


# --- building (pure) --------------------------------------------------------------------------


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


def _request_text(request: Mapping[str, Any] | None) -> str:
    if request is None:
        return ""
    if request.get("implied"):
        return "no topology annotation (placed as unconstrained)"
    parts = []
    for mode in ("required", "preferred"):
        if mode in request:
            parts.append(f"{mode} {request[mode]}")
    if request.get("unconstrained"):
        parts.append("unconstrained")
    if "sliceLevel" in request:
        parts.append(f"slices of {request['sliceSize']} in one {request['sliceLevel']}")
    return ", ".join(parts)


def _paths(
    assignment: TopologyAssignment, topology_levels: tuple[str, ...], by_hostname: Mapping[str, NodeInfo]
) -> list[tuple[str, ...] | None]:
    """Each domain's values along the Topology's levels. A hostname-only assignment is completed
    from the labels of the node that has that hostname, as the controller resolves it."""
    if assignment.levels == topology_levels:
        return [d.values for d in assignment.domains]
    out: list[tuple[str, ...] | None] = []
    for d in assignment.domains:
        node = by_hostname.get(d.values[-1]) if assignment.levels[-1:] == (HOSTNAME_LABEL,) else None
        path = tuple(node.labels.get(level) for level in topology_levels) if node is not None else None
        if path is None or any(v is None for v in path) or path[-len(d.values) :] != d.values:
            out.append(None)
        else:
            out.append(tuple(v for v in path if v is not None))
    return out


def _podset_pods(
    pods: Iterable[SlimPod],
    assignment: TopologyAssignment | None,
    nodes: Mapping[str, NodeInfo],
) -> tuple[PodCounts, list[int], list[int]]:
    """Pod counts, plus bound and pending counts per assigned domain (assignment order).

    Without an assignment every bound pod is just "bound" and every released one "pending"."""
    counts = PodCounts()
    n = len(assignment.domains) if assignment else 0
    domains = {d.values: i for i, d in enumerate(assignment.domains)} if assignment else {}
    levels = assignment.levels if assignment else ()
    bound = [0] * n
    pending = [0] * n
    for pod in pods:
        counts.total += 1
        if pod.is_terminal:
            counts.finished += 1
            continue
        if pod.gated and not pod.node_name:
            counts.gated += 1
            continue
        if pod.node_name:
            node = nodes.get(pod.node_name)
            labels: Mapping[str, str] = node.labels if node is not None else {}
        else:
            labels = pod.node_selector_map()
        at = domains.get(tuple(labels.get(lv) or "" for lv in levels)) if assignment else None
        if pod.node_name:
            if assignment is not None and at is None:
                counts.bound_elsewhere += 1
                continue
            counts.bound += 1
            if at is not None:
                bound[at] += 1
        else:
            if assignment is not None and at is None:
                counts.unplaced += 1
                continue
            counts.pending += 1
            if at is not None:
                pending[at] += 1
    return counts, bound, pending


def _evicted_reason(wl: Workload) -> str | None:
    """Why an evicted Workload holds no assignment. Kueue resets our entry to Pending when it
    evicts (a Rejected check deactivates the Workload first) and drops the admission, so the
    reason survives only in the Evicted condition."""
    evicted = find_condition(wl.status.conditions, c.CONDITION_EVICTED)
    if evicted is None or evicted.status != "True" or wl.has_quota_reservation:
        return None
    inactive = " and deactivated (spec.active=false)" if wl.spec.active is False else ""
    why = ": ".join(x for x in (evicted.reason, evicted.message) if x)
    return f"not placed: the Workload was evicted{inactive}: {why}"


def _finished_reason(wl: Workload) -> str:
    """A finished Workload's assignment holds nothing any more, so it is not shown as in force."""
    finished = find_condition(wl.status.conditions, c.CONDITION_FINISHED)
    why = ": ".join(x for x in (finished.reason, finished.message) if x) if finished is not None else ""
    return f"no assignment in force: the Workload is finished{': ' + why if why else ''}"


def _waiting_for_quota(wl: Workload) -> str:
    cond = find_condition(wl.status.conditions, c.CONDITION_QUOTA_RESERVED)
    why = f": {cond.message}" if cond is not None and cond.message else ""
    return f"no assignment yet: waiting for Kueue to reserve quota{why}"


def _no_assignment_reason(wl: Workload, entry: CheckStatus | None, controller_name: str) -> str:
    if entry is None:
        return f"no AdmissionCheck of controller {controller_name} governs this PodSet's flavor in its ClusterQueue"
    said = f": {entry.message}" if entry.message else ""
    if entry.state == c.CHECK_STATE_PENDING:
        if not wl.has_quota_reservation:
            return _waiting_for_quota(wl)
        return f"no assignment yet: check {entry.name} is Pending{said}"
    if entry.state == c.CHECK_STATE_READY:
        return f"check {entry.name} is Ready but records no assignment for this PodSet{said}"
    return f"not placed: check {entry.name} is {entry.state}{said}"


def _why_unplaced(
    wl: Workload, flavor: str | None, governed: bool, entry: CheckStatus | None, stale: bool, controller_name: str
) -> str:
    """Why a PodSet has no assignment in force; ``stale``: the annotation still holds an older one."""
    if (evicted := _evicted_reason(wl)) is not None:
        return evicted
    if wl.is_finished:
        return _finished_reason(wl)
    if flavor is None:
        return _waiting_for_quota(wl)
    if not governed:
        return (
            f"not placed by kueue-tas: flavor {flavor} is on no Topology of an AdmissionCheck "
            f"of controller {controller_name}"
        )
    message = _no_assignment_reason(wl, entry, controller_name)
    if stale and entry is not None:
        message += f" (an earlier assignment is recorded but not in force while the check is {entry.state})"
    return message


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


def describe_workload(
    wl: Workload,
    tas: TasConfig,
    nodes: Iterable[NodeInfo],
    pods: Iterable[SlimPod],
    prefix: str = c.DEFAULT_ANNOTATION_PREFIX,
    events: Iterable[Mapping[str, Any]] = (),
) -> WorkloadDescription:
    """What ``describe workload`` shows, from plain objects (no I/O)."""
    node_by_name = {n.name: n for n in nodes}
    by_hostname = {n.labels[HOSTNAME_LABEL]: n for n in node_by_name.values() if HOSTNAME_LABEL in n.labels}
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
            message = _why_unplaced(wl, flavor, spec is not None, entry, ps.name in assignments, tas.controller_name)

        topology_levels = spec.levels if spec is not None else (assignment.levels if assignment else ())
        counts, bound, pending = _podset_pods(by_podset.get(ps.name, ()), assignment, node_by_name)
        domains: list[DomainStatus] | None = None
        if assignment is not None:
            paths = _paths(assignment, topology_levels, by_hostname)
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
                domains=domains,
                pods=counts,
                message=message,
            )
        )

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
    )


# --- text ---------------------------------------------------------------------------------------


def _condition_text(cond: Condition | None) -> str:
    if cond is None:
        return "-"
    detail = ": ".join(x for x in (cond.reason, cond.message) if x)
    return f"{cond.status:<7} {detail}".rstrip()


def _tree(ps: PodSetStatus) -> list[str]:
    assert ps.domains is not None
    complete = all(d.path is not None for d in ps.domains)
    keys = ps.topology_levels if complete else ps.levels
    leaves = [
        (
            d.path if complete and d.path is not None else d.values,
            d.assigned,
            f"   [bound {d.bound}, pending {d.pending}]",
        )
        for d in ps.domains
    ]
    return domain_tree_lines(keys, leaves)


def _pods_line(p: PodCounts) -> str:
    parts = [f"{p.bound} bound", f"{p.pending} pending", f"{p.gated} gated"]
    for n, what in (
        (p.bound_elsewhere, "bound outside the assignment"),
        (p.unplaced, "released with no domain"),
        (p.finished, "finished"),
    ):
        if n:
            parts.append(f"{n} {what}")
    return f"pods: {p.total} ({', '.join(parts)})"


def render_text(d: WorkloadDescription) -> str:
    width = max([len("QuotaReserved"), *(len(f"Check {ch.name}") for ch in d.checks)]) + 2
    out = [f"Workload {d.namespace}/{d.name}"]
    queue = d.queue or "-"
    if d.cluster_queue:
        queue += f" (ClusterQueue {d.cluster_queue})"
    out.append(f"  {'Queue:':<{width}}{queue}")
    for t in SHOWN_CONDITIONS:
        if t in ALWAYS_SHOWN or t in d.conditions:
            out.append(f"  {t + ':':<{width}}{_condition_text(d.conditions.get(t))}")
    for ch in d.checks:
        out.append(f"  {'Check ' + ch.name + ':':<{width}}{ch.state:<7} {ch.message}".rstrip())
    out.extend(f"  note: {n}" for n in d.notes)
    for ps in d.podsets:
        head = [f"{ps.count} pod(s)"]
        if ps.flavor:
            head.append(f"flavor {ps.flavor}")
        if ps.topology:
            head.append(f"topology {ps.topology}")
        if request := _request_text(ps.request):
            head.append(request)
        out.append(f"  PodSet {ps.name}: {', '.join(head)}")
        out.append(f"    {_pods_line(ps.pods)}")
        if ps.domains is not None:
            out.extend(_tree(ps))
        if ps.message:
            out.append(f"    {ps.message}")
    if d.events:
        out.append("  Events:")
        for e in d.events:
            times = f" (x{e.count})" if e.count > 1 else ""
            out.append(f"    {e.time}  {e.type:<7} {e.reason} from {e.source or '?'}{times}: {e.message}")
    return "\n".join(out) + "\n"


# --- json ---------------------------------------------------------------------------------------


def describe_json(d: WorkloadDescription) -> dict[str, Any]:
    return {
        "namespace": d.namespace,
        "name": d.name,
        "uid": d.uid,
        "queue": d.queue,
        "clusterQueue": d.cluster_queue,
        "conditions": {
            t: {"status": cond.status, "reason": cond.reason, "message": cond.message}
            for t, cond in d.conditions.items()
        },
        "checks": [
            {"name": ch.name, "state": ch.state, "message": ch.message, "lastTransitionTime": ch.last_transition_time}
            for ch in d.checks
        ],
        "podSets": [
            {
                "name": ps.name,
                "count": ps.count,
                "flavor": ps.flavor,
                "topology": ps.topology,
                "request": ps.request,
                "topologyLevels": list(ps.topology_levels),
                "levels": list(ps.levels),
                "domains": None
                if ps.domains is None
                else [
                    {
                        "values": list(dom.values),
                        "path": None if dom.path is None else list(dom.path),
                        "assigned": dom.assigned,
                        "bound": dom.bound,
                        "pending": dom.pending,
                    }
                    for dom in ps.domains
                ],
                "pods": {
                    "total": ps.pods.total,
                    "bound": ps.pods.bound,
                    "pending": ps.pods.pending,
                    "gated": ps.pods.gated,
                    "finished": ps.pods.finished,
                    "boundElsewhere": ps.pods.bound_elsewhere,
                    "unplaced": ps.pods.unplaced,
                },
                "message": ps.message,
            }
            for ps in d.podsets
        ],
        "events": [
            {
                "time": e.time,
                "type": e.type,
                "reason": e.reason,
                "from": e.source,
                "message": e.message,
                "count": e.count,
            }
            for e in d.events
        ],
    }


# --- command ------------------------------------------------------------------------------------


def run(args: argparse.Namespace) -> int:
    if (args.name is None) == (args.for_job is None):
        print("error: give either a Workload NAME or --for-job JOB", file=sys.stderr)
        return 1
    try:
        settings = load_settings(args.config, args.kubeconfig)
        namespace = args.namespace or default_namespace(settings)
        prefix = settings.annotation_prefix
        warnings: list[str] = []

        async def read(api: Any) -> tuple[Workload, TasConfig, list[NodeInfo], list[SlimPod], list[dict[str, Any]]]:
            wl = await read_workload(api, namespace, args.name, args.for_job)
            tas = tas_config(await read_kueue_config(api, warnings), settings.controller_name)
            nodes = await read_nodes(api, warnings)
            pods = await read_workload_pods(api, wl, prefix)
            try:
                events = await read_events(api, wl)
            except ClusterReadError as exc:  # Events only add detail: show the rest without them
                warnings.append(str(exc))
                events = []
            return wl, tas, nodes, pods, events

        wl, tas, nodes, pods, events = run_read(settings, read)
    except ClusterReadError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    for warning in warnings:
        print(f"warning: {warning}", file=sys.stderr)
    desc = describe_workload(wl, tas, nodes, pods, prefix, events)
    if args.output == "json":
        json.dump(describe_json(desc), sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        sys.stdout.write(render_text(desc))
    return 0
