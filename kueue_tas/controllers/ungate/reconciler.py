"""The TopologyUngater: releases gated pods into their assigned domains, exactly.

Rules (all here, with the pure pod-to-domain choice in ``ungate/plan.py``):

* Only pods that carry our scheduling gate and our workload label, of a Workload whose
  entry for one of our checks is Ready and whose assignment annotation decodes. An elastic
  slice also counts the running pods of the slices it replaces (in its domains) and releases
  their gated pods once their own slice no longer does, whether or not its Workload still
  exists (``slice_pods``).
* Pod events are batched per Workload: the first event schedules a pass
  ``ungate_batch_period_seconds`` later and later events join it.
* A pass looks at each PodSet's live pods (terminal pods are left out: their slots are free
  for replacements; a Terminating pod still bound to a node keeps its slot until it is gone,
  as it still runs there), asks ``plan_releases`` which gated pods go where, and patches
  each of those pods once (strategic merge: delete only our gate, add the domain's
  nodeSelector, guarded by the pod's resourceVersion).
* No pod is released onto a node that cannot take it now (``node_problem``, asked with the
  assignment's hostname value, which need not be the Node's name: NotReady, cordoned, gone, or
  a hostname several Nodes carry, so that no count per hostname could say which Node holds
  what): it stays gated until the node serves again or the node repair moves its slot
  (``controllers.repair``); released there it would wait pinned to a node that may never return.
  While other pods of the workload still progress on a cordoned node no repair moves the slot,
  so the wait can be long: each held pod is explained on the pass that holds it back (within
  ``ungate_batch_period_seconds`` of its event), by a ``TopologyPodHeld`` Warning on the pod and
  on the Workload naming the pod, the hostname and why, and a ``pod_held_back`` log line; once
  per pod and (hostname, reason), not on every pass, and again every ``HELD_REMIND_SECONDS``
  while it stays held (the pass that holds a pod asks to run again then).
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
  to the next pass, and so is a pod whose hostname stopped taking pods while the pass's Events
  went out (asked again just before the patches).
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
from kueue_tas.controllers.deps import ControllerDeps
from kueue_tas.controllers.informers import SlimNode
from kueue_tas.controllers.slice_pods import earlier_slice_pods, workloads_of_pod
from kueue_tas.controllers.ungate.plan import Expectations, PodView, Release, offers, plan_releases
from kueue_tas.controllers.ungate.writes import PodPatcher, PodReleaser
from kueue_tas.controllers.workload_events import workload_ref
from kueue_tas.kube.events import ObjectRef
from kueue_tas.kube.slim import SlimPod
from kueue_tas.runtime.workqueue import WorkQueue
from kueue_tas.topology.assignment import TopologyAssignment
from kueue_tas.topology.codec import decode_assignment_annotation

log = structlog.get_logger(__name__)

# The Event that explains a pod we keep gated because its slot's node takes no pods now.
HELD_REASON = "TopologyPodHeld"
# A pod planned for a node that stopped taking pods while the pass awaited is looked at again
# this soon (the next pass holds it back and explains it).
HELD_RECHECK_SECONDS = 0.5
# A pod held this long since its last explanation is explained again: Events expire (the
# apiserver's --event-ttl, an hour by default) and the kube-scheduler repeats its own
# FailedScheduling at least every five minutes, so a user who looks later still finds why
# (DST seed 206943: one Event at the start of a ten-minute hold, then silence). Below the
# recorder's 300 s series window, so a reminder counts on the same Event.
HELD_REMIND_SECONDS = 240.0


def held_message(pods: list[str], node: str, why: str) -> str:
    """``pod c stays gated: its slot is on node n2, which is cordoned (spec.unschedulable); ...``"""
    shown = ", ".join(pods[:10]) + (f" and {len(pods) - 10} more" if len(pods) > 10 else "")
    subject = f"pod {shown} stays gated: its slot is" if len(pods) == 1 else f"pods {shown} stay gated: their slots are"
    return (
        f"{subject} on node {node}, which {why}; released when the node takes pods again "
        "or a node repair moves the slot"
    )


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
        deps: ControllerDeps,
        *,
        patcher: PodPatcher,
        clock: Callable[[], float] | None = None,
        node_usable: Callable[[str], bool] | None = None,
        node_problem: Callable[[str], str | None] | None = None,
        repairing: Callable[[str], bool] = lambda _key: False,
    ) -> None:
        """``clock``: monotonic seconds for expectation deadlines (default: the event loop's);
        ``node_problem(host)``: why the Node a hostname value names cannot take a pod now, in
        words after "node <host>" (None: it can; ``run`` passes the node informer's hostname
        index, ``NodeHosts.problem``: the value is not a Node name), or ``node_usable(host)``
        saying only whether it can (neither: every node can); ``repairing(key)``: a node repair
        of the workload is decided and its writes have not landed yet (call :meth:`repair_ended`
        when they land or are dropped)."""
        informers, events, metrics, settings = deps.informers, deps.events, deps.metrics, deps.settings
        if node_problem is None and node_usable is not None:
            usable = node_usable
            node_problem = lambda host: None if usable(host) else "cannot take new pods now"  # noqa: E731
        self._node_problem: Callable[[str], str | None] = node_problem or (lambda _host: None)
        self._repairing = repairing
        self.settings = settings
        self._clock = clock or (lambda: asyncio.get_running_loop().time())
        self.gates = deps.gates
        self.metrics = metrics
        self._events = events
        self.pod_store = informers.pod_store
        self.workloads = informers.workloads.store
        self.checks = deps.checks
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
        # workload -> pod UID -> (node, why, when) of the hold last explained for that pod
        self._explained: dict[str, dict[str, tuple[str, str, float]]] = {}
        # A hostname serves again through an event of another Node too: a Node that carried it as
        # well was relabelled away (old labels) or deleted, so it names one Node once more.
        informers.nodes.add_handler(self._on_node, self._on_node_changed, self._on_node)

    # --- events -------------------------------------------------------------------------------

    def _keys_of_pod(self, pod: SlimPod) -> list[str]:
        """Its Workload's key and those of the elastic slices that keep its pods (``slice_pods``)."""
        return [workload_key(w) for w in workloads_of_pod(pod, self.workloads)]

    def _on_workload(self, wl: Workload) -> None:
        key = workload_key(wl)
        if self._releasable(wl):
            self.queue.add_after(key, self.settings.ungate_batch_period_seconds)
        elif self._admission_ended(wl):
            # Kueue evicted it (our entry is reset to Pending) and stops its pods: the releases of
            # that admission mean nothing to the next one, which gets its own assignment.
            self.expectations.forget(key)
            self._explained.pop(key, None)

    def _on_workload_deleted(self, wl: Workload) -> None:
        key = workload_key(wl)
        self.expectations.forget(key)
        self._explained.pop(key, None)
        for host in list(self._held):
            keys = self._held[host]
            keys.discard(key)
            if not keys:  # a hostname that never serves again (its Node deleted) leaves nothing
                del self._held[host]

    def _on_pod(self, pod: SlimPod) -> None:
        for key in self._keys_of_pod(pod):
            self._on_pod_of(key, pod)

    def _on_pod_of(self, key: str, pod: SlimPod) -> None:
        if not pod.gated:
            self.expectations.observe(key, pod.uid)
            self._explained.get(key, {}).pop(pod.uid, None)
        else:
            expected = self.expectations.get(key, pod.uid)
            if expected is not None and expected.resource_version != pod.resource_version:
                # Changed but still gated: our patch, guarded by the older version, can never land.
                self.expectations.observe(key, pod.uid)
        self.queue.add_after(key, self.settings.ungate_batch_period_seconds)

    def _node_usable(self, name: str) -> bool:
        return self._node_problem(name) is None

    def _on_node_changed(self, old: SlimNode, new: SlimNode) -> None:
        self._on_node(new)
        if hostname_of(old) != hostname_of(new):
            self._on_node(old)

    def _on_node(self, node: SlimNode) -> None:
        """A hostname that serves again lets go the pods held back from it: no pod or workload
        event would say so (chaos seed 451: a node NotReady for 7 s left a one-host Job gated).
        ``node`` as it is now, or as it was before a relabel or its deletion: its hostname is
        looked up afresh in the index either way."""
        host = hostname_of(node)
        if host is not None and host in self._held and self._node_usable(host):
            for key in self._held.pop(host):
                self.queue.add_after(key, self.settings.ungate_batch_period_seconds)

    def _on_pod_deleted(self, pod: SlimPod) -> None:
        self.refused.pop(pod.uid, None)
        for key in self._keys_of_pod(pod):
            self.expectations.observe(key, pod.uid)
            self._explained.get(key, {}).pop(pod.uid, None)
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
        pods = pods + earlier_slice_pods(wl, self.workloads, self.pod_store, self.gates, self._releasable)
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
        held: list[tuple[PodView, str, str]] = []
        for podset, ta in decoded:
            releases.extend((ta.levels, r) for r in self._plan(key, podset, ta, pods, held))
        explain = self._not_yet_explained(key, held)
        remind = self._until_reminder(key, held)
        for pod_name, uid, message in warnings:
            await self._releaser.warn(wl, pod_name, uid, message)
        await self._explain_held(wl, key, explain)
        if releases and self._repairing(key):
            return None  # decided while the warnings went out; nothing of the plan was recorded
        # The Events above are API calls: a node of the plan may have stopped taking pods since.
        releases, late = self._still_serving(key, releases)
        recheck = [HELD_RECHECK_SECONDS] if late else []
        recheck += [remind] if remind is not None else []
        if not releases:
            return min([d for d in (self._until_deadline(key),) if d is not None] + recheck, default=None)
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
        delays = [d for d in (self._until_deadline(key),) if d is not None] + recheck
        # A retry waits for its own cause; a refused pod sits out and frees its slot for another.
        waits = [wait for r, wait in outcomes if r in ("retry", "refused")]
        if waits:
            delays.append(max(waits))
        return min(delays) if delays else None

    def _still_serving(
        self, key: str, releases: list[tuple[tuple[str, ...], Release]]
    ) -> tuple[list[tuple[tuple[str, ...], Release]], bool]:
        """``releases`` without those whose hostname no longer takes pods (held back: the next
        pass explains them), and whether any was left out."""
        kept: list[tuple[tuple[str, ...], Release]] = []
        for levels, release in releases:
            host = release.node_selector.get(c.HOSTNAME_LABEL)
            if host is not None and self._node_problem(host) is not None:
                self._held.setdefault(host, set()).add(key)
                continue
            kept.append((levels, release))
        return kept, len(kept) < len(releases)

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

    def _not_yet_explained(self, key: str, held: list[tuple[PodView, str, str]]) -> list[tuple[PodView, str, str]]:
        """The holds of this pass not explained yet for their pod (a new pod, node or reason), or
        last explained ``HELD_REMIND_SECONDS`` ago; recorded as explained now, before any await,
        so a concurrent pass never repeats them."""
        explained = self._explained.setdefault(key, {})
        now = self._clock()
        out = []
        for pod, node, why in held:
            last = explained.get(pod.uid)
            if last is None or last[:2] != (node, why) or now - last[2] >= HELD_REMIND_SECONDS:
                explained[pod.uid] = (node, why, now)
                out.append((pod, node, why))
        if not explained:
            del self._explained[key]
        return out

    def _until_reminder(self, key: str, held: list[tuple[PodView, str, str]]) -> float | None:
        """Seconds until the first pod held in this pass is due to be explained again."""
        explained = self._explained.get(key, {})
        due = [explained[pod.uid][2] + HELD_REMIND_SECONDS for pod, _, _ in held if pod.uid in explained]
        return max(min(due) - self._clock(), 0.0) + 0.001 if due else None

    async def _explain_held(self, wl: Workload, key: str, held: list[tuple[PodView, str, str]]) -> None:
        """A Warning on each held pod and one on the Workload per node and reason, and a log line
        per pod: the pod stays gated by our decision, and nothing else would say why."""
        by_node: dict[tuple[str, str], list[str]] = {}
        for pod, node, why in held:
            log.warning("pod_held_back", workload=key, pod=pod.name, node=node, reason=why)
            by_node.setdefault((node, why), []).append(pod.name)
            ref = ObjectRef(c.CORE_API_VERSION, c.KIND_POD, pod.name, wl.namespace, pod.uid)
            await self._emit(ref, key, held_message([pod.name], node, why))
        for (node, why), names in by_node.items():
            await self._emit(workload_ref(wl), key, held_message(names, node, why))

    async def _emit(self, ref: ObjectRef, key: str, message: str) -> None:
        """Best effort: the log line already says it."""
        try:
            await self._events.emit_event(ref, reason=HELD_REASON, message=message, type="Warning")
        except Exception as exc:
            log.warning("event_failed", workload=key, reason=HELD_REASON, error=str(exc))

    def _plan(
        self,
        key: str,
        podset: str,
        ta: TopologyAssignment,
        pods: list[SlimPod],
        held_pods: list[tuple[PodView, str, str]],
    ) -> list[Release]:
        """The releases of one PodSet; the pods held back from a node that cannot take them now
        are added to ``held_pods`` as (pod, node, why)."""
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
            problems = {n: self._node_problem(n) for n in {r.node_selector[c.HOSTNAME_LABEL] for r in releases}}
            held = {n: why for n, why in problems.items() if why is not None}
            for node in held:
                self._held.setdefault(node, set()).add(key)
            held_pods.extend(
                (r.pod, host, held[host]) for r in releases if (host := r.node_selector[c.HOSTNAME_LABEL]) in held
            )
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
