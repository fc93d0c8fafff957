"""The capacity gauges: free capacity per topology domain (``kueue_tas_domain_free``), and free
slots: pods of the configured shapes that still fit per domain (``kueue_tas_domain_free_slots``,
at the chosen levels) and the completely free domains per level (``kueue_tas_free_domains``).

Computed from the live model's snapshots (no API calls): after decisions (coalesced: at most
once per ``min_interval`` seconds, or per ten times the last publication's duration when that
is longer) and every ``period`` seconds, which also catches node and non-TAS pod changes.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Sequence

import structlog

from kueue_tas.api.constants import HOSTNAME_LABEL
from kueue_tas.api.pod_shape import PodShape
from kueue_tas.capacity.live import LiveCapacity
from kueue_tas.runtime.config import Settings
from kueue_tas.runtime.metrics import Metrics
from kueue_tas.topology.engine import TopologySnapshot
from kueue_tas.topology.explain import domain_free, domain_label, level_fit

log = structlog.get_logger(__name__)


def publish_domain_free(
    metrics: Metrics, capacity: LiveCapacity, max_levels: int = 0, *, hostname_level: bool = False
) -> None:
    """Replace the free-capacity series with those of the flavors the model governs now;
    flavors (or topologies) no longer governed lose theirs. ``max_levels`` > 0 keeps only the
    top levels; the hostname level only with ``hostname_level`` (setting
    ``metrics_hostname_level``): at 10,000 nodes it alone is ~40,000 series, ~0.4 s a render."""
    published: set[tuple[str, str]] = set()
    for flavor, spec in capacity.flavors().items():
        snap = capacity.snapshot(flavor)
        if snap is None:
            continue
        free = domain_free(snap)
        kept = set(snap.levels[:max_levels] if max_levels > 0 else snap.levels)
        if not hostname_level:
            kept.discard(HOSTNAME_LABEL)
        if kept != set(snap.levels):
            free = {key: v for key, v in free.items() if key[0] in kept}
        metrics.set_domain_free(spec.topology, flavor, free)
        published.add((spec.topology, flavor))
    for topology, flavor in metrics.domain_free_keys() - published:
        metrics.set_domain_free(topology, flavor, {})


def slot_levels(snap: TopologySnapshot, chosen: Sequence[str] | None) -> set[str]:
    """The label keys of the levels whose domains get free-slot series: ``chosen`` (label keys
    or the Topology's names for its levels; levels this topology lacks are skipped), or, when
    None, every level but the hostname."""
    if chosen is None:
        return {level for level in snap.levels if level != HOSTNAME_LABEL}
    return {snap.level_names.label_of(level, snap.levels) for level in chosen} & set(snap.levels)


def free_slot_series(
    snap: TopologySnapshot, shapes: Sequence[PodShape], chosen: Sequence[str] | None = None
) -> tuple[dict[tuple[str, str, str], int], dict[tuple[str, str], int]]:
    """(level, domain, shape) -> pods that fit, for the levels ``slot_levels`` keeps, and
    (level, shape) -> free domains, for every level. Domains are named as in
    ``kueue_tas_domain_free`` (hosts by name, other domains by their path)."""
    tree = snap.tree
    kept = slot_levels(snap, chosen)
    names: dict[int, list[str]] = {}
    slots: dict[tuple[str, str, str], int] = {}
    free: dict[tuple[str, str], int] = {}
    for shape in shapes:
        for lvl, numbers in enumerate(level_fit(snap, shape)):
            free[(numbers.level, shape.text)] = int(numbers.free.sum())
            if numbers.level not in kept:
                continue
            if lvl not in names:
                names[lvl] = [domain_label(tree, lvl, values) for values in tree.levels[lvl].values]
            keys = [(numbers.level, name, shape.text) for name in names[lvl]]
            slots.update(zip(keys, numbers.fit.tolist(), strict=True))
    return slots, free


def publish_free_slots(
    metrics: Metrics, capacity: LiveCapacity, shapes: Sequence[PodShape], levels: Sequence[str] | None = None
) -> None:
    """Replace the free-slot series with those of the flavors the model governs now; flavors
    (or topologies) no longer governed lose theirs. Series: per topology and flavor, the sum
    over the kept levels of their domains x shapes, plus levels x shapes free-domain counts."""
    published: set[tuple[str, str]] = set()
    if shapes:
        for flavor, spec in capacity.flavors().items():
            snap = capacity.snapshot(flavor)
            if snap is None:
                continue
            slots, free = free_slot_series(snap, shapes, levels)
            metrics.set_free_slots(spec.topology, flavor, slots, free)
            published.add((spec.topology, flavor))
    for topology, flavor in metrics.free_slot_keys() - published:
        metrics.set_free_slots(topology, flavor, {}, {})


class CapacityGauges:
    """Keeps the free-capacity and free-slot gauges current; ``touch()`` after a decision."""

    def __init__(
        self,
        metrics: Metrics,
        capacity: LiveCapacity,
        *,
        period: float = 10.0,
        min_interval: float = 1.0,
        max_levels: int = 0,
        hostname_level: bool = False,
        shapes: Sequence[PodShape] = (),
        slot_levels: Sequence[str] | None = None,
    ) -> None:
        """``max_levels`` / ``hostname_level`` / ``shapes`` / ``slot_levels``: the settings
        ``metrics_domain_levels`` / ``metrics_hostname_level`` / ``free_slot_shapes`` /
        ``free_slot_levels``."""
        self.metrics = metrics
        self.capacity = capacity
        self.period = period
        self.min_interval = min_interval
        self.max_levels = max_levels
        self.hostname_level = hostname_level
        self.shapes = tuple(shapes)
        self.slot_levels = None if slot_levels is None else tuple(slot_levels)
        self._dirty = asyncio.Event()

    @classmethod
    def from_settings(cls, metrics: Metrics, capacity: LiveCapacity, settings: Settings) -> CapacityGauges:
        """The gauges as ``settings`` configure them (``metrics_domain_levels``,
        ``metrics_hostname_level``, ``free_slot_shapes``, ``free_slot_levels``)."""
        return cls(
            metrics,
            capacity,
            max_levels=settings.metrics_domain_levels,
            hostname_level=settings.metrics_hostname_level,
            shapes=settings.pod_shapes(),
            slot_levels=settings.free_slot_levels,
        )

    def touch(self) -> None:
        self._dirty.set()

    def publish(self) -> float:
        """Publish now; returns how long it took."""
        started = time.perf_counter()
        try:
            publish_domain_free(self.metrics, self.capacity, self.max_levels, hostname_level=self.hostname_level)
        except Exception:  # a gauge must never take the controller down
            log.exception("domain_free_metrics_failed")
        try:
            publish_free_slots(self.metrics, self.capacity, self.shapes, self.slot_levels)
        except Exception:
            log.exception("free_slot_metrics_failed")
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
