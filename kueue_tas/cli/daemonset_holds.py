"""Which DaemonSet holds what on which node, for ``capacity`` and ``describe``: the reservations
of ``capacity.daemonsets`` (a DaemonSet's pod not bound yet), each with its requests and the time
it is held from and until (RFC 3339; none when the objects carry no creation time)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from itertools import groupby
from typing import Any

from kueue_tas.capacity.daemonsets import Reservation
from kueue_tas.cli.render import format_amount

# Nodes named per DaemonSet in the text form; the JSON form lists every reservation.
SHOWN_NODES = 8


def rfc3339(at: float | None) -> str | None:
    return None if at is None else datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def requests_text(usage: Iterable[tuple[str, int]]) -> str:
    return ", ".join(f"{name} {format_amount(name, value)}" for name, value in sorted(usage))


def holds_json(held: Sequence[Reservation]) -> list[dict[str, Any]]:
    return [
        {
            "daemonSet": r.daemonset,
            "node": r.node,
            "requests": dict(sorted(r.usage.items())),
            "since": rfc3339(r.since),
            "until": rfc3339(r.until),
        }
        for r in held
    ]


def holds_lines(held: Sequence[Reservation], indent: str = "  ") -> list[str]:
    """One line per DaemonSet (its nodes, requests and time span), under a heading; [] for none."""
    if not held:
        return []
    out = [f"{indent}DaemonSet reservations (capacity held for daemon pods not bound yet):"]
    for key, group in groupby(sorted(held, key=lambda r: (r.daemonset, r.node)), key=lambda r: r.daemonset):
        rows = list(group)
        starts = [r.since for r in rows if r.since is not None]
        ends = [r.until for r in rows if r.until is not None]
        since = min(starts) if len(starts) == len(rows) else None
        until = max(ends) if len(ends) == len(rows) else None
        names = ", ".join(r.node for r in rows[:SHOWN_NODES]) + (
            f" and {len(rows) - SHOWN_NODES} more" if len(rows) > SHOWN_NODES else ""
        )
        when = f"since {rfc3339(since)}" if since is not None else "no creation time"
        when += f", until {rfc3339(until)} at the latest" if until is not None else ", no time limit"
        out.append(f"{indent}  {key}: {requests_text(rows[0].usage.items())} on {len(rows)} node(s) ({names}); {when}")
    return out
