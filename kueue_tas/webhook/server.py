"""The admission webhooks: an HTTPS server every replica runs, leader or standby.

``/mutate-pod`` (``gate.kueue-tas.io``) gives our scheduling gate to each new pod labelled as
one the ungater places (``pod_gate``; ``manifests/base/pod-gate-webhook.yaml``).
``/validate`` (``validate.kueue-tas.io``) judges topology annotations: the apiserver sends an
AdmissionReview for each Job, JobSet and Workload created or updated
(``manifests/base/webhook.yaml``); the answer comes from ``review.judge`` with the Topologies
the object's queue leads to. Those come from the webhook's own informers (Topologies,
AdmissionChecks, ClusterQueues, LocalQueues: small objects), not the manager's: the manager
runs only while leading, and a standby answers reviews too.

Its ``failurePolicy: Ignore``: the admitter refuses at decision time whatever the webhook missed,
so a review that cannot be judged (caches not synced, an error) is allowed, counted as
``error`` and logged, never refused on a guess.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from collections.abc import Sequence
from typing import Any

from aiohttp import web

from kueue_tas.api import constants as c
from kueue_tas.api.kinds import KubeObject
from kueue_tas.api.kueue_objects import AdmissionCheck, ClusterQueue, LocalQueue, Topology
from kueue_tas.capacity.creation_checks import TopologyView, Verdict, queue_of, queue_topologies
from kueue_tas.capacity.rules import our_checks
from kueue_tas.kube import catalogue as cat
from kueue_tas.kube.decoding import model_transform
from kueue_tas.kube.errors import ApiError
from kueue_tas.kube.informer import Informer
from kueue_tas.kube.stores import object_key
from kueue_tas.runtime.certs import CertificateError, load_chain, ssl_context
from kueue_tas.runtime.config import Settings, parse_bind
from kueue_tas.runtime.listen import BindError, listen, runner_addresses, stop_runner
from kueue_tas.runtime.logging import get_logger
from kueue_tas.runtime.metrics import Metrics
from kueue_tas.topology.features import FeatureGates
from kueue_tas.webhook.cert_keeper import CertSource
from kueue_tas.webhook.pod_gate import gate_patch
from kueue_tas.webhook.review import ReviewError, answer, judge, parse_review

log = get_logger(__name__)

PATH = "/validate"
POD_GATE_PATH = "/mutate-pod"
# How often the certificate is looked at again (renewal, a rotated Secret or files) and the
# caBundle re-published (a re-applied manifest empties it).
REFRESH_SECONDS = 60.0
WATCHES = 4


class QueueCaches:
    """The webhook's informers and what they answer: the Topologies a queue leads to."""

    def __init__(self, api: Any, controller_name: str) -> None:
        self.controller_name = controller_name
        self.topologies = Informer(api, cat.TOPOLOGIES, model_transform(Topology), name="webhook-topologies")
        self.checks = Informer(api, cat.ADMISSION_CHECKS, model_transform(AdmissionCheck), name="webhook-checks")
        self.cluster_queues = Informer(
            api, cat.CLUSTER_QUEUES, model_transform(ClusterQueue), name="webhook-clusterqueues"
        )
        self.local_queues = Informer(api, cat.LOCAL_QUEUES, model_transform(LocalQueue), name="webhook-localqueues")
        self._all: tuple[Informer[Any], ...] = (self.topologies, self.checks, self.cluster_queues, self.local_queues)

    def start(self) -> None:
        for informer in self._all:
            informer.start()

    async def stop(self) -> None:
        for informer in self._all:
            await informer.stop()

    def synced(self) -> bool:
        return all(i.synced.is_set() for i in self._all)

    def topologies_for(self, obj: KubeObject) -> Sequence[TopologyView]:
        queue = queue_of(obj)
        if queue is None:
            return []
        lq = self.local_queues.store.get(object_key(obj.metadata.namespace, queue))
        if lq is None or not lq.spec.cluster_queue:
            return []
        checks = our_checks(self.checks.store.values(), self.controller_name)
        return queue_topologies(self.cluster_queues.store.get(lq.spec.cluster_queue), checks, self.topologies.store.get)


