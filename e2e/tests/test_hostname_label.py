"""Issue 27, defect 1 on the real local cluster: Node names that differ from their
``kubernetes.io/hostname`` label (EKS: Node ``ip-10-0-0-1.ec2.internal`` labelled ``ip-10-0-0-1``).

Assignments name hosts by the label; the ungater, node repair and the stray-pod rule used to
look those values up as Node names, so on such a pool every gated pod stayed gated and node
repair called every Ready node deleted. Here a Job requiring a rack is admitted on an EKS-like
pool, all its pods are released and bound to the Nodes their hostnames name, and nothing moves.
The pool's nodes also offer ``10Ei`` of an extended resource (issue 27, defect 8: such a node
was taken for deleted).
"""

from __future__ import annotations

from collections import Counter

from e2e import jobs, workloads
from e2e import stack as st
from e2e.controller import ControllerGroup
from e2e.kube import Kube, consistently
from e2e.nodes import EKS_NAME_SUFFIX, POOL_LABEL, RACK_LABEL, default_allocatable, eks_pool
from e2e.pods import is_gated, is_live, pods_raw, selector_domain
from e2e.tests.admission_helpers import events_of
from e2e.tests.test_ungater import JOB_NAME, wait_placed
from kueue_tas.api.constants import HOSTNAME_LABEL, TOPOLOGY_ASSIGNMENT_ANNOTATION

HUGE = "example.com/huge"


async def test_a_rack_job_on_eks_named_nodes_is_released_bound_and_left_alone(
    kube: Kube, namespace: str, unique: str, tas: ControllerGroup
) -> None:
    pool = eks_pool(
        f"eks{unique}",
        blocks=1,
        racks_per_block=2,
        hosts_per_rack=2,
        allocatable={**default_allocatable(), HUGE: "10Ei"},
    )
    s = await st.tas_stack(kube, namespace, tas.controller_name, pool)
    listed = await kube.core.list_node(label_selector=f"{POOL_LABEL}={pool.name}")
    nodes = {n.metadata.name: dict(n.metadata.labels) for n in listed.items}
    assert len(nodes) == 4 and all(name == labels[HOSTNAME_LABEL] + EKS_NAME_SUFFIX for name, labels in nodes.items())
    by_host = {labels[HOSTNAME_LABEL]: name for name, labels in nodes.items()}

    # 12 one-GPU pods in one rack of two 8-GPU hosts: 8 on one host, 4 on the other (gated PodSet).
    await jobs.create_job(kube, namespace, jobs.job("j", 12, required=RACK_LABEL))
    wl = await workloads.wait_check(kube, s, "j", ("Ready", "Retry", "Rejected"))
    entry = workloads.require_entry(wl, s.check)
    assert entry["state"] == "Ready", entry
    counts = workloads.domain_counts(wl, "main")
    assert len(counts) == 2 and set(counts.values()) == {8, 4}, counts
    assert {h for (h,) in counts} <= set(by_host), f"the assignment names hostname labels: {counts}"
    assert len({nodes[by_host[h]][RACK_LABEL] for (h,) in counts}) == 1

    pods = await wait_placed(kube, namespace, f"{JOB_NAME}=j", 12, timeout_s=60)
    levels = workloads.podset_levels(wl, "main")
    assert [p["metadata"]["name"] for p in pods if is_gated(p)] == []
    assert Counter(selector_domain(p, levels) for p in pods) == counts
    for p in pods:
        pinned = selector_domain(p, levels)
        assert pinned is not None and p["spec"]["nodeName"] == by_host[pinned[-1]], f"{p['metadata']['name']} misplaced"

    # Node repair and the stray-pod rule see Ready nodes: nothing moves, no pod is deleted.
    annotation = wl["metadata"]["annotations"][TOPOLOGY_ASSIGNMENT_ANNOTATION]
    names = sorted(p["metadata"]["name"] for p in pods)

    async def unchanged() -> bool:
        current = await workloads.workload_of(kube, namespace, "j")
        if current is None:
            return False
        live = sorted(p["metadata"]["name"] for p in await pods_raw(kube, namespace, f"{JOB_NAME}=j") if is_live(p))
        return current["metadata"]["annotations"][TOPOLOGY_ASSIGNMENT_ANNOTATION] == annotation and live == names

    await consistently("the assignment and the pods stay as they are", unchanged, duration_s=8.0)
    for reason in ("TopologyRepaired", "TopologyRepairPending", "TopologyStrayPodTerminated"):
        assert await events_of(kube, wl, reason) == [], reason
