"""What ``kueue-tas describe workload`` shows about one Workload, as plain data (see ``describe``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kueue_tas.api import constants as c
from kueue_tas.api.object_base import Condition
from kueue_tas.capacity.daemonsets import Reservation
from kueue_tas.capacity.pod_counts import PodCounts
from kueue_tas.capacity.trial_placement import PodSetTrial

SHOWN_CONDITIONS = (c.CONDITION_QUOTA_RESERVED, c.CONDITION_ADMITTED, c.CONDITION_EVICTED, c.CONDITION_FINISHED)


@dataclass(frozen=True, slots=True)
class DomainStatus:
    values: tuple[str, ...]  # as in the assignment
    path: tuple[str, ...] | None  # along the Topology's levels; None when unknown
    assigned: int
    bound: int = 0
    pending: int = 0


@dataclass
class PodSetStatus:
    name: str
    count: int
    flavor: str | None
    topology: str | None
    request: dict[str, Any] | None
    topology_levels: tuple[str, ...]
    levels: tuple[str, ...]
    level_names: Mapping[str, str]  # label -> the Topology's name for it (``kueue-tas.io/level-names``)
    domains: list[DomainStatus] | None
    pods: PodCounts
    message: str
    # With no assignment in force: placing it now on the cluster just read (``trial_placement``),
    # where it would go or why not; None when not tried (admitted, finished, or not asked for).
    trial: PodSetTrial | None = None


@dataclass(frozen=True, slots=True)
class CheckStatus:
    name: str
    state: str
    message: str
    last_transition_time: str | None


@dataclass(frozen=True, slots=True)
class EventView:
    time: str
    type: str
    reason: str
    source: str
    message: str
    count: int = 1


@dataclass
class WorkloadDescription:
    namespace: str
    name: str
    uid: str
    queue: str | None
    cluster_queue: str | None
    conditions: dict[str, Condition]
    checks: list[CheckStatus]
    podsets: list[PodSetStatus]
    notes: list[str] = field(default_factory=list)
    events: list[EventView] = field(default_factory=list)
    # Why the Topology no longer enforces the placement ([]: it does, or nothing is placed).
    placement_not_enforced: list[str] = field(default_factory=list)
    # Placing it now (a trial): what DaemonSets hold for pods not bound yet on the nodes of its
    # flavors (capacity.daemonsets), so a "does not fit" can be traced to them.
    daemonset_reservations: list[Reservation] = field(default_factory=list)
