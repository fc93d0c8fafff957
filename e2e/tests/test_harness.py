"""The harness itself works: real Kueue admits Jobs and JobSets, kwok runs their pods, and the
real scheduler honours scheduling gates and nodeSelectors added while a pod is gated.
"""

from __future__ import annotations

from typing import Any

from kubernetes_asyncio import client

from e2e.kube import (
    JOBSET_GROUP,
    JOBSET_VERSION,
    KUEUE_GROUP,
    KUEUE_VERSION,
    QUEUE_LABEL,
    Kube,
    as_body,
    condition,
    condition_true,
    consistently,
    eventually,
    set_workload_check_state,
)
from e2e.manifests import POD_COMPLETE_DELAY_ANNOTATION
from e2e.nodes import GPU, POOL_LABEL, NodePool
from e2e.workloads import workload_of
from kueue_tas.api.constants import HOSTNAME_LABEL

QUOTA = {"cpu": "8", "memory": "32Gi", GPU: "16"}


async def _queue_setup(kube: Kube, namespace: str, unique: str, hosts: int = 2) -> tuple[NodePool, str]:
    """Nodes of a private pool, a flavor selecting them, a ClusterQueue and a LocalQueue 'lq'."""
    pool = NodePool(name=f"p{unique}", blocks=1, racks_per_block=1, hosts_per_rack=hosts)
    await kube.create_nodes(pool)
    await kube.create_resource_flavor(f"rf-{unique}", node_labels={POOL_LABEL: pool.name})
    await kube.create_cluster_queue(f"cq-{unique}", {f"rf-{unique}": QUOTA})
    await kube.wait_cluster_queue_active(f"cq-{unique}")
    await kube.create_local_queue(namespace, "lq", f"cq-{unique}")
    return pool, f"rf-{unique}"


def _container(cpu: str = "1", gpu: str | None = None) -> dict[str, Any]:
    requests = {"cpu": cpu, "memory": "1Gi"}
    if gpu:
        requests[GPU] = gpu
    return {
        "name": "main",
        "image": "registry.invalid/fake:1",
        "resources": {"requests": requests, "limits": {GPU: gpu} if gpu else {}},
    }


def _job(name: str, parallelism: int, cpu: str, *, delay: str = "2s", queue: str = "lq") -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "labels": {QUEUE_LABEL: queue}},
        "spec": {
            "suspend": True,
            "parallelism": parallelism,
            "completions": parallelism,
            "completionMode": "Indexed",
            "template": {
                "metadata": {"annotations": {POD_COMPLETE_DELAY_ANNOTATION: delay}},
                "spec": {"restartPolicy": "Never", "containers": [_container(cpu)]},
            },
        },
    }


async def test_job_is_admitted_by_kueue_and_completes(kube: Kube, namespace: str, unique: str) -> None:
    pool, flavor = await _queue_setup(kube, namespace, unique)
    await kube.batch.create_namespaced_job(namespace, as_body(_job("fits", parallelism=2, cpu="2")))
    # Over quota (8 cpu): must stay suspended, proving admission really gates the Job.
    await kube.batch.create_namespaced_job(namespace, as_body(_job("too-big", parallelism=3, cpu="4")))

    async def admitted() -> dict[str, Any] | None:
        wl = await workload_of(kube, namespace, "fits", "Job")
        return wl if wl and condition_true(wl, "Admitted") else None

    wl = await eventually("Workload of Job 'fits' Admitted", admitted, 60)
    assert wl["status"]["admission"]["clusterQueue"] == f"cq-{unique}"
    assert wl["status"]["admission"]["podSetAssignments"][0]["flavors"]["cpu"] == flavor

    async def complete() -> Any:
        job = await kube.batch.read_namespaced_job("fits", namespace)
        conds = {c.type: c.status for c in job.status.conditions or []}
        return job if conds.get("Complete") == "True" else None

    job = await eventually("Job 'fits' Complete", complete, 90)
    assert job.spec.suspend is False
    assert job.status.succeeded == 2

    pods = (await kube.core.list_namespaced_pod(namespace, label_selector="job-name=fits")).items
    assert pods, "the Job's pods should still exist after completion"
    pool_nodes = set(pool.node_names())
    for pod in pods:
        assert pod.status.phase == "Succeeded"
        assert pod.spec.node_name in pool_nodes
        # Kueue injected the flavor's nodeLabels into the pod template.
        assert pod.spec.node_selector == {POOL_LABEL: pool.name}

    big = await kube.batch.read_namespaced_job("too-big", namespace)
    assert big.spec.suspend is True
    big_wl = await workload_of(kube, namespace, "too-big", "Job")
    assert big_wl is not None and not condition_true(big_wl, "QuotaReserved")
    assert not (await kube.core.list_namespaced_pod(namespace, label_selector="job-name=too-big")).items


