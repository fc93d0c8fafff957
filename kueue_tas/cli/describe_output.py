"""``describe workload``'s output: the text tree and the JSON document (keys in ``describe``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kueue_tas.api import constants as c
from kueue_tas.api.object_base import Condition
from kueue_tas.capacity.pod_counts import PodCounts
from kueue_tas.cli.daemonset_holds import holds_json, holds_lines
from kueue_tas.cli.describe_model import SHOWN_CONDITIONS, PodSetStatus, WorkloadDescription
from kueue_tas.cli.render import domain_tree_lines
from kueue_tas.topology.engine import WhyNot

ALWAYS_SHOWN = (c.CONDITION_QUOTA_RESERVED, c.CONDITION_ADMITTED)


def request_text(request: Mapping[str, Any] | None) -> str:
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
    return domain_tree_lines([ps.level_names.get(k, k) for k in keys], leaves)


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


def why_not_lines(w: WhyNot, called: Mapping[str, str]) -> list[str]:
    """The numbers behind a "does not fit" message, as the topology map shows them."""
    level = called.get(w.level, w.level)
    unit = f"{w.unit}(s)"
    where = "/".join(w.domain) or "none"
    if w.one_domain:
        fits = f"fits {w.fit} of {w.needed} {unit} in one domain of {level}; the best, {where}, holds {w.domain_fit}"
    else:
        fits = (
            f"fits {w.fit} of {w.needed} {unit} over all domains of {level} together; "
            f"the best single one, {where}, holds {w.domain_fit}"
        )
    ex = w.exclusions
    reasons = ", ".join(f"{reason}: {n}" for reason, n in ex.reasons())
    nodes = f"nodes: {ex.total_nodes} in the topology, {ex.excluded} excluded" + (f" ({reasons})" if reasons else "")
    return [f"      {fits}", f"      {nodes}"]


def trial_lines(ps: PodSetStatus) -> list[str]:
    """What placing a PodSet with no assignment in force would do now."""
    trial = ps.trial
    if trial is None or trial.flavor is None:
        return []
    if trial.assignment is not None:
        return [f"    placing it now: would fit, in {len(trial.assignment.domains)} domain(s)"]
    if trial.why_not is not None:
        return ["    why not (placing it now):", *why_not_lines(trial.why_not, ps.level_names)]
    if trial.message:
        return [f"    placing it now: {trial.message}"]
    return []


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
    if d.placement_not_enforced:
        out.append(f"  {'Placement:':<{width}}NOT ENFORCED: {'; '.join(d.placement_not_enforced)}")
    out.extend(f"  note: {n}" for n in d.notes)
    for ps in d.podsets:
        head = [f"{ps.count} pod(s)"]
        if ps.flavor:
            head.append(f"flavor {ps.flavor}")
        if ps.topology:
            head.append(f"topology {ps.topology}")
        if request := request_text(ps.request):
            head.append(request)
        out.append(f"  PodSet {ps.name}: {', '.join(head)}")
        out.append(f"    {_pods_line(ps.pods)}")
        if ps.domains is not None:
            out.extend(_tree(ps))
        if ps.message:
            out.append(f"    {ps.message}")
        if ps.trial is not None:
            out.extend(trial_lines(ps))
    out.extend(holds_lines(d.daemonset_reservations))
    if d.events:
        out.append("  Events:")
        for e in d.events:
            times = f" (x{e.count})" if e.count > 1 else ""
            out.append(f"    {e.time}  {e.type:<7} {e.reason} from {e.source or '?'}{times}: {e.message}")
    return "\n".join(out) + "\n"


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
        "placementNotEnforced": list(d.placement_not_enforced),
        "daemonSetReservations": holds_json(d.daemonset_reservations),
        "podSets": [
            {
                "name": ps.name,
                "count": ps.count,
                "flavor": ps.flavor,
                "topology": ps.topology,
                "request": ps.request,
                "topologyLevels": list(ps.topology_levels),
                "levels": list(ps.levels),
                "levelNames": dict(ps.level_names),
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
                **({"whyNot": why_not_json(ps.trial.why_not)} if ps.trial and ps.trial.why_not else {}),
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


def why_not_json(w: WhyNot) -> dict[str, Any]:
    ex = w.exclusions
    return {
        "topology": w.topology,
        "level": w.level,
        "domain": list(w.domain),
        "domainFit": w.domain_fit,
        "fit": w.fit,
        "needed": w.needed,
        "unit": w.unit,
        "oneDomain": w.one_domain,
        "totalNodes": ex.total_nodes,
        "excluded": ex.excluded,
        "reasons": dict(ex.reasons()),
    }
