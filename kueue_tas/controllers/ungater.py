"""The TopologyUngater: releases gated pods into their assigned domains, exactly.

Rules (all here, with the pure pod-to-domain choice in ``ungate_plan.py``):

* Only pods that carry our scheduling gate and our workload label, of a Workload whose
  entry for one of our checks is Ready and whose assignment annotation decodes.
* Pod events are batched per Workload: the first event schedules a pass
  ``ungate_batch_period_seconds`` later and later events join it.
* A pass looks at each PodSet's live pods (terminal pods are left out: their slots are free
  for replacements; a Terminating pod still bound to a node keeps its slot until it is gone,
  as it still runs there), asks ``plan_releases`` which gated pods go where, and patches
  each of those pods once (strategic merge: delete only our gate, add the domain's
  nodeSelector, guarded by the pod's resourceVersion).
* No pod is released onto a node that cannot take it now (``node_usable``, asked with the
  assignment's hostname value, which need not be the Node's name: NotReady, cordoned, gone, or
  a hostname several Nodes carry): it stays gated until the node serves again or the node
  repair moves its slot (``node_repair``); released there it would wait pinned to a node that
  may never return. A hostname several Nodes carry is said once per workload (Warning Event
  ``TopologyHostnameShared``): no count per hostname could say which Node holds what.
* Expectations: a pod we patched counts as placed in its domain until we observe it
  without the gate (or deleted, or still gated at another resourceVersion: our guarded patch
  can then never land), so a second pass never hands its slot out again. A patch the
  apiserver refused (4xx) drops its expectation at once, except a Conflict: the pod is newer
  than the informer shows (perhaps released by an earlier patch of ours), so its slot stays
  held until the informer shows that version. A patch whose outcome is unknown
  (no response, timeout, 5xx, cancellation, an unexpected error) may still land, so its
  expectation stays until observed or until ``ungate_expectation_timeout_seconds`` pass;
  then the same pod is released again into the same domain, still holding its slot (guarded
  by its resourceVersion, so a patch that did land makes the retry a Conflict, which holds
  the slot again), with a Warning Event.
  After a restart there are no expectations: the informer's fresh list shows every pod we
  already released with its nodeSelector.
* A 500 for an admission webhook the apiserver could not call (Kueue's, while Kueue restarts)
  was turned down before storage: the expectation goes at once, the pod is not marked refused,
  a Warning says so, and the pass is tried again after ``WEBHOOK_RETRY_SECONDS``.
* A pass reads the pods and plans without an await in between, so the plan sees the pods and
  the expectations of one moment; a pod that changed between the plan and its patch is left
  to the next pass.
* A 429 drops the expectation (nothing was applied) and the pass is retried after the
  server's Retry-After, capped at ``MAX_RETRY_AFTER_SECONDS``.
* A patch the apiserver refuses (e.g. the user set a conflicting nodeSelector) leaves a
  Warning Event on the pod and the Workload; that pod is not retried until it changes,
  and no other pod is affected.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

import structlog

from kueue_tas.api import constants as c
from kueue_tas.api.workload import Workload
from kueue_tas.capacity.assignment_record import assignment_tampering
from kueue_tas.capacity.feed import workload_key
from kueue_tas.capacity.hostnames import hostname_of
from kueue_tas.capacity.rules import assignment_trusted
from kueue_tas.controllers.informers import WORKLOAD_UID_INDEX, OurChecks, SharedInformers, SlimNode
from kueue_tas.controllers.ungate_plan import Expectations, PodView, Release, offers, plan_releases
from kueue_tas.controllers.ungate_writes import PodPatcher, PodReleaser
from kueue_tas.controllers.workload_events import workload_event
from kueue_tas.kube.events import EventSink
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
HELD_REASON = "TopologyHostnameShared"


def view(pod: SlimPod) -> PodView:
    return PodView(
        pod.uid,
        pod.name,
        pod.gated,
        dict(pod.node_selector),
        pod.completion_index,
        pod.job_index,
        resource_version=pod.resource_version,
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
        clock: Callable[[], float] | None = None,
        node_usable: Callable[[str], bool] = lambda _name: True,
        repairing: Callable[[str], bool] = lambda _key: False,
    ) -> None:
        """``clock``: monotonic seconds for expectation deadlines (default: the event loop's);
        ``node_usable(host)``: whether the Node a hostname value names can take a pod now
        (``SharedInformers.hosts.serves``; the value is not a Node name);
        ``repairing(key)``: a node repair of the workload is decided and its writes have not
        landed yet (call :meth:`repair_ended` when they land or are dropped)."""
        self._node_usable = node_usable
        self._hosts = informers.hosts
        self._events = events
        self._explained: dict[str, set[tuple[str, tuple[str, ...]]]] = {}  # workload -> shared hosts said
        self._repairing = repairing
        self.settings = settings
        self._clock = clock or (lambda: asyncio.get_running_loop().time())
        self.gates = gates
        self.metrics = metrics
        self.pod_store = informers.pod_store
        self.workloads = informers.workloads.store
        self.checks = checks
        self.queue: WorkQueue[str] = WorkQueue("ungater")
        self.expectations = Expectations()
        self._releaser = PodReleaser(
            pods=informers.pod_store,
            patcher=patcher,
            events=events,
            metrics=metrics,
            settings=settings,
            expectations=self.expectations,
            clock=lambda: self._clock(),
        )
        self.refused = self._releaser.refused  # pod UID -> resourceVersion the apiserver refused to ungate
        informers.workloads.add_handler(
            self._on_workload, lambda _o, w: self._on_workload(w), self._on_workload_deleted
        )
        informers.pods.add_handler(self._on_pod, lambda _o, p: self._on_pod(p), self._on_pod_deleted)
        self._held: dict[str, set[str]] = {}  # hostname -> workloads with pods held back from it
        informers.nodes.add_handler(self._on_node, lambda _o, n: self._on_node(n), lambda _n: None)

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
        elif self._admission_ended(wl):
            # Kueue evicted it (our entry is reset to Pending) and stops its pods: the releases of
            # that admission mean nothing to the next one, which gets its own assignment.
            self.expectations.forget(key)

    def _on_workload_deleted(self, wl: Workload) -> None:
        self.expectations.forget(workload_key(wl))
        self._explained.pop(workload_key(wl), None)
        for keys in self._held.values():
            keys.discard(workload_key(wl))

    def _on_pod(self, pod: SlimPod) -> None:
        key = self._key_of_pod(pod)
        if key is None:
            return
        if not pod.gated:
            self.expectations.observe(key, pod.uid)
        else:
            expected = self.expectations.get(key, pod.uid)
            if expected is not None and expected.resource_version != pod.resource_version:
                # Changed but still gated: our patch, guarded by the older version, can never land.
                self.expectations.observe(key, pod.uid)
        self.queue.add_after(key, self.settings.ungate_batch_period_seconds)

    def _on_node(self, node: SlimNode) -> None:
        """A node that serves again lets go the pods held back from it: no pod or workload event
        would say so (chaos seed 451: a node NotReady for 7 s left a one-host Job gated)."""
        host = hostname_of(node)
        if host is not None and host in self._held and self._node_usable(host):
            for key in self._held.pop(host):
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

    def _admission_ended(self, wl: Workload) -> bool:
        """No entry of ours is Ready, or Kueue evicted or finished it. (An annotation removed by
        hand under a Ready entry is not an end: the guard restores it and releases resume.)"""
        ours = self.checks.names()
        ready = any(st.name in ours and st.state == c.CHECK_STATE_READY for st in wl.status.admission_checks)
        return wl.is_evicted or wl.is_finished or not ready

    # --- a pass -------------------------------------------------------------------------------

    async def reconcile(self, key: str) -> float | None:
        wl = self.workloads.get(key)
        if wl is None:
            self.expectations.forget(key)
            return None
        if not self._releasable(wl) or not wl.metadata.uid:
            return None
        if self._repairing(key):
            # Its annotation is about to change: releasing by the one we see could put a pod in
            # a domain the repair just emptied, when a failed node comes back meanwhile (chaos
            # seed 2103). Looked at again once the repair lands (``repair_ended``).
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
        # No await from reading the pods to the end of planning: the plan must see the pods and
        # the expectations of one moment. (Chaos seed 1141: the expiry warnings were sent first;
        # meanwhile the informer showed released pods, their expectations went, and the plan,
        # still holding the old list, saw them gated with no slot and gave their slots away.)
        releases, warnings = self._expire(key, pods, dict(decoded))
        pods = pods + self._earlier_slice_pods(wl)
        for podset, ta in decoded:
            releases.extend((ta.levels, r) for r in self._plan(key, podset, ta, pods))
        for pod_name, uid, message in warnings:
            await self._releaser.warn(wl, pod_name, uid, message)
        await self._explain_shared(wl, key)
        if releases and self._repairing(key):
            return None  # decided while the warnings went out; nothing of the plan was recorded
        if not releases:
            return self._until_deadline(key)
        started = time.perf_counter()
        outcomes = await asyncio.gather(*(self._releaser.release(wl, key, levels, r) for levels, r in releases))
        results = [r for r, _ in outcomes]
        log.info(
            "pods_ungated",
            workload=key,
            released=sum(r == "ok" for r in results),
            failed=sum(r != "ok" for r in results),
            seconds=round(time.perf_counter() - started, 3),
        )
        delays = [d for d in (self._until_deadline(key),) if d is not None]
        # A retry waits for its own cause; a refused pod sits out and frees its slot for another.
        waits = [wait for r, wait in outcomes if r in ("retry", "refused")]
        if waits:
            delays.append(max(waits))
        return min(delays) if delays else None

    async def _explain_shared(self, wl: Workload, key: str) -> None:
        """Once per workload and hostname: its pods are held back because several Nodes carry the
        hostname their slots name (nothing else would say why they stay gated)."""
        said = self._explained.setdefault(key, set())
        for host in sorted(h for h, keys in self._held.items() if key in keys):
            shared = self._hosts.shared(host)
            if not shared or (host, shared) in said:
                continue
            said.add((host, shared))
            nodes = ", ".join(shared)
            message = f"pod(s) held back from hostname {host}: Nodes {nodes} carry that {c.HOSTNAME_LABEL}"
            log.warning("hostname_label_shared", workload=key, hostname=host, nodes=list(shared))
            await workload_event(self._events, wl, "Warning", HELD_REASON, message)

    def repair_ended(self, key: str) -> None:
        """The node repair of ``key`` landed or was dropped: its pods may be released again."""
        self.queue.add(key)

    def _until_deadline(self, key: str) -> float | None:
        """Seconds until the first expectation of ``key`` expires (a pass must look then)."""
        deadline = self.expectations.next_deadline(key)
        return None if deadline is None else max(deadline - self._clock(), 0.0) + 0.001

    def _expire(
        self, key: str, pods: list[SlimPod], assignments: dict[str, TopologyAssignment]
    ) -> tuple[list[tuple[tuple[str, ...], Release]], list[tuple[str, str, str]]]:
        """Releases nobody confirmed in time: each pod is released again into the same domain,
        keeping its slot meanwhile (a slot is freed only by what the informer shows, or by a
        refusal), so a release that did land but is still unseen never gives its slot away.
        Unless that domain is no longer one of the assignment's, or its node cannot take the pod
        (a repair moved the slot meanwhile: chaos seed 404): the pod is then placed afresh.
        Returns the releases and the Warnings (pod name, pod UID, message) to send."""
        due = self.expectations.due(key, self._clock())
        retries: list[tuple[tuple[str, ...], Release]] = []
        warnings: list[tuple[str, str, str]] = []
        live = {p.uid: p for p in pods}
        for uid, expected in due.items():
            pod = live.get(uid)
            if pod is None or not pod.gated:
                self.expectations.observe(key, uid)  # gone, or released after all
                continue
            if not self._still_offered(assignments.get(pod.podset or ""), dict(expected.selector)):
                self.expectations.observe(key, uid)
                continue
            retries.append((tuple(k for k, _ in expected.selector), Release(view(pod), dict(expected.selector))))
            self.metrics.ungate_errors_total.inc()
            why = f" (the patch failed: {expected.error})" if expected.error else ""
            warnings.append(
                (
                    pod.name,
                    uid,
                    f"pod {pod.name} was not seen released into its domain within "
                    f"{self.settings.ungate_expectation_timeout_seconds:g}s{why}; releasing it again",
                )
            )
        return retries, warnings

    def _still_offered(self, ta: TopologyAssignment | None, selector: dict[str, str]) -> bool:
        host = selector.get(c.HOSTNAME_LABEL)
        return offers(ta, selector) and (host is None or self._node_usable(host))

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
        leaving = [view(p) for p in pods if p.podset == podset and p.terminating and p.counts_on_node and not p.gated]
        views = [view(p) for p in mine]
        sub_groups = next((p.sub_groups for p in mine if p.sub_groups), None)
        in_flight = self.expectations.of(key)
        releases = plan_releases(ta, views, count=ta.total, sub_groups=sub_groups, in_flight=in_flight, holding=leaving)
        if ta.levels and ta.levels[-1] == c.HOSTNAME_LABEL:
            held = {r.node_selector[c.HOSTNAME_LABEL] for r in releases}
            held = {n for n in held if not self._node_usable(n)}
            for node in held:
                self._held.setdefault(node, set()).add(key)
            releases = [r for r in releases if r.node_selector[c.HOSTNAME_LABEL] not in held]
        return releases

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
