"""Placement micro-benchmark: our engine against Kueue's own Go code, on identical inputs.

    python benchmarks/placement_vs_kueue.py [--sizes 1000,10000,50000] [--shape 1000=2x2x10x25 ...]
                                            [--rounds 3] [--repeat 10] [--seed 1] [--json-out FILE]

For each size, ``benchmarks/placement.py --scenario-out`` writes one scenario file (a
zone > block > rack > host cluster with random existing usage, and the required /
preferred / unconstrained PodSets of 8, 64, 512 and 4096 pods). Then, for ``--rounds``
rounds, the Go program in ``benchmarks/kueue_go`` (Kueue's
``FindTopologyAssignmentsForFlavor``, at the version ``e2e/versions.py`` pins) and
``placement.py --scenario-in`` (our ``TopologySnapshot.place``) each time every case
``--repeat`` times on that same file, alternately (Kueue first in even rounds, ours first
in odd ones). Times are pooled over the rounds; the first call of each case is left out
(reported in the JSON as ``first_ms``). Assignments are compared domain by domain.

Our engine is the ``kueue_tas`` package in ``--engine DIR`` (put first on PYTHONPATH, as
``placement.py --compare-with`` does); by default a copy of this working tree's, taken when
the run starts, so that edits made during a run do not mix two engines in one table.

The Go program is built on first use into ``$KUEUE_TAS_CACHE/bin`` (default
``~/.cache/kueue-tas/bin``) and rebuilt when its sources or the Go version change. Its
go.sum was seeded from Kueue's own go.sum (as ``e2e/build.py`` does), then ``go mod tidy``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from placement_diff import Locator, explain, verdict

from kueue_tas.topology.features import KUEUE_DEFAULTS

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
GO_DIR = HERE / "kueue_go"
PLACEMENT = HERE / "placement.py"
BINARY = "kueue-tas-placement-kueuego"

# nodes -> (zones, blocks, racks, hosts per rack); 25 hosts per rack, as placement.py's default.
SHAPES: dict[int, tuple[int, int, int, int]] = {
    1_000: (2, 2, 10, 25),
    10_000: (2, 10, 20, 25),
    50_000: (2, 50, 20, 25),
}

Result = dict[str, Any]

# Gates Kueue v0.19.2's TAS code reads that our engine has no switch for: the runner shows
# their values, since the comparison holds for those values only.
KUEUE_ONLY_TAS_GATES = (
    "SchedulerLibraryIntegration",
    "SkipReassignmentForPodOwnedWorkloads",
    "VectorizedResourceRequests",
)


def log(msg: str) -> None:
    print(f"[placement-vs-kueue] {msg}", file=sys.stderr, flush=True)


def cache_dir() -> Path:
    """The e2e harness's cache (``e2e/paths.py``): ``$KUEUE_TAS_CACHE`` or ``~/.cache/kueue-tas``."""
    env = os.environ.get("KUEUE_TAS_CACHE")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "kueue-tas"


def go_env() -> dict[str, str]:
    # As e2e/build.py: no workspace, no toolchain switch, no cgo, so the build is the same everywhere.
    return {**os.environ, "GOWORK": "off", "GOTOOLCHAIN": "local", "CGO_ENABLED": "0", "GOFLAGS": "-buildvcs=false"}


def pinned_kueue() -> str:
    """Kueue's version in go.mod, checked against the harness's pin (``e2e/versions.py``)."""
    gomod = (GO_DIR / "go.mod").read_text()
    found = re.search(r"^\s*(?:require\s+)?sigs\.k8s\.io/kueue\s+(v\S+)", gomod, re.M)
    pin = re.search(r'^KUEUE\s*=\s*"([^"]+)"', (ROOT / "e2e" / "versions.py").read_text(), re.M)
    if not found or not pin:
        raise SystemExit("cannot read Kueue's version from benchmarks/kueue_go/go.mod or e2e/versions.py")
    if found.group(1) != pin.group(1):
        raise SystemExit(
            f"benchmarks/kueue_go/go.mod requires sigs.k8s.io/kueue {found.group(1)} but e2e/versions.py pins "
            f"{pin.group(1)}: update go.mod, seed go.sum from that Kueue's go.sum, then `go mod tidy`"
        )
    return found.group(1)


