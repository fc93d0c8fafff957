"""Placement engine benchmark on a synthetic cluster.

    python benchmarks/placement.py [--zones 2 --blocks 10 --racks 20 --hosts 25] [--repeat 30] [--json]
                                   [--modes core|all] [--compare-with DIR]

Builds a 4-level topology (zone > block > rack > host, 10,000 nodes by default)
with random existing non-TAS usage, then times placements of required,
preferred and unconstrained PodSets of 8, 64, 512 and 4096 pods ("core" modes),
and of the general-path modes (512 pods): a leader + 511 workers group (required
rack), 3-layer slices (block > rack > host) and balanced placement (preferred rack).

``--compare-with DIR`` runs the same benchmark, in a child process, against the
``kueue_tas`` package found in DIR (e.g. ``git worktree add /tmp/base <commit>``)
for the modes that engine supports, and prints both side by side.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

from kueue_tas.api.constants import HOSTNAME_LABEL
from kueue_tas.topology.model import NodeInfo, PodSetRequest, TopologyRequest
from kueue_tas.topology.results import PodSetResult
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


Case = tuple[str, int, str, Callable[[], list[PodSetResult]]]


def _placer(snap: TopologySnapshot, req: list[PodSetRequest]) -> Callable[[], list[PodSetResult]]:
    return lambda: snap.place(req)


def core_cases(snap: TopologySnapshot, hosts: int, racks: int) -> list[Case]:
    per_pod = {"cpu": 4000, "memory": 32 * 2**30, GPU: 1}
    out: list[Case] = []
    for mode in ("required", "preferred", "unconstrained"):
        for pods in (8, 64, 512, 4096):
            if mode == "required":
                topo = TopologyRequest(required=required_level(pods, hosts, racks))
            elif mode == "preferred":
                topo = TopologyRequest(preferred=LEVELS[2])
            else:
                topo = TopologyRequest(unconstrained=True)
            req = [PodSetRequest("main", pods, per_pod, topology=topo)]
            level = topo.required or topo.preferred or "unconstrained"
            out.append((mode, pods, level, _placer(snap, req)))
    return out


def general_cases(snap: TopologySnapshot) -> list[Case]:
    """The modes only the general path serves; they need the engine's ``gates`` API."""
    from kueue_tas.topology.features import FeatureGates
    from kueue_tas.topology.model import SliceLayer

    group = TopologyRequest(required=LEVELS[2], group="lws")
    small = {"cpu": 1000, "memory": 4 * 2**30}
    lws = [
        PodSetRequest("leader", 1, {"cpu": 2000, "memory": 8 * 2**30}, topology=group),
        PodSetRequest("workers", 511, small, topology=group),
    ]
    layers = (SliceLayer(LEVELS[1], 256), SliceLayer(LEVELS[2], 64), SliceLayer(HOSTNAME_LABEL, 8))
    layered = TopologyRequest(required=LEVELS[0], slice_layers=layers)
    gpu_pod = {"cpu": 4000, "memory": 32 * 2**30, GPU: 1}
    sliced = [PodSetRequest("main", 512, gpu_pod, topology=layered)]
    balanced = [PodSetRequest("main", 512, gpu_pod, topology=TopologyRequest(preferred=LEVELS[2]))]
    balanced_gates = FeatureGates({"TASBalancedPlacement": True})
    return [
        ("group", 512, "rack (1+511)", lambda: snap.place(lws)),
        ("3-layer", 512, "block>rack>host", lambda: snap.place(sliced)),
        ("balanced", 512, LEVELS[2], lambda: snap.place(balanced, gates=balanced_gates)),
    ]


def measure(cases: list[Case], repeat: int) -> list[dict[str, Any]]:
    rows = []
    for mode, pods, level, run in cases:
        times = []
        fits = False
        for _ in range(repeat):
            t = time.perf_counter()
            res = run()
            times.append((time.perf_counter() - t) * 1000)
            fits = all(r.fits for r in res)
        times.sort()
        rows.append(
            {
                "mode": mode,
                "pods": pods,
                "level": level,
                "fits": fits,
                "p50_ms": round(statistics.median(times), 3),
                "p99_ms": round(times[min(len(times) - 1, int(len(times) * 0.99))], 3),
            }
        )
    return rows


def baseline(args: argparse.Namespace) -> dict[tuple[str, int], dict[str, Any]]:
    """The core modes measured against the engine in ``args.compare_with``."""
    argv = [sys.executable, os.path.abspath(__file__), "--json", "--modes", "core"]
    for name in ("zones", "blocks", "racks", "hosts", "repeat", "seed"):
        argv += [f"--{name}", str(getattr(args, name))]
    env = {**os.environ, "PYTHONPATH": os.path.abspath(args.compare_with)}
    out = subprocess.run(argv, env=env, capture_output=True, text=True, check=True, cwd=args.compare_with)
    return {(r["mode"], r["pods"]): r for r in json.loads(out.stdout)["placements"]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--zones", type=int, default=2)
    ap.add_argument("--blocks", type=int, default=10)
    ap.add_argument("--racks", type=int, default=20)
    ap.add_argument("--hosts", type=int, default=25)
    ap.add_argument("--repeat", type=int, default=30)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    ap.add_argument("--modes", choices=("core", "all"), default="all")
    ap.add_argument("--compare-with", metavar="DIR", help="also run the core modes against the engine in DIR")
    args = ap.parse_args()
    rng = random.Random(args.seed)
    nodes = make_nodes(args.zones, args.blocks, args.racks, args.hosts)
    t0 = time.perf_counter()
    snap = build(nodes, rng)
    build_s = time.perf_counter() - t0

    cases = core_cases(snap, args.hosts, args.racks)
    if args.modes == "all":
        cases += general_cases(snap)
    rows = measure(cases, args.repeat)
    base = baseline(args) if args.compare_with else {}
    out = {"nodes": len(nodes), "build_s": round(build_s, 3), "placements": rows}
    if args.json:
        print(json.dumps(out))
        return
    print(f"nodes={out['nodes']} build_s={out['build_s']}")
    for r in rows:
        line = (
            f"{r['mode']:>13} pods={r['pods']:>5} level={r['level']:<18} fits={r['fits']!s:<5} "
            f"p50={r['p50_ms']:>8.3f} ms  p99={r['p99_ms']:>8.3f} ms"
        )
        b = base.get((r["mode"], r["pods"]))
        if b is not None:
            line += f"  | baseline p50={b['p50_ms']:>8.3f} ms  p99={b['p99_ms']:>8.3f} ms"
        print(line)


if __name__ == "__main__":
    main()
