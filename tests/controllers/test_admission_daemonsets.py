"""The DaemonSet race, in the controller without a cluster: a DaemonSet's pods hold capacity from
the moment the DaemonSet (or the node) is seen, before the pods exist, and the admission decides
on the capacity that stays free. Shared informers are fed by hand, as the manager would."""

from __future__ import annotations

from typing import Any

import builders as mk
from admission_harness import Harness, workload
from vocab import GPU, HOST, RACK

from kueue_tas.topology.codec.codec import decode_assignment_annotation
from kueue_tas.topology.explain.free import domain_free

RACKS = {"h1": "r1", "h2": "r1", "h3": "r2", "h4": "r2"}

# A GPU agent pinned to rack r1, taking 5 of each node's 8 GPUs: r1 keeps 6, too few for the
# harness's workload (8 one-GPU pods requiring one rack).
AGENT = mk.daemonset("gpu-agent", requests={GPU: "5", "cpu": "100m"}, node_selector={RACK: "r1"})


def node(name: str) -> dict[str, Any]:
    alloc = {"cpu": "16", "pods": "110", GPU: "8"}
    return mk.node(name, labels={RACK: RACKS[name], "pool": "gpu"}, allocatable=alloc, resource_version="2")


def free_gpus(h: Harness) -> dict[str, int]:
    snap = h.capacity.snapshot("gpu")
    assert snap is not None
    free = domain_free(snap)
    return {n: int(free[(HOST, n, GPU)]) for n in sorted(snap.tree.leaf_by_node_name)}


def agent_pod(name: str, node: str | None, phase: str = "Running", rv: str = "1") -> dict[str, Any]:
    requests = {GPU: "5", "cpu": "100m"}
    return mk.pod(name, node, namespace="kube-system", requests=requests, owner=AGENT, phase=phase, resource_version=rv)


async def decide_racks(h: Harness) -> set[str]:
    h.add_workload(workload())
    assert await h.admission.reconcile("ns/wl") is None
    assert [e["state"] for e in h.writes.checks] == ["Ready"], h.writes.checks
    ((_, assignment),) = decode_assignment_annotation(h.writes.annotations[0])
    return {RACKS[d.values[-1]] for d in assignment.domains}


async def test_a_new_daemonset_holds_its_nodes_before_its_pods_exist(h: Harness) -> None:
    h.informers.daemonsets.handle_event("ADDED", AGENT)
    assert free_gpus(h) == {"h1": 3, "h2": 3, "h3": 8, "h4": 8}
    assert await decide_racks(h) == {"r2"}


async def test_without_the_daemonset_the_workload_takes_the_rack_the_agent_needs(h: Harness) -> None:
    """The control: the rack the agent would take is the one chosen when nothing reserves it."""
    assert await decide_racks(h) == {"r1"}


async def test_a_node_joining_is_held_for_the_daemonsets_that_will_run_there(h: Harness) -> None:
    for name in ("h1", "h2"):  # rack r1 is not there yet
        h.informers.nodes.handle_event("DELETED", node(name))
    h.informers.daemonsets.handle_event("ADDED", AGENT)
    assert free_gpus(h) == {"h3": 8, "h4": 8}
    for name in ("h1", "h2"):  # r1 joins after the DaemonSet: its pods do not exist yet
        h.informers.nodes.handle_event("ADDED", node(name))
    assert free_gpus(h) == {"h1": 3, "h2": 3, "h3": 8, "h4": 8}
    assert await decide_racks(h) == {"r2"}


async def test_the_daemon_pod_replaces_the_reservation_and_is_charged_once(h: Harness) -> None:
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
    h.informers.daemonsets.handle_event("ADDED", AGENT)
    deleting = mk.daemonset("gpu-agent", requests={GPU: "5"}, node_selector={RACK: "r1"}, deleting=True)
    h.informers.daemonsets.handle_event("MODIFIED", deleting | {"metadata": deleting["metadata"] | {"uid": "x"}})
    assert free_gpus(h)["h1"] == 8
    # The same name, a new UID and another rack (seen as an update after a relist).
    h.informers.daemonsets.handle_event("ADDED", AGENT)
    moved = mk.daemonset("gpu-agent", uid="uid-2", requests={GPU: "2"}, node_selector={RACK: "r2"})
    h.informers.daemonsets.handle_event("MODIFIED", moved | {"metadata": moved["metadata"] | {"resourceVersion": "9"}})
    assert free_gpus(h) == {"h1": 8, "h2": 8, "h3": 6, "h4": 6}
