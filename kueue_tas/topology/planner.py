"""Offline placement of a cluster dump: the engine behind ``kueue-tas plan``.

Pure: parsed objects in, per-PodSet results out. It builds one snapshot per
TAS flavor (eligible nodes, non-TAS pods, Workloads already admitted by our
check), then places every other Workload, Job and JobSet in input order, each
placed one counting as usage for the next, exactly as the controller would.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from kueue_tas.api import constants as c
from kueue_tas.api.models import (
    AdmissionCheck,
    ClusterQueue,
    Job,
    JobSet,
    KubeObject,
    Node,
    Pod,
    PodSetTopologyRequestModel,
    ResourceFlavor,
    Topology,
    Workload,
)
from kueue_tas.api.podsets import PodSetSpec, podsets_of
from kueue_tas.api.quantity import QuantityError
from kueue_tas.api.resources import pod_requests
from kueue_tas.topology.assignment import TopologyAssignment
from kueue_tas.topology.codec import AssignmentFormatError, decode_assignment_annotation
from kueue_tas.topology.features import DEFAULT_GATES, FeatureGates
from kueue_tas.topology.flavors import FlavorBinding, FlavorMappingError, bind_flavors
from kueue_tas.topology.inputs import is_tas_pod, node_info, pod_usage, tolerations
from kueue_tas.topology.model import PodSetRequest
from kueue_tas.topology.plan_replacements import ReplacementIndex
from kueue_tas.topology.plan_requests import (
    PlanInputError,
    check_groups,
    check_levels,
    describe,
    podset_request_for,
)
from kueue_tas.topology.plan_requests import template_path as _template_path
from kueue_tas.topology.request import TopologyRequestError, has_topology_annotation, template_annotations
from kueue_tas.topology.request_field import field_is_explicit
from kueue_tas.topology.snapshot import TopologySnapshot, charges_snapshot

__all__ = ["Placeable", "PlanInputError", "Planner", "PodSetPlan", "WorkloadPlan", "describe"]


@dataclass
class PodSetPlan:
    name: str
    count: int
    flavor: str | None = None
    topology: str | None = None
    assignment: TopologyAssignment | None = None
    message: str = ""
    governed: bool = True

    @property
    def fits(self) -> bool:
        return not self.governed or self.assignment is not None


@dataclass
class WorkloadPlan:
    kind: str
    namespace: str | None
    name: str
    podsets: list[PodSetPlan] = field(default_factory=list)

    @property
    def fits(self) -> bool:
        return all(ps.fits for ps in self.podsets)


@dataclass
class Placeable:
    obj: Workload | Job | JobSet
    podsets: list[PodSetSpec]


class Planner:
    # The engine's entry point; a seam for tests that check what reaches ``place``.
    snapshot_class: type[TopologySnapshot] = TopologySnapshot

    def __init__(
        self,
        objects: Sequence[KubeObject],
        *,
        default_flavor: str | None = None,
        prefix: str = c.DEFAULT_ANNOTATION_PREFIX,
        gates: FeatureGates = DEFAULT_GATES,
    ) -> None:
        self.prefix = prefix
        self.gates = gates
        self.default_flavor = default_flavor
        self.topologies = {o.name: o for o in objects if isinstance(o, Topology)}
        self.flavors = {o.name: o for o in objects if isinstance(o, ResourceFlavor)}
        checks = [o for o in objects if isinstance(o, AdmissionCheck)]
        self.our_checks = {ac.name for ac in checks if ac.is_ours}
        queues = [o for o in objects if isinstance(o, ClusterQueue)]
        self.nodes = [o for o in objects if isinstance(o, Node)]
        self.pods = [o for o in objects if isinstance(o, Pod)]
        self.workloads = [o for o in objects if isinstance(o, Workload)]
        self.order = [o for o in objects if isinstance(o, Workload | Job | JobSet)]
        try:
            self.bindings: dict[str, FlavorBinding] = bind_flavors(
                checks, queues, {name: f.spec.topology_name for name, f in self.flavors.items()}
            )
        except FlavorMappingError as exc:
            raise PlanInputError(str(exc)) from exc
        if default_flavor is not None and default_flavor not in self.flavors and default_flavor not in self.bindings:
            raise PlanInputError(f"--flavor {default_flavor!r}: no ResourceFlavor of that name in the input")
        self._snapshots: dict[str, TopologySnapshot] = {}
        self.replacements = ReplacementIndex.build(self.workloads, self._is_admitted_by_us, gates)
        # Every assignment that holds capacity: admitted Workloads first, then each placed one.
        self._usage: list[tuple[str, TopologyAssignment, dict[str, int]]] | None = None

    # --- snapshots ----------------------------------------------------------------------------

    def snapshot(self, flavor: str, context: str) -> TopologySnapshot:
        snap = self._snapshots.get(flavor)
        if snap is not None:
            return snap
        binding = self.bindings[flavor]
        topology = self.topologies.get(binding.topology)
        if topology is None:
            raise PlanInputError(
                f"{context}: flavor {flavor!r} is on Topology {binding.topology!r}, which is not in the input"
            )
        if not topology.levels:
            raise PlanInputError(f"Topology/{topology.name}: spec.levels: must list at least one level")
        rf = self.flavors.get(flavor)
        infos = []
        for n in self.nodes:
            try:
                infos.append(node_info(n))
            except (QuantityError, ValueError) as exc:
                raise PlanInputError(f"{describe(n)}: status.allocatable: {exc}") from exc
        snap = self.snapshot_class.build(
            topology_name=topology.name,
            levels=topology.levels,
            nodes=infos,
            flavor_node_labels=rf.spec.node_labels if rf else {},
            flavor_tolerations=tolerations(rf.spec.tolerations) if rf else (),
        )
        for pod in self.pods:
            if is_tas_pod(pod, self.prefix):
                continue
            try:
                usage = pod_usage(pod)
            except QuantityError as exc:
                raise PlanInputError(f"{describe(pod)}: spec.containers[].resources: {exc}") from exc
            if usage is not None:
                snap.add_non_tas_usage(*usage)
        if self._usage is None:
            self._usage = self._all_admitted_usage()
        self._snapshots[flavor] = snap
        for ps_flavor, assignment, per_pod in self._usage:
            self._charge(ps_flavor, assignment, per_pod, only=flavor)
        return snap

    def _all_admitted_usage(self) -> list[tuple[str, TopologyAssignment, dict[str, int]]]:
        return [u for wl in self.workloads if self.replacements.counts_as_usage(wl) for u in self._admitted_usage(wl)]

    def _commit(self, flavor: str, assignment: TopologyAssignment, per_pod: dict[str, int]) -> None:
        if self._usage is None:
            self._usage = []
        self._usage.append((flavor, assignment, per_pod))
        self._charge(flavor, assignment, per_pod)

    def _charge(
        self, flavor: str, assignment: TopologyAssignment, per_pod: dict[str, int], only: str | None = None
    ) -> None:
        """Charge an assignment to its flavor's snapshot; hostname assignments also to every
        other built snapshot with a hostname leaf (flavors sharing nodes see each other's usage)."""
        for name, snap in self._snapshots.items():
            if (only is None or name == only) and charges_snapshot(name, snap, flavor, assignment, self.gates):
                snap.add_tas_usage(assignment, per_pod)

    def _admitted_usage(self, wl: Workload) -> list[tuple[str, TopologyAssignment, dict[str, int]]]:
        """(flavor, assignment, per-pod requests) of a Workload our check admitted; [] otherwise."""
        if not self._is_admitted_by_us(wl):
            return []
        text = wl.metadata.annotations[c.TOPOLOGY_ASSIGNMENT_ANNOTATION]
        try:
            decoded = decode_assignment_annotation(text)
        except AssignmentFormatError as exc:
            raise PlanInputError(
                f"{describe(wl)}: metadata.annotations[{c.TOPOLOGY_ASSIGNMENT_ANNOTATION}]: {exc}"
            ) from exc
        out = []
        for ps_name, assignment in decoded:
            ps = wl.pod_set(ps_name)
            if ps is None:
                raise PlanInputError(
                    f"{describe(wl)}: metadata.annotations[{c.TOPOLOGY_ASSIGNMENT_ANNOTATION}]: "
                    f"names PodSet {ps_name!r}, which spec.podSets does not have"
                )
            flavor = self._flavor_of(wl, ps_name, describe(wl), governed_only=True)
            if flavor is None:
                continue
            try:
                per_pod = pod_requests(ps.template.get("spec") or {})
            except QuantityError as exc:
                raise PlanInputError(f"{describe(wl)}: spec.podSets[{ps_name}].template: {exc}") from exc
            out.append((flavor, assignment, per_pod))
        return out

    def _is_admitted_by_us(self, wl: Workload) -> bool:
        if c.TOPOLOGY_ASSIGNMENT_ANNOTATION not in wl.metadata.annotations or wl.is_finished:
            return False
        return any(st.name in self.our_checks and st.state == c.CHECK_STATE_READY for st in wl.status.admission_checks)

    # --- flavors ------------------------------------------------------------------------------

    def _flavor_of(self, obj: KubeObject, ps_name: str, context: str, governed_only: bool) -> str | None:
        """The PodSet's flavor: from the Workload's admission, else --flavor, else the only TAS flavor."""
        if isinstance(obj, Workload):
            psa = obj.pod_set_assignment(ps_name)
            if psa is not None and psa.flavors:
                names = list(dict.fromkeys(psa.flavors.values()))
                tas = [n for n in names if n in self.bindings]
                if len(tas) > 1:
                    raise PlanInputError(
                        f"{context}: status.admission.podSetAssignments[{ps_name}].flavors: "
                        f"more than one TAS flavor assigned: {', '.join(tas)}"
                    )
                if tas:
                    return tas[0]
                return None if governed_only else names[0]
        if self.default_flavor is not None:
            return self.default_flavor
        tas_flavors = sorted(self.bindings)
        if len(tas_flavors) == 1:
            return tas_flavors[0]
        return None

    # --- placing ------------------------------------------------------------------------------

    def placeables(self) -> list[Placeable]:
        owned = set()
        for wl in self.workloads:
            for ref in wl.metadata.owner_references:
                owned.add((ref.kind, wl.metadata.namespace, ref.name))
                if ref.uid:
                    owned.add((ref.kind, "uid", ref.uid))
        out = []
        for obj in self.order:
            if (
                isinstance(obj, Workload)
                and self._is_admitted_by_us(obj)
                and not self.replacements.replaced_in_place(obj)
            ):
                continue
            if isinstance(obj, Job | JobSet) and (
                (obj.kind, obj.metadata.namespace, obj.name) in owned
                or (obj.metadata.uid and (obj.kind, "uid", obj.metadata.uid) in owned)
            ):
                continue  # its Workload is in the input and is placed instead
            podsets = podsets_of(obj)
            if isinstance(obj, Workload):
                podsets = [PodSetSpec(ps.name, self._admitted_count(obj, ps), ps.template) for ps in podsets]
            out.append(Placeable(obj, podsets))
        return out

    @staticmethod
    def _admitted_count(wl: Workload, ps: PodSetSpec) -> int:
        psa = wl.pod_set_assignment(ps.name)
        return psa.count if psa is not None and psa.count is not None else ps.count

    def run(self) -> list[WorkloadPlan]:
        if self._usage is None:
            self._usage = self._all_admitted_usage()  # validates every assignment annotation up front
        return [self.place(p) for p in self.placeables()]

    def place(self, item: Placeable) -> WorkloadPlan:
        obj = item.obj
        context = describe(obj)
        plan = WorkloadPlan(obj.kind, obj.metadata.namespace, obj.name)
        groups: dict[str, list[tuple[PodSetPlan, PodSetRequest]]] = {}
        governed: list[tuple[int, PodSetRequest]] = []
        fields: list[PodSetTopologyRequestModel | None] = []
        for index, ps in enumerate(item.podsets):
            annotations = _annotations(obj, ps, index)
            field = _topology_field(obj, ps.name)
            explicit = has_topology_annotation(annotations, prefix=self.prefix) or field_is_explicit(field)
            flavor = self._flavor_of(obj, ps.name, context, governed_only=False)
            ps_plan = PodSetPlan(ps.name, ps.count, flavor=flavor)
            plan.podsets.append(ps_plan)
            if flavor is None or flavor not in self.bindings:
                if explicit:
                    path = _template_path(obj, index)
                    if flavor is None:
                        raise PlanInputError(
                            f"{context}: {path}: cannot tell the flavor: no status.admission, no --flavor, and "
                            f"{len(self.bindings)} flavors have a topology"
                        )
                    raise PlanInputError(f"{context}: {path}: flavor {flavor!r} has no topology")
                ps_plan.governed = False
                ps_plan.message = "not governed by kueue-tas: " + (
                    f"flavor {flavor!r} is not on the Topology of any AdmissionCheck "
                    f"with controllerName {c.CONTROLLER_NAME}"
                    if flavor
                    else "no flavor with a topology"
                )
                continue
            snap = self.snapshot(flavor, context)
            ps_plan.topology = snap.topology_name
            request = podset_request_for(obj, ps, index, field, self.prefix, self.gates, implied=not explicit)
            check_levels(obj, index, request, snap, field, self.prefix)
            groups.setdefault(flavor, []).append((ps_plan, request))
            governed.append((index, request))
            fields.append(field)
        check_groups(obj, governed, fields, self.prefix)
        failed = False
        placed: list[tuple[str, TopologyAssignment, dict[str, int]]] = []
        for flavor, members in groups.items():
            if failed:
                for ps_plan, _ in members:
                    ps_plan.message = "not placed: an earlier PodSet of this workload does not fit"
                continue
            requests = [r for _, r in members]
            extra = self.replacements.place_options(obj, (r.name for r in requests))
            results = self._snapshots[flavor].place(requests, gates=self.gates, **extra)
            for (ps_plan, request), result in zip(
                members, results + [None] * (len(members) - len(results)), strict=True
            ):
                if result is None:
                    ps_plan.message = "not placed: an earlier PodSet of this workload does not fit"
                    continue
                ps_plan.assignment = result.assignment
                ps_plan.message = result.message
                if result.assignment is None:
                    failed = True
                else:
                    placed.append((flavor, result.assignment, dict(request.requests)))
        if not failed:
            for flavor, assignment, per_pod in placed:
                self._commit(flavor, assignment, per_pod)
        return plan


def _topology_field(obj: KubeObject, name: str) -> PodSetTopologyRequestModel | None:
    if isinstance(obj, Workload):
        ps = obj.pod_set(name)
        return ps.topology_request if ps is not None else None
    return None


def _annotations(obj: KubeObject, ps: PodSetSpec, index: int) -> dict[str, str]:
    try:
        return dict(template_annotations(ps.template))
    except TopologyRequestError as exc:
        raise PlanInputError(f"{describe(obj)}: {_template_path(obj, index)}: {'; '.join(exc.errors)}") from exc
