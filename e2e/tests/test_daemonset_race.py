"""The DaemonSet race on the real local cluster: a DaemonSet and a full-rack Job arrive together;
the Job must be placed on capacity that stays free, so that every Job pod and every daemon pod
runs (none Pending for lack of resources).

The pool (1 block x 2 racks x 2 hosts of 8 GPUs) has room for one 16-GPU rack Job only if the
daemon, which takes one GPU on each host of rack b1-r1, is counted before it runs. The daemon
pods are created by the real DaemonSet controller (kube-controller-manager) and run on kwok.

Two arrivals: plain (the daemon pods exist within moments), and one where the daemon's pods
are held by a scheduling gate of the test until the Job is decided. The gate stretches the
window in which a DaemonSet's pods exist but are bound nowhere (and before that, do not exist),
which is where a model that counts only bound pods would give the daemons' GPUs to the Job.

Only trusted DaemonSets reserve (issue 30: anyone with `edit` can create one): the plain race
runs its DaemonSet in a namespace a controller of its own lists in
``daemonset_reservation_namespaces``, the gated one with the system priority class
``system-node-critical``, which its controller lists in ``daemonset_reservation_priority_classes``
(empty by default). A tenant's DaemonSet in an unlisted namespace asking for more GPUs
than any node has, tolerating everything (the security review's case), holds nothing: the
full-rack Job beside it is admitted at once.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from kubernetes_asyncio import client

from e2e import jobs, workloads
from e2e import stack as st
from e2e.controller import ControllerGroup
from e2e.kube import Kube, as_body, consistently, content_type, eventually
from e2e.nodes import POOL_LABEL, RACK_LABEL
from e2e.pods import pods_raw
from e2e.tests.admission_helpers import DECIDED, entry_of, small_pool

HOLD_GATE = "e2e.kueue-tas.io/hold"
DAEMON_RACK = "b1-r1"
FREE_RACK = "b1-r2"
JOB_PODS = 16  # one GPU each: a whole rack


def daemonset(name: str, pool: str, *, gated: bool, priority: str | None = None) -> dict[str, Any]:
    labels = {"app": name}
    spec: dict[str, Any] = {
        "nodeSelector": {POOL_LABEL: pool, RACK_LABEL: DAEMON_RACK},
        "containers": [jobs.container(gpu=1)],
    }
    if gated:
        spec["schedulingGates"] = [{"name": HOLD_GATE}]
    if priority is not None:
        spec["priorityClassName"] = priority
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": name},
        "spec": {"selector": {"matchLabels": labels}, "template": {"metadata": {"labels": labels}, "spec": spec}},
    }


async def daemon_pods(kube: Kube, namespace: str, name: str) -> list[dict[str, Any]]:
    return await pods_raw(kube, namespace, f"app={name}")


async def release_gates(kube: Kube, namespace: str, name: str) -> None:
    for pod in await daemon_pods(kube, namespace, name):
        patch = [{"op": "remove", "path": "/spec/schedulingGates"}]
        await kube.core.patch_namespaced_pod(
            pod["metadata"]["name"], namespace, patch, **content_type("application/json-patch+json")
        )


def running(pods: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [p for p in pods if (p.get("status") or {}).get("phase") == "Running"]


def unschedulable(pods: list[dict[str, Any]]) -> list[str]:
    """Pods the scheduler could not place (e.g. Insufficient nvidia.com/gpu), with its reason."""
    out = []
    for p in pods:
        for cond in (p.get("status") or {}).get("conditions") or []:
            if cond.get("type") == "PodScheduled" and cond.get("reason") == "Unschedulable":
                out.append(f"{p['metadata']['name']}: {cond.get('message')}")
    return out


async def race(
    kube: Kube, namespace: str, unique: str, tas: ControllerGroup, *, gated: bool, priority: str | None = None
) -> None:
    s = await st.tas_stack(kube, namespace, tas.controller_name, small_pool(unique, "d"))
    racks = st.host_racks(s.pool)
    daemon_hosts = sorted(h for h, r in racks.items() if r == DAEMON_RACK)
    name = f"agent-{unique}"
    apps = client.AppsV1Api(kube.api)
    await asyncio.gather(
        apps.create_namespaced_daemon_set(
            namespace, as_body(daemonset(name, s.pool.name, gated=gated, priority=priority))
        ),
        jobs.create_job(kube, namespace, jobs.job("full-rack", JOB_PODS, required=RACK_LABEL)),
    )

    wl = await workloads.wait_check(kube, s, "full-rack", DECIDED)
    assert entry_of(wl, s)["state"] == "Ready", entry_of(wl, s)
    assert workloads.racks_of(wl, "main", racks) == {FREE_RACK: JOB_PODS}

    if gated:
        # The DaemonSet controller made its pods; none is bound while our gate holds them.
        async def created() -> list[dict[str, Any]] | None:
            pods = await daemon_pods(kube, namespace, name)
            return pods if len(pods) == len(daemon_hosts) else None

        pods = await eventually(f"{len(daemon_hosts)} pods of DaemonSet {name}", created, 30)
        assert not any(p["spec"].get("nodeName") for p in pods)
        await release_gates(kube, namespace, name)

    async def all_running() -> bool:
        job_pods = running(await pods_raw(kube, namespace, "job-name=full-rack"))
        daemons = running(await daemon_pods(kube, namespace, name))
        return len(job_pods) == JOB_PODS and sorted(p["spec"]["nodeName"] for p in daemons) == daemon_hosts

    await eventually("every Job pod and every daemon pod Running", all_running, 90)
    job_pods = await pods_raw(kube, namespace, "job-name=full-rack")
    assert {racks[p["spec"]["nodeName"]] for p in job_pods} == {FREE_RACK}

    async def nothing_pending() -> bool:
        pods = await pods_raw(kube, namespace)
        assert not unschedulable(pods), unschedulable(pods)
        return len(running(pods)) == JOB_PODS + len(daemon_hosts)

    await consistently("all pods keep running, none unschedulable", nothing_pending, 3)


async def test_a_daemonset_and_a_full_rack_job_arriving_together(
    kube: Kube, namespace: str, unique: str, tas_factory: Callable[..., Awaitable[ControllerGroup]]
) -> None:
    """The DaemonSet's namespace is listed (``daemonset_reservation_namespaces``)."""
    group = await tas_factory(replicas=1, KUEUE_TAS_DAEMONSET_RESERVATION_NAMESPACES=f"kube-system,{namespace}")
    await race(kube, namespace, unique, group, gated=False)


