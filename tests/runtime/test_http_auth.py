"""Who may read /metrics and the topology map (runtime/http_auth.py), against a fake API server
review: 200 when allowed, 401 without or with a bad token, 403 when not allowed, the probes open,
the caches bounded, reviews shared and rate-limited, the token in no log line or metric label."""

from __future__ import annotations

import asyncio
import hashlib
import json
import socket
import ssl
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import structlog
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from kueue_tas.cli.map_server import PATHS, MapServer
from kueue_tas.kube.errors import ServerError
from kueue_tas.runtime.config import ConfigError, Settings
from kueue_tas.runtime.health import HealthServer
from kueue_tas.runtime.http_auth import (
    ACCESS_REVIEWS,
    TOKEN_REVIEWS,
    AuthLimits,
    KubeReviewer,
    RequestAuth,
    User,
    bearer_token,
)
from kueue_tas.runtime.metrics import Metrics
from kueue_tas.runtime.serving_tls import ServingTLS

READER = "reader-token"
STRANGER = "stranger-token"  # a valid token whose user may read nothing
SA = "system:serviceaccount:monitoring:prometheus"


@dataclass
class FakeReviewer:
    """The API server's answers: tokens -> users, and which (user, path, verb) are allowed."""

    users: dict[str, User] = field(
        default_factory=lambda: {
            READER: User(SA, uid="u1", groups=("system:serviceaccounts",)),
            STRANGER: User("system:serviceaccount:default:nobody", uid="u2"),
        }
    )
    grants: set[tuple[str, str, str]] = field(
        default_factory=lambda: {(SA, "/metrics", "get"), *((SA, p, "get") for p in PATHS)}
    )
    token_reviews: int = 0
    access_reviews: int = 0
    fail: bool = False
    delay: float = 0.0

    async def authenticate(self, token: str) -> User | None:
        self.token_reviews += 1
        if self.delay:
            await asyncio.sleep(self.delay)
        if self.fail:
            raise ServerError(503, "ServiceUnavailable", "the apiserver is unavailable")
        return self.users.get(token)

    async def authorize(self, user: User, path: str, verb: str) -> bool:
        self.access_reviews += 1
        return (user.name, path, verb) in self.grants


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


async def client(app: web.Application) -> TestClient[web.Request, web.Application]:
    c = TestClient(TestServer(app))
    await c.start_server()
    return c


@pytest.fixture
def reviewer() -> FakeReviewer:
    return FakeReviewer()


@pytest.fixture
async def metrics_client(reviewer: FakeReviewer) -> AsyncIterator[TestClient[web.Request, web.Application]]:
    m = Metrics()
    m.record_admission("ready")
    server = HealthServer(metrics=m, auth=RequestAuth(reviewer, "metrics", metrics=m))
    c = await client(server.make_metrics_app())
    try:
        yield c
    finally:
        await c.close()


# ---- /metrics -----------------------------------------------------------------------------------


async def test_an_allowed_token_reads_metrics(
    metrics_client: TestClient[web.Request, web.Application], reviewer: FakeReviewer
) -> None:
    r = await metrics_client.get("/metrics", headers=bearer(READER))
    assert r.status == 200
    assert 'kueue_tas_admissions_total{outcome="ready"} 1.0' in await r.text()
    assert (reviewer.token_reviews, reviewer.access_reviews) == (1, 1)


async def test_no_token_is_401_and_never_reviewed(
    metrics_client: TestClient[web.Request, web.Application], reviewer: FakeReviewer
) -> None:
    for headers in ({}, {"Authorization": "Basic dXNlcjpwYXNz"}, {"Authorization": "Bearer "}):
        r = await metrics_client.get("/metrics", headers=headers)
        text = await r.text()
        assert r.status == 401, headers
        assert text == "Unauthorized: a bearer token is required\n"
        assert r.headers["WWW-Authenticate"].startswith("Bearer")
        assert "kueue_tas_" not in text
    assert reviewer.token_reviews == 0


