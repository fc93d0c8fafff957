"""The ungater's one write, a pod's release into its domain (our gate removed, the domain's
nodeSelector added, in one patch guarded by the pod's resourceVersion), and how each outcome
settles the pod's expectation (the rules are listed in ``ungate.reconciler``'s docstring)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, Final, Literal, Protocol

import structlog
from kubernetes_asyncio import client as k8s

from kueue_tas.api import constants as c
from kueue_tas.api.workload import Workload
from kueue_tas.controllers.ungate.plan import Expectations, Expected, PodView, Release
from kueue_tas.controllers.workload_events import workload_ref
from kueue_tas.kube.client import patch_pod
from kueue_tas.kube.errors import (
    ApiError,
    Conflict,
    Gone,
    NotFound,
    TooManyRequests,
    may_have_applied,
    retry_after,
    webhook_unreachable,
)
from kueue_tas.kube.events import EventSink, ObjectRef
from kueue_tas.kube.stores import PodStore
from kueue_tas.runtime.config import Settings
from kueue_tas.runtime.metrics import Metrics

log = structlog.get_logger("kueue_tas.controllers.ungate.reconciler")

# A pass retried after a definite failure (Conflict, NotFound): soon, from what we see then.
RETRY_SECONDS: Final = 1.0
# A release turned down because an admission webhook did not answer: tried again after this.
WEBHOOK_RETRY_SECONDS: Final = 5.0
# Never wait longer than this on a server's Retry-After (a bogus header must not stall us).
MAX_RETRY_AFTER_SECONDS: Final = 60.0

ReleaseResult = Literal["ok", "gone", "retry", "refused", "unknown", "stale"]


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


class PodReleaser:
    """Sends releases (at most ``patch_concurrency`` at once) and settles their expectations.

    ``refused``: pod UID -> the resourceVersion the apiserver refused to ungate (that pod sits
    out until it changes)."""

    def __init__(
        self,
        *,
        pods: PodStore,
        patcher: PodPatcher,
        events: EventSink,
        metrics: Metrics,
        settings: Settings,
        expectations: Expectations,
        clock: Callable[[], float],
    ) -> None:
        self._pods = pods
        self._patcher = patcher
        self._events = events
        self._metrics = metrics
        self._settings = settings
        self.expectations = expectations
        self._clock = clock
        self.refused: dict[str, str] = {}
        self._patch_slots = asyncio.Semaphore(settings.patch_concurrency)

    async def release(
        self, wl: Workload, key: str, levels: tuple[str, ...], release: Release
    ) -> tuple[ReleaseResult, float]:
        """(what happened, seconds before a "retry" should look again)."""
        pod = release.pod
        selector = tuple((k, release.node_selector[k]) for k in levels)
        stored = self._pods.get(f"{wl.namespace}/{pod.name}")
        if stored is None or stored.uid != pod.uid:
            return "gone", 0.0
        if not stored.gated or (pod.resource_version and stored.resource_version != pod.resource_version):
            # Changed since the plan (released after all, or edited): the next pass decides
            # from what it sees then; an expectation set now would wait for an event already seen.
            return "retry", RETRY_SECONDS
        timeout = self._settings.ungate_expectation_timeout_seconds
        self.expectations.expect(key, pod.uid, Expected(selector, stored.resource_version, self._clock() + timeout))
        try:
            async with self._patch_slots:
                await self._patcher.patch(
                    wl.namespace or "",
                    pod.name,
                    ungate_patch(self._settings.scheduling_gate, release.node_selector),
                    stored.resource_version,
                )
        except BaseException as exc:
            return await self._failed(wl, key, release, stored.resource_version, selector, exc)
        self._metrics.ungated_pods_total.inc()
        return "ok", 0.0

    async def _failed(
        self,
        wl: Workload,
        key: str,
        release: Release,
        version: str,
        selector: tuple[tuple[str, str], ...],
        exc: BaseException,
    ) -> tuple[ReleaseResult, float]:
        """Settle the expectation of a patch that raised: dropped when nothing was applied, kept
        (until observed or expired) when the patch may have landed. Re-raises cancellation."""
        pod = release.pod
        if may_have_applied(exc):
            error = str(exc) if isinstance(exc, ApiError) else f"{type(exc).__name__}: {exc}".rstrip(": ")
            if self.expectations.get(key, pod.uid) is not None:  # not observed landed meanwhile
                deadline = self._clock() + self._settings.ungate_expectation_timeout_seconds
                self.expectations.expect(key, pod.uid, Expected(selector, version, deadline, error))
            if not isinstance(exc, Exception):
                raise exc  # cancellation (or interpreter exit): the slot stays held until it expires
            self._metrics.ungate_errors_total.inc()
            log.warning(
                "ungate_outcome_unknown",
                workload=key,
                pod=pod.name,
                error=error,
                exc_info=not isinstance(exc, ApiError),
            )
            return "unknown", 0.0
        assert isinstance(exc, ApiError)  # may_have_applied is True for everything else
        if isinstance(exc, Conflict):
            # The pod is at a newer version than the informer shows, perhaps released by an
            # earlier patch of ours: its slot stays held until the informer shows that version
            # (unless it already has, while the patch was in flight).
            log.info("ungate_conflict", workload=key, pod=pod.name)
            return ("stale", 0.0) if self.expectations.get(key, pod.uid) is not None else ("retry", RETRY_SECONDS)
        self.expectations.observe(key, pod.uid)
        if isinstance(exc, (NotFound, Gone)):
            # Gone since our last look: the next pass decides from what we see then.
            return "retry", RETRY_SECONDS
        self._metrics.ungate_errors_total.inc()
        if webhook_unreachable(exc):
            # Turned down before storage while a webhook (Kueue's, restarting) does not answer: not
            # the pod's fault, so not refused; tried again once the webhook has had time to return.
            log.warning("ungate_webhook_unreachable", workload=key, pod=pod.name, error=str(exc))
            domain = ",".join(f"{k}={v}" for k, v in release.node_selector.items())
            await self.warn(
                wl,
                pod.name,
                pod.uid,
                f"could not release pod {pod.name} into domain {domain}: {exc.message}; "
                f"trying again in {WEBHOOK_RETRY_SECONDS:g}s",
            )
            return "retry", WEBHOOK_RETRY_SECONDS
        if isinstance(exc, TooManyRequests):
            wait = retry_after(exc, RETRY_SECONDS, MAX_RETRY_AFTER_SECONDS)
            log.warning("ungate_throttled", workload=key, pod=pod.name, retry_after=wait)
            return "retry", wait
        self.refused[pod.uid] = version
        await self._refused_event(wl, pod, release, exc)
        return "refused", RETRY_SECONDS

    async def _refused_event(self, wl: Workload, pod: PodView, release: Release, exc: ApiError) -> None:
        selector = ",".join(f"{k}={v}" for k, v in release.node_selector.items())
        message = f"could not release pod {pod.name} into domain {selector}: {exc.message or exc}"
        log.warning("ungate_refused", workload=f"{wl.namespace}/{wl.name}", pod=pod.name, error=str(exc))
        await self.warn(wl, pod.name, pod.uid, message)

    async def warn(self, wl: Workload, pod_name: str, pod_uid: str, message: str) -> None:
        pod_ref = ObjectRef(c.CORE_API_VERSION, c.KIND_POD, pod_name, wl.namespace, pod_uid)
        for ref in (pod_ref, workload_ref(wl)):
            await self._events.emit_event(ref, reason="TopologyUngateFailed", message=message, type="Warning")
