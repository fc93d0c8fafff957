"""Stray pods: delete the pods of an admitted workload that its current assignment has no slot
for (``stray.plan``), so that the Job controller recreates them gated and the ungater sends
them where the assignment says.

Found by the chaos campaign: a node deleted, its slots moved by the node repair, the node
re-created 12 s later with its pods still bound to it; they ran again beside the slots that
replaced them (a domain overfilled, the new slots held for pods that never came). Kueue's
node controller terminates such late pods too.

How: a graceful delete with a UID precondition (only that incarnation of the pod). Kueue
marks its late pods Failed through ``pods/status``, but it does so only for pods no kubelet
runs yet; ours are usually bound and running, and the status of a bound pod is the
kubelet's to write. A delete is how pod GC and the taint manager remove a running pod: the
kubelet stops it within its grace period, it holds its capacity while Terminating, and the
Job controller replaces it at once.

When:

* only a workload whose assignment is trusted (our entry Ready), untampered, with no
  admission decision of ours being written for it (``LiveCapacity.assumes``), and
  not an elastic slice while the slice it replaces is still admitted by us (until Kueue
  finishes that one, each judges its own pods); once it is finished or deleted, the new slice
  judges the pods it keeps too (``slice_pods``: its assignment includes them, by Kueue's
  elastic-workload semantics);
* only a pod that fills no slot (``LiveCapacity.slot_filled_by``), and, while a node repair of
  ours is being written (``OurRewrites``; its outcome may stay unknown for a minute), only one
  that neither the current assignment nor the one being written has a slot for: either may be
  the one that stands (DST seed 3301264: waiting for the repair instead left a pod bound
  outside every assignment for 80 s);
* only once the pod has been stray for ``stray_pod_grace_seconds`` without a break, so an
  assignment update the informer has not shown yet never costs a pod; except a pod bound or
  pinned to a node that no longer exists (the node repair's test for a deleted node): its slot
  has moved, it runs nowhere, and it would run at once in a domain with no slot for it if the
  node came back, so it goes at once.

Failures follow ``kube/errors``: NotFound or Conflict (the pod is gone, or re-created under
its name) end it; 429 waits for the server's Retry-After; another refusal leaves a Warning
Event and is tried again later; an unknown outcome is tried again soon (the UID precondition
makes a second delete harmless).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from typing import Final, Protocol

import structlog
from kubernetes_asyncio import client as k8s

from kueue_tas.api import constants as c
from kueue_tas.api.workload import Workload
from kueue_tas.capacity.assignment_record import assignment_tampering
from kueue_tas.capacity.feed import workload_key
from kueue_tas.capacity.live import LiveCapacity
from kueue_tas.capacity.rules import assignment_trusted
from kueue_tas.controllers.deps import ControllerDeps
from kueue_tas.controllers.informers import SlimNode
from kueue_tas.controllers.rewrites import OurRewrites
from kueue_tas.controllers.slice_pods import earlier_slice_pods, workloads_of_pod
from kueue_tas.controllers.stray.plan import Stray, also_stray, domain_text, stray_pods
from kueue_tas.controllers.workload_events import workload_ref
from kueue_tas.kube.client import delete_pod
from kueue_tas.kube.errors import (
    ApiError,
    Conflict,
    NotFound,
    TooManyRequests,
    may_have_applied,
    retry_after,
    webhook_unreachable,
)
from kueue_tas.kube.events import ObjectRef
from kueue_tas.kube.slim import SlimPod
from kueue_tas.runtime.workqueue import WorkQueue
from kueue_tas.topology.admitted import replaced_slice_ref
from kueue_tas.topology.codec import decode_assignment_annotation

log = structlog.get_logger(__name__)

# A workload with a decision of ours still being written is looked at again this often.
BUSY_POLL_SECONDS: Final = 1.0
# A delete the informer has not shown yet (the pod still looks stray) is not sent again sooner.
DELETE_SETTLE_SECONDS: Final = 30.0
# After a delete with an unknown outcome, or one the apiserver refused.
RETRY_SECONDS: Final = 2.0
REFUSED_RETRY_SECONDS: Final = 30.0
MAX_RETRY_AFTER_SECONDS: Final = 60.0

EVENT_REASON: Final = "TopologyStrayPodTerminated"
FAILED_REASON: Final = "TopologyStrayPodTerminationFailed"


class PodDeleter(Protocol):
    async def delete(self, namespace: str, name: str, uid: str) -> None: ...


class KubePodDeleter:
    """:class:`PodDeleter` against the API server: graceful, guarded by the pod's UID."""

    def __init__(self, api: k8s.ApiClient) -> None:
        self.api = api

    async def delete(self, namespace: str, name: str, uid: str) -> None:
        await delete_pod(self.api, namespace=namespace, name=name, uid=uid)


