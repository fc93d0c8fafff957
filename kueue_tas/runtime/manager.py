"""The controller manager: owns the API client and the shared informers."""

from __future__ import annotations

from kubernetes_asyncio import client as k8s

from kueue_tas.kube.client import ClientConfigError, make_api_client
from kueue_tas.runtime.config import ConfigError, Settings
from kueue_tas.runtime.logging import get_logger

log = get_logger(__name__)


def pool_size(settings: Settings, *, watches: int = 8, margin: int = 8) -> int:
    """Every open watch pins one HTTP/1.1 connection; patches run ``patch_concurrency`` wide."""
    return watches + settings.patch_concurrency + margin


async def connect(settings: Settings, *, watches: int = 8, margin: int = 8) -> k8s.ApiClient:
    """An ApiClient from ``settings.kubeconfig``, else in-cluster, else ``$KUBECONFIG`` /
    ``~/.kube/config``; a bad configuration is a ConfigError. Close it with ``await api.close()``."""
    try:
        api, source = await make_api_client(
            settings.kubeconfig, pool=pool_size(settings, watches=watches, margin=margin)
        )
    except ClientConfigError as exc:
        raise ConfigError(str(exc)) from exc
    log.info(
        "api_client_ready", source=source, host=api.configuration.host, pool=api.configuration.connection_pool_maxsize
    )
    return api
