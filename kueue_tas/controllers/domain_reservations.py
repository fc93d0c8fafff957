"""Domains reserved for workloads that waited too long for one (``capacity.reservation``).

A reservation closes its domain to every placement that would delay its holder
(``place_respecting``), until the holder is placed, is deleted, finishes, or the reservation
times out. It is recorded on the holder's Workload (``capacity.domain_records``) so that
Kueue's requeues and a restart of the controller keep it; the registry here is rebuilt from
those records as the informer delivers them.
"""

from __future__ import annotations

from collections.abc import Iterable

from kueue_tas.capacity.reservation import Reservation

__all__ = ["DomainReservations"]


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
