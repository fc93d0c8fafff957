"""The admitter on the real local cluster, where capacity is short or contended: Retry explained
until a node is added, pods outside the queue subtracted, concurrent Jobs never sharing a rack,
and a controller restart mid-way double-booking nothing.

Every test gets a private pool of kwok nodes (1 block x 2 racks x 2 hosts, 8 GPUs each, so a
rack holds 16 one-GPU pods) and its own Topology/flavor/check/queues, so tests can share the
session's controller group (``tas``) without seeing each other's capacity.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Awaitable, Callable
from typing import Any

from e2e import jobs, workloads
from e2e import stack as st
from e2e.controller import ControllerGroup
from e2e.kube import KUEUE_GROUP, KUEUE_VERSION, Kube, consistently, content_type, eventually
from e2e.nodes import GPU, RACK_LABEL
from e2e.pods import create_bound_pod
from e2e.tests.admission_helpers import DECIDED, HOST_GPUS, entry_of, hosts, small_pool, wait_event
from kueue_tas.api.constants import HOSTNAME_LABEL

# --- b. no fit now: Retry, explained; fits once a node is added ------------------------------


async def test_no_fit_retries_with_explanation_then_admitted_after_node_added(
    kube: Kube, namespace: str, unique: str, tas: ControllerGroup
) -> None:
    s = await st.tas_stack(kube, namespace, tas.controller_name, small_pool(unique, "b"))
    racks = st.host_racks(s.pool)
    fill_racks = []
    for name in ("fill-1", "fill-2"):  # 10 GPUs in each rack: 6 left per rack
        await jobs.create_job(kube, namespace, jobs.job(name, 10, required=RACK_LABEL))
        wl = await workloads.wait_check(kube, s, name, DECIDED)
        assert entry_of(wl, s)["state"] == "Ready"
        fill_racks.append({racks[h] for h in hosts(wl)})
    assert fill_racks[0] != fill_racks[1] and all(len(r) == 1 for r in fill_racks)

    await jobs.create_job(kube, namespace, jobs.job("wait", 8, required=RACK_LABEL))
    wl = await workloads.wait_check(kube, s, "wait", ("Retry", "Ready", "Rejected"))
    entry = entry_of(wl, s)
    assert entry["state"] == "Retry", entry
    message = entry["message"]
    assert f'topology "{s.topology}" allows to fit only 6 out of 8 pod(s)' in message, message
    assert "Total nodes: 4; excluded: " in message and f'resource "{GPU}"' in message, message
    assert entry.get("requeueAfterSeconds", 0) > 0
    assert workloads.ASSIGNMENT_ANNOTATION not in (wl["metadata"].get("annotations") or {})
    event = await wait_event(kube, wl, "TopologyNotFitting")
    assert event["type"] == "Warning" and "allows to fit only 6 out of 8" in event["note"]

    new_host = await st.add_node(kube, s.pool, 1, 1, 3)
    racks[new_host] = "b1-r1"
    wl = await workloads.wait_check(kube, s, "wait", ("Ready", "Rejected"), timeout_s=45)
    assert entry_of(wl, s)["state"] == "Ready"
    assert workloads.racks_of(wl, "main", racks) == {"b1-r1": 8}
    assert new_host in hosts(wl)


# --- e. pods outside the queue reduce what fits -----------------------------------------------


async def test_daemonset_like_pods_are_subtracted(
    kube: Kube, namespace: str, unique: str, tas: ControllerGroup
) -> None:
    s = await st.tas_stack(kube, namespace, tas.controller_name, small_pool(unique, "e"))
    for rack in (1, 2):
        await create_bound_pod(kube, namespace, f"ds-r{rack}", f"{s.pool.name}-b1-r{rack}-h1", gpu=1)
    # 16 one-GPU pods fill an empty rack exactly; with one GPU taken in each rack none fits.
    await jobs.create_job(kube, namespace, jobs.job("full-rack", 16, required=RACK_LABEL))
    wl = await workloads.wait_check(kube, s, "full-rack", DECIDED)
    entry = entry_of(wl, s)
    assert entry["state"] == "Retry", entry  # not Rejected: it fits on the empty topology
    assert "allows to fit only 15 out of 16 pod(s)" in entry["message"], entry["message"]

    await kube.core.delete_namespaced_pod("ds-r2", namespace, grace_period_seconds=0)
    wl = await workloads.wait_check(kube, s, "full-rack", ("Ready", "Rejected"), timeout_s=45)
    assert entry_of(wl, s)["state"] == "Ready"
    assert workloads.racks_of(wl, "main", st.host_racks(s.pool)) == {"b1-r2": 16}


# --- f. no double booking ----------------------------------------------------------------------


async def test_concurrent_jobs_never_share_a_rack_and_the_third_waits(
    kube: Kube, namespace: str, unique: str, tas: ControllerGroup
) -> None:
    s = await st.tas_stack(kube, namespace, tas.controller_name, small_pool(unique, "f"))
    racks = st.host_racks(s.pool)
    names = ("r-1", "r-2", "r-3")
    await asyncio.gather(*(jobs.create_job(kube, namespace, jobs.job(n, 16, required=RACK_LABEL)) for n in names))
    wls = {n: await workloads.wait_check(kube, s, n, DECIDED) for n in names}
    states = {n: entry_of(wl, s)["state"] for n, wl in wls.items()}
    ready = sorted(n for n, state in states.items() if state == "Ready")
    assert len(ready) == 2, states
    (waiting,) = set(names) - set(ready)
    assert states[waiting] == "Retry", states
    assert "doesn't allow to fit any of 16 pod(s)" in entry_of(wls[waiting], s)["message"]
    held = [workloads.racks_of(wls[n], "main", racks) for n in ready]
    assert held[0].keys() != held[1].keys() and all(list(h.values()) == [16] for h in held)

    async def still_waiting() -> bool:
        wl = await workloads.workload_of(kube, namespace, waiting)
        return wl is not None and (workloads.check_entry(wl, s.check) or {}).get("state") != "Ready"

    await consistently(f"{waiting} not admitted while both racks are held", still_waiting, 4)

    freed = ready[0]
    await jobs.delete_job(kube, namespace, freed)
    await workloads.wait_workload_gone(kube, namespace, freed)
    wl = await workloads.wait_check(kube, s, waiting, ("Ready", "Rejected"), timeout_s=45)
    assert entry_of(wl, s)["state"] == "Ready"
    assert workloads.racks_of(wl, "main", racks) == held[0]


# --- g. controller restart mid-way -------------------------------------------------------------


async def test_restart_mid_way_double_books_nothing(
    kube: Kube, namespace: str, unique: str, tas_factory: Callable[..., Awaitable[ControllerGroup]]
) -> None:
    group = await tas_factory(replicas=1)
    s = await st.tas_stack(kube, namespace, group.controller_name, small_pool(unique, "g"))
    racks = st.host_racks(s.pool)
    # Each job takes one whole host (8 x 1 GPU in one rack): 4 hosts hold exactly 4 of the 5.
    before: dict[str, dict[str, Any]] = {}
    for name in ("j1", "j2"):
        await jobs.create_job(kube, namespace, jobs.job(name, 8, required=RACK_LABEL))
        before[name] = await workloads.wait_check(kube, s, name, DECIDED)
        assert entry_of(before[name], s)["state"] == "Ready"

    await jobs.create_job(kube, namespace, jobs.job("j3", 8, required=RACK_LABEL))
    await workloads.wait_check(kube, s, "j3", ("Pending", *DECIDED))  # quota reserved: the decision may be in flight
    group.processes[0].kill()
    for name in ("j4", "j5"):
        await jobs.create_job(kube, namespace, jobs.job(name, 8, required=RACK_LABEL))
    # What a crash between the annotation write and the Ready entry leaves behind: an assignment
    # on a Workload whose entry is Pending. It must not hold capacity (here: every host).
    j4 = await workloads.wait_check(kube, s, "j4", ("Pending",))
    await stale_assignment(kube, j4, list(racks))

    await group.restart(group.processes[0])
    await group.wait_leader()
    names = ("j1", "j2", "j3", "j4", "j5")

    async def all_decided() -> dict[str, dict[str, Any]] | None:
        out: dict[str, dict[str, Any]] = {}
        for n in names:
            wl = await workloads.workload_of(kube, namespace, n)
            if wl is None:
                return None
            entry = workloads.check_entry(wl, s.check)
            if not entry or entry.get("state") not in ("Ready", "Retry"):
                return None
            out[n] = wl
        return out

    wls = await eventually("every job Ready or Retry after the restart", all_decided, 60)
    ready = [n for n in names if entry_of(wls[n], s)["state"] == "Ready"]
    assert len(ready) == 4, {n: entry_of(wls[n], s) for n in names}  # 4 hosts, one host each
    for name in ("j1", "j2"):  # admitted before the kill: kept as they were
        assert workloads.assignment(wls[name]) == workloads.assignment(before[name])
    per_host: Counter[str] = Counter()
    for n in ready:
        assert sum(hosts(wls[n]).values()) == 8
        per_host.update(hosts(wls[n]))
    assert all(per_host[h] <= HOST_GPUS for h in per_host), per_host
    per_rack: Counter[str] = Counter()
    for h, count in per_host.items():
        per_rack[racks[h]] += count
    assert all(v <= 2 * HOST_GPUS for v in per_rack.values()), per_rack
    assert sum(per_host.values()) == 4 * HOST_GPUS
    (retry,) = set(names) - set(ready)
    assert "doesn't allow to fit any of 8 pod(s)" in entry_of(wls[retry], s)["message"]


async def stale_assignment(kube: Kube, wl: dict[str, Any], hostnames: list[str]) -> None:
    """Write an assignment annotation claiming every host (8 pods each) on a Workload."""
    from kueue_tas.topology.assignment import DomainAssignment, TopologyAssignment
    from kueue_tas.topology.codec.codec import encode_assignment_annotation

    claim = TopologyAssignment((HOSTNAME_LABEL,), tuple(DomainAssignment((h,), HOST_GPUS) for h in sorted(hostnames)))
    patch = {
        "metadata": {"annotations": {workloads.ASSIGNMENT_ANNOTATION: encode_assignment_annotation([("main", claim)])}}
    }
    await kube.custom.patch_namespaced_custom_object(
        KUEUE_GROUP,
        KUEUE_VERSION,
        wl["metadata"]["namespace"],
        "workloads",
        wl["metadata"]["name"],
        patch,
        **content_type("application/merge-patch+json"),
    )
