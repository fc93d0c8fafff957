"""Test helpers for what a server does to the event loop it shares: how long the loop went
without running a ticker while some work ran, and a gzip body that inflates to a lot."""

from __future__ import annotations

import asyncio
import time
import zlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager


@asynccontextmanager
async def loop_gaps(tick: float = 0.005) -> AsyncIterator[list[float]]:
    """The gaps (seconds) between a ticker's wake-ups while the block runs; the list fills as it goes."""
    gaps: list[float] = []
    stop = asyncio.Event()

    async def ticker() -> None:
        last = time.monotonic()
        while not stop.is_set():
            await asyncio.sleep(tick)
            now = time.monotonic()
            gaps.append(now - last)
            last = now

    ticking = asyncio.create_task(ticker())
    try:
        yield gaps
    finally:
        stop.set()
        await ticking


def gzip_bomb(mib: int) -> bytes:
    """``mib`` MiB of zeros, gzipped (about 1 KiB per MiB)."""
    squeeze = zlib.compressobj(9, zlib.DEFLATED, 31)
    zeros = b"\0" * (1 << 20)
    return b"".join(squeeze.compress(zeros) for _ in range(mib)) + squeeze.flush()
