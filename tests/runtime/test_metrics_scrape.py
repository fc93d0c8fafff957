"""Issue 30, finding 3: ``/metrics`` must not stop the leader. At 10,000 nodes one render of the
exposition took ~0.4 s on the event loop, and 48 concurrent scrapes stalled it 17 s, past the
lease's renew deadline. A render now runs in a worker thread, the requests arriving while it
runs share it, and its body answers the next few seconds' requests."""

from __future__ import annotations

import asyncio
import gzip
import threading

import aiohttp
import pytest
from aiohttp.test_utils import TestClient, TestServer
from vocab import GPU

from kueue_tas.api.constants import HOSTNAME_LABEL
from kueue_tas.runtime.health import HealthServer
from kueue_tas.runtime.metrics import Metrics

RESOURCES = ("cpu", "memory", "pods", GPU)


def metrics_of_nodes(nodes: int) -> Metrics:
    """A registry holding per-host free-capacity series of ``nodes`` nodes (the worst case:
    hostname-level series opted in), ~100 bytes a series."""
    m = Metrics()
    values = {
        (HOSTNAME_LABEL, f"node-z{i % 2}-b{i % 20}-r{i % 400}-h{i}", resource): float(i)
        for i in range(nodes)
        for resource in RESOURCES
    }
    m.set_domain_free("bench", "gpu", values)
    return m


class RenderSpy:
    """A collect hook: it runs at the start of every render, on the render's thread."""

    def __init__(self, metrics: Metrics) -> None:
        self.threads: list[int] = []
        metrics.set_collect_hook("spy", lambda: self.threads.append(threading.get_ident()))


async def metrics_client(
    metrics: Metrics, *, auto_decompress: bool = True
) -> TestClient[aiohttp.web.Request, aiohttp.web.Application]:
    app = HealthServer(metrics=metrics).make_metrics_app()
    client = TestClient(TestServer(app, host="127.0.0.1"), auto_decompress=auto_decompress)
    await client.start_server()
    return client


async def test_48_concurrent_scrapes_at_10000_nodes_share_one_render_off_the_loop() -> None:
    metrics = metrics_of_nodes(10_000)
    spy = RenderSpy(metrics)
    # Scrapers ask for gzip and unzip in their own process, as Prometheus does: here the loop
    # only receives the bytes, and the bodies are checked after the timing.
    client = await metrics_client(metrics, auto_decompress=False)
    try:

        async def scrape() -> tuple[int, bytes]:
            async with client.get("/metrics", headers={"Accept-Encoding": "gzip"}) as r:
                return r.status, await r.read()

        answers = await asyncio.gather(*(scrape() for _ in range(48)))
    finally:
        await client.close()
    # One render served all 48, and it ran off the event loop's thread (the unfixed code made
    # 48 renders on the loop: a 51 s stall here). How long the loop stalls is a figure, not a
    # test: benchmarks/metrics_scrape.py measures it.
    assert len(spy.threads) == 1, f"{len(spy.threads)} renders for 48 concurrent scrapes"
    assert spy.threads[0] != threading.get_ident()
    assert {status for status, _ in answers} == {200}
    bodies = {body for _, body in answers}
    assert len(bodies) == 1 and b'domain="node-z1-b19-r399-h9999"' in gzip.decompress(next(iter(bodies)))


async def test_a_rendered_body_answers_the_next_scrapes_for_a_few_seconds() -> None:
    metrics = Metrics()
    spy = RenderSpy(metrics)
    client = await metrics_client(metrics)
    try:
        first = await (await client.get("/metrics")).read()
        metrics.record_admission("ready")
        second = await (await client.get("/metrics")).read()
    finally:
        await client.close()
    assert len(spy.threads) == 1 and second == first
    assert b'kueue_tas_admissions_total{outcome="ready"} 0.0' in second


async def test_the_body_is_rendered_again_once_it_is_older_than_max_age() -> None:
    from kueue_tas.runtime.exposition import MAX_AGE, SharedExposition

    now = [100.0]
    metrics = Metrics()
    spy = RenderSpy(metrics)
    shared = SharedExposition(metrics.render, clock=lambda: now[0])
    first = await shared.current()
    metrics.record_admission("ready")
    now[0] += MAX_AGE - 0.1
    assert await shared.current() is first
    now[0] += 0.2
    fresh = await shared.current()
    assert b'kueue_tas_admissions_total{outcome="ready"} 1.0' in fresh.body
    assert (shared.renders, len(spy.threads)) == (2, 2)
    assert fresh.content_type.startswith("text/plain")


async def test_a_scraper_that_gives_up_does_not_cancel_the_render_others_wait_for() -> None:
    from kueue_tas.runtime.exposition import SharedExposition

    metrics = Metrics()
    release = threading.Event()
    metrics.set_collect_hook("slow", lambda: release.wait(5))
    shared = SharedExposition(metrics.render)
    impatient = asyncio.ensure_future(shared.current())
    patient = asyncio.ensure_future(shared.current())
    await asyncio.sleep(0.05)
    impatient.cancel()
    release.set()
    answer = await patient
    assert impatient.cancelled() and answer.body.startswith(b"# HELP") and shared.renders == 1


async def test_a_failed_render_is_not_kept() -> None:
    from kueue_tas.runtime.exposition import SharedExposition

    broken = [True]

    def render() -> tuple[bytes, str]:
        if broken[0]:
            raise RuntimeError("registry broke")
        return b"ok\n", "text/plain"

    shared = SharedExposition(render)
    with pytest.raises(RuntimeError, match="registry broke"):
        await shared.current()
    broken[0] = False
    assert (await shared.current()).body == b"ok\n" and shared.renders == 2


async def test_gzip_for_scrapers_that_ask_for_it_plain_text_for_the_others() -> None:
    metrics = Metrics()
    metrics.record_admission("retry")
    client = await metrics_client(metrics)
    try:
        async with client.get("/metrics", headers={"Accept-Encoding": "identity"}) as plain:
            plain_body = await plain.read()
            assert "Content-Encoding" not in plain.headers
        async with client.get("/metrics", headers={"Accept-Encoding": "gzip"}, auto_decompress=False) as zipped:
            assert zipped.headers["Content-Encoding"] == "gzip" and zipped.headers["Vary"] == "Accept-Encoding"
            zipped_body = await zipped.read()
    finally:
        await client.close()
    assert b'kueue_tas_admissions_total{outcome="retry"} 1.0' in plain_body
    assert gzip.decompress(zipped_body) == plain_body
