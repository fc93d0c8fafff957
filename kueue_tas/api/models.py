"""Pydantic models of the Kubernetes and Kueue objects kueue-tas reads.

Only the fields we use are modelled; everything else is ignored on input
(``extra="ignore"``). Fields are named in snake_case and read from the
camelCase of the API (``populate_by_name`` also allows snake_case). Pod
templates stay raw dicts: we hand them to the request/annotation parsers and
write them back, and they must round-trip unchanged.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from kueue_tas.api import constants as c


class KubeModel(BaseModel):
    model_config = ConfigDict(
        extra="ignore",
        populate_by_name=True,
        alias_generator=to_camel,
        frozen=False,
    )


# --- shared pieces ----------------------------------------------------------------------------


class OwnerReference(KubeModel):
    api_version: str = ""
    kind: str = ""
    name: str = ""
    uid: str = ""
    controller: bool | None = None


class ObjectMeta(KubeModel):
    name: str = ""
    namespace: str | None = None
    uid: str | None = None
    resource_version: str | None = None
    generation: int | None = None
    labels: dict[str, str] = Field(default_factory=dict)
    annotations: dict[str, str] = Field(default_factory=dict)
    owner_references: list[OwnerReference] = Field(default_factory=list)
    deletion_timestamp: str | None = None

    def controller_owner(self) -> OwnerReference | None:
        """The owner reference marked ``controller: true``, if any."""
        for ref in self.owner_references:
            if ref.controller:
                return ref
        return None


class Condition(KubeModel):
    """A ``metav1.Condition`` (Kueue objects) or a core-v1 NodeCondition; both have type/status."""

    type: str
    status: str = "Unknown"
    reason: str | None = None
    message: str | None = None
    last_transition_time: str | None = None
    observed_generation: int | None = None


def find_condition(conditions: list[Condition], type_: str) -> Condition | None:
    """The first condition of ``type_`` (Kubernetes helpers also return the first one)."""
    for cond in conditions:
        if cond.type == type_:
            return cond
    return None


def condition_is_true(conditions: list[Condition], type_: str) -> bool:
    cond = find_condition(conditions, type_)
    return cond is not None and cond.status == "True"


class TaintModel(KubeModel):
    key: str = ""
    value: str = ""
    effect: str = ""


class TolerationModel(KubeModel):
    key: str = ""
    operator: str = ""
    value: str = ""
    effect: str = ""
    toleration_seconds: int | None = None


class TypedObject(KubeModel):
    api_version: str = ""
    kind: str = ""
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)

    @property
    def name(self) -> str:
        return self.metadata.name

    @property
    def namespace(self) -> str | None:
        return self.metadata.namespace


# --- Kueue ------------------------------------------------------------------------------------


class TopologyLevel(KubeModel):
    node_label: str


class TopologySpec(KubeModel):
    levels: list[TopologyLevel] = Field(default_factory=list)


class Topology(TypedObject):
    """``kueue.x-k8s.io`` Topology (v1beta2; v1beta1 and v1alpha1 have the same spec)."""

    spec: TopologySpec = Field(default_factory=TopologySpec)

    @property
    def levels(self) -> tuple[str, ...]:
        return tuple(level.node_label for level in self.spec.levels)


class ResourceFlavorSpec(KubeModel):
    node_labels: dict[str, str] = Field(default_factory=dict)
    node_taints: list[TaintModel] = Field(default_factory=list)
    tolerations: list[TolerationModel] = Field(default_factory=list)
    topology_name: str | None = None


class ResourceFlavor(TypedObject):
    spec: ResourceFlavorSpec = Field(default_factory=ResourceFlavorSpec)


class AdmissionCheckParameters(KubeModel):
    api_group: str = ""
    kind: str = ""
    name: str = ""


class AdmissionCheckSpec(KubeModel):
    controller_name: str = ""
    parameters: AdmissionCheckParameters | None = None


class AdmissionCheckStatus(KubeModel):
    conditions: list[Condition] = Field(default_factory=list)


class AdmissionCheck(TypedObject):
    spec: AdmissionCheckSpec = Field(default_factory=AdmissionCheckSpec)
    status: AdmissionCheckStatus = Field(default_factory=AdmissionCheckStatus)

    @property
    def active(self) -> bool:
        return condition_is_true(self.status.conditions, c.CONDITION_ACTIVE)


class FlavorQuotas(KubeModel):
    name: str
    resources: list[dict[str, Any]] = Field(default_factory=list)


class ResourceGroup(KubeModel):
    covered_resources: list[str] = Field(default_factory=list)
    flavors: list[FlavorQuotas] = Field(default_factory=list)


class AdmissionCheckStrategyRule(KubeModel):
    name: str
    on_flavors: list[str] = Field(default_factory=list)


class AdmissionChecksStrategy(KubeModel):
    admission_checks: list[AdmissionCheckStrategyRule] = Field(default_factory=list)


class ClusterQueueSpec(KubeModel):
    resource_groups: list[ResourceGroup] = Field(default_factory=list)
    admission_checks_strategy: AdmissionChecksStrategy | None = None
    # v1beta1 only: plain list of check names (no per-flavor restriction).
    admission_checks: list[str] = Field(default_factory=list)


class ClusterQueue(TypedObject):
    spec: ClusterQueueSpec = Field(default_factory=ClusterQueueSpec)

    def flavor_names(self) -> list[str]:
        """Every flavor of every resource group, in order, without duplicates."""
        seen: dict[str, None] = {}
        for group in self.spec.resource_groups:
            for flavor in group.flavors:
                seen.setdefault(flavor.name, None)
        return list(seen)

    def check_rules(self) -> list[AdmissionCheckStrategyRule]:
        """The check rules, v1beta1's plain ``admissionChecks`` turned into rules without onFlavors."""
        strategy = self.spec.admission_checks_strategy
        rules = list(strategy.admission_checks) if strategy is not None else []
        known = {rule.name for rule in rules}
        rules.extend(AdmissionCheckStrategyRule(name=n) for n in self.spec.admission_checks if n not in known)
        return rules

    def flavors_for_check(self, check_name: str) -> list[str] | None:
        """Flavors a check governs in this queue: its onFlavors, or all flavors when empty; None if absent."""
        for rule in self.check_rules():
            if rule.name == check_name:
                return list(rule.on_flavors) if rule.on_flavors else self.flavor_names()
        return None


