"""Placement engine benchmark on a synthetic cluster.

    python benchmarks/placement.py [--zones 2 --blocks 10 --racks 20 --hosts 25] [--repeat 30] [--json]
                                   [--modes core|all] [--compare-with DIR]
    python benchmarks/placement.py [shape options] --scenario-out FILE
    python benchmarks/placement.py --scenario-in FILE [--repeat 30] [--json]

Builds a 4-level topology (zone > block > rack > host, 10,000 nodes by default)
with random existing non-TAS usage, then times placements of required,
preferred and unconstrained PodSets of 8, 64, 512 and 4096 pods ("core" modes),
and of the general-path modes (512 pods): a leader + 511 workers group (required
rack), 3-layer slices (block > rack > host) and balanced placement (preferred rack).

``--compare-with DIR`` runs the same benchmark, in a child process, against the
``kueue_tas`` package found in DIR (e.g. ``git worktree add /tmp/base <commit>``)
for the modes that engine supports, and prints both side by side.

``--scenario-out FILE`` writes the cluster and the core cases as JSON (format
``kueue-tas/placement-scenario/v1``, below) and exits without timing;
``--scenario-in FILE`` times the cases of such a file (one untimed call, then
``--repeat`` timed ones, each case's assignment in the JSON output).
``benchmarks/kueue_go`` reads the same file to time Kueue's own placement, and
``benchmarks/placement_vs_kueue.py`` runs both.

Scenario file: ``topology`` (``name``, ``levels``), ``nodes`` (``name``,
``labels``, ``allocatable``), ``usage`` (one bound non-TAS pod per entry:
``node`` and ``requests``; the pod itself counts one ``pods``, as in Kueue)
and ``cases`` (``mode``, ``pods``, ``level``, per-pod ``requests``, and
``topology``: ``required``, ``preferred`` or ``unconstrained``). Amounts are
integers in Kueue's units: ``cpu`` in millicores, every other resource in base
units.
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
from kueue_tas.topology.engine.results import PodSetResult
from kueue_tas.topology.engine.snapshot import TopologySnapshot
from kueue_tas.topology.model import NodeInfo, PodSetRequest, TopologyRequest

LEVELS = ["example.com/zone", "example.com/block", "example.com/rack", HOSTNAME_LABEL]
GPU = "nvidia.com/gpu"
SCENARIO_FORMAT = "kueue-tas/placement-scenario/v1"


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


Usage = list[tuple[str, dict[str, int]]]


def existing_usage(nodes: list[NodeInfo], rng: random.Random) -> Usage:
    """Random existing non-TAS pods, as (node, requests without ``pods``): DaemonSet-like
    pods everywhere, GPU jobs on a third of the nodes."""
    out: Usage = []
    for node in nodes:
        out.append((node.name, {"cpu": 500, "memory": 2**30}))
        if rng.random() < 0.33:
            gpus = rng.randint(1, 8)
            out.append((node.name, {"cpu": 8000 * gpus, "memory": 64 * 2**30 * gpus, GPU: gpus}))
    return out


def build(nodes: list[NodeInfo], usage: Usage, levels: list[str] = LEVELS, name: str = "bench") -> TopologySnapshot:
    snap = TopologySnapshot.build(topology_name=name, levels=levels, nodes=nodes)
    for node_name, requests in usage:
        snap.add_non_tas_usage(node_name, {**requests, "pods": 1})
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


def core_specs(hosts: int, racks: int) -> list[dict[str, Any]]:
    """The core cases as scenario entries (see the module docstring)."""
    per_pod = {"cpu": 4000, "memory": 32 * 2**30, GPU: 1}
    out: list[dict[str, Any]] = []
    for mode in ("required", "preferred", "unconstrained"):
        for pods in (8, 64, 512, 4096):
            topology: dict[str, Any]
            if mode == "required":
                topology = {"required": required_level(pods, hosts, racks)}
            elif mode == "preferred":
                topology = {"preferred": LEVELS[2]}
            else:
                topology = {"unconstrained": True}
            level = topology.get("required") or topology.get("preferred") or "unconstrained"
            out.append({"mode": mode, "pods": pods, "level": level, "requests": per_pod, "topology": topology})
    return out


def spec_cases(snap: TopologySnapshot, specs: list[dict[str, Any]]) -> list[Case]:
    out: list[Case] = []
    for spec in specs:
        topo = spec["topology"]
        request = TopologyRequest(
            required=topo.get("required"), preferred=topo.get("preferred"), unconstrained=topo.get("unconstrained")
        )
        req = [PodSetRequest("main", spec["pods"], spec["requests"], topology=request)]
        out.append((spec["mode"], spec["pods"], spec["level"], _placer(snap, req)))
    return out


def core_cases(snap: TopologySnapshot, hosts: int, racks: int) -> list[Case]:
    return spec_cases(snap, core_specs(hosts, racks))


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


def timed_cases(cases: list[Case], repeat: int) -> list[dict[str, Any]]:
    """For ``--scenario-in``: a first call (its assignment is reported, its time is
    ``first_ms``), then ``repeat`` timed ones; every time is kept, so that a runner can
    pool several rounds."""
    rows = []
    for mode, pods, level, run in cases:
        t = time.perf_counter()
        (res,) = run()
        first_ms = (time.perf_counter() - t) * 1000
        times = []
        for _ in range(repeat):
            t = time.perf_counter()
            run()
            times.append((time.perf_counter() - t) * 1000)
        ordered = sorted(times)
        rows.append(
            {
                "mode": mode,
                "pods": pods,
                "level": level,
                "fits": res.fits,
                "reason": res.message,
                "p50_ms": statistics.median(ordered),
                "p99_ms": ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))],
                "first_ms": first_ms,
                "times_ms": times,
                "assignment": res.assignment.to_dict() if res.assignment is not None else None,
            }
        )
    return rows


def scenario(args: argparse.Namespace, nodes: list[NodeInfo], usage: Usage) -> dict[str, Any]:
    return {
        "format": SCENARIO_FORMAT,
        "shape": {name: getattr(args, name) for name in ("zones", "blocks", "racks", "hosts", "seed")},
        "topology": {"name": "bench", "levels": LEVELS},
        "nodes": [{"name": n.name, "labels": dict(n.labels), "allocatable": dict(n.allocatable)} for n in nodes],
        "usage": [{"node": node, "requests": requests} for node, requests in usage],
        "cases": core_specs(args.hosts, args.racks),
    }


def run_scenario(path: str, repeat: int) -> dict[str, Any]:
    with open(path) as f:
        sc = json.load(f)
    if sc.get("format") != SCENARIO_FORMAT:
        raise SystemExit(f"{path}: format {sc.get('format')!r}, want {SCENARIO_FORMAT!r}")
    t0 = time.perf_counter()
    nodes = [NodeInfo(n["name"], n["labels"], n["allocatable"]) for n in sc["nodes"]]
    usage = [(u["node"], u["requests"]) for u in sc["usage"]]
    snap = build(nodes, usage, sc["topology"]["levels"], sc["topology"]["name"])
    setup_ms = (time.perf_counter() - t0) * 1000
    return {
        "engine": "kueue-tas",
        "nodes": len(nodes),
        "setup_ms": setup_ms,
        "cases": timed_cases(spec_cases(snap, sc["cases"]), repeat),
    }


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
    ap.add_argument("--scenario-out", metavar="FILE", help="write the cluster and the core cases as JSON, then exit")
    ap.add_argument("--scenario-in", metavar="FILE", help="time the cases of a scenario file (shape options ignored)")
    args = ap.parse_args()
    if args.scenario_in:
        result = run_scenario(args.scenario_in, args.repeat)
        if args.json:
            print(json.dumps(result))
            return
        print(f"nodes={result['nodes']} setup_ms={result['setup_ms']:.1f}")
        for r in result["cases"]:
            print(
                f"{r['mode']:>13} pods={r['pods']:>5} level={r['level']:<18} fits={r['fits']!s:<5} "
                f"p50={r['p50_ms']:>8.3f} ms  p99={r['p99_ms']:>8.3f} ms"
            )
        return
    rng = random.Random(args.seed)
    nodes = make_nodes(args.zones, args.blocks, args.racks, args.hosts)
    if args.scenario_out:
        with open(args.scenario_out, "w") as f:
            json.dump(scenario(args, nodes, existing_usage(nodes, rng)), f, separators=(",", ":"))
        return
    t0 = time.perf_counter()
    snap = build(nodes, existing_usage(nodes, rng))
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
