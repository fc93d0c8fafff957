"""How many connections the webhook port holds, and for how long one may dawdle over a request.

Each TLS connection costs about 275 KiB while it is open (asyncio's read buffer), and aiohttp
closes one that sent part of a request head only when the peer does: 2,000 connections with
half-sent heads from one client took a replica from 130 to 680 MiB (issue 30 review), and both
replicas out of memory stop the pod gate (``failurePolicy: Fail``). So the port takes at most
``MAX_CONNECTIONS`` connections, ``MAX_PER_PEER`` of them from one address (the API servers each
keep their own share however many another peer opens), and a connection whose request head is
not complete ``HEAD_SECONDS`` after its first byte is closed. A body's own deadline is
``intake.BODY_SECONDS``. A connection over a cap is closed at once, before a byte is read.

What this cannot do: a peer with many addresses (many pods) can still take the
``MAX_CONNECTIONS`` slots with requests it completes; the NetworkPolicy's ``webhookFrom`` peers
(the control plane's addresses) are what keeps strangers off the port.
"""

from __future__ import annotations

import asyncio
import ssl
from collections import Counter
from collections.abc import Callable
from typing import Final

import structlog
from aiohttp import web

log = structlog.get_logger(__name__)

MAX_CONNECTIONS: Final = 1024  # ~280 MiB at 275 KiB each, within the 1 Gi limit beside the caches
MAX_PER_PEER: Final = 128
HEAD_SECONDS: Final = 10.0
# A request head longer than this is no request we serve (aiohttp refuses far shorter lines).
MAX_HEAD_BYTES: Final = 64 * 1024

_END_OF_HEAD: Final = b"\r\n\r\n"
# A flood refuses thousands of connections a second: one log line per this many seconds says how many.
LOG_EVERY_SECONDS: Final = 10.0


class ConnectionLimits:
    """The counts the guarded protocols share: open connections, in all and per peer."""

    def __init__(self, max_connections: int, max_per_peer: int, head_seconds: float) -> None:
        self.max_connections = max_connections
        self.max_per_peer = max_per_peer
        self.head_seconds = head_seconds
        self.open = 0
        self.per_peer: Counter[str] = Counter()
        self.refused = 0
        self.expired = 0
        self._logged_at: dict[str, float] = {}
        self._unlogged: Counter[str] = Counter()

    def note(self, event: str, peer: str) -> None:
        """One ``event`` (refused, closed) from ``peer``, logged at most every LOG_EVERY_SECONDS."""
        self._unlogged[event] += 1
        now = asyncio.get_running_loop().time()
        if now - self._logged_at.get(event, -LOG_EVERY_SECONDS) >= LOG_EVERY_SECONDS:
            log.warning(
                "webhook_connections", what=event, last_peer=peer, count=self._unlogged.pop(event), open=self.open
            )
            self._logged_at[event] = now

    def admit(self, peer: str) -> bool:
        if self.open >= self.max_connections or self.per_peer[peer] >= self.max_per_peer:
            self.refused += 1
            return False
        self.open += 1
        self.per_peer[peer] += 1
        return True

    def release(self, peer: str) -> None:
        self.open -= 1
        self.per_peer[peer] -= 1
        if self.per_peer[peer] <= 0:
            del self.per_peer[peer]


class _HeadClock:
    """Where a connection's bytes are: in a request head (then it must end within the limit) or
    in a body of known length. A chunked body is left to the body deadline, and the connection
    is not watched after it (its end cannot be found without parsing chunks)."""

    def __init__(self) -> None:
        self.head = bytearray()
        self.body_left = 0
        self.watching = True

    def feed(self, data: bytes) -> tuple[bool, bool]:
        """(a head is open now, the data broke a limit)."""
        view = memoryview(data)
        while self.watching and len(view):
            if self.body_left:
                take = min(self.body_left, len(view))
                self.body_left -= take
                view = view[take:]
                continue
            start = max(len(self.head) - 3, 0)
            self.head += view
            end = self.head.find(_END_OF_HEAD, start)
            if end < 0:
                return True, len(self.head) > MAX_HEAD_BYTES
            head, rest = bytes(self.head[:end]), bytes(self.head[end + 4 :])
            self.head = bytearray()
            length, chunked = _framing(head)
            if chunked:
                self.watching = False
                return False, False
            self.body_left = length
            view = memoryview(rest)
        return bool(self.head) and self.watching, False


