"""Whether an admitted Workload's placement is still enforced by its Topology: the Workload
side of ``kueue_tas.topology.explain.placement_health``, shared by the controller and ``describe``.

Only a trusted assignment (``rules.assignment_trusted``) that still matches our record is
judged: anything else places no pod (the assignment guard deals with edits)."""

from __future__ import annotations

from collections.abc import Callable, Container, Mapping

from kueue_tas.api import constants as c
from kueue_tas.api.kueue_objects import Topology
from kueue_tas.api.quantity import QuantityError
from kueue_tas.api.resources import pod_requests
from kueue_tas.api.workload import Workload
from kueue_tas.capacity.assignment_record import assignment_tampering
from kueue_tas.capacity.rules import assignment_trusted, topology_level_names
from kueue_tas.topology.codec import decode_assignment_annotation
from kueue_tas.topology.explain import NodeIndex, PlacedPodSet, placement_problems, required_levels
from kueue_tas.topology.features import DEFAULT_GATES, FeatureGates
from kueue_tas.topology.flavors import FlavorBinding
from kueue_tas.topology.level_names import names_a_level, resolve_request
from kueue_tas.topology.requests import TopologyRequestError, podset_request


def workload_placement_problems(
    wl: Workload,
    checks: Container[str],
    bindings: Mapping[str, FlavorBinding],
    topology: Callable[[str], Topology | None],
    nodes_of: Callable[[str], NodeIndex],
    prefix: str = c.DEFAULT_ANNOTATION_PREFIX,
    gates: FeatureGates = DEFAULT_GATES,
) -> list[str] | None:
    """One line per reason ``wl``'s placement is no longer enforced ([] when it is); None when
    there is no trusted assignment to judge (none, or edited: ``assignment_tampering``).
    ``bindings``: our flavors and their Topology names (``topology.flavors.bind_flavors``, which
    keeps a flavor whose Topology is gone); ``nodes_of(flavor)``: that flavor's nodes."""
    if not assignment_trusted(wl, checks) or assignment_tampering(wl, checks) is not None:
        return None
    try:
        decoded = decode_assignment_annotation(wl.metadata.annotations[c.TOPOLOGY_ASSIGNMENT_ANNOTATION])
    except ValueError:
        return None
    by_flavor: dict[str, list[PlacedPodSet]] = {}
    for name, assignment in decoded:
        ps, psa = wl.pod_set(name), wl.pod_set_assignment(name)
        if ps is None or psa is None:
            continue
        flavor = next((f for f in dict.fromkeys(psa.flavors.values()) if f in bindings), None)
        if flavor is None:
            continue
        count = psa.count if psa.count is not None else ps.count
        spec = ps.template.get("spec") or {}
        try:
            request = podset_request(
                name, count, ps.template, prefix=prefix, gates=gates, topology_field=ps.topology_request
            )
            topo = topology(bindings[flavor].topology)
            if topo is not None and names_a_level(request, topo.levels):
                # A level given by name is judged as the label it names; the annotation is read
                # only for such a request (this runs for every admitted workload on each pass).
                request = resolve_request(request, topo.levels, topology_level_names(topo))
            levels, per_pod = required_levels(request.topology), dict(request.requests)
        except (TopologyRequestError, QuantityError):
            # Admitted, so it parsed then: an edit since makes it unjudgeable, not unhealthy.
            levels = ()
            try:
                per_pod = pod_requests(spec)
            except QuantityError:
                per_pod = {}
        by_flavor.setdefault(flavor, []).append(PlacedPodSet(name, assignment, levels, per_pod))
    out: list[str] = []
    for flavor, placed in by_flavor.items():
        name = bindings[flavor].topology
        topo = topology(name)
        for problem in placement_problems(name, None if topo is None else topo.levels, placed, nodes_of(flavor)):
            if problem not in out:
                out.append(problem)
    return out
