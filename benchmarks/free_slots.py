"""Free-slot metrics on a large topology: computation time, series and scrape size.

    python benchmarks/free_slots.py [--zones 2 --blocks 10 --racks 20 --hosts 25] [--repeat 20]

Builds zone > block > rack > host (10,000 nodes of 8 GPUs by default) with a DaemonSet-like pod
on every node and GPU jobs on a third of them, then times ``free_slots`` and ``level_fit`` per
shape, and one publication of the free-slot gauges (two shapes, the default levels: all but the
hostname) into a fresh registry and into one already holding them (the gauge loop's steady
state), and prints the series count and the size of the /metrics text.
"""

from __future__ import annotations

import argparse
import functools
import random
import statistics
import time
from collections.abc import Callable

from kueue_tas.api.constants import HOSTNAME_LABEL
from kueue_tas.api.pod_shape import parse_pod_shape
from kueue_tas.capacity.live import LiveCapacity
from kueue_tas.capacity.rules import FlavorSpec
from kueue_tas.controllers.gauges.reconciler import publish_free_slots
from kueue_tas.runtime.metrics import Metrics
from kueue_tas.topology.explain.free_slots import free_slots, level_fit
from kueue_tas.topology.model import NodeInfo

LEVELS = ("example.com/zone", "example.com/block", "example.com/rack", HOSTNAME_LABEL)
GPU = "nvidia.com/gpu"
SHAPES = (parse_pod_shape("nvidia.com/gpu=8"), parse_pod_shape("nvidia.com/gpu=1"))


def cluster(zones: int, blocks: int, racks: int, hosts: int, seed: int = 1) -> LiveCapacity:
    rng = random.Random(seed)
    cap = LiveCapacity()
    cap.set_flavors({"gpu": FlavorSpec("gpu", "bench", LEVELS, {})})
    for z in range(zones):
        for b in range(blocks):
            for r in range(racks):
                for h in range(hosts):
                    name = f"node-z{z}-b{b}-r{r}-h{h}"
                    labels = {LEVELS[0]: f"z{z}", LEVELS[1]: f"z{z}-b{b}", LEVELS[2]: f"z{z}-b{b}-r{r}"}
                    alloc = {"cpu": 96_000, "memory": 768 * 2**30, "pods": 110, GPU: 8}
                    cap.upsert_node(NodeInfo(name, {**labels, HOSTNAME_LABEL: name}, alloc))
                    cap.upsert_pod(f"ds/{name}", name, {"cpu": 500, "memory": 2**30, "pods": 1})
                    if rng.random() < 0.33:
                        gpus = rng.randint(1, 8)
                        cap.upsert_pod(f"job/{name}", name, {"cpu": 8000 * gpus, GPU: gpus, "pods": 1})
    return cap


def timed(fn: Callable[[], object], repeat: int) -> tuple[float, float]:
    """(p50, max) milliseconds over ``repeat`` calls after one untimed call."""
    fn()
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        fn()
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times), max(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--zones", type=int, default=2)
    parser.add_argument("--blocks", type=int, default=10)
    parser.add_argument("--racks", type=int, default=20)
    parser.add_argument("--hosts", type=int, default=25)
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()
    cap = cluster(args.zones, args.blocks, args.racks, args.hosts)
    snap = cap.snapshot("gpu")
    assert snap is not None
    print(f"nodes: {len(snap.tree.leaves)}, domains per level: {[len(level) for level in snap.tree.levels]}")
    for shape in SHAPES:
        p50, worst = timed(functools.partial(level_fit, snap, shape), args.repeat)
        print(f"level_fit  {shape.text:18} p50 {p50:7.2f} ms  max {worst:7.2f} ms")
        p50, worst = timed(functools.partial(free_slots, snap, shape), args.repeat)
        print(f"free_slots {shape.text:18} p50 {p50:7.2f} ms  max {worst:7.2f} ms")

    def fresh() -> None:
        publish_free_slots(Metrics(), cap, SHAPES)

    steady_metrics = Metrics()
    p50, worst = timed(fresh, args.repeat)
    print(f"publish, fresh registry:  p50 {p50:7.2f} ms  max {worst:7.2f} ms")
    p50, worst = timed(lambda: publish_free_slots(steady_metrics, cap, SHAPES), args.repeat)
    print(f"publish, steady state:    p50 {p50:7.2f} ms  max {worst:7.2f} ms")
    body, _ = steady_metrics.render()
    lines = [ln for ln in body.decode().splitlines() if ln and not ln.startswith("#")]
    slots = sum(ln.startswith("kueue_tas_domain_free_slots{") for ln in lines)
    free = sum(ln.startswith("kueue_tas_free_domains{") for ln in lines)
    print(
        f"series: kueue_tas_domain_free_slots {slots}, kueue_tas_free_domains {free}; /metrics {len(body) / 1e6:.2f} MB"
    )
    everything = Metrics()
    publish_free_slots(everything, cap, SHAPES, levels=LEVELS)
    body_all, _ = everything.render()
    all_slots = sum(ln.startswith("kueue_tas_domain_free_slots{") for ln in body_all.decode().splitlines())
    print(
        f"free_slot_levels = every level: kueue_tas_domain_free_slots {all_slots}, "
        f"/metrics {len(body_all) / 1e6:.2f} MB"
    )


if __name__ == "__main__":
    main()
