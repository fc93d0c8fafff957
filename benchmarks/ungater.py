"""Ungater benchmark on the real local cluster: how fast a big workload's pods are ungated.

    .venv/bin/python -m benchmarks.ungater [--pods 1000] [--patch-concurrency 32] [--batch-period 1]

Needs the local control plane (``python -m e2e.cluster up``; an already running one is used
and left running). Starts its own ``kueue-tas run`` (one replica, no leader election, admin
kubeconfig), creates a pool of kwok nodes with room for ``--pods`` pods (``pods`` allocatable is
the limit: the pods request no GPU), one Job of that many pods asking for one block, and
watches pods and the Workload with the product's informer. Prints, from the watch timestamps:

* Workload Ready (our check entry) -> every pod ungated;
* first pod seen -> last pod seen (the Job controller's creation rate);
* first pod seen -> every pod ungated, as pods ungated per second;
* last pod seen -> every pod ungated (the issue's "within a few seconds of its pods existing");
* -> every pod bound (kube-scheduler);
* the ungater's passes (from its log) and its counters.

Everything it creates (nodes, namespace, Kueue objects, the controller) is removed at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import os
import sys
import time
import uuid
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from kubernetes_asyncio import client as k8s
from kubernetes_asyncio.client.exceptions import ApiException

from e2e import jobs, workloads
from e2e import stack as st
from e2e.cluster_health import is_healthy
from e2e.cluster_state import load_state
from e2e.controller import ControllerGroup, ControllerProcess, log_events, metric_value
from e2e.kube import Kube, eventually, new_api_client
from e2e.nodes import BLOCK_LABEL, NodePool, default_allocatable
from e2e.pods import GATE
from kueue_tas.kube import catalogue as cat
from kueue_tas.kube.client import call_json, patch_pod, raw_kwargs
from kueue_tas.kube.informer import Informer
from kueue_tas.runtime.logging import configure_logging


@dataclass
class Timeline:
    """Wall-clock timestamps (``time.time()``, comparable with the controller's log) of what the watches saw."""

    submitted: float = 0.0
    ready: float | None = None
    admitted: float | None = None
    seen: dict[str, float] = field(default_factory=dict)  # pod uid -> first seen
    ungated: dict[str, float] = field(default_factory=dict)  # pod uid -> first seen without our gate
    bound: dict[str, float] = field(default_factory=dict)  # pod uid -> first seen with a nodeName


@dataclass(frozen=True, slots=True)
class PodState:
    uid: str
    gated: bool
    node: str


@dataclass(frozen=True, slots=True)
class WorkloadState:
    check_state: str
    admitted: bool


def pod_state(raw: dict[str, Any]) -> PodState:
    spec = raw.get("spec") or {}
    gated = any(g.get("name") == GATE for g in spec.get("schedulingGates") or [])
    return PodState(str(raw["metadata"].get("uid") or ""), gated, str(spec.get("nodeName") or ""))


def workload_state(check: str) -> Any:
    def transform(raw: dict[str, Any]) -> WorkloadState:
        status = raw.get("status") or {}
        entry: dict[str, Any] = next((e for e in status.get("admissionChecks") or [] if e.get("name") == check), {})
        conditions = status.get("conditions") or []
        admitted = any(c.get("type") == "Admitted" and c.get("status") == "True" for c in conditions)
        return WorkloadState(str(entry.get("state") or ""), admitted)

    return transform


def record_pod(tl: Timeline, pod: PodState) -> None:
    now = time.time()
    tl.seen.setdefault(pod.uid, now)
    if not pod.gated:
        tl.ungated.setdefault(pod.uid, now)
    if pod.node:
        tl.bound.setdefault(pod.uid, now)


def record_workload(tl: Timeline, wl: WorkloadState) -> None:
    now = time.time()
    if wl.check_state == "Ready" and tl.ready is None:
        tl.ready = now
    if wl.admitted and tl.admitted is None:
        tl.admitted = now


def pool_for(pods: int, pods_per_node: int) -> NodePool:
    hosts = math.ceil(pods / pods_per_node)
    per_rack = min(hosts, 5)
    racks = math.ceil(hosts / per_rack)
    alloc = default_allocatable() | {"pods": str(pods_per_node), "cpu": "1000"}
    return NodePool(
        name=f"bu{uuid.uuid4().hex[:6]}", blocks=1, racks_per_block=racks, hosts_per_rack=per_rack, allocatable=alloc
    )


def _cpu_seconds(proc: ControllerProcess) -> float:
    """User + system CPU seconds of a controller process so far (Linux /proc)."""
    assert proc.proc is not None
    fields = Path(f"/proc/{proc.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _log_time(doc: dict[str, Any]) -> float:
    return datetime.fromisoformat(str(doc["timestamp"]).replace("Z", "+00:00")).timestamp()


def histogram(tl: Timeline, start: float, passes: list[dict[str, Any]]) -> list[str]:
    """Per second after ``start``: pods created, ungated, bound, and pods the ungater's passes released."""
    end = max(tl.bound.values())
    rows = []
    for sec in range(math.ceil(end - start) + 1):
        lo, hi = start + sec, start + sec + 1

        def within(ts: dict[str, float], lo: float = lo, hi: float = hi) -> int:
            return sum(1 for t in ts.values() if lo <= t < hi)

        released = sum(int(p.get("released") or 0) for p in passes if lo <= _log_time(p) < hi)
        rows.append(
            f"  {sec:>3}s  created {within(tl.seen):>5}  ungated {within(tl.ungated):>5}"
            f"  bound {within(tl.bound):>5}  (passes released {released})"
        )
    return rows


async def reference_patches(api: Any, namespace: str, concurrency: int) -> dict[str, float]:
    """What the apiserver gives any client: one small strategic-merge patch per pod of the namespace
    (an annotation), ``concurrency`` at a time, through the product's client, on the now quiet cluster."""
    names = [
        p["metadata"]["name"]
        for p in (await call_json(k8s.CoreV1Api(api).list_namespaced_pod(namespace, **raw_kwargs(60))))["items"]
    ]
    slots = asyncio.Semaphore(concurrency)
    latencies: list[float] = []

    async def one(name: str) -> None:
        async with slots:
            t = time.perf_counter()
            await patch_pod(
                api,
                namespace=namespace,
                name=name,
                strategy="strategic",
                patch={"metadata": {"annotations": {"bench.kueue-tas.io/touched": "1"}}},
            )
            latencies.append(time.perf_counter() - t)

    t0 = time.perf_counter()
    await asyncio.gather(*(one(n) for n in names))
    elapsed = time.perf_counter() - t0
    latencies.sort()
    return {
        "reference_patches_per_s": round(len(names) / elapsed, 1),
        "reference_patch_p50_ms": round(1000 * latencies[len(latencies) // 2], 1),
        "reference_patch_p95_ms": round(1000 * latencies[int(len(latencies) * 0.95)], 1),
    }


async def _drain_namespace(kube: Kube, namespace: str) -> None:
    with contextlib.suppress(ApiException):
        await kube.core.delete_namespace(namespace, propagation_policy="Background")
        await kube.core.delete_collection_namespaced_pod(namespace, grace_period_seconds=0)

    async def no_pods() -> bool:
        return not (await kube.core.list_namespaced_pod(namespace, limit=1)).items

    with contextlib.suppress(TimeoutError):
        await eventually(f"pods of {namespace} deleted", no_pods, 120)


async def run(args: argparse.Namespace) -> dict[str, Any]:
    state = load_state()
    if not is_healthy(state):
        raise SystemExit("the local cluster is not running: python -m e2e.cluster up")
    assert state is not None
    api = await new_api_client(state.kubeconfig, pool_size=max(64, args.patch_concurrency + 16))
    kube = Kube(api)
    env = {
        "KUEUE_TAS_PATCH_CONCURRENCY": str(args.patch_concurrency),
        "KUEUE_TAS_UNGATE_BATCH_PERIOD_SECONDS": str(args.batch_period),
        "KUEUE_TAS_LOG_LEVEL": "info",
    }
    group = ControllerGroup(
        state.kubeconfig, Path(state.log_dir) / "kueue-tas-bench", replicas=1, leader_election=False, extra_env=env
    )
    namespace = f"bench-{uuid.uuid4().hex[:8]}"
    pool = pool_for(args.pods, args.pods_per_node)
    informers: list[Informer[Any]] = []
    reference: dict[str, float] = {}
    tl = Timeline()
    try:
        await group.start()
        await kube.core.create_namespace({"metadata": {"name": namespace}})  # type: ignore[arg-type]
        s = await st.tas_stack(kube, namespace, group.controller_name, pool)

        pods: Informer[PodState] = Informer(api, cat.PODS, pod_state, namespace=namespace, name="bench-pods")
        pods.add_handler(lambda p: record_pod(tl, p), lambda _o, p: record_pod(tl, p))
        wls: Informer[WorkloadState] = Informer(
            api, cat.WORKLOADS, workload_state(s.check), namespace=namespace, name="bench-workloads"
        )
        wls.add_handler(lambda w: record_workload(tl, w), lambda _o, w: record_workload(tl, w))
        informers = [pods, wls]
        for i in informers:
            i.start()
        for i in informers:
            await i.wait_synced(30)

        n: int = args.pods
        cpu_before = _cpu_seconds(group.processes[0])
        tl.submitted = time.time()
        await jobs.create_job(kube, namespace, jobs.job("bench", n, gpu=0, required=BLOCK_LABEL, indexed=args.indexed))

        async def all_bound() -> bool:
            return len(tl.bound) >= n

        await eventually(f"{n} pods bound", all_bound, args.timeout, interval_s=0.05)
        cpu_used = _cpu_seconds(group.processes[0]) - cpu_before
        metrics = group.processes[0].metrics()
        passes = log_events(group.processes[0].log_text(), "pods_ungated")
        wl = await workloads.workload_of(kube, namespace, "bench")
        domains = len(workloads.domain_counts(wl, "main")) if wl else 0
        reference = await reference_patches(api, namespace, args.patch_concurrency) if args.reference else {}
    finally:
        for i in informers:
            await i.stop()
        group.stop()
        await _drain_namespace(kube, namespace)
        await kube.cleanup()
        await api.close()

    ready = tl.ready if tl.ready is not None else tl.submitted
    first_seen, last_seen = min(tl.seen.values()), max(tl.seen.values())
    first_ungated, last_ungated = min(tl.ungated.values()), max(tl.ungated.values())
    last_bound = max(tl.bound.values())
    return {
        "pods": n,
        "nodes": pool.size,
        "domains": domains,
        "patch_concurrency": args.patch_concurrency,
        "batch_period_seconds": args.batch_period,
        "submit_to_ready_s": round(ready - tl.submitted, 3),
        "ready_to_admitted_s": round((tl.admitted or ready) - ready, 3),
        "ready_to_first_pod_s": round(first_seen - ready, 3),
        "pod_creation_s": round(last_seen - first_seen, 3),
        "pods_created_per_s": round(n / max(last_seen - first_seen, 1e-9), 1),
        "ready_to_all_ungated_s": round(last_ungated - ready, 3),
        "first_pod_to_all_ungated_s": round(last_ungated - first_seen, 3),
        "ungated_per_s": round(n / max(last_ungated - first_seen, 1e-9), 1),
        "last_pod_to_all_ungated_s": round(last_ungated - last_seen, 3),
        "first_to_last_ungated_s": round(last_ungated - first_ungated, 3),
        "ready_to_all_bound_s": round(last_bound - ready, 3),
        "controller_cpu_s": round(cpu_used, 2),
        "controller_cpu_share": round(cpu_used / max(last_bound - tl.submitted, 1e-9), 2),
        **reference,
        "ungater_passes": [
            {
                "at_s": round(_log_time(p) - ready, 3),
                "released": p.get("released"),
                "failed": p.get("failed"),
                "seconds": p.get("seconds"),
            }
            for p in passes
        ],
        "per_second_after_ready": histogram(tl, ready, passes),
        "ungated_pods_total": metric_value(metrics, "kueue_tas_ungated_pods_total"),
        "ungate_errors_total": metric_value(metrics, "kueue_tas_ungate_errors_total"),
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--pods", type=int, default=1000)
    p.add_argument("--pods-per-node", type=int, default=110)
    p.add_argument("--patch-concurrency", type=int, default=32)
    p.add_argument("--batch-period", type=float, default=1.0, help="KUEUE_TAS_UNGATE_BATCH_PERIOD_SECONDS")
    p.add_argument("--indexed", action="store_true", help="an Indexed Job (rank mode) instead of greedy mode")
    p.add_argument("--timeout", type=float, default=180)
    p.add_argument(
        "--no-reference",
        dest="reference",
        action="store_false",
        help="skip the reference run (plain annotation patches of the same pods at the same concurrency)",
    )
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    configure_logging("warning", "console", stream=sys.stderr)
    out = asyncio.run(run(args))
    if args.json:
        print(json.dumps(out, indent=2))
        return 0
    passes, rows = out.pop("ungater_passes"), out.pop("per_second_after_ready")
    width = max(len(k) for k in out)
    for k, v in out.items():
        print(f"{k:<{width}}  {v}")
    print(
        "ungater passes (ended s after Ready: pods released in s): "
        + ", ".join(f"{x['at_s']:.2f}: {x['released']} in {x['seconds']}" for x in passes)
    )
    print("per second after Ready:")
    print("\n".join(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
