"""Reservations: a domain held for a workload that has waited too long for one.

Small workloads keep refilling racks as they free up, so a rack-sized workload can wait while
enough is free in total (kubernetes-sigs/kueue#10406; Slurm's backfill with reservations is
the reference). A reservation hides one domain from the engine for every workload that may
not use it (``place_workload(closed=...)``), so every placement is still Kueue's algorithm.

* ``fragmented``: the workload does not fit now, yet would if its pods could go anywhere: the
  capacity is free in total, only no domain holds it. Only such a workload is given a
  reservation; one waiting for capacity as a whole gains nothing from one, and reserving for
  it only moves the wait to smaller workloads (the prototype's failure on one-block clusters).
* ``choose_domain``: the domain at the workload's level where it will fit soonest: taking its
  occupants away in the order they are expected to end (declared runtimes; those without one
  last, larger first), the domain that makes room earliest, then with the fewest pods ending.
* ``due_reservations``: which waiting workloads get one now: the oldest first, after
  ``reserve_after_s``, at most ``max_per_flavor`` per flavor, and at most
  ``max_without_runtimes`` of those whose fit time is unknown (four runtime-less
  reservations collapsed the prototype's queue).
* ``place_respecting``: a placement that keeps other workloads' reservations: first with every
  reserved domain closed; else inside a reserved domain only as backfill (both declare
  runtimes and it ends before the holder is expected to fit) or when it does not delay the
  holder (no more occupants must end before the holder fits there than without it; while
  usage no occupant accounts for keeps the holder out, nothing enters but backfill). A
  workload without a declared runtime counts as unbounded: it enters only by leaving room.
* ``still_holds``: whether the reserved domain would still hold its holder once its occupants
  end (a node gone, or usage nothing will end: the holder gives such a domain up).
* ``expired``: reservations past ``timeout_s`` (a reservation also ends when its holder is
  placed or deleted: the caller's to drop).

Never: write, read a clock (``now`` comes in, epoch seconds) or hold state: the caller keeps
the reservations (recorded on the Workload, so they survive requeues and restarts).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from kueue_tas.capacity.domain_usage import domains_except, keys_by_domain
from kueue_tas.capacity.live import LiveCapacity
from kueue_tas.capacity.preemption import search_levels
from kueue_tas.capacity.rules import UsageEntry
from kueue_tas.capacity.workload_placement import Domain, WorkloadPlacement, WorkloadRequests, place_workload
from kueue_tas.topology.features import DEFAULT_GATES, FeatureGates
from kueue_tas.topology.model import TopologyRequest

__all__ = [
    "Occupant",
    "Reservation",
    "ReservationSettings",
    "ReservationView",
    "Waiting",
    "choose_domain",
    "due_reservations",
    "expired",
    "fragmented",
    "place_respecting",
    "still_holds",
]

_PROBE = "kueue-tas/reservation-probe"  # the key an entrant's trial usage is held under


@dataclass(frozen=True, slots=True)
class ReservationSettings:
    """``reserve_after_s``: how long a workload waits for a domain before one is reserved;
    ``timeout_s``: how long a reservation is held at most; ``max_per_flavor``: reservations
    per flavor at once; ``max_without_runtimes``: of those, how many may have no expected fit
    time (their occupants declare no runtime)."""

    reserve_after_s: float = 600.0
    timeout_s: float = 4 * 3600.0
    max_per_flavor: int = 4
    max_without_runtimes: int = 1


@dataclass(frozen=True, slots=True)
class Reservation:
    """``domain`` held for workload ``holder`` since ``since``; ``expected_fit``: when the holder
    is expected to fit there (its occupants' declared ends), None when unknown."""

    holder: str
    domain: Domain
    since: float
    expected_fit: float | None = None


@dataclass(frozen=True, slots=True)
class Occupant:
    """An admitted workload as reservations see it: ``expected_end`` (its admission plus its
    declared maximum runtime; None: unbounded) and its pod count."""

    key: str
    expected_end: float | None
    pods: int


@dataclass(frozen=True, slots=True)
class ReservationView:
    """What a placement for workload ``key`` must respect: the ``reservations`` in force, the
    requests of their holders and the admitted workloads' ends (``occupants``), at ``now``;
    ``runtime_s``: the workload's own declared maximum runtime."""

    key: str
    reservations: tuple[Reservation, ...]
    holder_requests: Mapping[str, WorkloadRequests]
    occupants: Mapping[str, Occupant]
    now: float
    runtime_s: float | None = None


@dataclass(frozen=True, slots=True)
class Waiting:
    """A workload waiting for a domain (it holds quota; our check cannot place it now) since
    ``since``; ``runtime_s``: its declared maximum runtime, if any."""

    key: str
    requests: WorkloadRequests
    since: float
    runtime_s: float | None = None


def fragmented(requests: WorkloadRequests, capacity: LiveCapacity, *, gates: FeatureGates = DEFAULT_GATES) -> bool:
    """It does not fit now, but its pods would if they could go anywhere (free in total)."""
    if place_workload(requests, capacity, gates=gates).fits:
        return False
    loose = WorkloadRequests(
        tuple(
            (ps, dataclasses.replace(r, topology=TopologyRequest(unconstrained=True), implied=False))
            for ps, r in requests.podsets
        )
    )
    return place_workload(loose, capacity, gates=gates).fits


def _end_order(o: Occupant) -> tuple[float, int, str]:
    return (math.inf if o.expected_end is None else o.expected_end, -o.pods, o.key)


def choose_domain(
    requests: WorkloadRequests,
    capacity: LiveCapacity,
    occupants: Mapping[str, Occupant],
    *,
    taken: Iterable[Domain] = (),
    gates: FeatureGates = DEFAULT_GATES,
) -> Reservation | None:
    """The domain (not in ``taken``) at the workload's level where it will fit soonest, as a
    Reservation with ``holder`` and ``since`` left for the caller (empty, 0); None when no
    domain would hold it even emptied of every occupant."""
    flavors = list(requests.by_flavor())
    if len(flavors) != 1:
        return None
    flavor = flavors[0]
    snap = capacity.snapshot(flavor)
    if snap is None:
        return None
    levels = search_levels(requests, snap.levels)
    if not levels:
        return None
    level = levels[0]
    depth = snap.tree.level_index(level)
    if depth is None:
        return None
    skip = {d.values for d in taken if d.flavor == flavor and d.level == level}
    by_domain = keys_by_domain(snap, capacity, occupants, flavor, depth)
    best: tuple[tuple[float, int, tuple[str, ...]], Reservation] | None = None
    for values in sorted(by_domain):
        if values in skip:
            continue
        ordered = sorted((occupants[k] for k in by_domain[values]), key=_end_order)
        others = domains_except(snap, Domain(flavor, level, values))
        ends = _first_room(requests, capacity, ordered, others, gates)
        if ends is None:
            continue
        leaving = ordered[:ends]
        fit_at = max((o.expected_end for o in leaving if o.expected_end is not None), default=None)
        unknown = any(o.expected_end is None for o in leaving)
        expected = None if unknown else fit_at
        score = (math.inf if expected is None else expected, sum(o.pods for o in leaving), values)
        if best is None or score < best[0]:
            best = (score, Reservation("", Domain(flavor, level, values), 0.0, expected))
    return None if best is None else best[1]


def _first_room(
    requests: WorkloadRequests,
    capacity: LiveCapacity,
    ordered: Sequence[Occupant],
    others: Sequence[Domain],
    gates: FeatureGates,
) -> int | None:
    """How many of ``ordered`` must end (the first n) before the workload fits in the one domain
    left open; None when not even all of them make room. Binary search: fitting is monotone in
    what ends."""

    def fits(n: int) -> bool:
        return place_workload(requests, capacity, gates=gates, without=[o.key for o in ordered[:n]], closed=others).fits

    if not fits(len(ordered)):
        return None
    lo, hi = 0, len(ordered)
    while lo < hi:
        mid = (lo + hi) // 2
        if fits(mid):
            hi = mid
        else:
            lo = mid + 1
    return lo


def expired(reservations: Iterable[Reservation], now: float, settings: ReservationSettings) -> list[Reservation]:
    return [r for r in reservations if now - r.since >= settings.timeout_s]


def due_reservations(
    waiting: Sequence[Waiting],
    capacity: LiveCapacity,
    reservations: Sequence[Reservation],
    occupants: Mapping[str, Occupant],
    now: float,
    settings: ReservationSettings,
    *,
    gates: FeatureGates = DEFAULT_GATES,
) -> list[Reservation]:
    """The reservations to add now (see the module's note), oldest waiting workload first."""
    held = list(reservations)
    holders = {r.holder for r in held}
    added: list[Reservation] = []
    for w in sorted(waiting, key=lambda w: (w.since, w.key)):
        if w.key in holders or now - w.since < settings.reserve_after_s:
            continue
        flavors = list(w.requests.by_flavor())
        if len(flavors) != 1:
            continue
        flavor = flavors[0]
        on_flavor = [r for r in held if r.domain.flavor == flavor]
        if len(on_flavor) >= settings.max_per_flavor:
            continue
        if not fragmented(w.requests, capacity, gates=gates):
            continue
        chosen = choose_domain(w.requests, capacity, occupants, taken=[r.domain for r in held], gates=gates)
        if chosen is None:
            continue
        unknown = sum(1 for r in on_flavor if r.expected_fit is None)
        if chosen.expected_fit is None and unknown >= settings.max_without_runtimes:
            continue
        reservation = Reservation(w.key, chosen.domain, now, chosen.expected_fit)
        held.append(reservation)
        holders.add(w.key)
        added.append(reservation)
    return added


def place_respecting(
    requests: WorkloadRequests,
    capacity: LiveCapacity,
    key: str,
    reservations: Sequence[Reservation],
    holder_requests: Mapping[str, WorkloadRequests],
    occupants: Mapping[str, Occupant],
    *,
    now: float,
    runtime_s: float | None = None,
    gates: FeatureGates = DEFAULT_GATES,
    closed: Sequence[Domain] = (),
) -> tuple[WorkloadPlacement, Reservation | None]:
    """Place ``key``'s ``requests`` keeping the other workloads' reservations (see the module's
    note); ``closed``: domains closed to it besides (a preemption's hold). Returns the placement
    and, when it goes into a reserved domain as backfill or beside the holder, that reservation
    (None otherwise)."""
    others = [r for r in reservations if r.holder != key]
    shut = [*closed, *(r.domain for r in others)]
    placed = place_workload(requests, capacity, gates=gates, closed=shut)
    if placed.fits or not others:
        return placed, None
    ends = None if runtime_s is None else now + runtime_s
    for r in sorted(others, key=lambda r: (r.since, r.holder)):
        if r.domain in closed:
            continue
        trial = place_workload(requests, capacity, gates=gates, closed=[d for d in shut if d != r.domain])
        if not trial.fits:
            continue
        if ends is not None and r.expected_fit is not None and ends <= r.expected_fit:
            return trial, r  # backfill: gone before the holder is expected to fit
        holder = holder_requests.get(r.holder)
        if holder is not None and not _delays_holder(holder, capacity, trial.usage(requests), r, occupants, gates):
            return trial, r
    return placed, None


def _delays_holder(
    holder: WorkloadRequests,
    capacity: LiveCapacity,
    entrant: tuple[UsageEntry, ...],
    reservation: Reservation,
    occupants: Mapping[str, Occupant],
    gates: FeatureGates,
) -> bool:
    """With the entrant in the reserved domain, more of its occupants must end (in the order
    they are expected to) before the holder fits there, or it never would."""
    inside = _occupants_in(capacity, reservation, occupants)
    if inside is None:
        return True
    ordered, others = inside
    before = _first_room(holder, capacity, ordered, others, gates)
    if before is None:
        # Usage no occupant accounts for (a deleted workload's terminating pods, a foreign pod)
        # keeps the holder out for now; it may go at any moment, and the entrant would then be in
        # the way. The holder's own next decision gives up a domain that stays like this
        # (``still_holds``).
        return True
    capacity.assume(_PROBE, entrant)
    try:
        after = _first_room(holder, capacity, ordered, others, gates)
    finally:
        capacity.forget(_PROBE)
    return after is None or after > before


def still_holds(
    holder: WorkloadRequests,
    capacity: LiveCapacity,
    reservation: Reservation,
    occupants: Mapping[str, Occupant],
    *,
    gates: FeatureGates = DEFAULT_GATES,
) -> bool:
    """The reserved domain would hold its holder once every occupant in it has ended (false when
    a node there went away or usage nothing will end fills it: the reservation is then no use)."""
    inside = _occupants_in(capacity, reservation, occupants)
    return inside is not None and _first_room(holder, capacity, *inside, gates) is not None


def _occupants_in(
    capacity: LiveCapacity, reservation: Reservation, occupants: Mapping[str, Occupant]
) -> tuple[list[Occupant], list[Domain]] | None:
    """The reserved domain's occupants in the order they are expected to end, and every other
    domain of its level (closed to the trial placements); None when its flavor or level is gone."""
    flavor, level = reservation.domain.flavor, reservation.domain.level
    snap = capacity.snapshot(flavor)
    depth = None if snap is None else snap.tree.level_index(level)
    if snap is None or depth is None:
        return None
    inside = keys_by_domain(snap, capacity, occupants, flavor, depth).get(reservation.domain.values, [])
    ordered = sorted((occupants[k] for k in inside), key=_end_order)
    return ordered, domains_except(snap, reservation.domain)
