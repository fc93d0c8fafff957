"""The ungater's one write: a pod's release into its domain (our gate removed, the domain's
nodeSelector added, in one patch guarded by the pod's resourceVersion)."""

from __future__ import annotations

from typing import Any, Protocol

from kubernetes_asyncio import client as k8s

from kueue_tas.kube.client import patch_pod


def ungate_patch(gate: str, selector: dict[str, str]) -> dict[str, Any]:
    """Strategic merge patch: remove only ``gate`` (schedulingGates merge on name) and add the selector."""
    return {"spec": {"schedulingGates": [{"$patch": "delete", "name": gate}], "nodeSelector": selector}}


class PodPatcher(Protocol):
    async def patch(self, namespace: str, name: str, patch: dict[str, Any], resource_version: str) -> None: ...


class KubePodPatcher:
    """:class:`PodPatcher` against the API server: strategic merge, guarded by resourceVersion."""

    def __init__(self, api: k8s.ApiClient) -> None:
        self.api = api

    async def patch(self, namespace: str, name: str, patch: dict[str, Any], resource_version: str) -> None:
        await patch_pod(
            self.api,
            namespace=namespace,
            name=name,
            patch=patch,
            resource_version=resource_version,
            strategy="strategic",
        )
