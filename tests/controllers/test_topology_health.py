"""Issue 13, deliverable 5: the topology health signal, through the shared informers.

Before: once admitted, a workload was never looked at again; a Topology losing its rack level,
deleted, or the nodes of a required domain going away left the entry saying all was well.
Now every affected workload keeps its Ready entry (Kueue must not evict a running job for it),
whose message names the problem and ``placement not enforced``, with one Warning Event; on
recovery the note goes and a Normal Event says so. The assignment record stays the message's
end, so tampering detection is unaffected."""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

import builders as mk
import pytest
from admission_harness import CHECK, Harness, guard, harness, workload
from faults import FakeApiServer, faulty_client
from vocab import GPU, HOST, RACK

from kueue_tas.api import constants as c
from kueue_tas.api.workload import Workload
from kueue_tas.capacity.assignment_record import assignment_tampering, recorded
from kueue_tas.controllers.deps import ControllerDeps
from kueue_tas.controllers.health import reconciler as topology_health
from kueue_tas.controllers.health.reconciler import (
    NOT_ENFORCED_REASON,
    RESTORED_REASON,
    KubeEntryWriter,
    TopologyHealth,
)
from kueue_tas.kube.errors import Conflict, ServerError
from kueue_tas.runtime.config import Settings
from kueue_tas.runtime.metrics import Metrics
from kueue_tas.topology.codec.codec import decode_assignment_annotation

KEY = "ns/wl"
NOT_ENFORCED = "; placement not enforced. "


@dataclass
class EntryWrites:
    entries: list[dict[str, Any]] = field(default_factory=list)
    fail: list[Exception] = field(default_factory=list)  # raised by the next writes, in order

    async def write_entry(self, workload: Workload, entry: dict[str, Any]) -> None:
        if self.fail:
            raise self.fail.pop(0)
        self.entries.append(entry)


@dataclass
class Cluster:
    h: Harness
    health: TopologyHealth
    writes: EntryWrites
    obj: dict[str, Any]
    rv: int = 7

    def play_back(self) -> None:
        """The watch shows our last entry write on the Workload."""
        self.obj = copy.deepcopy(self.obj)
        self.obj["status"]["admissionChecks"] = [self.writes.entries[-1]]
        self.rv += 1
        self.obj["metadata"]["resourceVersion"] = str(self.rv)
        self.h.modify_workload(self.obj)

    def entry(self) -> dict[str, Any]:
        entry: dict[str, Any] = self.obj["status"]["admissionChecks"][0]
        return entry

    def health_events(self) -> list[tuple[str, str, str, str]]:
        return [e for e in self.h.events.seen if e[2] in (NOT_ENFORCED_REASON, RESTORED_REASON)]

    def hosts(self) -> list[str]:
        text = self.obj["metadata"]["annotations"][c.TOPOLOGY_ASSIGNMENT_ANNOTATION]
        ((_, assignment),) = decode_assignment_annotation(text)
        assert assignment.levels == (HOST,)
        return [d.values[0] for d in assignment.domains]


def node(name: str, rack: str, *, ready: bool = True, rv: str = "2") -> dict[str, Any]:
    alloc = {"cpu": "16", "pods": "110", GPU: "8"}
    return mk.node(name, labels={RACK: rack, "pool": "gpu"}, allocatable=alloc, ready=ready, resource_version=rv)


@pytest.fixture
async def cluster() -> Cluster:
    """ns/wl (8 one-GPU pods, required rack) admitted by the harness and shown Ready as Kueue keeps it."""
    h = harness()
    writes = EntryWrites()
    health = TopologyHealth(
        ControllerDeps(
            informers=h.informers,
            checks=h.checks,
            events=h.events,
            metrics=Metrics(),
            settings=Settings(leader_election=False),
        ),
        writer=writes,
    )
    h.add_workload(workload())
    assert await h.admission.reconcile(KEY) is None
    entry = dict(h.writes.checks[-1])
    assert entry["state"] == "Ready" and entry["podSetUpdates"]
    ann = {c.TOPOLOGY_ASSIGNMENT_ANNOTATION: h.writes.annotations[-1]}
    obj = workload(check_state="Ready", workload_annotations=ann, resource_version="7")
    obj["status"]["admissionChecks"] = [entry]
    h.modify_workload(obj)
    return Cluster(h, health, writes, obj)


