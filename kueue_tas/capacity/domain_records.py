"""What a preemption holds and what a reservation keeps for a workload, as recorded on its
Workload (JSON annotations), read back the same way by the controller (after a restart or a
requeue), ``describe`` and the topology map: pure.

A record that cannot be read holds nothing: its workload waits as it would without one.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime

from kueue_tas.api import constants as c
from kueue_tas.api.workload import Workload
from kueue_tas.capacity.feed import workload_key
from kueue_tas.capacity.reservation import Reservation
from kueue_tas.capacity.workload_placement import Domain

__all__ = ["Hold", "hold_from", "hold_text", "reservation_from", "reservation_text", "stamp"]


def stamp(at: float) -> str:
    """``at`` (epoch seconds) in RFC 3339, to the second."""
    return datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _epoch(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


@dataclass(frozen=True, slots=True)
class Hold:
    """``domain`` held for ``preemptor`` until ``until`` (epoch seconds); ``victims``: the
    workloads told to leave it."""

    preemptor: str
    domain: Domain
    until: float
    victims: tuple[str, ...] = ()


def hold_text(hold: Hold) -> str:
    """The annotation value recording ``hold`` on its preemptor."""
    d = hold.domain
    body = {
        "flavor": d.flavor,
        "level": d.level,
        "values": list(d.values),
        "until": stamp(hold.until),
        "victims": list(hold.victims),
    }
    return json.dumps(body, separators=(",", ":"), sort_keys=True)


def hold_from(wl: Workload) -> Hold | None:
    """The hold recorded on ``wl``, None when there is none or it cannot be read (a hold never
    read is a domain never closed: the preemptor waits as it would without one)."""
    raw = wl.metadata.annotations.get(c.PREEMPTION_HOLD_ANNOTATION)
    if not raw:
        return None
    try:
        body = json.loads(raw)
        domain = Domain(str(body["flavor"]), str(body["level"]), tuple(str(v) for v in body["values"]))
        until = _epoch(str(body["until"]))
        victims = tuple(str(v) for v in body.get("victims", ()))
    except (ValueError, KeyError, TypeError):
        return None
    return Hold(workload_key(wl), domain, until, victims)


def reservation_text(r: Reservation) -> str:
    d = r.domain
    body: dict[str, object] = {"flavor": d.flavor, "level": d.level, "values": list(d.values), "since": stamp(r.since)}
    if r.expected_fit is not None:
        body["expectedFit"] = stamp(r.expected_fit)
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
