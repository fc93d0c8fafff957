"""Kueue's advanced TAS on the real local cluster: PodSet groups, multi-layer slices, balanced placement.

Each scenario pre-fills the pool with bound non-queue pods so that the placement that ignores the
feature differs from the one that honours it: the assertions fail if the feature is dropped.
Pools are 1 block x 2 racks x 2 hosts of 8 GPUs, private to the test.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Awaitable, Callable

from e2e import jobs, workloads
from e2e import stack as st
from e2e.controller import ControllerGroup
from e2e.kube import Kube, eventually
from e2e.nodes import RACK_LABEL, NodePool
from e2e.pods import create_bound_pod, is_live, pods_of
from kueue_tas.api.constants import HOSTNAME_LABEL

DECIDED = ("Ready", "Retry", "Rejected")
# Literal keys on purpose: the test states the public annotation names.
GROUP = jobs.PREFIX + "podset-group-name"
SLICE_LAYERS = jobs.PREFIX + "podset-slice-required-topology-constraints"


def pool(unique: str, prefix: str) -> NodePool:
    return NodePool(name=f"{prefix}{unique}", blocks=1, racks_per_block=2, hosts_per_rack=2)


async def occupy(kube: Kube, namespace: str, gpus_per_host: dict[str, int]) -> None:
    for host, gpus in gpus_per_host.items():
        if gpus:
            await create_bound_pod(kube, namespace, f"fill-{host}", host, gpu=gpus)


async def bound_by_node(kube: Kube, namespace: str, selector: str, n: int) -> Counter[str]:
    async def all_bound() -> Counter[str] | None:
        pods = [p for p in await pods_of(kube, namespace, selector) if is_live(p)]
        if len(pods) == n and all(p["spec"].get("nodeName") for p in pods):
            return Counter(p["spec"]["nodeName"] for p in pods)
        return None

    return await eventually(f"{n} pods ({selector}) bound", all_bound, 90)


async def test_leader_and_workers_of_a_group_share_one_rack(
    kube: Kube, namespace: str, unique: str, tas: ControllerGroup
) -> None:
    s = await st.tas_stack(kube, namespace, tas.controller_name, pool(unique, "g"))
    racks = st.host_racks(s.pool)
    r1 = sorted(h for h, r in racks.items() if r.endswith("-r1"))
    # Rack 1 keeps one free GPU: alone, the 1-pod leader would take it (BestFit) and the workers
    # would go to rack 2; as a group both must go to rack 2, the only rack with room for 16.
    await occupy(kube, namespace, {r1[0]: 8, r1[1]: 7})
    ann = {GROUP: "lws"}
    leader = jobs.pod_template(required=RACK_LABEL, annotations=ann)
    workers = jobs.pod_template(required=RACK_LABEL, annotations=ann)
    await jobs.create_jobset(
        kube,
        namespace,
        jobs.jobset("lws", [("leader", 1, 1, leader), ("workers", 1, 15, workers)]),
    )

    wl = await workloads.wait_check(kube, s, "lws", DECIDED, owner_kind="JobSet")
    entry = workloads.check_entry(wl, s.check)
    assert entry is not None and entry["state"] == "Ready", entry
    leader_racks = workloads.racks_of(wl, "leader", racks)
    worker_racks = workloads.racks_of(wl, "workers", racks)
    assert sum(leader_racks.values()) == 1 and sum(worker_racks.values()) == 15
    assert set(leader_racks) == set(worker_racks) and len(worker_racks) == 1, (
        leader_racks,
        worker_racks,
    )
    (rack,) = worker_racks
    assert rack.endswith("-r2")

    await workloads.wait_admitted(kube, s, "lws", owner_kind="JobSet")
    nodes = await bound_by_node(kube, namespace, "jobset.sigs.k8s.io/jobset-name=lws", 16)
    assert {racks[n] for n in nodes} == {rack}


async def test_three_layer_slices_land_whole(kube: Kube, namespace: str, unique: str, tas: ControllerGroup) -> None:
    s = await st.tas_stack(kube, namespace, tas.controller_name, pool(unique, "l"))
    racks = st.host_racks(s.pool)
    # 6 free GPUs per host: rack slices of 8 alone would split 6 + 2 over a rack's hosts; with host
    # slices of 4 underneath, every host must get exactly 4.
    await occupy(kube, namespace, dict.fromkeys(racks, 2))
    layers = [
        {"topology": RACK_LABEL, "size": 8},
        {"topology": HOSTNAME_LABEL, "size": 4},
    ]
    ann = {SLICE_LAYERS: json.dumps(layers)}
    await jobs.create_job(
        kube,
        namespace,
        jobs.job("sliced", 16, required=s.pool.block_label, annotations=ann),
    )

    wl = await workloads.wait_check(kube, s, "sliced", DECIDED)
    entry = workloads.check_entry(wl, s.check)
    assert entry is not None and entry["state"] == "Ready", entry
    per_host = Counter({values[-1]: n for values, n in workloads.domain_counts(wl, "main").items()})
    assert sum(per_host.values()) == 16
    assert all(n % 4 == 0 for n in per_host.values()), per_host
    per_rack: Counter[str] = Counter()
    for host, n in per_host.items():
        per_rack[racks[host]] += n
    assert all(n % 8 == 0 for n in per_rack.values()), per_rack

    await workloads.wait_admitted(kube, s, "sliced")
    nodes = await bound_by_node(kube, namespace, "batch.kubernetes.io/job-name=sliced", 16)
    assert nodes == per_host


async def test_balanced_placement_with_the_gate_in_the_controller_config(
    kube: Kube,
    namespace: str,
    unique: str,
    tas_factory: Callable[..., Awaitable[ControllerGroup]],
) -> None:
    group = await tas_factory(KUEUE_TAS_FEATURE_GATES="TASBalancedPlacement=true")
    s = await st.tas_stack(kube, namespace, group.controller_name, pool(unique, "p"))
    # 12 one-GPU pods preferring a rack of two 8-GPU hosts: BestFit fills one host (8 + 4);
    # balanced placement evens them out (6 + 6).
    await jobs.create_job(kube, namespace, jobs.job("even", 12, preferred=RACK_LABEL))

    wl = await workloads.wait_check(kube, s, "even", DECIDED)
    entry = workloads.check_entry(wl, s.check)
    assert entry is not None and entry["state"] == "Ready", entry
    per_host = Counter({values[-1]: n for values, n in workloads.domain_counts(wl, "main").items()})
    assert sorted(per_host.values()) == [6, 6], per_host
    racks = st.host_racks(s.pool)
    assert len({racks[h] for h in per_host}) == 1

    await workloads.wait_admitted(kube, s, "even")
    assert await bound_by_node(kube, namespace, "batch.kubernetes.io/job-name=even", 12) == per_host