def drop_rack_level(h: Harness) -> None:
    h.informers.topologies.handle_event("MODIFIED", mk.topology("topo", (HOST,), resource_version="2"))


async def test_healthy_workload_is_left_alone(cluster: Cluster) -> None:
    assert await cluster.health.reconcile(KEY) is None
    assert cluster.writes.entries == [] and cluster.health_events() == []


async def test_lost_rack_level_is_said_once_and_the_entry_stays_ready(cluster: Cluster) -> None:
    before = copy.deepcopy(cluster.entry())
    drop_rack_level(cluster.h)
    assert KEY in await _queued(cluster.health)
    assert await cluster.health.reconcile(KEY) is None

    (written,) = cluster.writes.entries
    problem = f"topology level {RACK} is no longer available"
    assert written["message"] == f"{problem}{NOT_ENFORCED}{before['message']}"
    # Everything else as Kueue shows it: Ready, same transition time, same podSetUpdates.
    assert {k: v for k, v in written.items() if k != "message"} == {k: v for k, v in before.items() if k != "message"}
    assert cluster.health_events() == [
        ("Workload/wl", "Warning", NOT_ENFORCED_REASON, f"{problem}; placement not enforced")
    ]

    cluster.play_back()
    wl = cluster.h.informers.workloads.store.get(KEY)
    assert wl is not None
    assert recorded(wl.status.admission_checks[0].message) == recorded(before["message"])
    assert assignment_tampering(wl, {CHECK}) is None
    assert cluster.h.capacity.holds(KEY)
    # Said once: the entry already says it.
    assert await cluster.health.reconcile(KEY) is None
    assert len(cluster.writes.entries) == 1 and len(cluster.health_events()) == 1
    # The assignment guard sees nothing to restore.
    checks_before = len(cluster.h.writes.checks)
    assert await guard(cluster.h).reconcile(KEY) is None
    assert len(cluster.h.writes.checks) == checks_before

    # Recovery: the level is back, the note goes, a Normal Event says so.
    cluster.h.informers.topologies.handle_event("MODIFIED", mk.topology("topo", (RACK, HOST), resource_version="3"))
    assert await cluster.health.reconcile(KEY) is None
    assert cluster.writes.entries[-1]["message"] == before["message"]
    assert cluster.health_events()[-1][:3] == ("Workload/wl", "Normal", RESTORED_REASON)
    assert problem in cluster.health_events()[-1][3]


async def test_deleted_topology(cluster: Cluster) -> None:
    cluster.h.informers.topologies.handle_event("DELETED", mk.topology("topo", (RACK, HOST), resource_version="1"))
    assert await cluster.health.reconcile(KEY) is None
    assert cluster.writes.entries[-1]["message"].startswith(f'Topology "topo" no longer exists{NOT_ENFORCED}')
    assert cluster.writes.entries[-1]["state"] == "Ready"


async def test_a_burst_of_node_events_makes_one_pass_after_it(cluster: Cluster) -> None:
    await _queued(cluster.health)
    for i, host in enumerate(("h1", "h3", "h1")):
        cluster.h.informers.nodes.handle_event("MODIFIED", node(host, "r1" if host == "h1" else "r2", rv=f"1{i}"))
    assert len(cluster.health.queue) == 0 and cluster.health.queue.num_waiting() == 1


