"""Failing nodes on the local cluster the way Kubernetes would, and watching domains meanwhile.

The harness runs no node-lifecycle controller, and kwok keeps the nodes it manages Ready. A
node is failed here in two steps: kwok is told to let go of it (its ``kwok.x-k8s.io/node``
annotation removed, so nothing heartbeats it any more), then its Ready condition is patched
to False. Its pods are then deleted as the taint manager would (gracefully): with no kubelet
(kwok) to confirm, they stay Terminating, as on a real unreachable node, until the test
force-deletes them (pod GC after the node is gone).

Used by ``e2e/pending/test_node_failures.py`` (not collected until moved under ``e2e/tests``)
and ``benchmarks/repair_latency.py``.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from e2e import workloads
from e2e.components import KWOK_NODE_ANNOTATION
from e2e.kube import Kube, content_type
from e2e.pods import pods_raw

STRATEGIC = "application/strategic-merge-patch+json"


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
    """Delete (gracefully) the pods bound to ``node``, as the taint manager would; their names."""
    names = [p["metadata"]["name"] for p in await pods_raw(kube, namespace) if p["spec"].get("nodeName") == node]
    for name in names:
        await kube.core.delete_namespaced_pod(name, namespace)
    return names


async def force_delete(kube: Kube, namespace: str, names: list[str]) -> None:
    for name in names:
        with contextlib.suppress(Exception):
            await kube.core.delete_namespaced_pod(name, namespace, grace_period_seconds=0)


def running_pods_per_node(pods: list[dict[str, Any]]) -> Counter[str]:
    return Counter(
        p["spec"]["nodeName"]
        for p in pods
        if p["spec"].get("nodeName") and (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")
    )


@dataclass
class DomainMonitor:
    """Samples, until stopped, every hostname domain of a Job's assignment: the pods bound there
    (Terminating ones included: they still run) never exceed the domain's count. Pods on a node
    outside the assignment (a failed node the repair moved away from) are not judged."""

    kube: Kube
    namespace: str
    job: str
    violations: list[str] = field(default_factory=list)
    samples: int = 0

    async def _sample(self) -> None:
        wl = await workloads.workload_of(self.kube, self.namespace, self.job)
        if wl is None or not workloads.assignment(wl):
            return
        counts = {values[-1]: n for values, n in workloads.domain_counts(wl, "main").items()}
        bound = running_pods_per_node(await pods_raw(self.kube, self.namespace, f"job-name={self.job}"))
        for node, n in bound.items():
            if node in counts and n > counts[node]:
                self.violations.append(f"{node}: {n} pods bound, assignment count {counts[node]}")
        self.samples += 1

    @contextlib.asynccontextmanager
    async def running(self, interval_s: float = 0.3) -> AsyncIterator[DomainMonitor]:
        async def loop() -> None:
            while True:
                with contextlib.suppress(Exception):
                    await self._sample()
                await asyncio.sleep(interval_s)

        task = asyncio.create_task(loop())
        try:
            yield self
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