async def test_a_token_the_apiserver_rejects_is_401(
    metrics_client: TestClient[web.Request, web.Application], reviewer: FakeReviewer
) -> None:
    r = await metrics_client.get("/metrics", headers=bearer("forged"))
    assert r.status == 401
    assert (await r.text()) == "Unauthorized: the bearer token was not accepted\n"
    assert reviewer.access_reviews == 0


async def test_an_authenticated_user_without_the_role_is_403(
    metrics_client: TestClient[web.Request, web.Application], reviewer: FakeReviewer
) -> None:
    r = await metrics_client.get("/metrics", headers=bearer(STRANGER))
    text = await r.text()
    assert r.status == 403
    assert text == "Forbidden: user 'system:serviceaccount:default:nobody' may not get /metrics\n"
    assert text.count("\n") == 1 and "kueue_tas_" not in text


async def test_a_failed_review_is_500_and_not_cached(
    metrics_client: TestClient[web.Request, web.Application], reviewer: FakeReviewer
) -> None:
    reviewer.fail = True
    r = await metrics_client.get("/metrics", headers=bearer(READER))
    assert r.status == 500 and (await r.text()).count("\n") == 1
    reviewer.fail = False
    assert (await metrics_client.get("/metrics", headers=bearer(READER))).status == 200


async def test_an_unknown_path_is_not_authorized_per_path(
    metrics_client: TestClient[web.Request, web.Application], reviewer: FakeReviewer
) -> None:
    """Only the server's routes get an access review: a client cannot make us review arbitrary paths."""
    assert (await metrics_client.get("/nope", headers=bearer(READER))).status == 404
    assert (await metrics_client.get("/nope")).status == 401
    assert reviewer.access_reviews == 0


# ---- the probes stay open -----------------------------------------------------------------------


async def test_the_probes_are_open_and_metrics_are_not_on_their_port(reviewer: FakeReviewer) -> None:
    auth = RequestAuth(reviewer, "metrics")
    same = HealthServer(health_bind="127.0.0.1:0", metrics_bind="127.0.0.1:0", auth=auth)
    with pytest.raises(ValueError, match="must differ"):  # one socket cannot be both open and closed
        await same.start()
    assert same.addresses == []
    hs = HealthServer(health_bind="127.0.0.1:0", metrics_bind=f"127.0.0.1:{free_port()}", auth=auth)
    hs.add_readiness_check("informers", lambda: True)
    await hs.start()
    try:
        (health, metrics) = hs.addresses
        async with aiohttp.ClientSession() as s:
            for path in ("/healthz", "/livez", "/readyz"):
                async with s.get(f"http://127.0.0.1:{health[1]}{path}") as r:
                    assert r.status == 200, path
            async with s.get(f"http://127.0.0.1:{health[1]}/metrics") as r:
                assert r.status == 404  # never served beside the probes, where nobody asks for a token
            async with s.get(f"http://127.0.0.1:{metrics[1]}/metrics") as r:
                assert r.status == 401
            async with s.get(f"http://127.0.0.1:{metrics[1]}/metrics", headers=bearer(READER)) as r:
                assert r.status == 200
    finally:
        await hs.stop()
    assert reviewer.token_reviews == 1


def test_settings_refuse_secured_metrics_on_the_probes_address() -> None:
    with pytest.raises(ConfigError, match=r"metrics_bind .* must differ from health_bind"):
        Settings.load(health_bind=":8081", metrics_bind=":8081")
    assert Settings.load(health_bind=":8081", metrics_bind=":8081", metrics_secure=False, metrics_auth=False)
    defaults = Settings(leader_election=False)
    assert (defaults.metrics_secure, defaults.metrics_auth, defaults.map_secure, defaults.map_auth) == (
        True,
        True,
        True,
        True,
    )
    env = Settings.load(serving_cert_dir="")
    assert env.serving_cert_dir is None


# ---- caches and limits --------------------------------------------------------------------------


