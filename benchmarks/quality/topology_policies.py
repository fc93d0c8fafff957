"""Issue 31's policies, calling the product's pure modules: reservations
(``kueue_tas.capacity.reservation``), topology-driven preemption (``kueue_tas.capacity.preemption``)
and both.

* ``reserve``: before each pass, reservations whose holder started or that expired end, and
  ``due_reservations`` adds new ones. It is handed the waiting jobs one at a time in queue order
  (priority, then arrival), skipping those whose GPUs are not free in total (they cannot be
  fragmented) and those it refused since the last start or end: the module's own order, oldest
  first, whenever priorities are equal and nobody was evicted (an evicted job waits since its
  eviction but keeps its place in the queue). Every placement is
  ``place_respecting`` (reserved domains closed to others, but for backfill and entrants that
  leave the holder room). Occupants' expected ends are their start plus their declared
  maximum runtime (none with ``--no-runtimes``).
* ``preempt``: a job that does not fit although enough GPUs are free in total (it would hold
  quota: the cluster's quota is its GPUs) asks ``find_preemption`` for the cheapest victims
  among running jobs of strictly lower priority (their work: GPUs x hours run); they are
  evicted, lose their work and wait again in their place in the queue, and the job is placed
  at once. Without ``--priorities`` no job has a lower-priority victim, so it is kueue-exact.
  Kueue's own preemption for quota is not modelled (nor in the baseline).
* ``both``: reservations, and a reservation's holder that has waited ``preempt_after_s`` may
  preempt as above (issue 31: the prototype's best balance), unless the domain it would clear
  is reserved for another.

The simulator's clock is hours; the modules take epoch seconds, so hours x 3600 is passed.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from kueue_tas.capacity.preemption import Candidate, find_preemption
from kueue_tas.capacity.reservation import (
    Occupant,
    Reservation,
    ReservationSettings,
    Waiting,
    due_reservations,
    expired,
    place_respecting,
)
from kueue_tas.capacity.workload_placement import Domain, WorkloadPlacement

from .policies import KueueExact
from .shapes import FLAVOR, GPU

if TYPE_CHECKING:
    from .sim import JobRecord, Sim

HOUR = 3600.0
MAX_VICTIMS = 8  # per preemption (find_preemption's default)
PREEMPT_AFTER_S = 1800.0  # both: a holder waits this long (from its arrival or eviction) before it may preempt


def _seconds(hours: float | None) -> float | None:
    return None if hours is None else hours * HOUR


class Preempt(KueueExact):
    name = "preempt"

    def __init__(self) -> None:
        self._fruitless: dict[Hashable, int] = {}  # (request, priority) -> the sim version a search found nothing at

    def blocked(self, job: JobRecord, sim: Sim) -> bool:
        return self.preempt_for(job, sim)

    def preempt_for(self, job: JobRecord, sim: Sim, refuse: frozenset[Domain] = frozenset()) -> bool:
        """Evict the cheapest victims that let ``job`` fit (not into ``refuse``); False: none."""
        if job.job.gpus > sim.free_gpus:
            return False  # it would not hold quota
        key = (job.signature, job.job.priority, refuse)
        if self._fruitless.get(key) == sim.version:
            return False  # nothing started or ended since a search found nothing
        candidates = [
            Candidate(r.key, r.job.priority, r.job.gpus * (sim.now - r.started))
            for r in sim.running.values()
            if r.job.priority < job.job.priority and r.started is not None
        ]
        found = find_preemption(job.requests, sim.capacity, candidates, max_victims=MAX_VICTIMS) if candidates else None
        if found is None or found.domain in refuse:
            self._fruitless[key] = sim.version
            return False
        by_key = {r.key: r for r in sim.running.values()}
        sim.evict(by_key[c.key] for c in found.victims)
        return True


class Reserve(KueueExact):
    name = "reserve"

    def __init__(self, settings: ReservationSettings | None = None) -> None:
        self.settings = settings or ReservationSettings()
        self.reservations: list[Reservation] = []
        self._occupants: dict[str, Occupant] = {}
        self._not_due: dict[Hashable, int] = {}  # (request, declared) -> the sim version it got no reservation at
        self._idle: tuple[int, int] = (-1, 0)  # (sim version, reserved GPUs free then)
        self._leaves: dict[Domain, npt.NDArray[np.int64]] = {}  # reserved domain -> its leaves

    def begin_pass(self, sim: Sim) -> None:
        now = sim.now * HOUR
        waiting = {r.key: r for r in sim.queue}
        gone = set(expired(self.reservations, now, self.settings))
        kept = [r for r in self.reservations if r.holder in waiting and r not in gone]
        changed = len(kept) != len(self.reservations)
        self.reservations = kept
        holders = {r.holder for r in kept}
        for rec in sim.queue:
            if len(self.reservations) >= self.settings.max_per_flavor:
                break
            if rec.key in holders or rec.job.gpus > sim.free_gpus or rec.queued_since is None:
                continue  # holds one, or could not be fragmented: its GPUs are not free in total
            since = rec.queued_since * HOUR
            if now - since < self.settings.reserve_after_s:
                continue
            memo = (rec.signature, rec.job.declared)
            if self._not_due.get(memo) == sim.version:
                continue
            waiting_one = Waiting(rec.key, rec.requests, since, _seconds(rec.job.declared))
            added = due_reservations(
                [waiting_one], sim.capacity, self.reservations, self._occupants, now, self.settings
            )
            if added:
                self.reservations += added
                changed = True
            else:
                self._not_due[memo] = sim.version
        if changed:
            sim.invalidate()
            self._idle = (-1, 0)

    def place(self, job: JobRecord, sim: Sim) -> WorkloadPlacement:
        if not self.reservations:
            return super().place(job, sim)
        holders = {rec.key: rec.requests for rec in sim.queue if any(r.holder == rec.key for r in self.reservations)}
        placed, entered = place_respecting(
            job.requests,
            sim.capacity,
            job.key,
            self.reservations,
            holders,
            self._occupants,
            now=sim.now * HOUR,
            runtime_s=_seconds(job.job.declared),
        )
        if entered is not None and placed.fits:
            sim.invalidate()  # an entrant changes who occupies a reserved domain: other answers may change
        return placed

    def memo_key(self, job: JobRecord) -> Hashable:
        if not self.reservations:
            return job.signature
        # Backfill depends on the declared runtime; a holder's own domain is open to it alone.
        holder = any(r.holder == job.key for r in self.reservations)
        return (job.signature, job.job.declared, job.key if holder else None)

    def started(self, job: JobRecord, placement: WorkloadPlacement, sim: Sim) -> None:
        ends = None if job.job.declared is None else (sim.now + job.job.declared) * HOUR
        self._occupants[job.key] = Occupant(job.key, ends, job.job.pods)
        if any(r.holder == job.key for r in self.reservations):
            self.reservations = [r for r in self.reservations if r.holder != job.key]
            sim.invalidate()
            self._idle = (-1, 0)

    def ended(self, job: JobRecord, sim: Sim) -> None:
        self._occupants.pop(job.key, None)

    def reserved_idle_gpus(self, sim: Sim) -> int:
        if not self.reservations:
            return 0
        if self._idle[0] == sim.version:
            return self._idle[1]
        snap = sim.capacity.snapshot(FLAVOR)
        assert snap is not None
        left = snap.capacity.left()[:, snap.capacity.columns[GPU]]
        idle = 0
        for r in self.reservations:
            leaves = self._leaves.get(r.domain)
            if leaves is None:
                width = len(r.domain.values)
                inside = [i for i, values in enumerate(snap.tree.leaves.values) if values[:width] == r.domain.values]
                leaves = self._leaves[r.domain] = np.asarray(inside, dtype=np.int64)
            idle += int(left[leaves].sum())
        self._idle = (sim.version, idle)
        return idle


class Both(Reserve):
    name = "both"

    def __init__(self, settings: ReservationSettings | None = None) -> None:
        super().__init__(settings)
        self._preempt = Preempt()

    def blocked(self, job: JobRecord, sim: Sim) -> bool:
        mine = [r for r in self.reservations if r.holder == job.key]
        if not mine or job.queued_since is None or (sim.now - job.queued_since) * HOUR < PREEMPT_AFTER_S:
            return False
        others = frozenset(r.domain for r in self.reservations if r.holder != job.key)
        return self._preempt.preempt_for(job, sim, refuse=others)
