"""Concurrent /metrics scrapes at scale: event-loop stalls, renders, latency.

    python benchmarks/metrics_scrape.py [--zones 2 --blocks 10 --racks 20 --hosts 25]
        [--scrapers 48] [--rounds 3] [--with-inline] [--json]

The cluster of ``benchmarks/free_slots.py`` (10,000 nodes of 8 GPUs by default, a DaemonSet-like
pod on each, GPU jobs on a third), its gauges published as the controller publishes them
(``CapacityGauges``, the default free-slot shapes), served by the controller's ``/metrics``
handler (``runtime/health.py``) on 127.0.0.1. Each round, ``--scrapers`` clients GET it at
once, asking for gzip as Prometheus does; rounds are ``MAX_AGE`` apart, so each starts with an
expired body. Two registries: the default (``metrics_hostname_level`` off) and with the per-host
series. ``--with-inline`` adds the handler as it was before issue 30 (the render on the event
loop, per request), for comparison: slow (one render per scrape).

Per row: series, body size (plain / gzip), renders performed, latency p50 / p99 of the scrapes,
and the longest the event loop went without running a 5 ms ticker during the scrapes. The
scrapers run on the same loop and take the gzipped bytes as they come (Prometheus unzips in its
own process; the check of the body is after the timing); their reads still count against the
loop, so the stalls are an upper bound of what a Prometheus outside the process causes.
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
import json
import statistics
import time
from typing import Any

import aiohttp
from aiohttp import web
from free_slots import SHAPES, cluster

from kueue_tas.capacity.live import LiveCapacity
from kueue_tas.controllers.gauges.reconciler import CapacityGauges
from kueue_tas.runtime.exposition import MAX_AGE
from kueue_tas.runtime.health import HealthServer
from kueue_tas.runtime.metrics import Metrics


def published(capacity: LiveCapacity, hostname_level: bool) -> Metrics:
    metrics = Metrics()
    CapacityGauges(metrics, capacity, shapes=SHAPES, hostname_level=hostname_level).publish()
    return metrics


def inline_app(metrics: Metrics) -> web.Application:
    """``/metrics`` as it was served before issue 30: rendered on the event loop per request."""

    async def handler(request: web.Request) -> web.Response:
        body, content_type = metrics.render()
        return web.Response(body=body, headers={"Content-Type": content_type})

    app = web.Application()
    app.router.add_get("/metrics", handler)
    return app


def series_count(body: bytes) -> int:
    return sum(1 for line in body.splitlines() if line and not line.startswith(b"#"))


async def scrape_rounds(app: web.Application, scrapers: int, rounds: int) -> dict[str, Any]:
    runner = web.AppRunner(app, access_log=None, handle_signals=False)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    url = f"http://127.0.0.1:{port}/metrics"
    loop = asyncio.get_running_loop()
    latencies: list[float] = []
    worst_gap = 0.0
    body = b""
    wire = 0
    try:
        connector = aiohttp.TCPConnector(limit=0)
        # Prometheus unzips in its own process: here the bytes are taken as they come.
        async with aiohttp.ClientSession(connector=connector, auto_decompress=False) as session:

            async def scrape() -> tuple[float, bytes, bool]:
                started = time.perf_counter()
                async with session.get(url, headers={"Accept-Encoding": "gzip"}) as r:
                    data = await r.read()
                    zipped = r.headers.get("Content-Encoding") == "gzip"
                return time.perf_counter() - started, data, zipped

            for n in range(rounds):
                if n:
                    await asyncio.sleep(MAX_AGE + 0.1)  # the held body expires: each round renders
                done = asyncio.gather(*(scrape() for _ in range(scrapers)))
                last = loop.time()
                while not done.done():
                    await asyncio.sleep(0.005)
                    now = loop.time()
                    worst_gap, last = max(worst_gap, now - last), now
                for took, data, zipped in await done:
                    latencies.append(took)
                    body, wire = gzip.decompress(data) if zipped else data, len(data)
    finally:
        await runner.cleanup()
    latencies.sort()
    return {
        "scrapes": len(latencies),
        "series": series_count(body),
        "body_mib": round(len(body) / 2**20, 2),
        "wire_mib": round(wire / 2**20, 3),
        "p50_ms": round(statistics.median(latencies) * 1000, 1),
        "p99_ms": round(latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))] * 1000, 1),
        "max_stall_ms": round(worst_gap * 1000, 1),
    }


async def run(args: argparse.Namespace) -> list[dict[str, Any]]:
    capacity = cluster(args.zones, args.blocks, args.racks, args.hosts)
    rows = []
    cases = [("threaded, shared, kept", False, False), ("threaded, shared, kept", True, False)]
    if args.with_inline:
        cases.append(("inline (before issue 30)", True, True))
    for serving, hosts, inline in cases:
        metrics = published(capacity, hostname_level=hosts)
        server = HealthServer(metrics=metrics)
        app = inline_app(metrics) if inline else server.make_metrics_app()
        renders_before = server.exposition.renders
        row: dict[str, Any] = {"serving": serving, "hostname_series": hosts}
        row |= await scrape_rounds(app, args.scrapers, args.rounds)
        row["renders"] = row["scrapes"] if inline else server.exposition.renders - renders_before
        rows.append(row)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--zones", type=int, default=2)
    parser.add_argument("--blocks", type=int, default=10)
    parser.add_argument("--racks", type=int, default=20)
    parser.add_argument("--hosts", type=int, default=25)
    parser.add_argument("--scrapers", type=int, default=48)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--with-inline", action="store_true", help="also the handler before issue 30 (slow)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    rows = asyncio.run(run(args))
    if args.json:
        print(json.dumps(rows, indent=2))
        return
    nodes = args.zones * args.blocks * args.racks * args.hosts
    print(f"{nodes} nodes, {args.scrapers} concurrent scrapes x {args.rounds} rounds (gzip asked)")
    header = (
        f"{'serving':26} {'host series':>11} {'series':>7} {'body MiB':>8} {'gzip MiB':>8} "
        f"{'renders':>7} {'p50 ms':>8} {'p99 ms':>8} {'max stall ms':>12}"
    )
    print(header)
    for r in rows:
        print(
            f"{r['serving']:26} {'on' if r['hostname_series'] else 'off':>11} {r['series']:>7} "
            f"{r['body_mib']:>8} {r['wire_mib']:>8} {r['renders']:>7} {r['p50_ms']:>8} {r['p99_ms']:>8} "
            f"{r['max_stall_ms']:>12}"
        )


if __name__ == "__main__":
    main()
