"""Issue 13 "Done when" (a), (b), (c) on the real local cluster: failed nodes under running TAS
Jobs are repaired in place, or the nodeFailurePolicy decides.

Nodes are failed as ``e2e/node_faults.py`` describes (kwok lets go, Ready patched False, pods
deleted gracefully and left Terminating). The invariant monitor (``invariant_monitor``) runs
through each test: no domain ever holds more live pods than its current assignment gives it, no
node more than its allocatable, no pod is ungated outside its assignment.

The pool: 2 blocks x 3 racks x 2 hosts of 8 GPUs (a, b) or smaller pools (c). Jobs ask for
one-GPU pods with a required level; pods run for ``RUN_FOR`` once bound (kwok), so a Job
finishes by itself once every index has run.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest_asyncio

from e2e import jobs, workloads
from e2e import stack as st
from e2e.controller import ControllerGroup
from e2e.kube import Kube, condition_true, eventually
from e2e.monitor import Monitor
from e2e.node_faults import evict_pods_of, evictable, fail_node, force_delete
from e2e.nodes import BLOCK_LABEL, POOL_LABEL, RACK_LABEL, NodePool
from e2e.pods import is_gated, pods_raw
from e2e.tests.admission_helpers import entry_of, events_of, hosts
from kueue_tas.controllers.health_note import without_note

StartMonitor = Callable[..., Awaitable[Monitor]]

RUN_FOR = "40s"
GRACE_S = 30  # the controller's default node_failure_grace_seconds


def pool(unique: str, prefix: str, blocks: int, racks: int, hosts_per_rack: int) -> NodePool:
    return NodePool(name=f"{prefix}{unique}", blocks=blocks, racks_per_block=racks, hosts_per_rack=hosts_per_rack)


def block_of(node: str) -> str:
    return node.rsplit("-", 2)[0].rsplit("-", 1)[-1]  # <pool>-b<i>-r<j>-h<k> -> b<i>


async def repaired(kube: Kube, s: st.TasStack, job: str, timeout_s: float = GRACE_S + 60) -> dict[str, Any]:
    """The Workload once a TopologyRepaired Event was written for it."""

    async def done() -> dict[str, Any] | None:
        wl = await workloads.workload_of(kube, s.namespace, job)
        return wl if wl is not None and await events_of(kube, wl, "TopologyRepaired") else None

    return await eventually(f"Job {job} repaired", done, timeout_s)


async def job_finished(kube: Kube, namespace: str, job: str, timeout_s: float = 180) -> None:
    async def complete() -> bool:
        raw = await kube.batch.read_namespaced_job(job, namespace)
        return condition_true(kube.api.sanitize_for_serialization(raw), "Complete")

    await eventually(f"Job {job} Complete", complete, timeout_s)


async def replacements_running_on(kube: Kube, namespace: str, job: str, nodes: set[str], count: int) -> None:
    async def there() -> bool:
        pods = await pods_raw(kube, namespace, f"job-name={job}")
        live = [p for p in pods if not p["metadata"].get("deletionTimestamp")]
        on = Counter(p["spec"].get("nodeName") for p in live if (p.get("status") or {}).get("phase") == "Running")
        return sum(on[n] for n in nodes) >= count

    await eventually(f"{count} pods of {job} running on {sorted(nodes)}", there, 120)


async def watch(invariant_monitor: StartMonitor, s: st.TasStack) -> Monitor:
    return await invariant_monitor([s.check], node_selector=f"{POOL_LABEL}={s.pool.name}")


def train_job(name: str, pods: int, required: str, run_for: str) -> dict[str, Any]:
    return evictable(jobs.job(name, pods, required=required, run_for=run_for))


async def admitted(
    kube: Kube,
    namespace: str,
    tas: ControllerGroup,
    invariant_monitor: StartMonitor,
    nodes: NodePool,
    job: tuple[str, int, str],
) -> tuple[st.TasStack, Monitor, dict[str, Any]]:
    """A stack on ``nodes`` watched by the monitor, and its Workload once the Job ``job`` (name,
    pods, required level) is Ready."""
    name, pods, level = job
    s = await st.tas_stack(kube, namespace, tas.controller_name, nodes)
    monitor = await watch(invariant_monitor, s)
    await jobs.create_job(kube, namespace, train_job(name, pods, level, RUN_FOR))
    return s, monitor, await workloads.wait_check(kube, s, name, ("Ready",))


@pytest_asyncio.fixture(loop_scope="session")
async def evicted(kube: Kube, namespace: str) -> AsyncIterator[list[str]]:
    """The pods a test evicts; afterwards (before the namespace goes) its Jobs are deleted and
    the evicted pods still Terminating force-deleted.

    The Jobs go first: with ``backoffLimitPerIndex`` the Job controller keeps its finalizer on an
    index's last failed pod until the index has a replacement, which a Terminating namespace
    never gets, and the namespace controller deletes the Jobs only once every pod is gone; the
    Job's deletion lets the Job controller release the pods."""
    names: list[str] = []
    yield names
    await kube.batch.delete_collection_namespaced_job(namespace, propagation_policy="Background")
    await force_delete(kube, namespace, names)


