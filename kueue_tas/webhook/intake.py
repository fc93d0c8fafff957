"""Reading a webhook request's body within bounds, before anything looks at it.

The webhook port answers anyone on the pod network (the API server's source address cannot be
named in general), so what a body may cost is capped twice: each endpoint has a size no
API server review of its kinds exceeds (413 beyond it), and all bodies held at once, read or
waiting for a judge, share one byte budget (503 beyond it, and the API server retries or
applies the webhook's failure policy). Bodies are counted as their bytes arrive (a declared
length above what the budget has left is refused at once), and one that does not arrive within
``BODY_SECONDS`` is refused (408) and its share given back.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Final

from aiohttp import web

MiB: Final = 1024 * 1024
# The API server takes request bodies of at most 3 MiB (its --max-request-bytes), so an object it
# stores is below that; a review of an UPDATE carries the object and its old version, a
# review of a CREATE the object alone, each with a few kB of review around them.
VALIDATE_MAX_BYTES: Final = 8 * MiB
POD_GATE_MAX_BYTES: Final = 4 * MiB
# Every body held at once: tens of thousands of ordinary reviews (a few kB each), eight of the
# largest; the JSON parsed from a body is a few times its size again, but only for the judges'
# few bodies at a time.
BUFFERED_MAX_BYTES: Final = 64 * MiB
CHUNK: Final = 64 * 1024
# How long a body may take to arrive. The API server sends a review at once and gives up on the
# webhook after its timeoutSeconds (5 s in our configurations, 30 s at most); without a deadline a
# connection that declares a body and sends nothing holds its share of the budget for as long as
# it stays open, and eight of them left every pod review a 503 (issue 30 review).
BODY_SECONDS = 10.0


class Refused(Exception):
    """A request we do not read: its HTTP status and a one-line reason."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason


class ByteBudget:
    """Bytes that bodies being read or judged may hold together."""

    def __init__(self, total: int = BUFFERED_MAX_BYTES) -> None:
        self.total = total
        self.held = 0

    def take(self, size: int) -> bool:
        if self.held + size > self.total:
            return False
        self.held += size
        return True

    def give(self, size: int) -> None:
        self.held -= size


@asynccontextmanager
async def bounded_body(request: web.Request, limit: int, budget: ByteBudget) -> AsyncIterator[bytes]:
    """The body of ``request``, at most ``limit`` bytes, held against ``budget`` until the block
    ends. ``Refused`` (413, 503) otherwise."""
    encoding = request.headers.get("Content-Encoding", "identity").strip().lower()
    if encoding not in ("", "identity"):
        # The API server never compresses a review. The server does not inflate bodies
        # (webhook/server.py: auto_decompress off): aiohttp did it on the event loop, and a
        # megabyte of gzip was a gigabyte to inflate there (issue 30 review).
        raise Refused(415, f"request body: Content-Encoding {encoding[:40]!r}: {request.path} takes only identity")
    declared = request.content_length
    if declared is not None and declared > limit:
        raise Refused(413, f"request body of {declared} bytes: {request.path} takes at most {limit}")
    # Charged as the bytes arrive, not as declared: a declared length that never comes holds
    # nothing (a stranger reconnecting every BODY_SECONDS held the whole budget with idle sockets).
    if declared is not None and declared > budget.total - budget.held:
        raise Refused(503, f"busy: {budget.held} bytes of requests in progress, try again")
    held = 0
    try:
        chunks: list[bytes] = []
        try:
            async with asyncio.timeout(BODY_SECONDS):
                async for chunk in request.content.iter_chunked(CHUNK):
                    if held + len(chunk) > limit:
                        raise Refused(413, f"request body over {limit} bytes: {request.path} takes at most {limit}")
                    if not budget.take(len(chunk)):
                        raise Refused(503, f"busy: {budget.held} bytes of requests in progress, try again")
                    held += len(chunk)
                    chunks.append(chunk)
        except TimeoutError:
            raise Refused(408, f"request body: {held} bytes received in {BODY_SECONDS:g} s, not the whole") from None
        yield b"".join(chunks)
    finally:
        budget.give(held)
