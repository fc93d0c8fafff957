"""The pods of e2e Workloads: listing them (fast enough to poll 1,000 pods), their gate and the
domain their nodeSelector pins, and pods outside any queue that take capacity."""

from __future__ import annotations

import json
from typing import Any

from e2e.jobs import container
from e2e.kube import Kube, as_body, eventually
from kueue_tas.api import constants as kc

GATE = kc.SCHEDULING_GATE
WORKLOAD_LABEL = kc.WORKLOAD_LABEL
PODSET_LABEL = kc.PODSET_LABEL


async def pods_of(kube: Kube, namespace: str, selector: str) -> list[dict[str, Any]]:
    res = await kube.core.list_namespaced_pod(namespace, label_selector=selector)
    return [kube.api.sanitize_for_serialization(p) for p in res.items]


async def pods_raw(kube: Kube, namespace: str, selector: str = "") -> list[dict[str, Any]]:
    """Pods as plain JSON dicts, without building the generated models (fast enough to poll 1,000 pods)."""
    resp: Any = await kube.core.list_namespaced_pod(namespace, label_selector=selector, _preload_content=False)
    try:
        data = await resp.read()
    finally:
        resp.release()
    return list(json.loads(data).get("items") or [])


def is_live(pod: dict[str, Any]) -> bool:
    """Not terminating and not terminal: the pod holds a slot of its domain."""
    return not pod["metadata"].get("deletionTimestamp") and (pod.get("status") or {}).get("phase") not in (
        "Succeeded",
        "Failed",
    )


def is_gated(pod: dict[str, Any], gate: str = GATE) -> bool:
    return any(g.get("name") == gate for g in pod["spec"].get("schedulingGates") or [])


def selector_domain(pod: dict[str, Any], levels: tuple[str, ...]) -> tuple[str, ...] | None:
    """The domain a pod's nodeSelector pins it to (None when a level key is missing)."""
    sel = pod["spec"].get("nodeSelector") or {}
    return tuple(sel[k] for k in levels) if all(k in sel for k in levels) else None


async def create_bound_pod(
    kube: Kube, namespace: str, name: str, node: str, *, gpu: int = 1, cpu: str = "100m"
) -> None:
    """A pod outside any queue, bound to ``node`` by ``spec.nodeName`` (like a DaemonSet's), that
    kwok keeps running."""
    body = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {"nodeName": node, "containers": [container(gpu, cpu)], "tolerations": [{"operator": "Exists"}]},
    }
    await kube.core.create_namespaced_pod(namespace, as_body(body))

    async def running() -> bool:
        pod = await kube.core.read_namespaced_pod(name, namespace)
        return bool(pod.status and pod.status.phase == "Running")

    await eventually(f"pod {namespace}/{name} Running", running, 60)
