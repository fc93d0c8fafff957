"""Failing nodes on the local cluster the way Kubernetes would.

The harness runs no node-lifecycle controller, and kwok keeps the nodes it manages Ready: its
``node-initialize`` stage (``e2e.manifests.kwok_stages``) fires on any managed node whose Ready
condition is not True and sets it back. kwok manages only nodes annotated
``kwok.x-k8s.io/node=fake`` (``--manage-nodes-with-annotation-selector``), so a node is failed
here in two steps: the annotation is removed (kwok stops keeping the node Ready),
then its Ready condition is patched to False, which then stays as long as the test wants
(checked on the cluster: NotReady for 40 s and more, no kwok heartbeat).

Its pods are then deleted as the taint manager would (gracefully). kwok still finalizes the
pods of a node it let go of (its ``pod-delete`` stage deletes them at once: checked on the
cluster), so each pod first gets the finalizer ``UNREACHABLE_FINALIZER``: it stays Terminating,
as on a real unreachable node whose kubelet never confirms, until ``force_delete`` removes it
(pod GC once the node is given up). The Job controller counts each such pod as failed (its
default podReplacementPolicy replaces Terminating pods), so a Job whose pods are evicted this
way must allow those failures (``evictable``), or it fails (and its Workload finishes) before
anything is repaired.

Used by ``e2e/tests/test_node_failures.py`` and ``benchmarks/repair_latency.py``.
"""

from __future__ import annotations

import contextlib
from collections import Counter
from datetime import UTC, datetime
from typing import Any

from kubernetes_asyncio.client.exceptions import ApiException

from e2e.components import KWOK_NODE_ANNOTATION
from e2e.kube import Kube, content_type
from e2e.pods import pods_raw

STRATEGIC = "application/strategic-merge-patch+json"
# Holds an evicted pod Terminating, as a kubelet that never answers would.
UNREACHABLE_FINALIZER = "e2e.kueue-tas.io/node-unreachable"
# Failures allowed per index of an Indexed Job (each eviction is one failure of its index).
EVICTION_BACKOFF_LIMIT_PER_INDEX = 10


def evictable(job: dict[str, Any]) -> dict[str, Any]:
    """``job`` (an Indexed Job body) that survives its pods' evictions and replaces them soon.

    With a Job-wide ``backoffLimit`` the Job controller delays replacements by 10 s doubled per
    failure since the last success (8 pods evicted at once: the 10-minute maximum);
    ``backoffLimitPerIndex`` counts failures, and delays, per index (one eviction: 10 s)."""
    job["spec"]["backoffLimitPerIndex"] = EVICTION_BACKOFF_LIMIT_PER_INDEX
    return job


async def fail_node(kube: Kube, name: str) -> None:
    """Node ``name`` NotReady from now on (kwok no longer keeps it Ready)."""
    await kube.core.patch_node(
        name, {"metadata": {"annotations": {KWOK_NODE_ANNOTATION: None}}}, **content_type(STRATEGIC)
    )
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    ready = {
        "type": "Ready",
        "status": "False",
        "reason": "KubeletNotReady",
        "message": "e2e: node failed",
        "lastHeartbeatTime": now,
        "lastTransitionTime": now,
    }
    await kube.core.patch_node_status(name, {"status": {"conditions": [ready]}}, **content_type(STRATEGIC))


async def evict_pods_of(kube: Kube, namespace: str, node: str) -> list[str]:
    """Delete (gracefully) the pods bound to ``node``, as the taint manager would, and keep them
    Terminating until ``force_delete``; their names."""
    pods = await pods_raw(kube, namespace)
    names = [p["metadata"]["name"] for p in pods if p["spec"].get("nodeName") == node and not _finished(p)]
    for name in names:
        await kube.core.patch_namespaced_pod(
            name, namespace, {"metadata": {"finalizers": [UNREACHABLE_FINALIZER]}}, **content_type(STRATEGIC)
        )
        await kube.core.delete_namespaced_pod(name, namespace)
    return names


async def force_delete(kube: Kube, namespace: str, names: list[str]) -> None:
    """The evicted pods ``names`` gone (a pod already gone is skipped)."""
    unhold = {"metadata": {"$deleteFromPrimitiveList/finalizers": [UNREACHABLE_FINALIZER]}}
    for name in names:
        with contextlib.suppress(ApiException):
            await kube.core.patch_namespaced_pod(name, namespace, unhold, **content_type(STRATEGIC))
        with contextlib.suppress(ApiException):
            await kube.core.delete_namespaced_pod(name, namespace, grace_period_seconds=0)


def _finished(pod: dict[str, Any]) -> bool:
    return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")


def running_pods_per_node(pods: list[dict[str, Any]]) -> Counter[str]:
    return Counter(
        p["spec"]["nodeName"]
        for p in pods
        if p["spec"].get("nodeName") and (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")
    )