async def fail_and_evict(kube: Kube, namespace: str, nodes: list[str], evicted: list[str]) -> list[str]:
    """Fail ``nodes`` at once, then evict their pods; the names of those pods."""
    for node in nodes:
        await fail_node(kube, node)
    names: list[str] = []
    for node in nodes:
        names += await evict_pods_of(kube, namespace, node)
    evicted += names
    return names


# --- (a) one node of a required-block Job fails ------------------------------------------------


async def test_one_failed_node_moves_only_its_pods_inside_the_block(
    kube: Kube,
    namespace: str,
    unique: str,
    tas: ControllerGroup,
    invariant_monitor: StartMonitor,
    evicted: list[str],
) -> None:
    s, monitor, wl = await admitted(
        kube, namespace, tas, invariant_monitor, pool(unique, "nf", 2, 3, 2), ("train", 36, BLOCK_LABEL)
    )
    before = hosts(wl)
    assert len({block_of(h) for h in before}) == 1
    await eventually("pods of train running", lambda: _running(kube, namespace, "train", 36), 90)
    victim = max(before, key=lambda h: before[h])
    lost = await fail_and_evict(kube, namespace, [victim], evicted)
    wl = await repaired(kube, s, "train")
    after = hosts(wl)
    assert victim not in after
    assert {h: n for h, n in after.items() if h in before} == {h: n for h, n in before.items() if h != victim}
    assert sum(after.values()) == 36 and len({block_of(h) for h in after}) == 1  # still inside the block
    moved = set(after) - set(before) | {h for h in after if after[h] > before.get(h, 0)}
    message = entry_of(wl, s)["message"]
    # Topology health's note on the block no longer whole may stand in front until it re-evaluates.
    assert without_note(message).startswith(f"node {victim} NotReady for "), message
    assert f"pod(s) of PodSet main moved from {victim} to" in message
    assert entry_of(wl, s)["state"] == "Ready"
    await replacements_running_on(kube, namespace, "train", moved, before[victim])
    # The lost pods still Terminating on the failed node all along, as with no kubelet to confirm.
    left = {p["metadata"]["name"]: p for p in await pods_raw(kube, namespace, "job-name=train")}
    assert all(left[n]["metadata"].get("deletionTimestamp") for n in lost) and len(lost) == before[victim]
    await force_delete(kube, namespace, lost)  # pod GC once the node is given up
    await job_finished(kube, namespace, "train")
    assert monitor.checker.checks["domain-overfill"] > 10 and monitor.violations == [], monitor.report()


