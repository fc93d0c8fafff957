"""Elastic workload slices in the admission reconciler: two 4-GPU hosts in one rack, Workloads of
slices that replace one another, and a slice replaced then deleted as Kueue finishes it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

import builders as mk
from admission_harness import CHECK, Harness, configure, wire
from vocab import GPU, HOST, RACK, UNCONSTRAINED

from kueue_tas.api import constants as c
from kueue_tas.topology.assignment import DomainAssignment, TopologyAssignment
from kueue_tas.topology.codec.codec import decode_assignment_annotation, encode_assignment_annotation
from kueue_tas.topology.engine.results import PodSetResult
from kueue_tas.topology.engine.snapshot import TopologySnapshot
from kueue_tas.topology.features import FeatureGates
from kueue_tas.topology.model import PodSetRequest

HOSTS = ("h1", "h2")  # one rack, 4 GPUs each
ALLOCATABLE = {"cpu": "16", "pods": "110", GPU: "4"}
ELASTIC_ON = FeatureGates({"ElasticJobsViaWorkloadSlicesWithTAS": True})


def on(*domains: tuple[str, int]) -> TopologyAssignment:
    return TopologyAssignment((HOST,), tuple(DomainAssignment((h,), n) for h, n in domains))


class RecordingSnapshot(TopologySnapshot):
    calls: ClassVar[list[dict[str, Any]]] = []

    def place(self, podsets: Sequence[PodSetRequest], **kwargs: Any) -> list[PodSetResult]:
        if not kwargs.get("allocatable_only"):
            RecordingSnapshot.calls.append(dict(kwargs))
        return super().place(podsets, **kwargs)


def workload(
    name: str,
    count: int,
    state: str = "Pending",
    *,
    assignment: TopologyAssignment | None = None,
    replaces: str | None = None,
    check: str = CHECK,
    finished: bool = False,
    rv: str = "1",
) -> dict[str, Any]:
    annotations = {}
    if assignment is not None:
        annotations[c.TOPOLOGY_ASSIGNMENT_ANNOTATION] = encode_assignment_annotation([("main", assignment)])
    if replaces is not None:
        annotations[c.KUEUE_SLICE_REPLACEMENT_ANNOTATION] = replaces
    conditions = [{"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved", "message": ""}]
    if finished:
        conditions.append({"type": "Finished", "status": "True", "reason": "WorkloadSliceReplaced", "message": ""})
    requests = {"requests": {GPU: "1"}}
    return {
        "metadata": {"name": name, "namespace": "ns", "uid": name, "resourceVersion": rv, "annotations": annotations},
        "spec": {
            "podSets": [
                {
                    "name": "main",
                    "count": count,
                    "template": {
                        "metadata": {"annotations": {UNCONSTRAINED: "true"}},
                        "spec": {"containers": [{"name": "c", "resources": requests}]},
                    },
                }
            ]
        },
        "status": {
            "conditions": [{**cond, "lastTransitionTime": "2026-01-01T00:00:00Z"} for cond in conditions],
            "admission": {
                "clusterQueue": "cq",
                "podSetAssignments": [{"name": "main", "flavors": {GPU: "gpu"}, "count": count}],
            },
            "admissionChecks": [
                {"name": check, "state": state, "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"}
            ],
        },
    }


def cluster(gates: FeatureGates) -> Harness:
    """Two 4-GPU hosts in one rack under the harness's Kueue configuration."""
    h = wire(gates, snapshot_class=RecordingSnapshot)
    for host in HOSTS:
        h.informers.nodes.handle_event(
            "ADDED",
            mk.node(host, labels={RACK: "r1", "pool": "gpu"}, allocatable=ALLOCATABLE, resource_version="1"),
        )
    configure(h.informers)
    return h


def add(h: Harness, obj: dict[str, Any], event: str = "ADDED") -> None:
    h.informers.workloads.handle_event(event, obj)


