"""Listening with aiohttp the way every server of ours does (health and metrics, the webhooks,
the topology map): one error that names the setting, the addresses actually bound, a quiet stop."""

from __future__ import annotations

import contextlib
import ssl

from aiohttp import web


class BindError(OSError):
    """An address cannot be listened on; the message names the setting."""


async def listen(
    runner: web.AppRunner,
    setting: str,
    bind: str,
    host: str | None,
    port: int,
    *,
    ssl_context: ssl.SSLContext | None = None,
    reuse_port: bool = False,
) -> None:
    """Start a site of ``runner`` on ``host:port``; ``BindError`` says which setting could not be served."""
    site = web.TCPSite(runner, host=host, port=port, ssl_context=ssl_context, reuse_address=True, reuse_port=reuse_port)
    await start_site(site, setting, bind, host, port)


async def start_site(site: web.BaseSite, setting: str, bind: str, host: str | None, port: int) -> None:
    """Start ``site``; ``BindError`` says which setting could not be served."""
    try:
        await site.start()
    except OSError as exc:  # taken, not ours to use, or no such interface
        reason = (exc.strerror or str(exc)).rsplit(": ", 1)[-1]  # asyncio repeats the address
        raise BindError(f"{setting} {bind!r}: cannot listen on {host or '*'}:{port}: {reason}") from exc


def runner_addresses(runner: web.AppRunner | None) -> list[tuple[str, int]]:
    """The (host, port) pairs ``runner`` is bound to (useful with port 0)."""
    if runner is None:
        return []
    return [(str(a[0]), int(a[1])) for a in runner.addresses if isinstance(a, tuple) and len(a) >= 2]


async def stop_runner(runner: web.AppRunner | None) -> None:
    if runner is not None:
        with contextlib.suppress(Exception):
            await runner.cleanup()