async def test_a_job_on_one_host_moves_whole_to_another_host(
    kube: Kube,
    namespace: str,
    unique: str,
    tas: ControllerGroup,
    invariant_monitor: StartMonitor,
    evicted: list[str],
) -> None:
    """A single-host PodSet is gated, not pinned through podSetUpdates, so it can follow a repair."""
    s, monitor, wl = await admitted(
        kube, namespace, tas, invariant_monitor, pool(unique, "n1", 1, 1, 2), ("one", 4, RACK_LABEL)
    )
    ((victim, count),) = hosts(wl).items()
    assert count == 4 and not workloads.pod_set_updates(entry_of(wl, s))["main"].get("nodeSelector")
    await eventually("pods of one running", lambda: _running(kube, namespace, "one", 4), 90)
    lost = await fail_and_evict(kube, namespace, [victim], evicted)
    wl = await repaired(kube, s, "one")
    ((spare, moved),) = hosts(wl).items()
    assert spare != victim and moved == 4
    assert without_note(entry_of(wl, s)["message"]).startswith(f"node {victim} NotReady for "), entry_of(wl, s)
    await replacements_running_on(kube, namespace, "one", {spare}, 4)
    await force_delete(kube, namespace, lost)
    await job_finished(kube, namespace, "one")
    assert monitor.checker.checks["domain-overfill"] > 0 and monitor.violations == [], monitor.report()


async def _running(kube: Kube, namespace: str, job: str, count: int) -> bool:
    pods = await pods_raw(kube, namespace, f"job-name={job}")
    running: int = sum((p.get("status") or {}).get("phase") == "Running" for p in pods)
    return running >= count


# --- (b) two nodes of two racks fail at once --------------------------------------------------


async def test_two_failed_nodes_of_two_racks_are_repaired_in_one_decision(
    kube: Kube,
    namespace: str,
    unique: str,
    tas: ControllerGroup,
    invariant_monitor: StartMonitor,
    evicted: list[str],
) -> None:
    s = await st.tas_stack(kube, namespace, tas.controller_name, pool(unique, "nt", 2, 3, 2))
    monitor = await watch(invariant_monitor, s)
    racks = st.host_racks(s.pool)
    await jobs.create_job(kube, namespace, train_job("train", 32, BLOCK_LABEL, RUN_FOR))
    wl = await workloads.wait_check(kube, s, "train", ("Ready",))
    before = hosts(wl)
    await eventually("pods of train running", lambda: _running(kube, namespace, "train", 32), 90)
    by_rack: dict[str, str] = {}
    for h in sorted(before, key=lambda h: -before[h]):
        by_rack.setdefault(racks[h], h)
    victims = sorted(by_rack.values())[:2]
    assert len({racks[v] for v in victims}) == 2
    lost = await fail_and_evict(kube, namespace, victims, evicted)
    wl = await repaired(kube, s, "train")
    events = await events_of(kube, wl, "TopologyRepaired")
    assert len(events) == 1, [e.get("note") for e in events]  # one decision for both
    note = events[0].get("note") or ""
    assert note.startswith(f"nodes {victims[0]} NotReady for ") and f", {victims[1]} NotReady for " in note, note
    after = hosts(wl)
    assert not set(victims) & set(after) and sum(after.values()) == 32
    assert len({block_of(h) for h in after}) == 1
    await force_delete(kube, namespace, lost)
    await job_finished(kube, namespace, "train")
    assert monitor.checker.checks["domain-overfill"] > 0 and monitor.violations == [], monitor.report()


# --- (c) no room: Wait, then a node is added; Requeue evicts and re-admits --------------------