class SliceConstraintModel(KubeModel):
    """One entry of ``topologyRequest.podsetSliceRequiredTopologyConstraints``."""

    topology: str = ""
    size: int = 0


class PodSetTopologyRequestModel(KubeModel):
    """``Workload.spec.podSets[].topologyRequest`` as Kueue writes it (read-only for us)."""

    required: str | None = None
    preferred: str | None = None
    unconstrained: bool | None = None
    pod_index_label: str | None = None
    sub_group_index_label: str | None = None
    sub_group_count: int | None = None
    pod_set_group_name: str | None = None
    pod_set_slice_required_topology: str | None = None
    pod_set_slice_size: int | None = None
    podset_slice_required_topology_constraints: list[SliceConstraintModel] = Field(default_factory=list)


class WorkloadPodSet(KubeModel):
    name: str = c.KUEUE_DEFAULT_PODSET_NAME
    count: int = 1
    min_count: int | None = None
    template: dict[str, Any] = Field(default_factory=dict)
    topology_request: PodSetTopologyRequestModel | None = None


class WorkloadSpec(KubeModel):
    pod_sets: list[WorkloadPodSet] = Field(default_factory=list)
    queue_name: str | None = None
    active: bool | None = None
    priority: int | None = None


class PodSetAssignment(KubeModel):
    name: str = c.KUEUE_DEFAULT_PODSET_NAME
    flavors: dict[str, str] = Field(default_factory=dict)
    resource_usage: dict[str, str | int | float] = Field(default_factory=dict)
    count: int | None = None


