"""The capacity rules: which objects of a cluster hold capacity, and where. Written once.

Every reader of capacity uses these functions and nothing else: the controller (object by
object, from its informers), ``kueue-tas capacity`` and ``describe`` (from one read of the
cluster) and ``kueue-tas plan`` (from a dump). That is what makes their numbers agree.

* Flavors: a flavor is governed when a ClusterQueue puts it under one of our AdmissionChecks
  whose Topology exists and has levels (``flavor_specs``).
* Nodes: a node counts for a flavor when it is Ready, schedulable, carries the flavor's node
  labels and a label for every level. That filter is the engine's own
  (``kueue_tas.topology.engine.tree.node_is_eligible``, applied when a snapshot's tree is built), so
  the engine's test cases and the capacity model share it too.
* Pods: every bound, non-terminal pod holds its requests on its node (``pod_charge``),
  Terminating pods included (they run until they are gone). A pod that carries our workload
  and PodSet labels (``pod_claim``) fills a slot of that Workload's assignment when the
  Workload we track under that label is trusted, the pod is in its namespace and PodSet, and
  the pod's domain (the nodeSelector our ungater or Kueue's podSetUpdates wrote, else its node's
  labels now) is one of the assignment's domains with a slot left; each filled slot stops
  being held at its domain, so the pod is charged once, where its node is now. Labels are
  not trust: a pod that fills no slot (no such Workload, another PodSet, outside the domains,
  more pods than the count) is charged like any other pod.
* Workloads: an assignment annotation is trusted while the Workload is not finished and one
  of our checks is Ready on it (``assignment_trusted``); it then holds, per PodSet, the slots
  of its domains on the PodSet's TAS flavor that no bound pod fills yet (``workload_usage``).
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
from dataclasses import dataclass, field
from typing import Any

from kueue_tas.api import constants as c
from kueue_tas.api.kueue_objects import AdmissionCheck, ClusterQueue, ResourceFlavor, Topology
from kueue_tas.api.quantity import MAX_MILLI_UNITS, QuantityError, to_kueue_units
from kueue_tas.api.resources import pod_requests, pod_requests_exact
from kueue_tas.api.workload import Workload
from kueue_tas.kube.slim import Selector, SlimPod
from kueue_tas.topology.assignment import DomainAssignment, TopologyAssignment
from kueue_tas.topology.codec import decode_assignment_annotation
from kueue_tas.topology.engine import TopologySnapshot
from kueue_tas.topology.features import DEFAULT_GATES, FeatureGates
from kueue_tas.topology.flavors import bind_flavors
from kueue_tas.topology.level_names import LEVEL_NAMES_ANNOTATION, LevelNames, level_names, level_names_problem
from kueue_tas.topology.model import ResourceMap, Toleration
from kueue_tas.topology.requests import tolerations


@dataclass(frozen=True, slots=True)
class FlavorSpec:
    """What a snapshot of a TAS flavor is built from."""

    flavor: str
    topology: str
    levels: tuple[str, ...]
    node_labels: Mapping[str, str]
    tolerations: tuple[Toleration, ...] = ()
    level_names: LevelNames = field(default_factory=LevelNames)  # the Topology's names for its levels


@dataclass(frozen=True, slots=True)
class UsageEntry:
    """One PodSet's assignment on one flavor, with its per-pod requests."""

    flavor: str
    assignment: TopologyAssignment
    per_pod: ResourceMap
    pod_set: str = ""  # the PodSet whose pods fill its slots; "" (a decision's usage): none do


@dataclass(frozen=True, slots=True)
class PodClaim:
    """What a pod says about its owner: our workload label (the Workload's UID, its name when it
    has none: ``workload_identity``) and PodSet label, and its nodeSelector. Only a claim."""

    namespace: str
    workload: str
    pod_set: str
    node_selector: Selector = ()


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


def topology_level_names(topo: Topology) -> LevelNames:
    """The names ``topo`` gives its levels (``kueue-tas.io/level-names`` and the defaults)."""
    return level_names(topo.metadata.annotations.get(LEVEL_NAMES_ANNOTATION), topo.levels)


