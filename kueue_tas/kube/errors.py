"""The one error family for API requests (stdlib only: used by the product and the e2e tools).

``ApiError`` carries the HTTP ``status`` (0 without a response), the Kubernetes
``Status.reason`` and the server's ``message``; subclasses name the cases callers act on
(``except Conflict`` instead of comparing codes). ``TransportError`` is a request that got no
response at all (connection refused or reset, TLS failure, timeout).
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
    ) -> None:
        self.status = status
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


def error_from_response(
    status: int, http_reason: str | None, body: bytes | str | None, *, request: str = ""
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
    return error_class(status, reason)(status, reason, message, parsed, request=request)
