"""The expanded (internal) form of a TopologyAssignment.

This is the shape the placement engine produces and the codec converts to and
from Kueue's compact v1beta2 wire form: the list of levels and, in the
scheduler's order, one entry per domain with its level values and pod count.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import repeat
from typing import Any


@dataclass(frozen=True, slots=True)
class DomainAssignment:
    """``count`` pods go to the domain identified by ``values`` (one per level)."""

    values: tuple[str, ...]
    count: int


# DomainAssignment's slots, written directly: the frozen dataclass's __init__ goes through
# object.__setattr__ per field (and a Python frame per object), which dominated placing
# thousands of pods. Mapping the C-level calls over the pairs builds the same objects.
_SET_VALUES: Any = vars(DomainAssignment)["values"].__set__
_SET_COUNT: Any = vars(DomainAssignment)["count"].__set__


def domain_assignments(values: Sequence[tuple[str, ...]], counts: Sequence[int]) -> tuple[DomainAssignment, ...]:
    """``DomainAssignment(v, c)`` for each pair, equal to what the constructor builds."""
    doms = list(map(object.__new__, repeat(DomainAssignment, len(values))))
    deque(map(_SET_VALUES, doms, values), maxlen=0)
    deque(map(_SET_COUNT, doms, counts), maxlen=0)
    return tuple(doms)


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
