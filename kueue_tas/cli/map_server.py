"""The topology map served by the controller on ``map_bind`` (off by default), read-only.

- ``GET /`` and ``/topology``: the page (``kueue_tas.mapview``, the one ``capacity --html``
  writes), reloading itself every ``map_refresh_seconds``;
- ``GET /topology.json``: the same model as JSON, with where it came from.

Every replica serves it: the leader from its live model, any other replica from a cluster read
(``map_sources``); the ``X-Kueue-Tas-Map-Source`` header and the line under the title say
which, and when. A build is kept ``max_age`` seconds and shared by the requests that arrive
while it runs, so however many browsers refresh, the leader builds at most one model per
``LIVE_MAX_AGE`` and a standby reads the cluster at most once per ``READ_MAX_AGE``. A failed
build is remembered ``FAILURE_MAX_AGE`` seconds too (at most the source's ``max_age``), so
requests during an API server slowdown do not each start a full read of nodes and pods. A
failure answers 500 with one generic line naming a request id, the reason is in the log under
that id (the page shows no exception text); it never ends the controller.

Over TLS and behind a :class:`~kueue_tas.runtime.http_auth.RequestAuth` when they are given
(``map_secure``, ``map_auth``): every route needs a token allowed to ``get`` its path.
"""

from __future__ import annotations

import asyncio
import json
import secrets
import ssl
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import Any

import structlog
from aiohttp import web

from kueue_tas.cli.cluster_read import ClusterReadError
from kueue_tas.cli.map_sources import MapSource
from kueue_tas.mapview.assets import CSS_HASH, JS_HASH
from kueue_tas.mapview.model import MapModel, map_hosts
from kueue_tas.mapview.render import render_map
from kueue_tas.runtime.config import parse_bind
from kueue_tas.runtime.http_auth import RequestAuth
from kueue_tas.runtime.listen import BindError, listen, runner_addresses, stop_runner

log = structlog.get_logger(__name__)

