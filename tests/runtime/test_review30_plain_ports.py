"""Review of issue 30 (adversarial): the probes' port answers anyone (NetworkPolicy: by port,
not by peer), over plain HTTP. aiohttp inflated a ``Content-Encoding: gzip`` request body in its
protocol, on the event loop, whether a handler read it or not (and while it lingered after the
answer): 1 MB of gzipped zeros sent with a ``GET /healthz`` stalled the loop ~2 s."""

from __future__ import annotations

import asyncio

import aiohttp
from loop_watch import gzip_bomb, loop_gaps

from kueue_tas.runtime.config import Settings
from kueue_tas.runtime.health import HealthServer


async def test_a_gzip_body_sent_to_the_probes_is_not_inflated_on_the_loop() -> None:
    hs = HealthServer(Settings(leader_election=False, health_bind="127.0.0.1:0", metrics_bind="0"))
    await hs.start()
    bomb = gzip_bomb(1024)
    host, port = hs.addresses[0]
    try:
        async with loop_gaps() as gaps:
            async with (
                aiohttp.ClientSession() as session,
                session.get(f"http://{host}:{port}/healthz", data=bomb, headers={"Content-Encoding": "gzip"}) as resp,
            ):
                status = resp.status
            await asyncio.sleep(0.5)
    finally:
        await hs.stop()
    assert status == 200
    assert max(gaps) < 0.5, max(gaps)
