"""Where the webhook's certificate lives, and the CA the apiserver is told to trust.

- ``SecretCerts``: the controller issues its own. Every replica serves the one in the Secret
  ``webhook_secret`` (namespace ``webhook_namespace``); the first replica to find it missing or
  due for renewal writes a new one (create, or update at the read resourceVersion), and one
  that loses the race reads the winner's, so the replicas always agree. Then the CA goes
  into the ``caBundle`` of every webhook of the Validating- and MutatingWebhookConfiguration
  ``webhook_configuration`` (a JSON patch that tests each webhook's name first). A renewal
  makes a new CA while the other replica serves its old leaf until its next refresh, so the
  bundle holds the previous CA too for ``PREVIOUS_CA_KEPT`` (the Secret keeps it beside
  ``ca.crt``); the first refresh after that drops it.
- ``FileCerts``: another issuer (cert-manager) keeps ``tls.crt``/``tls.key`` in a directory
  and injects the CA itself.

A Secret that exists already (the Helm chart creates it empty, so that ``helm uninstall`` removes
it) is filled in place, keeping its type, labels and annotations.

RBAC: get/update of that one Secret (the manifests and the chart ship it empty, so no create),
get/patch of those two webhook configurations (manifests/base).
"""

from __future__ import annotations

import base64
import dataclasses
import datetime as dt
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol

from kubernetes_asyncio import client as k8s

from kueue_tas.kube.client import request_json
from kueue_tas.kube.errors import Conflict, Forbidden, NotFound
from kueue_tas.runtime.certs import (
    CA_FILE,
    CERT_FILE,
    KEY_FILE,
    PREVIOUS_CA_FILE,
    CertificateError,
    ServingCert,
    files_version,
    issue,
    read_files,
    renewal_reason,
    trust_bundle,
)
from kueue_tas.runtime.logging import get_logger

log = get_logger(__name__)

VWC_PATH = "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations"
MWC_PATH = "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations"
# Replicas racing to write the Secret settle within a few rounds; more means something else
# keeps changing it.
MAX_ROUNDS = 5
# How long a renewal's previous CA stays in the caBundle: the other replica reloads within one
# refresh period (webhook/server.py REFRESH_SECONDS, 60 s) and retries a failed refresh a period
# later; ten minutes covers that and a slow apiserver.
PREVIOUS_CA_KEPT = dt.timedelta(minutes=10)


class CertSource(Protocol):
    async def current(self) -> tuple[bytes, bytes]:
        """(certificate chain, key) PEM to serve now."""
        ...

    def changed(self) -> bool:
        """Whether ``current`` may return something new since it was last called (cheap)."""
        ...

    async def publish(self) -> None:
        """Make sure the apiserver trusts what is served (nothing to do for files)."""
        ...


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


