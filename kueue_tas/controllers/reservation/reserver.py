"""Reservations in the admission: every decision respects the domains reserved for others, and
a workload that has waited ``reservation_after_seconds`` for a domain while enough is free in
total gets one (``capacity.reservation``).

The view a decision respects is built from the informer's Workloads: each reservation's holder
and its requests (read from the holder's Workload: its own annotations stand for the
workload-wide constraint), and each admitted workload's expected end (its admission plus
``spec.maximumExecutionTimeSeconds``; none declared: unbounded). A reservation is decided under
the admission lock, like every decision, registered there, and recorded on its holder with the
holder's Retry entry (``RESERVATION_ANNOTATION``); the wait's start is recorded the first time
the workload does not fit (``WAITING_SINCE_ANNOTATION``). Both end when it is placed (the
assignment's write removes them), deleted, finished, or the reservation times out.

Never: reserve while the setting is 0 (the default), reserve for a workload that waits for
capacity as a whole rather than for an unfragmented domain, or hold more than the per-flavor
limits.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping

import structlog

from kueue_tas.api import constants as c
from kueue_tas.api.object_base import parse_rfc3339
from kueue_tas.api.workload import Workload
from kueue_tas.capacity.domain_records import reservation_from, reservation_text, stamp
from kueue_tas.capacity.feed import workload_key
from kueue_tas.capacity.reservation import (
    Occupant,
    Reservation,
    ReservationSettings,
    ReservationView,
    Waiting,
    due_reservations,
    still_holds,
)
from kueue_tas.capacity.workload_placement import PodSetInput, WorkloadRequests, workload_requests
from kueue_tas.controllers.decide import inputs_of
from kueue_tas.controllers.decision_context import DecisionContext

__all__ = ["Reserver", "stamp", "waiting_since"]

log = structlog.get_logger(__name__)


def waiting_since(wl: Workload) -> float | None:
    raw = wl.metadata.annotations.get(c.WAITING_SINCE_ANNOTATION)
    if not raw:
        return None
    try:
        return parse_rfc3339(raw).timestamp()
    except ValueError:
        return None


class _OnFirstRead(Mapping[str, Occupant]):
    """The occupants, read from the informer and the capacity model only when a decision gets
    that far: most decisions fit with the reserved domains closed, or stop before the domain
    choice, and never look (reading them is linear in the admitted workloads)."""

    def __init__(self, read: Callable[[], dict[str, Occupant]]) -> None:
        self._read = read
        self._got: dict[str, Occupant] | None = None

    def _all(self) -> dict[str, Occupant]:
        if self._got is None:
            self._got = self._read()
        return self._got

    def __getitem__(self, key: str) -> Occupant:
        return self._all()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._all())

    def __len__(self) -> int:
        return len(self._all())


class Reserver:
    """See the module's note; the reservations live on the decision context."""

    def __init__(self, ctx: DecisionContext) -> None:
        self._ctx = ctx
        # Each holder's requests as its last decision read them: between our Retry and Kueue's
        # requeue its Workload carries no admission, so no flavor says what it needs.
        self._decided_requests: dict[str, WorkloadRequests] = {}

    @property
    def enabled(self) -> bool:
        return self._ctx.settings.reservation_after_seconds > 0

    def _settings(self) -> ReservationSettings:
        s = self._ctx.settings
        return ReservationSettings(
            reserve_after_s=s.reservation_after_seconds,
            timeout_s=s.reservation_timeout_seconds,
            max_per_flavor=s.reservations_per_flavor,
            max_without_runtimes=s.reservations_without_runtimes,
        )

    def now(self) -> float:
        return self._ctx.wall().timestamp()

    def observe(self, wl: Workload) -> None:
        key = workload_key(wl)
        book = self._ctx.reservations
        if wl.is_finished or self._placed(wl):
            ended = book.release(key)
            if ended is not None:
                self._ended(ended, "gone" if wl.is_finished else "placed")
            return
        # A copy without the record does not end a reservation: it may predate our write of it.
        recorded = reservation_from(wl)
        if recorded is None or book.of(key) is not None or self._timed_out(recorded):
            return
        # Only what this controller could have made (the admission policy kueue-tas-records keeps
        # everyone else from writing it; this is the second line): reservations on, within the
        # per-flavor limit.
        flavor = recorded.domain.flavor
        on_flavor = sum(1 for r in book.all() if r.domain.flavor == flavor)
        if not self.enabled or on_flavor >= self._ctx.settings.reservations_per_flavor:
            log.warning("reservation_ignored", workload=key, why="not one this controller would make")
            return
        book.add(recorded)

    def forget(self, key: str) -> None:
        ended = self._ctx.reservations.release(key)
        if ended is not None:
            self._ended(ended, "gone")

    def _timed_out(self, r: Reservation) -> bool:
        return self.now() - r.since >= self._ctx.settings.reservation_timeout_seconds

    def _ended(self, r: Reservation, end: str) -> None:
        held = self.now() - r.since
        self._ctx.metrics.record_reservation_end(end, held)
        log.info("reservation_ended", workload=r.holder, end=end, held_seconds=round(held, 1))

    def _placed(self, wl: Workload) -> bool:
        ours = self._ctx.checks.names()
        return wl.is_admitted and any(
            st.name in ours and st.state == c.CHECK_STATE_READY for st in wl.status.admission_checks
        )

    def _occupants(self) -> dict[str, Occupant]:
        capacity = self._ctx.capacity
        out: dict[str, Occupant] = {}
        for wl in self._ctx.informers.workloads.store.values():
            key = workload_key(wl)
            if not capacity.holds(key):
                continue
            since = wl.admitted_at
            runtime = wl.spec.maximum_execution_time_seconds
            end = since.timestamp() + runtime if since is not None and runtime is not None else None
            pods = sum(e.assignment.total for e in capacity.entries(key))
            out[key] = Occupant(key, end, pods)
        return out

    def _requests_of(self, r: Reservation, check_flavors: set[str]) -> WorkloadRequests | None:
        """What the holder needs: from its admission when Kueue holds quota for it, else as its
        last decision read them, else (after a restart, while it waits for quota) every PodSet of
        its spec on the reserved flavor; None when none of these can be read (then nothing but
        backfill enters its domain)."""
        wl = self._ctx.informers.workloads.store.get(r.holder)
        if wl is None:
            return None
        inputs = inputs_of(wl, check_flavors)
        if not inputs:
            decided = self._decided_requests.get(r.holder)
            if decided is not None:
                return decided
            inputs = [
                PodSetInput(ps.name, ps.count, ps.template, r.domain.flavor, topology_field=ps.topology_request)
                for ps in wl.spec.pod_sets
            ]
        got = workload_requests(
            inputs,
            self._ctx.capacity,
            prefix=self._ctx.settings.annotation_prefix,
            gates=self._ctx.gates,
            workload_annotations=wl.metadata.annotations,
        )
        return got if isinstance(got, WorkloadRequests) else None

    def view(self, wl: Workload, check_flavors: set[str]) -> ReservationView | None:
        """What ``wl``'s decision respects now; None when nothing is reserved for others."""
        book = self._ctx.reservations
        now = self.now()
        for gone in book.expire(now, self._ctx.settings.reservation_timeout_seconds):
            self._ended(gone, "expired")
        for ended in set(self._decided_requests) - set(book.holders()):
            del self._decided_requests[ended]
        key = workload_key(wl)
        others = tuple(r for r in book.all() if r.holder != key)
        if not others:
            return None
        holders = {r.holder: self._requests_of(r, check_flavors) for r in others}
        runtime = wl.spec.maximum_execution_time_seconds
        return ReservationView(
            key,
            others,
            {k: v for k, v in holders.items() if v is not None},
            _OnFirstRead(self._occupants),
            now,
            float(runtime) if runtime is not None else None,
        )

    def consider(self, wl: Workload, requests: WorkloadRequests, since: float) -> dict[str, str]:
        """Under the admission lock, for ``wl`` which does not fit now and has waited ``since``
        then: keep or give up its reservation, or make one (registered on return); the marks its
        Retry records (a new reservation's record)."""
        if not self.enabled:
            return {}
        key = workload_key(wl)
        now = self.now()
        book = self._ctx.reservations
        marks = self._reserve(wl, key, requests, since, now)
        if book.of(key) is not None:
            self._decided_requests[key] = requests  # what its domain is kept for, while it holds one
        return marks

    def _reserve(self, wl: Workload, key: str, requests: WorkloadRequests, since: float, now: float) -> dict[str, str]:
        """``consider``'s choice: keep or give up ``wl``'s reservation, or make one."""
        marks: dict[str, str] = {}
        book = self._ctx.reservations
        held = book.of(key)
        if held is not None:
            if still_holds(requests, self._ctx.capacity, held, _OnFirstRead(self._occupants), gates=self._ctx.gates):
                return marks
            # A node of it went away or usage nothing will end fills it: kept, it would only keep
            # others out. Another domain may be chosen at once (the wait counts from its start).
            book.release(key)
            self._ended(held, "unfit")
        else:
            recorded = reservation_from(wl)
            if recorded is not None and self._timed_out(recorded):
                # Its reservation timed out and its wait goes on (the record stays until it is
                # placed): reserving again at once would make the timeout a no-op.
                return marks
        runtime = wl.spec.maximum_execution_time_seconds
        waiting = Waiting(key, requests, since, float(runtime) if runtime is not None else None)
        added = due_reservations(
            [waiting],
            self._ctx.capacity,
            book.all(),
            _OnFirstRead(self._occupants),
            now,
            self._settings(),
            gates=self._ctx.gates,
        )
        if not added:
            return marks
        (reservation,) = added
        book.add(reservation)
        self._ctx.metrics.reservations_made_total.inc()
        marks[c.RESERVATION_ANNOTATION] = reservation_text(reservation)
        log.info(
            "reservation_made",
            workload=key,
            domain=list(reservation.domain.values),
            expected_fit=reservation.expected_fit,
        )
        return marks
