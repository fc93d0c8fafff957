"""DaemonSets on the admission harness's four 8-GPU hosts: a tenant's or the system's, asking for
GPUs, and the free GPUs and admission they leave."""

from __future__ import annotations

from typing import Any

import builders as mk
from admission_harness import Harness, workload
from vocab import GPU, HOST

from kueue_tas.topology.explain.free import domain_free

EVERYTHING = [{"operator": "Exists"}]


def free_gpus(h: Harness) -> list[int]:
    snap = h.capacity.snapshot("gpu")
    assert snap is not None
    free = domain_free(snap)
    return [int(free[(HOST, n, GPU)]) for n in ("h1", "h2", "h3", "h4")]


def daemonset(namespace: str, gpus: int, *, priority: str | None = None, created: str | None = None) -> dict[str, Any]:
    raw = mk.daemonset("hog", namespace=namespace, requests={GPU: str(gpus)}, tolerations=EVERYTHING)
    if priority is not None:
        raw["spec"]["template"]["spec"]["priorityClassName"] = priority
    if created is not None:
        raw["metadata"]["creationTimestamp"] = created
    return raw


async def admitted(h: Harness) -> str:
    h.add_workload(workload())
    await h.admission.reconcile("ns/wl")
    return str(h.writes.checks[-1]["state"])
