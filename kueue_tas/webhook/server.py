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

The port answers anyone on the pod network, so a request is read within bounds first
(``intake``: 413, 503), must be a review of a kind its path serves (400 otherwise, counted as
``rejected``), and its metric labels come from a closed set. Decoding and judging run in a small
thread pool (``JUDGES`` threads): a large body never holds the event loop that the leader
elector and every reconciler share; only the Topologies a queue leads to are looked up on the
loop, where the informers' stores change.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from collections.abc import Callable, Sequence
from concurrent.futures import Executor, ThreadPoolExecutor
from typing import Any, Final, TypeVar

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
from kueue_tas.runtime.listen import BindError, runner_addresses, start_site, stop_runner
from kueue_tas.runtime.logging import get_logger
from kueue_tas.runtime.metrics import Metrics
from kueue_tas.topology.features import FeatureGates
from kueue_tas.webhook.cert_keeper import CertSource
from kueue_tas.webhook.connections import ConnectionLimits, GuardedTCPSite, default_limits
from kueue_tas.webhook.intake import (
    POD_GATE_MAX_BYTES,
    VALIDATE_MAX_BYTES,
    ByteBudget,
    Refused,
    bounded_body,
)
from kueue_tas.webhook.pod_gate import gate_patch
from kueue_tas.webhook.review import (
    MAX_MESSAGE,
    Endpoint,
    Objects,
    ReviewError,
    ReviewRequest,
    answer,
    decode_review,
    judge,
    judged_objects,
)

log = get_logger(__name__)

PATH = "/validate"
POD_GATE_PATH = "/mutate-pod"
# How often the certificate is looked at again (renewal, a rotated Secret or files) and the
# caBundle re-published (a re-applied manifest empties it).
REFRESH_SECONDS = 60.0
WATCHES = 4
# The kinds each path is configured for (manifests/base/webhook.yaml, pod-gate-webhook.yaml).
VALIDATED = Endpoint(
    PATH,
    {("batch", "Job"): "jobs", ("jobset.x-k8s.io", "JobSet"): "jobsets", ("kueue.x-k8s.io", "Workload"): "workloads"},
)
POD_GATED = Endpoint(POD_GATE_PATH, {("", "Pod"): "pods"})
# Label values of kueue_tas_webhook_reviews_total: what we serve; anything else is OTHER, so
# what a stranger writes into a review never becomes a series of its own.
KIND_LABELS: Final = frozenset(k for e in (VALIDATED, POD_GATED) for _, k in e.kinds)
OPERATION_LABELS: Final = frozenset({"CREATE", "UPDATE", "DELETE", "CONNECT"})
OTHER: Final = "other"
# Threads that decode and judge: two, so an ordinary review is not queued behind one large one;
# more would only contend for the GIL with the event loop.
JUDGES: Final = 2
# The longest name or label value the API server stores (a DNS subdomain, 253 characters).
MAX_LOGGED: Final = 253

_T = TypeVar("_T")


def labels(request: ReviewRequest | None) -> tuple[str, str]:
    """The (kind, operation) label values of ``request``, from the closed sets."""
    if request is None:
        return OTHER, OTHER
    kind = request.kind if request.kind in KIND_LABELS else OTHER
    operation = request.operation if request.operation in OPERATION_LABELS else OTHER
    return kind, operation


def _logged(value: object) -> str | None:
    """A value from a review's object as the log shows it: cut to ``MAX_LOGGED`` characters
    (anyone may send a review, and a name of megabytes would be a log line of megabytes)."""
    if value is None:
        return None
    return (value if isinstance(value, str) else type(value).__name__)[:MAX_LOGGED]


