"""The admission reconciler wired to hand-fed shared informers, recording fakes for its writes
and Events, and a cluster of four 8-GPU hosts in two racks under check ``tas`` (Topology
``topo``, flavor ``gpu``, ClusterQueue ``cq``). Shared by the defect regression tests and the
live hostile-input table."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import partial
from typing import Any

import builders as mk

from kueue_tas.api import constants as c
from kueue_tas.api.workload import Workload
from kueue_tas.capacity.live import LiveCapacity
from kueue_tas.controllers.admission import WorkloadAdmission
from kueue_tas.controllers.capacity_cache import CapacityCache
from kueue_tas.controllers.informers import OurChecks, SharedInformers
from kueue_tas.kube.events import ObjectRef
from kueue_tas.runtime.config import Settings
from kueue_tas.runtime.manager import Manager
from kueue_tas.runtime.metrics import Metrics
from kueue_tas.topology.free import domain_free

RACK = "example.com/rack"
HOST = c.HOSTNAME_LABEL
CHECK = "tas"
HOSTS = ("h1", "h2", "h3", "h4")
ALLOCATABLE = {"cpu": "16", "pods": "110", "nvidia.com/gpu": "8"}
T0 = "2026-01-01T00:00:00Z"

# Workload ns/wl: 8 one-GPU pods requiring a rack, quota reserved on ``gpu``, our check Pending.
workload = partial(
    mk.workload,
    "wl",
    8,
    {"kueue-tas.io/podset-required-topology": RACK},
    namespace="ns",
    uid="u1",
    resource_version="5",
    queue=None,
    admitted_flavor="gpu",
    check=CHECK,
    check_state="Pending",
    check_time=T0,
    conditions=[mk.condition("QuotaReserved", reason="QuotaReserved", message="", time=T0)],
)


@dataclass
class Writes:
    checks: list[dict[str, Any]] = field(default_factory=list)
    annotations: list[str] = field(default_factory=list)
    gated: list[set[str]] = field(default_factory=list)

    async def inject_gates(self, workload: Workload, podsets: set[str], gate: str) -> None:
        self.gated.append(set(podsets))

    async def write_annotation(self, workload: Workload, text: str) -> None:
        self.annotations.append(text)

    async def write_check(self, workload: Workload, entry: dict[str, Any]) -> None:
        self.checks.append(entry)

    async def read_workload(self, workload: Workload) -> Workload | None:
        return workload


@dataclass
class Events:
    seen: list[tuple[str, str, str, str]] = field(default_factory=list)  # (object, type, reason, message)

    async def emit_event(self, regarding: ObjectRef, *, reason: str, message: str, type: str = "Normal") -> bool:
        self.seen.append((f"{regarding.kind}/{regarding.name}", type, reason, message))
        return True


@dataclass
class Harness:
    informers: SharedInformers
    capacity: LiveCapacity
    admission: WorkloadAdmission
    writes: Writes
    events: Events
    metrics: Metrics

    def free_gpus(self) -> int:
        """Free GPUs over every host of ``gpu`` (0 when the flavor has no snapshot)."""
        snap = self.capacity.snapshot("gpu")
        if snap is None:
            return 0
        free = domain_free(snap)
        return sum(int(free[(HOST, h, "nvidia.com/gpu")]) for h in HOSTS)

    def add_workload(self, obj: dict[str, Any]) -> None:
        self.informers.workloads.handle_event("ADDED", obj)

    def modify_workload(self, obj: dict[str, Any]) -> None:
        self.informers.workloads.handle_event("MODIFIED", obj)


def harness(*, topology: bool = True) -> Harness:
    settings = Settings(leader_election=False)
    metrics = Metrics()
    informers = SharedInformers.register(Manager(None, settings, metrics), settings.annotation_prefix)
    checks = OurChecks(informers.checks.store, settings.controller_name)
    capacity = LiveCapacity()
    cache = CapacityCache(capacity, informers, checks)
    writes, events = Writes(), Events()
    admission = WorkloadAdmission(
        informers=informers,
        checks=checks,
        capacity=capacity,
        flavors_of=cache.flavors_of,
        writer=writes,
        events=events,
        metrics=metrics,
        settings=settings,
        clock=lambda: 1000.0,
    )
    for n, rack in (("h1", "r1"), ("h2", "r1"), ("h3", "r2"), ("h4", "r2")):
        informers.nodes.handle_event(
            "ADDED", mk.node(n, labels={RACK: rack, "pool": "gpu"}, allocatable=ALLOCATABLE, resource_version="1")
        )
    if topology:
        informers.topologies.handle_event("ADDED", mk.topology("topo", (RACK, HOST), resource_version="1"))
    informers.flavors.handle_event("ADDED", mk.flavor("gpu", {"pool": "gpu"}, resource_version="1"))
    informers.checks.handle_event("ADDED", mk.admission_check(CHECK, "topo", c.CONTROLLER_NAME, resource_version="1"))
    cq = mk.cluster_queue(
        "cq", ("gpu",), {CHECK: ["gpu"]}, covered=("nvidia.com/gpu",), quota="100", resource_version="1"
    )
    informers.queues.handle_event("ADDED", cq)
    return Harness(informers, capacity, admission, writes, events, metrics)


async def drain(h: Harness) -> list[str]:
    """The keys queued for admission, taken off the queue."""
    keys = []
    while len(h.admission.queue):
        key = await h.admission.queue.get()
        h.admission.queue.done(key)
        keys.append(key)
    return keys
