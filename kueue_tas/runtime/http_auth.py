"""Who may read our HTTP endpoints (``/metrics``, the topology map): Kubernetes authentication and
authorization, as controller-runtime's metrics filter does it.

A request's bearer token is sent to the API server in a TokenReview (authentication.k8s.io/v1);
the user it names is then checked with a SubjectAccessReview (authorization.k8s.io/v1) for the
request's non-resource URL and verb (``get`` for GET and HEAD), so a ClusterRole granting
``nonResourceURLs: [/metrics], verbs: [get]`` is what lets Prometheus scrape. No token or a
token the API server does not accept: 401; not allowed: 403; a review that fails: 500; each with
one line of text.

What one client can make us do is bounded: results are cached briefly (tokens for a minute,
rejected tokens 10 s; allowed for 5 min, denied 30 s: controller-runtime's figures) in caches of
fixed size, kept apart so that a flood of bad tokens cannot evict good ones, and reviews the
caches cannot answer are limited to a few a second (beyond: 429), so a client sending many
distinct tokens costs neither memory nor the API budget the controller needs. Concurrent
requests with one token share one review. A token is only ever held as its SHA-256 digest and
never logged; only routes the server has are authorized, so the paths reviewed are a fixed set.

Paths in ``open_paths`` (the health probes, which the kubelet calls without a token) pass
through.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections.abc import Awaitable, Callable, Collection, Hashable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Literal, Protocol

from aiohttp import web
from aiolimiter import AsyncLimiter
from cachetools import TTLCache

from kueue_tas.kube.client import request_json
from kueue_tas.kube.errors import ApiError
from kueue_tas.runtime.logging import get_logger
from kueue_tas.runtime.metrics import Metrics

log = get_logger(__name__)

TOKEN_REVIEWS: Final = "/apis/authentication.k8s.io/v1/tokenreviews"
ACCESS_REVIEWS: Final = "/apis/authorization.k8s.io/v1/subjectaccessreviews"
REVIEW_TIMEOUT_SECONDS: Final = 10.0

AuthResult = Literal["allowed", "unauthorized", "forbidden", "throttled", "error"]
AUTH_RESULTS: Final[tuple[AuthResult, ...]] = ("allowed", "unauthorized", "forbidden", "throttled", "error")

# The apiserver's own mapping of HTTP methods to verbs for non-resource URLs.
_VERBS: Final = {"GET": "get", "HEAD": "get", "POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}


@dataclass(frozen=True, slots=True)
class User:
    """Who a token belongs to, as the TokenReview says (passed on unchanged to the access review)."""

    name: str
    uid: str = ""
    groups: tuple[str, ...] = ()
    extra: tuple[tuple[str, tuple[str, ...]], ...] = ()


class Reviewer(Protocol):
    async def authenticate(self, token: str) -> User | None:
        """The token's user, or None when the API server does not accept the token."""
        ...

    async def authorize(self, user: User, path: str, verb: str) -> bool:
        """Whether ``user`` may ``verb`` the non-resource URL ``path``."""
        ...


Post = Callable[[str, dict[str, Any]], Awaitable[dict[str, Any]]]


