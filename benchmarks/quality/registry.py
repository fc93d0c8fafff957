"""The policies the command line offers, by name, the baseline first."""

from __future__ import annotations

from collections.abc import Callable

from .policies import BASELINE, KueueExact, Policy
from .topology_policies import Both, Preempt, Reserve

POLICIES: dict[str, Callable[[], Policy]] = {
    BASELINE: KueueExact,
    Reserve.name: Reserve,
    Preempt.name: Preempt,
    Both.name: Both,
}


def available() -> list[str]:
    return list(POLICIES)