async def test_results_are_cached_for_their_lifetimes(reviewer: FakeReviewer) -> None:
    clock = Clock()
    auth = RequestAuth(reviewer, "metrics", clock=clock)
    assert await auth.user(READER) is not None and await auth.user("forged") is None
    for _ in range(5):
        await auth.user(READER)
        await auth.user("forged")
    assert reviewer.token_reviews == 2
    clock.now += 11  # a rejected token is asked about again after 10 s, a good one after 60 s
    await auth.user(READER)
    await auth.user("forged")
    assert reviewer.token_reviews == 3
    clock.now += 50
    await auth.user(READER)
    assert reviewer.token_reviews == 4

    user = reviewer.users[READER]
    nobody = reviewer.users[STRANGER]
    assert await auth.allowed(user, "/metrics", "get") and not await auth.allowed(nobody, "/metrics", "get")
    reviewer.grants.add((nobody.name, "/metrics", "get"))  # a binding created meanwhile
    assert not await auth.allowed(nobody, "/metrics", "get")  # denial cached 30 s
    clock.now += 31
    assert await auth.allowed(nobody, "/metrics", "get")
    reviewer.grants.clear()  # the binding removed: allowed stays cached 5 min
    assert await auth.allowed(user, "/metrics", "get")
    clock.now += 301
    assert not await auth.allowed(user, "/metrics", "get")


async def test_many_distinct_tokens_neither_grow_the_caches_nor_pass_the_review_rate(reviewer: FakeReviewer) -> None:
    clock = Clock()
    limits = AuthLimits(entries=8, reviews_per_second=1000.0, review_burst=1000)
    auth = RequestAuth(reviewer, "metrics", clock=clock, limits=limits)
    await auth.user(READER)
    for i in range(500):
        assert await auth.user(f"forged-{i}") is None
    assert auth.cached_entries() <= 4 * limits.entries
    # Bad tokens fill only their own cache: the good token's entry was not evicted.
    before = reviewer.token_reviews
    assert await auth.user(READER) is not None
    assert reviewer.token_reviews == before


async def test_reviews_past_the_rate_answer_429(reviewer: FakeReviewer) -> None:
    m = Metrics()
    auth = RequestAuth(reviewer, "map", metrics=m, limits=AuthLimits(reviews_per_second=0.01, review_burst=3))
    app = web.Application(middlewares=[auth.middleware()])

    async def ok(request: web.Request) -> web.Response:
        return web.Response(text="ok")

    app.router.add_get("/", ok)
    c = await client(app)
    try:
        statuses = [(await c.get("/", headers=bearer(f"forged-{i}"))).status for i in range(10)]
        assert statuses[:3] == [401, 401, 401] and set(statuses[3:]) == {429}
        r = await c.get("/", headers=bearer("forged-x"))
        assert r.headers["Retry-After"] == "1" and (await r.text()).count("\n") == 1
        assert reviewer.token_reviews == 3
        assert (await c.get("/", headers=bearer("forged-0"))).status == 401  # cached: needs no review
    finally:
        await c.close()
    sample = m.http_auth_total.labels("map", "throttled")._value.get()
    assert sample == 8


async def test_concurrent_requests_with_one_token_share_one_review(reviewer: FakeReviewer) -> None:
    reviewer.delay = 0.05
    auth = RequestAuth(reviewer, "metrics")
    users = await asyncio.gather(*(auth.user(READER) for _ in range(20)))
    assert all(u == reviewer.users[READER] for u in users)
    assert reviewer.token_reviews == 1


async def test_the_token_is_in_no_log_line_and_no_metric(
    reviewer: FakeReviewer, capsys: pytest.CaptureFixture[str]
) -> None:
    secret = "eyJhbGciOiJSUzI1NiJ9.very-secret"
    m = Metrics()
    auth = RequestAuth(reviewer, "metrics", metrics=m)
    app = HealthServer(metrics=m, auth=auth).make_metrics_app()
    c = await client(app)
    with structlog.testing.capture_logs() as logs:
        try:
            reviewer.users[secret] = User("system:serviceaccount:default:nobody")
            assert (await c.get("/metrics", headers=bearer(secret))).status == 403
            reviewer.fail = True
            assert (await c.get("/metrics", headers=bearer(secret + "2"))).status == 500
        finally:
            await c.close()
    rendered = m.render()[0].decode()
    assert 'kueue_tas_http_auth_total{result="forbidden",server="metrics"} 1.0' in rendered
    everything = json.dumps(logs, default=str) + rendered + capsys.readouterr().out
    assert secret not in everything and hashlib.sha256(secret.encode()).hexdigest() not in everything
    assert logs, "the failed review is logged"


