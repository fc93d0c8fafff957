"""Workload admission without a cluster: shared informers fed by hand, writes and Events
recorded by injected fakes, time from an injected clock.

Covers the race the e2e suite found: our annotation write comes back through the informer
before our Ready entry does; the workload still looks Pending, and deciding it again would
count its own assumed capacity against it (and overwrite Ready with Retry).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import partial
from typing import Any

import builders as mk
import pytest

from kueue_tas.api import constants as c
from kueue_tas.api.workload import Workload
from kueue_tas.capacity.live import LiveCapacity
from kueue_tas.controllers.admission import WRITE_OBSERVE_TIMEOUT_SECONDS, WorkloadAdmission
from kueue_tas.controllers.capacity_cache import CapacityCache
from kueue_tas.controllers.informers import OurChecks, SharedInformers
from kueue_tas.kube.errors import Conflict
from kueue_tas.kube.events import ObjectRef
from kueue_tas.runtime.config import Settings
from kueue_tas.runtime.manager import Manager
from kueue_tas.runtime.metrics import Metrics
from kueue_tas.topology.free import domain_free

RACK = "example.com/rack"
HOST = c.HOSTNAME_LABEL
CHECK = "tas"
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
    """The AdmissionWriter fake: records every write; ``fail`` raises once on the next check write."""

    checks: list[dict[str, Any]] = field(default_factory=list)
    annotations: list[str] = field(default_factory=list)
    gated: list[set[str]] = field(default_factory=list)
    fail: Exception | None = None
    server: Workload | None = None  # what a re-read returns (default: the copy it is given)

    async def inject_gates(self, workload: Workload, podsets: set[str], gate: str) -> None:
        self.gated.append(set(podsets))

    async def read_workload(self, workload: Workload) -> Workload | None:
        return self.server or workload

    async def write_annotation(self, workload: Workload, text: str) -> None:
        self.annotations.append(text)

    async def write_check(self, workload: Workload, entry: dict[str, Any]) -> None:
        if self.fail is not None:
            exc, self.fail = self.fail, None
            raise exc
        self.checks.append(entry)


@dataclass
class Events:
    seen: list[tuple[str, str, str]] = field(default_factory=list)

    async def emit_event(self, regarding: ObjectRef, *, reason: str, message: str, type: str = "Normal") -> bool:
        self.seen.append((regarding.kind, type, reason))
        return True


@dataclass
class Harness:
    informers: SharedInformers
    capacity: LiveCapacity
    admission: WorkloadAdmission
    writes: Writes
    events: Events
    metrics: Metrics
    now: list[float]
    decided: list[int]


@pytest.fixture
def h() -> Harness:
    return make_harness()


def make_harness() -> Harness:
    settings = Settings(leader_election=False)
    metrics = Metrics()
    informers = SharedInformers.register(Manager(None, settings, metrics), settings.annotation_prefix)
    checks = OurChecks(informers.checks.store, settings.controller_name)
    capacity = LiveCapacity()
    cache = CapacityCache(capacity, informers, checks)
    writes, events, now, decided = Writes(), Events(), [1000.0], [0]
    admission = WorkloadAdmission(
        informers=informers,
        checks=checks,
        capacity=capacity,
        flavors_of=cache.flavors_of,
        writer=writes,
        events=events,
        metrics=metrics,
        settings=settings,
        decided=lambda: decided.__setitem__(0, decided[0] + 1),
        clock=lambda: now[0],
    )
    for n, rack in (("h1", "r1"), ("h2", "r1"), ("h3", "r2"), ("h4", "r2")):
        informers.nodes.handle_event(
            "ADDED", mk.node(n, labels={RACK: rack, "pool": "gpu"}, allocatable=ALLOCATABLE, resource_version="1")
        )
    informers.topologies.handle_event("ADDED", mk.topology("topo", (RACK, HOST), resource_version="1"))
    informers.flavors.handle_event("ADDED", mk.flavor("gpu", {"pool": "gpu"}, resource_version="1"))
    informers.checks.handle_event("ADDED", mk.admission_check(CHECK, "topo", c.CONTROLLER_NAME, resource_version="1"))
    cq = mk.cluster_queue(
        "cq", ("gpu",), {CHECK: ["gpu"]}, covered=("nvidia.com/gpu",), quota="100", resource_version="1"
    )
    informers.queues.handle_event("ADDED", cq)
    return Harness(informers, capacity, admission, writes, events, metrics, now, decided)


def free_gpus(h: Harness, host: str) -> int:
    snap = h.capacity.snapshot("gpu")
    assert snap is not None
    return int(domain_free(snap)[(HOST, host, "nvidia.com/gpu")])


async def test_stale_pending_after_our_annotation_write_is_not_decided_again(h: Harness) -> None:
    h.informers.workloads.handle_event("ADDED", workload())
    assert h.admission.queue.num_waiting() + len(h.admission.queue) == 1
    assert await h.admission.reconcile("ns/wl") is None
    assert [e["state"] for e in h.writes.checks] == ["Ready"]
    assert h.events.seen == [("Workload", "Normal", "TopologyAssigned")] and h.decided == [1]
    # The annotation write comes back first: still Pending in the cache.
    h.informers.workloads.handle_event(
        "MODIFIED",
        workload(
            workload_annotations={c.TOPOLOGY_ASSIGNMENT_ANNOTATION: h.writes.annotations[0]}, resource_version="6"
        ),
    )
    delay = await h.admission.reconcile("ns/wl")
    assert delay is not None and 0 < delay <= WRITE_OBSERVE_TIMEOUT_SECONDS
    assert [e["state"] for e in h.writes.checks] == ["Ready"], "decided twice on a stale view"
    # Then our Ready entry: the assumption becomes committed usage; one rack is full.
    h.informers.workloads.handle_event(
        "MODIFIED",
        workload(
            check_state="Ready",
            workload_annotations={c.TOPOLOGY_ASSIGNMENT_ANNOTATION: h.writes.annotations[0]},
            resource_version="7",
        ),
    )
    assert await h.admission.reconcile("ns/wl") is None
    assert h.capacity.holds("ns/wl")
    assert sum(free_gpus(h, host) for host in ("h1", "h2", "h3", "h4")) == 32 - 8


async def test_kueue_resetting_the_entry_to_pending_is_decided_again_from_scratch(h: Harness) -> None:
    h.informers.workloads.handle_event("ADDED", workload())
    await h.admission.reconcile("ns/wl")
    ann = {c.TOPOLOGY_ASSIGNMENT_ANNOTATION: h.writes.annotations[0]}
    h.informers.workloads.handle_event(
        "MODIFIED", workload(check_state="Ready", workload_annotations=ann, resource_version="6")
    )
    # Evicted and requeued by Kueue: the entry is Pending again; the old assignment is not trusted
    # and this workload's own earlier capacity must not block it.
    h.informers.workloads.handle_event(
        "MODIFIED", workload(check_state="Pending", workload_annotations=ann, resource_version="8")
    )
    assert await h.admission.reconcile("ns/wl") is None
    assert [e["state"] for e in h.writes.checks] == ["Ready", "Ready"]


async def test_a_write_that_never_comes_back_is_retried_after_the_timeout(h: Harness) -> None:
    h.informers.workloads.handle_event("ADDED", workload())
    await h.admission.reconcile("ns/wl")
    h.now[0] += WRITE_OBSERVE_TIMEOUT_SECONDS - 1
    assert await h.admission.reconcile("ns/wl") == pytest.approx(1.0)
    h.now[0] += 1.5  # the deadline has passed
    assert await h.admission.reconcile("ns/wl") is None
    assert [e["state"] for e in h.writes.checks] == ["Ready", "Ready"]


async def test_a_conflicting_write_drops_the_assumption_and_asks_again(h: Harness) -> None:
    h.informers.workloads.handle_event("ADDED", workload())
    h.writes.fail = Conflict(409, "Conflict", "the object has been modified")
    assert await h.admission.reconcile("ns/wl") == 0.5
    assert not h.capacity.holds("ns/wl") and h.writes.checks == []
    assert await h.admission.reconcile("ns/wl") is None
    assert [e["state"] for e in h.writes.checks] == ["Ready"]


async def test_workloads_not_pending_on_our_check_are_left_alone(h: Harness) -> None:
    h.informers.workloads.handle_event("ADDED", workload(check_state="Ready"))
    assert len(h.admission.queue) == 0
    assert await h.admission.reconcile("ns/wl") is None
    assert h.writes.checks == [] and h.events.seen == []


async def test_a_configuration_change_looks_at_every_workload_again() -> None:
    settings = Settings(leader_election=False)
    informers = SharedInformers.register(Manager(None, settings, Metrics()), settings.annotation_prefix)
    checks = OurChecks(informers.checks.store, settings.controller_name)
    capacity = LiveCapacity()
    cache = CapacityCache(capacity, informers, checks)
    admission = WorkloadAdmission(
        informers=informers,
        checks=checks,
        capacity=capacity,
        flavors_of=cache.flavors_of,
        writer=Writes(),
        events=Events(),
        metrics=Metrics(),
        settings=settings,
    )
    informers.workloads.handle_event("ADDED", workload())
    assert len(admission.queue) == 0  # our check is not known yet
    informers.checks.handle_event("ADDED", mk.admission_check(CHECK, None, c.CONTROLLER_NAME, resource_version="1"))
    assert len(admission.queue) == 1
