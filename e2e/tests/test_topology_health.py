"""Issue 13 "Done when" (d) and (e) on the real local cluster.

(d) The Topology loses the rack level. Kueue's Topology levels are immutable, so "losing a
    level" is the Topology deleted and created again without it: first the entry says the
    Topology no longer exists, then that the rack level is no longer available; our entry
    stays Ready, a Warning Event says it, ``kueue-tas describe`` shows it, and when the Topology
    is back as it was the note goes and a Normal Event says so. The pods never move.
(e) Kueue preempts a low-priority TAS Job for a high-priority one (ClusterQueue
    ``preemption.withinClusterQueue: LowerPriority``, quota for one of them): the low one's
    capacity is released (kueue-tas capacity shows only the high one once its pods are gone),
    and when the high one is deleted the low one is admitted again and placed afresh.

In both, the invariant monitor (``invariant_monitor``) checks throughout that no domain ever
holds more of a Job's live released pods than its current assignment gives it (nor a node more
than its allocatable, nor a pod is released outside its assignment).
"""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import Awaitable, Callable
from typing import Any

from kubernetes_asyncio.client.exceptions import ApiException

from e2e import jobs, workloads
from e2e import stack as st
from e2e.cluster_state import State
from e2e.controller import ControllerGroup
from e2e.kube import KUEUE_GROUP, KUEUE_VERSION, Kube, condition, eventually
from e2e.monitor import Monitor
from e2e.nodes import BLOCK_LABEL, GPU, POOL_LABEL, RACK_LABEL, NodePool
from e2e.pods import is_live, pods_raw
from e2e.tests.admission_helpers import events_of, hosts
from e2e.tests.test_cli_live import cli
from kueue_tas.api.constants import HOSTNAME_LABEL

NOT_ENFORCED = "; placement not enforced. "
JOB_NAME = "batch.kubernetes.io/job-name"
StartMonitor = Callable[..., Awaitable[Monitor]]
HOST_GPUS = 8


async def wait_workload(
    kube: Kube, s: st.TasStack, job: str, what: str, ok: Callable[[dict[str, Any]], bool], timeout_s: float = 60
) -> dict[str, Any]:
    async def reached() -> dict[str, Any] | None:
        wl = await workloads.workload_of(kube, s.namespace, job)
        return wl if wl is not None and ok(wl) else None

    return await eventually(f"Workload of Job {job}: {what}", reached, timeout_s)


def message(wl: dict[str, Any], s: st.TasStack) -> str:
    return str(workloads.require_entry(wl, s.check).get("message", ""))


def state(wl: dict[str, Any], s: st.TasStack) -> str:
    return str(workloads.require_entry(wl, s.check).get("state", ""))


async def delete_topology(kube: Kube, name: str) -> None:
    with contextlib.suppress(ApiException):
        await kube.custom.delete_cluster_custom_object(KUEUE_GROUP, KUEUE_VERSION, "topologies", name)

    async def gone() -> bool:
        try:
            await kube.get_cluster_object(KUEUE_GROUP, KUEUE_VERSION, "topologies", name)
        except ApiException as e:
            return e.status == 404
        return False

    await eventually(f"Topology {name} deleted", gone, 30)


async def wait_event_saying(kube: Kube, wl: dict[str, Any], reason: str, text: str) -> dict[str, Any]:
    async def found() -> dict[str, Any] | None:
        return next((e for e in await events_of(kube, wl, reason) if text in str(e.get("note", ""))), None)

    return await eventually(f"{reason} Event saying {text!r}", found, 30)


async def bound(kube: Kube, namespace: str, job: str, n: int) -> list[dict[str, Any]]:
    async def all_bound() -> list[dict[str, Any]] | None:
        pods = [p for p in await pods_raw(kube, namespace, f"{JOB_NAME}={job}") if is_live(p)]
        return pods if len(pods) == n and all(p["spec"].get("nodeName") for p in pods) else None

    return await eventually(f"{n} pods of Job {job} bound", all_bound, 90)


# --- d. the Topology loses its rack level ------------------------------------------------------


