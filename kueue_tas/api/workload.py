"""Model of Kueue's Workload: its PodSets, admission, check states and conditions."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from pydantic import Field

from kueue_tas.api import constants as c
from kueue_tas.api.object_base import (
    INT32_MAX,
    Condition,
    KubeModel,
    TolerationModel,
    TypedObject,
    condition_is_true,
    find_condition,
    parse_rfc3339,
)

# Kueue's v1beta2 Workload holds at most 18 PodSets (its CRD's maxItems). The model does not
# enforce it, nor the counts' bounds: the controller refuses such a Workload with a message
# instead of dropping it unread.
MAX_PODSETS = 18


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
    # Kueue's maximum runtime of the admitted workload (from the Job's
    # kueue.x-k8s.io/max-exec-time-seconds label): reservations count on it to end by then.
    maximum_execution_time_seconds: int | None = None


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

    @property
    def admitted_at(self) -> datetime | None:
        """When Kueue admitted it (its Admitted condition, else its QuotaReserved one)."""
        for kind in (c.CONDITION_ADMITTED, c.CONDITION_QUOTA_RESERVED):
            cond = find_condition(self.status.conditions, kind)
            if cond is not None and cond.status == "True" and cond.last_transition_time:
                try:
                    return parse_rfc3339(cond.last_transition_time)
                except ValueError:
                    return None
        return None


@dataclass(frozen=True, slots=True)
class PodSetCountFault:
    """The first way a Workload's PodSets break Kueue's schema: none, more than ``MAX_PODSETS``,
    or a count outside 0..int32 (``podset`` / ``index`` name it, ``admitted``: the count of its
    ``status.admission`` assignment, ``index`` then in that list). One rule; ``plan`` and the
    controller word it each in their own style."""

    kind: Literal["empty", "too_many", "count"]
    total: int = 0
    podset: str = ""
    index: int = -1
    admitted: bool = False
    count: int = 0


def podset_count_fault(wl: Workload) -> PodSetCountFault | None:
    n = len(wl.spec.pod_sets)
    if n == 0:
        return PodSetCountFault("empty")
    if n > MAX_PODSETS:
        return PodSetCountFault("too_many", total=n)
    counts = [(ps.name, i, False, ps.count) for i, ps in enumerate(wl.spec.pod_sets)]
    if wl.status.admission is not None:
        counts += [
            (psa.name, i, True, psa.count)
            for i, psa in enumerate(wl.status.admission.pod_set_assignments)
            if psa.count is not None
        ]
    for name, i, admitted, count in counts:
        if not 0 <= count <= INT32_MAX:
            return PodSetCountFault("count", n, name, i, admitted, count)
    return None