class Admission(KubeModel):
    cluster_queue: str = ""
    pod_set_assignments: list[PodSetAssignment] = Field(default_factory=list)


class PodSetUpdate(KubeModel):
    name: str
    labels: dict[str, str] = Field(default_factory=dict)
    annotations: dict[str, str] = Field(default_factory=dict)
    node_selector: dict[str, str] = Field(default_factory=dict)
    tolerations: list[TolerationModel] = Field(default_factory=list)


class AdmissionCheckState(KubeModel):
    name: str
    state: str = c.CHECK_STATE_PENDING
    message: str = ""
    last_transition_time: str | None = None
    requeue_after_seconds: int | None = None
    retry_count: int | None = None
    pod_set_updates: list[PodSetUpdate] = Field(default_factory=list)


class UnhealthyNode(KubeModel):
    name: str = ""


class WorkloadStatus(KubeModel):
    admission: Admission | None = None
    admission_checks: list[AdmissionCheckState] = Field(default_factory=list)
    conditions: list[Condition] = Field(default_factory=list)
    # Nodes Kueue found failed while running pods of this workload (TASFailedNodeReplacement).
    unhealthy_nodes: list[UnhealthyNode] = Field(default_factory=list)


class Workload(TypedObject):
    spec: WorkloadSpec = Field(default_factory=WorkloadSpec)
    status: WorkloadStatus = Field(default_factory=WorkloadStatus)

    def admission_check(self, name: str) -> AdmissionCheckState | None:
        for state in self.status.admission_checks:
            if state.name == name:
                return state
        return None

    def pod_set(self, name: str) -> WorkloadPodSet | None:
        for ps in self.spec.pod_sets:
            if ps.name == name:
                return ps
        return None

    def pod_set_assignment(self, name: str) -> PodSetAssignment | None:
        if self.status.admission is None:
            return None
        for psa in self.status.admission.pod_set_assignments:
            if psa.name == name:
                return psa
        return None

    @property
    def has_quota_reservation(self) -> bool:
        return condition_is_true(self.status.conditions, c.CONDITION_QUOTA_RESERVED)

    @property
    def is_admitted(self) -> bool:
        return condition_is_true(self.status.conditions, c.CONDITION_ADMITTED)

    @property
    def is_finished(self) -> bool:
        return condition_is_true(self.status.conditions, c.CONDITION_FINISHED)

    @property
    def is_evicted(self) -> bool:
        return condition_is_true(self.status.conditions, c.CONDITION_EVICTED)


# --- core/v1 ----------------------------------------------------------------------------------


class NodeSpec(KubeModel):
    unschedulable: bool = False
    taints: list[TaintModel] = Field(default_factory=list)


class NodeStatus(KubeModel):
    allocatable: dict[str, str | int | float] = Field(default_factory=dict)
    capacity: dict[str, str | int | float] = Field(default_factory=dict)
    conditions: list[Condition] = Field(default_factory=list)


class Node(TypedObject):
    spec: NodeSpec = Field(default_factory=NodeSpec)
    status: NodeStatus = Field(default_factory=NodeStatus)

    @property
    def labels(self) -> dict[str, str]:
        return self.metadata.labels

    @property
    def ready(self) -> bool:
        """True when the node's first ``Ready`` condition has status ``True`` (as Kueue checks it)."""
        return condition_is_true(self.status.conditions, c.NODE_READY_CONDITION)


class SchedulingGate(KubeModel):
    name: str


