"""The capacity rules: which objects of a cluster hold capacity, and where. Written once.

Every reader of capacity uses these functions and nothing else: the controller (object by
object, from its informers), ``kueue-tas capacity`` and ``describe`` (from one read of the
cluster) and ``kueue-tas plan`` (from a dump). That is what makes their numbers agree.

* Flavors: a flavor is governed when a ClusterQueue puts it under one of our AdmissionChecks
  whose Topology exists and has levels (``flavor_specs``).
* Nodes: a node counts for a flavor when it is Ready, schedulable, carries the flavor's node
  labels and a label for every level. That filter is the engine's own
  (``kueue_tas.topology.tree.node_is_eligible``, applied when a snapshot's tree is built), so
  the engine's test cases and the capacity model share it too.
* Pods: a bound, non-terminal pod that is not ours is charged to its node (``pod_charge``).
  Ours (our workload label or a topology annotation) are held by their Workload's assignment.
* Workloads: an assignment annotation is trusted while the Workload is not finished and one
  of our checks is Ready on it (``assignment_trusted``); it then holds, per PodSet, its
  domains on the PodSet's TAS flavor (``workload_usage``).
* Elastic slices: while a new slice and the slice it replaces are both held (the new one
  decided or Ready, the old one not yet finished by Kueue), the new slice keeps the old
  pods where they are, so the pair holds the union of their assignments: the old slice
  holds only what the new one does not cover (``uncovered_usage``).
* Flavors sharing nodes: hostname-level usage of one flavor also holds capacity in every
  other flavor whose lowest level is the hostname (``charges_snapshot``), as in Kueue with
  its TASHandleOverlappingFlavors gate on (the default).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Container, Iterable, Mapping
from dataclasses import dataclass

from kueue_tas.api import constants as c
from kueue_tas.api.kueue_objects import AdmissionCheck, ClusterQueue, ResourceFlavor, Topology
from kueue_tas.api.quantity import QuantityError
from kueue_tas.api.resources import pod_requests
from kueue_tas.api.workload import Workload
from kueue_tas.kube.slim import SlimPod
from kueue_tas.topology.assignment import DomainAssignment, TopologyAssignment
from kueue_tas.topology.codec import decode_assignment_annotation
from kueue_tas.topology.features import DEFAULT_GATES, FeatureGates
from kueue_tas.topology.flavors import bind_flavors
from kueue_tas.topology.inputs import tolerations
from kueue_tas.topology.model import ResourceMap, Toleration
from kueue_tas.topology.snapshot import TopologySnapshot


@dataclass(frozen=True, slots=True)
class FlavorSpec:
    """What a snapshot of a TAS flavor is built from."""

    flavor: str
    topology: str
    levels: tuple[str, ...]
    node_labels: Mapping[str, str]
    tolerations: tuple[Toleration, ...] = ()


@dataclass(frozen=True, slots=True)
class UsageEntry:
    """One PodSet's assignment on one flavor, with its per-pod requests."""

    flavor: str
    assignment: TopologyAssignment
    per_pod: ResourceMap


class UsageError(ValueError):
    """A trusted Workload whose usage cannot be read: ``field`` names the field, ``problem`` says why."""

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"{field}: {problem}")
        self.field = field
        self.problem = problem


# --- flavors ----------------------------------------------------------------------------------


def our_checks(checks: Iterable[AdmissionCheck], controller_name: str) -> dict[str, AdmissionCheck]:
    """The AdmissionChecks handled by the controller named ``controller_name``, by name."""
    return {ac.name: ac for ac in checks if ac.spec.controller_name == controller_name}


def flavor_specs(
    checks: Mapping[str, AdmissionCheck],
    queues: Iterable[ClusterQueue],
    topology: Callable[[str], Topology | None],
    flavor: Callable[[str], ResourceFlavor | None],
    controller_name: str = c.CONTROLLER_NAME,
    flavor_topology_names: dict[str, str | None] | None = None,
    conflicts: dict[str, str] | None = None,
) -> tuple[dict[str, FlavorSpec], dict[str, set[str]]]:
    """(flavor -> spec, our check -> flavors it governs) for ``checks`` (ours, see ``our_checks``).

    A flavor whose Topology is missing or has no levels is left out: nothing can be placed
    on it, and the check says so through its ``Active`` condition. ``flavor_topology_names``
    (flavor -> ``spec.topologyName``, only ``plan`` passes it) also maps flavors no check of
    ours governs. Raises ``FlavorMappingError`` when two checks put one flavor on different
    Topologies, unless ``conflicts`` is given (see ``bind_flavors``: such a flavor is left out).
    """
    bindings = bind_flavors(
        checks.values(), queues, flavor_topology_names, controller_name=controller_name, conflicts=conflicts
    )
    specs: dict[str, FlavorSpec] = {}
    per_check: dict[str, set[str]] = {name: set() for name in checks}
    for name, b in bindings.items():
        topo = topology(b.topology)
        if topo is None or not topo.levels:
            continue
        rf = flavor(name)
        specs[name] = FlavorSpec(
            name,
            topo.name,
            topo.levels,
            dict(rf.spec.node_labels) if rf else {},
            tolerations(rf.spec.tolerations) if rf else (),
        )
        if b.check is not None:
            per_check[b.check].add(name)
    return specs, per_check


# --- pods -------------------------------------------------------------------------------------


