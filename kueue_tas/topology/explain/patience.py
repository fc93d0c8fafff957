"""Patience for preferred (pure): a PodSet that says
``kueue-tas.io/podset-preferred-topology-wait: 10m`` beside its preferred level is held, while
it does not fit in one domain of that level, for at most that long from the first decision that
held it; then it is placed by Kueue's preferred fall-back. Slurm's ``--switches=N@time`` is the
model; Kueue's preferred falls back at once.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from kueue_tas.topology.assignment import TopologyAssignment
from kueue_tas.topology.engine.snapshot import TopologySnapshot
from kueue_tas.topology.model import PodSetRequest


@dataclass(frozen=True, slots=True)
class Hold:
    """A PodSet held for its preferred level until ``until``."""

    podset: str
    count: int
    level: str
    until: datetime
    wait_seconds: float

    def message(self, shown: str) -> str:
        """``shown``: the level as the user reads it (its name when it has one)."""
        return (
            f'PodSet "{self.podset}": waiting until {self.until.strftime("%Y-%m-%dT%H:%M:%SZ")} for one domain of '
            f'level "{shown}" to hold all {self.count} pods (podset-preferred-topology-wait '
            f"{duration_text(self.wait_seconds)}); then it is placed over several domains as Kueue's preferred does"
        )


def duration_text(seconds: float) -> str:
    """``1h30m``, ``10m``, ``90s`` -> ``1m30s``: Go's way of writing a duration, whole seconds."""
    total = round(seconds)
    h, rest = divmod(total, 3600)
    m, s = divmod(rest, 60)
    text = (f"{h}h" if h else "") + (f"{m}m" if m else "") + (f"{s}s" if s else "")
    return text or "0s"


def spreads(snap: TopologySnapshot, request: PodSetRequest, assignment: TopologyAssignment) -> bool:
    """Whether a PodSet with a preferred wait is placed over several domains of its preferred
    level (so that it would be held while its wait lasts)."""
    t = request.topology
    if t is None or t.preferred is None or t.preferred_wait is None or t.preferred not in snap.levels:
        return False
    return len(snap.domains_at([assignment], t.preferred)) > 1


def hold(
    snap: TopologySnapshot,
    request: PodSetRequest,
    assignment: TopologyAssignment,
    started: datetime,
    now: datetime,
) -> Hold | None:
    """The hold of a placed PodSet with a wait, while its placement spreads over several domains
    of its preferred level and the wait since ``started`` is not over; else None."""
    t = request.topology
    if t is None or t.preferred is None or t.preferred_wait is None or not spreads(snap, request, assignment):
        return None
    until = started + timedelta(seconds=t.preferred_wait)
    return Hold(request.name, request.count, t.preferred, until, t.preferred_wait) if now < until else None


def wait_note(snap: TopologySnapshot, request: PodSetRequest, assignment: TopologyAssignment) -> str:
    """What ``plan`` says of a placed PodSet that the controller would hold first ("" if none)."""
    t = request.topology
    if t is None or t.preferred is None or t.preferred_wait is None or not spreads(snap, request, assignment):
        return ""
    return (
        f"held first for up to {duration_text(t.preferred_wait)} (podset-preferred-topology-wait) until one domain "
        f'of level "{snap.level_names.called(t.preferred)}" holds all {request.count} pods; '
        "placed as shown once the wait is over"
    )
