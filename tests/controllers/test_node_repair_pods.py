"""Node repair follows Kueue's TASReplaceNodeOnPodTermination (on by default): a NotReady node
whose pods of the workload still run there is not repaired, however long it stays NotReady;
once they go (the taint manager's eviction, a kubelet that stops them), it is. Moving the
slots of pods still running would hold new slots for pods that never come and leave the old
ones stray. ``TASReplaceNodeDueToNotReadyOverFixedTime`` (off by default), or the first gate
off, brings back the fixed grace.

The node repair rig of ``test_node_repair`` on a fake clock.
"""

from __future__ import annotations

from typing import Any

import builders as mk
from repair_harness import Rig, metric, rig, roles

from kueue_tas.api import constants as c
from kueue_tas.controllers.repair.reconciler import SCAN
from kueue_tas.topology.features import FeatureGates

LABELS = {c.WORKLOAD_LABEL: "u1", c.PODSET_LABEL: "main"}


def pod(r: Rig, name: str, node: str, event: str = "ADDED", rv: str = "1", **kw: Any) -> None:
    obj = mk.pod(
        name,
        node,
        namespace="ns",
        uid=f"uid-{name}",
        resource_version=rv,
        labels=LABELS,
        gpus=1,
        selector={c.HOSTNAME_LABEL: node},
        **kw,
    )
    r.h.informers.pods.handle_event(event, obj)


async def running_then_not_ready(r: Rig) -> tuple[str, str, str]:
    """Admit ns/wl with its 12 pods running, add spare h5, and have the 4-pod host NotReady for
    60 s; returns (that host, the 8-pod host, their rack)."""
    small, big, rack = roles(await r.admit())
    for host, count in ((big, 8), (small, 4)):
        for i in range(count):
            pod(r, f"{host}-{i}", host)
    r.node("h5", rack, event="ADDED")
    r.node(small, rack, ready=False)
    r.clock.now += 60
    return small, big, rack


async def test_a_not_ready_node_is_repaired_only_once_its_pods_go() -> None:
    r = rig()
    small, big, rack = await running_then_not_ready(r)
    assert await r.scan() is None
    assert len(r.h.writes.annotations) == 1 and r.events("TopologyRepairPending") == []
    assert metric(r, "kueue_tas_failed_nodes_seen_total") == 0

    # The taint manager evicts them; the kubelet is gone, so they stay Terminating.
    for i in range(3):
        pod(r, f"{small}-{i}", small, event="MODIFIED", rv="2", deleting=True)
    assert await r.scan() is None
    assert len(r.h.writes.annotations) == 1  # one still runs there
    while len(r.repair.queue):  # what the pod events queued
        key = await r.repair.queue.get()
        r.repair.queue.done(key)
    pod(r, f"{small}-3", small, event="DELETED", rv="2")
    assert len(r.repair.queue) == 1  # the last one leaving queues a pass
    assert await r.repair.queue.get() == SCAN
    await r.scan()
    r.observe()
    assert r.hosts() == {big: 8, "h5": 4}
    assert r.events("TopologyRepaired") == [
        f"node {small} NotReady for 60s: 4 pod(s) of PodSet main moved from {small} to h5 in rack {rack}"
    ]


async def test_pods_on_a_healthy_node_leaving_queue_nothing() -> None:
    r = rig()
    small, big, _ = await running_then_not_ready(r)
    await r.scan()
    while len(r.repair.queue):
        key = await r.repair.queue.get()
        r.repair.queue.done(key)
    pod(r, f"{big}-0", big, event="MODIFIED", rv="2", phase="Succeeded")
    assert len(r.repair.queue) == 0
    pod(r, f"{small}-0", small, event="MODIFIED", rv="2", phase="Failed")
    assert len(r.repair.queue) == 1


async def test_the_fixed_time_gate_repairs_after_the_grace_whatever_the_pods() -> None:
    r = rig(FeatureGates({"TASReplaceNodeDueToNotReadyOverFixedTime": True}))
    _, big, _ = await running_then_not_ready(r)
    await r.scan()
    r.observe()
    assert r.hosts() == {big: 8, "h5": 4}


async def test_without_replace_on_pod_termination_the_grace_alone_decides() -> None:
    r = rig(FeatureGates({"TASReplaceNodeOnPodTermination": False}))
    _, big, _ = await running_then_not_ready(r)
    await r.scan()
    r.observe()
    assert r.hosts() == {big: 8, "h5": 4}
