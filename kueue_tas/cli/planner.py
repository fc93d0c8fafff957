"""Offline placement of a cluster dump: the engine behind ``kueue-tas plan``.

Pure: parsed objects in, per-PodSet results out. The dump feeds the controller's own
capacity model (``kueue_tas.capacity``: the same rules for eligible nodes, non-TAS pods and
Workloads already admitted by our check), then every other Workload, Job and JobSet is
placed in input order, each placed one held as usage for the next, exactly as the
controller would. Workloads placed again from an existing assignment (node replacement,
elastic slices; ``kueue_tas.topology.admitted.plan_replacements``) pass it to the engine as
``current`` instead of holding it as usage.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from datetime import UTC, datetime

from kueue_tas.api import constants as c
from kueue_tas.api.core_objects import DaemonSet, Job, JobSet, Node, Pod
from kueue_tas.api.kinds import KubeObject
from kueue_tas.api.kueue_objects import AdmissionCheck, ClusterQueue, ResourceFlavor, Topology
from kueue_tas.api.podsets import PodSetSpec, podsets_of
from kueue_tas.api.quantity import QuantityError
from kueue_tas.api.shapes import template_shape_error
from kueue_tas.api.workload import PodSetTopologyRequestModel, Workload
from kueue_tas.capacity.daemonsets import DEFAULT_POLICY, DaemonSetError, ReservationPolicy, daemonset_spec
from kueue_tas.capacity.feed import feed_pod, feed_workload, workload_key
from kueue_tas.capacity.live import LiveCapacity
from kueue_tas.capacity.preemption import find_preemption
from kueue_tas.capacity.preemption_policy import Mode, candidates, mode_of
from kueue_tas.capacity.rules import (
    FlavorSpec,
    UsageEntry,
    UsageError,
    assignment_trusted,
    flavor_specs,
    our_checks,
    pod_charge,
    topology_level_names_problem,
)
from kueue_tas.capacity.workload_placement import (
    BadGroups,
    Domain,
    FollowUp,
    InvalidRequest,
    LevelRefused,
    NoTopology,
    PodSetInput,
    RequestProblem,
    WorkloadRequests,
    place_workload,
    workload_requests,
)
from kueue_tas.cli.plan_scope import ScopeReader
from kueue_tas.kube.slim import SlimPod, slim_pod
from kueue_tas.topology.admitted import ReplacementIndex
from kueue_tas.topology.assignment import TopologyAssignment
from kueue_tas.topology.engine import TopologySnapshot, WhyNot, WorkloadTopology
from kueue_tas.topology.explain import wait_note
from kueue_tas.topology.features import DEFAULT_GATES, FeatureGates
from kueue_tas.topology.flavors import FlavorBinding, FlavorMappingError, bind_flavors
from kueue_tas.topology.kube_syntax import label_value_errors
from kueue_tas.topology.requests import (
    PlanInputError,
    TopologyRequestError,
    check_groups,
    check_jobset_counts,
    check_workload_counts,
    describe,
    field_is_explicit,
    has_topology_annotation,
    levels_problem,
    node_info,
    request_input_error,
    template_annotations,
    topology_levels_problem,
    unknown_keys,
)
from kueue_tas.topology.requests import template_path as _template_path

__all__ = ["Placeable", "PlanInputError", "Planner", "PodSetPlan", "WorkloadPlan", "describe"]

# The PodSpec fields requests are read from: a pod whose requests are malformed is an input
# error only when it would be charged.
_REQUEST_FIELDS = frozenset({"containers", "initContainers", "overhead", "resources"})


NOT_PLACED = "not placed: an earlier PodSet of this workload does not fit"


@dataclass
class PodSetPlan:
    name: str
    count: int
    flavor: str | None = None
    topology: str | None = None
    assignment: TopologyAssignment | None = None
    message: str = ""
    governed: bool = True
    # Both levels of a required + preferred request (kueue-tas's extension), shown by the text
    # view because the pair changes where pods go; None for every other request.
    required_preferred: tuple[str, str] | None = None
    why_not: WhyNot | None = None  # the numbers of a "does not fit" message (the map shows them)

    @property
    def fits(self) -> bool:
        return not self.governed or self.assignment is not None


@dataclass(frozen=True)
class PreemptionPlan:
    """What topology-driven preemption would do for a workload that does not fit: its
    ClusterQueue's ``mode`` (Enabled or DryRun), the ``domain`` it would clear (``levels``
    from the top down to its level, and their ``values``) and the ``victims`` evicted for it
    (namespace, name, priority). ``plan`` evicts nothing."""

    mode: str
    levels: tuple[str, ...]
    values: tuple[str, ...]
    victims: tuple[tuple[str, str, int], ...]


@dataclass
class WorkloadPlan:
    kind: str
    namespace: str | None
    name: str
    podsets: list[PodSetPlan] = field(default_factory=list)
    scope: WorkloadTopology | None = None  # the workload-wide constraint, if any
    preemption: PreemptionPlan | None = None

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
        daemonset_policy: ReservationPolicy = DEFAULT_POLICY,
        now: float | None = None,
        preemption_max_victims: int = 8,
        preemption_cost_resource: str = "nvidia.com/gpu",
    ) -> None:
        """``daemonset_policy`` and ``now`` (epoch seconds; None: the time of day): which
        DaemonSets of the dump reserve their pods, and until when (``capacity.daemonsets``);
        ``preemption_*``: the settings topology-driven preemption is judged with."""
        self.prefix = prefix
        self.gates = gates
        self.default_flavor = default_flavor
        self.topologies = {o.name: o for o in objects if isinstance(o, Topology)}
        for topology in self.topologies.values():
            problem = topology_levels_problem(topology.levels)
            if problem is not None:
                raise PlanInputError(f"{describe(topology)}: {problem[0]}: {problem[1]}")
            names = topology_level_names_problem(topology)
            if names is not None:
                raise PlanInputError(f"{describe(topology)}: {names}")
        self.warnings: list[str] = []  # about the input; the command prints them, one a line
        self.flavors = {o.name: o for o in objects if isinstance(o, ResourceFlavor)}
        checks = [o for o in objects if isinstance(o, AdmissionCheck)]
        self.our_checks = our_checks(checks, c.CONTROLLER_NAME)
        queues = [o for o in objects if isinstance(o, ClusterQueue)]
        self.queues = {q.name: q for q in queues}
        self.preemption_max_victims = preemption_max_victims
        self.preemption_cost_resource = preemption_cost_resource
        self._held: dict[str, Domain] = {}  # preemptor -> the domain a preemption would hold for it
        self._evicted: set[str] = set()  # victims of earlier preemptions of this plan
        self.nodes = [o for o in objects if isinstance(o, Node)]
        self.pods = [o for o in objects if isinstance(o, Pod)]
        self.daemonsets = [o for o in objects if isinstance(o, DaemonSet)]
        self.workloads = [o for o in objects if isinstance(o, Workload)]
        self.order = [o for o in objects if isinstance(o, Workload | Job | JobSet)]
        topology_names = {name: f.spec.topology_name for name, f in self.flavors.items()}
        try:
            # Every flavor plan governs (also those whose Topology is missing: placing on one is an
            # input error); the specs are those the capacity model can build a snapshot for.
            self.bindings: dict[str, FlavorBinding] = bind_flavors(checks, queues, topology_names)
            self.specs: dict[str, FlavorSpec] = flavor_specs(
                self.our_checks, queues, self.topologies.get, self.flavors.get, c.CONTROLLER_NAME, topology_names
            )[0]
        except FlavorMappingError as exc:
            raise PlanInputError(str(exc)) from exc
        if default_flavor is not None and default_flavor not in self.flavors and default_flavor not in self.bindings:
            raise PlanInputError(f"--flavor {default_flavor!r}: no ResourceFlavor of that name in the input")
        clock = time.time if now is None else _fixed(now)
        self._clock = clock
        self.capacity = LiveCapacity(
            gates, snapshot_class=self.snapshot_class, daemonset_policy=daemonset_policy, clock=clock
        )
        self.capacity.set_flavors(self.specs)
        # Re-placed Workloads (node replacement) and replaced slices (elastic): their current
        # assignment is the engine's ``current``, not usage.
        self.replacements = ReplacementIndex.build(self.workloads, self._trusted, gates)
        self._hidden = ExitStack()  # the replaced Workloads, out of the count for the whole plan
        self._usage_fed = False  # admitted Workloads: read up front, every annotation validated
        self._cluster_fed = False  # nodes and pods: read when a snapshot is first needed
        self._placed = 0
        self.scopes = ScopeReader(objects, prefix)

    # --- the capacity model -------------------------------------------------------------------

    def snapshot(self, flavor: str, context: str) -> TopologySnapshot:
        if flavor not in self.specs:
            binding = self.bindings[flavor]
            topology = self.topologies.get(binding.topology)
            if topology is None:
                raise PlanInputError(
                    f"{context}: flavor {flavor!r} is on Topology {binding.topology!r}, which is not in the input"
                )
            raise PlanInputError(f"Topology/{topology.name}: spec.levels: must list at least one level")
        self._feed_usage()
        self._feed_cluster()
        snap = self.capacity.snapshot(flavor)
        assert snap is not None  # every flavor with a spec has one
        return snap

    def _feed_usage(self) -> None:
        if self._usage_fed:
            return
        for wl in self.workloads:
            if not self.replacements.counts_as_usage(wl):
                # The engine charges what it keeps (``current``): its pods fill its slots, and
                # slots and pods stay out of the count (the model's ``without``, for good).
                self._hidden.enter_context(self.capacity.without(workload_key(wl)))
                feed_workload(self.capacity, wl, self.our_checks)
                continue
            try:
                feed_workload(self.capacity, wl, self.our_checks, strict=True)
            except UsageError as exc:
                raise PlanInputError(f"{describe(wl)}: {exc.field}: {exc.problem}") from exc
        self._usage_fed = True

    def _feed_cluster(self) -> None:
        if self._cluster_fed:
            return
        # Domains are told apart by these labels' values: one Kubernetes would refuse (a comma,
        # 64 characters) could merge two domains or not fit in an assignment.
        level_keys = {level for spec in self.specs.values() for level in spec.levels}
        for n in self.nodes:
            for key in level_keys & n.metadata.labels.keys():
                errors = label_value_errors(n.metadata.labels[key])
                if errors:
                    value = n.metadata.labels[key]
                    raise PlanInputError(f"{describe(n)}: metadata.labels[{key}]: invalid value {value!r}: {errors[0]}")
            try:
                self.capacity.upsert_node(node_info(n))
            except (QuantityError, ValueError) as exc:
                raise PlanInputError(f"{describe(n)}: status.allocatable: {exc}") from exc
        for ds in self.daemonsets:
            try:
                spec = daemonset_spec(ds.model_dump(by_alias=True, exclude_none=True))
            except DaemonSetError as exc:
                raise PlanInputError(f"{describe(ds)}: {exc.field}: {exc.problem}") from exc
            if spec is not None:
                self.capacity.upsert_daemonset(spec)
        for pod in self.pods:
            slim = self._slim_pod(pod)
            if slim is not None:
                feed_pod(self.capacity, slim)
        self._cluster_fed = True

    def _slim_pod(self, pod: Pod) -> SlimPod | None:
        """The pod as the controller's informer keeps it; None for a pod with malformed requests
        that would not be charged anyway (they are never read)."""
        raw = pod.model_dump(by_alias=True, exclude_none=True)
        problem = template_shape_error({"spec": raw["spec"]}, "")
        if problem is not None:
            raise PlanInputError(f"{describe(pod)}: {problem}")
        try:
            return slim_pod(raw, prefix=self.prefix)
        except QuantityError as exc:
            bare = {k: v for k, v in raw["spec"].items() if k not in _REQUEST_FIELDS}
            if pod_charge(slim_pod({**raw, "spec": bare}, prefix=self.prefix)) is None:
                return None
            raise PlanInputError(f"{describe(pod)}: spec.containers[].resources: {exc}") from exc

    def _trusted(self, wl: Workload) -> bool:
        return assignment_trusted(wl, self.our_checks)

    # --- flavors ------------------------------------------------------------------------------

    def _flavor_of(self, obj: KubeObject, ps_name: str, context: str) -> str | None:
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
                return names[0]
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
            if isinstance(obj, Workload) and self._trusted(obj) and not self.replacements.replaced_in_place(obj):
                continue
            if isinstance(obj, Job | JobSet) and (
                (obj.kind, obj.metadata.namespace, obj.name) in owned
                or (obj.metadata.uid and (obj.kind, "uid", obj.metadata.uid) in owned)
            ):
                continue  # its Workload is in the input and is placed instead
            podsets = podsets_of(obj)
            for index, ps in enumerate(podsets):
                # Before anything reads a template (annotations, requests): a field of the wrong
                # type is one line naming the object and the field, never a traceback.
                problem = template_shape_error(ps.template, _template_path(obj, index))
                if problem is not None:
                    raise PlanInputError(f"{describe(obj)}: {problem}")
            if isinstance(obj, JobSet):
                check_jobset_counts(obj, podsets)
            if isinstance(obj, Workload):
                podsets = [PodSetSpec(ps.name, self._admitted_count(obj, ps), ps.template) for ps in podsets]
            out.append(Placeable(obj, podsets))
        return out

    @staticmethod
    def _admitted_count(wl: Workload, ps: PodSetSpec) -> int:
        psa = wl.pod_set_assignment(ps.name)
        return psa.count if psa is not None and psa.count is not None else ps.count

    def run(self) -> list[WorkloadPlan]:
        for wl in self.workloads:
            check_workload_counts(wl)
        self._feed_usage()  # validates every assignment annotation up front
        return [self.place(p) for p in self.placeables()]

    def place(self, item: Placeable) -> WorkloadPlan:
        obj = item.obj
        context = describe(obj)
        plan = WorkloadPlan(obj.kind, obj.metadata.namespace, obj.name)
        inputs: list[PodSetInput] = []
        plans: dict[str, PodSetPlan] = {}
        for index, ps in enumerate(item.podsets):
            annotations = _annotations(obj, ps, index)
            self.warnings.extend(unknown_keys(obj, index, annotations, self.prefix))
            field = _topology_field(obj, ps.name)
            explicit = has_topology_annotation(annotations, prefix=self.prefix) or field_is_explicit(field)
            flavor = self._flavor_of(obj, ps.name, context)
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
            ps_plan.topology = self.snapshot(flavor, context).topology_name  # its Topology is in the input
            inputs.append(PodSetInput(ps.name, ps.count, ps.template, flavor, index, field))
            plans[ps.name] = ps_plan
        requests = workload_requests(
            inputs,
            self.capacity,
            prefix=self.prefix,
            gates=self.gates,
            workload_annotations=self.scopes.annotations(obj),
        )
        if not isinstance(requests, WorkloadRequests):
            raise self._input_error(obj, requests)
        plan.scope = requests.scope
        for entry, request in requests.podsets:
            topo = request.topology
            if topo is not None and topo.preferred_in_required and topo.required and topo.preferred:
                plans[entry.name].required_preferred = (topo.required, topo.preferred)
        replacement = self.replacements.replacement_of(obj)
        follow_up = None if replacement is None else FollowUp(replacement.current, replacement.unhealthy_nodes)
        key = workload_key(obj) if isinstance(obj, Workload) else ""
        closed = [d for k, d in self._held.items() if k != key]
        placed = place_workload(requests, self.capacity, gates=self.gates, follow_up=follow_up, closed=closed)
        if not placed.fits and follow_up is None and isinstance(obj, Workload):
            plan.preemption = self._preemption(obj, requests, closed)
        held: list[UsageEntry] = []
        for entry, request in requests.podsets:
            ps_plan = plans[entry.name]
            result = placed.results.get(entry.name)
            # No result, or an empty one: its group came after the one that failed.
            if result is None or (result.assignment is None and not result.message):
                ps_plan.message = NOT_PLACED
                continue
            ps_plan.assignment, ps_plan.why_not = result.assignment, result.why_not
            ps_plan.message = result.message
            if result.assignment is not None:
                ps_plan.message = ps_plan.message or wait_note(
                    self.snapshot(entry.flavor, context), request, result.assignment
                )
                held.append(UsageEntry(entry.flavor, result.assignment, dict(request.requests)))
        if placed.fits and held:
            # Held as the controller holds a decision it has not yet seen written back.
            self._placed += 1
            self.capacity.assume(f"plan:{self._placed}", tuple(held))
        return plan

    def _preemption(self, wl: Workload, requests: WorkloadRequests, closed: list[Domain]) -> PreemptionPlan | None:
        """What the controller would evict for ``wl`` (it holds quota in a ClusterQueue that
        opted in), as ``controllers.preemption`` decides it; an Enabled one's domain is then
        closed to the rest of the plan, as the controller holds it."""
        if wl.status.admission is None:
            return None
        queue = self.queues.get(wl.status.admission.cluster_queue)
        mode, problem = mode_of(queue, self.prefix)
        if problem is not None:
            self.warnings.append(problem)
        if mode is Mode.DISABLED or queue is None:
            return None
        now = datetime.fromtimestamp(self._clock(), UTC)
        pool = candidates(
            wl,
            queue,
            self.workloads,
            self.queues,
            self.capacity,
            now=now,
            cost_resource=self.preemption_cost_resource,
            exclude=self._evicted,
        )
        found = find_preemption(
            requests, self.capacity, pool, max_victims=self.preemption_max_victims, gates=self.gates, closed=closed
        )
        if found is None:
            return None
        by_key = {workload_key(w): w for w in self.workloads}
        victims = tuple((by_key[v.key].metadata.namespace or "", by_key[v.key].name, v.priority) for v in found.victims)
        if mode is Mode.ENABLED:
            self._held[workload_key(wl)] = found.domain
            self._evicted.update(v.key for v in found.victims)
        snap = self.capacity.snapshot(found.domain.flavor)
        levels = tuple(snap.levels[: len(found.domain.values)]) if snap is not None else (found.domain.level,)
        return PreemptionPlan(mode.value, levels, found.domain.values, victims)

    def _input_error(self, obj: KubeObject, problem: RequestProblem) -> PlanInputError:
        """``problem`` as an input error naming the object and the field's path."""
        if isinstance(problem, InvalidRequest):
            return request_input_error(obj, problem.podset.index, problem.error)
        if isinstance(problem, NoTopology):  # the loop above asked for every snapshot first
            return PlanInputError(f"{describe(obj)}: flavor {problem.podset.flavor!r} has no usable Topology")
        if isinstance(problem, LevelRefused):
            snap, ps = problem.snapshot, problem.podset
            line = levels_problem(
                obj,
                ps.index,
                problem.request,
                snap.levels,
                snap.topology_name,
                snap.level_names,
                ps.topology_field,
                self.prefix,
            )
            return PlanInputError(line or f"{describe(obj)}: {problem.problem.field}: refused")
        if isinstance(problem, BadGroups):
            try:
                check_groups(
                    obj,
                    [(ps.index, request) for ps, request, _ in problem.members],
                    [ps.topology_field for ps, _, _ in problem.members],
                    self.prefix,
                )
            except PlanInputError as exc:
                return exc
            return PlanInputError(f"{describe(obj)}: PodSet groups refused")
        return PlanInputError(f"{describe(obj)}: {problem.text}")


def _fixed(now: float) -> Callable[[], float]:
    return lambda: now


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
