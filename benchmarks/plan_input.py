"""``kueue-tas plan`` on a large cluster dump: how long reading and placing take.

    python benchmarks/plan_input.py [--nodes 50000] [--format yaml|json|list] [--repeat 1] [--json]

Writes a dump of ``--nodes`` Nodes (zone > block > rack > host, 8 GPUs each) with the Kueue
objects and one Job of 64 pods required in a rack, as multi-document YAML, one JSON array, or
one ``kind: List`` YAML document (as ``kubectl get -o yaml`` gives), then times ``plan -o json``
on it in this process. Run it with ``PYTHONPATH=<checkout>`` to time another checkout's package.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

from kueue_tas.cli.main import main

LEVELS = ["example.com/zone", "example.com/block", "example.com/rack", "kubernetes.io/hostname"]
KUEUE = "kueue.x-k8s.io/v1beta2"


def kueue_objects(node_labels: dict[str, str] | None = None) -> list[dict[str, Any]]:
    """Topology ``topo`` over ``LEVELS``, flavor ``gpu`` on ``node_labels`` (default: the nodes
    labelled ``node-group: gpu``), check ``tas`` and ClusterQueue ``cq`` with room for any GPU count."""
    return [
        {
            "apiVersion": KUEUE,
            "kind": "Topology",
            "metadata": {"name": "topo"},
            "spec": {"levels": [{"nodeLabel": lv} for lv in LEVELS]},
        },
        {
            "apiVersion": KUEUE,
            "kind": "ResourceFlavor",
            "metadata": {"name": "gpu"},
            "spec": {"nodeLabels": {"node-group": "gpu"} if node_labels is None else node_labels},
        },
        {
            "apiVersion": KUEUE,
            "kind": "AdmissionCheck",
            "metadata": {"name": "tas"},
            "spec": {
                "controllerName": "kueue-tas.io/topology",
                "parameters": {"apiGroup": "kueue.x-k8s.io", "kind": "Topology", "name": "topo"},
            },
        },
        {
            "apiVersion": KUEUE,
            "kind": "ClusterQueue",
            "metadata": {"name": "cq"},
            "spec": {
                "resourceGroups": [
                    {
                        "coveredResources": ["nvidia.com/gpu"],
                        "flavors": [{"name": "gpu", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": 10**6}]}],
                    }
                ],
                "admissionChecksStrategy": {"admissionChecks": [{"name": "tas"}]},
            },
        },
    ]


def node(i: int) -> dict[str, Any]:
    zone, block, rack = i // 10_000, i // 1000, i // 25
    name = f"node-{i}"
    labels = {
        "node-group": "gpu",
        LEVELS[0]: f"z{zone}",
        LEVELS[1]: f"b{block}",
        LEVELS[2]: f"r{rack}",
        LEVELS[3]: name,
    }
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": labels, "annotations": {}},
        "spec": {},
        "status": {
            "allocatable": {"cpu": "96", "memory": "768Gi", "pods": "110", "nvidia.com/gpu": "8"},
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


def job() -> dict[str, Any]:
    template = {
        "metadata": {"annotations": {"kueue-tas.io/podset-required-topology": LEVELS[2]}},
        "spec": {"containers": [{"name": "c", "image": "x", "resources": {"requests": {"nvidia.com/gpu": "1"}}}]},
    }
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "bench", "namespace": "default"},
        "spec": {"parallelism": 64, "completions": 64, "suspend": True, "template": template},
    }


def write_dump(directory: Path, nodes: int, form: str) -> Path:
    objects = [*kueue_objects(), *(node(i) for i in range(nodes)), job()]
    dumper: Any = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
    if form == "json":
        path = directory / "dump.json"
        path.write_text(json.dumps(objects), encoding="utf-8")
    elif form == "list":
        path = directory / "dump.yaml"
        path.write_text(
            yaml.dump({"apiVersion": "v1", "kind": "List", "items": objects}, Dumper=dumper), encoding="utf-8"
        )
    else:
        path = directory / "dump.yaml"
        path.write_text(yaml.dump_all(objects, Dumper=dumper, sort_keys=False), encoding="utf-8")
    return path


def time_plan(path: Path) -> float:
    out, err = io.StringIO(), io.StringIO()
    start = time.perf_counter()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["plan", "-f", str(path), "-o", "json"])
    elapsed = time.perf_counter() - start
    if code != 0 or not json.loads(out.getvalue())["workloads"][0]["fits"]:
        raise SystemExit(f"plan failed (exit {code}): {err.getvalue().strip()}")
    return elapsed


def main_() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nodes", type=int, default=50_000)
    ap.add_argument("--format", choices=("yaml", "json", "list"), default="yaml")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = write_dump(Path(tmp), args.nodes, args.format)
        size = path.stat().st_size
        times = [time_plan(path) for _ in range(args.repeat)]
    result = {"nodes": args.nodes, "format": args.format, "bytes": size, "seconds": round(statistics.median(times), 2)}
    if args.json:
        print(json.dumps(result))
    else:
        print(f"plan -o json on {args.nodes} nodes ({args.format}, {size / 2**20:.1f} MiB): {result['seconds']} s")


if __name__ == "__main__":
    main_()