def pod_charge(pod: SlimPod) -> tuple[str, dict[str, int]] | None:
    """(node, requests + ``pods: 1``) of a pod that holds capacity outside our assignments;
    None for our own pods (their assignment holds it) and for unbound or finished pods."""
    if pod.is_tas or not pod.counts_on_node:
        return None
    return pod.node_name, pod.usage_map()


# --- workloads --------------------------------------------------------------------------------


def assignment_trusted(wl: Workload, checks: Container[str]) -> bool:
    """Our assignment annotation counts: the Workload runs and one of ``checks`` (ours) is Ready
    on it. Kueue resets the entry on eviction, so an assignment left from an earlier admission
    is never trusted."""
    return (
        not wl.is_finished
        and c.TOPOLOGY_ASSIGNMENT_ANNOTATION in wl.metadata.annotations
        and any(st.name in checks and st.state == c.CHECK_STATE_READY for st in wl.status.admission_checks)
    )


def workload_usage(
    wl: Workload, checks: Container[str], tas_flavors: Container[str], *, strict: bool = False
) -> tuple[UsageEntry, ...] | None:
    """What an admitted Workload holds; None unless its assignment is trusted (``assignment_trusted``).

    A PodSet holds its assignment on the first TAS flavor of its admission; a PodSet with no
    admission or no TAS flavor holds nothing. The controller reads leniently (an annotation
    that does not decode holds nothing and is logged, a PodSet the spec lacks is skipped, the
    first of several TAS flavors is used); ``strict`` (``plan``: its input must be valid)
    raises ``UsageError`` for each of these instead. A malformed quantity raises either way.
    """
    if not assignment_trusted(wl, checks):
        return None
    field = f"metadata.annotations[{c.TOPOLOGY_ASSIGNMENT_ANNOTATION}]"
    try:
        decoded = decode_assignment_annotation(wl.metadata.annotations[c.TOPOLOGY_ASSIGNMENT_ANNOTATION])
    except ValueError as exc:
        if strict:
            raise UsageError(field, str(exc)) from exc
        # structlog is imported here, not at module level: it costs `kueue-tas plan` ~70 ms of start-up.
        import structlog

        structlog.get_logger(__name__).warning(
            "assignment_annotation_invalid", workload=f"{wl.namespace}/{wl.name}", error=str(exc)
        )
        return None
    entries = []
    for name, assignment in decoded:
        ps, psa = wl.pod_set(name), wl.pod_set_assignment(name)
        if ps is None and strict:
            raise UsageError(field, f"names PodSet {name!r}, which spec.podSets does not have")
        if ps is None or psa is None:
            continue
        flavors = [f for f in dict.fromkeys(psa.flavors.values()) if f in tas_flavors]
        if len(flavors) > 1 and strict:
            raise UsageError(
                f"status.admission.podSetAssignments[{name}].flavors",
                f"more than one TAS flavor assigned: {', '.join(flavors)}",
            )
        if not flavors:
            continue
        try:
            per_pod = pod_requests(ps.template.get("spec") or {})
        except QuantityError as exc:
            raise UsageError(f"spec.podSets[{name}].template", str(exc)) from exc
        entries.append(UsageEntry(flavors[0], assignment, per_pod))
    return tuple(entries)


# --- elastic slices -----------------------------------------------------------------------------


def uncovered_usage(old: Iterable[UsageEntry], new: Iterable[UsageEntry]) -> tuple[UsageEntry, ...]:
    """The part of a replaced slice's usage ``old`` that the usage ``new`` of the slice replacing
    it does not cover: per domain, the pods of ``old`` beyond those ``new`` puts there (for the
    same flavor, levels and per-pod requests). ``old`` reduced this way plus ``new`` is their
    union, each pod once: ``new`` itself after a scale up, ``old`` after a scale down."""
    cover: dict[tuple[object, ...], Counter[tuple[str, ...]]] = {}
    for entry in new:
        counts = cover.setdefault(_pod_kind(entry), Counter())
        for d in entry.assignment.domains:
            counts[d.values] += d.count
    out = []
    for entry in old:
        counts = cover.get(_pod_kind(entry), Counter())
        domains = []
        for d in entry.assignment.domains:
            covered = min(d.count, counts[d.values])
            counts[d.values] -= covered  # each covering pod covers one old pod only
            if d.count > covered:
                domains.append(DomainAssignment(d.values, d.count - covered))
        if domains:
            left = TopologyAssignment(entry.assignment.levels, tuple(domains))
            out.append(UsageEntry(entry.flavor, left, entry.per_pod))
    return tuple(out)


def _pod_kind(entry: UsageEntry) -> tuple[object, ...]:
    return (entry.flavor, entry.assignment.levels, tuple(sorted(entry.per_pod.items())))


# --- flavors sharing nodes ----------------------------------------------------------------------


def charges_snapshot(
    snapshot_flavor: str,
    snap: TopologySnapshot,
    usage_flavor: str,
    a: TopologyAssignment,
    gates: FeatureGates = DEFAULT_GATES,
) -> bool:
    """Whether an assignment made on ``usage_flavor`` holds capacity in this flavor's snapshot:
    its own flavor always; flavors sharing hostnames see each other's hostname-level usage
    (Kueue, with TASHandleOverlappingFlavors; without it each flavor sees only its own)."""
    if snapshot_flavor == usage_flavor:
        return True
    return gates.overlapping_flavors and a.levels == (c.HOSTNAME_LABEL,) and snap.tree.lowest_is_hostname
