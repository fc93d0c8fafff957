"""The TopologyUngater on the real local cluster: every pod ends in its domain, exactly.

Each test submits a Job or JobSet to a private pool of kwok nodes, lets kueue-tas admit and
ungate it, and compares the pods the apiserver holds with the assignment on the Workload:
per domain, the live pods pinned there (by the nodeSelector the ungater wrote) and bound there
(by the scheduler) must equal the assigned count; none may keep our gate.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from e2e import jobs, workloads
from e2e import stack as st
from e2e.controller import ControllerGroup
from e2e.kube import Kube, consistently, eventually
from e2e.monitor import Monitor
from e2e.nodes import BLOCK_LABEL, POOL_LABEL, RACK_LABEL, NodePool, default_allocatable
from e2e.pods import GATE, PODSET_LABEL, is_gated, is_live, pods_raw, selector_domain
from kueue_tas.api.constants import HOSTNAME_LABEL

Pod = dict[str, Any]
Domain = tuple[str, ...]
JOB_NAME = "batch.kubernetes.io/job-name"
COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"
JOBSET_NAME = "jobset.sigs.k8s.io/jobset-name"
JOB_INDEX = "jobset.sigs.k8s.io/job-index"
REFUSED_REASON = "TopologyUngateFailed"
StartMonitor = Callable[..., Awaitable[Monitor]]


async def node_labels(kube: Kube, pool: NodePool) -> dict[str, dict[str, str]]:
    nodes = await kube.core.list_node(label_selector=f"{POOL_LABEL}={pool.name}")
    return {n.metadata.name: dict(n.metadata.labels) for n in nodes.items}


async def wait_placed(kube: Kube, namespace: str, selector: str, total: int, timeout_s: float = 30) -> list[Pod]:
    """The live pods once there are ``total`` of them and all are bound."""

    async def placed() -> list[Pod] | None:
        pods = [p for p in await pods_raw(kube, namespace, selector) if is_live(p)]
        return pods if len(pods) == total and all(p["spec"].get("nodeName") for p in pods) else None

    return await eventually(f"{total} pods ({selector}) bound", placed, timeout_s, interval_s=0.3)


def assert_exact(pods: list[Pod], wl: dict[str, Any], podset: str, nodes: dict[str, dict[str, str]]) -> None:
    """Live pods: none gated, per domain exactly the assigned count, each bound inside its domain."""
    levels = workloads.podset_levels(wl, podset)
    counts = workloads.domain_counts(wl, podset)
    live = [p for p in pods if is_live(p)]
    assert [p["metadata"]["name"] for p in live if is_gated(p)] == []
    pinned = Counter(selector_domain(p, levels) for p in live)
    assert dict(pinned) == counts, f"pods per domain (nodeSelector) {dict(pinned)} != assignment {counts}"
    for p in live:
        bound = tuple(nodes[p["spec"]["nodeName"]][k] for k in levels)
        assert bound == selector_domain(p, levels), f"pod {p['metadata']['name']} bound outside its domain"


def completion_index(pod: Pod) -> int:
    return int(pod["metadata"]["labels"][COMPLETION_INDEX])


async def test_job_spanning_three_racks_lands_exactly(
    kube: Kube, namespace: str, unique: str, tas: ControllerGroup, invariant_monitor: StartMonitor
) -> None:
    """Greedy mode (non-indexed Job): 40 one-GPU pods in one block of 3 racks x 2 hosts x 8 GPUs."""
    pool = NodePool(name=f"p{unique}", blocks=1, racks_per_block=3, hosts_per_rack=2)
    s = await st.tas_stack(kube, namespace, tas.controller_name, pool)
    monitor = await invariant_monitor([s.check], node_selector=f"{POOL_LABEL}={pool.name}")
    body = jobs.job("j", 40, required=BLOCK_LABEL, indexed=False)
    body["spec"]["template"]["spec"]["nodeSelector"] = {"kubernetes.io/os": "linux"}  # the user's own key
    await jobs.create_job(kube, namespace, body)
    wl = await workloads.wait_check(kube, s, "j", ("Ready", "Retry", "Rejected"))
    entry = workloads.require_entry(wl, s.check)
    assert entry["state"] == "Ready", entry
    nodes = await node_labels(kube, pool)
    counts = workloads.domain_counts(wl, "main")
    racks = Counter({nodes[h][RACK_LABEL]: 0 for (h,) in counts})
    for (host,), n in counts.items():
        racks[nodes[host][RACK_LABEL]] += n
    assert len(racks) == 3, f"the assignment should span 3 racks: {counts}"

    pods = await wait_placed(kube, namespace, f"{JOB_NAME}=j", 40)
    assert workloads.podset_levels(wl, "main") == (HOSTNAME_LABEL,)
    assert_exact(pods, wl, "main", nodes)
    assert Counter(nodes[p["spec"]["nodeName"]][RACK_LABEL] for p in pods) == racks
    await asyncio.sleep(monitor.confirm_s + monitor.tick_s)  # let the monitor confirm what it saw
    assert monitor.checker.checks["domain-overfill"] and monitor.checker.checks["bad-ungate"] >= 40
    for p in pods:
        sel = p["spec"]["nodeSelector"]
        # The patch added the domain and kept what the user and Kueue (flavor labels) had set.
        assert sel["kubernetes.io/os"] == "linux" and sel[POOL_LABEL] == pool.name, sel
        assert not p["spec"].get("schedulingGates"), p["spec"].get("schedulingGates")


async def test_indexed_job_follows_rank_order(
    kube: Kube, namespace: str, unique: str, tas: ControllerGroup, invariant_monitor: StartMonitor
) -> None:
    """Completion index i goes to slot i of the assignment expanded in order (8 + 8 + 4 over 3 hosts)."""
    pool = NodePool(name=f"p{unique}", blocks=1, racks_per_block=1, hosts_per_rack=3)
    s = await st.tas_stack(kube, namespace, tas.controller_name, pool)
    await invariant_monitor([s.check], node_selector=f"{POOL_LABEL}={pool.name}")
    await jobs.create_job(kube, namespace, jobs.job("j", 20, required=RACK_LABEL))
    wl = await workloads.wait_check(kube, s, "j", ("Ready", "Retry", "Rejected"))
    entry = workloads.require_entry(wl, s.check)
    assert entry["state"] == "Ready", entry
    assert len(workloads.domain_counts(wl, "main")) == 3

    pods = await wait_placed(kube, namespace, f"{JOB_NAME}=j", 20)
    assert_exact(pods, wl, "main", await node_labels(kube, pool))
    levels, want = workloads.podset_levels(wl, "main"), workloads.slots(wl, "main")
    got = {completion_index(p): selector_domain(p, levels) for p in pods}
    assert [got[i] for i in range(20)] == want


async def test_jobset_replicated_jobs_in_their_own_racks(
    kube: Kube, namespace: str, unique: str, tas: ControllerGroup
) -> None:
    """Two PodSets, each filling a rack: ``a`` (2 Jobs x 8 pods, ranked by job index) and ``b`` (1 x 16)."""
    pool = NodePool(name=f"p{unique}", blocks=1, racks_per_block=2, hosts_per_rack=2)
    s = await st.tas_stack(kube, namespace, tas.controller_name, pool)
    tmpl = jobs.pod_template(required=RACK_LABEL)
    await jobs.create_jobset(kube, namespace, jobs.jobset("js", [("a", 2, 8, tmpl), ("b", 1, 16, tmpl)]))
    wl = await workloads.wait_check(kube, s, "js", ("Ready", "Retry", "Rejected"), owner_kind="JobSet")
    entry = workloads.require_entry(wl, s.check)
    assert entry["state"] == "Ready", entry
    nodes = await node_labels(kube, pool)
    racks = {ps: {nodes[h][RACK_LABEL] for (h,) in workloads.domain_counts(wl, ps)} for ps in ("a", "b")}
    assert len(racks["a"]) == len(racks["b"]) == 1 and racks["a"] != racks["b"], racks

    for ps in ("a", "b"):
        pods = await wait_placed(kube, namespace, f"{JOBSET_NAME}=js,{PODSET_LABEL}={ps}", 16)
        assert_exact(pods, wl, ps, nodes)
        assert {nodes[p["spec"]["nodeName"]][RACK_LABEL] for p in pods} == racks[ps]
        levels, want = workloads.podset_levels(wl, ps), workloads.slots(wl, ps)
        job_size = 16 // (2 if ps == "a" else 1)
        got = {
            int(p["metadata"]["labels"][JOB_INDEX]) * job_size + completion_index(p): selector_domain(p, levels)
            for p in pods
        }
        assert [got[r] for r in range(16)] == want, f"PodSet {ps} not in rank order"


@pytest.mark.parametrize("indexed", [True, False], ids=["indexed", "non-indexed"])
async def test_deleted_pod_is_replaced_into_its_freed_slot(
    kube: Kube, namespace: str, unique: str, tas: ControllerGroup, indexed: bool
) -> None:
    """12 pods as 8 + 4 on two hosts; a pod of the 4-host is force-deleted; its replacement goes there."""
    pool = NodePool(name=f"p{unique}", blocks=1, racks_per_block=1, hosts_per_rack=2)
    s = await st.tas_stack(kube, namespace, tas.controller_name, pool)
    await jobs.create_job(kube, namespace, jobs.job("j", 12, required=RACK_LABEL, indexed=indexed))
    wl = await workloads.wait_check(kube, s, "j", ("Ready", "Retry", "Rejected"))
    counts = workloads.domain_counts(wl, "main")
    assert sorted(counts.values()) == [4, 8], counts
    nodes = await node_labels(kube, pool)
    pods = await wait_placed(kube, namespace, f"{JOB_NAME}=j", 12)
    assert_exact(pods, wl, "main", nodes)

    small = next(d for d, n in counts.items() if n == 4)
    levels = workloads.podset_levels(wl, "main")
    victim = next(p for p in pods if selector_domain(p, levels) == small)
    await kube.core.delete_namespaced_pod(victim["metadata"]["name"], namespace, grace_period_seconds=0)
    before = {p["metadata"]["uid"] for p in pods}

    async def replaced() -> list[Pod] | None:
        now = [p for p in await pods_raw(kube, namespace, f"{JOB_NAME}=j") if is_live(p)]
        fresh = [p for p in now if p["metadata"]["uid"] not in before]
        done = len(now) == 12 and len(fresh) == 1 and all(p["spec"].get("nodeName") for p in now)
        return now if done else None

    pods = await eventually("the deleted pod replaced, ungated and bound", replaced, 30, interval_s=0.3)
    assert_exact(pods, wl, "main", nodes)
    fresh = next(p for p in pods if p["metadata"]["uid"] not in before)
    assert selector_domain(fresh, levels) == small
    if indexed:
        assert completion_index(fresh) == completion_index(victim)


async def test_controller_killed_mid_ungating_ends_exact(
    kube: Kube, namespace: str, unique: str, tas_factory: Callable[..., Awaitable[ControllerGroup]]
) -> None:
    """200 pods over 7 hosts (30 pods each); SIGKILL after some are ungated; the restart finishes exactly.

    Patching one pod at a time makes ungating slow enough to kill half-way. A monitor checks
    throughout that no domain ever holds more ungated pods than its count.
    """
    group = await tas_factory(
        replicas=1, leader_election=False, KUEUE_TAS_PATCH_CONCURRENCY="1", KUEUE_TAS_UNGATE_BATCH_PERIOD_SECONDS="0.2"
    )
    proc = group.processes[0]
    alloc = default_allocatable() | {"pods": "30"}
    pool = NodePool(name=f"p{unique}", blocks=1, racks_per_block=2, hosts_per_rack=4, allocatable=alloc)
    s = await st.tas_stack(kube, namespace, group.controller_name, pool)
    total = 200
    await jobs.create_job(kube, namespace, jobs.job("j", total, gpu=0, required=BLOCK_LABEL, indexed=False))
    wl = await workloads.wait_check(kube, s, "j", ("Ready", "Retry", "Rejected"))
    entry = workloads.require_entry(wl, s.check)
    assert entry["state"] == "Ready", entry
    counts, levels = workloads.domain_counts(wl, "main"), workloads.podset_levels(wl, "main")
    selector = f"{JOB_NAME}=j"

    over: list[str] = []
    stop = asyncio.Event()

    def allowed(domain: tuple[str, ...] | None) -> int:
        return 0 if domain is None else counts.get(domain, 0)

    async def monitor() -> None:
        while not stop.is_set():
            pods = await pods_raw(kube, namespace, selector)
            ungated = Counter(selector_domain(p, levels) for p in pods if is_live(p) and not is_gated(p))
            # A pod without the full selector (None) is allowed nowhere.
            over.extend(f"{d}: {n} > {allowed(d)}" for d, n in ungated.items() if n > allowed(d))
            await asyncio.sleep(0.1)

    watcher = asyncio.create_task(monitor())
    try:

        async def some_ungated() -> int | None:
            pods = await pods_raw(kube, namespace, selector)
            n = sum(1 for p in pods if not is_gated(p))
            return n if n >= 10 else None

        seen = await eventually("first pods ungated", some_ungated, 30, interval_s=0.02)
        proc.kill()
        assert seen < total, "ungating finished before the kill; nothing was tested"
        await asyncio.sleep(1)  # patches already sent may still land
        pods = await pods_raw(kube, namespace, selector)
        done_before = sum(1 for p in pods if not is_gated(p))
        assert 0 < done_before < total, done_before

        t0 = time.monotonic()
        await group.restart(proc)
        pods = await wait_placed(kube, namespace, selector, total, timeout_s=40)
        finished_in = time.monotonic() - t0
    finally:
        stop.set()
        await watcher
    assert over == [], f"a domain held more pods than assigned: {over[:5]}"
    assert_exact(pods, wl, "main", await node_labels(kube, pool))
    # The restarted process released exactly the pods the killed one had not: none twice.
    ungated_after = next(
        float(line.split()[-1])
        for line in proc.metrics().splitlines()
        if line.startswith("kueue_tas_ungated_pods_total ")
    )
    assert ungated_after == total - done_before, (ungated_after, done_before, finished_in)


async def test_refused_patch_leaves_event_and_spares_other_pods(
    kube: Kube, namespace: str, unique: str, tas_factory: Callable[..., Awaitable[ControllerGroup]]
) -> None:
    """The user pins a gated pod to another host (allowed while gated: additions only); the ungater's
    patch, which would change that key, is refused: a Warning Event, the pod stays gated, the rest land."""
    group = await tas_factory(replicas=1, leader_election=False, KUEUE_TAS_UNGATE_BATCH_PERIOD_SECONDS="6")
    pool = NodePool(name=f"p{unique}", blocks=1, racks_per_block=1, hosts_per_rack=3)
    s = await st.tas_stack(kube, namespace, group.controller_name, pool)
    await jobs.create_job(kube, namespace, jobs.job("j", 12, required=RACK_LABEL))
    wl = await workloads.wait_check(kube, s, "j", ("Ready", "Retry", "Rejected"))
    entry = workloads.require_entry(wl, s.check)
    assert entry["state"] == "Ready", entry
    levels, want = workloads.podset_levels(wl, "main"), workloads.slots(wl, "main")
    assert levels == (HOSTNAME_LABEL,)

    async def first_pod() -> Pod | None:
        pods = await pods_raw(kube, namespace, f"{JOB_NAME}=j,{COMPLETION_INDEX}=0")
        return pods[0] if pods else None

    pod = await eventually("pod of index 0 exists", first_pod, 20, interval_s=0.1)
    assert is_gated(pod), "ungated before the test could pin it (batch period too short?)"
    name = pod["metadata"]["name"]
    other = next(h for h in (await node_labels(kube, pool)) if (h,) != want[0])
    await kube.core.patch_namespaced_pod(name, namespace, {"spec": {"nodeSelector": {HOSTNAME_LABEL: other}}})

    # Every other pod ends in its rank's domain; the refused one holds no slot.
    async def others_placed() -> list[Pod] | None:
        pods = [p for p in await pods_raw(kube, namespace, f"{JOB_NAME}=j") if is_live(p)]
        rest = [p for p in pods if p["metadata"]["name"] != name]
        return pods if len(rest) == 11 and all(p["spec"].get("nodeName") for p in rest) else None

    pods = await eventually("the 11 other pods bound", others_placed, 30, interval_s=0.3)
    for p in pods:
        if p["metadata"]["name"] == name:
            continue
        assert not is_gated(p)
        assert selector_domain(p, levels) == want[completion_index(p)]
        assert (p["spec"]["nodeName"],) == want[completion_index(p)]
    expected = Counter(want[1:])
    assert Counter(selector_domain(p, levels) for p in pods if p["metadata"]["name"] != name) == expected

    async def refused_events() -> tuple[list[dict[str, Any]], list[dict[str, Any]]] | None:
        on_pod = [
            e for e in await workloads.events_for(kube, namespace, name, kind="Pod") if e["reason"] == REFUSED_REASON
        ]
        on_wl = [
            e
            for e in await workloads.events_for(kube, namespace, wl["metadata"]["name"])
            if e["reason"] == REFUSED_REASON
        ]
        return (on_pod, on_wl) if on_pod and on_wl else None

    on_pod, on_wl = await eventually("TopologyUngateFailed events", refused_events, 15)
    for e in on_pod + on_wl:
        assert e["type"] == "Warning"
        note = e["note"]
        assert name in note and f"{HOSTNAME_LABEL}={want[0][0]}" in note and "nodeSelector" in note, note

    async def still_pinned_by_user() -> bool:
        cur = await kube.core.read_namespaced_pod(name, namespace)
        gates = [g.name for g in cur.spec.scheduling_gates or []]
        return GATE in gates and cur.spec.node_selector.get(HOSTNAME_LABEL) == other and not cur.spec.node_name

    await consistently("the refused pod stays gated with the user's selector", still_pinned_by_user, 2)