class SecretCerts:
    def __init__(
        self,
        api: k8s.ApiClient,
        *,
        namespace: str,
        secret: str,
        configuration: str,
        hosts: Sequence[str],
        clock: Callable[[], dt.datetime] = _now,
    ) -> None:
        self.api = api
        self.namespace = namespace
        self.secret = secret
        self.configuration = configuration
        self.hosts = list(hosts)
        self.clock = clock
        self._served: ServingCert | None = None

    @property
    def _secret_path(self) -> str:
        return f"/api/v1/namespaces/{self.namespace}/secrets"

    async def current(self) -> tuple[bytes, bytes]:
        self._served = await self.ensure()
        return self._served.cert_pem, self._served.key_pem

    def changed(self) -> bool:
        # Renewal is decided against the Secret, which another replica may have rewritten:
        # always worth a read (one GET per period).
        return True

    async def ensure(self) -> ServingCert:
        """The Secret's certificate, written first when missing or due for renewal."""
        for _ in range(MAX_ROUNDS):
            try:
                secret: dict[str, Any] | None = await request_json(
                    self.api, "GET", f"{self._secret_path}/{self.secret}"
                )
            except NotFound:
                secret = None
            held = _from_secret(secret) if secret is not None else None
            reason = "missing" if held is None else renewal_reason(held, self.hosts, self.clock())
            if held is not None and reason is None:
                return held
            fresh = issue(self.hosts, self.clock())
            if held is not None:
                fresh = dataclasses.replace(fresh, previous_ca_pem=held.ca_pem)
            body = _secret_body(self.namespace, self.secret, fresh)
            try:
                if secret is None:
                    await request_json(self.api, "POST", self._secret_path, body=body)
                else:
                    _keep_identity(body, secret)
                    await request_json(self.api, "PUT", f"{self._secret_path}/{self.secret}", body=body)
            except Conflict:  # another replica wrote it first (AlreadyExists is a Conflict): use theirs
                continue
            except Forbidden as exc:
                if secret is not None:
                    raise
                # The manifests and the chart ship it empty; the Role grants get/update only.
                raise CertificateError(
                    f"Secret {self.namespace}/{self.secret} is missing and the controller may not create it: "
                    "re-apply manifests/base (or upgrade the chart), which ship it empty"
                ) from exc
            log.info("webhook_certificate_issued", secret=f"{self.namespace}/{self.secret}", reason=reason)
            return fresh
        raise CertificateError(
            f"Secret {self.namespace}/{self.secret}: still changing after {MAX_ROUNDS} writes; "
            "is something else writing it?"
        )

    async def publish(self) -> None:
        """Write the CAs to trust (the current one, and the previous while replicas may still
        serve its leaf) into each webhook's caBundle where it differs, in the validating and the
        mutating configuration of that name; one not installed yet is left for the next round."""
        if self._served is None:
            return
        bundle = _b64(trust_bundle(self._served, self.clock(), PREVIOUS_CA_KEPT))
        for path in (VWC_PATH, MWC_PATH):
            await self._publish_into(f"{path}/{self.configuration}", bundle)

    async def _publish_into(self, path: str, bundle: str) -> None:
        try:
            configuration = await request_json(self.api, "GET", path)
        except NotFound:
            log.warning("webhook_configuration_missing", path=path)
            return
        ops: list[dict[str, Any]] = []
        for i, hook in enumerate(configuration.get("webhooks") or []):
            if (hook.get("clientConfig") or {}).get("caBundle") == bundle:
                continue
            ops.append({"op": "test", "path": f"/webhooks/{i}/name", "value": hook.get("name")})
            ops.append({"op": "add", "path": f"/webhooks/{i}/clientConfig/caBundle", "value": bundle})
        if not ops:
            return
        await request_json(self.api, "PATCH", path, body=ops, content_type="application/json-patch+json")
        log.info("webhook_ca_bundle_written", path=path, webhooks=len(ops) // 2)


class FileCerts:
    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self._version: tuple[float, ...] | None = None

    async def current(self) -> tuple[bytes, bytes]:
        self._version = files_version(self.directory)
        return read_files(self.directory)

    def changed(self) -> bool:
        return files_version(self.directory) != self._version

    async def publish(self) -> None:
        return None


def _from_secret(secret: dict[str, Any]) -> ServingCert | None:
    data = secret.get("data") or {}
    try:
        return ServingCert(
            ca_pem=base64.b64decode(data[CA_FILE]),
            cert_pem=base64.b64decode(data[CERT_FILE]),
            key_pem=base64.b64decode(data[KEY_FILE]),
            previous_ca_pem=base64.b64decode(data.get(PREVIOUS_CA_FILE) or ""),
        )
    except (KeyError, ValueError, TypeError):
        return None


def _keep_identity(body: dict[str, Any], secret: dict[str, Any]) -> None:
    """An update keeps what the Secret already is: its type (immutable; the Helm chart creates it
    empty as Opaque, so that `helm uninstall` removes it), the labels and annotations it has
    (Helm's ownership), and the resourceVersion it was read at (the precondition)."""
    meta = secret.get("metadata") or {}
    body["type"] = secret.get("type") or "Opaque"
    body["metadata"]["labels"] = {**body["metadata"]["labels"], **(meta.get("labels") or {})}
    if meta.get("annotations"):
        body["metadata"]["annotations"] = dict(meta["annotations"])
    body["metadata"]["resourceVersion"] = meta.get("resourceVersion", "")


def _secret_body(namespace: str, name: str, cert: ServingCert) -> dict[str, Any]:
    # cert-manager's layout (kubernetes.io/tls plus ca.crt), so an admin can switch issuers
    # without renaming anything.
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "kubernetes.io/tls",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {"app.kubernetes.io/name": "kueue-tas", "app.kubernetes.io/part-of": "kueue-tas"},
        },
        "data": {
            CA_FILE: _b64(cert.ca_pem),
            CERT_FILE: _b64(cert.cert_pem),
            KEY_FILE: _b64(cert.key_pem),
            **({PREVIOUS_CA_FILE: _b64(cert.previous_ca_pem)} if cert.previous_ca_pem else {}),
        },
    }