def go_binary(rebuild: bool) -> Path:
    gov = subprocess.run(["go", "env", "GOVERSION"], capture_output=True, text=True, check=True, env=go_env())
    digest = hashlib.sha256(gov.stdout.encode())
    for name in ("go.mod", "go.sum", "main.go"):
        digest.update((GO_DIR / name).read_bytes())
    stamp_key = digest.hexdigest()
    out = cache_dir() / "bin" / BINARY
    stamp = out.with_name(f".stamp-{BINARY}")
    if not rebuild and out.is_file() and stamp.is_file() and stamp.read_text().strip() == stamp_key:
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f"{BINARY}.tmp")
    log(f"building {GO_DIR.relative_to(ROOT)} -> {out}")
    t0 = time.monotonic()
    subprocess.run(["go", "build", "-trimpath", "-o", str(tmp), "."], cwd=GO_DIR, env=go_env(), check=True)
    tmp.replace(out)
    stamp.write_text(stamp_key + "\n")
    log(f"built in {time.monotonic() - t0:.0f}s")
    return out


def run_json(argv: list[str], env: dict[str, str] | None = None) -> Result:
    proc = subprocess.run(argv, capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed ({proc.returncode}):\n{proc.stderr}")
    result: Result = json.loads(proc.stdout)
    return result


def write_scenario(path: Path, shape: tuple[int, int, int, int], seed: int) -> None:
    zones, blocks, racks, hosts = shape
    argv = [sys.executable, str(PLACEMENT), "--scenario-out", str(path), "--seed", str(seed)]
    argv += ["--zones", str(zones), "--blocks", str(blocks), "--racks", str(racks), "--hosts", str(hosts)]
    subprocess.run(argv, check=True)


def p99(times: list[float]) -> float:
    """As placement.py: the sample at index ``int(n * 0.99)`` of the sorted times."""
    ordered = sorted(times)
    return ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]


def check_gates(gates: dict[str, bool]) -> list[str]:
    """Kueue's gate values in the Go program against the defaults our engine assumes."""
    problems = []
    for name, ours in sorted(KUEUE_DEFAULTS.items()):
        if name not in gates:
            problems.append(f"{name}: not a gate of this Kueue build (ours: {ours})")
        elif gates[name] != ours:
            problems.append(f"{name}: Kueue {gates[name]}, ours {ours}")
    return problems


def freeze_engine(workdir: Path) -> Path:
    """A copy of this working tree's ``kueue_tas`` (see the module docstring)."""
    dest = workdir / "engine"
    shutil.rmtree(dest, ignore_errors=True)
    shutil.copytree(ROOT / "kueue_tas", dest / "kueue_tas", ignore=shutil.ignore_patterns("__pycache__"))
    return dest


def engine_digest(engine: Path) -> str:
    """Identifies the placement code measured: sha256 of ``kueue_tas/topology/*.py``."""
    digest = hashlib.sha256()
    for path in sorted((engine / "kueue_tas" / "topology").glob("*.py")):
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:12]