async def test_wait_keeps_pods_gated_until_a_node_is_added(
    kube: Kube,
    namespace: str,
    unique: str,
    tas: ControllerGroup,
    invariant_monitor: StartMonitor,
    evicted: list[str],
) -> None:
    s = await st.tas_stack(kube, namespace, tas.controller_name, pool(unique, "nw", 1, 1, 2))
    monitor = await watch(invariant_monitor, s)
    await jobs.create_job(kube, namespace, train_job("full", 16, RACK_LABEL, "5m"))
    wl = await workloads.wait_check(kube, s, "full", ("Ready",))
    await eventually("pods of full running", lambda: _running(kube, namespace, "full", 16), 90)
    victim = sorted(hosts(wl))[0]
    await fail_and_evict(kube, namespace, [victim], evicted)
    wl = await _event_appears(kube, s, "full", "TopologyRepairPending", GRACE_S + 30)
    message = entry_of(wl, s)["message"]
    assert entry_of(wl, s)["state"] == "Ready"
    # Topology health's note on the rack no longer whole may stand in front of the repair's.
    assert f"node {victim} NotReady for " in message, message
    # The rack is full of the Job's own pods: only a node can make room, and the note says so.
    assert "waiting for the failed nodes to serve again or for new nodes (nodeFailurePolicy Wait)" in message

    async def replacements_gated() -> bool:
        pods = await pods_raw(kube, namespace, "job-name=full")
        fresh = [p for p in pods if not p["metadata"].get("deletionTimestamp") and not p["spec"].get("nodeName")]
        return len(fresh) == 8 and all(is_gated(p) for p in fresh)

    await eventually("the 8 replacements stay gated", replacements_gated, 60)
    new = await st.add_node(kube, s.pool, 1, 1, 3)
    wl = await repaired(kube, s, "full", 60)
    assert hosts(wl)[new] == 8
    await replacements_running_on(kube, namespace, "full", {new}, 8)
    assert monitor.checker.checks["domain-overfill"] > 0 and monitor.violations == [], monitor.report()


async def test_requeue_evicts_after_the_timeout_and_the_job_is_admitted_elsewhere(
    kube: Kube,
    namespace: str,
    unique: str,
    tas_factory: Callable[..., Awaitable[ControllerGroup]],
    invariant_monitor: StartMonitor,
    evicted: list[str],
) -> None:
    group = await tas_factory(
        replicas=1,
        KUEUE_TAS_NODE_FAILURE_POLICY="Requeue",
        KUEUE_TAS_NODE_FAILURE_REQUEUE_AFTER_SECONDS="15",
        KUEUE_TAS_NODE_FAILURE_GRACE_SECONDS="5",
    )
    s = await st.tas_stack(kube, namespace, group.controller_name, pool(unique, "nq", 1, 2, 2))
    monitor = await watch(invariant_monitor, s)
    racks = st.host_racks(s.pool)
    await jobs.create_job(kube, namespace, train_job("full", 16, RACK_LABEL, "5m"))
    wl = await workloads.wait_check(kube, s, "full", ("Ready",))
    first_rack = {racks[h] for h in hosts(wl)}
    assert len(first_rack) == 1
    await eventually("pods of full running", lambda: _running(kube, namespace, "full", 16), 90)
    victim = sorted(hosts(wl))[0]
    lost = await fail_and_evict(kube, namespace, [victim], evicted)
    wl = await _event_appears(kube, s, "full", "TopologyRepairImpossible", 60)
    await force_delete(kube, namespace, lost)

    async def readmitted() -> dict[str, Any] | None:
        w = await workloads.workload_of(kube, namespace, "full")
        if w is None:
            return None
        entry = workloads.check_entry(w, s.check)
        placed = {racks.get(h) for h in hosts(w)} if workloads.assignment(w) else set()
        return w if entry and entry.get("state") == "Ready" and placed and placed != first_rack else None

    wl = await eventually("Job full re-admitted in the other rack", readmitted, 120)
    assert victim not in hosts(wl)
    await replacements_running_on(kube, namespace, "full", set(hosts(wl)), 16)
    assert monitor.checker.checks["domain-overfill"] > 0 and monitor.violations == [], monitor.report()


async def _event_appears(kube: Kube, s: st.TasStack, job: str, reason: str, timeout_s: float) -> dict[str, Any]:
    async def seen() -> dict[str, Any] | None:
        wl = await workloads.workload_of(kube, s.namespace, job)
        return wl if wl is not None and await events_of(kube, wl, reason) else None

    return await eventually(f"{reason} Event for Job {job}", seen, timeout_s)
