"""The TLS of the servers readers use (``/metrics``, the topology map), not of the webhook.

Either ``tls.crt``/``tls.key`` from ``serving_cert_dir`` (a cert-manager Secret mounted there;
looked at again every minute and swapped in when they change, so a renewal needs no restart),
or, by default, a certificate this process issues itself at start (controller-runtime's default
for its secure metrics): nothing to install, and Prometheus scrapes it with
``insecureSkipVerify``, as the token, not the certificate, is what protects the data. It is
renewed before it ends like the webhook's. One context serves both servers.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import socket
import ssl
from collections.abc import Callable, Sequence
from pathlib import Path

from kueue_tas.runtime.certs import (
    ServingCert,
    files_version,
    issue,
    load_chain,
    read_files,
    renewal_reason,
    ssl_context,
)
from kueue_tas.runtime.logging import get_logger

log = get_logger(__name__)

REFRESH_SECONDS = 60.0
SETTING = "serving_cert_dir"


def default_hosts() -> list[str]:
    """The names a self-issued certificate carries: this pod's hostname and loopback."""
    return list(dict.fromkeys([socket.gethostname(), "localhost", "127.0.0.1"]))


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


class ServingTLS:
    def __init__(
        self,
        cert_dir: Path | None,
        hosts: Sequence[str] | None = None,
        *,
        clock: Callable[[], dt.datetime] = _now,
    ) -> None:
        self.cert_dir = cert_dir
        self.hosts = list(hosts) if hosts is not None else default_hosts()
        self.clock = clock
        self._context: ssl.SSLContext | None = None
        self._issued: ServingCert | None = None
        self._version: tuple[float, ...] | None = None

    def context(self) -> ssl.SSLContext:
        """The server context (made on first use; CertificateError when the files cannot serve)."""
        if self._context is None:
            cert, key = self._material()
            self._context = ssl_context(cert, key)
        return self._context

    def _material(self) -> tuple[bytes, bytes]:
        if self.cert_dir is not None:
            self._version = files_version(self.cert_dir)
            return read_files(self.cert_dir, SETTING)
        self._issued = issue(self.hosts, self.clock(), ca_common_name="kueue-tas-serving-ca")
        log.info("serving_certificate_issued", hosts=self.hosts)
        return self._issued.cert_pem, self._issued.key_pem

    def refresh(self) -> bool:
        """Load new material when the files changed or the own certificate is due; whether it did."""
        if self._context is None:
            return False
        if self.cert_dir is not None:
            if files_version(self.cert_dir) == self._version:
                return False
        elif self._issued is None or renewal_reason(self._issued, self.hosts, self.clock()) is None:
            return False
        cert, key = self._material()
        load_chain(self._context, cert, key)  # connections made from now on get the new one
        log.info("serving_certificate_loaded", source=str(self.cert_dir) if self.cert_dir else "self-issued")
        return True

    async def run(self, period: float = REFRESH_SECONDS) -> None:
        """Refresh every ``period`` seconds until cancelled; a failed load keeps the old one."""
        while True:
            await asyncio.sleep(period)
            try:
                self.refresh()
            except Exception as exc:  # files half-written during a rotation: next round
                log.warning("serving_certificate_not_loaded", error=str(exc))
