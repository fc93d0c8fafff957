"""Shared by the admission e2e tests (``test_admission_decisions``, ``test_admission_capacity``):
the small pool each test gets, its check entry, Events, and hosts of an assignment."""

from __future__ import annotations

from collections import Counter
from typing import Any

from e2e import stack as st
from e2e import workloads
from e2e.kube import Kube, eventually
from e2e.nodes import NodePool

DECIDED = ("Ready", "Retry", "Rejected")
HOST_GPUS = 8


def small_pool(unique: str, prefix: str = "a") -> NodePool:
    return NodePool(name=f"{prefix}{unique}", blocks=1, racks_per_block=2, hosts_per_rack=2)


def entry_of(wl: dict[str, Any], s: st.TasStack) -> dict[str, Any]:
    return workloads.require_entry(wl, s.check)


async def events_of(kube: Kube, wl: dict[str, Any], reason: str) -> list[dict[str, Any]]:
    return [
        e
        for e in await workloads.events_for(kube, wl["metadata"]["namespace"], wl["metadata"]["name"])
        if e.get("reason") == reason
    ]


async def wait_event(kube: Kube, wl: dict[str, Any], reason: str) -> dict[str, Any]:
    async def found() -> dict[str, Any] | None:
        events = await events_of(kube, wl, reason)
        return events[0] if events else None

    return await eventually(f"{reason} Event on Workload {wl['metadata']['name']}", found, 20)


def hosts(wl: dict[str, Any], podset: str = "main") -> Counter[str]:
    return Counter({values[-1]: n for values, n in workloads.domain_counts(wl, podset).items()})
