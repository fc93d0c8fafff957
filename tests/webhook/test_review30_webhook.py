"""Review of issue 30 (adversarial, in-process): what a request to the webhook port can still
cost after the fixes. Each test here failed on a6e628f before its fix."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import ssl
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from builders import job
from builders import topology as topology_obj
from loop_watch import gzip_bomb, loop_gaps
from webhook_harness import HOSTS, FakeCaches, pod_review, write_cert
from webhook_harness import client_context as new_client_context

from kueue_tas.api import constants as c
from kueue_tas.api.kinds import parse_object
from kueue_tas.api.kueue_objects import Topology
from kueue_tas.capacity.creation_checks import TopologyView, review_create
from kueue_tas.runtime.certs import ServingCert, issue
from kueue_tas.runtime.config import Settings
from kueue_tas.runtime.metrics import Metrics
from kueue_tas.topology.features import DEFAULT_GATES
from kueue_tas.webhook import intake
from kueue_tas.webhook.cert_keeper import FileCerts
from kueue_tas.webhook.connections import ConnectionLimits, _HeadClock
from kueue_tas.webhook.intake import ByteBudget
from kueue_tas.webhook.server import POD_GATE_PATH, WebhookServer

PREFIX = "kueue-tas.io/"


def misspelt_job(keys: int) -> dict[str, Any]:
    return job("train", 1, {f"{PREFIX}podset-requried-topology-{i}": "x" for i in range(keys)})


def test_thousands_of_misspelt_keys_cost_milliseconds_not_a_judge_for_seconds() -> None:
    """Each unknown key under our prefix got a difflib "did you mean" (about 0.4 ms each): 20,000
    keys (an 1 MiB body) held a judge thread for ~9 s, and the two judges serve the pod gate
    (failurePolicy Fail, 5 s timeout) too. The answer carries 20 warnings at most, so no more
    hints are worth computing."""
    obj = parse_object(misspelt_job(20_000))
    assert obj is not None
    started = time.perf_counter()
    verdict = review_create(obj, [], PREFIX, DEFAULT_GATES)
    took = time.perf_counter() - started
    assert took < 1.0, took
    assert verdict.allowed
    assert "did you mean kueue-tas.io/podset-required-topology?" in verdict.warnings[0]
    assert len(verdict.warnings) <= 21
    assert "19980 more" in verdict.warnings[-1]


# ---- a slow body does not hold the byte budget -------------------------------------------------


@pytest_asyncio.fixture
async def small_budget(tmp_path: Path) -> AsyncIterator[tuple[WebhookServer, ServingCert, ByteBudget]]:
    cert = issue(HOSTS, dt.datetime.now(dt.UTC))
    write_cert(tmp_path / "certs", cert)
    topo = TopologyView.of(Topology.model_validate(topology_obj("topo")))
    settings = Settings(leader_election=False, webhook_bind="127.0.0.1:0", webhook_cert_dir=tmp_path / "certs")
    budget = ByteBudget(3 * 1024 * 1024)
    server = WebhookServer(
        settings, FileCerts(tmp_path / "certs"), FakeCaches([topo]), Metrics(), DEFAULT_GATES, budget=budget
    )  # type: ignore[arg-type]
    await server.start()
    try:
        yield server, cert, budget
    finally:
        await server.stop()


async def stalled_body(server: WebhookServer, ca: bytes, path: str, declared: int) -> asyncio.StreamWriter:
    """A connection that declares ``declared`` body bytes, sends ten and then nothing."""
    host, port = server.addresses[0]
    ctx: ssl.SSLContext = new_client_context(ca)
    _, writer = await asyncio.open_connection(host, port, ssl=ctx)
    head = f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {declared}\r\n\r\n"
    writer.write(head.encode() + b'{"apiVersi')
    await writer.drain()
    return writer


async def post(server: WebhookServer, ca: bytes, path: str, body: Any) -> int:
    import aiohttp

    host, port = server.addresses[0]
    async with (
        aiohttp.ClientSession() as session,
        session.post(f"https://{host}:{port}{path}", data=json.dumps(body), ssl=new_client_context(ca)) as resp,
    ):
        return resp.status


async def test_connections_that_declare_a_body_and_send_none_release_the_budget(
    small_budget: tuple[WebhookServer, ServingCert, ByteBudget], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Eight idle connections declaring 8 MiB each held the whole 64 MiB budget for as long as
    they stayed open (no read deadline), and every pod then got 503 from the pod gate
    (failurePolicy Fail): a stranger stopped gated pod creation with eight sockets and no bytes.
    A body not received within ``BODY_SECONDS`` is refused (408); and since bytes are charged as
    they arrive, what such a connection holds meanwhile is what it sent."""
    monkeypatch.setattr(intake, "BODY_SECONDS", 0.5, raising=False)
    server, cert, budget = small_budget
    writers = [await stalled_body(server, cert.ca_pem, POD_GATE_PATH, 1024 * 1024) for _ in range(3)]
    try:
        await settle(lambda: budget.held >= 30)
        assert budget.held == 30  # ten bytes each, not the 3 MiB they declared
        assert await post(server, cert.ca_pem, POD_GATE_PATH, pod_review({c.GATED_LABEL: "true"})) == 200
        await settle(lambda: budget.held == 0)
        assert budget.held == 0
        assert await post(server, cert.ca_pem, POD_GATE_PATH, pod_review({c.GATED_LABEL: "true"})) == 200
    finally:
        for writer in writers:
            writer.close()


