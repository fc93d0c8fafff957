"""The flavors one of our checks is meant to govern but cannot place on, and why (pure).

A ClusterQueue puts flavors under our check (its ``onFlavors``, or all of its flavors); the
capacity model governs only those whose Topology exists with levels and whose binding is
unambiguous. A workload on one of the others must not be answered Ready with nothing
assigned (its pods would then be charged nowhere): the admission decision keeps it Pending
with the problem named here.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Container, Iterable, Mapping

from kueue_tas.api import constants as c
from kueue_tas.api.kueue_objects import AdmissionCheck, ClusterQueue, ResourceFlavor, Topology
from kueue_tas.capacity.rules import topology_level_names_problem
from kueue_tas.topology.flavors import bind_flavors, check_topology
from kueue_tas.topology.requests import MAX_LEVEL_LABEL_LENGTH, MAX_TOPOLOGY_LEVELS, topology_levels_fault


def topology_problem(topo: Topology) -> str | None:
    """What the API server's schema for Topology refuses in ``topo`` (one line, in the API
    server's words), or None. Such a Topology exists only if it was stored by hand or by an
    older CRD. The rule is ``topology.requests.levels.topology_levels_fault``. Then what is wrong with
    our level-names annotation on it (``topology.level_names``)."""
    fault = topology_levels_fault(topo.levels)
    if fault is None:
        return topology_level_names_problem(topo)
    match fault.kind:
        case "empty":
            return "spec.levels: must have at least 1 item"
        case "too_many":
            return f"spec.levels: Too many: {fault.index}: must have at most {MAX_TOPOLOGY_LEVELS} items"
        case "too_long":
            return (
                f"spec.levels[{fault.index}].nodeLabel: Too long: may not be more than {MAX_LEVEL_LABEL_LENGTH} bytes"
            )
        case "not_a_label":
            return (
                f"spec.levels[{fault.index}].nodeLabel: Invalid value: {json.dumps(fault.level)[:80]}: {fault.detail}"
            )
        case "duplicate":
            return f"spec.levels: Invalid value: {json.dumps(fault.level)}: must be unique"
        case "hostname_not_lowest":
            return f"spec.levels: the {c.HOSTNAME_LABEL} label can only be used at the lowest level of topology"


def meant_flavors(check: str, queues: Iterable[ClusterQueue]) -> list[str]:
    """Every flavor some ClusterQueue puts under ``check``, in first-seen order."""
    seen: dict[str, None] = {}
    for cq in queues:
        for flavor in cq.flavors_for_check(check) or ():
            seen.setdefault(flavor, None)
    return list(seen)


def unusable_flavors(
    check: str,
    checks: Mapping[str, AdmissionCheck],
    queues: Iterable[ClusterQueue],
    topology: Callable[[str], Topology | None],
    flavor: Callable[[str], ResourceFlavor | None],
    governed: Container[str],
    controller_name: str,
) -> dict[str, str]:
    """flavor -> one-line problem, for each flavor meant to be under ``check`` (ours, in
    ``checks``) that cannot be placed on. ``governed``: what the capacity model governs for
    ``check``; a governed flavor with no problem is usable and left out."""
    queues = list(queues)
    conflicts: dict[str, str] = {}
    bind_flavors(checks.values(), queues, controller_name=controller_name, conflicts=conflicts)
    ac = checks.get(check)
    topo_name = check_topology(ac) if ac is not None else None
    out: dict[str, str] = {}
    for name in meant_flavors(check, queues):
        problem: str | None
        if ac is None:
            problem = f'AdmissionCheck "{check}" not found'
        elif topo_name is None:
            problem = (
                f'AdmissionCheck "{check}": spec.parameters must reference a kueue.x-k8s.io Topology '
                "(apiGroup kueue.x-k8s.io, kind Topology)"
            )
        elif name in conflicts:
            problem = conflicts[name]
        else:
            problem = _flavor_problem(name, topo_name, topology, flavor)
        if problem is None and name not in governed:
            # Configuration seen here but not yet by the capacity model: decided again on its update.
            problem = f'ResourceFlavor "{name}" is not yet in the capacity model'
        if problem is not None:
            out[name] = problem
    return out


def _flavor_problem(
    name: str,
    topo_name: str,
    topology: Callable[[str], Topology | None],
    flavor: Callable[[str], ResourceFlavor | None],
) -> str | None:
    topo = topology(topo_name)
    if topo is None:
        return f'Topology "{topo_name}" of ResourceFlavor "{name}" not found'
    problem = topology_problem(topo)
    if problem is not None:
        return f'Topology "{topo_name}" of ResourceFlavor "{name}": {problem}'
    if flavor(name) is None:
        return f'ResourceFlavor "{name}" not found'
    return None
