"""Domains reserved for workloads that waited too long for one (``capacity.reservation``).

A reservation closes its domain to every placement that would delay its holder
(``place_respecting``), until the holder is placed, is deleted, finishes, or the reservation
times out. It is recorded on the holder's Workload (``RESERVATION_ANNOTATION``, JSON) so that
Kueue's requeues and a restart of the controller keep it; the registry here is rebuilt from
those records as the informer delivers them.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from datetime import UTC, datetime

from kueue_tas.api import constants as c
from kueue_tas.api.workload import Workload
from kueue_tas.capacity.feed import workload_key
from kueue_tas.capacity.reservation import Reservation
from kueue_tas.capacity.workload_placement import Domain

__all__ = ["DomainReservations", "reservation_from", "reservation_text"]


def _stamp(at: float) -> str:
    return datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _epoch(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def reservation_text(r: Reservation) -> str:
    d = r.domain
    body: dict[str, object] = {"flavor": d.flavor, "level": d.level, "values": list(d.values), "since": _stamp(r.since)}
    if r.expected_fit is not None:
        body["expectedFit"] = _stamp(r.expected_fit)
    return json.dumps(body, separators=(",", ":"), sort_keys=True)


def reservation_from(wl: Workload) -> Reservation | None:
    """The reservation recorded on ``wl``; None when there is none or it cannot be read (then
    nothing is reserved for it: it waits as it would without one)."""
    raw = wl.metadata.annotations.get(c.RESERVATION_ANNOTATION)
    if not raw:
        return None
    try:
        body = json.loads(raw)
        domain = Domain(str(body["flavor"]), str(body["level"]), tuple(str(v) for v in body["values"]))
        since = _epoch(str(body["since"]))
        fit = body.get("expectedFit")
        expected = None if fit is None else _epoch(str(fit))
    except (ValueError, KeyError, TypeError):
        return None
    return Reservation(workload_key(wl), domain, since, expected)


class DomainReservations:
    """The reservations in force, by holder."""

    def __init__(self) -> None:
        self._by_holder: dict[str, Reservation] = {}

    def add(self, r: Reservation) -> None:
        self._by_holder[r.holder] = r

    def release(self, holder: str) -> Reservation | None:
        return self._by_holder.pop(holder, None)

    def of(self, holder: str) -> Reservation | None:
        return self._by_holder.get(holder)

    def all(self) -> list[Reservation]:
        return list(self._by_holder.values())

    def expire(self, now: float, timeout_s: float) -> list[Reservation]:
        gone = [r for r in self._by_holder.values() if now - r.since >= timeout_s]
        for r in gone:
            del self._by_holder[r.holder]
        return gone

    def holders(self) -> Iterable[str]:
        return tuple(self._by_holder)
