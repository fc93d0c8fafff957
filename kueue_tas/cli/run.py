"""``kueue-tas run``: the controller process.

One Manager owns the API client and the shared informers; the reconcilers registered on it
(all of them, in ``kueue_tas.controllers.setup``) run while this process holds the leader Lease. The
admission webhook, when on, serves in every replica (``kueue_tas.webhook``), and so does the
topology map (``map_bind``: ``map_server``, from the live model on the leader).
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import ssl
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import structlog

from kueue_tas.controllers.setup import LiveState, setup_controllers
from kueue_tas.kube.client import RateLimitedApiClient
from kueue_tas.runtime.certs import CertificateError, service_hosts
from kueue_tas.runtime.config import ConfigError, Settings, parse_bind
from kueue_tas.runtime.health import CheckResult, HealthServer, leader_election_check
from kueue_tas.runtime.http_auth import KubeReviewer, RequestAuth
from kueue_tas.runtime.leader import LeaderElectionLost, LeaderElector
from kueue_tas.runtime.listen import BindError
from kueue_tas.runtime.logging import configure_logging
from kueue_tas.runtime.manager import Manager, connect
from kueue_tas.runtime.metrics import Metrics
from kueue_tas.runtime.serving_tls import ServingTLS
from kueue_tas.topology.features import FeatureGateError, FeatureGates
from kueue_tas.webhook.cert_keeper import CertSource, FileCerts, SecretCerts
from kueue_tas.webhook.server import WATCHES as WEBHOOK_WATCHES
from kueue_tas.webhook.server import QueueCaches, WebhookServer

if TYPE_CHECKING:
    from kueue_tas.cli.map_server import MapServer

log = structlog.get_logger(__name__)


def webhook_server(api: Any, settings: Settings, metrics: Metrics) -> WebhookServer | None:
    """The admission webhook when ``webhook_bind`` turns it on: certificates from
    ``webhook_cert_dir`` when set, else the controller's own Secret."""
    if settings.webhook_address() is None:
        return None
    certs: CertSource
    if settings.webhook_cert_dir is not None:
        certs = FileCerts(settings.webhook_cert_dir)
    else:
        certs = SecretCerts(
            api,
            namespace=settings.webhook_namespace,
            secret=settings.webhook_secret,
            configuration=settings.webhook_configuration,
            hosts=service_hosts(settings.webhook_service, settings.webhook_namespace, settings.webhook_hosts),
        )
    caches = QueueCaches(api, settings.controller_name)
    return WebhookServer(settings, certs, caches, metrics, FeatureGates.from_mapping(settings.feature_gates))


@dataclass(frozen=True, slots=True)
class ReaderAccess:
    """How /metrics and the map are protected: their TLS and request authentication, each None
    when its setting turns it off."""

    tls: ServingTLS | None
    metrics_auth: RequestAuth | None
    map_auth: RequestAuth | None

    def context(self, secure: bool) -> ssl.SSLContext | None:
        return self.tls.context() if secure and self.tls is not None else None


def reader_access(api: Any, settings: Settings, metrics: Metrics) -> ReaderAccess:
    map_on = settings.map_address() is not None
    metrics_on = settings.metrics_address() is not None
    needs_tls = (metrics_on and settings.metrics_secure) or (map_on and settings.map_secure)
    reviewer = KubeReviewer(api)
    for name, on, secure, auth, bind in (
        ("metrics", metrics_on, settings.metrics_secure, settings.metrics_auth, settings.metrics_bind),
        ("map", map_on, settings.map_secure, settings.map_auth, settings.map_bind),
    ):
        host = (parse_bind(bind) or (None, 0))[0]
        if not on or host in ("127.0.0.1", "localhost", "::1"):
            continue  # loopback: only this host (or a port-forward) reaches it
        if not auth:
            log.warning("reader_endpoint_unauthenticated", server=name, bind=bind, setting=f"{name}_auth")
        elif not secure:  # the readers' bearer tokens would cross the network in clear
            log.warning("reader_tokens_in_clear", server=name, bind=bind, setting=f"{name}_secure")
    return ReaderAccess(
        tls=ServingTLS(settings.serving_cert_dir) if needs_tls else None,
        metrics_auth=RequestAuth(reviewer, "metrics", metrics=metrics) if settings.metrics_auth else None,
        map_auth=RequestAuth(reviewer, "map", metrics=metrics) if settings.map_auth else None,
    )


