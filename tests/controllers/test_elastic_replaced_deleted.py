"""Elastic slices once the replaced slice's Workload is gone (issue 27, defect 4).

Kueue finishes a replaced slice and may delete it soon after (``objectRetentionPolicies``, or
by hand), while its pods keep running: the new slice's assignment includes them. Whether or
not the old Workload still exists (and after a restart that never saw it), those pods must
fill the new slice's slots once (capacity), count in its domains when its delta pods are
released (ungater), and be judged against its assignment (stray pods).

The rig: two 4-GPU hosts h1, h2 in rack r1 (``test_admission_elastic.cluster``); ``other``
holds 2 GPUs on h1. ``slice-1`` (2 pods, both running on h1) is replaced by ``slice-2``
(4 pods): the kept pods stay on h1, the 2 added go to h2, where h1 has no room left.
"""

from __future__ import annotations

from typing import Any

from admission_harness import Harness
from elastic_harness import (
    ELASTIC_ON,
    HOSTS,
    add,
    admitted_new_slice,
    cluster,
    decide,
    on,
    pod,
    replaced_then_deleted,
    with_annotations,
    workload,
)
from vocab import GPU, HOST

from kueue_tas.api import constants as c
from kueue_tas.api.workload import Workload
from kueue_tas.controllers.deps import ControllerDeps
from kueue_tas.controllers.stray.reconciler import StrayPods
from kueue_tas.controllers.ungate.reconciler import Ungater
from kueue_tas.runtime.config import Settings
from kueue_tas.topology.admitted.slice_replacement import MAX_KEPT_SLICES, kept_slices, kept_slices_value
from kueue_tas.topology.features import FeatureGates


def used(k: Harness) -> dict[str, int]:
    """GPUs charged per host, TAS and non-TAS, over-commitment included (no floor at zero)."""
    snap = k.capacity.snapshot("gpu")
    assert snap is not None
    cap, col = snap.capacity, snap.capacity.columns[GPU]
    taken = {}
    for host in HOSTS:
        leaf = snap.tree.leaf_index_of((host,))
        taken[host] = int(cap.tas[leaf, col]) + int(cap.alloc[leaf, col]) - int(cap.free[leaf, col])
    return {host: n for host, n in taken.items() if n}


def ungater(k: Harness) -> tuple[Ungater, dict[str, str]]:
    """An ungater with the elastic gates on; the pods it releases: name -> host."""
    released: dict[str, str] = {}

    class Patcher:
        async def patch(self, namespace: str, name: str, patch: dict[str, Any], resource_version: str) -> None:
            released[name] = patch["spec"]["nodeSelector"][HOST]

    u = Ungater(
        ControllerDeps(
            informers=k.informers,
            checks=k.checks,
            events=k.events,
            metrics=k.metrics,
            settings=Settings(leader_election=False, ungate_batch_period_seconds=0),
            gates=ELASTIC_ON,
        ),
        patcher=Patcher(),
    )
    return u, released


# --- our writes: the new slice names the pods it keeps -----------------------------------------


async def test_the_new_slice_records_whose_running_pods_its_assignment_includes() -> None:
    k = cluster(ELASTIC_ON)
    await replaced_then_deleted(k, {"o0": "h1", "o1": "h1"})
    written = k.writes.annotation_writes[-1]
    assert written[c.KEPT_SLICES_ANNOTATION] == "slice-1"
    assert c.TOPOLOGY_ASSIGNMENT_ANNOTATION in written


# --- capacity: the kept pods are charged once --------------------------------------------------


async def test_kept_pods_fill_the_new_slice_slots_after_the_old_workload_is_deleted() -> None:
    k = cluster(ELASTIC_ON)
    await replaced_then_deleted(k, {"o0": "h1", "o1": "h1"})
    # h1: the 2 kept pods (in slice-2's slots) + other's 2; h2: slice-2's 2 open slots.
    assert used(k) == {"h1": 4, "h2": 2}, "the kept pods were charged twice"
    assert k.capacity.slot_filled_by("ns/o0") == "ns/slice-2"
    assert k.capacity.slot_filled_by("ns/o1") == "ns/slice-2"


