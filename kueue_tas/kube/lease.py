"""The ``coordination.k8s.io/v1`` Lease as leader election uses it: its record, its wire form
(times as MicroTime in UTC, written by us: ``kubernetes_asyncio`` would write local naive times
with a ``Z``) and the three calls on it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

from kubernetes_asyncio import client as k8s

from kueue_tas.kube.client import DEFAULT_TIMEOUT_SECONDS, call_json, raw_kwargs
from kueue_tas.kube.events import micro_time


@dataclass(frozen=True, slots=True)
class LeaseRecord:
    holder_identity: str | None = None
    lease_duration_seconds: int | None = None
    acquire_time: datetime | None = None
    renew_time: datetime | None = None
    lease_transitions: int = 0
    resource_version: str | None = None

    def expires_at(self, default_duration: float) -> datetime | None:
        if self.renew_time is None:
            return None
        duration = self.lease_duration_seconds if self.lease_duration_seconds is not None else default_duration
        return self.renew_time + timedelta(seconds=duration)


class LeaseApi(Protocol):
    """The three Lease calls the elector needs. Raise NotFound / Conflict (AlreadyExists on create)."""

    async def get(self, namespace: str, name: str) -> LeaseRecord: ...

    async def create(self, namespace: str, name: str, record: LeaseRecord) -> LeaseRecord: ...

    async def replace(self, namespace: str, name: str, record: LeaseRecord) -> LeaseRecord: ...


def parse_micro_time(value: Any) -> datetime | None:
    if not value:
        return None
    dt = value if isinstance(value, datetime) else datetime.fromisoformat(str(value))
    return dt.replace(tzinfo=UTC) if dt.tzinfo is None else dt.astimezone(UTC)


def lease_body(namespace: str, name: str, record: LeaseRecord) -> dict[str, Any]:
    """The Lease object to PUT/POST. Times as MicroTime (UTC, 6 fractional digits, 'Z')."""
    spec: dict[str, Any] = {"leaseTransitions": record.lease_transitions}
    if record.holder_identity:
        spec["holderIdentity"] = record.holder_identity
    if record.lease_duration_seconds is not None:
        spec["leaseDurationSeconds"] = record.lease_duration_seconds
    if record.acquire_time is not None:
        spec["acquireTime"] = micro_time(record.acquire_time)
    if record.renew_time is not None:
        spec["renewTime"] = micro_time(record.renew_time)
    metadata: dict[str, Any] = {"name": name, "namespace": namespace}
    if record.resource_version is not None:
        metadata["resourceVersion"] = record.resource_version
    return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": metadata, "spec": spec}


def parse_lease(obj: Mapping[str, Any]) -> LeaseRecord:
    spec = obj.get("spec") or {}
    meta = obj.get("metadata") or {}
    duration = spec.get("leaseDurationSeconds")
    return LeaseRecord(
        holder_identity=spec.get("holderIdentity") or None,
        lease_duration_seconds=int(duration) if duration is not None else None,
        acquire_time=parse_micro_time(spec.get("acquireTime")),
        renew_time=parse_micro_time(spec.get("renewTime")),
        lease_transitions=int(spec.get("leaseTransitions") or 0),
        resource_version=meta.get("resourceVersion"),
    )


class KubeLeaseApi:
    """:class:`LeaseApi` over the API server (raw JSON, our own time formatting)."""

    def __init__(self, api: k8s.ApiClient, timeout: float = DEFAULT_TIMEOUT_SECONDS) -> None:
        self._co = k8s.CoordinationV1Api(api)
        self._timeout = timeout

    async def get(self, namespace: str, name: str) -> LeaseRecord:
        return parse_lease(
            await call_json(self._co.read_namespaced_lease(name, namespace, **raw_kwargs(self._timeout)))
        )

    async def create(self, namespace: str, name: str, record: LeaseRecord) -> LeaseRecord:
        body: Any = lease_body(namespace, name, replace(record, resource_version=None))
        return parse_lease(
            await call_json(self._co.create_namespaced_lease(namespace, body, **raw_kwargs(self._timeout)))
        )

    async def replace(self, namespace: str, name: str, record: LeaseRecord) -> LeaseRecord:
        body: Any = lease_body(namespace, name, record)
        return parse_lease(
            await call_json(self._co.replace_namespaced_lease(name, namespace, body, **raw_kwargs(self._timeout)))
        )
