"""The topology map as the controller serves it, at scale: build time, event-loop stalls, bytes.

    python benchmarks/map_serve.py [--zones 2 --blocks 10 --racks 20 --hosts 25] [--repeat 5] [--json]

The cluster of ``benchmarks/map_render.py`` (10,000 nodes of 8 GPUs by default, ~1 % NotReady,
~1 % cordoned, ~2 % tainted, 40 admitted Workloads of 64 bound pods) with, instead of its Jobs,
45 Workloads holding quota and waiting for our check (40 that fit in a rack, 5 that never do),
so the page runs a trial placement for each, as the controller's does. Two paths of
``cli/map_server.py``, each ``--repeat`` times with its cache expired:

- leader: the model from a synced ``LiveCapacity`` on the event loop, the HTML in a thread;
- standby: the cluster read (here a list already in memory: the API server's time is not
  counted) turned into a capacity model, the map and its HTML, all in a thread.

For each: the p50 of one build, the longest the event loop went without running a 5 ms ticker
during the builds (what a watch event or a webhook review waits at worst), and the longest
pass of Python's garbage collector meanwhile: a full pass over the process's objects stops
every thread, and is what such a stall mostly is. Then one GET over loopback with and without
gzip: the page's bytes on the wire.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import statistics
import time
from collections.abc import Callable
from typing import Any

import aiohttp
from map_render import GPU, cluster, template
from plan_input import LEVELS

from kueue_tas.api.kinds import parse_object
from kueue_tas.api.kueue_objects import AdmissionCheck, ClusterQueue, ResourceFlavor, Topology
from kueue_tas.api.workload import Workload
from kueue_tas.capacity.feed import capacity_from_lists
from kueue_tas.cli.cluster_read import ClusterState, KueueConfig, tas_config
from kueue_tas.cli.map_server import MapServer
from kueue_tas.cli.map_sources import LiveSource, ReadSource
from kueue_tas.controllers.informers import slim_node
from kueue_tas.kube.slim import slim_pod
from kueue_tas.mapview.model import map_hosts
from kueue_tas.runtime.config import Settings

KUEUE = "kueue.x-k8s.io/v1beta2"
CHECK_TIME = "2026-01-01T00:00:00Z"
TICK = 0.005


def pending(name: str, pods: int) -> dict[str, Any]:
    """A Workload holding quota on flavor gpu, our check Pending: 1-GPU pods in one rack."""
    return {
        "apiVersion": KUEUE,
        "kind": "Workload",
        "metadata": {"name": name, "namespace": "team", "uid": f"uid-{name}"},
        "spec": {"queueName": "lq", "podSets": [{"name": "main", "count": pods, "template": template(LEVELS[2], 1)}]},
        "status": {
            "admission": {
                "clusterQueue": "cq",
                "podSetAssignments": [{"name": "main", "flavors": {GPU: "gpu"}, "count": pods}],
            },
            "admissionChecks": [{"name": "tas", "state": "Pending", "message": "", "lastTransitionTime": CHECK_TIME}],
            "conditions": [{"type": "QuotaReserved", "status": "True"}],
        },
    }


def cluster_state(zones: int, blocks: int, racks: int, hosts: int) -> ClusterState:
    raw = [o for o in cluster(zones, blocks, racks, hosts) if o["kind"] != "Job"]
    raw += [pending(f"fit-{i}", 64) for i in range(40)] + [pending(f"too-big-{i}", 600) for i in range(5)]
    config = KueueConfig()
    state = ClusterState(config)
    for obj in raw:
        kind = obj["kind"]
        if kind == "Node":
            state.nodes.append(slim_node(obj))
        elif kind == "Pod":
            state.pods.append(slim_pod(obj))
        elif kind == "Workload":
            state.workloads.append(Workload.model_validate(obj))
        elif kind == "Topology":
            config.topologies[obj["metadata"]["name"]] = Topology.model_validate(obj)
        elif kind == "ResourceFlavor":
            config.flavors[obj["metadata"]["name"]] = ResourceFlavor.model_validate(obj)
        elif kind == "AdmissionCheck":
            config.checks[obj["metadata"]["name"]] = AdmissionCheck.model_validate(obj)
        elif kind == "ClusterQueue":
            config.queues.append(ClusterQueue.model_validate(obj))
        else:
            assert parse_object(obj) is not None, kind
    return state


async def measure(server: MapServer, clock: list[float], repeat: int) -> dict[str, Any]:
    """p50 of a build, the longest event-loop stall during ``repeat`` builds, and the longest
    pass of the garbage collector meanwhile (it stops every thread, whichever one allocated)."""
    stalls: list[float] = []
    done = asyncio.Event()
    passes: list[float] = []
    started: list[float] = []

    def gc_pass(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            started.append(time.perf_counter())
        elif started:
            passes.append(time.perf_counter() - started.pop())

    gc.callbacks.append(gc_pass)

    async def ticker() -> None:
        last = time.perf_counter()
        while not done.is_set():
            await asyncio.sleep(TICK)
            now = time.perf_counter()
            stalls.append(now - last - TICK)
            last = now

    tick = asyncio.create_task(ticker())
    await asyncio.sleep(TICK * 3)
    times = []
    build = None
    for _ in range(repeat):
        clock[0] += 3600  # every cache expired
        t0 = time.perf_counter()
        build = await server.current()
        times.append(time.perf_counter() - t0)
    done.set()
    await tick
    gc.callbacks.remove(gc_pass)
    assert build is not None
    return {
        "nodes": sum(len(map_hosts(f)) for f in build.model.flavors),
        "workloads": len(build.model.workloads),
        "build_p50_seconds": round(statistics.median(times), 3),
        "longest_loop_stall_seconds": round(max(stalls), 3),
        "longest_gc_pass_seconds": round(max(passes, default=0.0), 3),
        "page_bytes": len(build.page),
    }


async def wire_bytes(server: MapServer) -> tuple[int, int]:
    """(bytes of one GET with gzip, without) over loopback."""
    await server.start()
    try:
        ((host, port),) = server.addresses
        out = []
        for encoding in ("gzip", "identity"):
            async with (
                aiohttp.ClientSession(auto_decompress=False) as session,
                session.get(f"http://{host}:{port}/", headers={"Accept-Encoding": encoding}) as r,
            ):
                out.append(len(await r.read()))
        return out[0], out[1]
    finally:
        await server.stop()


async def run(args: argparse.Namespace) -> dict[str, Any]:
    state = cluster_state(args.zones, args.blocks, args.racks, args.hosts)
    settings = Settings(leader_election=False, map_bind="127.0.0.1:0")
    tas = tas_config(state.config, settings.controller_name)
    capacity = capacity_from_lists(tas.specs, tas.checks, state.nodes, state.pods, state.workloads, state.daemonsets)
    for flavor in tas.specs:  # a running leader has its snapshots built by its decisions
        capacity.snapshot(flavor)

    async def read() -> ClusterState:
        return state

    def values(items: list[Any]) -> Callable[[], list[Any]]:
        return lambda: items

    live = LiveSource(
        capacity,
        values(state.workloads),
        values(state.pods),
        lambda: tas.check_flavors,
        lambda: True,
        settings,
        synced=True,
    )
    result: dict[str, Any] = {}
    for name, live_source in (("leader", live), ("standby", None)):
        clock = [0.0]

        def now(clock: list[float] = clock) -> float:
            return clock[0]

        server = MapServer(
            settings.map_bind, ReadSource(read, settings), live_source, replica=name, refresh_seconds=30, clock=now
        )
        result[name] = await measure(server, clock, args.repeat)
    gzip_bytes, plain_bytes = await wire_bytes(
        MapServer(settings.map_bind, ReadSource(read, settings), live, replica="x")
    )
    result["wire"] = {"gzip_bytes": gzip_bytes, "identity_bytes": plain_bytes}
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--zones", type=int, default=2)
    ap.add_argument("--blocks", type=int, default=10)
    ap.add_argument("--racks", type=int, default=20)
    ap.add_argument("--hosts", type=int, default=25)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    args = ap.parse_args()
    result = asyncio.run(run(args))
    if args.json:
        print(json.dumps(result))
        return
    for name in ("leader", "standby"):
        r = result[name]
        print(
            f"{name:8} {r['nodes']} nodes, {r['workloads']} workloads: build p50 {r['build_p50_seconds']:.3f} s "
            f"(target < 2 s), longest event-loop stall {r['longest_loop_stall_seconds']:.3f} s "
            f"(longest GC pass {r['longest_gc_pass_seconds']:.3f} s), page {r['page_bytes'] / 2**20:.2f} MiB"
        )
    wire = result["wire"]
    print(f"on the wire: {wire['identity_bytes'] / 2**20:.2f} MiB, {wire['gzip_bytes'] / 2**10:.0f} KiB gzipped")


if __name__ == "__main__":
    main()
