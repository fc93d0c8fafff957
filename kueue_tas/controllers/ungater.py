"""The TopologyUngater: releases gated pods into their assigned domains, exactly.

Rules (all here, with the pure pod-to-domain choice in ``ungate_plan.py``):

* Only pods that carry our scheduling gate and our workload label, of a Workload whose
  entry for one of our checks is Ready and whose assignment annotation decodes.
* Pod events are batched per Workload: the first event schedules a pass
  ``ungate_batch_period_seconds`` later and later events join it.
* A pass looks at each PodSet's live pods (terminal and terminating pods are left out:
  their slots are free for replacements), asks ``plan_releases`` which gated pods go where,
  and patches each of those pods once (strategic merge: delete only our gate, add the
  domain's nodeSelector, guarded by the pod's resourceVersion).
* Expectations: a pod we patched counts as placed in its domain until we observe it
  without the gate (or deleted), so a second pass never hands its slot out again. A
  failed patch drops the expectation. After a restart there are no expectations: the
  informer's fresh list shows every pod we already released with its nodeSelector.
* A patch the apiserver refuses (e.g. the user set a conflicting nodeSelector) leaves a
  Warning Event on the pod and the Workload; that pod is not retried until it changes,
  and no other pod is affected.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Any, Protocol

import structlog
from kubernetes_asyncio import client as k8s

from kueue_tas.api import constants as c
from kueue_tas.api.workload import Workload
from kueue_tas.capacity.assignment_record import assignment_tampering
from kueue_tas.capacity.feed import workload_key
from kueue_tas.capacity.rules import assignment_trusted
from kueue_tas.controllers.informers import WORKLOAD_UID_INDEX, OurChecks, SharedInformers
from kueue_tas.controllers.ungate_plan import PodView, Release, plan_releases
from kueue_tas.kube.client import patch_pod
from kueue_tas.kube.errors import ApiError, Conflict, NotFound
from kueue_tas.kube.events import EventSink, ObjectRef
from kueue_tas.kube.slim import SlimPod
from kueue_tas.runtime.config import Settings
from kueue_tas.runtime.metrics import Metrics
from kueue_tas.runtime.workqueue import WorkQueue
from kueue_tas.topology.assignment import TopologyAssignment
from kueue_tas.topology.codec import decode_assignment_annotation
from kueue_tas.topology.features import DEFAULT_GATES, FeatureGates
from kueue_tas.topology.slice_replacement import replaced_slice_ref

log = structlog.get_logger(__name__)

# Elastic slices replacing slices that replaced others: how far back kept pods are looked up.
MAX_SLICE_CHAIN = 16

Domain = tuple[str, ...]


@dataclass
class Expectations:
    """Pods released but not yet observed ungated, per Workload key: pod UID -> domain values."""

    pending: dict[str, dict[str, Domain]] = field(default_factory=dict)

    def expect(self, workload: str, uid: str, domain: Domain) -> None:
        self.pending.setdefault(workload, {})[uid] = domain

    def observe(self, workload: str, uid: str) -> bool:
        """The pod was seen ungated or gone; True if we were waiting for it."""
        waiting = self.pending.get(workload)
        if waiting is None or waiting.pop(uid, None) is None:
            return False
        if not waiting:
            del self.pending[workload]
        return True

    def of(self, workload: str) -> dict[str, Domain]:
        return dict(self.pending.get(workload, {}))

    def forget(self, workload: str) -> None:
        self.pending.pop(workload, None)

    def __len__(self) -> int:
        return sum(len(v) for v in self.pending.values())


def view(pod: SlimPod) -> PodView:
    return PodView(pod.uid, pod.name, pod.gated, dict(pod.node_selector), pod.completion_index, pod.job_index)


def ungate_patch(gate: str, selector: dict[str, str]) -> dict[str, Any]:
    """Strategic merge patch: remove only ``gate`` (schedulingGates merge on name) and add the selector."""
    return {"spec": {"schedulingGates": [{"$patch": "delete", "name": gate}], "nodeSelector": selector}}


class PodPatcher(Protocol):
    async def patch(self, namespace: str, name: str, patch: dict[str, Any], resource_version: str) -> None: ...


class KubePodPatcher:
    """:class:`PodPatcher` against the API server: strategic merge, guarded by resourceVersion."""

    def __init__(self, api: k8s.ApiClient) -> None:
        self.api = api

    async def patch(self, namespace: str, name: str, patch: dict[str, Any], resource_version: str) -> None:
        await patch_pod(
            self.api,
            namespace=namespace,
            name=name,
            patch=patch,
            resource_version=resource_version,
            strategy="strategic",
        )


class Ungater:
    def __init__(
        self,
        *,
        informers: SharedInformers,
        checks: OurChecks,
        patcher: PodPatcher,
        events: EventSink,
        metrics: Metrics,
        settings: Settings,
        gates: FeatureGates = DEFAULT_GATES,
    ) -> None:
        self.settings = settings
        self.gates = gates
        self.metrics = metrics
        self.pod_store = informers.pod_store
        self.workloads = informers.workloads.store
        self.checks = checks
        self.patcher = patcher
        self.events = events
        self.queue: WorkQueue[str] = WorkQueue("ungater")
        self.expectations = Expectations()
        self.refused: dict[str, str] = {}  # pod UID -> resourceVersion the apiserver refused to ungate
        self.patch_slots = asyncio.Semaphore(settings.patch_concurrency)
        informers.workloads.add_handler(
            self._on_workload, lambda _o, w: self._on_workload(w), self._on_workload_deleted
        )
        informers.pods.add_handler(self._on_pod, lambda _o, p: self._on_pod(p), self._on_pod_deleted)

    # --- events -------------------------------------------------------------------------------

    def _key_of_pod(self, pod: SlimPod) -> str | None:
        if pod.workload is None:
            return None
        owners = self.workloads.by_index(WORKLOAD_UID_INDEX, pod.workload)
        return workload_key(owners[0]) if owners else None

    def _on_workload(self, wl: Workload) -> None:
        key = workload_key(wl)
        if self._releasable(wl):
            self.queue.add_after(key, self.settings.ungate_batch_period_seconds)

    def _on_workload_deleted(self, wl: Workload) -> None:
        self.expectations.forget(workload_key(wl))

    def _on_pod(self, pod: SlimPod) -> None:
        key = self._key_of_pod(pod)
        if key is None:
            return
        if not pod.gated:
            self.expectations.observe(key, pod.uid)
        self.queue.add_after(key, self.settings.ungate_batch_period_seconds)

    def _on_pod_deleted(self, pod: SlimPod) -> None:
        self.refused.pop(pod.uid, None)
        key = self._key_of_pod(pod)
        if key is None:
            return
        self.expectations.observe(key, pod.uid)
        self.queue.add_after(key, self.settings.ungate_batch_period_seconds)

    def _releasable(self, wl: Workload) -> bool:
        return assignment_trusted(wl, self.checks.names())

    # --- a pass -------------------------------------------------------------------------------

    async def reconcile(self, key: str) -> float | None:
        wl = self.workloads.get(key)
        if wl is None:
            self.expectations.forget(key)
            return None
        if not self._releasable(wl) or not wl.metadata.uid:
            return None
        pods = self.pod_store.of_workload(wl.namespace or "", wl.metadata.uid)
        if not any(p.gated for p in pods):
            return None  # most passes (pod status updates of released pods) end here: no decoding
        try:
            decoded = decode_assignment_annotation(wl.metadata.annotations[c.TOPOLOGY_ASSIGNMENT_ANNOTATION])
        except ValueError as exc:
            log.warning("assignment_annotation_invalid", workload=key, error=str(exc))
            return None
        tampered = assignment_tampering(wl, self.checks.names())
        if tampered is not None:
            # Pods go only where we decided; the admission side restores the record or re-places.
            log.warning("assignment_annotation_tampered", workload=key, problem=tampered)
            return None
        pods = pods + self._earlier_slice_pods(wl)
        releases: list[tuple[tuple[str, ...], Release]] = []
        for podset, ta in decoded:
            releases.extend((ta.levels, r) for r in self._plan(key, podset, ta, pods))
        if not releases:
            return None
        started = time.perf_counter()
        results = await asyncio.gather(*(self._release(wl, key, levels, r) for levels, r in releases))
        retry = any(r == "retry" for r in results)
        log.info(
            "pods_ungated",
            workload=key,
            released=sum(r == "ok" for r in results),
            failed=sum(r != "ok" for r in results),
            seconds=round(time.perf_counter() - started, 3),
        )
        return 1.0 if retry else None

    def _earlier_slice_pods(self, wl: Workload) -> list[SlimPod]:
        """Released pods of the slices this elastic slice replaces, directly or through a chain.

        Pods keep the workload label of the slice that released them, and they stay where they
        run when a new slice takes over: without them the new slice's domains would look empty
        and its delta pods could be sent where the kept pods already are.
        """
        out: list[SlimPod] = []
        seen = {wl.metadata.uid}
        current = wl
        for _ in range(MAX_SLICE_CHAIN):
            ref = replaced_slice_ref(current, self.gates)
            if ref is None:
                break
            namespace = ref[0] or ""
            previous = self.workloads.get(f"{namespace}/{ref[1]}")
            if previous is None or not previous.metadata.uid or previous.metadata.uid in seen:
                break
            seen.add(previous.metadata.uid)
            out.extend(p for p in self.pod_store.of_workload(namespace, previous.metadata.uid) if not p.gated)
            current = previous
        return out

    def _plan(self, key: str, podset: str, ta: TopologyAssignment, pods: list[SlimPod]) -> list[Release]:
        # Terminal and terminating pods free their slot; a pod the apiserver refused to ungate
        # (at its current version) sits out, holding no slot.
        mine = [
            p
            for p in pods
            if p.podset == podset
            and not p.is_terminal
            and not p.terminating
            and not (p.gated and self.refused.get(p.uid) == p.resource_version)
        ]
        views = [view(p) for p in mine]
        sub_groups = next((p.sub_groups for p in mine if p.sub_groups), None)
        in_flight = self.expectations.of(key)
        return plan_releases(ta, views, count=ta.total, sub_groups=sub_groups, in_flight=in_flight)

    async def _release(self, wl: Workload, key: str, levels: tuple[str, ...], release: Release) -> str:
        pod = release.pod
        domain = tuple(release.node_selector[k] for k in levels)
        stored = self.pod_store.get(f"{wl.namespace}/{pod.name}")
        if stored is None or stored.uid != pod.uid:
            return "gone"
        self.expectations.expect(key, pod.uid, domain)
        try:
            async with self.patch_slots:
                await self.patcher.patch(
                    wl.namespace or "",
                    pod.name,
                    ungate_patch(self.settings.scheduling_gate, release.node_selector),
                    stored.resource_version,
                )
        except (Conflict, NotFound):
            # Changed or gone since our last look: the next pass decides from what we see then.
            self.expectations.observe(key, pod.uid)
            return "retry"
        except ApiError as exc:
            self.expectations.observe(key, pod.uid)
            self.metrics.ungate_errors_total.inc()
            if 400 <= exc.status < 500:
                self.refused[pod.uid] = stored.resource_version
                await self._refused_event(wl, pod, release, exc)
                return "refused"
            log.warning("ungate_failed", workload=key, pod=pod.name, error=str(exc))
            return "retry"
        self.metrics.ungated_pods_total.inc()
        return "ok"

    async def _refused_event(self, wl: Workload, pod: PodView, release: Release, exc: ApiError) -> None:
        selector = ",".join(f"{k}={v}" for k, v in release.node_selector.items())
        message = f"could not release pod {pod.name} into domain {selector}: {exc.message or exc}"
        log.warning("ungate_refused", workload=f"{wl.namespace}/{wl.name}", pod=pod.name, error=str(exc))
        pod_ref = ObjectRef(c.CORE_API_VERSION, c.KIND_POD, pod.name, wl.namespace, pod.uid)
        wl_ref = ObjectRef(c.KUEUE_API_VERSION, c.KIND_WORKLOAD, wl.name, wl.namespace, wl.metadata.uid)
        for ref in (pod_ref, wl_ref):
            await self.events.emit_event(ref, reason="TopologyUngateFailed", message=message, type="Warning")

    # --- running ------------------------------------------------------------------------------

    def resync(self) -> None:
        """Look at every stored Workload again. The events of the initial lists arrive before all
        informers are listed (a pod before its Workload, a Workload before our AdmissionChecks), so
        after a restart gated pods would otherwise wait for an event that may never come."""
        for wl in self.workloads.values():
            self._on_workload(wl)

    async def run(self, workers: int = 4) -> None:
        """Look at every Workload once (the manager starts this after every cache synced), then work."""
        self.resync()
        log.info("ungater_started", batch_period_seconds=self.settings.ungate_batch_period_seconds)
        await self.queue.run(workers, self.reconcile)
