"""The chaos campaign: ``python -m e2e.chaos --runs N --seed S [--replay LOG]``.

Run i uses seed S+i (so campaigns in parts use distinct seeds: ``--seed 1 --runs 50`` then
``--seed 51 --runs 50``). Each run is planned from its seed (``e2e/chaos/scenario.py``) and
executed on the chaos cluster (``--run-dir``, by default ``~/.cache/kueue-tas/chaos-run``, so
its apiserver restarts never disturb the e2e suite's cluster); it is started here unless a
healthy one runs, and stopped at the end if started here. A failing run prints its seed and its
event log, which ``--replay`` re-executes. The figures (runs, faults by type, invariant checks,
violations, wall time per run) are printed and written to ``<out>/summary.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

from e2e.chaos.profile import MIXED, PROFILES
from e2e.chaos.scenario import BURST, FAULTS, plan_run
from e2e.paths import cache_dir


def log(msg: str) -> None:
    print(f"[chaos] {msg}", file=sys.stderr, flush=True)


def _args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python -m e2e.chaos", description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=1, help="number of runs (default 1)")
    ap.add_argument("--seed", type=int, default=1, help="seed of the first run; run i uses seed+i")
    ap.add_argument("--duration", type=float, default=45.0, help="seconds of planned faults per run (default 45)")
    ap.add_argument(
        "--settle",
        type=float,
        default=90.0,
        help="the end-of-run wait ends after this long without progress (default 90 s)",
    )
    ap.add_argument(
        "--settle-cap", type=float, default=420.0, help="bound on the whole end-of-run wait (default 420 s)"
    )
    ap.add_argument(
        "--pending-bound",
        type=float,
        default=None,
        help="silent-pending bound (default: the controller's unknown-write settle time + 25 s = 90 s)",
    )
    ap.add_argument(
        "--faults",
        default=",".join((*FAULTS, BURST)),
        help="comma-separated fault types to inject (default: all)",
    )
    ap.add_argument(
        "--profile",
        choices=(*PROFILES, MIXED),
        default=MIXED,
        help="controller settings: default, renamed (our gate and keys renamed), or mixed: drawn per seed (default)",
    )
    ap.add_argument("--replay", type=Path, help="re-execute the plan of a run's event log")
    ap.add_argument("--out", type=Path, help="where event logs and summary.json go")
    ap.add_argument(
        "--run-dir",
        type=Path,
        default=Path(os.environ.get("KUEUE_TAS_CHAOS_RUN_DIR") or cache_dir() / "chaos-run"),
        help="the chaos cluster's run directory (default $KUEUE_TAS_CHAOS_RUN_DIR or ~/.cache/kueue-tas/chaos-run)",
    )
    ap.add_argument("--keep-cluster", action="store_true", help="leave a cluster started here running")
    return ap.parse_args(argv)


def summarize(results: list[Any], wall_s: float) -> dict[str, Any]:
    faults: Counter[str] = Counter()
    checks: Counter[str] = Counter()
    violations: Counter[str] = Counter()
    outcomes: Counter[str] = Counter()
    restarts: Counter[str] = Counter()
    for r in results:
        restarts.update(r.restarts)
        faults.update(r.faults)
        checks.update(r.checks)
        outcomes.update(r.outcomes)
        violations.update(v.split(" at t=")[0] for v in r.violations)
    walls = [r.wall_s for r in results]
    return {
        "runs": len(results),
        "passed": sum(1 for r in results if r.ok),
        "failed": [
            {"seed": r.seed, "log": r.log, "problems": r.problems, "violations": r.violations}
            for r in results
            if not r.ok
        ],
        "faults_injected": dict(sorted(faults.items())),
        "faults_total": sum(faults.values()),
        "submissions": sum(r.submissions for r in results),
        "outcomes": dict(sorted(outcomes.items())),
        "replica_restarts": dict(sorted(restarts.items())),
        "invariant_checks": dict(sorted(checks.items())),
        "invariant_checks_total": sum(checks.values()),
        "violations": dict(sorted(violations.items())),
        "wall_s_per_run": walls,
        "wall_s_mean": round(sum(walls) / len(walls), 1) if walls else 0.0,
        "wall_s_total": round(wall_s, 1),
    }


async def campaign(args: argparse.Namespace) -> int:
    from e2e import cluster
    from e2e.chaos.run import ChaosRun, Options, read_plan
    from e2e.cluster_health import is_healthy
    from e2e.cluster_state import load_state

    faults = tuple(f for f in args.faults.split(",") if f)
    unknown = set(faults) - {*FAULTS, BURST}
    if unknown:
        log(f"unknown fault type(s): {', '.join(sorted(unknown))}; known: {', '.join((*FAULTS, BURST))}")
        return 2
    opts = Options(duration_s=args.duration, settle_s=args.settle, settle_cap_s=args.settle_cap, profile=args.profile)
    if args.pending_bound is not None:
        opts.pending_bound_s = args.pending_bound
    if args.replay:
        header, plan = read_plan(args.replay)
        opts.duration_s = float(header.get("duration_s", opts.duration_s))
        runs = [(int(header["seed"]), plan)]
    else:
        runs = [(args.seed + i, plan_run(args.seed + i, opts.duration_s, faults)) for i in range(args.runs)]
    out = args.out or cache_dir() / "chaos-results" / f"seed{args.seed}-{int(time.time())}"
    out.mkdir(parents=True, exist_ok=True)

    was_up = is_healthy(load_state())
    t0 = time.monotonic()
    state = await asyncio.to_thread(cluster.up)
    results = []
    try:
        for i, (seed, plan) in enumerate(runs):
            if not await asyncio.to_thread(is_healthy, state):
                log("cluster not healthy: restarting it")
                state = await asyncio.to_thread(cluster.up)
            name = f"replay-{seed}" if args.replay else f"run-{seed}"
            r = await ChaosRun(state, seed, plan, opts, out / f"{name}.jsonl").execute()
            results.append(r)
            status = "ok" if r.ok else "FAILED"
            log(
                f"run {i + 1}/{len(runs)} seed {seed}: {status} in {r.wall_s}s; "
                f"{sum(r.faults.values())} faults, {r.submissions} submissions, "
                f"{sum(r.checks.values())} checks, {len(r.violations)} violations"
            )
            if not r.ok:
                lines = r.violations + r.problems
                for line in lines[:12]:
                    log(f"  {line}")
                if len(lines) > 12:
                    log(f"  ... {len(lines) - 12} more in the event log")
                log(f"  replay: python -m e2e.chaos --replay {r.log}")
    finally:
        if not was_up and not args.keep_cluster:
            await asyncio.to_thread(cluster.down)
    summary = summarize(results, time.monotonic() - t0)
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    print(json.dumps({k: v for k, v in summary.items() if k != "wall_s_per_run"}, indent=2))
    log(f"summary: {out / 'summary.json'}")
    return 0 if summary["passed"] == summary["runs"] else 1


def main(argv: list[str] | None = None) -> int:
    args = _args(argv)
    # Never the e2e suite's cluster: apiserver and Kueue restarts would break its tests.
    os.environ["KUEUE_TAS_RUN_DIR"] = str(args.run_dir.expanduser())
    from kueue_tas.kube.client import ensure_no_proxy

    ensure_no_proxy()
    return asyncio.run(campaign(args))


if __name__ == "__main__":
    raise SystemExit(main())
