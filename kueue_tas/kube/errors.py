"""The one error family for API requests (stdlib only: used by the product and the e2e tools).

``ApiError`` carries the HTTP ``status`` (0 without a response), the Kubernetes
``Status.reason`` and the server's ``message``; subclasses name the cases callers act on
(``except Conflict`` instead of comparing codes). ``TransportError`` is a request that got no
response at all (connection refused or reset, TLS failure, timeout).

Writers act on two questions every failure answers: :func:`may_have_applied` (could the
write still have taken effect? then keep what it would hold until it is observed or expires)
and :func:`retry_after` (how long the server asked us to wait, capped).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Final


class ApiError(Exception):
    """A failed API request. ``request`` names it (``"PATCH /api/v1/..."``) when known."""

    def __init__(
        self,
        status: int,
        reason: str = "",
        message: str = "",
        body: Mapping[str, Any] | None = None,
        *,
        request: str = "",
        retry_after: float | None = None,
    ) -> None:
        self.status = status
        # Seconds the server asked us to wait (429's Retry-After header or Status details).
        self.retry_after = retry_after
        self.reason = reason
        self.message = message
        self.body: Mapping[str, Any] | None = body
        self.request = request
        text = f"{status} {reason}: {message}" if message else f"{status} {reason}"
        super().__init__(f"{request} -> {text}" if request else text)

    @property
    def gone(self) -> bool:
        """The resourceVersion (or continue token) is too old: list again."""
        return self.status == 410 or self.reason in ("Expired", "Gone")


class BadRequest(ApiError):
    """400."""


class Unauthorized(ApiError):
    """401."""


class Forbidden(ApiError):
    """403."""


class NotFound(ApiError):
    """404: the object (or its namespace) does not exist."""


class Conflict(ApiError):
    """409: stale resourceVersion on update/patch, or (subclass AlreadyExists) on create."""


class AlreadyExists(Conflict):
    """409 with reason AlreadyExists (create of an existing name)."""


class Gone(ApiError):
    """410: resourceVersion too old (re-list)."""


class Invalid(ApiError):
    """422: the object failed validation (or a webhook refused it)."""


class TooManyRequests(ApiError):
    """429: throttled by API priority and fairness."""


class ServerError(ApiError):
    """5xx."""


class TransportError(ApiError):
    """No response: the connection failed, broke, or timed out (status 0)."""

    def __init__(self, message: str, *, request: str = "") -> None:
        super().__init__(0, "Transport", message, request=request)


class NotLeading(ApiError):
    """Refused here, never sent: this replica has led and no longer holds its Lease, or can no
    longer tell by its own clock that it does (``RateLimitedApiClient.fence_writes``)."""

    def __init__(self, *, request: str = "") -> None:
        super().__init__(0, "NotLeading", "this replica no longer leads: the write was not sent", request=request)


_BY_STATUS: Final[dict[int, type[ApiError]]] = {
    400: BadRequest,
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    409: Conflict,
    410: Gone,
    422: Invalid,
    429: TooManyRequests,
}


def error_class(status: int, reason: str = "") -> type[ApiError]:
    if status == 409 and reason == "AlreadyExists":
        return AlreadyExists
    if status == 0:
        return ServerError
    return _BY_STATUS.get(status, ServerError if status >= 500 else ApiError)


def from_status(status: Mapping[str, Any], http_status: int = 0, *, request: str = "") -> ApiError:
    """The error a ``Status`` object describes (a response body, or a watch ``ERROR`` event)."""
    code = status.get("code")
    status_code = code if isinstance(code, int) and code else http_status
    reason = str(status.get("reason") or "")
    return error_class(status_code, reason)(
        status_code, reason, str(status.get("message") or ""), status, request=request
    )


def _seconds(value: object) -> float | None:
    try:
        seconds = float(str(value).strip())
    except ValueError:
        return None  # an HTTP date, or garbage: treated as absent
    return seconds if 0 <= seconds < float("inf") else None


def error_from_response(
    status: int,
    http_reason: str | None,
    body: bytes | str | None,
    *,
    request: str = "",
    headers: Mapping[str, str] | None = None,
) -> ApiError:
    """The error of a non-2xx response, from its status code and (usually Status-shaped) body."""
    parsed: Mapping[str, Any] | None = None
    if body:
        try:
            raw = json.loads(body)
            if isinstance(raw, dict):
                parsed = raw
        except (ValueError, UnicodeDecodeError):
            parsed = None
    reason = str(parsed.get("reason") or "") if parsed else ""
    message = str(parsed.get("message") or "") if parsed else ""
    if not message and body:
        message = (body.decode("utf-8", "replace") if isinstance(body, bytes) else body)[:500]
    reason = reason or (http_reason or "")
    wait = _seconds(headers.get("Retry-After")) if headers and headers.get("Retry-After") is not None else None
    if wait is None and parsed:
        details = parsed.get("details")
        if isinstance(details, Mapping) and details.get("retryAfterSeconds") is not None:
            wait = _seconds(details.get("retryAfterSeconds"))
    return error_class(status, reason)(status, reason, message, parsed, request=request, retry_after=wait)


def webhook_unreachable(exc: BaseException) -> bool:
    """The apiserver could not call an admission webhook whose failure policy is Fail (e.g.
    Kueue's pod webhook while Kueue restarts). It turned the request down during admission,
    which runs before anything is stored, and the same request passes once the webhook serves.
    Its 500 carries the apiserver's own wording (k8s.io/apiserver ``webhook.ErrCallingWebhook``)."""
    return (
        isinstance(exc, ApiError)
        and not isinstance(exc, TransportError)
        and exc.status >= 500
        and "failed calling webhook" in exc.message
    )


def may_have_applied(exc: BaseException) -> bool:
    """Whether a write that failed with ``exc`` may still have taken effect on the server.

    A 4xx is the apiserver refusing the request before it changed anything, and so is a 500
    for a webhook it could not call (:func:`webhook_unreachable`). Anything else is unknown:
    no response (reset, timeout), another 5xx (a 500/504 can follow an etcd commit), our own
    cancellation after the request went out, or an error we did not foresee.
    """
    if webhook_unreachable(exc) or isinstance(exc, NotLeading):
        return False
    if isinstance(exc, ApiError) and not isinstance(exc, TransportError):
        return not 400 <= exc.status < 500
    return True


def retry_after(exc: BaseException, default: float, cap: float) -> float:
    """The delay before trying ``exc``'s write again: the server's Retry-After when it gave
    one (a 429, or a 5xx during overload), else ``default``; never more than ``cap``."""
    wait = exc.retry_after if isinstance(exc, ApiError) and exc.retry_after is not None else default
    return min(max(wait, 0.0), cap)
