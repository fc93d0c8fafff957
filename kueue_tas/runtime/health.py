"""Health and metrics HTTP endpoints (aiohttp).

- ``/healthz``: the process and its event loop answer.
- ``/readyz``: every readiness check passes: typically ``informers`` (caches synced) and
  ``leader-election`` (leading, or a healthy standby: a standby is ready so that rolling
  updates proceed). ``?verbose`` lists each check; failures give 503 with the reasons.
- ``/metrics``: the :class:`~kueue_tas.runtime.metrics.Metrics` registry, text format.

The same application is served on ``health_bind`` and ``metrics_bind`` (one socket when they
are equal; ``"0"`` turns an address off).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from aiohttp import web

from kueue_tas.runtime.config import Settings, parse_bind
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
    ) -> None:
        s = settings or Settings(leader_election=False)
        self.metrics = metrics or Metrics()
        # (setting, address) pairs: a bind that fails is reported under the setting that asked for it.
        wanted = (("health_bind", health_bind or s.health_bind), ("metrics_bind", metrics_bind or s.metrics_bind))
        self._binds = [(name, b) for name, b in wanted if parse_bind(b)]
        self._readiness: dict[str, Check] = {}
        self._runner: web.AppRunner | None = None

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
        body, content_type = self.metrics.render()
        resp = web.Response(body=body)
        resp.headers["Content-Type"] = content_type
        return resp

    def make_app(self) -> web.Application:
        app = web.Application()
        app.router.add_get("/healthz", self._healthz)
        app.router.add_get("/livez", self._healthz)
        app.router.add_get("/readyz", self._readyz)
        app.router.add_get("/metrics", self._metrics)
        return app

    # ---- lifecycle -------------------------------------------------------------------------------

    async def start(self) -> None:
        if self._runner is not None:
            return
        runner = web.AppRunner(self.make_app(), access_log=None, handle_signals=False)
        await runner.setup()
        try:
            seen: set[tuple[str | None, int]] = set()
            for setting, bind in self._binds:
                addr = parse_bind(bind)
                if addr is None or addr in seen:
                    continue
                seen.add(addr)
                host, port = addr
                await listen(runner, setting, bind, host, port)
        except BaseException:
            await runner.cleanup()
            raise
        self._runner = runner
        log.info("health_server_started", addresses=[f"{h}:{p}" for h, p in self.addresses])

    @property
    def addresses(self) -> list[tuple[str, int]]:
        """Actually bound (host, port) pairs (useful with port 0)."""
        return runner_addresses(self._runner)

    async def stop(self) -> None:
        runner, self._runner = self._runner, None
        await stop_runner(runner)