async def test_declared_bytes_that_never_arrive_hold_no_budget(
    small_budget: tuple[WebhookServer, ServingCert, ByteBudget],
) -> None:
    server, cert, budget = small_budget
    writers = [await stalled_body(server, cert.ca_pem, POD_GATE_PATH, 1024 * 1024) for _ in range(3)]
    try:
        deadline = time.monotonic() + 5
        while budget.held == 0 and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
        await asyncio.sleep(0.2)
        assert await post(server, cert.ca_pem, POD_GATE_PATH, pod_review({c.GATED_LABEL: "true"})) == 200
    finally:
        for writer in writers:
            writer.close()


# ---- certificate rotation: the CA is trusted before its leaf is served ------------------------


class RotatingCerts:
    """A certificate source whose next ``current`` may be a renewal; records what happened."""

    def __init__(self, cert: ServingCert, events: list[str]) -> None:
        self.cert = cert
        self.events = events

    async def current(self) -> tuple[bytes, bytes]:
        return self.cert.cert_pem, self.cert.key_pem

    def changed(self) -> bool:
        return True

    async def publish(self) -> None:
        self.events.append("publish")


async def test_a_renewal_publishes_the_new_ca_before_serving_its_leaf(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The renewing replica loaded its new leaf, then wrote the caBundle: until the patch landed
    (and the API server saw it) the bundle held only the old CA, and every pod review routed to
    this replica failed its TLS handshake (pod gate failurePolicy Fail)."""
    from kueue_tas.webhook import server as server_module

    events: list[str] = []
    real_load = server_module.load_chain

    def load_chain(*args: Any) -> None:
        events.append("load")
        real_load(*args)

    monkeypatch.setattr(server_module, "load_chain", load_chain)
    now = dt.datetime.now(dt.UTC)
    certs = RotatingCerts(issue(HOSTS, now), events)
    settings = Settings(leader_election=False, webhook_bind="127.0.0.1:0", webhook_cert_dir=tmp_path)
    server = WebhookServer(settings, certs, FakeCaches([]), Metrics(), DEFAULT_GATES)  # type: ignore[arg-type]
    await server.start()
    try:
        events.clear()
        certs.cert = issue(HOSTS, now)  # a renewal: a new CA and leaf
        await server.refresh_once()
        assert events == ["publish", "load"]
    finally:
        await server.stop()


# ---- what a body holds is not logged at any length ---------------------------------------------


async def test_a_gated_pods_names_are_logged_short(
    small_budget: tuple[WebhookServer, ServingCert, ByteBudget], capsys: pytest.CaptureFixture[str]
) -> None:
    """``webhook_pod_gated`` logged the namespace, name and PodSet label from the body as they
    were: one anonymous 1 MiB review, one 1 MiB log line, as often as the
    port is called. The API server never sends names longer than 253 characters."""
    server, cert, _ = small_budget
    huge = "x" * (300 * 1024)
    body = pod_review({c.GATED_LABEL: "true", c.PODSET_LABEL: huge})
    body["request"]["object"]["metadata"].update(name=huge, namespace=huge)
    capsys.readouterr()
    assert await post(server, cert.ca_pem, POD_GATE_PATH, body) == 200
    out = capsys.readouterr().out
    assert "webhook_pod_gated" in out
    assert max(len(line) for line in out.splitlines()) < 2000


# ---- a compressed body is not inflated on the event loop ---------------------------------------


async def test_a_gzip_bomb_is_refused_without_inflating_it_on_the_loop(tmp_path: Path) -> None:
    """aiohttp inflated a ``Content-Encoding: gzip`` body in its protocol, on the event loop the
    leader elector and the reconcilers share, and went on inflating what followed the 413 while
    it lingered: 1 MB of gzipped zeros (1 GiB inflated) from anyone stalled the loop ~2 s, a few
    at once past the lease's renew deadline. The API server never compresses a review, so a
    compressed body is refused (415) and never inflated."""

    import aiohttp

    cert = issue(HOSTS, dt.datetime.now(dt.UTC))
    write_cert(tmp_path / "certs", cert)
    settings = Settings(leader_election=False, webhook_bind="127.0.0.1:0", webhook_cert_dir=tmp_path / "certs")
    server = WebhookServer(settings, FileCerts(tmp_path / "certs"), FakeCaches([]), Metrics(), DEFAULT_GATES)  # type: ignore[arg-type]
    await server.start()
    bomb = gzip_bomb(1024)
    host, port = server.addresses[0]
    try:
        async with loop_gaps() as gaps:
            async with (
                aiohttp.ClientSession() as session,
                session.post(
                    f"https://{host}:{port}/validate",
                    data=bomb,
                    headers={"Content-Encoding": "gzip", "Content-Type": "application/json"},
                    ssl=new_client_context(cert.ca_pem),
                ) as resp,
            ):
                status, text = resp.status, await resp.text()
            await asyncio.sleep(0.5)  # what the server reads after answering, too
    finally:
        await server.stop()
    assert status == 415 and "gzip" in text
    assert max(gaps) < 0.5, max(gaps)


# ---- connections: each TLS connection costs ~275 KiB while it stays open ------------------------


@pytest_asyncio.fixture
async def guarded(tmp_path: Path) -> AsyncIterator[tuple[WebhookServer, ServingCert, ConnectionLimits]]:
    """A server holding at most 6 connections, 3 per peer, heads due within 0.5 s."""
    cert = issue(HOSTS, dt.datetime.now(dt.UTC))
    write_cert(tmp_path / "certs", cert)
    topo = TopologyView.of(Topology.model_validate(topology_obj("topo")))
    settings = Settings(leader_election=False, webhook_bind="127.0.0.1:0", webhook_cert_dir=tmp_path / "certs")
    limits = ConnectionLimits(max_connections=6, max_per_peer=3, head_seconds=0.5)
    server = WebhookServer(
        settings, FileCerts(tmp_path / "certs"), FakeCaches([topo]), Metrics(), DEFAULT_GATES, limits=limits
    )  # type: ignore[arg-type]
    await server.start()
    try:
        yield server, cert, limits
    finally:
        await server.stop()


async def half_sent_head(server: WebhookServer, ca: bytes) -> asyncio.StreamWriter:
    host, port = server.addresses[0]
    _, writer = await asyncio.open_connection(host, port, ssl=new_client_context(ca))
    writer.write(b"POST /mutate-pod HTTP/1.1\r\nHost: x\r\n")  # the head never ends
    await writer.drain()
    return writer


async def settle(check: Any, seconds: float = 5.0) -> None:
    deadline = time.monotonic() + seconds
    while not check() and time.monotonic() < deadline:
        await asyncio.sleep(0.02)


async def test_idle_connections_with_half_sent_heads_are_capped_and_then_closed(
    guarded: tuple[WebhookServer, ServingCert, ConnectionLimits],
) -> None:
    """The review: the port took any number of connections, and one that sent part of its head
    was never closed; 2,000 from one client took the server from 130 to 680 MiB (each holds
    asyncio's 256 KiB TLS read buffer), ~3,500 reach the 1 Gi limit. Now one peer holds at most
    its share, and a head not complete within the deadline closes its connection."""
    server, cert, limits = guarded
    runner = server._runner
    assert runner is not None and runner.server is not None
    writers = [await half_sent_head(server, cert.ca_pem) for _ in range(8)]
    try:
        await settle(lambda: limits.refused >= 5)
        assert limits.refused == 5 and limits.open == 3
        assert len(runner.server.connections) <= 3
        await settle(lambda: limits.open == 0)
        assert limits.open == 0 and limits.expired == 3, "heads that never end close their connections"
        await settle(lambda: len(runner.server.connections) == 0)
        assert len(runner.server.connections) == 0
        assert await post(server, cert.ca_pem, POD_GATE_PATH, pod_review({c.GATED_LABEL: "true"})) == 200
    finally:
        for writer in writers:
            writer.close()


async def test_a_head_sent_in_pieces_within_the_deadline_and_keep_alive_requests_are_served(
    guarded: tuple[WebhookServer, ServingCert, ConnectionLimits],
) -> None:
    """The clock follows the requests on one connection: each head in pieces, its body by its
    Content-Length, then the next head; none is cut while it keeps within the deadline."""
    server, cert, limits = guarded
    host, port = server.addresses[0]
    reader, writer = await asyncio.open_connection(host, port, ssl=new_client_context(cert.ca_pem))
    body = json.dumps(pod_review({c.GATED_LABEL: "true"})).encode()
    head = (
        f"POST {POD_GATE_PATH} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    ).encode()
    try:
        for _ in range(3):
            for piece in (head[:10], head[10:-2], head[-2:] + body):
                writer.write(piece)
                await writer.drain()
                await asyncio.sleep(0.2)  # 0.6 s a request, 0.4 s within one head: under 0.5 s
            status = await reader.readline()
            assert status.startswith(b"HTTP/1.1 200"), status
            length = 0
            while (line := await reader.readline()) not in (b"\r\n", b""):
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":")[1])
            await reader.readexactly(length)
        assert limits.expired == 0
    finally:
        writer.close()


@pytest.mark.parametrize(
    ("pieces", "open_after"),
    [
        ([b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"], False),
        ([b"GET / HTTP/1.1\r\nHost: x\r", b"\n\r\n"], False),  # the end split across reads
        ([b"POST / HTTP/1.1\r\nContent-Length: 4\r\n\r\nab", b"cd"], False),
        ([b"POST / HTTP/1.1\r\nContent-Length: 2\r\n\r\nabGET / HT"], True),  # pipelined
        ([b"POST / HTTP/1.1\r\nContent-Length: 2\r\n\r\nab", b"P"], True),  # the next head's first byte
        ([b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nab"], False),  # left to BODY_SECONDS
        ([b"GET / HTTP/1.1\r\nHost: x"], True),
    ],
)
def test_the_head_clock_finds_heads_by_their_framing(pieces: list[bytes], open_after: bool) -> None:
    clock = _HeadClock()
    results = [clock.feed(piece) for piece in pieces]
    assert results[-1] == (open_after, False)


def test_a_head_longer_than_any_request_breaks_the_limit() -> None:
    clock = _HeadClock()
    assert clock.feed(b"GET / HTTP/1.1\r\n" + b"X-A: b\r\n" * 10_000) == (True, True)
