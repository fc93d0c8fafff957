"""Node repair latency on the real local cluster: a 64-pod workload loses 4 nodes at once.

    .venv/bin/python -m benchmarks.repair_latency [--pods 64] [--fail 4] [--grace 30]

Needs the local control plane (``python -m e2e.cluster up``; a running one is used and left
running). Starts its own ``kueue-tas run`` (one replica, no leader election,
``node_failure_grace_seconds=--grace``), a pool of 1 block x 3 racks x 4 hosts of 8 GPUs (96
GPUs), and an Indexed Job of ``--pods`` one-GPU pods requiring the block (with
``backoffLimitPerIndex``: ``e2e.node_faults.evictable``). Once every pod runs, the ``--fail``
nodes holding the most pods are failed at once (``e2e.node_faults``: kwok lets go, Ready
patched False) and their pods deleted, as the taint manager would (here at once, not after the
pods' 300 s toleration: the figure is ours, not Kubernetes'). Prints:

* nodes NotReady -> repair Event (includes the grace);
* grace over -> repair written (the controller's own ``kueue_tas_node_repair_seconds``);
* grace over -> every replacement pod bound (the issue's figure);
* the controller's repair metrics.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from e2e import jobs, workloads
from e2e import stack as st
from e2e.cluster_health import is_healthy
from e2e.cluster_state import load_state
from e2e.controller import ControllerGroup, metric_value
from e2e.kube import Kube, eventually, new_api_client
from e2e.node_faults import evict_pods_of, evictable, fail_node, force_delete, running_pods_per_node
from e2e.nodes import BLOCK_LABEL, NodePool
from e2e.pods import pods_raw
from kueue_tas.runtime.logging import configure_logging


async def run(args: argparse.Namespace) -> dict[str, Any]:
    state = load_state()
    if not is_healthy(state):
        raise SystemExit("the local cluster is not running: python -m e2e.cluster up")
    assert state is not None
    api = await new_api_client(state.kubeconfig)
    kube = Kube(api)
    env = {"KUEUE_TAS_NODE_FAILURE_GRACE_SECONDS": str(args.grace), "KUEUE_TAS_LOG_LEVEL": "info"}
    group = ControllerGroup(
        state.kubeconfig, Path(state.log_dir) / "kueue-tas-bench", replicas=1, leader_election=False, extra_env=env
    )
    namespace = f"bench-{uuid.uuid4().hex[:8]}"
    evicted: list[str] = []
    pool = NodePool(name=f"rl{uuid.uuid4().hex[:5]}", blocks=1, racks_per_block=3, hosts_per_rack=4)
    try:
        await group.start()
        await kube.core.create_namespace({"metadata": {"name": namespace}})  # type: ignore[arg-type]
        s = await st.tas_stack(kube, namespace, group.controller_name, pool)
        await jobs.create_job(
            kube, namespace, evictable(jobs.job("bench", args.pods, required=BLOCK_LABEL, run_for="1h"))
        )
        wl = await workloads.wait_check(kube, s, "bench", ("Ready",), timeout_s=120)

        async def all_running() -> bool:
            pods = await pods_raw(kube, namespace, "job-name=bench")
            running: int = sum((p.get("status") or {}).get("phase") == "Running" for p in pods)
            return running >= int(args.pods)

        await eventually("every pod running", all_running, 180)
        counts = {values[-1]: n for values, n in workloads.domain_counts(wl, "main").items()}
        victims = sorted(counts, key=lambda h: -counts[h])[: args.fail]
        moved = sum(counts[v] for v in victims)
        for v in victims:
            await fail_node(kube, v)
        failed_at = time.monotonic()
        for v in victims:
            evicted += await evict_pods_of(kube, namespace, v)

        async def repaired() -> dict[str, Any] | None:
            w = await workloads.workload_of(kube, namespace, "bench")
            events = await workloads.events_for(kube, namespace, w["metadata"]["name"]) if w else []
            return w if any(e.get("reason") == "TopologyRepaired" for e in events) else None

        await eventually("the repair", repaired, args.grace + 120, interval_s=0.1)
        repaired_at = time.monotonic()

        async def replacements_bound() -> bool:
            pods = await pods_raw(kube, namespace, "job-name=bench")
            live = [p for p in pods if not p["metadata"].get("deletionTimestamp")]
            bound = running_pods_per_node(live)
            return sum(bound.values()) >= args.pods and not set(victims) & set(bound)

        await eventually("every replacement pod bound", replacements_bound, 300, interval_s=0.1)
        bound_at = time.monotonic()
        metrics = group.processes[0].metrics()
    finally:
        group.stop()
        # The Job first: with backoffLimitPerIndex its controller holds its failed pods'
        # finalizers in a Terminating namespace (see e2e/tests/test_node_failures.py).
        await kube.batch.delete_collection_namespaced_job(namespace, propagation_policy="Background")
        await force_delete(kube, namespace, evicted)
        await kube.core.delete_namespace(namespace)
        await kube.core.delete_collection_namespaced_pod(namespace, grace_period_seconds=0)
        await kube.cleanup()
        await api.close()
    grace_over = failed_at + args.grace
    return {
        "pods": args.pods,
        "failed_nodes": args.fail,
        "pods_moved": moved,
        "grace_s": args.grace,
        "not_ready_to_repaired_s": round(repaired_at - failed_at, 3),
        "grace_over_to_repaired_s": round(repaired_at - grace_over, 3),
        "grace_over_to_replacements_bound_s": round(bound_at - grace_over, 3),
        "node_repair_seconds_sum": metric_value(metrics, "kueue_tas_node_repair_seconds_sum"),
        "node_repairs_done": metric_value(metrics, "kueue_tas_node_repairs_total", outcome="done"),
        "failed_nodes_seen": metric_value(metrics, "kueue_tas_failed_nodes_seen_total"),
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--pods", type=int, default=64)
    p.add_argument("--fail", type=int, default=4)
    p.add_argument("--grace", type=float, default=30.0, help="KUEUE_TAS_NODE_FAILURE_GRACE_SECONDS")
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    configure_logging("warning", "console", stream=sys.stderr)
    out = asyncio.run(run(args))
    if args.json:
        print(json.dumps(out, indent=2))
    else:
        width = max(len(k) for k in out)
        for k, v in out.items():
            print(f"{k:<{width}}  {v}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
