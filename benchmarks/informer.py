"""Informer benchmark: memory per cached pod/node and watch events processed per second.

    python benchmarks/informer.py [--nodes 10000] [--pods 100000] [--json]

Realistic Node and Pod JSON (``watch_events.py``: labels, annotations, managedFields, status, volumes,
container statuses) is generated once and serialised as watch-event lines, as the
API server sends them. The lines are then fed to ``Informer.handle_line``, the
path every watched event takes (decode, strip managedFields, transform into the
slim form, store with indexes, handlers), without the network.

* events/s: ADDED for every pod, then MODIFIED for every pod (status change,
  index update), then DELETED for every pod; nodes ADDED.
* memory: tracemalloc's traced-memory growth while filling the stores (on a
  second run, since tracing slows Python down), divided by the object count.
  The event lines themselves are allocated before tracing starts.
* reference: decoding alone, and building kubernetes_asyncio's generated
  ``V1Pod`` models (what the stock watch does per event), on a sample.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import time
import tracemalloc
from collections.abc import Callable
from typing import Any

from watch_events import node_event_lines, pod_event_lines

from kueue_tas.controllers.informers import SlimNode, slim_node
from kueue_tas.kube.catalogue import NODES, PODS
from kueue_tas.kube.decoding import decode
from kueue_tas.kube.informer import Informer
from kueue_tas.kube.slim import SlimPod, slim_pod
from kueue_tas.kube.stores import PodStore, Store


class Counter:
    def __init__(self) -> None:
        self.adds = self.updates = self.deletes = 0

    def add(self, _obj: Any) -> None:
        self.adds += 1

    def update(self, _old: Any, _new: Any) -> None:
        self.updates += 1

    def delete(self, _obj: Any) -> None:
        self.deletes += 1


def pod_informer() -> tuple[Informer[SlimPod], Counter]:
    informer: Informer[SlimPod] = Informer(None, PODS, slim_pod, store=PodStore())
    counter = Counter()
    informer.add_handler(counter.add, counter.update, counter.delete)
    return informer, counter


def node_informer() -> Informer[SlimNode]:
    return Informer(None, NODES, slim_node, store=Store())


def feed(handle: Callable[[bytes], Any], lines: list[bytes]) -> tuple[float, float]:
    """Events per second through ``handle``: per wall-clock second and per CPU second of this process."""
    gc.collect()
    began, began_cpu = time.perf_counter(), time.process_time()
    for line in lines:
        handle(line)
    wall, cpu = time.perf_counter() - began, time.process_time() - began_cpu
    return len(lines) / wall, len(lines) / max(cpu, 1e-9)


def traced_growth(fill: Callable[[], object]) -> tuple[int, object]:
    """Bytes still allocated after ``fill()`` (tracemalloc), and what fill returned (kept alive)."""
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        kept = fill()
        gc.collect()
        after = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    return after - before, kept


def v1pod_models_per_second(lines: list[bytes]) -> float | None:
    """kubernetes_asyncio's generated-model deserialisation of the same events, per CPU second (reference)."""
    try:
        from kubernetes_asyncio.client import ApiClient
    except ImportError:  # pragma: no cover
        return None

    async def run() -> float:
        async with ApiClient() as api:
            deserialize = api._ApiClient__deserialize  # what ApiClient.deserialize calls
            began = time.process_time()
            for line in lines:
                event = json.loads(line)
                deserialize(event["object"], "V1Pod")
            return len(lines) / max(time.process_time() - began, 1e-9)

    return asyncio.run(run())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=10_000)
    parser.add_argument("--pods", type=int, default=100_000)
    parser.add_argument("--reference-sample", type=int, default=2_000, help="pods for the decode/V1Pod reference")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args()

    began = time.perf_counter()
    node_lines = node_event_lines(args.nodes)
    added = pod_event_lines(args.pods, args.nodes, "ADDED", "Pending", 2_000_000)
    generate_s = time.perf_counter() - began

    # Throughput (no tracing). MODIFIED/DELETED lines are generated between runs to bound memory.
    nodes = node_informer()
    node_rate = feed(nodes.handle_line, node_lines)
    pods, counter = pod_informer()
    add_rate = feed(pods.handle_line, added)
    assert len(pods.store) == args.pods and counter.adds == args.pods
    lines = pod_event_lines(args.pods, args.nodes, "MODIFIED", "Running", 3_000_000)
    update_rate = feed(pods.handle_line, lines)
    assert counter.updates == args.pods
    lines = pod_event_lines(args.pods, args.nodes, "DELETED", "Succeeded", 4_000_000)
    delete_rate = feed(pods.handle_line, lines)
    assert len(pods.store) == 0 and counter.deletes == args.pods
    del nodes, pods, lines

    # Memory (traced; fresh informers).
    def fill_nodes() -> object:
        informer = node_informer()
        for line in node_lines:
            informer.handle_line(line)
        return informer

    def fill_pods() -> object:
        informer, _ = pod_informer()
        for line in added:
            informer.handle_line(line)
        return informer

    node_bytes, kept_nodes = traced_growth(fill_nodes)
    del kept_nodes
    pod_bytes, kept_pods = traced_growth(fill_pods)
    del kept_pods

    # Reference figures on a sample.
    sample = added[: args.reference_sample]
    json_rate = feed(json.loads, sample)
    decode_strip_rate = feed(lambda line: decode(line, strip=True), sample)
    v1pod_rate = v1pod_models_per_second(sample)

    result = {
        "nodes": args.nodes,
        "pods": args.pods,
        "pod_event_bytes": round(sum(map(len, added)) / len(added)),
        "node_event_bytes": round(sum(map(len, node_lines)) / max(1, len(node_lines))),
        "pod_added_events_per_s": round(add_rate[0]),
        "pod_modified_events_per_s": round(update_rate[0]),
        "pod_deleted_events_per_s": round(delete_rate[0]),
        "node_added_events_per_s": round(node_rate[0]),
        "pod_added_events_per_cpu_s": round(add_rate[1]),
        "pod_modified_events_per_cpu_s": round(update_rate[1]),
        "pod_deleted_events_per_cpu_s": round(delete_rate[1]),
        "node_added_events_per_cpu_s": round(node_rate[1]),
        "bytes_per_cached_pod": round(pod_bytes / args.pods),
        "bytes_per_cached_node": round(node_bytes / max(1, args.nodes)),
        "pod_store_mib": round(pod_bytes / 2**20, 1),
        "node_store_mib": round(node_bytes / 2**20, 1),
        "reference_json_loads_per_cpu_s": round(json_rate[1]),
        "reference_decode_stripped_per_cpu_s": round(decode_strip_rate[1]),
        "reference_v1pod_models_per_cpu_s": round(v1pod_rate) if v1pod_rate else None,
        "generate_seconds": round(generate_s, 1),
        "targets": {"bytes_per_cached_pod": "< 1024", "pod_events_per_s": "> 20000"},
    }
    if args.json:
        print(json.dumps(result))
        return
    width = max(map(len, result))
    for key, value in result.items():
        print(f"{key:<{width}}  {value}")


if __name__ == "__main__":
    main()
