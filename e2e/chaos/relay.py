"""A TCP relay between the controllers and the apiserver that a chaos run can sever.

The controllers' kubeconfig points at the relay; TLS passes through untouched (the apiserver's
certificate names 127.0.0.1, where the relay listens too). ``sever`` aborts every open
connection at once, the way a broken network path or a load balancer restart cuts watches and
requests mid-flight; for ``block_s`` after it, new connections are accepted and dropped at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from dataclasses import dataclass, field

CHUNK = 1 << 16


@dataclass
class Relay:
    target_host: str
    target_port: int
    port: int = 0
    connections: int = 0  # accepted since start
    severed: int = 0  # connections aborted by sever()
    _server: asyncio.Server | None = field(default=None, init=False)
    _open: set[asyncio.StreamWriter] = field(default_factory=set, init=False)
    _blocked_until: float = field(default=0.0, init=False)

    async def start(self) -> int:
        """Listen on 127.0.0.1 (``port``, or a free one); returns the port."""
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", self.port)
        self.port = int(self._server.sockets[0].getsockname()[1])
        return self.port

    def sever(self, block_s: float = 0.0) -> int:
        """Abort every open connection (both sides); refuse new ones for ``block_s``. Returns how many."""
        self._blocked_until = time.monotonic() + block_s
        writers = list(self._open)
        for w in writers:
            w.transport.abort()
        self._open.clear()
        self.severed += len(writers) // 2
        return len(writers) // 2

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            self.sever()
            with contextlib.suppress(Exception):
                await self._server.wait_closed()
            self._server = None

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        if time.monotonic() < self._blocked_until:
            writer.transport.abort()
            return
        try:
            up_reader, up_writer = await asyncio.open_connection(self.target_host, self.target_port)
        except OSError:
            writer.transport.abort()  # the apiserver is down: the client sees a reset, as without us
            return
        self._open.update((writer, up_writer))
        try:
            await asyncio.gather(self._pump(reader, up_writer), self._pump(up_reader, writer))
        except asyncio.CancelledError:
            pass  # the relay is stopping; the finally below drops both sides
        finally:
            for w in (writer, up_writer):
                self._open.discard(w)
                w.transport.abort()

    async def _pump(self, src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
        try:
            while data := await src.read(CHUNK):
                dst.write(data)
                await dst.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            # Half-close: the other direction may still be flowing (TLS close_notify, last bytes).
            with contextlib.suppress(OSError, RuntimeError):
                if dst.can_write_eof():
                    dst.write_eof()
