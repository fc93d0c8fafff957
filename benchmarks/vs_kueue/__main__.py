"""Kueue's built-in TAS vs kueue-tas, end to end on the local cluster, in alternating pairs.

    .venv/bin/python -m benchmarks.vs_kueue [--shapes uncontended,contended] [--pairs 3]
                                            [--seed 1] [--nodes N] [--json FILE] [--no-webhook] [--floor]

Needs the local control plane (``python -m e2e.cluster up``; a running one is used and left
running). For each shape (``trace.SHAPES``): kwok nodes, one Topology, Kueue's TAS flavor and
ClusterQueue and ours; then ``--pairs`` pairs of runs of the same seeded trace, Kueue first in
odd pairs and kueue-tas first in even ones (so neither always runs on a warmer cluster). Prints
per shape the median per variant of: wall time, creation -> admission and creation -> all pods
bound (p50/p90/p99 over Jobs), the time in each stage, CPU seconds and peak RSS of Kueue and of
kueue-tas, correctness, and the kueue-tas / Kueue ratios (of the medians and per pair).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import uuid
from dataclasses import asdict
from typing import Any

from e2e.cluster_health import is_healthy
from e2e.cluster_state import load_state
from e2e.kube import Kube, new_api_client
from e2e.nodes import NodePool
from kueue_tas.runtime.logging import configure_logging

from .report import RunFigures, table
from .run import Bench, bench_env
from .trace import SHAPES, make_trace, with_nodes

# The variants a round may add beside "kueue" and "tas", and how their tables are titled.
VARIANT_TITLES = {
    "tas-no-webhook": "kueue-tas without its pod webhook (in the T column)",
    "floor": "the floor check, not a TAS: the AdmissionCheck protocol alone (in the T column)",
}
# The local Kueue's clientConnection (e2e/components.py): kueue-tas gets the same budget.
KUEUE_QPS, KUEUE_BURST = 300, 500


async def run_shape(
    name: str, args: argparse.Namespace, extra: dict[str, list[tuple[RunFigures, RunFigures]]]
) -> list[tuple[RunFigures, RunFigures]]:
    """The (Kueue, kueue-tas) pairs of shape ``name``; with ``--no-webhook`` / ``--floor``,
    also the (Kueue, that variant) pairs of the same rounds, in ``extra`` by variant."""
    state = load_state()
    if not is_healthy(state):
        raise SystemExit("the local cluster is not running: python -m e2e.cluster up")
    assert state is not None
    shape = SHAPES[name] if args.nodes is None else with_nodes(SHAPES[name], args.nodes)
    api = await new_api_client(state.kubeconfig, pool_size=128)
    kube = Kube(api)
    suffix = uuid.uuid4().hex[:5]
    pool = NodePool(name=f"vk{suffix}", blocks=1, racks_per_block=shape.racks, hosts_per_rack=shape.hosts)
    bench = Bench(kube, state, shape, pool, bench_env(KUEUE_QPS, KUEUE_BURST), suffix)
    trace = make_trace(shape, args.seed)
    pairs: list[tuple[RunFigures, RunFigures]] = []
    chosen = {"tas-no-webhook": args.no_webhook, "floor": args.floor}
    variants = ["kueue", "tas", *(v for v in VARIANT_TITLES if chosen[v])]
    try:
        print(f"[{name}] {shape.nodes} nodes, {len(trace)} Jobs, {sum(j.pods for j in trace)} pods", file=sys.stderr)
        await bench.setup()
        for i in range(args.pairs):
            order: tuple[str, ...] = tuple(variants) if i % 2 == 0 else tuple(reversed(variants))
            if args.only:
                order = (args.only,)
            done: dict[str, RunFigures] = {}
            for variant in order:
                fig = await bench.run(variant, trace, i, args.timeout)
                done[variant] = fig
                print(
                    f"[{name}] pair {i + 1} {variant}: wall {fig.wall_s:.1f} s, admission p50 "
                    f"{fig.to_admission[50]:.2f} s, bound p50 {fig.to_bound[50]:.2f} s",
                    file=sys.stderr,
                )
            if args.only:
                continue
            pairs.append((done["kueue"], done["tas"]))
            for other in VARIANT_TITLES:
                if other in done:
                    extra.setdefault(other, []).append((done["kueue"], done[other]))
    finally:
        await bench.teardown()
        await api.close()
    return pairs


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("--shapes", default="uncontended,contended", help=f"comma-separated, of {', '.join(SHAPES)}")
    p.add_argument("--pairs", type=int, default=3)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--nodes", type=int, default=None, help="about this many nodes (racks adjusted)")
    p.add_argument("--timeout", type=float, default=900, help="seconds one run may take to drain")
    p.add_argument(
        "--only",
        choices=("kueue", "tas", *VARIANT_TITLES),
        default=None,
        help="run one variant only (profiling; prints no table)",
    )
    p.add_argument(
        "--no-webhook", action="store_true", help="also run kueue-tas without its pod webhook in every round"
    )
    p.add_argument(
        "--floor",
        action="store_true",
        help="also run the floor check (Ready at once, not a TAS): what the AdmissionCheck protocol alone costs",
    )
    p.add_argument("--json", default=None, help="also write every run's figures to this file")
    args = p.parse_args(argv)
    names = [s.strip() for s in args.shapes.split(",") if s.strip()]
    unknown = [s for s in names if s not in SHAPES]
    if unknown:
        p.error(f"--shapes: unknown {', '.join(unknown)} (known: {', '.join(SHAPES)})")
    configure_logging("warning", "console", stream=sys.stderr)
    results: dict[str, Any] = {}
    for name in names:
        extra: dict[str, list[tuple[RunFigures, RunFigures]]] = {}
        pairs = asyncio.run(run_shape(name, args, extra))
        if pairs:
            print(table(name, pairs), flush=True)
        for variant, runs in extra.items():
            print(table(f"{name}, {VARIANT_TITLES[variant]}", runs), flush=True)
            results[f"{name}/{variant}"] = [{"kueue": asdict(k), "tas": asdict(t)} for k, t in runs]
        results[name] = [{"kueue": asdict(k), "tas": asdict(t)} for k, t in pairs]
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