def test_bearer_token() -> None:
    assert bearer_token({"Authorization": "Bearer abc"}) == "abc"
    assert bearer_token({"Authorization": "bearer  abc "}) == "abc"
    assert bearer_token({"Authorization": "Basic abc"}) is None
    assert bearer_token({}) is None


# ---- the map ------------------------------------------------------------------------------------


async def test_the_map_needs_the_map_readers_grant_on_each_path(reviewer: FakeReviewer) -> None:
    class NoSource:
        kind = "read"
        max_age = 10.0

        def usable(self) -> bool:
            return True

        async def build(self) -> Any:
            raise RuntimeError("not built in this test")

    server = MapServer("127.0.0.1:0", NoSource(), replica="r0", auth=RequestAuth(reviewer, "map"))  # type: ignore[arg-type]
    c = await client(server.make_app())
    try:
        for path in PATHS:
            assert (await c.get(path)).status == 401, path
            assert (await c.get(path, headers=bearer(STRANGER))).status == 403, path
            # Past the check: the (failing) build answers.
            assert (await c.get(path, headers=bearer(READER))).status == 500, path
    finally:
        await c.close()
    assert {p for _, p, _ in reviewer.grants} >= set(PATHS)


# ---- the API server's side ----------------------------------------------------------------------


@dataclass
class RecordingApi:
    """What KubeReviewer posts, answered like the API server."""

    answers: dict[str, dict[str, Any]]
    sent: list[tuple[str, dict[str, Any]]] = field(default_factory=list)


async def test_kube_reviewer_sends_token_and_access_reviews() -> None:
    api = RecordingApi(
        {
            TOKEN_REVIEWS: {
                "status": {
                    "authenticated": True,
                    "user": {"username": SA, "uid": "u1", "groups": ["g1"], "extra": {"scope": ["a"]}},
                }
            },
            ACCESS_REVIEWS: {"status": {"allowed": True}},
        }
    )

    async def post(path: str, body: dict[str, Any]) -> dict[str, Any]:
        api.sent.append((path, body))
        return api.answers[path]

    reviewer = KubeReviewer(None, post=post)
    user = await reviewer.authenticate("tok")
    assert user == User(SA, "u1", ("g1",), (("scope", ("a",)),))
    assert await reviewer.authorize(user, "/metrics", "get")
    (tr_path, tr), (sar_path, sar) = api.sent
    assert (tr_path, tr["kind"], tr["spec"]) == (TOKEN_REVIEWS, "TokenReview", {"token": "tok"})
    assert (sar_path, sar["kind"]) == (ACCESS_REVIEWS, "SubjectAccessReview")
    assert sar["spec"] == {
        "user": SA,
        "groups": ["g1"],
        "uid": "u1",
        "extra": {"scope": ["a"]},
        "nonResourceAttributes": {"path": "/metrics", "verb": "get"},
    }
    api.answers[TOKEN_REVIEWS] = {"status": {"authenticated": False, "error": "invalid bearer token"}}
    assert await reviewer.authenticate("bad") is None


# ---- TLS ----------------------------------------------------------------------------------------


