"""Placement engine benchmark on a synthetic cluster.

    python benchmarks/placement.py [--zones 2 --blocks 10 --racks 20 --hosts 25] [--repeat 30] [--json]

Builds a 4-level topology (zone > block > rack > host, 10,000 nodes by default)
with random existing non-TAS usage, then times placements of required,
preferred and unconstrained PodSets of 8, 64, 512 and 4096 pods.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import time

from kueue_tas.api.constants import HOSTNAME_LABEL
from kueue_tas.topology.model import NodeInfo, PodSetRequest, TopologyRequest
from kueue_tas.topology.snapshot import TopologySnapshot

LEVELS = ["example.com/zone", "example.com/block", "example.com/rack", HOSTNAME_LABEL]
GPU = "nvidia.com/gpu"


def make_nodes(zones: int, blocks: int, racks: int, hosts: int) -> list[NodeInfo]:
    nodes = []
    for z in range(zones):
        for b in range(blocks):
            for r in range(racks):
                for h in range(hosts):
                    name = f"node-z{z}-b{b}-r{r}-h{h}"
                    labels = {
                        LEVELS[0]: f"z{z}",
                        LEVELS[1]: f"z{z}-b{b}",
                        LEVELS[2]: f"z{z}-b{b}-r{r}",
                        HOSTNAME_LABEL: name,
                    }
                    alloc = {"cpu": 96_000, "memory": 768 * 2**30, "pods": 110, GPU: 8}
                    nodes.append(NodeInfo(name, labels, alloc))
    return nodes


def build(nodes: list[NodeInfo], rng: random.Random) -> TopologySnapshot:
    snap = TopologySnapshot.build(topology_name="bench", levels=LEVELS, nodes=nodes)
    # Random existing usage: DaemonSet-like pods everywhere, GPU jobs on a third of the nodes.
    for node in nodes:
        snap.add_non_tas_usage(node.name, {"cpu": 500, "memory": 2**30, "pods": 1})
        if rng.random() < 0.33:
            gpus = rng.randint(1, 8)
            snap.add_non_tas_usage(node.name, {"cpu": 8000 * gpus, "memory": 64 * 2**30 * gpus, GPU: gpus, "pods": 1})
    return snap


def required_level(pods: int, hosts_per_rack: int, racks: int) -> str:
    per_rack = hosts_per_rack * 4  # leave head-room for the random usage
    if pods <= per_rack:
        return LEVELS[2]
    if pods <= per_rack * racks:
        return LEVELS[1]
    return LEVELS[0]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--zones", type=int, default=2)
    ap.add_argument("--blocks", type=int, default=10)
    ap.add_argument("--racks", type=int, default=20)
    ap.add_argument("--hosts", type=int, default=25)
    ap.add_argument("--repeat", type=int, default=30)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    args = ap.parse_args()
    rng = random.Random(args.seed)
    nodes = make_nodes(args.zones, args.blocks, args.racks, args.hosts)
    t0 = time.perf_counter()
    snap = build(nodes, rng)
    build_s = time.perf_counter() - t0

    per_pod = {"cpu": 4000, "memory": 32 * 2**30, GPU: 1}
    rows = []
    for mode in ("required", "preferred", "unconstrained"):
        for pods in (8, 64, 512, 4096):
            if mode == "required":
                topo = TopologyRequest(required=required_level(pods, args.hosts, args.racks))
            elif mode == "preferred":
                topo = TopologyRequest(preferred=LEVELS[2])
            else:
                topo = TopologyRequest(unconstrained=True)
            req = [PodSetRequest("main", pods, per_pod, topology=topo)]
            times = []
            fits = False
            for _ in range(args.repeat):
                t = time.perf_counter()
                res = snap.place(req)
                times.append((time.perf_counter() - t) * 1000)
                fits = res[0].fits
            times.sort()
            rows.append(
                {
                    "mode": mode,
                    "pods": pods,
                    "level": topo.required or topo.preferred or "unconstrained",
                    "fits": fits,
                    "p50_ms": round(statistics.median(times), 3),
                    "p99_ms": round(times[min(len(times) - 1, int(len(times) * 0.99))], 3),
                }
            )
    out = {"nodes": len(nodes), "build_s": round(build_s, 3), "placements": rows}
    if args.json:
        print(json.dumps(out))
        return
    print(f"nodes={out['nodes']} build_s={out['build_s']}")
    for r in rows:
        print(
            f"{r['mode']:>13} pods={r['pods']:>5} level={r['level']:<18} fits={r['fits']!s:<5} "
            f"p50={r['p50_ms']:>8.3f} ms  p99={r['p99_ms']:>8.3f} ms"
        )


if __name__ == "__main__":
    main()
