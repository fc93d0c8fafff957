"""The capacity gauges: free capacity per topology domain (``kueue_tas_domain_free``).

Computed from the live model's snapshots (no API calls): after decisions (coalesced: at most
once per ``min_interval`` seconds, or per ten times the last publication's duration when that
is longer) and every ``period`` seconds, which also catches node and non-TAS pod changes.
"""

from __future__ import annotations

import asyncio
import contextlib
import time

import structlog

from kueue_tas.capacity.live import LiveCapacity
from kueue_tas.runtime.metrics import Metrics
from kueue_tas.topology.free import domain_free

log = structlog.get_logger(__name__)


def publish_domain_free(metrics: Metrics, capacity: LiveCapacity, max_levels: int = 0) -> None:
    """Replace the free-capacity series with those of the flavors the model governs now;
    flavors (or topologies) no longer governed lose theirs. ``max_levels`` > 0 keeps only the
    top levels (the hostname level of a 10,000-node topology alone is ~40,000 series)."""
    published: set[tuple[str, str]] = set()
    for flavor, spec in capacity.flavors().items():
        snap = capacity.snapshot(flavor)
        if snap is None:
            continue
        free = domain_free(snap)
        if max_levels > 0:
            kept = set(snap.levels[:max_levels])
            free = {key: v for key, v in free.items() if key[0] in kept}
        metrics.set_domain_free(spec.topology, flavor, free)
        published.add((spec.topology, flavor))
    for topology, flavor in metrics.domain_free_keys() - published:
        metrics.set_domain_free(topology, flavor, {})


class CapacityGauges:
    """Keeps the free-capacity gauges current; ``touch()`` after a decision."""

    def __init__(
        self,
        metrics: Metrics,
        capacity: LiveCapacity,
        *,
        period: float = 10.0,
        min_interval: float = 1.0,
        max_levels: int = 0,
    ) -> None:
        self.metrics = metrics
        self.capacity = capacity
        self.period = period
        self.min_interval = min_interval
        self.max_levels = max_levels
        self._dirty = asyncio.Event()

    def touch(self) -> None:
        self._dirty.set()

    def publish(self) -> float:
        """Publish now; returns how long it took."""
        started = time.perf_counter()
        try:
            publish_domain_free(self.metrics, self.capacity, self.max_levels)
        except Exception:  # a gauge must never take the controller down
            log.exception("domain_free_metrics_failed")
        return time.perf_counter() - started

    async def run(self) -> None:
        while True:
            self._dirty.clear()
            took = self.publish()
            # Keep the gauges under ~10% of the event loop on very large topologies.
            pause = max(self.min_interval, 10 * took)
            await asyncio.sleep(pause)
            if not self._dirty.is_set():
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._dirty.wait(), max(self.period - pause, 0.0))
