"""Domains cleared by a preemption, held for their preemptor.

Once victims are told to go, the domain they leave is closed to every other placement
(``place_workload(closed=...)``) until the preemptor is placed, is deleted, or the hold's time
runs out: the victims, requeued by Kueue, are placed elsewhere or wait with a message, and
never back into the domain they were evicted from (no cascade). A hold is recorded on the
preemptor's Workload (``capacity.domain_records``), so it survives the preemptor's own
requeues and a restart of the controller; the registry here is rebuilt from those records as
the informer delivers them.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable

from kueue_tas.capacity.domain_records import Hold
from kueue_tas.capacity.workload_placement import Domain

__all__ = ["DomainHolds"]


class DomainHolds:
    """The holds in force, by preemptor, and the rate limit of preemptions."""

    def __init__(self) -> None:
        self._holds: dict[str, Hold] = {}
        self._recent: deque[float] = deque()  # epoch seconds of the last minute's preemptions

    def add(self, hold: Hold) -> None:
        self._holds[hold.preemptor] = hold

    def release(self, preemptor: str) -> Hold | None:
        return self._holds.pop(preemptor, None)

    def held_for(self, preemptor: str, now: float) -> Hold | None:
        hold = self._holds.get(preemptor)
        return hold if hold is not None and hold.until > now else None

    def closed_for(self, key: str, now: float) -> list[Domain]:
        """The domains held for preemptors other than ``key``."""
        return [h.domain for p, h in self._holds.items() if p != key and h.until > now]

    def in_flight(self, now: float) -> set[str]:
        """Victims of holds in force: already told to go, never chosen twice."""
        return {v for h in self._holds.values() if h.until > now for v in h.victims}

    def expire(self, now: float) -> list[Hold]:
        gone = [h for h in self._holds.values() if h.until <= now]
        for h in gone:
            del self._holds[h.preemptor]
        return gone

    def all(self) -> Iterable[Hold]:
        return tuple(self._holds.values())

    def allow(self, now: float, per_minute: int) -> bool:
        """One more preemption is within ``per_minute`` (counted when allowed)."""
        while self._recent and now - self._recent[0] >= 60.0:
            self._recent.popleft()
        if len(self._recent) >= per_minute:
            return False
        self._recent.append(now)
        return True