def run_size(
    nodes: int, shape: tuple[int, int, int, int], args: argparse.Namespace, binary: Path, engine: Path
) -> Result:
    workdir = Path(args.workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    path = workdir / f"scenario-{nodes}.json"
    t0 = time.monotonic()
    write_scenario(path, shape, args.seed)
    log(f"{nodes} nodes: scenario {path} ({path.stat().st_size / 2**20:.1f} MiB, {time.monotonic() - t0:.1f}s)")
    with path.open() as f:
        scenario = json.load(f)
    if len(scenario["nodes"]) != nodes:
        raise SystemExit(f"shape {shape} gives {len(scenario['nodes'])} nodes, not {nodes}")

    kueue_argv = [str(binary), "-scenario", str(path), "-repeat", str(args.repeat)]
    ours_argv = [sys.executable, str(PLACEMENT), "--scenario-in", str(path), "--repeat", str(args.repeat), "--json"]
    ours_env = {**os.environ, "PYTHONPATH": str(engine)}
    runs: dict[str, list[Result]] = {"kueue": [], "ours": []}
    for rnd in range(args.rounds):
        order = ("kueue", "ours") if rnd % 2 == 0 else ("ours", "kueue")
        for side in order:
            t0 = time.monotonic()
            if side == "kueue":
                runs[side].append(run_json(kueue_argv))
            else:
                runs[side].append(run_json(ours_argv, ours_env))
            log(f"{nodes} nodes: round {rnd + 1}/{args.rounds} {side} {time.monotonic() - t0:.1f}s")

    locator = Locator(scenario)
    rows = []
    for i, spec in enumerate(scenario["cases"]):
        k_cases = [r["cases"][i] for r in runs["kueue"]]
        o_cases = [r["cases"][i] for r in runs["ours"]]
        for c in (*k_cases, *o_cases):
            if (c["mode"], c["pods"]) != (spec["mode"], spec["pods"]):
                raise SystemExit(f"case {i}: results out of order ({c['mode']}/{c['pods']})")
        k_times = [t for c in k_cases for t in c["times_ms"]]
        o_times = [t for c in o_cases for t in c["times_ms"]]
        k, o = k_cases[0], o_cases[0]
        row = {
            "nodes": nodes,
            "mode": spec["mode"],
            "pods": spec["pods"],
            "level": spec["level"],
            "kueue_p50_ms": statistics.median(k_times),
            "kueue_p99_ms": p99(k_times),
            "ours_p50_ms": statistics.median(o_times),
            "ours_p99_ms": p99(o_times),
            "kueue_first_ms": statistics.median(c["first_ms"] for c in k_cases),
            "ours_first_ms": statistics.median(c["first_ms"] for c in o_cases),
            "kueue_fits": k["fits"],
            "ours_fits": o["fits"],
            "same": verdict(k, o),
            # Both engines are deterministic: a round that disagrees with the first is a bug.
            "stable": all(c["assignment"] == k["assignment"] for c in k_cases)
            and all(c["assignment"] == o["assignment"] for c in o_cases),
            "details": [] if verdict(k, o).startswith("yes") else explain(k, o, locator),
        }
        rows.append(row)
    return {
        "nodes": nodes,
        "shape": dict(zip(("zones", "blocks", "racks", "hosts"), shape, strict=True)),
        "kueue_setup_ms": statistics.median(r["setup_ms"] + r["snapshot_ms"] for r in runs["kueue"]),
        "ours_setup_ms": statistics.median(r["setup_ms"] for r in runs["ours"]),
        "kueue_version": runs["kueue"][0]["kueue"],
        "go_version": runs["kueue"][0]["go"],
        "gate_problems": check_gates(runs["kueue"][0]["gates"]),
        "kueue_only_gates": {g: runs["kueue"][0]["gates"].get(g) for g in KUEUE_ONLY_TAS_GATES},
        "rows": rows,
    }


def git_state() -> str:
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    dirty = subprocess.run(["git", "status", "--porcelain"], cwd=ROOT, capture_output=True, text=True)
    if head.returncode != 0:
        return "unknown"
    return head.stdout.strip() + (" (uncommitted changes)" if dirty.stdout.strip() else "")


def print_report(sizes: list[Result], started: str, args: argparse.Namespace, engine: str) -> None:
    first = sizes[0]
    print(
        f"placement vs Kueue {first['kueue_version']} ({first['go_version']}), ours: Python "
        f"{platform.python_version()}, {engine}; {started}; "
        f"{args.rounds} rounds x {args.repeat} timed calls per case and engine, seed {args.seed}"
    )
    header = (
        f"{'nodes':>6} {'mode':<13} {'pods':>5}  {'Kueue p50':>9} {'Kueue p99':>9}  "
        f"{'ours p50':>9} {'ours p99':>9}  {'ours/Kueue':>10}  same"
    )
    print(header)
    print("-" * len(header))
    for size in sizes:
        for r in size["rows"]:
            ratio = r["ours_p50_ms"] / r["kueue_p50_ms"] if r["kueue_p50_ms"] else float("nan")
            same = r["same"] + ("" if r["stable"] else " (unstable between rounds)")
            print(
                f"{r['nodes']:>6} {r['mode']:<13} {r['pods']:>5}  {r['kueue_p50_ms']:>9.3f} {r['kueue_p99_ms']:>9.3f}  "
                f"{r['ours_p50_ms']:>9.3f} {r['ours_p99_ms']:>9.3f}  {ratio:>10.3f}  {same}"
            )
    print("times in ms; ratio = ours p50 / Kueue p50")
    for size in sizes:
        shape = "x".join(str(v) for v in size["shape"].values())
        print(
            f"{size['nodes']} nodes ({shape} zones x blocks x racks x hosts): setup Kueue "
            f"{size['kueue_setup_ms']:.0f} ms (cache + snapshot), ours {size['ours_setup_ms']:.0f} ms (snapshot)"
        )
    problems = first["gate_problems"]
    if problems:
        print("feature gates differ from our engine's defaults:")
        for p in problems:
            print(f"  {p}")
    else:
        print(f"feature gates: Kueue's values match our engine's defaults for all {len(KUEUE_DEFAULTS)} gates")
    only = ", ".join(f"{g}={v}" for g, v in first["kueue_only_gates"].items())
    print(f"Kueue-only gates of its TAS code: {only}")
    for size in sizes:
        for r in size["rows"]:
            if r["details"]:
                print(f"{r['nodes']} nodes, {r['mode']}, {r['pods']} pods ({r['level']}): assignments differ")
                for line in r["details"]:
                    print(line)


def parse_shapes(values: list[str]) -> dict[int, tuple[int, int, int, int]]:
    shapes = dict(SHAPES)
    for v in values:
        m = re.fullmatch(r"(\d+)=(\d+)x(\d+)x(\d+)x(\d+)", v)
        if not m:
            raise SystemExit(f"--shape {v!r}: expected NODES=ZONESxBLOCKSxRACKSxHOSTS")
        z, b, r, h = (int(g) for g in m.groups()[1:])
        if z * b * r * h != int(m.group(1)):
            raise SystemExit(f"--shape {v!r}: {z}x{b}x{r}x{h} is {z * b * r * h} nodes")
        shapes[int(m.group(1))] = (z, b, r, h)
    return shapes


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="1000,10000,50000", help="comma-separated node counts")
    ap.add_argument(
        "--shape", action="append", default=[], metavar="N=ZxBxRxH", help="shape of a size (zones x blocks x ...)"
    )
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--repeat", type=int, default=10, help="timed calls per case, engine and round")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--workdir", default=str(cache_dir() / "placement-vs-kueue"), help="where scenario files go")
    ap.add_argument("--rebuild", action="store_true", help="rebuild the Go program even if up to date")
    ap.add_argument("--engine", metavar="DIR", help="directory holding the kueue_tas to measure (default: a copy)")
    ap.add_argument("--json-out", metavar="FILE", help="also write every figure as JSON")
    args = ap.parse_args()
    if args.rounds < 1 or args.repeat < 1:
        raise SystemExit("--rounds and --repeat must be at least 1")
    shapes = parse_shapes(args.shape)
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    for n in sizes:
        if n not in shapes:
            raise SystemExit(f"no shape for {n} nodes: add --shape {n}=ZxBxRxH")

    pinned_kueue()
    binary = go_binary(args.rebuild)
    started = time.strftime("%Y-%m-%d %H:%M:%S %Z")
    if args.engine:
        engine = Path(args.engine).resolve()
        if not (engine / "kueue_tas" / "topology").is_dir():
            raise SystemExit(f"--engine {args.engine}: no kueue_tas/topology there")
        described = f"engine {engine}"
    else:
        engine = freeze_engine(Path(args.workdir))
        described = f"engine: working tree at git {git_state()}, copied at start"
    described += f" (topology sha256 {engine_digest(engine)})"
    results = [run_size(n, shapes[n], args, binary, engine) for n in sizes]
    print_report(results, started, args, described)
    if args.json_out:
        out = {"started": started, "engine": described, "rounds": args.rounds, "repeat": args.repeat, "sizes": results}
        with open(args.json_out, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
