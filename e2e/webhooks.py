"""kueue-tas's webhook configurations (manifests/base) on the local cluster.

The manifests name the Service of a real cluster; here the replicas listen on 127.0.0.1, so
each webhook's ``clientConfig.service`` becomes a URL. Replicas of one group share one port
(the server binds with SO_REUSEPORT), so one URL reaches whichever replica is alive.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

import yaml
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from e2e.controller import REPO_ROOT
from e2e.kube import as_body

CONFIGURATION = "kueue-tas"
POD_GATE_FILE = REPO_ROOT / "manifests" / "base" / "pod-gate-webhook.yaml"
WEBHOOK_HOST = "127.0.0.1"


def localized(path: Path, port: int) -> dict[str, Any]:
    """The configuration in ``path`` with its Service reference turned into this machine's URL."""
    doc = yaml.safe_load(path.read_text())
    for hook in doc["webhooks"]:
        svc = hook["clientConfig"]["service"]
        hook["clientConfig"] = {"url": f"https://{WEBHOOK_HOST}:{port}{svc['path']}"}
    return dict(doc)


def webhook_env(port: int) -> dict[str, str]:
    """What a controller process needs to serve the webhooks on ``port`` with a certificate for
    this machine (issued into the Secret, its CA published into the configurations)."""
    return {"KUEUE_TAS_WEBHOOK_HOSTS": WEBHOOK_HOST, "KUEUE_TAS_WEBHOOK_BIND": f"{WEBHOOK_HOST}:{port}"}


async def install_pod_gate(api: client.ApiClient, port: int) -> None:
    """(Re)create the pod webhook's configuration pointing at ``port``."""
    reg = client.AdmissionregistrationV1Api(api)
    await remove_pod_gate(api)
    await reg.create_mutating_webhook_configuration(as_body(localized(POD_GATE_FILE, port)))


async def remove_pod_gate(api: client.ApiClient) -> None:
    reg = client.AdmissionregistrationV1Api(api)
    with contextlib.suppress(ApiException):
        await reg.delete_mutating_webhook_configuration(CONFIGURATION)