def map_server(
    api: Any,
    settings: Settings,
    manager: Manager,
    live: LiveState,
    elector: LeaderElector,
    access: ReaderAccess | None = None,
) -> MapServer | None:
    """The topology map when ``map_bind`` turns it on: from the live model while this replica
    leads with synced informers, else from a cluster read (``map_sources``)."""
    if settings.map_address() is None:
        return None
    from kueue_tas.cli.map_server import MapServer
    from kueue_tas.cli.map_sources import LiveSource, ReadSource, cluster_reader

    source = LiveSource(
        live.capacity,
        live.informers.workloads.store.values,
        live.informers.pod_store.values,
        live.cache.check_flavors,
        lambda: elector.is_leader,
        settings,
    )
    manager.on_synced(source.mark_synced)  # registered after the capacity's resync: runs after it
    read = ReadSource(
        cluster_reader(api, settings.annotation_prefix, settings.scheduling_gate),
        settings,
        FeatureGates.from_mapping(settings.feature_gates),
    )
    return MapServer(
        settings.map_bind,
        read,
        source,
        replica=elector.identity,
        refresh_seconds=settings.map_refresh_seconds,
        auth=access.map_auth if access is not None else None,
        tls=access.context(settings.map_secure) if access is not None else None,
    )


async def serve(settings: Settings) -> int:
    webhook_on = settings.webhook_address() is not None
    api = await connect(settings, watches=8 + (WEBHOOK_WATCHES if webhook_on else 0))
    metrics = Metrics()
    manager = Manager(api, settings, metrics)
    live = setup_controllers(manager, settings)
    access = reader_access(api, settings, metrics)
    try:
        health = HealthServer(settings, metrics, auth=access.metrics_auth, tls=access.context(settings.metrics_secure))
        webhook = webhook_server(api, settings, metrics)
        elector = LeaderElector(api, settings)
        if isinstance(api, RateLimitedApiClient):
            api.fence_writes(elector.may_write)  # a deposed leader's queued writes are never sent
        topology_map = map_server(api, settings, manager, live, elector, access)
    except CertificateError as exc:  # serving_cert_dir without usable files
        log.error("serving_certificate_failed", error=str(exc))
        print(f"error: {exc}", file=sys.stderr)
        await api.close()
        return 1

    def informers_synced() -> CheckResult:
        if elector.enabled and not elector.is_leader:
            return True, "standby"
        return manager.readiness()

    health.add_readiness_check("informers", informers_synced)
    health.add_readiness_check("leader-election", leader_election_check(elector))
    if webhook is not None:
        health.add_readiness_check("webhook", webhook.readiness)
    try:
        await health.start()
        if webhook is not None:
            await webhook.start()
        if topology_map is not None:
            await topology_map.start()
    except BindError as exc:
        log.error("cannot_listen", error=str(exc))
        print(f"error: invalid kueue-tas settings: {exc}", file=sys.stderr)
        await _stop(health, webhook, topology_map)
        await api.close()
        return 1
    except CertificateError as exc:
        log.error("webhook_certificate_failed", error=str(exc))
        print(f"error: {exc}", file=sys.stderr)
        await _stop(health, webhook, topology_map)
        await api.close()
        return 1
    tls_refresh = asyncio.create_task(access.tls.run()) if access.tls is not None else None

    loop = asyncio.get_running_loop()
    main = asyncio.current_task()
    assert main is not None
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, main.cancel)
    try:
        await elector.run(manager.run)
        return 0
    except LeaderElectionLost:
        log.error("leader_election_lost")
        return 1
    except asyncio.CancelledError:
        log.info("shutting_down")
        return 0
    finally:
        if tls_refresh is not None:
            tls_refresh.cancel()
        await _stop(health, webhook, topology_map)
        await api.close()


async def _stop(health: HealthServer, webhook: WebhookServer | None, topology_map: MapServer | None) -> None:
    if topology_map is not None:
        await topology_map.stop()
    if webhook is not None:
        await webhook.stop()
    await health.stop()


def run(args: argparse.Namespace) -> int:
    try:
        settings = Settings.load(args.config, **({"kubeconfig": args.kubeconfig} if args.kubeconfig else {}))
    except ConfigError as exc:
        print(f"error: {exc}")
        return 1
    try:
        FeatureGates.from_mapping(settings.feature_gates)
    except FeatureGateError as exc:
        print(f"error: invalid kueue-tas settings: feature_gates: {exc}")
        return 1
    configure_logging(settings.log_level, settings.log_format)
    return asyncio.run(serve(settings))
