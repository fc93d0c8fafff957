"""Issue 12, deliverable 5: the admitter's writes under every API fault, through the real client.

The product's ``KubeAdmissionWriter`` talks to an in-memory API server through the request
layer of ``kubernetes_asyncio`` (``tests/faults.py``); one fault is injected per row, on one
write of the path: the owner Job's gate patch (one strategic merge, no read), the Workload annotation patch, the
check-entry server-side apply. Each row drives the controller until it is quiet (the watch
delivering what the server holds, time jumping by the delay asked for); at every step an entry
that is Ready on the server must have its capacity held. Each row asserts that the
write was retried (a 429 after its Retry-After) or explained (metric, Warning Event), and that
no half-applied state holds capacity: the workload ends Ready on the server with its
assignment and gate, and the capacity model holds exactly that workload's usage once.
"""

from __future__ import annotations

from typing import Any

import builders as mk
import pytest
from admission_harness import Harness, harness, wl
from faults import ALL_FAULTS, FakeApiServer, Fault, faulty_client, until_settled

from kueue_tas.api import constants as c
from kueue_tas.api.workload import Workload
from kueue_tas.controllers.check_entry_writes import KubeAdmissionWriter
from kueue_tas.topology.codec.codec import decode_assignment_annotation

JOB = "/apis/batch/v1/namespaces/ns/jobs/job"
WORKLOAD = "/apis/kueue.x-k8s.io/v1beta2/namespaces/ns/workloads/wl"

WRITES = [
    ("job-gate", "PATCH", r"/jobs/job$"),
    ("annotation", "PATCH", r"/workloads/wl$"),
    ("entry", "PATCH", r"/workloads/wl/status$"),
]
ROWS = [
    pytest.param(method, path, kind, after, retry_after, id=f"{write}-{fault}")
    for write, method, path in WRITES
    for fault, kind, after, retry_after in ALL_FAULTS
    if not (method == "GET" and after)  # a read applies nothing
]


def errors(h: Harness) -> float:
    return float(h.metrics.admissions_total.labels("error")._value.get())


async def settle(h: Harness, server: FakeApiServer) -> list[float]:
    """Reconcile until the controller asks for nothing more; returns the delays it asked for."""

    async def step() -> float | None:
        h.informers.workloads.handle_event("MODIFIED", server.get(WORKLOAD))  # the watch catches up
        delay = await h.admission.reconcile("ns/wl")
        # Before the watch shows it: an entry that is Ready on the server has its capacity held.
        stored = server.get(WORKLOAD) or {}
        if any(e.get("state") == "Ready" for e in stored.get("status", {}).get("admissionChecks", [])):
            assert h.capacity.holds("ns/wl"), "Ready on the server, but its capacity is free to give away"
        return delay

    return await until_settled(step, h.now)


@pytest.fixture
async def cluster() -> tuple[Harness, FakeApiServer, Any]:
    server = FakeApiServer()
    job = server.put(JOB, mk.job("job", 12, namespace="ns", uid="job-uid"))
    server.put(WORKLOAD, wl("wl", 12, owner=job))
    api, session = await faulty_client(server)
    h = harness(writer=KubeAdmissionWriter(api))
    h.informers.workloads.handle_event("ADDED", server.get(WORKLOAD))
    return h, server, session


async def test_without_faults_the_writes_land_in_order(cluster: tuple[Harness, FakeApiServer, Any]) -> None:
    h, server, session = cluster
    assert await settle(h, server) == []
    assert [(call.method, call.path.rsplit("/", 2)[-1]) for call in session.calls] == [
        ("PATCH", "job"),
        ("PATCH", "wl"),
        ("PATCH", "status"),
    ]
    assert_admitted_once(h, server)


@pytest.mark.parametrize(("method", "path", "kind", "after_apply", "retry_after"), ROWS)
async def test_every_fault_on_every_admission_write_ends_admitted_once(
    cluster: tuple[Harness, FakeApiServer, Any],
    method: str,
    path: str,
    kind: int | str,
    after_apply: bool,
    retry_after: float | None,
) -> None:
    h, server, session = cluster
    session.inject(Fault(method, path, kind, after_apply=after_apply, retry_after=retry_after))
    delays = await settle(h, server)
    assert any(call.fault == kind for call in session.calls), "the fault was hit"
    assert delays, "the failed write was tried again"
    if kind == 409:
        assert errors(h) == 0  # a stale object: decided again from fresh state, not an error
    else:
        assert errors(h) == 1
        assert ("Workload/wl", "Warning", "TopologyAssignmentFailed") in h.events.reasons()
    if kind == 429:
        assert delays[0] == retry_after, "Retry-After honoured"
    assert_admitted_once(h, server)


def assert_admitted_once(h: Harness, server: FakeApiServer) -> None:
    stored = server.get(WORKLOAD)
    job = server.get(JOB)
    assert stored is not None and job is not None
    entries = stored["status"]["admissionChecks"]
    assert [(e["name"], e["state"]) for e in entries] == [("tas", "Ready")]
    decoded = decode_assignment_annotation(stored["metadata"]["annotations"][c.TOPOLOGY_ASSIGNMENT_ANNOTATION])
    assert sum(ta.total for _, ta in decoded) == 12
    gates = job["spec"]["template"]["spec"].get("schedulingGates")
    assert gates == [{"name": c.SCHEDULING_GATE}], "one gate, never two"
    assert h.capacity.holds("ns/wl") and h.free_gpus() == 32 - 12, "its usage, held once"


async def test_the_assignment_write_removes_the_hold_reservation_and_wait_start() -> None:
    """Placed, a workload holds nothing a preemption or a reservation kept for it: the annotation
    write that records its assignment removes those records (a JSON merge patch's nulls)."""
    server = FakeApiServer()
    marks = {
        c.PREEMPTION_HOLD_ANNOTATION: "{}",
        c.RESERVATION_ANNOTATION: "{}",
        c.WAITING_SINCE_ANNOTATION: "2026-01-01T00:00:00Z",
        "team.example.com/keep": "yes",
    }
    stored = server.put(WORKLOAD, wl("wl", 12, workload_annotations=marks))
    api, _ = await faulty_client(server)
    try:
        written = await KubeAdmissionWriter(api).write_annotation(Workload.model_validate(stored), "text")
    finally:
        await api.close()
    after = (server.get(WORKLOAD) or {})["metadata"]["annotations"]
    assert after == {"team.example.com/keep": "yes", c.TOPOLOGY_ASSIGNMENT_ANNOTATION: "text"}
    assert written.metadata.annotations == after
