"""The expanded (internal) form of a TopologyAssignment.

This is the shape the placement engine produces and the codec converts to and
from Kueue's compact v1beta2 wire form: the list of levels and, in the
scheduler's order, one entry per domain with its level values and pod count.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class DomainAssignment:
    """``count`` pods go to the domain identified by ``values`` (one per level)."""

    values: tuple[str, ...]
    count: int


@dataclass(frozen=True, slots=True)
class TopologyAssignment:
    levels: tuple[str, ...]
    domains: tuple[DomainAssignment, ...] = field(default=())

    @property
    def total(self) -> int:
        return sum(d.count for d in self.domains)

    def to_dict(self) -> dict[str, object]:
        """The v1beta1-like expanded JSON shape (used by ``plan -o json``)."""
        return {
            "levels": list(self.levels),
            "domains": [{"values": list(d.values), "count": d.count} for d in self.domains],
        }