TITLE = "kueue-tas topology map"
# Every route; the ClusterRole kueue-tas-map-reader grants `get` on exactly these.
PATHS = ("/", "/topology", "/topology.json")
SOURCE_HEADER = "X-Kueue-Tas-Map-Source"
# Seconds a failed build answers the requests after it: an API server that is slow to answer
# gets one read per this long from this replica, not one per request.
FAILURE_MAX_AGE = 5.0
# The page needs nothing from anywhere: its CSS and script are inline, its legend inline SVG.
# Only our own constant script and style sheet may run, named by their sha256.
CSP = (
    f"default-src 'none'; script-src {JS_HASH}; style-src {CSS_HASH}; img-src data:; "
    "base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)


class BuildFailed(Exception):
    """A build failed (now, or within ``FAILURE_MAX_AGE``); ``detail`` is for the log only."""

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail


@dataclass(frozen=True)
class _Failure:
    detail: str
    at: float  # monotonic time it failed


@dataclass
class MapBuild:
    """One build of the page: served again until ``max_age`` has passed."""

    kind: str
    model: MapModel
    at: datetime  # wall time the numbers are from
    source: str  # the line under the title
    page: bytes
    built: float  # monotonic time it was finished
    json_body: bytes | None = None  # /topology.json, written when first asked for


class MapServer:
    def __init__(
        self,
        bind: str,
        read: MapSource,
        live: MapSource | None = None,
        *,
        replica: str,
        refresh_seconds: int = 0,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], datetime] = lambda: datetime.now(UTC),
        auth: RequestAuth | None = None,
        tls: ssl.SSLContext | None = None,
    ) -> None:
        self.bind = bind
        self._auth = auth
        self._tls = tls
        self._sources = [s for s in (live, read) if s is not None]
        self._replica = replica
        self._refresh = refresh_seconds or None
        self._clock = clock
        self._wall = wall
        self._builds: dict[str, MapBuild] = {}
        self._failures: dict[str, _Failure] = {}
        self._in_flight: dict[str, asyncio.Future[MapBuild]] = {}
        self._runner: web.AppRunner | None = None

    # --- building ---------------------------------------------------------------------------

    def source(self) -> MapSource:
        """The live model when this replica has one, else the cluster read."""
        return next(s for s in self._sources if s.usable())

    async def current(self) -> MapBuild:
        """The newest build of the source in use, building it when it is older than allowed;
        raises ``BuildFailed`` when it failed (now, or a short time ago)."""
        source = self.source()
        held = self._builds.get(source.kind)
        if held is not None and self._clock() - held.built < source.max_age:
            return held
        failed = self._failures.get(source.kind)
        if failed is not None and self._clock() - failed.at < min(source.max_age, FAILURE_MAX_AGE):
            raise BuildFailed(failed.detail)
        flight = self._in_flight.get(source.kind)
        if flight is None:  # the requests that arrive while it runs share this build
            flight = self._in_flight[source.kind] = asyncio.ensure_future(self._build(source))
        # A browser that goes away cancels its own wait, never the build the others wait for.
        return await asyncio.shield(flight)

    async def _build(self, source: MapSource) -> MapBuild:
        started = self._clock()
        try:
            at = self._wall()
            model = await source.build()
            text = source.describe(self._replica, at)
            page = await asyncio.to_thread(self._render, model, text)
        except Exception as exc:
            detail = str(exc) if isinstance(exc, ClusterReadError) else f"{type(exc).__name__}: {exc}"
            self._failures[source.kind] = _Failure(detail, self._clock())
            if not isinstance(exc, ClusterReadError):  # a defect of ours: its traceback, once
                log.exception("map_build_failed", source=source.kind, error=detail)
            raise BuildFailed(detail) from exc
        finally:
            del self._in_flight[source.kind]
        build = MapBuild(source.kind, model, at, text, page, self._clock())
        self._builds[source.kind] = build
        self._failures.pop(source.kind, None)
        log.info(
            "map_built",
            source=source.kind,
            seconds=round(build.built - started, 3),
            bytes=len(page),
            nodes=sum(len(map_hosts(f)) for f in model.flavors),
            workloads=len(model.workloads),
        )
        return build

    def _render(self, model: MapModel, source: str) -> bytes:
        return render_map(model, title=TITLE, refresh_seconds=self._refresh, source=source).encode()

    # --- handlers ---------------------------------------------------------------------------

    async def _page(self, request: web.Request) -> web.StreamResponse:
        try:
            build = await self.current()
        except Exception as exc:
            return self._failed(exc)
        return self._respond(request, build, build.page, "text/html")

    async def _json(self, request: web.Request) -> web.StreamResponse:
        try:
            build = await self.current()
            if build.json_body is None:
                build.json_body = await asyncio.to_thread(_model_json, build, self._replica)
        except Exception as exc:
            return self._failed(exc)
        return self._respond(request, build, build.json_body, "application/json")

    def _respond(self, request: web.Request, build: MapBuild, body: bytes, content_type: str) -> web.StreamResponse:
        resp = web.Response(body=body, content_type=content_type, charset="utf-8")
        resp.headers["Cache-Control"] = "no-store"
        resp.headers["Content-Security-Policy"] = CSP
        resp.headers["X-Content-Type-Options"] = "nosniff"
        resp.headers[SOURCE_HEADER] = build.kind
        resp.enable_compression()  # ~0.8 MB of HTML at 10,000 nodes, for browsers that accept gzip
        return resp

    def _failed(self, exc: Exception) -> web.Response:
        """A generic one-line 500: what failed (an API server's words, a traceback) is only in
        the log, under the request id the page names."""
        request_id = secrets.token_hex(8)
        if isinstance(exc, BuildFailed):
            log.error("map_failed", request_id=request_id, error=exc.detail)
        else:
            log.exception("map_failed", request_id=request_id, error=f"{type(exc).__name__}: {exc}")
        line = (
            f"error: the topology map could not be built (request id {request_id}; the controller's log has the reason)"
        )
        return web.Response(text=line + "\n", status=500, headers={"Cache-Control": "no-store"})

    def make_app(self) -> web.Application:
        app = web.Application(middlewares=[self._auth.middleware()] if self._auth is not None else [])
        page, topology, model = PATHS
        app.router.add_get(page, self._page)
        app.router.add_get(topology, self._page)
        app.router.add_get(model, self._json)
        return app

    # --- lifecycle --------------------------------------------------------------------------

    async def start(self) -> None:
        addr = parse_bind(self.bind)
        if addr is None or self._runner is not None:
            return
        # GET only: a compressed request body is never inflated on the loop (issue 30 review).
        runner = web.AppRunner(self.make_app(), access_log=None, handle_signals=False, auto_decompress=False)
        await runner.setup()
        host, port = addr
        try:
            await listen(runner, "map_bind", self.bind, host, port, ssl_context=self._tls)
        except BindError:
            await runner.cleanup()
            raise
        self._runner = runner
        log.info(
            "map_server_started",
            addresses=[f"{h}:{p}" for h, p in self.addresses],
            tls=self._tls is not None,
            auth=self._auth is not None,
        )

    @property
    def addresses(self) -> list[tuple[str, int]]:
        return runner_addresses(self._runner)

    async def stop(self) -> None:
        runner, self._runner = self._runner, None
        await stop_runner(runner)


def _model_json(build: MapBuild, replica: str) -> bytes:
    doc: dict[str, Any] = {
        "source": {"kind": build.kind, "replica": replica, "at": build.at.isoformat(), "text": build.source},
        "map": asdict(build.model),
    }
    return json.dumps(doc, separators=(",", ":")).encode()
