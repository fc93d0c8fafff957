"""What the invariant checker reads from a pod or a Workload (plain JSON dicts in, small frozen
views out): where a pod is or is pinned, whether it is gated, live or holding its node, what it
requests; whether a Workload's assignment is trusted, its decoded assignment and per-pod requests,
and our check entry."""

from __future__ import annotations

import contextlib
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

from kueue_tas.api import constants as kc
from kueue_tas.api.quantity import QuantityError
from kueue_tas.api.resources import pod_requests
from kueue_tas.topology.assignment import TopologyAssignment
from kueue_tas.topology.codec.codec import decode_assignment_annotation

Obj = Mapping[str, Any]


@dataclass(frozen=True)
class PodView:
    key: str  # namespace/name
    workload: str | None  # our workload label: the Workload's uid
    podset: str | None
    node: str | None
    gated: bool
    selector: Mapping[str, str]
    terminal: bool
    terminating: bool
    requests: Mapping[str, int]

    @property
    def live(self) -> bool:
        return not self.terminal and not self.terminating


@dataclass(frozen=True)
class WorkloadView:
    key: str
    trusted: bool
    annotation: str | None
    assignments: Mapping[str, TopologyAssignment]
    per_pod: Mapping[str, Mapping[str, int]]  # PodSet -> requests of one pod (``pods: 1`` included)
    entry_state: str | None
    entry_message: str
    finished: bool
    admitted: bool


def object_labels(obj: Obj) -> Mapping[str, str]:
    return (obj.get("metadata") or {}).get("labels") or {}


def object_key(obj: Obj) -> str:
    meta = obj.get("metadata") or {}
    ns = meta.get("namespace")
    return f"{ns}/{meta.get('name')}" if ns else str(meta.get("name"))


def object_uid(obj: Obj) -> str:
    meta = obj.get("metadata") or {}
    return str(meta.get("uid") or object_key(obj))


def _with_pod(requests: Mapping[str, int]) -> dict[str, int]:
    return {**requests, "pods": requests.get("pods", 0) + 1}


def pod_view(obj: Obj, scheduling_gate: str = kc.SCHEDULING_GATE) -> PodView:
    spec = obj.get("spec") or {}
    labels = object_labels(obj)
    try:
        requests = _with_pod(pod_requests(spec))
    except QuantityError:
        requests = {"pods": 1}
    return PodView(
        key=object_key(obj),
        workload=labels.get(kc.WORKLOAD_LABEL),
        podset=labels.get(kc.PODSET_LABEL),
        node=spec.get("nodeName") or None,
        gated=any(g.get("name") == scheduling_gate for g in spec.get("schedulingGates") or []),
        selector=dict(spec.get("nodeSelector") or {}),
        terminal=(obj.get("status") or {}).get("phase") in ("Succeeded", "Failed"),
        terminating=bool((obj.get("metadata") or {}).get("deletionTimestamp")),
        requests=requests,
    )


def _condition_true(obj: Obj, ctype: str) -> bool:
    return any(
        c.get("type") == ctype and c.get("status") == "True" for c in (obj.get("status") or {}).get("conditions") or []
    )


def workload_view(obj: Obj, checks: Collection[str]) -> WorkloadView:
    status = obj.get("status") or {}
    entry = next((e for e in status.get("admissionChecks") or [] if e.get("name") in checks), None)
    annotation = ((obj.get("metadata") or {}).get("annotations") or {}).get(kc.TOPOLOGY_ASSIGNMENT_ANNOTATION)
    assignments: dict[str, TopologyAssignment] = {}
    if annotation:
        with contextlib.suppress(ValueError):
            assignments = dict(decode_assignment_annotation(annotation))
    per_pod: dict[str, dict[str, int]] = {}
    for ps in (obj.get("spec") or {}).get("podSets") or []:
        with contextlib.suppress(QuantityError):
            per_pod[str(ps.get("name"))] = _with_pod(pod_requests((ps.get("template") or {}).get("spec") or {}))
    finished = _condition_true(obj, kc.CONDITION_FINISHED)
    ready = entry is not None and entry.get("state") == kc.CHECK_STATE_READY
    return WorkloadView(
        key=object_key(obj),
        trusted=bool(ready and annotation and not finished),
        annotation=annotation,
        assignments=assignments,
        per_pod=per_pod,
        entry_state=None if entry is None else str(entry.get("state")),
        entry_message=str((entry or {}).get("message") or ""),
        finished=finished,
        admitted=_condition_true(obj, kc.CONDITION_ADMITTED),
    )
