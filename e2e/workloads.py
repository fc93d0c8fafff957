"""Reading the Workloads of e2e tests: finding a Job's Workload, waiting for our check entry or
admission, and decoding the topology assignment it records."""

from __future__ import annotations

import json
from typing import Any

from e2e.kube import Kube, condition, condition_true, eventually
from e2e.stack import TasStack
from kueue_tas.api import constants as kc

ASSIGNMENT_ANNOTATION = kc.TOPOLOGY_ASSIGNMENT_ANNOTATION


async def workload_of(kube: Kube, namespace: str, owner_name: str, owner_kind: str = "Job") -> dict[str, Any] | None:
    for wl in await kube.workloads(namespace):
        for ref in wl["metadata"].get("ownerReferences") or []:
            if ref["kind"] == owner_kind and ref["name"] == owner_name:
                return dict(wl)
    return None


def check_entry(wl: dict[str, Any], check: str) -> dict[str, Any] | None:
    for entry in (wl.get("status") or {}).get("admissionChecks") or []:
        if entry.get("name") == check:
            return dict(entry)
    return None


def require_entry(wl: dict[str, Any], check: str) -> dict[str, Any]:
    """The Workload's entry for ``check``; fails the test when there is none."""
    entry = check_entry(wl, check)
    assert entry is not None, wl.get("status")
    return entry


async def wait_check(
    kube: Kube,
    stack: TasStack,
    owner_name: str,
    states: tuple[str, ...],
    *,
    owner_kind: str = "Job",
    timeout_s: float = 60,
) -> dict[str, Any]:
    """The Workload once our check entry is in one of ``states``."""

    async def reached() -> dict[str, Any] | None:
        wl = await workload_of(kube, stack.namespace, owner_name, owner_kind)
        entry = check_entry(wl, stack.check) if wl else None
        return wl if entry and entry.get("state") in states else None

    try:
        return await eventually(f"check {stack.check} of {owner_kind} {owner_name} in {states}", reached, timeout_s)
    except TimeoutError as e:
        raise TimeoutError(f"{e}\n{await workloads_summary(kube, stack.namespace)}") from None


async def workloads_summary(kube: Kube, namespace: str) -> str:
    """One line per Workload: conditions and check entries (for failure messages)."""
    lines = []
    for wl in await kube.workloads(namespace):
        conds = ",".join(
            f"{c['type']}={c['status']}({c.get('reason', '')})"
            for c in (wl.get("status") or {}).get("conditions") or []
        )
        checks = "; ".join(
            f"{e['name']}={e.get('state')}: {e.get('message', '')}"
            for e in (wl.get("status") or {}).get("admissionChecks") or []
        )
        lines.append(f"  {wl['metadata']['name']}: {conds} | {checks}")
    return "workloads:\n" + "\n".join(lines)


async def wait_admitted(
    kube: Kube, stack: TasStack, owner_name: str, *, owner_kind: str = "Job", timeout_s: float = 60
) -> dict[str, Any]:
    async def admitted() -> dict[str, Any] | None:
        wl = await workload_of(kube, stack.namespace, owner_name, owner_kind)
        return wl if wl and condition_true(wl, "Admitted") else None

    return await eventually(f"{owner_kind} {owner_name} Admitted", admitted, timeout_s)


async def wait_rejected(
    kube: Kube, stack: TasStack, owner_name: str, *, owner_kind: str = "Job", timeout_s: float = 60
) -> tuple[dict[str, Any], str]:
    """(Workload, message) once our check Rejected it. Kueue deactivates a rejected Workload at
    once and resets the entry to Pending ("... Previously: Rejected"), so either form counts;
    the message is the entry's, or the one Kueue copied into the Evicted condition."""

    async def rejected() -> tuple[dict[str, Any], str] | None:
        wl = await workload_of(kube, stack.namespace, owner_name, owner_kind)
        if wl is None:
            return None
        entry = check_entry(wl, stack.check) or {}
        if entry.get("state") == "Rejected":
            return wl, str(entry.get("message", ""))
        evicted = condition(wl, "Evicted") or {}
        if (
            wl["spec"].get("active") is False
            and evicted.get("reason") == "DeactivatedDueToAdmissionCheck"
            and "Previously: Rejected" in str(entry.get("message", ""))
        ):
            return wl, str(evicted.get("message", ""))
        return None

    return await eventually(f"check {stack.check} of {owner_kind} {owner_name} Rejected", rejected, timeout_s)


async def wait_workload_gone(
    kube: Kube, namespace: str, owner_name: str, owner_kind: str = "Job", timeout_s: float = 60
) -> None:
    async def gone() -> bool:
        return await workload_of(kube, namespace, owner_name, owner_kind) is None

    await eventually(f"Workload of {owner_kind} {owner_name} deleted", gone, timeout_s)


def pod_set_updates(entry: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """PodSet name -> its podSetUpdate in a check entry."""
    return {u["name"]: u for u in entry.get("podSetUpdates") or []}


async def events_for(kube: Kube, namespace: str, name: str, kind: str = "Workload") -> list[dict[str, Any]]:
    """events.k8s.io Events regarding one object."""
    res = await kube.custom.list_namespaced_custom_object("events.k8s.io", "v1", namespace, "events")
    return [
        e
        for e in res.get("items", [])
        if (e.get("regarding") or {}).get("name") == name and (e.get("regarding") or {}).get("kind") == kind
    ]


def assignment(wl: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """PodSet name -> its TopologyAssignment (v1beta2 shape) from our Workload annotation."""
    text = (wl["metadata"].get("annotations") or {}).get(ASSIGNMENT_ANNOTATION)
    if not text:
        return {}
    return {ps["name"]: ps["topologyAssignment"] for ps in json.loads(text)["podSets"]}


def domain_counts(wl: dict[str, Any], podset: str) -> dict[tuple[str, ...], int]:
    """Domain values -> count of one PodSet's assignment, decoded with the product's codec."""
    from kueue_tas.topology.codec.codec import decode_assignment_annotation

    text = wl["metadata"]["annotations"][ASSIGNMENT_ANNOTATION]
    for name, ta in decode_assignment_annotation(text):
        if name == podset:
            return {d.values: d.count for d in ta.domains}
    raise KeyError(podset)


def podset_levels(wl: dict[str, Any], podset: str) -> tuple[str, ...]:
    """The level keys of one PodSet's assignment (the keys the ungater puts in nodeSelectors)."""
    from kueue_tas.topology.codec.codec import decode_assignment_annotation

    for name, ta in decode_assignment_annotation(wl["metadata"]["annotations"][ASSIGNMENT_ANNOTATION]):
        if name == podset:
            return tuple(ta.levels)
    raise KeyError(podset)


def slots(wl: dict[str, Any], podset: str) -> list[tuple[str, ...]]:
    """The assignment's domains expanded in assignment order: rank i -> domain of slot i."""
    return [d for d, n in domain_counts(wl, podset).items() for _ in range(n)]


def racks_of(wl: dict[str, Any], podset: str, racks: dict[str, str]) -> dict[str, int]:
    """Rack -> pods of one PodSet's assignment (hostname-level domains mapped with ``racks``)."""
    out: dict[str, int] = {}
    for values, count in domain_counts(wl, podset).items():
        rack = racks[values[-1]]
        out[rack] = out.get(rack, 0) + count
    return out
