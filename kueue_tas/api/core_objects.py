"""Models of the core and job objects kueue-tas reads: core/v1 Node and Pod, batch/v1 Job, JobSet,
apps/v1 DaemonSet."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from kueue_tas.api import constants as c
from kueue_tas.api.object_base import (
    Condition,
    KubeModel,
    NonNegativeInt32,
    ObjectMeta,
    TaintModel,
    TolerationModel,
    TypedObject,
    condition_is_true,
)

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
    parallelism: NonNegativeInt32 | None = None
    completions: NonNegativeInt32 | None = None
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
    replicas: NonNegativeInt32 = 1  # JobSet's CRD default
    template: JobTemplateSpec = Field(default_factory=JobTemplateSpec)


class JobSetSpec(KubeModel):
    replicated_jobs: list[ReplicatedJob] = Field(default_factory=list)
    suspend: bool | None = None


class JobSet(TypedObject):
    spec: JobSetSpec = Field(default_factory=JobSetSpec)


# --- apps/v1 ----------------------------------------------------------------------------------


class DaemonSetSpec(KubeModel):
    # The pod template is read as a plain dict by ``kueue_tas.capacity.daemonsets``.
    template: dict[str, Any] = Field(default_factory=dict)


class DaemonSet(TypedObject):
    spec: DaemonSetSpec = Field(default_factory=DaemonSetSpec)