async def test_daemon_pods_not_bound_yet_still_hold_their_nodes(
    kube: Kube, namespace: str, unique: str, tas_factory: Callable[..., Awaitable[ControllerGroup]]
) -> None:
    """An unlisted namespace, but the pods' priority class is one a controller of its own lists
    (none is listed by default: any namespace may name a system class)."""
    group = await tas_factory(replicas=1, KUEUE_TAS_DAEMONSET_RESERVATION_PRIORITY_CLASSES="system-node-critical")
    await race(kube, namespace, unique, group, gated=True, priority="system-node-critical")


async def test_a_tenants_unschedulable_daemonset_holds_nothing(
    kube: Kube, namespace: str, unique: str, tas: ControllerGroup
) -> None:
    """The review's case: 9 GPUs on 8-GPU nodes, every taint tolerated, in a tenant's namespace
    no setting lists. Before the fix it took every host's 8 free GPUs and the Job got Retry."""
    s = await st.tas_stack(kube, namespace, tas.controller_name, small_pool(unique, "t"))
    name = f"hog-{unique}"
    labels = {"app": name}
    hog = {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": name},
        "spec": {
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    # Its own pool only, so the other tests' nodes are not touched.
                    "nodeSelector": {POOL_LABEL: s.pool.name},
                    "tolerations": [{"operator": "Exists"}],
                    "containers": [jobs.container(gpu=9)],
                },
            },
        },
    }
    await client.AppsV1Api(kube.api).create_namespaced_daemon_set(namespace, as_body(hog))

    async def created() -> list[dict[str, Any]] | None:
        pods = await daemon_pods(kube, namespace, name)
        return pods if len(pods) == len(st.host_racks(s.pool)) else None

    await eventually(f"the pods of DaemonSet {name}", created, 30)
    await jobs.create_job(kube, namespace, jobs.job("full-rack", JOB_PODS, required=RACK_LABEL))
    wl = await workloads.wait_check(kube, s, "full-rack", DECIDED)
    assert entry_of(wl, s)["state"] == "Ready", entry_of(wl, s)

    async def job_running() -> bool:
        return len(running(await pods_raw(kube, namespace, "job-name=full-rack"))) == JOB_PODS

    await eventually("every Job pod Running", job_running, 90)
    # The daemon never ran: no node has 9 GPUs.
    assert not running(await daemon_pods(kube, namespace, name))