def _framing(head: bytes) -> tuple[int, bool]:
    length, chunked = 0, False
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        key = name.strip().lower()
        if key == b"content-length":
            try:
                length = max(int(value.strip()), 0)
            except ValueError:
                length = 0
        elif key == b"transfer-encoding" and b"chunked" in value.lower():
            chunked = True
    return length, chunked


class _Guarded(asyncio.Protocol):
    """aiohttp's request handler behind the limits: every call passes through once admitted."""

    def __init__(self, inner: asyncio.Protocol, limits: ConnectionLimits) -> None:
        self._inner = inner
        self._limits = limits
        self._peer: str | None = None
        self._transport: asyncio.Transport | None = None
        self._clock = _HeadClock()
        self._timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        peername = transport.get_extra_info("peername")
        peer = str(peername[0]) if isinstance(peername, tuple) and peername else "?"
        if not self._limits.admit(peer):
            self._limits.note("refused", peer)
            transport.abort()
            return
        self._peer = peer
        self._transport = transport
        self._inner.connection_made(transport)

    def data_received(self, data: bytes) -> None:
        if self._peer is None:
            return
        head_open, too_long = self._clock.feed(data)
        if too_long:
            self._expire("request head too long")
            return
        if head_open and self._timer is None:
            loop = asyncio.get_running_loop()
            self._timer = loop.call_later(self._limits.head_seconds, self._expire, "request head not complete")
        elif not head_open and self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._inner.data_received(data)

    def _expire(self, why: str) -> None:
        self._timer = None
        if self._transport is not None and not self._transport.is_closing():
            self._limits.expired += 1
            self._limits.note(f"closed ({why})", self._peer or "?")
            self._transport.abort()

    def eof_received(self) -> bool | None:
        return self._inner.eof_received() if self._peer is not None else None

    def pause_writing(self) -> None:
        if self._peer is not None:
            self._inner.pause_writing()

    def resume_writing(self) -> None:
        if self._peer is not None:
            self._inner.resume_writing()

    def connection_lost(self, exc: Exception | None) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._peer is None:
            return
        peer, self._peer = self._peer, None
        self._limits.release(peer)
        self._inner.connection_lost(exc)


class GuardedTCPSite(web.TCPSite):
    """``web.TCPSite`` whose connections go through ``limits`` (the rest is aiohttp's own start,
    with our protocol factory in front of the runner's server)."""

    def __init__(
        self,
        runner: web.AppRunner,
        limits: ConnectionLimits,
        *,
        host: str | None,
        port: int,
        ssl_context: ssl.SSLContext | None,
        reuse_port: bool,
    ) -> None:
        super().__init__(
            runner, host=host, port=port, ssl_context=ssl_context, reuse_address=True, reuse_port=reuse_port
        )
        self.limits = limits

    async def start(self) -> None:
        await web.BaseSite.start(self)
        server = self._runner.server
        assert server is not None
        factory: Callable[[], asyncio.Protocol] = server
        limits = self.limits
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(
            lambda: _Guarded(factory(), limits),
            self._host,
            self._port,
            ssl=self._ssl_context,
            backlog=self._backlog,
            reuse_address=self._reuse_address,
            reuse_port=self._reuse_port,
        )
        sockets = self._server.sockets
        self._bound_port = sockets[0].getsockname()[1] if sockets else self._port


def default_limits() -> ConnectionLimits:
    return ConnectionLimits(MAX_CONNECTIONS, MAX_PER_PEER, HEAD_SECONDS)
