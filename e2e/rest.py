"""A minimal synchronous Kubernetes REST client for bootstrapping (stdlib only).

The cluster CLI uses it to install CRDs and webhook configurations and to probe health,
before any async client exists. It speaks JSON over mutual TLS with the admin cert, and fails
with the product's error family (:mod:`kueue_tas.kube.errors`, itself stdlib only).
"""

from __future__ import annotations

import http.client
import json
import ssl
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from kueue_tas.kube.errors import ApiError, TransportError, error_from_response

__all__ = ["ApiError", "ProbeFatal", "Rest", "resource_path", "wait_for"]


class ProbeFatal(RuntimeError):
    """Raised by a readiness probe when waiting longer cannot help (e.g. the process exited)."""


@dataclass
class Rest:
    host: str
    port: int
    ca_file: str
    cert_file: str | None = None
    key_file: str | None = None
    timeout_s: float = 30.0

    def _ctx(self) -> ssl.SSLContext:
        ctx = ssl.create_default_context(cafile=self.ca_file)
        if self.cert_file and self.key_file:
            ctx.load_cert_chain(self.cert_file, self.key_file)
        return ctx

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        content_type: str = "application/json",
        query: dict[str, str] | None = None,
    ) -> Any:
        if query:
            path = path + "?" + "&".join(f"{k}={quote(v)}" for k, v in query.items())
        conn = http.client.HTTPSConnection(self.host, self.port, context=self._ctx(), timeout=self.timeout_s)
        try:
            headers = {"Accept": "application/json"}
            data = None
            if body is not None:
                data = body if isinstance(body, bytes) else json.dumps(body).encode()
                headers["Content-Type"] = content_type
            conn.request(method, path, body=data, headers=headers)
            resp = conn.getresponse()
            text = resp.read().decode(errors="replace")
        except (OSError, http.client.HTTPException) as e:
            raise TransportError(str(e) or type(e).__name__, request=f"{method} {path}") from e
        finally:
            conn.close()
        if resp.status >= 400:
            raise error_from_response(resp.status, resp.reason, text, request=f"{method} {path}")
        return json.loads(text) if text.strip().startswith(("{", "[")) else text

    def get(self, path: str) -> Any:
        return self.request("GET", path)

    def apply(self, path: str, obj: dict[str, Any], manager: str = "kueue-tas-e2e") -> Any:
        """Server-side apply of ``obj`` at ``path`` (the object URL including its name)."""
        return self.request(
            "PATCH",
            path,
            obj,
            content_type="application/apply-patch+yaml",
            query={"fieldManager": manager, "force": "true"},
        )

    def raw_status(self, path: str) -> tuple[int, str]:
        """GET ``path`` and return (status, body) without raising; (0, error) on connection errors."""
        try:
            conn = http.client.HTTPSConnection(self.host, self.port, context=self._ctx(), timeout=5)
            try:
                conn.request("GET", path)
                resp = conn.getresponse()
                return resp.status, resp.read().decode(errors="replace")
            finally:
                conn.close()
        except (OSError, ssl.SSLError) as e:
            return 0, str(e)


def wait_for(
    what: str,
    check: Callable[[], bool],
    timeout_s: float,
    interval_s: float = 0.25,
    on_timeout: Callable[[], str] | None = None,
) -> float:
    """Poll ``check`` until it returns True; return the seconds waited. Raises TimeoutError."""
    t0 = time.monotonic()
    last_exc: Exception | None = None
    while True:
        try:
            if check():
                return time.monotonic() - t0
        except ProbeFatal:
            raise
        except Exception as e:  # a probe failing is just "not yet"
            last_exc = e
        if time.monotonic() - t0 > timeout_s:
            extra = on_timeout() if on_timeout else ""
            raise TimeoutError(
                f"timed out after {timeout_s:.0f}s waiting for {what}; last error: {last_exc}"
                f"{chr(10) + extra if extra else ''}"
            )
        time.sleep(interval_s)


def resource_path(obj: dict[str, Any], plural: str, *, with_name: bool = True) -> str:
    """URL path of an object given its plural resource name."""
    api_version: str = obj["apiVersion"]
    base = f"/api/{api_version}" if "/" not in api_version else f"/apis/{api_version}"
    ns = obj.get("metadata", {}).get("namespace")
    if ns:
        base += f"/namespaces/{ns}"
    base += f"/{plural}"
    return f"{base}/{obj['metadata']['name']}" if with_name else base
