"""The topology map page at scale: how long building and rendering it take, and how big it is.

    python benchmarks/map_render.py [--zones 2 --blocks 10 --racks 20 --hosts 25] [--repeat 5] [--json]
                                    [--out FILE] [--end-to-end]

Builds a cluster of zones x blocks x racks x hosts nodes (10,000 by default; 8 GPUs, 96 cpu
each) as ``kueue-tas plan`` reads it: one DaemonSet-like pod on every node, ~1 % of the nodes
NotReady, ~1 % cordoned, ~2 % tainted, 40 Workloads admitted by our check (64 one-GPU pods each,
hostname-level assignments in one rack, all bound), then 40 Jobs to place (64 GPUs in a rack)
and 5 that cannot fit (600 GPUs in one rack). Runs the planner once, then times, ``--repeat``
times: the page's model (``plan_model``) and the HTML (``render_map``), and prints the p50 of
each and of both, with the page's size. ``--end-to-end`` also times ``kueue-tas plan -o html``
on the same cluster written as a YAML dump (reading and placing included). ``--out`` keeps the
page (open it in a browser).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import random
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml
from plan_input import KUEUE, LEVELS, kueue_objects

from kueue_tas.api.kinds import parse_object
from kueue_tas.cli.main import main
from kueue_tas.cli.map_page import map_options, plan_model
from kueue_tas.cli.planner import Planner
from kueue_tas.mapview.model import map_hosts
from kueue_tas.mapview.render import render_map
from kueue_tas.topology.assignment import DomainAssignment, TopologyAssignment
from kueue_tas.topology.codec.codec import encode_assignment_annotation

GPU = "nvidia.com/gpu"
CHECK_TIME = "2026-01-01T00:00:00Z"

Obj = dict[str, Any]


def node(z: int, b: int, r: int, h: int, rng: random.Random) -> Obj:
    name = f"n-{z}-{b}-{r}-{h}"
    labels = {LEVELS[0]: f"z{z}", LEVELS[1]: f"z{z}-b{b}", LEVELS[2]: f"z{z}-b{b}-r{r}", LEVELS[3]: name}
    roll = rng.random()
    spec: Obj = {}
    ready = roll >= 0.01
    if 0.01 <= roll < 0.02:
        spec["unschedulable"] = True
    elif 0.02 <= roll < 0.04:
        spec["taints"] = [{"key": "example.com/maintenance", "value": "soon", "effect": "NoSchedule"}]
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": labels},
        "spec": spec,
        "status": {
            "allocatable": {"cpu": "96", "memory": "768Gi", "pods": "110", GPU: "8"},
            "conditions": [{"type": "Ready", "status": "True" if ready else "False", "lastTransitionTime": CHECK_TIME}],
        },
    }


def pod(name: str, node_name: str, requests: Obj, labels: Obj | None = None, namespace: str = "kube-system") -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": labels or {}},
        "spec": {"nodeName": node_name, "containers": [{"name": "c", "resources": {"requests": requests}}]},
        "status": {"phase": "Running"},
    }


def template(required: str, gpus: int) -> Obj:
    return {
        "metadata": {"annotations": {"kueue-tas.io/podset-required-topology": required}},
        "spec": {"containers": [{"name": "c", "resources": {"requests": {GPU: str(gpus)}}}]},
    }


def admitted(i: int, hosts: list[str]) -> tuple[Obj, list[Obj]]:
    """Workload team/adm-<i>: 64 one-GPU pods on ``hosts`` (8 each), admitted and bound."""
    uid = f"uid-adm-{i}"
    per_host = 64 // len(hosts)
    assignment = TopologyAssignment((LEVELS[3],), tuple(DomainAssignment((h,), per_host) for h in hosts))
    wl = {
        "apiVersion": KUEUE,
        "kind": "Workload",
        "metadata": {
            "name": f"adm-{i}",
            "namespace": "team",
            "uid": uid,
            "annotations": {"kueue-tas.io/topology-assignment": encode_assignment_annotation([("main", assignment)])},
        },
        "spec": {"queueName": "lq", "podSets": [{"name": "main", "count": 64, "template": template(LEVELS[2], 1)}]},
        "status": {
            "admission": {"clusterQueue": "cq", "podSetAssignments": [{"name": "main", "flavors": {GPU: "gpu"}}]},
            "admissionChecks": [{"name": "tas", "state": "Ready", "message": "", "lastTransitionTime": CHECK_TIME}],
            "conditions": [{"type": "QuotaReserved", "status": "True"}, {"type": "Admitted", "status": "True"}],
        },
    }
    labels = {"kueue-tas.io/workload": uid, "kueue-tas.io/podset": "main"}
    pods = [pod(f"adm-{i}-{h}-{k}", h, {GPU: "1"}, labels, "team") for h in hosts for k in range(per_host)]
    return wl, pods


def job(name: str, required: str, pods: int, gpus: int) -> Obj:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": "team", "labels": {"kueue.x-k8s.io/queue-name": "lq"}},
        "spec": {"parallelism": pods, "completions": pods, "suspend": True, "template": template(required, gpus)},
    }


def cluster(zones: int, blocks: int, racks: int, hosts: int, seed: int = 7) -> list[Obj]:
    rng = random.Random(seed)
    objects = kueue_objects(node_labels={})  # every node of the dump is the flavor's
    nodes = [
        node(z, b, r, h, rng) for z in range(zones) for b in range(blocks) for r in range(racks) for h in range(hosts)
    ]
    objects += nodes
    objects += [pod(f"ds-{n['metadata']['name']}", n["metadata"]["name"], {"cpu": "1"}) for n in nodes]
    usable = [n for n in nodes if not n["spec"] and n["status"]["conditions"][0]["status"] == "True"]
    # Admitted workloads: 8 usable hosts of one rack each, taken rack by rack from the start.
    by_rack: dict[str, list[str]] = {}
    for n in usable:
        by_rack.setdefault(n["metadata"]["labels"][LEVELS[2]], []).append(n["metadata"]["name"])
    racks_with_room = [hs for hs in by_rack.values() if len(hs) >= 8]
    for i, hs in enumerate(racks_with_room[:40]):
        wl, pods = admitted(i, hs[:8])
        objects.append(wl)
        objects += pods
    objects += [job(f"fit-{i}", LEVELS[2], 64, 1) for i in range(40)]
    objects += [job(f"too-big-{i}", LEVELS[2], 600, 1) for i in range(5)]
    return objects


def p50(times: list[float]) -> float:
    return statistics.median(times)


def main_() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--zones", type=int, default=2)
    ap.add_argument("--blocks", type=int, default=10)
    ap.add_argument("--racks", type=int, default=20)
    ap.add_argument("--hosts", type=int, default=25)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--out", help="write the page here")
    ap.add_argument("--end-to-end", action="store_true", help="also time `kueue-tas plan -o html` on a YAML dump")
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    args = ap.parse_args()

    raw = cluster(args.zones, args.blocks, args.racks, args.hosts)
    objects = [obj for o in raw if (obj := parse_object(o)) is not None]
    start = time.perf_counter()
    planner = Planner(objects)
    plans = planner.run()
    plan_seconds = time.perf_counter() - start
    options = map_options(None, None)
    model_times, render_times = [], []
    page = ""
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        model = plan_model(planner, plans, options)
        t1 = time.perf_counter()
        page = render_map(model, title="map benchmark")
        t2 = time.perf_counter()
        model_times.append(t1 - t0)
        render_times.append(t2 - t1)
    both = [m + r for m, r in zip(model_times, render_times, strict=True)]
    nodes = sum(len(map_hosts(f)) for f in model.flavors)
    result: dict[str, Any] = {
        "nodes": nodes,
        "workloads": len(model.workloads),
        "plan_seconds": round(plan_seconds, 3),
        "model_p50_seconds": round(p50(model_times), 3),
        "render_p50_seconds": round(p50(render_times), 3),
        "model_and_render_p50_seconds": round(p50(both), 3),
        "page_bytes": len(page.encode()),
    }
    if args.out:
        Path(args.out).write_text(page, encoding="utf-8")
    if args.end_to_end:
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "dump.yaml"
            dumper: Any = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
            path.write_text(yaml.dump_all(raw, Dumper=dumper, sort_keys=False), encoding="utf-8")
            out, err = io.StringIO(), io.StringIO()
            t0 = time.perf_counter()
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                code = main(["plan", "-f", str(path), "-o", "html"])
            if code != 0:
                raise SystemExit(f"plan -o html failed (exit {code}): {err.getvalue().strip()}")
            result["plan_o_html_seconds"] = round(time.perf_counter() - t0, 2)
            result["plan_o_html_bytes"] = len(out.getvalue().encode())
    if args.json:
        print(json.dumps(result))
        return
    print(f"topology map of {nodes} nodes, {result['workloads']} workloads (planner run: {plan_seconds:.2f} s)")
    print(f"  model  p50 {result['model_p50_seconds']:.3f} s")
    print(f"  render p50 {result['render_p50_seconds']:.3f} s")
    print(f"  both   p50 {result['model_and_render_p50_seconds']:.3f} s   (target < 2 s)")
    print(f"  page   {result['page_bytes'] / 2**20:.2f} MiB           (target < ~2 MB)")
    if args.end_to_end:
        print(
            f"  `plan -o html` end to end (YAML read, placing, page): {result['plan_o_html_seconds']} s, "
            f"{result['plan_o_html_bytes'] / 2**20:.2f} MiB"
        )


if __name__ == "__main__":
    main_()