class StrayPods:
    def __init__(
        self,
        deps: ControllerDeps,
        *,
        capacity: LiveCapacity,
        deleter: PodDeleter,
        clock: Callable[[], float] | None = None,
        rewrites: OurRewrites | None = None,
    ) -> None:
        """``clock``: monotonic seconds (default: the event loop's); ``rewrites``: the node
        repair's rewrites in progress (none: a repair in progress holds every judgement)."""
        informers = deps.informers
        self._workloads = informers.workloads.store
        self._pods = informers.pod_store
        self._nodes = informers.nodes.store  # by Node name: what ``pod.spec.nodeName`` names
        self._hosts = informers.hosts  # by hostname label: what a nodeSelector pins to
        self._checks = deps.checks
        self._capacity = capacity
        self._deleter = deleter
        self._rewrites = rewrites
        self._events = deps.events
        self._metrics = deps.metrics
        self._settings = deps.settings
        self._gates = deps.gates
        self._clock = clock or (lambda: asyncio.get_running_loop().time())
        self.queue: WorkQueue[str] = WorkQueue("stray-pods")
        self._since: dict[str, dict[str, float]] = {}  # workload -> pod UID -> stray since
        self._sent: dict[str, float] = {}  # pod UID -> when its delete was sent
        self._refused: set[str] = set()  # pod UIDs whose delete was refused (one Event each)
        informers.workloads.add_handler(self._on_workload, lambda _o, w: self._on_workload(w), self._on_gone)
        informers.pods.add_handler(lambda p: self._on_pod(None, p), self._on_pod, lambda p: self._on_pod(None, p))
        informers.nodes.add_handler(lambda _n: self._on_node(), self._on_node_changed, lambda _n: self._on_node())

    # --- events -------------------------------------------------------------------------------

    def _on_workload(self, wl: Workload) -> None:
        self.queue.add(workload_key(wl))

    def _on_gone(self, wl: Workload) -> None:
        self._forget(workload_key(wl))

    def _on_pod(self, old: SlimPod | None, pod: SlimPod) -> None:
        if pod.workload is None:
            return
        if old is not None and (old.node_name, old.node_selector, old.gated, old.terminating, old.phase) == (
            pod.node_name,
            pod.node_selector,
            pod.gated,
            pod.terminating,
            pod.phase,
        ):
            return  # nothing the rule reads has changed
        for wl in workloads_of_pod(pod, self._workloads):
            self.queue.add(workload_key(wl))

    def _on_node_changed(self, old: SlimNode, new: SlimNode) -> None:
        if old.labels != new.labels:
            self._on_node()

    def _on_node(self) -> None:
        """A node came, went or was relabelled: the domains of pods without a full nodeSelector
        may have changed (rare: every admitted workload is looked at)."""
        ours = self._checks.names()
        for wl in self._workloads.values():
            if assignment_trusted(wl, ours):
                self.queue.add(workload_key(wl))

    def _forget(self, key: str) -> None:
        for uid in self._since.pop(key, {}):
            self._sent.pop(uid, None)
            self._refused.discard(uid)

    # --- a pass -------------------------------------------------------------------------------

    def _judged(self, wl: Workload, key: str) -> bool | None:
        """Whether ``wl``'s pods may be judged now; None: not now, but soon (a decision of ours
        is being written for it)."""
        ours = self._checks.names()
        if (
            not wl.metadata.uid
            or not assignment_trusted(wl, ours)
            or wl.is_evicted
            or assignment_tampering(wl, ours) is not None
            or self._replaced_still_admitted(wl, ours)
        ):
            return False
        if self._capacity.assumes(key):
            return None
        if self._capacity.holds_extra(key) and self._rewriting(key) is None:
            return None
        return True

    def _node_labels(self, name: str) -> Mapping[str, str] | None:
        node = self._nodes.get(name)
        return None if node is None else node.labels

    def _rewriting(self, key: str) -> str | None:
        """The annotation a node repair of ours is writing for ``key``, if any."""
        return None if self._rewrites is None else self._rewrites.text(key)

    def _replaced_still_admitted(self, wl: Workload, ours: set[str]) -> bool:
        ref = replaced_slice_ref(wl, self._gates)
        if ref is None:
            return False
        old = self._workloads.get(f"{ref[0] or ''}/{ref[1]}")
        return old is not None and assignment_trusted(old, ours)

    async def reconcile(self, key: str) -> float | None:
        wl = self._workloads.get(key)
        judged = None if wl is None else self._judged(wl, key)
        if wl is None or not judged:
            self._forget(key)
            return None if judged is False or wl is None else BUSY_POLL_SECONDS
        text = wl.metadata.annotations[c.TOPOLOGY_ASSIGNMENT_ANNOTATION]
        rewriting = self._rewriting(key)
        try:
            assignments = dict(decode_assignment_annotation(text))
            repaired = None if rewriting in (None, text) else dict(decode_assignment_annotation(rewriting))
        except ValueError:
            self._forget(key)
            return None  # holds nothing we could judge by; the assignment guard deals with it
        pods = self._pods.of_workload(wl.namespace or "", wl.metadata.uid or "")
        ours = self._checks.names()
        pods += earlier_slice_pods(wl, self._workloads, self._pods, self._gates, lambda w: assignment_trusted(w, ours))
        strays = stray_pods(
            assignments, pods, self._node_labels, lambda pod_key: self._capacity.slot_filled_by(pod_key) is not None
        )
        if repaired is not None:
            # The model's slots are the current assignment's: by the repair's, count alone.
            strays = also_stray(strays, stray_pods(repaired, pods, self._node_labels, lambda _pod_key: False))
        now = self._clock()
        before = self._since.get(key, {})
        since = {s.pod.uid: before.get(s.pod.uid, now) for s in strays}
        for uid in set(before) - set(since):
            self._sent.pop(uid, None)
            self._refused.discard(uid)
        if since:
            self._since[key] = since
        else:
            self._since.pop(key, None)
        grace = self._settings.stray_pod_grace_seconds
        waits: list[float] = []
        for stray in strays:
            uid = stray.pod.uid
            gone = self._node_gone(stray.pod)
            left = 0.0 if gone else since[uid] + grace - now
            sent = self._sent.get(uid)
            if sent is not None and now < sent + DELETE_SETTLE_SECONDS:
                waits.append(sent + DELETE_SETTLE_SECONDS - now)
            elif left > 0:
                waits.append(left)
            else:
                why = f"its node {gone} no longer exists" if gone else f"stray for {now - since[uid]:.0f}s"
                wait = await self._delete(wl, stray, why)
                if wait is not None:
                    waits.append(wait)
        return min(waits) if waits else None

    def _node_gone(self, pod: SlimPod) -> str | None:
        """The node a stray pod is bound or pinned to, when it no longer exists (the node
        repair's own test for a deleted node). Such a pod is deleted without the grace: its
        slot has already moved, and if the node came back it would run there at once (chaos
        seed 1188: pinned to a host just before the host was deleted, bound when it returned)."""
        if pod.node_name:
            return pod.node_name if self._nodes.get(pod.node_name) is None else None
        host = pod.node_selector_map().get(c.HOSTNAME_LABEL)
        # Gone when no Node carries the hostname; one that several carry still exists (the
        # grace applies: the node repair moves its slots, it names the Nodes).
        return host if host and not self._hosts.carriers(host) else None

    async def _delete(self, wl: Workload, stray: Stray, why: str) -> float | None:
        """Delete one stray pod; seconds until it should be looked at again."""
        pod = stray.pod
        key = workload_key(wl)
        try:
            await self._deleter.delete(pod.namespace, pod.name, pod.uid)
        except (NotFound, Conflict):
            log.info("stray_pod_already_gone", workload=key, pod=pod.key)
            self._sent[pod.uid] = self._clock()  # the informer will show it gone or replaced
            return DELETE_SETTLE_SECONDS
        except Exception as exc:
            error = str(exc) if isinstance(exc, ApiError) else f"{type(exc).__name__}: {exc}".rstrip(": ")
            log.warning("stray_pod_delete_failed", workload=key, pod=pod.key, error=error)
            if isinstance(exc, TooManyRequests):
                return retry_after(exc, RETRY_SECONDS, MAX_RETRY_AFTER_SECONDS)
            if may_have_applied(exc) or webhook_unreachable(exc):
                return retry_after(exc, RETRY_SECONDS, MAX_RETRY_AFTER_SECONDS)
            if pod.uid not in self._refused:
                self._refused.add(pod.uid)
                message = f"could not terminate stray pod {pod.name}: {error}"
                await self._warn(wl, pod, FAILED_REASON, message)
            return REFUSED_RETRY_SECONDS
        self._sent[pod.uid] = self._clock()
        self._metrics.stray_pods_terminated_total.inc()
        message = stray_message(wl, stray, why)
        log.info("stray_pod_terminated", workload=key, pod=pod.key, node=pod.node_name, reason=message)
        await self._warn(wl, pod, EVENT_REASON, message)
        return DELETE_SETTLE_SECONDS

    async def _warn(self, wl: Workload, pod: SlimPod, reason: str, message: str) -> None:
        """Best effort: a Warning on the pod and on its Workload."""
        pod_ref = ObjectRef(c.CORE_API_VERSION, c.KIND_POD, pod.name, pod.namespace, pod.uid)
        for ref in (pod_ref, workload_ref(wl)):
            try:
                await self._events.emit_event(ref, reason=reason, message=message, type="Warning")
            except Exception as exc:
                log.warning("event_failed", workload=workload_key(wl), reason=reason, error=str(exc))

    async def run(self) -> None:
        ours = self._checks.names()
        for wl in self._workloads.values():
            if assignment_trusted(wl, ours):
                self.queue.add(workload_key(wl))
        log.info("stray_pods_started", grace_seconds=self._settings.stray_pod_grace_seconds)
        await self.queue.run(1, self.reconcile)


def stray_message(wl: Workload, stray: Stray, why: str) -> str:
    """``pod p on node h2 terminated: the assignment of workload ns/wl gives domain r1/h2 of
    PodSet main no pods (stray for 5s)``; ``why`` is the parenthesis."""
    pod = stray.pod
    where = f"on node {pod.node_name}" if pod.node_name else "(not yet bound)"
    domain = domain_text(stray.domain)
    owner = f"workload {wl.namespace}/{wl.name}"
    if stray.count == 0:
        what = f"the assignment of {owner} gives domain {domain} of PodSet {pod.podset} no pods"
    else:
        what = (
            f"the assignment of {owner} gives domain {domain} of PodSet {pod.podset} "
            f"{stray.count} pod(s) and {stray.running} run there"
        )
    return f"pod {pod.name} {where} terminated: {what} ({why})"
