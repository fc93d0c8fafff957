"""Health and metrics HTTP endpoints (aiohttp).

- ``/healthz``: the process and its event loop answer.
- ``/readyz``: every readiness check passes: typically ``informers`` (caches synced) and
  ``leader-election`` (leading, or a healthy standby: a standby is ready so that rolling
  updates proceed). ``?verbose`` lists each check; failures give 503 with the reasons.
- ``/metrics``: the :class:`~kueue_tas.runtime.metrics.Metrics` registry, text format, rendered
  in a worker thread and shared by the scrapes of a few seconds (``exposition``), so scrapes
  never stall the event loop the elector and the reconcilers share.

The probes are served on ``health_bind``, plain HTTP without authentication (the kubelet calls
them); ``/metrics`` on ``metrics_bind``, over TLS and behind a
:class:`~kueue_tas.runtime.http_auth.RequestAuth` when they are given (``metrics_secure``,
``metrics_auth``). With both off the two addresses may be equal: one plain socket serves all
(local development). ``"0"`` turns an address off.
"""

from __future__ import annotations

import ssl
from collections.abc import Callable
from typing import Protocol

from aiohttp import web

from kueue_tas.runtime.config import Settings, parse_bind
from kueue_tas.runtime.exposition import SharedExposition
from kueue_tas.runtime.http_auth import RequestAuth
from kueue_tas.runtime.listen import listen, runner_addresses, stop_runner
from kueue_tas.runtime.logging import get_logger
from kueue_tas.runtime.metrics import Metrics

log = get_logger(__name__)

# A check returns ok, or (ok, detail).
CheckResult = bool | tuple[bool, str]
Check = Callable[[], CheckResult]


class _Elector(Protocol):
    @property
    def state(self) -> str: ...


def leader_election_check(elector: _Elector) -> Check:
    """Ready while the elector is leading or waiting as a standby (not after it stopped)."""

    def check() -> CheckResult:
        state = elector.state
        return state in ("leader", "standby", "disabled"), state

    return check


def _run_checks(checks: dict[str, Check]) -> tuple[bool, list[str]]:
    ok_all = True
    lines = []
    for name, check in checks.items():
        try:
            res = check()
        except Exception as e:
            res = (False, f"check raised {type(e).__name__}: {e}")
        ok, detail = res if isinstance(res, tuple) else (bool(res), "")
        ok_all = ok_all and ok
        suffix = f": {detail}" if detail else ""
        lines.append(f"[+]{name} ok{suffix}" if ok else f"[-]{name} failed{suffix}")
    return ok_all, lines


class HealthServer:
    def __init__(
        self,
        settings: Settings | None = None,
        metrics: Metrics | None = None,
        *,
        health_bind: str | None = None,
        metrics_bind: str | None = None,
        auth: RequestAuth | None = None,
        tls: ssl.SSLContext | None = None,
    ) -> None:
        s = settings or Settings(leader_election=False)
        self.metrics = metrics or Metrics()
        self.exposition = SharedExposition(self.metrics.render)
        self._health_bind = health_bind or s.health_bind
        self._metrics_bind = metrics_bind or s.metrics_bind
        self._auth = auth
        self._tls = tls
        self._readiness: dict[str, Check] = {}
        self._runners: list[web.AppRunner] = []

    def add_readiness_check(self, name: str, check: Check) -> None:
        self._readiness[name] = check

    def ready(self) -> bool:
        return _run_checks(self._readiness)[0]

    # ---- handlers --------------------------------------------------------------------------------

    def _checks_response(self, request: web.Request, checks: dict[str, Check], what: str) -> web.Response:
        ok, lines = _run_checks(checks)
        verbose = "verbose" in request.query
        if ok:
            body = "\n".join([*lines, f"{what} check passed"]) if verbose else "ok"
            return web.Response(text=body + "\n", status=200)
        return web.Response(text="\n".join([*lines, f"{what} check failed"]) + "\n", status=503)

    async def _healthz(self, request: web.Request) -> web.Response:
        return self._checks_response(request, {}, "healthz")

    async def _readyz(self, request: web.Request) -> web.Response:
        return self._checks_response(request, self._readiness, "readyz")

    async def _metrics(self, request: web.Request) -> web.Response:
        exposition = await self.exposition.current()
        if "gzip" in request.headers.get("Accept-Encoding", ""):
            resp = web.Response(body=exposition.gzipped)
            resp.headers["Content-Encoding"] = "gzip"
        else:
            resp = web.Response(body=exposition.body)
        resp.headers["Vary"] = "Accept-Encoding"
        resp.headers["Content-Type"] = exposition.content_type
        return resp

    def make_health_app(self) -> web.Application:
        app = web.Application()
        app.router.add_get("/healthz", self._healthz)
        app.router.add_get("/livez", self._healthz)
        app.router.add_get("/readyz", self._readyz)
        return app

    def make_metrics_app(self) -> web.Application:
        """``/metrics``, behind the request authentication when there is one."""
        app = web.Application(middlewares=[self._auth.middleware()] if self._auth is not None else [])
        app.router.add_get("/metrics", self._metrics)
        return app

    def make_app(self) -> web.Application:
        """Probes and ``/metrics`` on one plain socket (``health_bind`` equal to ``metrics_bind``,
        which the settings allow only with ``metrics_secure`` and ``metrics_auth`` off)."""
        app = self.make_health_app()
        app.router.add_get("/metrics", self._metrics)
        return app

    # ---- lifecycle -------------------------------------------------------------------------------

    def _sites(self) -> list[tuple[str, str, web.Application, ssl.SSLContext | None]]:
        """(setting, bind, application, TLS) per address to listen on."""
        health, metrics = parse_bind(self._health_bind), parse_bind(self._metrics_bind)
        if health is not None and health == metrics:
            if self._auth is not None or self._tls is not None:
                raise ValueError("metrics_bind must differ from health_bind when /metrics is secured")
            return [("health_bind", self._health_bind, self.make_app(), None)]
        sites: list[tuple[str, str, web.Application, ssl.SSLContext | None]] = []
        if health is not None:
            sites.append(("health_bind", self._health_bind, self.make_health_app(), None))
        if metrics is not None:
            sites.append(("metrics_bind", self._metrics_bind, self.make_metrics_app(), self._tls))
        return sites

    async def start(self) -> None:
        if self._runners:
            return
        try:
            for setting, bind, app, tls in self._sites():
                # No handler here reads a body; aiohttp would still inflate a compressed one on
                # the event loop (a gzip bomb from anyone who reaches the port, issue 30 review).
                runner = web.AppRunner(app, access_log=None, handle_signals=False, auto_decompress=False)
                await runner.setup()
                self._runners.append(runner)
                addr = parse_bind(bind)
                assert addr is not None
                await listen(runner, setting, bind, addr[0], addr[1], ssl_context=tls)
        except BaseException:
            await self.stop()
            raise
        log.info(
            "health_server_started",
            addresses=[f"{h}:{p}" for h, p in self.addresses],
            metrics_tls=self._tls is not None,
            metrics_auth=self._auth is not None,
        )

    @property
    def addresses(self) -> list[tuple[str, int]]:
        """Actually bound (host, port) pairs (useful with port 0): the probes' first."""
        return [a for runner in self._runners for a in runner_addresses(runner)]

    async def stop(self) -> None:
        runners, self._runners = self._runners, []
        for runner in runners:
            await stop_runner(runner)
