"""Models of the Kueue objects kueue-tas reads: Topology, ResourceFlavor, AdmissionCheck, ClusterQueue
(the Workload has its own module, ``kueue_tas.api.workload``)."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from kueue_tas.api import constants as c
from kueue_tas.api.object_base import Condition, KubeModel, TaintModel, TolerationModel, TypedObject, condition_is_true


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


class ClusterQueuePreemption(KubeModel):
    """Kueue's ``spec.preemption``: which admitted workloads a pending one may preempt. Kueue's
    defaults: both ``Never``."""

    within_cluster_queue: str = "Never"
    reclaim_within_cohort: str = "Never"


class ClusterQueueSpec(KubeModel):
    resource_groups: list[ResourceGroup] = Field(default_factory=list)
    admission_checks_strategy: AdmissionChecksStrategy | None = None
    # v1beta1 only: plain list of check names (no per-flavor restriction).
    admission_checks: list[str] = Field(default_factory=list)
    preemption: ClusterQueuePreemption | None = None
    cohort: str | None = None  # v1beta1
    cohort_name: str | None = None  # v1beta2


class ClusterQueue(TypedObject):
    spec: ClusterQueueSpec = Field(default_factory=ClusterQueueSpec)

    @property
    def cohort(self) -> str:
        """The cohort it borrows in ("" for none), under either API version's field name."""
        return self.spec.cohort_name or self.spec.cohort or ""

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


class LocalQueueSpec(KubeModel):
    cluster_queue: str = ""


class LocalQueue(TypedObject):
    """``kueue.x-k8s.io`` LocalQueue: the namespaced queue a Job names in its queue-name label."""

    spec: LocalQueueSpec = Field(default_factory=LocalQueueSpec)