async def decide(h: Harness, name: str) -> tuple[str, TopologyAssignment | None]:
    """Decide ``ns/name``: (check state written, its assignment)."""
    RecordingSnapshot.calls.clear()
    h.admission._awaiting_write.clear()  # each test step stands for a fresh look
    checks, annotations = len(h.writes.checks), len(h.writes.annotations)
    await h.admission.reconcile(f"ns/{name}")
    [entry] = h.writes.checks[checks:]  # this decision's entry, and only it
    written = h.writes.annotations[annotations:]
    return entry["state"], dict(decode_assignment_annotation(written[-1]))["main"] if written else None


def used(h: Harness) -> dict[str, int]:
    """GPUs charged per host, over-commitment included (free capacity would floor at zero)."""
    snap = h.capacity.snapshot("gpu")
    assert snap is not None
    col = snap.capacity.columns[GPU]
    taken = {host: int(snap.capacity.tas[snap.tree.leaf_index_of((host,)), col]) for host in HOSTS}
    return {host: n for host, n in taken.items() if n}


OLD_ON_H1 = on(("h1", 4))


def pod(name: str, workload_uid: str, node: str | None, *, rv: str = "1") -> dict[str, Any]:
    """A pod of PodSet main labelled for ``workload_uid``: bound to ``node`` and pinned there by
    the ungater's nodeSelector, or gated (None)."""
    return mk.pod(
        name,
        node,
        namespace="ns",
        uid=f"uid-{name}",
        resource_version=rv,
        gpus=1,
        labels={c.WORKLOAD_LABEL: workload_uid, c.PODSET_LABEL: "main"},
        selector=None if node is None else {HOST: node},
        gates=[c.SCHEDULING_GATE] if node is None else [],
        phase="Running" if node is not None else "Pending",
    )


def with_annotations(obj: dict[str, Any], annotations: dict[str, str]) -> dict[str, Any]:
    meta = obj["metadata"]
    return {**obj, "metadata": {**meta, "annotations": {**meta["annotations"], **annotations}}}


def admitted_new_slice(k: Harness, assignment: TopologyAssignment, count: int = 4) -> dict[str, Any]:
    """``slice-2`` as Kueue shows it once our writes landed: Ready, with every annotation we wrote."""
    written = dict(k.writes.annotation_writes[-1])
    obj = workload("slice-2", count, "Ready", assignment=assignment, replaces="ns/slice-1", rv="2")
    return with_annotations(obj, written)


async def replaced_then_deleted(k: Harness, old_pods: dict[str, str]) -> dict[str, Any]:
    """Admit slice-1 (its pods ``old_pods``: name -> host, running), decide slice-2 through the
    admission reconciler, play back our writes, then Kueue finishes slice-1 and deletes it.
    Returns slice-2 as admitted."""
    old = workload("slice-1", len(old_pods), "Ready", assignment=on(*_counts(old_pods)))
    add(k, old)
    add(k, workload("other", 2, "Ready", assignment=on(("h1", 2))))
    for name, host in old_pods.items():
        k.informers.pods.handle_event("ADDED", pod(name, "slice-1", host))
    add(k, workload("slice-2", 4, replaces="ns/slice-1"))
    state, assignment = await decide(k, "slice-2")
    assert state == "Ready" and assignment == on(("h1", 2), ("h2", 2))
    new = admitted_new_slice(k, assignment)
    add(k, new, "MODIFIED")
    finished = workload("slice-1", len(old_pods), "Ready", assignment=on(*_counts(old_pods)), finished=True, rv="2")
    add(k, finished, "MODIFIED")
    k.informers.workloads.handle_event("DELETED", finished)
    return new


def _counts(pods: dict[str, str]) -> list[tuple[str, int]]:
    out: dict[str, int] = {}
    for host in pods.values():
        out[host] = out.get(host, 0) + 1
    return sorted(out.items())
