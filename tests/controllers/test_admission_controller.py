"""Workload admission without a cluster: shared informers fed by hand, writes and Events
recorded by injected fakes, time from an injected clock.

Covers the race the e2e suite found: our annotation write comes back through the informer
before our Ready entry does; the workload still looks Pending, and deciding it again would
count its own assumed capacity against it (and overwrite Ready with Retry).
"""

from __future__ import annotations

from typing import Any

import builders as mk
import pytest
from admission_harness import ALLOCATABLE, CHECK, Harness, harness, wire, wl, workload
from vocab import RACK, REQUIRED

from kueue_tas.api import constants as c
from kueue_tas.controllers.admission.reconciler import WRITE_OBSERVE_TIMEOUT_SECONDS
from kueue_tas.kube.errors import Conflict


async def test_stale_pending_after_our_annotation_write_is_not_decided_again(h: Harness) -> None:
    h.informers.workloads.handle_event("ADDED", workload())
    assert h.admission.queue.num_waiting() + len(h.admission.queue) == 1
    assert await h.admission.reconcile("ns/wl") is None
    assert [e["state"] for e in h.writes.checks] == ["Ready"]
    assert h.events.reasons() == [("Workload/wl", "Normal", "TopologyAssigned")] and h.decided == [1]
    # The annotation write comes back first: still Pending in the cache.
    h.informers.workloads.handle_event(
        "MODIFIED",
        workload(
            workload_annotations={c.TOPOLOGY_ASSIGNMENT_ANNOTATION: h.writes.annotations[0]}, resource_version="6"
        ),
    )
    delay = await h.admission.reconcile("ns/wl")
    assert delay is not None and 0 < delay <= WRITE_OBSERVE_TIMEOUT_SECONDS
    assert [e["state"] for e in h.writes.checks] == ["Ready"], "decided twice on a stale view"
    # Then our Ready entry: the assumption becomes committed usage; one rack is full.
    h.informers.workloads.handle_event(
        "MODIFIED",
        workload(
            check_state="Ready",
            workload_annotations={c.TOPOLOGY_ASSIGNMENT_ANNOTATION: h.writes.annotations[0]},
            resource_version="7",
        ),
    )
    assert await h.admission.reconcile("ns/wl") is None
    assert h.capacity.holds("ns/wl")
    assert h.free_gpus() == 32 - 8


async def test_kueue_resetting_the_entry_to_pending_is_decided_again_from_scratch(h: Harness) -> None:
    h.informers.workloads.handle_event("ADDED", workload())
    await h.admission.reconcile("ns/wl")
    ann = {c.TOPOLOGY_ASSIGNMENT_ANNOTATION: h.writes.annotations[0]}
    h.informers.workloads.handle_event(
        "MODIFIED", workload(check_state="Ready", workload_annotations=ann, resource_version="6")
    )
    # Evicted and requeued by Kueue: the entry is Pending again; the old assignment is not trusted
    # and this workload's own earlier capacity must not block it.
    h.informers.workloads.handle_event(
        "MODIFIED", workload(check_state="Pending", workload_annotations=ann, resource_version="8")
    )
    assert await h.admission.reconcile("ns/wl") is None
    assert [e["state"] for e in h.writes.checks] == ["Ready", "Ready"]


async def test_a_write_that_never_comes_back_is_retried_after_the_timeout(h: Harness) -> None:
    h.informers.workloads.handle_event("ADDED", workload())
    await h.admission.reconcile("ns/wl")
    h.now[0] += WRITE_OBSERVE_TIMEOUT_SECONDS - 1
    assert await h.admission.reconcile("ns/wl") == pytest.approx(1.0)
    h.now[0] += 1.5  # the deadline has passed
    assert await h.admission.reconcile("ns/wl") is None
    assert [e["state"] for e in h.writes.checks] == ["Ready", "Ready"]


async def test_a_conflicting_write_drops_the_assumption_and_asks_again(h: Harness) -> None:
    h.informers.workloads.handle_event("ADDED", workload())
    h.writes.fail_check = Conflict(409, "Conflict", "the object has been modified")
    assert await h.admission.reconcile("ns/wl") == 0.5
    assert not h.capacity.holds("ns/wl") and h.writes.checks == []
    assert await h.admission.reconcile("ns/wl") is None
    assert [e["state"] for e in h.writes.checks] == ["Ready"]