async def test_jobset_is_admitted_and_its_pods_run(kube: Kube, namespace: str, unique: str) -> None:
    pool, _ = await _queue_setup(kube, namespace, unique, hosts=2)
    pod_template = {
        "metadata": {"annotations": {POD_COMPLETE_DELAY_ANNOTATION: "1h"}},  # keep running
        "spec": {"restartPolicy": "Never", "containers": [_container("1", gpu="2")]},
    }
    jobset = {
        "apiVersion": f"{JOBSET_GROUP}/{JOBSET_VERSION}",
        "kind": "JobSet",
        "metadata": {"name": "js", "labels": {QUEUE_LABEL: "lq"}},
        "spec": {
            "suspend": True,
            "replicatedJobs": [
                {
                    "name": "leader",
                    "replicas": 1,
                    "template": {"spec": {"parallelism": 1, "completions": 1, "template": pod_template}},
                },
                {
                    "name": "workers",
                    "replicas": 2,
                    "template": {"spec": {"parallelism": 2, "completions": 2, "template": pod_template}},
                },
            ],
        },
    }
    await kube.custom.create_namespaced_custom_object(JOBSET_GROUP, JOBSET_VERSION, namespace, "jobsets", jobset)

    async def admitted() -> dict[str, Any] | None:
        wl = await workload_of(kube, namespace, "js", "JobSet")
        return wl if wl and condition_true(wl, "Admitted") else None

    wl = await eventually("Workload of JobSet 'js' Admitted", admitted, 60)
    assert sorted(ps["name"] for ps in wl["spec"]["podSets"]) == ["leader", "workers"]
    assert {ps["name"]: ps["count"] for ps in wl["spec"]["podSets"]} == {"leader": 1, "workers": 4}

    async def all_running() -> list[Any] | None:
        pods = (
            await kube.core.list_namespaced_pod(namespace, label_selector="jobset.sigs.k8s.io/jobset-name=js")
        ).items
        running = [p for p in pods if p.status.phase == "Running" and p.spec.node_name]
        return running if len(running) == 5 else None

    pods = await eventually("5 JobSet pods Running", all_running, 90)
    js = await kube.custom.get_namespaced_custom_object(JOBSET_GROUP, JOBSET_VERSION, namespace, "jobsets", "js")
    assert js["spec"]["suspend"] is False
    pool_nodes = set(pool.node_names())
    assert {p.spec.node_name for p in pods} <= pool_nodes
    # 5 pods x 2 GPUs on 8-GPU nodes: the scheduler had to use both nodes.
    assert len({p.spec.node_name for p in pods}) == 2


def _gated_pod(name: str, gate: str, cpu: str = "1") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {"schedulingGates": [{"name": gate}], "containers": [_container(cpu)]},
    }


async def test_gated_pod_waits_then_honours_node_selector(kube: Kube, namespace: str, unique: str) -> None:
    pool = NodePool(name=f"g{unique}", blocks=1, racks_per_block=2, hosts_per_rack=2)
    names = await kube.create_nodes(pool)
    target_a, target_b = names[1], names[3]
    # Fill the targets so that, left alone, the scheduler would prefer the other (empty) nodes.
    for i, node in enumerate((target_a, target_b)):
        filler = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": f"filler-{i}"},
            "spec": {"nodeName": node, "containers": [_container("24")]},
        }
        await kube.core.create_namespaced_pod(namespace, as_body(filler))
    gate = "example.com/topology"
    await kube.core.create_namespaced_pod(namespace, as_body(_gated_pod("two-step", gate)))
    await kube.core.create_namespaced_pod(namespace, as_body(_gated_pod("one-step", gate)))

    async def gated(name: str) -> bool:
        pod = await kube.core.read_namespaced_pod(name, namespace)
        conds = {c.type: c for c in pod.status.conditions or []}
        sched = conds.get("PodScheduled")
        return pod.spec.node_name is None and sched is not None and sched.reason == "SchedulingGated"

    await eventually("pods reported SchedulingGated", lambda: _all(gated, "two-step", "one-step"), 30)
    await consistently("gated pods stay unscheduled", lambda: _all(gated, "two-step", "one-step"), 3)

    # Two-step: add a nodeSelector while gated (allowed: additions only), then remove the gate.
    await kube.core.patch_namespaced_pod("two-step", namespace, {"spec": {"nodeSelector": {HOSTNAME_LABEL: target_a}}})
    await consistently("still gated after the nodeSelector patch", lambda: _all(gated, "two-step"), 2)
    await kube.core.patch_namespaced_pod(
        "two-step", namespace, {"spec": {"schedulingGates": [{"$patch": "delete", "name": gate}]}}
    )
    # One-step, as an ungater does it: remove the gate and add the nodeSelector in one patch.
    await kube.core.patch_namespaced_pod(
        "one-step",
        namespace,
        {
            "spec": {
                "schedulingGates": [{"$patch": "delete", "name": gate}],
                "nodeSelector": {HOSTNAME_LABEL: target_b},
            }
        },
    )

    async def running_on(name: str) -> Any:
        pod = await kube.core.read_namespaced_pod(name, namespace)
        return pod if pod.spec.node_name and pod.status.phase == "Running" else None

    two = await eventually("two-step pod Running", lambda: running_on("two-step"), 60)
    one = await eventually("one-step pod Running", lambda: running_on("one-step"), 60)
    assert two.spec.node_name == target_a
    assert one.spec.node_name == target_b
    assert not two.spec.scheduling_gates and not one.spec.scheduling_gates


