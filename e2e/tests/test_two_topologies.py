"""Two Topologies at once, as on a real cluster with two GPU generations: each its own pool,
flavor, check and levels (one with a block level and kwok-style names, one with other label
keys, no block level and EKS-like Node names), one controller answering both. A Job on each
is placed by its own Topology's levels, pinned by its own label keys, onto its own pool's
Nodes; neither pool's capacity is counted for the other.
"""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import AsyncIterator

import pytest_asyncio

from e2e import jobs, workloads
from e2e import stack as st
from e2e.controller import ControllerGroup
from e2e.kube import Kube, as_body
from e2e.nodes import EKS_NAME_SUFFIX, POOL_LABEL, RACK_LABEL, NodePool
from e2e.pods import is_gated, selector_domain
from e2e.tests.test_ungater import JOB_NAME, wait_placed
from kueue_tas.api.constants import HOSTNAME_LABEL

OTHER_RACK = "topology.example.com/rack"
OTHER_BLOCK = "topology.example.com/block"


@pytest_asyncio.fixture(loop_scope="session")
async def second_namespace(kube: Kube) -> AsyncIterator[str]:
    """A second namespace for the second stack's LocalQueue (both stacks name theirs ``lq``)."""
    name = f"e2e-{uuid.uuid4().hex[:8]}"
    await kube.core.create_namespace(as_body({"metadata": {"name": name}}))
    try:
        yield name
    finally:
        await kube.core.delete_namespace(name, propagation_policy="Background")
        await kube.core.delete_collection_namespaced_pod(name, grace_period_seconds=0)


async def _placed(
    kube: Kube, s: st.TasStack, job: str, pods_total: int, level: str, topology_levels: list[str]
) -> tuple[dict[str, int], dict[str, str]]:
    """The Job's pods by Node name once all are bound, and the Nodes' ``level`` labels."""
    wl = await workloads.wait_check(kube, s, job, ("Ready", "Retry", "Rejected"))
    entry = workloads.require_entry(wl, s.check)
    assert entry["state"] == "Ready", entry
    levels = workloads.podset_levels(wl, "main")
    assert levels and set(levels) <= set(topology_levels), f"{job} placed by {levels}, its Topology: {topology_levels}"
    pods = await wait_placed(kube, s.namespace, f"{JOB_NAME}={job}", pods_total, timeout_s=60)
    assert not [p for p in pods if is_gated(p)]
    listed = await kube.core.list_node(label_selector=f"{POOL_LABEL}={s.pool.name}")
    labels = {n.metadata.name: dict(n.metadata.labels) for n in listed.items}
    by_host = {lb[HOSTNAME_LABEL]: name for name, lb in labels.items()}
    for p in pods:
        pinned = selector_domain(p, levels)
        assert pinned is not None, f"{p['metadata']['name']} not pinned by {levels}: {p['spec'].get('nodeSelector')}"
        assert p["spec"]["nodeName"] == by_host[pinned[-1]], f"{p['metadata']['name']} not on the Node its host names"
    return dict(Counter(p["spec"]["nodeName"] for p in pods)), {n: lb[level] for n, lb in labels.items()}


async def test_two_topologies_with_other_levels_and_names_each_place_their_own_job(
    kube: Kube, namespace: str, second_namespace: str, unique: str, tas: ControllerGroup
) -> None:
    kwok_pool = NodePool(name=f"ta{unique}", blocks=2, racks_per_block=1, hosts_per_rack=2)
    eks_pool = NodePool(
        name=f"tb{unique}",
        blocks=1,
        racks_per_block=2,
        hosts_per_rack=2,
        block_label=OTHER_BLOCK,
        rack_label=OTHER_RACK,
        name_suffix=EKS_NAME_SUFFIX,
    )
    a = await st.tas_stack(kube, namespace, tas.controller_name, kwok_pool)
    b_levels = [OTHER_RACK, HOSTNAME_LABEL]
    b = await st.tas_stack(kube, second_namespace, tas.controller_name, eks_pool, levels=b_levels)
    # 12 one-GPU pods fill 1.5 of a rack's two 8-GPU hosts in either pool.
    await jobs.create_job(kube, namespace, jobs.job("ja", 12, required=RACK_LABEL))
    await jobs.create_job(kube, second_namespace, jobs.job("jb", 12, required=OTHER_RACK))

    on_a, racks_a = await _placed(kube, a, "ja", 12, RACK_LABEL, kwok_pool.level_labels())
    on_b, racks_b = await _placed(kube, b, "jb", 12, OTHER_RACK, b_levels)
    assert set(on_a) <= set(racks_a) and len({racks_a[n] for n in on_a}) == 1, on_a
    assert set(on_b) <= set(racks_b) and len({racks_b[n] for n in on_b}) == 1, on_b
    assert all(n.endswith(EKS_NAME_SUFFIX) for n in on_b) and not any(n.endswith(EKS_NAME_SUFFIX) for n in on_a)
    assert sorted(on_a.values()) == sorted(on_b.values()) == [4, 8]

    # A second 12-pod Job on pool B no longer fits a rack there (4 GPUs left in the used rack,
    # 16 in the other): it must take B's other rack, not capacity of pool A.
    await jobs.create_job(kube, second_namespace, jobs.job("jb2", 12, required=OTHER_RACK))
    on_b2, _ = await _placed(kube, b, "jb2", 12, OTHER_RACK, b_levels)
    assert set(on_b2) <= set(racks_b) and {racks_b[n] for n in on_b2}.isdisjoint({racks_b[n] for n in on_b})
