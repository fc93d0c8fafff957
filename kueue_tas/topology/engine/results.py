"""What the placement engine returns for each PodSet."""

from __future__ import annotations

from dataclasses import dataclass

from kueue_tas.topology.assignment import TopologyAssignment
from kueue_tas.topology.engine.why_not import WhyNot


@dataclass(frozen=True, slots=True)
class PodSetResult:
    """``assignment`` is None when the PodSet does not fit (``message`` says why)
    or was not placed at all because an earlier PodSet failed (empty message); ``why_not``
    holds the numbers of a "does not fit" message."""

    name: str
    assignment: TopologyAssignment | None
    message: str = ""
    why_not: WhyNot | None = None

    @property
    def fits(self) -> bool:
        return self.assignment is not None