async def test_after_a_restart_that_never_saw_the_old_workload_the_kept_pods_are_charged_once() -> None:
    k = cluster(ELASTIC_ON)
    new = await replaced_then_deleted(k, {"o0": "h1", "o1": "h1"})
    fresh = cluster(ELASTIC_ON)  # a new leader: slice-1 is gone from its first list
    add(fresh, workload("other", 2, "Ready", assignment=on(("h1", 2))))
    for name in ("o0", "o1"):
        fresh.informers.pods.handle_event("ADDED", pod(name, "slice-1", "h1"))
    add(fresh, new)
    assert used(fresh) == {"h1": 4, "h2": 2}
    assert fresh.capacity.slot_filled_by("ns/o1") == "ns/slice-2"
    # The kept pods end: their slots open in slice-2, nothing else changes.
    fresh.informers.pods.handle_event("DELETED", pod("o0", "slice-1", "h1"))
    assert used(fresh) == {"h1": 4, "h2": 2}
    assert fresh.capacity.slot_filled_by("ns/o1") == "ns/slice-2"


# --- the ungater: the delta goes around the kept pods ------------------------------------------


async def test_delta_pods_go_where_the_kept_pods_are_not_after_the_old_workload_is_deleted() -> None:
    k = cluster(ELASTIC_ON)
    u, released = ungater(k)
    await replaced_then_deleted(k, {"o0": "h1", "o1": "h1"})
    for name in ("d0", "d1"):
        k.informers.pods.handle_event("ADDED", pod(name, "slice-2", None))
    await u.reconcile("ns/slice-2")
    assert released == {"d0": "h2", "d1": "h2"}, "the delta was sent where the kept pods already are"


async def test_a_gated_pod_labelled_for_the_deleted_slice_is_released_by_the_new_one() -> None:
    """The Job's template keeps the labels of the slice that started it (Kueue's "late pod
    references the original slice"): the new slice releases such a pod, counting the kept ones."""
    k = cluster(ELASTIC_ON)
    u, released = ungater(k)
    await replaced_then_deleted(k, {"o0": "h1", "o1": "h1"})
    while len(u.queue):
        u.queue.done(await u.queue.get())
    k.informers.pods.handle_event("ADDED", pod("late", "slice-1", None))
    assert len(u.queue) == 1, "the pod's event reached no Workload"
    key = await u.queue.get()
    assert key == "ns/slice-2"
    await u.reconcile(key)
    assert released == {"late": "h2"}


# --- stray pods: the replacing slice is judged -------------------------------------------------


async def test_the_replacing_slice_is_judged_once_the_old_workload_is_deleted() -> None:
    k = cluster(ELASTIC_ON)
    clock = [0.0]

    class Deleter:
        def __init__(self) -> None:
            self.deleted: list[str] = []

        async def delete(self, namespace: str, name: str, uid: str) -> None:
            self.deleted.append(name)

    deleter = Deleter()
    strays = StrayPods(
        ControllerDeps(
            informers=k.informers,
            checks=k.checks,
            events=k.events,
            metrics=k.metrics,
            settings=Settings(leader_election=False, stray_pod_grace_seconds=5),
            gates=ELASTIC_ON,
        ),
        capacity=k.capacity,
        deleter=deleter,
        clock=lambda: clock[0],
    )
    # A scale down: slice-1 ran o0, o1 on h1 and o2 on h2; slice-2 keeps 2 pods, on h1.
    old = workload("slice-1", 3, "Ready", assignment=on(("h1", 2), ("h2", 1)))
    add(k, old)
    for name, host in (("o0", "h1"), ("o1", "h1"), ("o2", "h2")):
        k.informers.pods.handle_event("ADDED", pod(name, "slice-1", host))
    add(k, workload("slice-2", 2, replaces="ns/slice-1"))
    state, assignment = await decide(k, "slice-2")
    assert (state, assignment) == ("Ready", on(("h1", 2)))
    add(k, admitted_new_slice(k, assignment, count=2), "MODIFIED")
    finished = workload("slice-1", 3, "Ready", assignment=on(("h1", 2), ("h2", 1)), finished=True, rv="2")
    add(k, finished, "MODIFIED")
    k.informers.workloads.handle_event("DELETED", finished)
    assert used(k) == {"h1": 2, "h2": 1}  # o2 still runs: charged on h2, filling no slot
    assert await strays.reconcile("ns/slice-2") == 5.0  # o2 is stray, within the grace
    clock[0] = 5.0
    await strays.reconcile("ns/slice-2")
    assert deleter.deleted == ["o2"], "the pod the new assignment has no slot for was left running"


