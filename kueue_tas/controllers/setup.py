"""Every reconciler of the controller, built and registered in one place (as Kueue's
``pkg/controller/tas/controllers.go::SetupControllers``); ``kueue-tas run`` calls
:func:`setup_controllers` once, on the Manager whose tasks run while this replica leads."""

from __future__ import annotations

from dataclasses import dataclass

from kueue_tas.capacity.daemonsets import ReservationPolicy
from kueue_tas.capacity.live import LiveCapacity
from kueue_tas.controllers.admission import WorkloadAdmission
from kueue_tas.controllers.cache import CapacityCache
from kueue_tas.controllers.check_entry_writes import KubeAdmissionWriter
from kueue_tas.controllers.checkstatus import AdmissionCheckStatus, KubeCheckStatusWriter
from kueue_tas.controllers.decision_context import DecisionContext
from kueue_tas.controllers.deps import ControllerDeps
from kueue_tas.controllers.gauges import CapacityGauges
from kueue_tas.controllers.guard import AssignmentGuard
from kueue_tas.controllers.health import KubeEntryWriter, TopologyHealth
from kueue_tas.controllers.informers import OurChecks, SharedInformers
from kueue_tas.controllers.repair import NodeRepair
from kueue_tas.controllers.rewrites import OurRewrites
from kueue_tas.controllers.stray import KubePodDeleter, StrayPods
from kueue_tas.controllers.ungate import KubePodPatcher, Ungater
from kueue_tas.controllers.workload_annotations import KubeOwnerReader, WorkloadAnnotations
from kueue_tas.runtime.config import Settings
from kueue_tas.runtime.manager import Manager
from kueue_tas.topology.features import FeatureGates


@dataclass(frozen=True, slots=True)
class LiveState:
    """What the leader's reconcilers keep that the topology map reads (``cli/map_server``)."""

    capacity: LiveCapacity
    informers: SharedInformers
    cache: CapacityCache


def setup_controllers(manager: Manager, settings: Settings) -> LiveState:
    """Every reconciler of the controller, wired onto ``manager``'s shared informers.

    Built in this order on purpose: each constructor adds its informer handlers, and handlers
    run in the order they were added."""
    informers = SharedInformers.register(manager, settings.annotation_prefix, settings.scheduling_gate)
    deps = ControllerDeps(
        informers=informers,
        checks=OurChecks(informers.checks.store, settings.controller_name),
        events=manager.event_recorder,
        metrics=manager.metrics,
        settings=settings,
        gates=FeatureGates.from_mapping(settings.feature_gates),
    )
    capacity = LiveCapacity(deps.gates, daemonset_policy=ReservationPolicy.from_settings(settings))
    cache = CapacityCache(capacity, informers, deps.checks)
    gauges = CapacityGauges.from_settings(manager.metrics, capacity, settings)
    rewrites = OurRewrites()  # a node repair's rewrites in flight: not tampering, no pod released
    decisions = DecisionContext(
        deps,
        capacity=capacity,
        flavors_of=cache.flavors_of,
        writer=KubeAdmissionWriter(manager.api),
        workload_annotations=WorkloadAnnotations(KubeOwnerReader(manager.api), settings.annotation_prefix),
    )
    admission = WorkloadAdmission(decisions, decided=gauges.touch)
    guard = AssignmentGuard(deps, writer=decisions.writer, rewrites=rewrites)
    repair = NodeRepair(decisions, rewrites=rewrites)
    status = AdmissionCheckStatus(informers=informers, checks=deps.checks, writer=KubeCheckStatusWriter(manager.api))
    ungater = Ungater(
        deps,
        patcher=KubePodPatcher(manager.api),
        node_problem=informers.hosts.problem,
        repairing=rewrites.writing,
    )
    rewrites.when_done(ungater.repair_ended)
    strays = StrayPods(deps, capacity=capacity, deleter=KubePodDeleter(manager.api), rewrites=rewrites)
    health = TopologyHealth(deps, writer=KubeEntryWriter(manager.api))

    manager.on_synced(cache.resync)  # the initial lists arrive in any order: rebuild from the full caches
    manager.add("capacity-gauges", gauges.run)
    manager.add("daemonset-reservations", cache.run_lapses)
    manager.add("workload-admission", admission.run)
    manager.add("admissioncheck-status", status.run)
    manager.add("assignment-guard", guard.run)
    manager.add("node-repair", repair.run)
    manager.add("ungater", ungater.run)
    manager.add("stray-pods", strays.run)
    manager.add("topology-health", health.run)
    return LiveState(capacity, informers, cache)