class _Rejected(Exception):
    """A review we do not answer: the reason, and the request when it parsed."""

    def __init__(self, reason: str, request: ReviewRequest | None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.request = request


def _checked(raw: bytes, endpoint: Endpoint) -> ReviewRequest:
    """The review in ``raw`` if it is one ``endpoint`` serves; ``ReviewError`` when the body is
    not a review, ``_Rejected`` when it is one of another kind."""
    try:
        review = decode_review(raw)
    except RecursionError:  # deep JSON that still got past the parser's own limit
        raise ReviewError("request body: JSON nested too deeply") from None
    try:
        endpoint.check(review)
    except ReviewError as exc:
        raise _Rejected(str(exc), review) from None
    return review


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
        judges: Executor | None = None,
        budget: ByteBudget | None = None,
        limits: ConnectionLimits | None = None,
    ) -> None:
        """``judges``: the threads that decode and judge (the caller's to shut down); by default
        a pool of ``JUDGES`` the server owns. ``budget``: the bytes bodies may hold at once.
        ``limits``: the connections the port holds (``connections``)."""
        self.settings = settings
        self.certs = certs
        self.caches = caches
        self.metrics = metrics
        self.gates = gates
        self._judges = judges
        self._own_judges: ThreadPoolExecutor | None = None
        self._budget = budget if budget is not None else ByteBudget()
        self.limits = limits if limits is not None else default_limits()
        self._context: ssl.SSLContext | None = None
        self._loaded: tuple[bytes, bytes] | None = None
        self._runner: web.AppRunner | None = None
        self._refresh: asyncio.Task[None] | None = None

    # ---- serving -------------------------------------------------------------------------------

    async def _in_thread(self, fn: Callable[..., _T], *args: Any) -> _T:
        judges = self._judges if self._judges is not None else self._own_judges
        return await asyncio.get_running_loop().run_in_executor(judges, fn, *args)

    async def _review(self, request: web.Request, limit: int, parse: Callable[[bytes], _T]) -> _T:
        """What ``parse`` (in a judge thread) makes of ``request``'s body, read within bounds."""
        async with bounded_body(request, limit, self._budget) as raw:
            return await self._in_thread(parse, raw)

    @staticmethod
    def _to_judge(raw: bytes) -> tuple[ReviewRequest, Objects | None, bool]:
        """The review, its objects to judge, and whether reading them failed (our bug)."""
        review = _checked(raw, VALIDATED)
        try:
            return review, judged_objects(review), False
        except Exception:  # our bug must not refuse a user's object: the admitter judges later
            log.exception("webhook_review_failed", kind=review.kind, operation=labels(review)[1])
            return review, None, True

    def _to_gate(self, raw: bytes) -> tuple[ReviewRequest, list[dict[str, Any]]]:
        review = _checked(raw, POD_GATED)
        patch = gate_patch(review.obj, self.settings.scheduling_gate) if review.operation == "CREATE" else []
        return review, patch

    def _rejected(self, status: int, reason: str, review: ReviewRequest | None) -> web.Response:
        self.metrics.webhook_reviews_total.labels(*labels(review), "rejected").inc()
        log.debug("webhook_request_rejected", status=status, reason=reason)
        return web.Response(status=status, text=f"{reason}\n")

    async def _validate(self, request: web.Request) -> web.Response:
        try:
            review, objects, failed = await self._review(request, VALIDATE_MAX_BYTES, self._to_judge)
        except Refused as exc:
            return self._rejected(exc.status, exc.reason, None)
        except _Rejected as exc:
            return self._rejected(400, exc.reason, exc.request)
        except ReviewError as exc:
            return self._rejected(400, str(exc), None)
        kind, operation = labels(review)
        result = "error"
        verdict = Verdict()
        if failed:  # logged where it failed; allowed and counted as an error
            pass
        elif self.caches.synced():
            try:
                if objects is not None:
                    # The informers' stores change on the loop: they are read here, not in a thread.
                    topologies = list(self.caches.topologies_for(objects.obj))
                    verdict = await self._in_thread(
                        judge, review, objects, topologies, self.settings.annotation_prefix, self.gates
                    )
                result = "allowed" if verdict.allowed else "denied"
            except Exception:  # our bug must not refuse a user's object: the admitter judges later
                log.exception("webhook_review_failed", kind=kind, operation=operation)
                verdict = Verdict()
        else:
            log.warning("webhook_review_before_sync", kind=kind, operation=operation)
        self.metrics.webhook_reviews_total.labels(kind, operation, result).inc()
        if not verdict.allowed:
            # Cut as the answer is: a problem may quote a value as long as the body.
            message = "; ".join(verdict.problems)[:MAX_MESSAGE]
            log.info("webhook_denied", kind=kind, operation=operation, message=message)
        return web.json_response(answer(review.uid, verdict))

    async def _gate_pod(self, request: web.Request) -> web.Response:
        """``gate.kueue-tas.io``: our gate on each new pod of a PodSet the ungater places. Pure
        and cache-free, so it answers from the first moment the server listens (the
        configuration's ``failurePolicy: Fail`` makes those pods wait for an answer)."""
        try:
            review, patch = await self._review(request, POD_GATE_MAX_BYTES, self._to_gate)
        except Refused as exc:
            return self._rejected(exc.status, exc.reason, None)
        except _Rejected as exc:
            return self._rejected(400, exc.reason, exc.request)
        except ReviewError as exc:
            return self._rejected(400, str(exc), None)
        self.metrics.webhook_reviews_total.labels(*labels(review), "gated" if patch else "allowed").inc()
        if patch:
            meta = review.obj.get("metadata") or {}
            log.info(
                "webhook_pod_gated",
                namespace=_logged(meta.get("namespace")),
                name=_logged(meta.get("name") or meta.get("generateName")),
                podset=_logged((meta.get("labels") or {}).get(c.PODSET_LABEL)),
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
        if self._judges is None:
            self._own_judges = ThreadPoolExecutor(max_workers=JUDGES, thread_name_prefix="webhook-judge")
        app = web.Application()
        app.router.add_post(PATH, self._validate)
        app.router.add_post(POD_GATE_PATH, self._gate_pod)
        # auto_decompress off: aiohttp would inflate a compressed body on the event loop, however
        # large it inflates to; intake refuses such bodies (415) instead.
        runner = web.AppRunner(app, access_log=None, handle_signals=False, auto_decompress=False)
        await runner.setup()
        host, port = address
        try:
            # reuse_port: replicas on one host (the local cluster) share one address, so a
            # configuration with one URL reaches whichever replica is alive.
            site = GuardedTCPSite(runner, self.limits, host=host, port=port, ssl_context=self._context, reuse_port=True)
            await start_site(site, "webhook_bind", self.settings.webhook_bind, host, port)
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
        # The bundle (the new CA and the previous one) is written before the new leaf is served:
        # the other way round, reviews sent here failed their handshake until the patch landed.
        await self.certs.publish()
        if (cert, key) != self._loaded:
            load_chain(self._context, cert, key)  # new connections get it; open ones keep theirs
            self._loaded = (cert, key)
            log.info("webhook_certificate_reloaded")

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
        own, self._own_judges = self._own_judges, None
        if own is not None:
            own.shutdown(wait=False, cancel_futures=True)
        await self.caches.stop()