async def test_metrics_over_tls_with_a_self_issued_certificate(reviewer: FakeReviewer) -> None:
    tls = ServingTLS(None, ["127.0.0.1"])
    hs = HealthServer(
        Settings(leader_election=False, health_bind="0", metrics_bind="127.0.0.1:0"),
        auth=RequestAuth(reviewer, "metrics"),
        tls=tls.context(),
    )
    await hs.start()
    try:
        ((_, port),) = hs.addresses
        async with aiohttp.ClientSession() as s:
            async with s.get(f"https://127.0.0.1:{port}/metrics", headers=bearer(READER), ssl=False) as r:
                assert r.status == 200
            with pytest.raises(aiohttp.ClientError):  # not plain HTTP
                async with s.get(f"http://127.0.0.1:{port}/metrics", headers=bearer(READER)) as r:
                    await r.read()
            # Verified against its own CA (what a cert-manager setup gives Prometheus).
            assert tls._issued is not None
            verify = ssl.create_default_context(cadata=tls._issued.ca_pem.decode())
            async with s.get(f"https://127.0.0.1:{port}/metrics", headers=bearer(READER), ssl=verify) as r:
                assert r.status == 200
    finally:
        await hs.stop()


def test_serving_tls_from_files_is_reloaded_when_they_change(tmp_path: Path) -> None:
    import datetime as dt

    from kueue_tas.runtime.certs import CertificateError, issue

    with pytest.raises(CertificateError, match="serving_cert_dir"):
        ServingTLS(tmp_path).context()
    first = issue(["127.0.0.1"], dt.datetime.now(dt.UTC))
    (tmp_path / "tls.crt").write_bytes(first.cert_pem)
    (tmp_path / "tls.key").write_bytes(first.key_pem)
    tls = ServingTLS(tmp_path)
    tls.context()
    assert not tls.refresh()
    second = issue(["127.0.0.1", "localhost"], dt.datetime.now(dt.UTC))
    (tmp_path / "tls.crt").write_bytes(second.cert_pem + b"\n")
    (tmp_path / "tls.key").write_bytes(second.key_pem)
    assert tls.refresh()


def test_a_self_issued_certificate_is_renewed_before_it_ends() -> None:
    import datetime as dt

    from kueue_tas.runtime.certs import RENEW_BEFORE, VALIDITY

    now = [dt.datetime(2026, 1, 1, tzinfo=dt.UTC)]
    clock: Callable[[], dt.datetime] = lambda: now[0]  # noqa: E731
    tls = ServingTLS(None, ["127.0.0.1"], clock=clock)
    tls.context()
    first = tls._issued
    assert not tls.refresh()
    now[0] += VALIDITY - RENEW_BEFORE + dt.timedelta(days=1)
    assert tls.refresh() and tls._issued is not first


def test_run_wires_reader_access_from_the_settings() -> None:
    from kueue_tas.cli.run import reader_access

    on = reader_access(None, Settings(leader_election=False, map_bind="127.0.0.1:0"), Metrics())
    assert on.metrics_auth is not None and on.map_auth is not None
    assert on.metrics_auth.server == "metrics" and on.map_auth.server == "map"
    assert on.tls is not None and isinstance(on.context(True), ssl.SSLContext) and on.context(False) is None
    local_dev = Settings(
        leader_election=False,
        map_bind="127.0.0.1:0",
        metrics_secure=False,
        metrics_auth=False,
        map_secure=False,
        map_auth=False,
    )
    off = reader_access(None, local_dev, Metrics())
    assert (off.tls, off.metrics_auth, off.map_auth, off.context(True)) == (None, None, None, None)


def test_run_warns_when_a_reader_endpoint_is_open_beyond_loopback() -> None:
    from kueue_tas.cli.run import reader_access

    open_map = Settings(leader_election=False, map_bind=":8082", map_secure=False, map_auth=False)
    plain_tokens = Settings(leader_election=False, metrics_bind=":8080", metrics_secure=False)
    loopback = Settings(leader_election=False, map_bind="127.0.0.1:8082", map_secure=False, map_auth=False)
    with structlog.testing.capture_logs() as logs:
        reader_access(None, open_map, Metrics())
        reader_access(None, plain_tokens, Metrics())
        reader_access(None, loopback, Metrics())
    warned = [(e["event"], e["server"]) for e in logs if e["log_level"] == "warning"]
    assert warned == [("reader_endpoint_unauthenticated", "map"), ("reader_tokens_in_clear", "metrics")]