async def test_a_kept_pod_event_queues_the_replacing_slice_for_judgement() -> None:
    k = cluster(ELASTIC_ON)
    strays = StrayPods(
        ControllerDeps(
            informers=k.informers,
            checks=k.checks,
            events=k.events,
            metrics=k.metrics,
            settings=Settings(leader_election=False),
            gates=ELASTIC_ON,
        ),
        capacity=k.capacity,
        deleter=None,
        clock=lambda: 0.0,
    )
    await replaced_then_deleted(k, {"o0": "h1", "o1": "h1"})
    while len(strays.queue):
        strays.queue.done(await strays.queue.get())
    k.informers.pods.handle_event("MODIFIED", pod("o0", "slice-1", "h2", rv="2"))
    assert len(strays.queue) == 1 and await strays.queue.get() == "ns/slice-2"


# --- the record itself ---------------------------------------------------------------------------


def test_a_chain_of_slices_records_every_earlier_slice_newest_first() -> None:
    second = Workload.model_validate(
        with_annotations(
            workload("slice-2", 4, "Ready", assignment=on(("h1", 4)), replaces="ns/slice-1"),
            {c.KEPT_SLICES_ANNOTATION: "slice-1"},
        )
    )
    assert kept_slices_value(second, "slice-2", ELASTIC_ON) == "slice-2,slice-1"
    # The record means nothing without the elastic gates, or on a Workload that replaces none.
    assert kept_slices(second, "slice-2", ELASTIC_ON) == ("slice-1",)
    assert kept_slices(second, "slice-2", FeatureGates()) == ()
    plain = Workload.model_validate(
        with_annotations(workload("x", 1, "Ready", assignment=on(("h1", 1))), {c.KEPT_SLICES_ANNOTATION: "slice-1"})
    )
    assert kept_slices(plain, "x", ELASTIC_ON) == ()
    # Bounded, however long the chain: the record stays small.
    long = Workload.model_validate(
        with_annotations(
            workload("slice-99", 1, "Ready", assignment=on(("h1", 1)), replaces="ns/slice-98"),
            {c.KEPT_SLICES_ANNOTATION: ",".join(f"s{i}" for i in range(40))},
        )
    )
    assert len(kept_slices_value(long, "slice-99", ELASTIC_ON).split(",")) == MAX_KEPT_SLICES


async def test_with_the_elastic_gates_off_the_record_claims_no_pod() -> None:
    k = cluster(ELASTIC_ON)
    new = await replaced_then_deleted(k, {"o0": "h1", "o1": "h1"})
    off = cluster(FeatureGates())
    add(off, workload("other", 2, "Ready", assignment=on(("h1", 2))))
    for name in ("o0", "o1"):
        off.informers.pods.handle_event("ADDED", pod(name, "slice-1", "h1"))
    add(off, new)
    assert off.capacity.slot_filled_by("ns/o0") is None  # an ordinary pod: charged on its node
    assert used(off) == {"h1": 6, "h2": 2}