async def test_topology_losing_its_rack_level_is_said_described_and_recovered(
    kube: Kube,
    namespace: str,
    unique: str,
    tas: ControllerGroup,
    cluster_state: State,
    invariant_monitor: StartMonitor,
) -> None:
    pool = NodePool(name=f"th{unique}", blocks=1, racks_per_block=2, hosts_per_rack=2)
    s = await st.tas_stack(kube, namespace, tas.controller_name, pool)
    monitor = await invariant_monitor([s.check], node_selector=f"{POOL_LABEL}={pool.name}")
    await jobs.create_job(kube, namespace, jobs.job("train", 12, required=RACK_LABEL))
    wl = await workloads.wait_admitted(kube, s, "train")
    admitted_message = message(wl, s)
    placed = hosts(wl)
    before = {p["metadata"]["name"]: p["spec"]["nodeName"] for p in await bound(kube, namespace, "train", 12)}

    await delete_topology(kube, s.topology)
    gone = f'Topology "{s.topology}" no longer exists'
    wl = await wait_workload(kube, s, "train", gone, lambda w: message(w, s).startswith(gone + NOT_ENFORCED))
    assert state(wl, s) == "Ready"
    assert message(wl, s) == f"{gone}{NOT_ENFORCED}{admitted_message}", "the record stays the message's end"

    await kube.create_topology(s.topology, [BLOCK_LABEL, HOSTNAME_LABEL])
    lost = f"topology level {RACK_LABEL} is no longer available"
    wl = await wait_workload(kube, s, "train", lost, lambda w: message(w, s).startswith(lost + NOT_ENFORCED))
    assert state(wl, s) == "Ready"
    event = await wait_event_saying(kube, wl, "TopologyPlacementNotEnforced", lost)
    assert event["type"] == "Warning" and event["note"] == f"{lost}; placement not enforced"

    run = await cli(tas, cluster_state.kubeconfig, "describe", "workload", "--for-job", "train", "-n", namespace)
    assert run.code == 0, run.err
    assert f"NOT ENFORCED: {lost}" in run.out, run.out
    assert lost in run.out.split("Check ")[1], "the check line shows the message"
    run = await cli(
        tas, cluster_state.kubeconfig, "describe", "workload", "--for-job", "train", "-n", namespace, "-o", "json"
    )
    assert run.code == 0, run.err
    assert run.json["placementNotEnforced"] == [lost]

    # Back as it was: the note goes, a Normal Event says so.
    await delete_topology(kube, s.topology)
    await kube.create_topology(s.topology, s.levels)
    wl = await wait_workload(kube, s, "train", "message restored", lambda w: message(w, s) == admitted_message)
    assert state(wl, s) == "Ready"
    restored = await wait_event_saying(kube, wl, "TopologyPlacementRestored", "placement enforced again")
    assert restored["type"] == "Normal"
    assert monitor.checker.checks["domain-overfill"] > 0 and monitor.violations == [], monitor.report()
    # Nothing moved: the same pods on the same nodes, the same assignment.
    after = {p["metadata"]["name"]: p["spec"]["nodeName"] for p in await bound(kube, namespace, "train", 12)}
    assert after == before
    assert hosts(wl) == placed


# --- e. preemption releases the low job's capacity; re-admission places it afresh ---------------


async def capacity_free(tas: ControllerGroup, kubeconfig: str, s: st.TasStack) -> dict[str, int]:
    """Free GPUs per host, as ``kueue-tas capacity`` computes them."""
    run = await cli(tas, kubeconfig, "capacity", "--topology", s.topology, "-o", "json")
    assert run.code == 0, run.err
    (topo,) = [t for t in run.json["topologies"] if t["name"] == s.topology]
    (flavor,) = topo["flavors"]
    # Leaves carry every level's value (block, rack, host).
    return {
        d["values"][-1]: int(d["free"][GPU])
        for lvl in flavor["levels"]
        for d in lvl["domains"]
        if len(d["values"]) == len(s.levels)
    }


async def test_preempted_job_releases_its_capacity_and_is_placed_afresh(
    kube: Kube,
    namespace: str,
    unique: str,
    tas: ControllerGroup,
    cluster_state: State,
    invariant_monitor: StartMonitor,
) -> None:
    pool = NodePool(name=f"pe{unique}", blocks=1, racks_per_block=2, hosts_per_rack=2)
    s = await st.priority_stack(kube, namespace, tas.controller_name, pool, gpu_quota=2 * HOST_GPUS)
    u = pool.name
    all_hosts = set(st.host_racks(pool))

    monitor = await invariant_monitor([s.check], node_selector=f"{POOL_LABEL}={pool.name}")
    await jobs.create_job(kube, namespace, st.prioritised(jobs.job("low", 16, required=RACK_LABEL), f"low-{u}"))
    low = await workloads.wait_admitted(kube, s, "low")
    first = workloads.assignment(low)
    await bound(kube, namespace, "low", 16)

    await jobs.create_job(kube, namespace, st.prioritised(jobs.job("high", 16, required=RACK_LABEL), f"high-{u}"))
    low = await wait_workload(
        kube, s, "low", "preempted", lambda w: (condition(w, "Evicted") or {}).get("status") == "True"
    )
    assert state(low, s) == "Pending", "Kueue resets our entry on eviction"
    high = await workloads.wait_admitted(kube, s, "high", timeout_s=120)
    high_hosts = hosts(high)
    await bound(kube, namespace, "high", 16)

    # Once the low Job's pods are gone, only the high one holds capacity.
    async def only_high() -> dict[str, int] | None:
        live = [p for p in await pods_raw(kube, namespace, f"{JOB_NAME}=low") if is_live(p)]
        if live:
            return None
        free = await capacity_free(tas, cluster_state.kubeconfig, s)
        want = {h: HOST_GPUS - high_hosts.get(h, 0) for h in all_hosts}
        return free if free == want else None

    await eventually("the preempted Job's capacity released", only_high, 90)

    # The high Job goes: the low one is admitted again and placed afresh.
    await jobs.delete_job(kube, namespace, "high")
    low = await wait_workload(
        kube,
        s,
        "low",
        "admitted again",
        lambda w: (condition(w, "Admitted") or {}).get("status") == "True" and state(w, s) == "Ready",
        timeout_s=120,
    )
    pods = await bound(kube, namespace, "low", 16)
    placed = hosts(low)
    assert sum(placed.values()) == 16
    assert Counter(p["spec"]["nodeName"] for p in pods) == placed
    # Capacity holds the new assignment once (its pods fill its slots), nothing of the old.
    free = await capacity_free(tas, cluster_state.kubeconfig, s)
    assert free == {h: HOST_GPUS - placed.get(h, 0) for h in all_hosts}
    assert first, "the first admission had an assignment"
    assert monitor.checker.checks["domain-overfill"] > 0 and monitor.violations == [], monitor.report()
