"""Issue 31 "Deliver 4" (b), (c), (d) on the real local cluster: topology-driven preemption.

The pool: 1 block x 2 racks x 2 hosts of 8 GPUs (a rack holds 16). The ClusterQueue has quota
for the whole pool, so Kueue never preempts for quota: only the topology can make room. Two
low-priority Jobs of 10 pods take one rack each (6 GPUs left in each); a high-priority Job of
12 pods requiring a rack fits neither.

(b) With ``kueue-tas.io/topology-preemption: Enabled``, exactly the cheaper low Job (the later
    one: less work lost) is evicted and requeued through Kueue, the high Job is placed in the rack
    it left, and the evicted one waits with a message: it never goes back into that rack.
(c) With ``DryRun`` nothing is evicted; the high Job's message and Event say what would be.
(d) The invariant monitor watches throughout: no domain ever holds more than its capacity.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from e2e import jobs, workloads
from e2e import stack as st
from e2e.controller import ControllerGroup
from e2e.kube import Kube, condition_true, eventually
from e2e.monitor import Monitor
from e2e.nodes import POOL_LABEL, RACK_LABEL, NodePool
from e2e.tests.admission_helpers import entry_of, events_of, hosts

StartMonitor = Callable[..., Awaitable[Monitor]]
SWITCH = "kueue-tas.io/topology-preemption"


async def two_low_jobs(
    kube: Kube, namespace: str, unique: str, tas: ControllerGroup, invariant_monitor: StartMonitor, switch: str
) -> tuple[st.TasStack, Monitor, dict[str, str]]:
    """The stack, its monitor, and the rack each low Job runs in."""
    pool = NodePool(name=f"tp{unique}", blocks=1, racks_per_block=2, hosts_per_rack=2)
    s = await st.priority_stack(
        kube, namespace, tas.controller_name, pool, gpu_quota=1000, annotations={SWITCH: switch}
    )
    monitor = await invariant_monitor([s.check], node_selector=f"{POOL_LABEL}={pool.name}")
    racks = st.host_racks(pool)
    rack_of: dict[str, str] = {}
    for name in ("low-a", "low-b"):
        body = st.prioritised(jobs.job(name, 10, required=RACK_LABEL), f"low-{pool.name}")
        await jobs.create_job(kube, namespace, body)
        wl = await workloads.wait_admitted(kube, s, name)
        (rack,) = {racks[h] for h in hosts(wl)}
        rack_of[name] = rack
        await asyncio.sleep(2)  # low-b runs for less time than low-a: the cheaper victim
    assert rack_of["low-a"] != rack_of["low-b"]
    high = st.prioritised(jobs.job("high", 12, required=RACK_LABEL), f"high-{pool.name}")
    await jobs.create_job(kube, namespace, high)
    return s, monitor, rack_of


async def workload(kube: Kube, s: st.TasStack, job: str) -> dict[str, Any]:
    wl = await workloads.workload_of(kube, s.namespace, job)
    assert wl is not None, job
    return wl


async def test_a_high_priority_job_clears_the_cheapest_rack_through_kueue(
    kube: Kube, namespace: str, unique: str, tas: ControllerGroup, invariant_monitor: StartMonitor
) -> None:
    s, monitor, rack_of = await two_low_jobs(kube, namespace, unique, tas, invariant_monitor, "Enabled")
    racks = st.host_racks(s.pool)
    high = await workloads.wait_admitted(kube, s, "high", timeout_s=120)
    assert {racks[h] for h in hosts(high)} == {rack_of["low-b"]}
    # Exactly the chosen victim was evicted, with our Event naming the preemptor.
    (said,) = await events_of(kube, await workload(kube, s, "low-b"), "TopologyPreempted")
    assert said["type"] == "Warning" and 'for workload "' in said["note"] and "/job-high-" in said["note"], said
    assert f'"{rack_of["low-b"]}"' in said["note"]
    assert await events_of(kube, await workload(kube, s, "low-a"), "TopologyPreempted") == []
    low_a = await workload(kube, s, "low-a")
    assert condition_true(low_a, "Admitted") and not condition_true(low_a, "Evicted")
    assert entry_of(low_a, s)["state"] == "Ready"
    assert await events_of(kube, high, "TopologyPreemption")

    # The victim, requeued by Kueue, waits: 6 GPUs are left in low-a's rack and high's rack is
    # held for high (then full). It never goes back there while high runs.
    async def waiting() -> dict[str, Any] | None:
        wl = await workload(kube, s, "low-b")
        entry = workloads.check_entry(wl, s.check) or {}
        return wl if entry.get("state") in ("Pending", "Retry") and not condition_true(wl, "Admitted") else None

    await eventually("low-b requeued and waiting", waiting, 90)
    for _ in range(10):
        wl = await workload(kube, s, "low-b")
        assert not condition_true(wl, "Admitted"), "the victim came back while the preemptor runs"
        await asyncio.sleep(1)
    assert monitor.checker.checks["domain-overfill"] > 0 and monitor.violations == [], monitor.report()


async def test_dry_run_reports_what_it_would_evict_and_evicts_nothing(
    kube: Kube, namespace: str, unique: str, tas: ControllerGroup, invariant_monitor: StartMonitor
) -> None:
    s, monitor, _ = await two_low_jobs(kube, namespace, unique, tas, invariant_monitor, "DryRun")

    async def reported() -> dict[str, Any] | None:
        wl = await workloads.workload_of(kube, s.namespace, "high")
        entry = workloads.check_entry(wl, s.check) if wl else None
        return (
            wl
            if entry and "topology preemption (DryRun) would evict 1 workload(s)" in entry.get("message", "")
            else None
        )

    high = await eventually("high's DryRun report", reported, 90)
    assert "/job-low-b-" in entry_of(high, s)["message"]
    assert await events_of(kube, high, "TopologyPreemption")
    await asyncio.sleep(5)
    for name in ("low-a", "low-b"):
        wl = await workload(kube, s, name)
        assert condition_true(wl, "Admitted") and not condition_true(wl, "Evicted"), name
        assert await events_of(kube, wl, "TopologyPreempted") == []
    assert not condition_true(await workload(kube, s, "high"), "Admitted")
    assert monitor.violations == [], monitor.report()
