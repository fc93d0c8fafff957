"""Issue 31 "Deliver 4" (a) and (d) on the real local cluster: a rack-sized Job behind a stream
of 1-GPU Jobs.

The pool: 1 block x 2 racks x 2 hosts of 8 GPUs (a rack holds 16). Job "a" (10 pods, declared
runtime 60 s, runs 40 s) takes one rack, Job "b" (10 pods, declared 600 s) the other: 6 GPUs
free in each, 12 in all. Job "big" (12 pods, one rack) is blocked by fragmentation. Then twelve
1-GPU Jobs arrive (no declared runtime: unbounded), more than the free GPUs.

* With reservations on (``reservation_after_seconds``), "big" gets a's rack reserved (a ends
  first); the 1-GPU Jobs enter it only while "big" would still fit once "a" ends (at most 4),
  and "big" runs in that rack soon after "a" finishes.
* With them off (the default), the 1-GPU Jobs take every GPU "a" leaves, and "big" waits for as
  long as they run.

The invariant monitor watches both: no domain ever holds more than its capacity.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Awaitable, Callable
from typing import Any

from e2e import jobs, workloads
from e2e import stack as st
from e2e.controller import ControllerGroup
from e2e.kube import Kube, condition_true, eventually
from e2e.monitor import Monitor
from e2e.nodes import POOL_LABEL, RACK_LABEL, NodePool
from e2e.pods import pods_raw
from e2e.tests.admission_helpers import entry_of, hosts
from kueue_tas.api.constants import HOSTNAME_LABEL

StartMonitor = Callable[..., Awaitable[Monitor]]
MAX_EXEC = "kueue.x-k8s.io/max-exec-time-seconds"
STREAM = 12


def with_runtime(body: dict[str, Any], seconds: int) -> dict[str, Any]:
    body["metadata"].setdefault("labels", {})[MAX_EXEC] = str(seconds)
    return body


async def fragmented(
    kube: Kube, namespace: str, unique: str, controller_name: str, invariant_monitor: StartMonitor
) -> tuple[st.TasStack, Monitor, str]:
    """The stack with "a" and "b" running and "big" submitted; the rack "a" runs in."""
    pool = NodePool(name=f"rv{unique}", blocks=1, racks_per_block=2, hosts_per_rack=2)
    s = await st.tas_stack(kube, namespace, controller_name, pool)
    monitor = await invariant_monitor([s.check], node_selector=f"{POOL_LABEL}={pool.name}")
    racks = st.host_racks(pool)
    await jobs.create_job(kube, namespace, with_runtime(jobs.job("a", 10, required=RACK_LABEL, run_for="40s"), 60))
    (a_rack,) = {racks[h] for h in hosts(await workloads.wait_admitted(kube, s, "a"))}
    await jobs.create_job(kube, namespace, with_runtime(jobs.job("b", 10, required=RACK_LABEL, run_for="10m"), 600))
    (b_rack,) = {racks[h] for h in hosts(await workloads.wait_admitted(kube, s, "b"))}
    assert a_rack != b_rack
    await jobs.create_job(kube, namespace, jobs.job("big", 12, required=RACK_LABEL, run_for="10m"))
    return s, monitor, a_rack


async def stream(kube: Kube, namespace: str) -> None:
    for i in range(STREAM):
        await jobs.create_job(kube, namespace, jobs.job(f"small-{i}", 1, required=HOSTNAME_LABEL, run_for="10m"))


async def smalls_by_rack(kube: Kube, namespace: str, racks: dict[str, str]) -> Counter[str]:
    pods = await pods_raw(kube, namespace)
    on = [p for p in pods if p["metadata"]["name"].startswith("small-") and p["spec"].get("nodeName")]
    return Counter(racks.get(p["spec"]["nodeName"], "?") for p in on)


async def finished(kube: Kube, namespace: str, job: str, timeout_s: float = 120) -> None:
    async def complete() -> bool:
        raw = await kube.batch.read_namespaced_job(job, namespace)
        return condition_true(kube.api.sanitize_for_serialization(raw), "Complete")

    await eventually(f"Job {job} Complete", complete, timeout_s)


async def test_with_reservations_the_big_job_gets_its_rack_soon_after_it_frees(
    kube: Kube,
    namespace: str,
    unique: str,
    tas_factory: Callable[..., Awaitable[ControllerGroup]],
    invariant_monitor: StartMonitor,
) -> None:
    group = await tas_factory(replicas=1, KUEUE_TAS_RESERVATION_AFTER_SECONDS="5")
    s, monitor, a_rack = await fragmented(kube, namespace, unique, group.controller_name, invariant_monitor)

    async def reserved() -> dict[str, Any] | None:
        wl = await workloads.workload_of(kube, namespace, "big")
        entry = workloads.check_entry(wl, s.check) if wl else None
        return wl if entry and f'"{a_rack}" is reserved for this workload' in str(entry.get("message", "")) else None

    await eventually("a's rack reserved for big", reserved, 90)
    await stream(kube, namespace)
    big = await workloads.wait_admitted(kube, s, "big", timeout_s=180)
    racks = st.host_racks(s.pool)
    assert {racks[h] for h in hosts(big)} == {a_rack}
    assert entry_of(big, s)["state"] == "Ready"
    # The 1-GPU Jobs used a's rack only as far as big still fitted once "a" ended.
    assert (await smalls_by_rack(kube, namespace, racks))[a_rack] <= 4
    assert monitor.checker.checks["domain-overfill"] > 0 and monitor.violations == [], monitor.report()


async def test_without_reservations_the_stream_keeps_the_big_job_waiting(
    kube: Kube, namespace: str, unique: str, tas: ControllerGroup, invariant_monitor: StartMonitor
) -> None:
    s, monitor, a_rack = await fragmented(kube, namespace, unique, tas.controller_name, invariant_monitor)
    await stream(kube, namespace)
    await finished(kube, namespace, "a")
    racks = st.host_racks(s.pool)
    # Every GPU "a" left went to the stream; "big" waits while it runs.
    for _ in range(30):
        big = await workloads.workload_of(kube, namespace, "big")
        assert big is not None and not condition_true(big, "Admitted"), "big started although the stream runs"
        await asyncio.sleep(1)
    assert (await smalls_by_rack(kube, namespace, racks))[a_rack] >= 6
    assert monitor.violations == [], monitor.report()
