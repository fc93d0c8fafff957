"""The admission webhook as the apiserver meets it: its serving certificate written where the server
reads it, a client that trusts its CA, informer caches by hand, and AdmissionReview bodies."""

from __future__ import annotations

import datetime as dt
import ssl
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from kueue_tas.api.kinds import KubeObject
from kueue_tas.capacity.creation_checks import TopologyView
from kueue_tas.runtime.certs import ServingCert

NOW = dt.datetime(2026, 11, 23, tzinfo=dt.UTC)
HOSTS = ["kueue-tas-webhook.kueue-tas-system.svc", "127.0.0.1"]


class FakeCaches:
    def __init__(self, views: Sequence[TopologyView], synced: bool = True) -> None:
        self.views = list(views)
        self.is_synced = synced

    def synced(self) -> bool:
        return self.is_synced

    def topologies_for(self, obj: KubeObject) -> Sequence[TopologyView]:
        return self.views

    def start(self) -> None:
        pass

    async def stop(self) -> None:
        pass


def write_cert(directory: Path, cert: ServingCert) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "tls.crt").write_bytes(cert.cert_pem)
    (directory / "tls.key").write_bytes(cert.key_pem)


def client_context(ca_pem: bytes) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cadata=ca_pem.decode())
    return ctx


def review(obj: dict[str, Any], operation: str = "CREATE", old: dict[str, Any] | None = None) -> dict[str, Any]:
    request = {"uid": "u-1", "kind": {"group": "batch", "version": "v1", "kind": obj["kind"]}, "operation": operation}
    request["object"] = obj
    if old is not None:
        request["oldObject"] = old
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}


def pod_review(labels: dict[str, str], gates: list[dict[str, str]] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": "x"}]}
    if gates is not None:
        spec["schedulingGates"] = gates
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"generateName": "train-", "namespace": "team-a", "labels": labels},
        "spec": spec,
    }
    body = review(pod)
    body["request"]["kind"] = {"group": "", "version": "v1", "kind": "Pod"}
    return body
