"""What a failed write tells its caller: could it have landed, and how long to wait."""

from __future__ import annotations

import asyncio
import json

import pytest

from kueue_tas.kube.errors import (
    ApiError,
    Conflict,
    Forbidden,
    ServerError,
    TooManyRequests,
    TransportError,
    error_from_response,
    may_have_applied,
    retry_after,
)


@pytest.mark.parametrize(
    ("exc", "unknown"),
    [
        (Conflict(409, "Conflict"), False),
        (Forbidden(403, "Forbidden"), False),
        (TooManyRequests(429, "TooManyRequests"), False),
        (ApiError(404, "NotFound"), False),
        (ApiError(500, "InternalError"), True),
        (
            ServerError(500, "InternalError", 'Internal error occurred: failed calling webhook "vpod.kb.io": dial'),
            False,
        ),
        (ServerError(500, "InternalError", "etcdserver: request timed out"), True),
        (ApiError(504, "Timeout"), True),
        (TransportError("read timed out"), True),
        (TimeoutError(), True),
        (asyncio.CancelledError(), True),
        (KeyError("spec"), True),
    ],
)
def test_only_a_refusal_is_known_not_to_have_landed(exc: BaseException, unknown: bool) -> None:
    assert may_have_applied(exc) is unknown


@pytest.mark.parametrize(
    ("headers", "body", "expected"),
    [
        ({"Retry-After": "7"}, {}, 7.0),
        ({"Retry-After": "Wed, 21 Oct 2015 07:28:00 GMT"}, {}, None),  # a date: ignored
        ({"Retry-After": "-3"}, {}, None),
        ({}, {"details": {"retryAfterSeconds": 4}}, 4.0),
        ({"Retry-After": "2"}, {"details": {"retryAfterSeconds": 9}}, 2.0),  # the header wins
        ({}, {}, None),
    ],
)
def test_retry_after_comes_from_the_header_or_the_status_details(
    headers: dict[str, str], body: dict[str, object], expected: float | None
) -> None:
    exc = error_from_response(429, "Too Many Requests", json.dumps(body), headers=headers)
    assert isinstance(exc, TooManyRequests) and exc.retry_after == expected


def test_retry_after_is_capped_and_defaults() -> None:
    assert retry_after(TooManyRequests(429, "", retry_after=3600), 1.0, 60.0) == 60.0
    assert retry_after(TooManyRequests(429, ""), 1.0, 60.0) == 1.0
    assert retry_after(TransportError("x"), 8.0, 60.0) == 8.0
    assert retry_after(ValueError(), 120.0, 60.0) == 60.0
