"""The AdmissionCheck controller: informers -> live capacity -> decision -> writes.

Decisions are serialised (one asyncio lock): each decision sees the capacity
left by every earlier one, including those still being written ("assumed").
A write that conflicts drops the assumption and the workload is decided again
from fresh state, so capacity is never given twice.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any, Literal

import structlog
from kubernetes_asyncio import client as k8s

from kueue_tas.admission.decide import Decision, Outcome, decide
from kueue_tas.admission.observe import CapacityGauges
from kueue_tas.admission.writes import (
    GateInjectionError,
    check_entry,
    inject_gates,
    merged_annotation,
    now_rfc3339,
    write_annotation,
    write_check,
)
from kueue_tas.api import constants as c
from kueue_tas.api.models import AdmissionCheck, ClusterQueue, ResourceFlavor, Topology, Workload
from kueue_tas.cache.capacity_feed import feed_pod, flavor_specs, our_checks, workload_usage
from kueue_tas.cache.live_capacity import FlavorSpec, LiveCapacity, UsageEntry
from kueue_tas.kube import catalogue as cat
from kueue_tas.kube.client import apply_status
from kueue_tas.kube.decoding import model_transform
from kueue_tas.kube.errors import ApiError, Conflict
from kueue_tas.kube.events import EventRecorder, ObjectRef
from kueue_tas.kube.informer import Informer
from kueue_tas.kube.slim import SlimPod, make_pod_transform, slim_node
from kueue_tas.kube.stores import PodStore
from kueue_tas.runtime.config import Settings
from kueue_tas.runtime.metrics import Metrics
from kueue_tas.runtime.workqueue import WorkQueue
from kueue_tas.topology.flavors import FlavorMappingError, check_topology

log = structlog.get_logger(__name__)


# After this long without seeing our entry write come back (e.g. missed across a relist), a
# still-Pending workload is decided again.
WRITE_OBSERVE_TIMEOUT_SECONDS = 30.0


def workload_key(wl: Workload) -> str:
    return f"{wl.namespace}/{wl.name}"


class Admitter:
    def __init__(self, api: k8s.ApiClient, settings: Settings, metrics: Metrics) -> None:
        self.api = api
        self.settings = settings
        self.metrics = metrics
        self.capacity = LiveCapacity()
        self.events = EventRecorder(api)
        self.queue: WorkQueue[str] = WorkQueue("workloads")
        self.lock = asyncio.Lock()
        self.retries: dict[str, int] = {}
        self.awaiting_write: dict[str, float] = {}  # workload -> deadline to observe our entry write
        self.check_flavors: dict[str, set[str]] = {}  # our check -> flavors it governs
        self.nodes = Informer(api, cat.NODES, slim_node, name="nodes")
        self.pods: Informer[SlimPod] = Informer(
            api, cat.PODS, make_pod_transform(settings.annotation_prefix), name="pods", store=PodStore()
        )
        self.topologies = Informer(api, cat.TOPOLOGIES, model_transform(Topology))
        self.flavors = Informer(api, cat.RESOURCE_FLAVORS, model_transform(ResourceFlavor))
        self.checks = Informer(api, cat.ADMISSION_CHECKS, model_transform(AdmissionCheck))
        self.queues = Informer(api, cat.CLUSTER_QUEUES, model_transform(ClusterQueue))
        self.workloads = Informer(api, cat.WORKLOADS, model_transform(Workload))
        self.informers: list[Informer[Any]] = [
            self.nodes,
            self.pods,
            self.topologies,
            self.flavors,
            self.checks,
            self.queues,
            self.workloads,
        ]
        self.gauges = CapacityGauges(metrics, self.capacity, self.informers, max_levels=settings.metrics_domain_levels)

    # --- wiring -------------------------------------------------------------------------------

    def _wire(self) -> None:
        self.nodes.add_handler(
            self.capacity.upsert_node,
            lambda _o, n: self.capacity.upsert_node(n),
            lambda n: self.capacity.delete_node(n.name),
        )
        self.pods.add_handler(self._on_pod, lambda _o, p: self._on_pod(p), lambda p: self.capacity.delete_pod(p.key))
        for cfg in (self.topologies, self.flavors, self.checks, self.queues):
            cfg.add_handler(
                lambda _x: self._config_changed(),
                lambda _a, _b: self._config_changed(),
                lambda _x: self._config_changed(),
            )
        self.workloads.add_handler(self._on_workload, lambda _o, w: self._on_workload(w), self._on_workload_deleted)

    def _on_pod(self, pod: SlimPod) -> None:
        feed_pod(self.capacity, pod)

    def _our_checks(self) -> dict[str, AdmissionCheck]:
        return our_checks(self.checks.store.values(), self.settings.controller_name)

    def check_names(self) -> set[str]:
        """Names of the AdmissionChecks this controller owns (its controllerName)."""
        return set(self._our_checks())

    def _config_changed(self) -> None:
        checks = self._our_checks()
        specs: dict[str, FlavorSpec]
        try:
            specs, per_check = flavor_specs(
                checks,
                self.queues.store.values(),
                self.topologies.store.get,
                self.flavors.store.get,
                self.settings.controller_name,
            )
        except FlavorMappingError as exc:
            log.error("flavor_mapping_invalid", error=str(exc))
            specs, per_check = {}, {name: set() for name in checks}
        self.capacity.set_flavors(specs)
        self.check_flavors = per_check
        for ac in checks.values():
            self.queue.add(f"ac:{ac.name}")
        for wl in self.workloads.store.values():
            self._on_workload(wl)

    def _usage_of(self, wl: Workload) -> tuple[UsageEntry, ...] | None:
        return workload_usage(wl, self._our_checks(), self.capacity.flavors())

    def _on_workload(self, wl: Workload) -> None:
        key = workload_key(wl)
        if key in self.awaiting_write and self._entry_written(wl):
            del self.awaiting_write[key]
        usage = self._usage_of(wl)
        if usage is not None:
            self.capacity.set_workload_usage(key, usage)
        else:
            self.capacity.remove_workload_usage(key)
        if self._pending_check(wl) is not None:
            self.queue.add(key)

    def _on_workload_deleted(self, wl: Workload) -> None:
        key = workload_key(wl)
        self.capacity.remove_workload_usage(key)
        self.capacity.forget(key)
        self.retries.pop(key, None)
        self.awaiting_write.pop(key, None)

    def _entry_written(self, wl: Workload) -> bool:
        """Our entry is no longer Pending: the informer has caught up with our last write."""
        ours = self._our_checks()
        return any(st.name in ours and st.state != c.CHECK_STATE_PENDING for st in wl.status.admission_checks)

    def _pending_check(self, wl: Workload) -> str | None:
        if not wl.has_quota_reservation or wl.status.admission is None or wl.is_finished or wl.is_evicted:
            return None
        ours = self._our_checks()
        for st in wl.status.admission_checks:
            if st.name in ours and st.state == c.CHECK_STATE_PENDING:
                return st.name
        return None

    # --- reconcile ----------------------------------------------------------------------------

    async def reconcile(self, key: str) -> float | None:
        if key.startswith("ac:"):
            await self._reconcile_check(key[3:])
            return None
        wl = self.workloads.store.get(key)
        if wl is None:
            return None
        check = self._pending_check(wl)
        if check is None:
            return None
        # Our last write has not come back through the informer yet: the Pending we see is
        # stale, and deciding again would count this workload's own assumption against it.
        wait = self.awaiting_write.get(key, 0.0) - time.monotonic()
        if wait > 0:
            return wait
        self.awaiting_write.pop(key, None)
        async with self.lock:
            # Pending means we hold nothing for it (an earlier assumption is stale).
            self.capacity.forget(key)
            started = time.perf_counter()
            flavors = self.check_flavors.get(check, set())
            decision = decide(wl, flavors, self.capacity, self.settings.annotation_prefix)
            self.metrics.decision_seconds.observe(time.perf_counter() - started)
            self.gauges.touch()
            try:
                await self._commit(wl, check, decision)
            except Conflict:
                self.capacity.forget(key)
                log.info("workload_changed_while_deciding", workload=key)
                return 0.5
            except (ApiError, GateInjectionError) as exc:
                self.capacity.forget(key)
                self.metrics.record_admission("error")
                log.warning("admission_write_failed", workload=key, error=str(exc))
                await self._event(wl, "Warning", "TopologyAssignmentFailed", str(exc))
                return 5.0
        return None

    async def _commit(self, wl: Workload, check: str, decision: Decision) -> None:
        key = workload_key(wl)
        requeue: int | None = None
        if decision.outcome is Outcome.READY:
            self.capacity.assume(key, decision.usage())
            gated = {p.name for p in decision.placements if p.multi_domain}
            await inject_gates(self.api, wl, gated, self.settings.scheduling_gate)
            if decision.placements:
                await write_annotation(self.api, wl, merged_annotation(wl, decision))
            self.retries.pop(key, None)
        elif decision.outcome is Outcome.RETRY:
            n = self.retries.get(key, 0)
            self.retries[key] = n + 1
            base, cap = self.settings.retry_backoff_base_seconds, self.settings.retry_backoff_max_seconds
            requeue = int(min(base * 2**n, cap))
        await write_check(self.api, wl, check_entry(check, decision, wl, requeue))
        self.awaiting_write[key] = time.monotonic() + WRITE_OBSERVE_TIMEOUT_SECONDS
        outcomes: dict[Outcome, Literal["ready", "retry", "rejected"]] = {
            Outcome.READY: "ready",
            Outcome.RETRY: "retry",
            Outcome.REJECTED: "rejected",
        }
        self.metrics.record_admission(outcomes[decision.outcome])
        reason = {
            Outcome.READY: "TopologyAssigned",
            Outcome.RETRY: "TopologyNotFitting",
            Outcome.REJECTED: "TopologyRequestRejected",
        }[decision.outcome]
        kind = "Normal" if decision.outcome is Outcome.READY else "Warning"
        await self._event(wl, kind, reason, decision.message)
        log.info(
            "admission_decided", workload=key, check=check, outcome=decision.outcome.value, message=decision.message
        )

    async def _event(self, wl: Workload, kind: str, reason: str, message: str) -> None:
        ref = ObjectRef(c.KUEUE_API_VERSION, c.KIND_WORKLOAD, wl.name, wl.namespace, wl.metadata.uid)
        level: Literal["Normal", "Warning"] = "Normal" if kind == "Normal" else "Warning"
        await self.events.emit_event(ref, reason=reason, message=message, type=level)

    async def _reconcile_check(self, name: str) -> None:
        ac = self._our_checks().get(name)
        if ac is None:
            return
        topo_name = check_topology(ac)
        if topo_name is None:
            status, reason, msg = (
                "False",
                "BadParametersRef",
                ("spec.parameters must reference a kueue.x-k8s.io Topology (apiGroup kueue.x-k8s.io, kind Topology)"),
            )
        elif (topo := self.topologies.store.get(topo_name)) is None:
            status, reason, msg = "False", "TopologyNotFound", f'Topology "{topo_name}" does not exist'
        elif not topo.levels:
            status, reason, msg = "False", "TopologyInvalid", f'Topology "{topo_name}" has no levels'
        else:
            status, reason, msg = "True", "Active", f'The admission check is active (Topology "{topo_name}")'
        current = next((cond for cond in ac.status.conditions if cond.type == c.CONDITION_ACTIVE), None)
        if current is not None and current.status == status and current.reason == reason and current.message == msg:
            return
        cond = {
            "type": c.CONDITION_ACTIVE,
            "status": status,
            "reason": reason,
            "message": msg,
            "lastTransitionTime": now_rfc3339(),
            "observedGeneration": ac.metadata.generation or 0,
        }
        await apply_status(
            self.api,
            group=c.KUEUE_GROUP,
            version=c.KUEUE_VERSION,
            plural="admissionchecks",
            kind=c.KIND_ADMISSION_CHECK,
            name=name,
            status={"conditions": [cond]},
        )

    # --- running ------------------------------------------------------------------------------

    def synced(self) -> bool:
        return all(i.synced.is_set() for i in self.informers)

    async def run(self) -> None:
        """Start informers, wait for every one to sync (usage rebuilt from Ready workloads),
        and only then start deciding."""
        self._wire()
        tasks = [i.start() for i in self.informers]
        try:
            for i in self.informers:
                await i.wait_synced()
            self._config_changed()
            tasks.append(asyncio.create_task(self.gauges.run(), name="capacity-gauges"))
            log.info("admitter_started", flavors=sorted(self.capacity.flavors()))
            await self.queue.run(1, self.reconcile)
        finally:
            for t in tasks:
                t.cancel()
            for i in self.informers:
                await i.stop()