async def test_not_ready_node_then_recovery(cluster: Cluster, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(topology_health, "NODES_SETTLE_SECONDS", 0.0)
    racks = {"h1": "r1", "h2": "r1", "h3": "r2", "h4": "r2"}
    host = cluster.hosts()[0]
    await _queued(cluster.health)
    cluster.h.informers.nodes.handle_event("MODIFIED", node(host, racks[host], ready=False))
    assert await _queued(cluster.health) == [KEY]
    assert await cluster.health.reconcile(KEY) is None
    message = cluster.writes.entries[-1]["message"]
    assert f"required domain {RACK}={racks[host]} is no longer whole" in message
    assert message.index(NOT_ENFORCED) > 0
    cluster.play_back()

    cluster.h.informers.nodes.handle_event("MODIFIED", node(host, racks[host], ready=True, rv="3"))
    assert KEY in await _queued(cluster.health)
    assert await cluster.health.reconcile(KEY) is None
    assert NOT_ENFORCED not in cluster.writes.entries[-1]["message"]
    assert [e[1] for e in cluster.health_events()] == ["Warning", "Normal"]


async def test_heartbeats_do_not_wake_it(cluster: Cluster, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(topology_health, "NODES_SETTLE_SECONDS", 0.0)
    await _queued(cluster.health)
    host = cluster.hosts()[0]
    same = node(host, "r1" if host in ("h1", "h2") else "r2", rv="9")
    cluster.h.informers.nodes.handle_event("MODIFIED", same)
    assert await _queued(cluster.health) == []


async def test_evicted_workload_is_left_to_kueue(cluster: Cluster) -> None:
    drop_rack_level(cluster.h)
    evicted = copy.deepcopy(cluster.obj)
    evicted["status"]["conditions"].append(mk.condition("Evicted", reason="Preempted", message="", time="t"))
    cluster.h.modify_workload(evicted)
    assert await cluster.health.reconcile(KEY) is None
    assert cluster.writes.entries == [] and cluster.health_events() == []


async def test_conflict_and_failure_retry_before_any_event(cluster: Cluster) -> None:
    drop_rack_level(cluster.h)
    cluster.writes.fail = [Conflict(409, "Conflict"), ServerError(500, "InternalError")]
    assert await cluster.health.reconcile(KEY) == 0.5
    delay = await cluster.health.reconcile(KEY)
    assert delay is not None and delay > 0
    assert cluster.health_events() == []
    assert await cluster.health.reconcile(KEY) is None
    assert len(cluster.writes.entries) == 1 and len(cluster.health_events()) == 1


async def test_restart_does_not_repeat_the_warning(cluster: Cluster) -> None:
    drop_rack_level(cluster.h)
    assert await cluster.health.reconcile(KEY) is None
    cluster.play_back()
    writes = EntryWrites()
    restarted = TopologyHealth(
        ControllerDeps(
            informers=cluster.h.informers,
            checks=cluster.h.checks,
            events=cluster.h.events,
            metrics=Metrics(),
            settings=Settings(leader_election=False),
        ),
        writer=writes,
    )
    assert await restarted.reconcile(KEY) is None
    assert writes.entries == [] and len(cluster.health_events()) == 1


async def test_kube_entry_writer_is_guarded_by_resource_version(cluster: Cluster) -> None:
    server = FakeApiServer()
    path = "/apis/kueue.x-k8s.io/v1beta2/namespaces/ns/workloads/wl"
    stored = server.put(path, cluster.obj)
    api, _ = await faulty_client(server)
    writer = KubeEntryWriter(api)
    entry = dict(cluster.entry(), message="changed")
    stale = Workload.model_validate(dict(stored, metadata=dict(stored["metadata"], resourceVersion="1")))
    with pytest.raises(Conflict):
        await writer.write_entry(stale, entry)
    await writer.write_entry(Workload.model_validate(stored), entry)
    after = server.get(path)
    assert after is not None
    (written,) = after["status"]["admissionChecks"]
    assert written["message"] == "changed" and written["podSetUpdates"] == cluster.entry()["podSetUpdates"]
    await api.close()


async def _queued(health: TopologyHealth) -> list[str]:
    keys = []
    while len(health.queue):
        key = await health.queue.get()
        health.queue.done(key)
        if key == "*":
            await health.reconcile(key)
            continue
        keys.append(key)
    return keys
