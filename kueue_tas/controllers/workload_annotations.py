"""Where a decision finds a workload-wide constraint: the Workload's own annotations, else those
of the Job or JobSet that owns it (read once per Workload, then remembered).

The constraint is written on the Job or JobSet itself (its metadata, not a pod template), so
Kueue does not copy it into the Workload; the controller reads the owner with one GET (the
same objects, and the same RBAC, as the scheduling gate it puts on their templates). A user
who writes the annotations on a Workload directly (or a tool that copies them) is read first,
with no GET. What was read is kept by Workload UID until the Workload is gone: the annotations
of a Job already admitted are not a request to move it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final, Protocol

from kubernetes_asyncio import client as k8s

from kueue_tas.api import constants as c
from kueue_tas.api.workload import Workload
from kueue_tas.kube.client import call_json, raw_kwargs
from kueue_tas.kube.errors import NotFound
from kueue_tas.topology.engine import workload_annotations

# Workloads whose owner's annotations are remembered at once (a bound, not a cache policy:
# entries go when their Workload is deleted; past the bound the oldest go first).
MAX_REMEMBERED: Final = 100_000


class OwnerReader(Protocol):
    async def annotations(self, namespace: str, kind: str, name: str) -> Mapping[str, str] | None:
        """The owner's annotations (None: it is gone). Raises on any other failure."""
        ...


class NoOwnerReader:
    """For callers with no API (tests, ``plan``): owners have no annotations."""

    async def annotations(self, namespace: str, kind: str, name: str) -> Mapping[str, str] | None:
        return None


class KubeOwnerReader:
    """:class:`OwnerReader` against the API server (batch/v1 Jobs and JobSets)."""

    def __init__(self, api: k8s.ApiClient) -> None:
        self.api = api

    async def annotations(self, namespace: str, kind: str, name: str) -> Mapping[str, str] | None:
        try:
            if kind == c.KIND_JOB:
                obj: Any = await call_json(
                    k8s.BatchV1Api(self.api).read_namespaced_job(name, namespace, **raw_kwargs(30))
                )
            else:
                obj = await call_json(
                    k8s.CustomObjectsApi(self.api).get_namespaced_custom_object(
                        c.JOBSET_GROUP, c.JOBSET_VERSION, namespace, "jobsets", name, **raw_kwargs(30)
                    )
                )
        except NotFound:
            return None
        annotations = (obj.get("metadata") or {}).get("annotations") if isinstance(obj, dict) else None
        return annotations if isinstance(annotations, dict) else {}


class WorkloadAnnotations:
    """The annotations a decision reads for the workload-wide constraint (only those keys)."""

    def __init__(self, reader: OwnerReader, prefix: str = c.DEFAULT_ANNOTATION_PREFIX) -> None:
        self._reader = reader
        self._prefix = prefix
        self._remembered: dict[str, Mapping[str, str]] = {}  # Workload UID -> the owner's

    async def of(self, wl: Workload) -> Mapping[str, str]:
        """Raises what the owner's read raised (the decision waits for a later try)."""
        own = workload_annotations(wl.metadata.annotations, self._prefix)
        if own:
            return own
        owner = wl.metadata.controller_owner()
        uid = wl.metadata.uid or ""
        if owner is None or owner.kind not in (c.KIND_JOB, c.KIND_JOBSET) or not uid:
            return {}
        if uid in self._remembered:
            return self._remembered[uid]
        found = await self._reader.annotations(wl.namespace or "default", owner.kind, owner.name)
        ours = workload_annotations(found or {}, self._prefix)
        if len(self._remembered) >= MAX_REMEMBERED:
            del self._remembered[next(iter(self._remembered))]
        self._remembered[uid] = ours
        return ours

    def forget(self, wl: Workload) -> None:
        self._remembered.pop(wl.metadata.uid or "", None)