async def _all(pred: Any, *names: str) -> bool:
    for n in names:
        if not await pred(n):
            return False
    return True


async def test_nodes_carry_topology_labels_and_no_taints(kube: Kube, unique: str) -> None:
    pool = NodePool(name=f"t{unique}", blocks=2, racks_per_block=2, hosts_per_rack=1)
    names = await kube.create_nodes(pool)
    node = await kube.core.read_node(names[-1])
    labels = node.metadata.labels
    assert labels["cloud.provider.com/topology-block"] == "b2"
    assert labels["cloud.provider.com/topology-rack"] == "b2-r2"
    assert labels[HOSTNAME_LABEL] == names[-1]
    assert not node.spec.taints
    assert node.status.allocatable[GPU] == "8"
    assert isinstance(node, client.V1Node)


async def test_admission_check_protocol_gates_admission(kube: Kube, namespace: str, unique: str) -> None:
    """The flow kueue-tas will drive: Kueue waits for our check, then applies its podSetUpdates."""
    pool = NodePool(name=f"a{unique}", blocks=1, racks_per_block=1, hosts_per_rack=3)
    names = await kube.create_nodes(pool)
    topology, check, flavor, cq = f"topo-{unique}", f"ac-{unique}", f"rf-{unique}", f"cq-{unique}"
    await kube.create_topology(topology, pool.level_labels())
    await kube.create_admission_check(
        check, f"kueue-tas.io/e2e-{unique}", {"apiGroup": KUEUE_GROUP, "kind": "Topology", "name": topology}
    )
    await kube.create_resource_flavor(flavor, node_labels={POOL_LABEL: pool.name})
    await kube.create_cluster_queue(cq, {flavor: QUOTA}, admission_checks=[{"name": check, "onFlavors": [flavor]}])

    async def cq_inactive_for_check() -> bool:
        obj = await kube.get_cluster_object(KUEUE_GROUP, KUEUE_VERSION, "clusterqueues", cq)
        c = condition(obj, "Active")
        return c is not None and c["status"] == "False" and c["reason"] == "AdmissionCheckInactive"

    await eventually("ClusterQueue inactive while the check is not Active", cq_inactive_for_check, 30)
    await kube.set_admission_check_active(check)
    await kube.wait_cluster_queue_active(cq)
    await kube.create_local_queue(namespace, "lq", cq)
    await kube.batch.create_namespaced_job(namespace, as_body(_job("checked", parallelism=2, cpu="1")))

    async def pending_check() -> dict[str, Any] | None:
        wl = await workload_of(kube, namespace, "checked", "Job")
        if not wl or not condition_true(wl, "QuotaReserved"):
            return None
        states = {c["name"]: c["state"] for c in wl["status"].get("admissionChecks") or []}
        return wl if states.get(check) == "Pending" else None

    wl = await eventually("quota reserved, check Pending", pending_check, 60)

    async def still_suspended() -> bool:
        job = await kube.batch.read_namespaced_job("checked", namespace)
        cur = await workload_of(kube, namespace, "checked", "Job")
        return bool(job.spec.suspend) and cur is not None and not condition_true(cur, "Admitted")

    await consistently("Job stays suspended while the check is Pending", still_suspended, 3)

    target = names[2]
    await set_workload_check_state(
        kube,
        namespace,
        wl["metadata"]["name"],
        check,
        "Ready",
        message="placed by the e2e test",
        pod_set_updates=[{"name": "main", "nodeSelector": {HOSTNAME_LABEL: target}}],
    )

    async def complete() -> Any:
        job = await kube.batch.read_namespaced_job("checked", namespace)
        conds = {c.type: c.status for c in job.status.conditions or []}
        return job if conds.get("Complete") == "True" else None

    await eventually("Job 'checked' Complete", complete, 90)
    pods = (await kube.core.list_namespaced_pod(namespace, label_selector="job-name=checked")).items
    assert len(pods) == 2
    assert {p.spec.node_name for p in pods} == {target}
    assert all(p.spec.node_selector == {POOL_LABEL: pool.name, HOSTNAME_LABEL: target} for p in pods)