def topology_level_names_problem(topo: Topology) -> str | None:
    """What is wrong with ``topo``'s level-names annotation, with the field named, or None."""
    problem = level_names_problem(topo.metadata.annotations.get(LEVEL_NAMES_ANNOTATION), topo.levels)
    return None if problem is None else f"metadata.annotations[{LEVEL_NAMES_ANNOTATION}]: {problem}"


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
            topology_level_names(topo),
        )
        if b.check is not None:
            per_check[b.check].add(name)
    return specs, per_check


# --- pods -------------------------------------------------------------------------------------


def pod_charge(pod: SlimPod) -> tuple[str, dict[str, int]] | None:
    """(node, requests + ``pods: 1``) of a pod that holds capacity on its node: every bound pod
    that is not finished, ours or not; None for unbound or finished pods."""
    if not pod.counts_on_node:
        return None
    return pod.node_name, pod.usage_map()


def pod_claim(pod: SlimPod) -> PodClaim | None:
    """The Workload slot a pod claims through our labels; None without both labels. Whether the
    claim holds is decided against the Workloads we track (``LiveCapacity``), never here."""
    if pod.workload is None or pod.podset is None:
        return None
    return PodClaim(pod.namespace, pod.workload, pod.podset, pod.node_selector)


def pod_domain(
    node_selector: Selector, node_labels: Mapping[str, str] | None, levels: tuple[str, ...]
) -> tuple[str, ...] | None:
    """The domain (values at ``levels``) a pod of an assignment occupies: the one its nodeSelector
    pins (the kubelet admits a pod only on a node that matched it, so a node relabelled later
    keeps its pods' slots), else the one its node's labels name now; None if neither does."""
    selector = dict(node_selector)
    if all(level in selector for level in levels):
        return tuple(selector[level] for level in levels)
    if node_labels is not None and all(level in node_labels for level in levels):
        return tuple(node_labels[level] for level in levels)
    return None


# --- workloads --------------------------------------------------------------------------------


def workload_identity(wl: Workload) -> str:
    """The value our admission writes into the workload label of the Workload's pods."""
    return wl.metadata.uid or wl.name


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
    raises ``UsageError`` for each of these instead, and for a malformed or out-of-range
    quantity in a template, which the controller charges as much as it can (``_saturated_requests``)."""
    if not assignment_trusted(wl, checks):
        return None
    return annotated_usage(wl, tas_flavors, strict=strict)


def annotated_usage(
    wl: Workload, tas_flavors: Container[str], *, strict: bool = False
) -> tuple[UsageEntry, ...] | None:
    """What ``wl``'s assignment annotation holds once trusted (None: no annotation, or one that
    does not decode); ``workload_usage`` without the trust rule, for a decision another leader
    may still be writing."""
    if c.TOPOLOGY_ASSIGNMENT_ANNOTATION not in wl.metadata.annotations:
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
        spec = ps.template.get("spec") or {}
        try:
            per_pod = pod_requests(spec)
        except QuantityError as exc:
            if strict:
                raise UsageError(f"spec.podSets[{name}].template", str(exc)) from exc
            per_pod = _saturated_requests(spec, f"{wl.namespace}/{wl.name}", name, exc)
        entries.append(UsageEntry(flavors[0], assignment, per_pod, name))
    return tuple(entries)


def _saturated_requests(spec: Mapping[str, Any], workload: str, pod_set: str, exc: QuantityError) -> dict[str, int]:
    """Requests of a trusted PodSet whose template holds an amount beyond int64 milli-units (we
    never admit one; an edit can make one): such an amount is charged as the most a quantity can
    be, which fills any node, so the PodSet's slots keep their domains and nothing is placed on
    top of them. Leaving the whole Workload out (or failing the informer's handler) would free
    its capacity for a second workload."""
    import structlog  # not at module level: see workload_usage

    structlog.get_logger(__name__).warning(
        "podset_requests_out_of_range", workload=workload, pod_set=pod_set, error=str(exc)
    )
    try:
        exact = pod_requests_exact(spec)
    except (QuantityError, ValueError):
        return {}  # no amount can be read: the slots hold their pods' count only
    out = {}
    for resource, amount in exact.items():
        try:
            out[resource] = to_kueue_units(resource, amount)
        except QuantityError:
            out[resource] = MAX_MILLI_UNITS if amount > 0 else 0
    return out


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
            out.append(UsageEntry(entry.flavor, left, entry.per_pod, entry.pod_set))
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