class PodSpec(KubeModel):
    node_name: str | None = None
    node_selector: dict[str, str] = Field(default_factory=dict)
    containers: list[dict[str, Any]] = Field(default_factory=list)
    init_containers: list[dict[str, Any]] = Field(default_factory=list)
    overhead: dict[str, str | int | float] | None = None
    resources: dict[str, Any] | None = None  # pod-level resources (KEP-2837)
    scheduling_gates: list[SchedulingGate] = Field(default_factory=list)
    tolerations: list[TolerationModel] = Field(default_factory=list)
    affinity: dict[str, Any] | None = None

    def as_dict(self) -> dict[str, Any]:
        """camelCase PodSpec dict (only the modelled fields), for the request helpers."""
        return self.model_dump(by_alias=True, exclude_none=True)


class PodStatus(KubeModel):
    phase: str | None = None


class Pod(TypedObject):
    spec: PodSpec = Field(default_factory=PodSpec)
    status: PodStatus = Field(default_factory=PodStatus)

    def has_gate(self, gate: str) -> bool:
        return any(g.name == gate for g in self.spec.scheduling_gates)

    @property
    def is_terminal(self) -> bool:
        return self.status.phase in c.TERMINAL_POD_PHASES


# --- batch/v1 and JobSet ----------------------------------------------------------------------


class JobSpec(KubeModel):
    parallelism: int | None = None
    completions: int | None = None
    completion_mode: str | None = None
    suspend: bool | None = None
    template: dict[str, Any] = Field(default_factory=dict)


class Job(TypedObject):
    spec: JobSpec = Field(default_factory=JobSpec)


class JobTemplateSpec(KubeModel):
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: JobSpec = Field(default_factory=JobSpec)


class ReplicatedJob(KubeModel):
    name: str
    replicas: int = 1  # JobSet's CRD default
    template: JobTemplateSpec = Field(default_factory=JobTemplateSpec)


class JobSetSpec(KubeModel):
    replicated_jobs: list[ReplicatedJob] = Field(default_factory=list)
    suspend: bool | None = None


class JobSet(TypedObject):
    spec: JobSetSpec = Field(default_factory=JobSetSpec)


# --- dispatch ---------------------------------------------------------------------------------

KubeObject = Topology | ResourceFlavor | AdmissionCheck | ClusterQueue | Workload | Node | Pod | Job | JobSet

_KUEUE_KINDS: dict[str, type[TypedObject]] = {
    c.KIND_RESOURCE_FLAVOR: ResourceFlavor,
    c.KIND_ADMISSION_CHECK: AdmissionCheck,
    c.KIND_CLUSTER_QUEUE: ClusterQueue,
    c.KIND_WORKLOAD: Workload,
}

_OTHER_KINDS: dict[tuple[str, str], type[TypedObject]] = {
    (c.CORE_API_VERSION, c.KIND_NODE): Node,
    (c.CORE_API_VERSION, c.KIND_POD): Pod,
    (c.BATCH_API_VERSION, c.KIND_JOB): Job,
    (c.JOBSET_API_VERSION, c.KIND_JOBSET): JobSet,
}


def model_class_for(api_version: str, kind: str) -> type[TypedObject] | None:
    """The model for an apiVersion/kind pair, or None when we do not read that kind."""
    group, _, version = api_version.rpartition("/")
    if group == c.KUEUE_GROUP:
        if kind == c.KIND_TOPOLOGY:
            return Topology if version in c.KUEUE_TOPOLOGY_INPUT_VERSIONS else None
        if version in c.KUEUE_INPUT_VERSIONS:
            return _KUEUE_KINDS.get(kind)
        return None
    return _OTHER_KINDS.get((api_version, kind))


def parse_object(obj: Mapping[str, Any]) -> KubeObject | None:
    """Parse a manifest into its model by apiVersion and kind; None for kinds we do not read.

    Raises ``pydantic.ValidationError`` when a known kind has a malformed shape.
    """
    api_version = obj.get("apiVersion")
    kind = obj.get("kind")
    if not isinstance(api_version, str) or not isinstance(kind, str):
        return None
    cls = model_class_for(api_version, kind)
    if cls is None:
        return None
    return cast(KubeObject, cls.model_validate(obj))
