"""Placement quality side by side: the simulator over shapes, policies and seeds.

    .venv/bin/python -m benchmarks.quality [--shape A|B|C|all] [--policy NAME,...|all] [--seeds 1,2,3]
                                           [--hours 300] [--warmup 48] [--load 0.9] [--no-runtimes]
                                           [--priorities] [--json FILE]
    .venv/bin/python -m benchmarks.quality --report FILE [FILE ...]

Prints one Markdown table per shape (median over seeds [lowest-highest], and each policy's
ratios to kueue-exact on the same seeds), each run's wall time and speed on stderr, and the
total wall time. See the package's docstring for the trace and docs/benchmarks.md for figures.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from dataclasses import asdict
from typing import Any

from .figures import RunFigures
from .policies import BASELINE
from .registry import available
from .report import document, table
from .run import Settings, simulate
from .shapes import SHAPES

DEFAULTS = Settings()


def _names(value: str, known: list[str], what: str) -> list[str]:
    if value == "all":
        return known
    names = [v.strip() for v in value.split(",") if v.strip()]
    unknown = [n for n in names if n not in known]
    if unknown or not names:
        raise argparse.ArgumentTypeError(f"unknown {what} {', '.join(unknown) or value!r} (known: {', '.join(known)})")
    return names


def _seeds(value: str) -> list[int]:
    try:
        seeds = [int(v) for v in value.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"seeds must be integers separated by commas, not {value!r}") from None
    if not seeds:
        raise argparse.ArgumentTypeError("no seed given")
    return seeds


def _positive(value: str) -> float:
    try:
        number = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {value!r}") from None
    if not number > 0:
        raise argparse.ArgumentTypeError(f"must be above 0, not {value}")
    return number


def parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m benchmarks.quality", description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("--shape", default="all", help=f"comma-separated, of {', '.join(SHAPES)}, or all (default)")
    p.add_argument(
        "--policy",
        default=BASELINE,
        help=f"comma-separated, of {', '.join(available())}, or all (default {BASELINE}: the others cost 5-50x more)",
    )
    p.add_argument("--seed", type=int, default=None, help="one seed (same as --seeds N)")
    p.add_argument("--seeds", type=_seeds, default=[1, 2, 3], help="comma-separated (default 1,2,3)")
    p.add_argument("--hours", type=_positive, default=DEFAULTS.hours, help="simulated hours measured (default 300)")
    p.add_argument("--warmup", type=float, default=DEFAULTS.warmup, help="hours before measuring (default 48)")
    p.add_argument(
        "--load", type=_positive, default=DEFAULTS.load, help="offered load, share of the GPUs (default 0.9)"
    )
    p.add_argument("--no-runtimes", action="store_true", help="jobs declare no maximum runtime")
    p.add_argument("--priorities", action="store_true", help="large jobs at a higher priority")
    p.add_argument(
        "--json", default=None, help="also write every run's figures and the summaries to FILE (- for stdout)"
    )
    p.add_argument(
        "--report",
        nargs="+",
        default=None,
        metavar="FILE",
        help="simulate nothing: print the tables of the runs these --json files hold (same settings), side by side",
    )
    args = p.parse_args(argv)
    try:
        args.shapes = _names(args.shape, list(SHAPES), "shape")
        args.policies = _names(args.policy, available(), "policy")
    except argparse.ArgumentTypeError as exc:
        p.error(str(exc))
    if args.warmup < 0:
        p.error(f"--warmup: must be 0 or more, not {args.warmup}")
    if args.seed is not None:
        args.seeds = [args.seed]
    # The baseline runs first and always: every ratio is to it, on the same seed.
    args.policies = [BASELINE, *(x for x in args.policies if x != BASELINE)]
    return args


def _title(shape: str, seeds: list[int], settings: dict[str, Any]) -> str:
    return (
        f"{SHAPES[shape].about if shape in SHAPES else shape}; seeds {','.join(map(str, seeds))}; "
        f"{settings['hours']:g} h after {settings['warmup']:g} h warm-up; load {settings['load']:g}; "
        f"runtimes {'declared' if settings['runtimes'] else 'not declared'}"
        f"{'; large jobs at higher priority' if settings['priorities'] else ''}"
    )


def report(files: list[str]) -> int:
    """The tables of runs saved by ``--json`` (several runs of one experiment, e.g. one per seed)."""
    runs: list[RunFigures] = []
    settings: dict[str, Any] | None = None
    same = ("hours", "warmup", "load", "runtimes", "priorities", "mix")
    for name in files:
        try:
            with open(name) as f:
                doc = json.load(f)
            mine = {k: doc["settings"][k] for k in same}
            loaded = [
                RunFigures(**{**r, "values": {k: math.nan if v is None else v for k, v in r["values"].items()}})
                for r in doc["runs"]
            ]
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise SystemExit(
                f"python -m benchmarks.quality: error: --report {name}: not a --json file ({exc})"
            ) from None
        if settings is not None and mine != settings:
            raise SystemExit(f"python -m benchmarks.quality: error: --report {name}: other settings than {files[0]}")
        settings = mine
        runs += loaded
    assert settings is not None
    for shape in dict.fromkeys(r.shape for r in runs):
        by_policy: dict[str, list[RunFigures]] = {}
        for r in sorted((r for r in runs if r.shape == shape), key=lambda r: r.seed):
            by_policy.setdefault(r.policy, []).append(r)
        order = [BASELINE, *(p for p in by_policy if p != BASELINE)]
        seeds = sorted({r.seed for r in runs if r.shape == shape})
        print(table(_title(shape, seeds, settings), {p: by_policy[p] for p in order if p in by_policy}) + "\n")
    return 0


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    if args.report:
        return report(args.report)
    settings = Settings(args.hours, args.warmup, args.load, not args.no_runtimes, args.priorities)
    began = time.perf_counter()
    runs: list[RunFigures] = []
    for name in args.shapes:
        shape = SHAPES[name]
        by_policy: dict[str, list[RunFigures]] = {}
        for policy in args.policies:
            for seed in args.seeds:
                _, fig = simulate(shape, policy, seed, settings)
                runs.append(fig)
                by_policy.setdefault(policy, []).append(fig)
                print(
                    f"[{name} {policy} seed {seed}] {fig.sim_hours:.0f} simulated h in {fig.wall_s:.1f} s "
                    f"({60 * fig.sim_hours / fig.wall_s:.0f} h per wall minute; CPU {fig.cpu_s:.1f} s, "
                    f"{60 * fig.sim_hours / max(fig.cpu_s, 1e-9):.0f} h per CPU minute), "
                    f"{fig.values['jobs']:.0f} jobs measured, {fig.placements:,} placements",
                    file=sys.stderr,
                    flush=True,
                )
        print(table(_title(name, args.seeds, asdict(settings)), by_policy) + "\n", flush=True)
    wall = time.perf_counter() - began
    print(f"wall time: {wall:.0f} s (CPU {sum(r.cpu_s for r in runs):.0f} s)", flush=True)
    if args.json:
        out = document({**asdict(settings), "seeds": args.seeds, "wall_s": wall}, runs)
        text = json.dumps(out, indent=2)
        if args.json == "-":
            print(text)
        else:
            with open(args.json, "w") as f:
                f.write(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
