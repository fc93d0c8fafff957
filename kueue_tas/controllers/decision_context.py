"""What the controllers that decide on the live capacity model share: the admission (new
workloads) and the node repair (admitted workloads on failed nodes). One context is wired for
both, so their decisions are made one at a time (``lock``) against one model and written by
one writer."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime

from kueue_tas.capacity.live import LiveCapacity
from kueue_tas.controllers.check_entry_writes import AdmissionWriter
from kueue_tas.controllers.deps import ControllerDeps
from kueue_tas.controllers.domain_holds import DomainHolds
from kueue_tas.controllers.domain_reservations import DomainReservations
from kueue_tas.controllers.informers import OurChecks, SharedInformers
from kueue_tas.controllers.workload_annotations import NoOwnerReader, WorkloadAnnotations
from kueue_tas.kube.events import EventSink
from kueue_tas.runtime.config import Settings
from kueue_tas.runtime.metrics import Metrics
from kueue_tas.topology.features import FeatureGates


@dataclass(frozen=True, slots=True)
class DecisionContext:
    """``deps``: what every reconciler is built from (read through the context as ``informers``,
    ``checks``, ``events``, ``metrics``, ``settings``, ``gates``); ``flavors_of(check)``: the
    flavors our check governs; ``clock``: monotonic seconds; ``lock``: held by every decision,
    from reading the capacity to holding what it decided; ``workload_annotations``: where a
    workload-wide constraint is read (the Job's or JobSet's); ``wall``: the time of day (a
    preferred wait's deadline is one); ``holds``: domains cleared by a preemption, closed to
    every decision but their preemptor's; ``reservations``: domains reserved for workloads that
    waited too long, respected by every decision."""

    deps: ControllerDeps
    capacity: LiveCapacity
    flavors_of: Callable[[str], set[str]]
    writer: AdmissionWriter
    clock: Callable[[], float] = time.monotonic
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    workload_annotations: WorkloadAnnotations = field(default_factory=lambda: WorkloadAnnotations(NoOwnerReader()))
    wall: Callable[[], datetime] = field(default=lambda: datetime.now(UTC))
    holds: DomainHolds = field(default_factory=DomainHolds)
    reservations: DomainReservations = field(default_factory=DomainReservations)

    @property
    def informers(self) -> SharedInformers:
        return self.deps.informers

    @property
    def checks(self) -> OurChecks:
        return self.deps.checks

    @property
    def events(self) -> EventSink:
        return self.deps.events

    @property
    def metrics(self) -> Metrics:
        return self.deps.metrics

    @property
    def settings(self) -> Settings:
        return self.deps.settings

    @property
    def gates(self) -> FeatureGates:
        return self.deps.gates
