"""What a preemption holds and what a reservation keeps for a workload, as recorded on its
Workload (JSON annotations), read back the same way by the controller (after a restart or a
requeue), ``describe`` and the topology map: pure.

A record that cannot be read holds nothing: its workload waits as it would without one.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from kueue_tas.api import constants as c
from kueue_tas.api.object_base import parse_rfc3339
from kueue_tas.api.workload import Workload
from kueue_tas.capacity.feed import workload_key
from kueue_tas.capacity.reservation import Reservation
from kueue_tas.capacity.workload_placement import Domain

__all__ = ["Hold", "hold_from", "hold_text", "reservation_from", "reservation_text", "stamp"]


def stamp(at: float) -> str:
    """``at`` (epoch seconds) in RFC 3339, to the second."""
    return datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _epoch(text: str) -> float:
    return parse_rfc3339(text).timestamp()


def _domain_fields(d: Domain) -> dict[str, object]:
    return {"flavor": d.flavor, "level": d.level, "values": list(d.values)}


def _record(wl: Workload, key: str) -> dict[str, Any] | None:
    """The JSON object recorded under ``key`` on ``wl`` (None: absent, or not an object)."""
    raw = wl.metadata.annotations.get(key)
    if not raw:
        return None
    try:
        body = json.loads(raw)
    except ValueError:
        return None
    return body if isinstance(body, dict) else None


def _domain_of(body: dict[str, Any]) -> Domain:
    return Domain(str(body["flavor"]), str(body["level"]), tuple(str(v) for v in body["values"]))


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
    body = {**_domain_fields(hold.domain), "until": stamp(hold.until), "victims": list(hold.victims)}
    return json.dumps(body, separators=(",", ":"), sort_keys=True)


def hold_from(wl: Workload) -> Hold | None:
    """The hold recorded on ``wl``, None when there is none or it cannot be read (a hold never
    read is a domain never closed: the preemptor waits as it would without one)."""
    body = _record(wl, c.PREEMPTION_HOLD_ANNOTATION)
    if body is None:
        return None
    try:
        domain, until = _domain_of(body), _epoch(str(body["until"]))
        victims = tuple(str(v) for v in body.get("victims", ()))
    except (ValueError, KeyError, TypeError):
        return None
    return Hold(workload_key(wl), domain, until, victims)


def reservation_text(r: Reservation) -> str:
    body = {**_domain_fields(r.domain), "since": stamp(r.since)}
    if r.expected_fit is not None:
        body["expectedFit"] = stamp(r.expected_fit)
    return json.dumps(body, separators=(",", ":"), sort_keys=True)


def reservation_from(wl: Workload) -> Reservation | None:
    """The reservation recorded on ``wl``; None when there is none or it cannot be read (then
    nothing is reserved for it: it waits as it would without one)."""
    body = _record(wl, c.RESERVATION_ANNOTATION)
    if body is None:
        return None
    try:
        domain, since = _domain_of(body), _epoch(str(body["since"]))
        fit = body.get("expectedFit")
        expected = None if fit is None else _epoch(str(fit))
    except (ValueError, KeyError, TypeError):
        return None
    return Reservation(workload_key(wl), domain, since, expected)