class WebhookServer:
    def __init__(
        self,
        settings: Settings,
        certs: CertSource,
        caches: QueueCaches,
        metrics: Metrics,
        gates: FeatureGates,
    ) -> None:
        self.settings = settings
        self.certs = certs
        self.caches = caches
        self.metrics = metrics
        self.gates = gates
        self._context: ssl.SSLContext | None = None
        self._loaded: tuple[bytes, bytes] | None = None
        self._runner: web.AppRunner | None = None
        self._refresh: asyncio.Task[None] | None = None

    # ---- serving -------------------------------------------------------------------------------

    async def _validate(self, request: web.Request) -> web.Response:
        try:
            review = parse_review(await request.json())
        except (ReviewError, ValueError) as exc:
            return web.Response(status=400, text=f"{exc}\n")
        kind, operation = review.kind or "unknown", review.operation or "unknown"
        result = "error"
        verdict = Verdict()
        if self.caches.synced():
            try:
                verdict = judge(review, self.caches.topologies_for, self.settings.annotation_prefix, self.gates)
                result = "allowed" if verdict.allowed else "denied"
            except Exception:  # our bug must not refuse a user's object: the admitter judges later
                log.exception("webhook_review_failed", kind=kind, operation=operation)
                verdict = Verdict()
        else:
            log.warning("webhook_review_before_sync", kind=kind, operation=operation)
        self.metrics.webhook_reviews_total.labels(kind, operation, result).inc()
        if not verdict.allowed:
            log.info("webhook_denied", kind=kind, operation=operation, message="; ".join(verdict.problems))
        return web.json_response(answer(review.uid, verdict))

    async def _gate_pod(self, request: web.Request) -> web.Response:
        """``gate.kueue-tas.io``: our gate on each new pod of a PodSet the ungater places. Pure
        and cache-free, so it answers from the first moment the server listens (the
        configuration's ``failurePolicy: Fail`` makes those pods wait for an answer)."""
        try:
            review = parse_review(await request.json())
        except (ReviewError, ValueError) as exc:
            return web.Response(status=400, text=f"{exc}\n")
        operation = review.operation or "unknown"
        patch = (
            gate_patch(review.obj, self.settings.scheduling_gate)
            if operation == "CREATE" and review.kind == "Pod"
            else []
        )
        self.metrics.webhook_reviews_total.labels(
            review.kind or "unknown", operation, "gated" if patch else "allowed"
        ).inc()
        if patch:
            meta = review.obj.get("metadata") or {}
            log.info(
                "webhook_pod_gated",
                namespace=meta.get("namespace"),
                name=meta.get("name") or meta.get("generateName"),
                podset=(meta.get("labels") or {}).get(c.PODSET_LABEL),
            )
        return web.json_response(answer(review.uid, Verdict(), patch))

    def readiness(self) -> tuple[bool, str]:
        if self._runner is None:
            return False, "webhook not serving"
        if not self.caches.synced():
            return False, "webhook caches not synced"
        return True, "webhook serving"

    # ---- lifecycle -----------------------------------------------------------------------------

    async def start(self) -> None:
        """Get the certificate, listen, start the caches and the refresh loop. BindError and
        CertificateError say what stops the webhook from serving."""
        address = parse_bind(self.settings.webhook_bind)
        if address is None:
            return
        try:
            cert, key = await self.certs.current()
            await self.certs.publish()
        except ApiError as exc:
            raise CertificateError(f"webhook certificate: {exc}") from exc
        self._context = ssl_context(cert, key)
        self._loaded = (cert, key)
        app = web.Application()
        app.router.add_post(PATH, self._validate)
        app.router.add_post(POD_GATE_PATH, self._gate_pod)
        runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await runner.setup()
        host, port = address
        try:
            # reuse_port: replicas on one host (the local cluster) share one address, so a
            # configuration with one URL reaches whichever replica is alive.
            await listen(
                runner,
                "webhook_bind",
                self.settings.webhook_bind,
                host,
                port,
                ssl_context=self._context,
                reuse_port=True,
            )
        except BindError:
            await runner.cleanup()
            raise
        self._runner = runner
        self.caches.start()
        self._refresh = asyncio.create_task(self._refresh_loop(), name="webhook-certificate")
        log.info("webhook_serving", addresses=[f"{h}:{p}" for h, p in self.addresses], path=PATH)

    async def refresh_once(self) -> None:
        """Serve the current certificate if it changed, and publish its CA."""
        if self._context is None or not self.certs.changed():
            return
        cert, key = await self.certs.current()
        if (cert, key) != self._loaded:
            load_chain(self._context, cert, key)  # new connections get it; open ones keep theirs
            self._loaded = (cert, key)
            log.info("webhook_certificate_reloaded")
        await self.certs.publish()

    async def _refresh_loop(self) -> None:
        while True:
            await asyncio.sleep(REFRESH_SECONDS)
            try:
                await self.refresh_once()
            except (ApiError, CertificateError) as exc:  # keep serving what we have; try again
                log.warning("webhook_certificate_refresh_failed", error=str(exc))

    @property
    def addresses(self) -> list[tuple[str, int]]:
        return runner_addresses(self._runner)

    async def stop(self) -> None:
        refresh, self._refresh = self._refresh, None
        if refresh is not None:
            refresh.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await refresh
        runner, self._runner = self._runner, None
        await stop_runner(runner)
        await self.caches.stop()