async def test_workloads_not_pending_on_our_check_are_left_alone(h: Harness) -> None:
    h.informers.workloads.handle_event("ADDED", workload(check_state="Ready"))
    assert len(h.admission.queue) == 0
    assert await h.admission.reconcile("ns/wl") is None
    assert h.writes.checks == [] and h.events.seen == []


async def test_a_configuration_change_looks_at_every_workload_again() -> None:
    h = wire()
    h.informers.workloads.handle_event("ADDED", workload())
    assert len(h.admission.queue) == 0  # our check is not known yet
    h.informers.checks.handle_event("ADDED", mk.admission_check(CHECK, None, c.CONTROLLER_NAME, resource_version="1"))
    assert len(h.admission.queue) == 1


def retries(h: Harness) -> dict[str, float]:
    return {
        reason: float(h.metrics.retries_total.labels(reason)._value.get())
        for reason in ("no_topology", "does_not_fit", "preferred_wait")
    }


def ten_gpus(name: str, **kw: Any) -> dict[str, Any]:
    """Like the harness's ``wl``, under another name, with ten one-GPU pods (a rack holds 16)."""
    return mk.workload(
        name,
        10,
        {REQUIRED: RACK},
        namespace="ns",
        uid=f"uid-{name}",
        resource_version=kw.pop("resource_version", "5"),
        queue=None,
        admitted_flavor="gpu",
        check=CHECK,
        check_state=kw.pop("check_state", "Pending"),
        conditions=[mk.condition("QuotaReserved", reason="QuotaReserved", message="")],
        **kw,
    )


async def test_retries_are_counted_by_reason() -> None:
    """``kueue_tas_retries_total{reason}`` (the dashboard's "retries by reason"): a workload that
    fits an empty rack but neither rack as used now is a does_not_fit, and only that."""
    h = harness()
    for name in ("a", "b", "c"):
        h.informers.workloads.handle_event("ADDED", ten_gpus(name))
        await h.admission.reconcile(f"ns/{name}")
        if name != "c":  # Ready comes back: 10 of a rack's 16 GPUs taken, one rack each
            ann = {c.TOPOLOGY_ASSIGNMENT_ANNOTATION: h.writes.annotations[-1]}
            h.informers.workloads.handle_event(
                "MODIFIED", ten_gpus(name, check_state="Ready", workload_annotations=ann, resource_version="7")
            )
            await h.admission.reconcile(f"ns/{name}")
    assert [e["state"] for e in h.writes.checks] == ["Ready", "Ready", "Retry"]
    assert retries(h) == {"no_topology": 0, "does_not_fit": 1, "preferred_wait": 0}


@pytest.mark.parametrize("down", ["cordoned", "not-ready"])
async def test_a_workload_is_not_rejected_while_the_nodes_it_needs_are_only_out_of_service(down: str) -> None:
    """Three of the four hosts are cordoned (or NotReady): a 12-pod rack request fits nowhere
    now, but would once they serve again. It waits (Retry) with that said, it is not Rejected
    (Kueue would deactivate it); with every node serving and still too small, it is (DST seed
    3301264's history: a workload Rejected while every node but one was cordoned)."""
    h = harness()
    for name, rack in (("h1", "r1"), ("h2", "r1"), ("h3", "r2")):
        node = mk.node(
            name,
            labels={RACK: rack, "pool": "gpu"},
            allocatable=ALLOCATABLE,
            unschedulable=down == "cordoned",
            ready=down != "not-ready",
            resource_version="2",
        )
        h.informers.nodes.handle_event("MODIFIED", node)
    h.add_workload(wl("big", 12))
    await h.admission.reconcile("ns/big")
    entry = h.writes.checks[-1]
    assert entry["state"] == "Retry", entry
    assert entry["message"].endswith("it fits only once nodes cordoned or NotReady now serve again"), entry
    h.add_workload(wl("huge", 17))  # more than a rack of 16 GPUs, whoever serves
    await h.admission.reconcile("ns/huge")
    assert h.writes.checks[-1]["state"] == "Rejected", h.writes.checks[-1]
