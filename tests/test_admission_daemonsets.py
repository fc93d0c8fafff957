"""The DaemonSet race, in the controller without a cluster: a DaemonSet's pods hold capacity from
the moment the DaemonSet (or the node) is seen, before the pods exist, and the admission decides
on the capacity that stays free. Shared informers are fed by hand, as the manager would."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import partial
from typing import Any

import builders as mk
import pytest

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
from kueue_tas.topology.codec import decode_assignment_annotation
from kueue_tas.topology.free import domain_free

RACK = "example.com/rack"
HOST = c.HOSTNAME_LABEL
GPU = "nvidia.com/gpu"
CHECK = "tas"
ALLOCATABLE = {"cpu": "16", "pods": "110", GPU: "8"}
T0 = "2026-01-01T00:00:00Z"
RACKS = {"h1": "r1", "h2": "r1", "h3": "r2", "h4": "r2"}

# Workload ns/wl: 8 one-GPU pods requiring one rack (a rack has 16 GPUs), our check Pending.
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

# A GPU agent pinned to rack r1, taking 5 of each node's 8 GPUs: r1 keeps 6, too few for the workload.
AGENT = mk.daemonset("gpu-agent", requests={GPU: "5", "cpu": "100m"}, node_selector={RACK: "r1"})


@dataclass
class Writes:
    checks: list[dict[str, Any]] = field(default_factory=list)
    annotations: list[str] = field(default_factory=list)

    async def inject_gates(self, workload: Workload, podsets: set[str], gate: str) -> None:
        pass

    async def write_annotation(self, workload: Workload, text: str) -> None:
        self.annotations.append(text)

    async def write_check(self, workload: Workload, entry: dict[str, Any]) -> None:
        self.checks.append(entry)


class Events:
    async def emit_event(self, regarding: ObjectRef, *, reason: str, message: str, type: str = "Normal") -> bool:
        return True


@dataclass
class Harness:
    informers: SharedInformers
    capacity: LiveCapacity
    admission: WorkloadAdmission
    writes: Writes


@pytest.fixture
def h() -> Harness:
    settings = Settings(leader_election=False)
    metrics = Metrics()
    informers = SharedInformers.register(Manager(None, settings, metrics), settings.annotation_prefix)
    checks = OurChecks(informers.checks.store, settings.controller_name)
    capacity = LiveCapacity()
    cache = CapacityCache(capacity, informers, checks)
    writes = Writes()
    admission = WorkloadAdmission(
        informers=informers,
        checks=checks,
        capacity=capacity,
        flavors_of=cache.flavors_of,
        writer=writes,
        events=Events(),
        metrics=metrics,
        settings=settings,
        decided=lambda: None,
        clock=lambda: 1000.0,
    )
    informers.topologies.handle_event("ADDED", mk.topology("topo", (RACK, HOST), resource_version="1"))
    informers.flavors.handle_event("ADDED", mk.flavor("gpu", {"pool": "gpu"}, resource_version="1"))
    informers.checks.handle_event("ADDED", mk.admission_check(CHECK, "topo", c.CONTROLLER_NAME, resource_version="1"))
    cq = mk.cluster_queue("cq", ("gpu",), {CHECK: ["gpu"]}, covered=(GPU,), quota="100", resource_version="1")
    informers.queues.handle_event("ADDED", cq)
    return Harness(informers, capacity, admission, writes)


def add_nodes(h: Harness, *names: str) -> None:
    for n in names:
        raw = mk.node(n, labels={RACK: RACKS[n], "pool": "gpu"}, allocatable=ALLOCATABLE, resource_version="1")
        h.informers.nodes.handle_event("ADDED", raw)


def free_gpus(h: Harness) -> dict[str, int]:
    snap = h.capacity.snapshot("gpu")
    assert snap is not None
    free = domain_free(snap)
    return {n: int(free[(HOST, n, GPU)]) for n in sorted(snap.tree.leaf_by_node_name)}


def agent_pod(name: str, node: str | None, phase: str = "Running", rv: str = "1") -> dict[str, Any]:
    requests = {GPU: "5", "cpu": "100m"}
    return mk.pod(name, node, namespace="kube-system", requests=requests, owner=AGENT, phase=phase, resource_version=rv)


async def decide_racks(h: Harness) -> set[str]:
    h.informers.workloads.handle_event("ADDED", workload())
    assert await h.admission.reconcile("ns/wl") is None
    assert [e["state"] for e in h.writes.checks] == ["Ready"], h.writes.checks
    ((_, assignment),) = decode_assignment_annotation(h.writes.annotations[0])
    return {RACKS[d.values[-1]] for d in assignment.domains}


async def test_a_new_daemonset_holds_its_nodes_before_its_pods_exist(h: Harness) -> None:
    add_nodes(h, "h1", "h2", "h3", "h4")
    h.informers.daemonsets.handle_event("ADDED", AGENT)
    assert free_gpus(h) == {"h1": 3, "h2": 3, "h3": 8, "h4": 8}
    assert await decide_racks(h) == {"r2"}


async def test_without_the_daemonset_the_workload_takes_the_rack_the_agent_needs(h: Harness) -> None:
    """The control: the rack the agent would take is the one chosen when nothing reserves it."""
    add_nodes(h, "h1", "h2", "h3", "h4")
    assert await decide_racks(h) == {"r1"}


async def test_a_node_joining_is_held_for_the_daemonsets_that_will_run_there(h: Harness) -> None:
    h.informers.daemonsets.handle_event("ADDED", AGENT)
    add_nodes(h, "h3", "h4")
    add_nodes(h, "h1", "h2")  # r1 joins after the DaemonSet: its pods do not exist yet
    assert free_gpus(h) == {"h1": 3, "h2": 3, "h3": 8, "h4": 8}
    assert await decide_racks(h) == {"r2"}


async def test_the_daemon_pod_replaces_the_reservation_and_is_charged_once(h: Harness) -> None:
    add_nodes(h, "h1", "h2", "h3", "h4")
    h.informers.daemonsets.handle_event("ADDED", AGENT)
    # Created with the node's affinity, not bound yet: still held once, by the reservation.
    h.informers.pods.handle_event("ADDED", agent_pod("gpu-agent-a", None))
    assert free_gpus(h)["h1"] == 3
    h.informers.pods.handle_event("MODIFIED", agent_pod("gpu-agent-a", "h1", rv="2"))
    assert free_gpus(h) == {"h1": 3, "h2": 3, "h3": 8, "h4": 8}
    # It failed (the controller will create another): held by the reservation again, once.
    h.informers.pods.handle_event("MODIFIED", agent_pod("gpu-agent-a", "h1", phase="Failed", rv="3"))
    assert free_gpus(h)["h1"] == 3
    h.informers.pods.handle_event("DELETED", agent_pod("gpu-agent-a", "h1", phase="Failed", rv="4"))
    h.informers.pods.handle_event("ADDED", agent_pod("gpu-agent-b", "h1", rv="5"))
    assert free_gpus(h)["h1"] == 3
    # The DaemonSet deleted: its running pod is still charged until it goes; h2 is free again.
    h.informers.daemonsets.handle_event("DELETED", AGENT)
    assert free_gpus(h) == {"h1": 3, "h2": 8, "h3": 8, "h4": 8}
    h.informers.pods.handle_event("DELETED", agent_pod("gpu-agent-b", "h1", rv="6"))
    assert free_gpus(h)["h1"] == 8


async def test_a_daemonset_being_deleted_or_recreated(h: Harness) -> None:
    add_nodes(h, "h1", "h2", "h3", "h4")
    h.informers.daemonsets.handle_event("ADDED", AGENT)
    deleting = mk.daemonset("gpu-agent", requests={GPU: "5"}, node_selector={RACK: "r1"}, deleting=True)
    h.informers.daemonsets.handle_event("MODIFIED", deleting | {"metadata": deleting["metadata"] | {"uid": "x"}})
    assert free_gpus(h)["h1"] == 8
    # The same name, a new UID and another rack (seen as an update after a relist).
    h.informers.daemonsets.handle_event("ADDED", AGENT)
    moved = mk.daemonset("gpu-agent", uid="uid-2", requests={GPU: "2"}, node_selector={RACK: "r2"})
    h.informers.daemonsets.handle_event("MODIFIED", moved | {"metadata": moved["metadata"] | {"resourceVersion": "9"}})
    assert free_gpus(h) == {"h1": 8, "h2": 8, "h3": 6, "h4": 6}
