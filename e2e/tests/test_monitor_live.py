"""The invariant monitor on the real cluster catches what it exists to catch.

No kueue-tas here: the test plays a broken admission-check controller (its check's
``controllerName`` belongs to nobody), so it can write what kueue-tas must never write: two
Ready assignments for one 8-GPU host, and a Pending entry left without a message.
"""

from __future__ import annotations

from e2e import jobs, workloads
from e2e import stack as st
from e2e.kube import KUEUE_GROUP, KUEUE_VERSION, MERGE_PATCH, Kube, content_type, eventually, set_workload_check_state
from e2e.monitor import Monitor
from e2e.nodes import GPU, POOL_LABEL, NodePool
from kueue_tas.api import constants as kc
from kueue_tas.topology.assignment import DomainAssignment, TopologyAssignment
from kueue_tas.topology.codec.codec import encode_assignment_annotation


async def test_monitor_catches_double_booking_overfill_and_silence(kube: Kube, namespace: str, unique: str) -> None:
    pool = NodePool(name=f"m{unique}", blocks=1, racks_per_block=1, hosts_per_rack=2)
    fake_controller = f"kueue-tas.io/nobody-{unique}"
    # The stack of ``tas_stack``, but the test sets the check Active (no controller of ours runs).
    await kube.create_nodes(pool)
    topo, rf, ac, cq = f"topo-{pool.name}", f"rf-{pool.name}", f"ac-{pool.name}", f"cq-{pool.name}"
    await kube.create_topology(topo, pool.level_labels())
    await kube.create_resource_flavor(rf, node_labels={POOL_LABEL: pool.name})
    await kube.create_admission_check(ac, fake_controller, {"apiGroup": KUEUE_GROUP, "kind": "Topology", "name": topo})
    await kube.set_admission_check_active(ac)
    await kube.create_cluster_queue(
        cq,
        {rf: {"cpu": "1000", "memory": "1000Ti", GPU: "1000"}},
        admission_checks=[{"name": ac, "onFlavors": [rf]}],
    )
    await kube.wait_cluster_queue_active(cq)
    await kube.create_local_queue(namespace, "lq", cq)
    monitor = Monitor(
        kube.api, checks=[ac], namespace=namespace, node_selector=f"{POOL_LABEL}={pool.name}", pending_bound_s=4
    )
    await monitor.start()
    try:
        for name in ("a", "b", "c"):
            await jobs.create_job(kube, namespace, jobs.job(name, 6, gpu=1, run_for="1h"))
        stack = st.TasStack(namespace, pool, topo, rf, ac, cq)
        host = f"{pool.name}-b1-r1-h1"
        text = encode_assignment_annotation(
            [("main", TopologyAssignment((kc.HOSTNAME_LABEL,), (DomainAssignment((host,), 6),)))]
        )
        for name in ("a", "b"):  # both on one 8-GPU host: 12 GPUs
            wl = await workloads.wait_check(kube, stack, name, ("Pending",))
            wl_name = wl["metadata"]["name"]
            patch = {"metadata": {"annotations": {kc.TOPOLOGY_ASSIGNMENT_ANNOTATION: text}}}
            await kube.custom.patch_namespaced_custom_object(
                KUEUE_GROUP, KUEUE_VERSION, namespace, "workloads", wl_name, patch, **content_type(MERGE_PATCH)
            )
            labels = {kc.WORKLOAD_LABEL: wl["metadata"]["uid"], kc.PODSET_LABEL: "main"}
            await set_workload_check_state(
                kube,
                namespace,
                wl_name,
                ac,
                "Ready",
                message="placed (wrongly)",
                pod_set_updates=[{"name": "main", "labels": labels}],  # no gate, no nodeSelector
            )
        # "c" keeps its Pending entry with no message beyond the 4 s bound.

        async def caught() -> set[str] | None:
            kinds = {v.kind for v in monitor.violations}
            return kinds if {"double-booking", "silent-pending", "domain-overfill"} <= kinds else None

        found = await eventually("the monitor to record the violations", caught, 60)
        assert "node-overcommit" not in found  # the scheduler kept each node within its allocatable
        booking = next(v for v in monitor.violations if v.kind == "double-booking")
        assert host in booking.subject and "nvidia.com/gpu 12 > 8" in booking.detail, booking
        silent = [v.subject for v in monitor.violations if v.kind == "silent-pending"]
        assert len(silent) == 1 and "job-c-" in silent[0], silent
    finally:
        await monitor.stop()