class KubeReviewer:
    """TokenReview and SubjectAccessReview through the controller's API client (``post``: how a
    review is sent and its answer read; the API client's by default)."""

    def __init__(self, api: Any, *, post: Post | None = None) -> None:
        self.api = api
        self._post = post or self._post_to_api

    async def _post_to_api(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        return await request_json(self.api, "POST", path, body=body, timeout=REVIEW_TIMEOUT_SECONDS)

    async def authenticate(self, token: str) -> User | None:
        body = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {"token": token}}
        review = await self._post(TOKEN_REVIEWS, body)
        status = review.get("status") or {}
        if not status.get("authenticated"):
            return None
        user = status.get("user") or {}
        extra = user.get("extra") or {}
        return User(
            name=str(user.get("username") or ""),
            uid=str(user.get("uid") or ""),
            groups=tuple(str(g) for g in user.get("groups") or ()),
            extra=tuple(sorted((str(k), tuple(str(v) for v in vs or ())) for k, vs in extra.items())),
        )

    async def authorize(self, user: User, path: str, verb: str) -> bool:
        spec: dict[str, Any] = {
            "user": user.name,
            "groups": list(user.groups),
            "nonResourceAttributes": {"path": path, "verb": verb},
        }
        if user.uid:
            spec["uid"] = user.uid
        if user.extra:
            spec["extra"] = {k: list(v) for k, v in user.extra}
        body = {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": spec}
        review = await self._post(ACCESS_REVIEWS, body)
        return bool((review.get("status") or {}).get("allowed"))


@dataclass(frozen=True, slots=True)
class AuthLimits:
    """Cache lifetimes (seconds), cache sizes and the rate of reviews the caches cannot answer."""

    token_ttl: float = 60.0
    bad_token_ttl: float = 10.0
    allow_ttl: float = 300.0
    deny_ttl: float = 30.0
    entries: int = 1024
    reviews_per_second: float = 5.0
    review_burst: int = 20


class Throttled(Exception):
    """Too many reviews the caches could not answer; the client should retry shortly."""


@dataclass
class _Caches:
    limits: AuthLimits
    clock: Callable[[], float]
    tokens: TTLCache[bytes, User] = field(init=False)
    bad_tokens: TTLCache[bytes, bool] = field(init=False)
    allowed: TTLCache[tuple[User, str, str], bool] = field(init=False)
    denied: TTLCache[tuple[User, str, str], bool] = field(init=False)

    def __post_init__(self) -> None:
        n, t = self.limits.entries, self.clock
        self.tokens = TTLCache(n, self.limits.token_ttl, timer=t)
        self.bad_tokens = TTLCache(n, self.limits.bad_token_ttl, timer=t)
        self.allowed = TTLCache(n, self.limits.allow_ttl, timer=t)
        self.denied = TTLCache(n, self.limits.deny_ttl, timer=t)

    def sizes(self) -> int:
        return len(self.tokens) + len(self.bad_tokens) + len(self.allowed) + len(self.denied)


class RequestAuth:
    """Authenticates and authorizes requests to one server (``server`` names it in logs and the
    ``kueue_tas_http_auth_total`` metric)."""

    def __init__(
        self,
        reviewer: Reviewer,
        server: str,
        *,
        metrics: Metrics | None = None,
        limits: AuthLimits = AuthLimits(),
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.reviewer = reviewer
        self.server = server
        self.metrics = metrics
        self.limits = limits
        self._caches = _Caches(limits, clock)
        self._limiter = AsyncLimiter(limits.review_burst, limits.review_burst / limits.reviews_per_second)
        self._in_flight: dict[Hashable, asyncio.Future[Any]] = {}

    def cached_entries(self) -> int:
        """Entries held in the caches now (bounded by 4 x ``limits.entries``)."""
        return self._caches.sizes()

    # ---- reviews, cached ------------------------------------------------------------------------

    async def _shared(self, key: Hashable, review: Callable[[], Awaitable[Any]]) -> Any:
        """One review per key at a time; a review the caches missed spends a token of the limiter."""
        pending = self._in_flight.get(key)
        if pending is not None:
            return await asyncio.shield(pending)
        if not self._limiter.has_capacity():
            raise Throttled()
        await self._limiter.acquire()  # has capacity: does not wait
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._in_flight[key] = future
        try:
            result = await review()
        except BaseException as exc:
            future.set_exception(exc)
            future.exception()  # retrieved: no "never retrieved" warning when nobody else waited
            raise
        finally:
            self._in_flight.pop(key, None)
        future.set_result(result)
        return result

    async def user(self, token: str) -> User | None:
        key = hashlib.sha256(token.encode()).digest()
        c = self._caches
        if key in c.bad_tokens:
            return None
        held = c.tokens.get(key)
        if held is not None:
            return held

        async def review() -> User | None:
            return await self.reviewer.authenticate(token)

        found: User | None = await self._shared(("token", key), review)
        if found is None:
            c.bad_tokens[key] = True
        else:
            c.tokens[key] = found
        return found

    async def allowed(self, user: User, path: str, verb: str) -> bool:
        key = (user, path, verb)
        c = self._caches
        if key in c.allowed:
            return True
        if key in c.denied:
            return False

        async def review() -> bool:
            return await self.reviewer.authorize(user, path, verb)

        ok: bool = await self._shared(("access", key), review)
        (c.allowed if ok else c.denied)[key] = True
        return ok

    # ---- the request ----------------------------------------------------------------------------

    async def check(self, request: web.Request) -> web.Response | None:
        """None when the request may go on, else the answer to send instead."""
        token = bearer_token(request.headers)
        if token is None:
            return self._answer("unauthorized", 401, "Unauthorized: a bearer token is required")
        try:
            user = await self.user(token)
            if user is None:
                return self._answer("unauthorized", 401, "Unauthorized: the bearer token was not accepted")
            if request.match_info.http_exception is not None:
                return None  # no such route (404/405): nothing to authorize, aiohttp answers
            verb = _VERBS.get(request.method, request.method.lower())
            if not await self.allowed(user, request.path, verb):
                log.debug("http_forbidden", server=self.server, user=user.name, path=request.path, verb=verb)
                return self._answer("forbidden", 403, f"Forbidden: user {user.name!r} may not {verb} {request.path}")
        except Throttled:
            resp = self._answer("throttled", 429, "Too many requests: token reviews are rate-limited; retry shortly")
            resp.headers["Retry-After"] = "1"
            return resp
        except ApiError as exc:
            log.error("http_auth_review_failed", server=self.server, error=str(exc))
            return self._answer("error", 500, "Internal error: the request's token could not be reviewed")
        self._count("allowed")
        return None

    def _answer(self, result: AuthResult, status: int, line: str) -> web.Response:
        self._count(result)
        headers = {"Cache-Control": "no-store"}
        if status == 401:
            headers["WWW-Authenticate"] = 'Bearer realm="kueue-tas"'
        return web.Response(text=line + "\n", status=status, headers=headers)

    def _count(self, result: AuthResult) -> None:
        if self.metrics is not None:
            self.metrics.http_auth_total.labels(self.server, result).inc()

    def middleware(self, open_paths: Collection[str] = ()) -> Any:
        """An aiohttp middleware that checks every request but those to ``open_paths``."""

        @web.middleware
        async def authenticate(
            request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
        ) -> web.StreamResponse:
            if request.path not in open_paths:
                refused = await self.check(request)
                if refused is not None:
                    return refused
            return await handler(request)

        return authenticate


def bearer_token(headers: Mapping[str, str]) -> str | None:
    """The token of an ``Authorization: Bearer <token>`` header (scheme case-insensitive), or None."""
    scheme, _, token = headers.get("Authorization", "").strip().partition(" ")
    token = token.strip()
    return token if scheme.lower() == "bearer" and token else None
