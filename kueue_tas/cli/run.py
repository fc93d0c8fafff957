"""``kueue-tas run``: the controller process."""

from __future__ import annotations

import argparse
import asyncio
import signal

import structlog

from kueue_tas.admission.controller import Admitter
from kueue_tas.runtime.config import ConfigError, Settings
from kueue_tas.runtime.health import HealthServer, leader_election_check
from kueue_tas.runtime.leader import LeaderElectionLost, LeaderElector
from kueue_tas.runtime.logging import configure_logging
from kueue_tas.runtime.manager import connect
from kueue_tas.runtime.metrics import Metrics
from kueue_tas.ungater.controller import Ungater

log = structlog.get_logger(__name__)


async def serve(settings: Settings) -> int:
    api = await connect(settings)
    metrics = Metrics()
    health = HealthServer(settings, metrics)
    elector = LeaderElector(api, settings)
    admitter: Admitter | None = None

    def informers_synced() -> tuple[bool, str]:
        if elector.enabled and not elector.is_leader:
            return True, "standby"
        ok = admitter is not None and admitter.synced()
        return ok, "informers synced" if ok else "informers not synced yet"

    health.add_readiness_check("informers", informers_synced)
    health.add_readiness_check("leader-election", leader_election_check(elector))
    await health.start()

    async def lead() -> None:
        nonlocal admitter
        admitter = Admitter(api, settings, metrics)
        ungater = Ungater(
            api, settings, metrics, admitter.pods, admitter.workloads, admitter.check_names, synced=admitter.synced
        )
        ungater.wire()  # before the informers start, so it sees every event
        await asyncio.gather(admitter.run(), ungater.run())

    loop = asyncio.get_running_loop()
    main = asyncio.current_task()
    assert main is not None
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, main.cancel)
    try:
        await elector.run(lead)
        return 0
    except LeaderElectionLost:
        log.error("leader_election_lost")
        return 1
    except asyncio.CancelledError:
        log.info("shutting_down")
        return 0
    finally:
        await health.stop()
        await api.close()


def run(args: argparse.Namespace) -> int:
    try:
        settings = Settings.load(args.config, **({"kubeconfig": args.kubeconfig} if args.kubeconfig else {}))
    except ConfigError as exc:
        print(f"error: {exc}")
        return 1
    configure_logging(settings.log_level, settings.log_format)
    return asyncio.run(serve(settings))
