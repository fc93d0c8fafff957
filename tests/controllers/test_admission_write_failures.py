"""Issue 12, defect 8: every way an admission write can fail, without a cluster.

Each failure counts ``admissions_total{outcome="error"}``, leaves a Warning Event and asks for
another look after a backoff. The capacity a Ready decision assumed is dropped, unless the
write that failed was our Ready entry and it may have landed: then it stays held until a
re-read of the Workload says whether it did, so nothing is ever given twice.
"""

from __future__ import annotations

from typing import Any

import pytest
from admission_harness import Harness, Writes, harness, wl

from kueue_tas.api import constants as c
from kueue_tas.api.workload import Workload
from kueue_tas.controllers.admission.reconciler import (
    WRITE_OBSERVE_TIMEOUT_SECONDS,
    settle_seconds,
)
from kueue_tas.controllers.check_entry_writes import GateInjectionError
from kueue_tas.controllers.timings import UNKNOWN_WRITE_SETTLE_SECONDS, WRITE_RETRY_MAX_SECONDS
from kueue_tas.kube.errors import Forbidden, NotFound, ServerError, TooManyRequests, TransportError
from kueue_tas.kube.events import ObjectRef


class FailingWrites(Writes):
    """``fail_at``: write kind -> error raised on its next call; ``landed``: apply the write
    first (the response is what got lost); ``read``: what a re-read returns or raises."""

    def __init__(self) -> None:
        super().__init__()
        self.fail_at: dict[str, BaseException] = {}
        self.landed: set[str] = set()
        self.read: Workload | BaseException | str | None = "same"
        self.reads = 0

    def _maybe_fail(self, kind: str) -> None:
        exc = self.fail_at.pop(kind, None)
        if exc is not None:
            raise exc

    async def inject_gates(self, workload: Workload, podsets: set[str], gate: str) -> None:
        self._maybe_fail("gates")
        await super().inject_gates(workload, podsets, gate)

    async def write_annotation(self, workload: Workload, text: str) -> Workload:
        if "annotation" not in self.landed:
            self._maybe_fail("annotation")
        written = await super().write_annotation(workload, text)
        self._maybe_fail("annotation")
        return written

    async def write_check(self, workload: Workload, entry: dict[str, Any]) -> None:
        if "check" not in self.landed:
            self._maybe_fail("check")
        self.checks.append(entry)
        self._maybe_fail("check")

    async def read_workload(self, workload: Workload) -> Workload | None:
        self.reads += 1
        if isinstance(self.read, BaseException):
            raise self.read
        return workload if self.read == "same" else self.read  # type: ignore[return-value]


@pytest.fixture
def h() -> Harness:
    return harness(writer=FailingWrites())


def writes(h: Harness) -> FailingWrites:
    assert isinstance(h.writes, FailingWrites)
    return h.writes


def errors(h: Harness) -> float:
    return float(h.metrics.admissions_total.labels("error")._value.get())


def add(h: Harness, name: str, count: int = 12, event: str = "ADDED", **kw: Any) -> None:
    h.informers.workloads.handle_event(event, wl(name, count, **kw))


def states(h: Harness) -> list[str]:
    return [e["state"] for e in h.writes.checks]


UNKNOWN = [
    TransportError("read timed out"),
    TimeoutError(),
    ConnectionResetError("reset by peer"),
    ServerError(500, "InternalError", "etcdserver: request timed out"),
    ServerError(504, "Timeout", "request did not complete within 60s"),
]
UNKNOWN_IDS = ["transport", "timeout", "reset", "500", "504"]


@pytest.mark.parametrize("error", UNKNOWN, ids=UNKNOWN_IDS)
async def test_an_entry_write_with_no_answer_is_counted_evented_and_keeps_its_capacity(
    h: Harness, error: Exception
) -> None:
    add(h, "a")
    writes(h).fail_at["check"] = error
    assert await h.admission.reconcile("ns/a") == settle_seconds(error)
    assert errors(h) == 1
    assert h.events.reasons() == [("Workload/a", "Warning", "TopologyAssignmentFailed")]
    assert h.capacity.holds("ns/a") and h.free_gpus() == 32 - 12


@pytest.mark.parametrize("error", UNKNOWN, ids=UNKNOWN_IDS)
async def test_a_ready_entry_that_landed_unseen_is_never_double_booked(h: Harness, error: Exception) -> None:
    add(h, "a")
    writes(h).fail_at["check"] = error
    writes(h).landed.add("check")
    await h.admission.reconcile("ns/a")
    # Two more workloads of a rack each: only one rack is left.
    add(h, "b")
    add(h, "c")
    assert await h.admission.reconcile("ns/b") is None
    assert await h.admission.reconcile("ns/c") is None
    assert states(h) == ["Ready", "Ready", "Retry"], "a's rack is not given away while a may be Ready"


async def test_after_the_settle_time_a_reread_showing_ready_keeps_the_capacity(h: Harness) -> None:
    add(h, "a")
    writes(h).fail_at["check"] = TransportError("timeout")
    writes(h).landed.add("check")
    await h.admission.reconcile("ns/a")
    assert await h.admission.reconcile("ns/a") == pytest.approx(UNKNOWN_WRITE_SETTLE_SECONDS)
    assert writes(h).reads == 0, "not re-read while the apiserver may still apply it"
    h.now[0] += UNKNOWN_WRITE_SETTLE_SECONDS
    writes(h).read = Workload.model_validate(wl("a", check_state="Ready", resource_version="9"))
    assert await h.admission.reconcile("ns/a") == WRITE_OBSERVE_TIMEOUT_SECONDS
    assert writes(h).reads == 1 and states(h) == ["Ready"] and h.capacity.holds("ns/a")


async def test_after_the_settle_time_a_reread_showing_pending_decides_again(h: Harness) -> None:
    add(h, "a")
    writes(h).fail_at["check"] = TransportError("connection refused")
    await h.admission.reconcile("ns/a")
    h.now[0] += UNKNOWN_WRITE_SETTLE_SECONDS
    fresh = Workload.model_validate(wl("a", resource_version="8"))
    writes(h).read = fresh
    assert await h.admission.reconcile("ns/a") is None
    assert states(h) == ["Ready"] and writes(h).reads == 1
    assert h.capacity.holds("ns/a") and h.free_gpus() == 32 - 12, "held once, not twice"
    assert errors(h) == 1 and float(h.metrics.admissions_total.labels("ready")._value.get()) == 1


async def test_a_failing_reread_keeps_the_capacity_and_backs_off(h: Harness) -> None:
    add(h, "a")
    writes(h).fail_at["check"] = TransportError("timeout")
    await h.admission.reconcile("ns/a")
    h.now[0] += UNKNOWN_WRITE_SETTLE_SECONDS
    writes(h).read = TransportError("no route to host")
    delays = [await h.admission.reconcile("ns/a") for _ in range(8)]
    assert delays == [1.0, 2.0, 4.0, 8.0, 16.0, 32.0, WRITE_RETRY_MAX_SECONDS, WRITE_RETRY_MAX_SECONDS]
    assert h.capacity.holds("ns/a") and states(h) == []


async def test_a_reread_finding_the_workload_deleted_releases_the_capacity(h: Harness) -> None:
    add(h, "a")
    writes(h).fail_at["check"] = TransportError("timeout")
    await h.admission.reconcile("ns/a")
    h.now[0] += UNKNOWN_WRITE_SETTLE_SECONDS
    writes(h).read = None
    assert await h.admission.reconcile("ns/a") is None
    assert not h.capacity.holds("ns/a") and h.free_gpus() == 32


@pytest.mark.parametrize(
    ("kind", "error"),
    [
        ("gates", TransportError("timeout")),
        ("gates", GateInjectionError("Job j is not suspended; its pod template cannot take the gate")),
        ("annotation", TransportError("timeout")),
        ("annotation", TimeoutError()),
        ("annotation", Forbidden(403, "Forbidden", "workloads is forbidden")),
        ("annotation", NotFound(404, "NotFound", 'workloads "a" not found')),
        ("annotation", ServerError(500, "InternalError", "boom")),
        ("check", Forbidden(403, "Forbidden", "cannot patch workloads/status")),
        ("check", NotFound(404, "NotFound", "gone")),
        # Refused in admission before storage: known not written (chaos seeds 7 and 1141).
        ("check", ServerError(500, "InternalError", 'failed calling webhook "vworkload.kb.io": connection refused')),
    ],
    ids=lambda v: v if isinstance(v, str) else type(v).__name__,
)
async def test_a_failure_that_cannot_make_the_workload_ready_drops_the_capacity(
    h: Harness, kind: str, error: Exception
) -> None:
    add(h, "a")
    writes(h).fail_at[kind] = error
    assert await h.admission.reconcile("ns/a") == 1.0
    assert errors(h) == 1 and h.events.reasons() == [("Workload/a", "Warning", "TopologyAssignmentFailed")]
    assert not h.capacity.holds("ns/a") and h.free_gpus() == 32
    assert await h.admission.reconcile("ns/a") is None, "tried again and written"
    assert states(h)[-1] == "Ready"


@pytest.mark.parametrize(("retry_after", "expected"), [(7.0, 7.0), (None, 1.0), (3600.0, WRITE_RETRY_MAX_SECONDS)])
async def test_throttled_writes_honour_retry_after_with_a_cap(
    h: Harness, retry_after: float | None, expected: float
) -> None:
    add(h, "a")
    writes(h).fail_at["annotation"] = TooManyRequests(429, "TooManyRequests", "slow down", retry_after=retry_after)
    assert await h.admission.reconcile("ns/a") == expected
    assert errors(h) == 1 and not h.capacity.holds("ns/a")


async def test_repeated_failures_back_off_and_success_resets(h: Harness) -> None:
    add(h, "a")
    delays = []
    for _ in range(3):
        writes(h).fail_at["annotation"] = ServerError(503, "ServiceUnavailable", "")
        delays.append(await h.admission.reconcile("ns/a"))
    assert delays == [1.0, 2.0, 4.0]
    assert await h.admission.reconcile("ns/a") is None
    assert "ns/a" not in h.admission._write_failures


async def test_a_retry_entry_with_no_answer_holds_nothing(h: Harness) -> None:
    add(h, "big", 20)  # never fits in a rack of 16: Retry
    writes(h).fail_at["check"] = TransportError("timeout")
    assert await h.admission.reconcile("ns/big") == 1.0
    assert not h.capacity.holds("ns/big") and errors(h) == 1


async def test_an_event_that_cannot_be_written_does_not_undo_a_ready_decision() -> None:
    class BrokenEvents:
        async def emit_event(self, regarding: ObjectRef, *, reason: str, message: str, type: str = "Normal") -> bool:
            raise TransportError("events endpoint unreachable")

    h = harness(writer=FailingWrites(), events=BrokenEvents())
    add(h, "a")
    assert await h.admission.reconcile("ns/a") is None
    assert states(h) == ["Ready"] and h.capacity.holds("ns/a")
    assert errors(h) == 0


async def test_an_unseen_successful_write_is_reread_before_deciding_again(h: Harness) -> None:
    add(h, "a")
    await h.admission.reconcile("ns/a")
    h.now[0] += WRITE_OBSERVE_TIMEOUT_SECONDS + 1
    writes(h).read = Workload.model_validate(
        wl("a", check_state="Ready", workload_annotations={c.TOPOLOGY_ASSIGNMENT_ANNOTATION: h.writes.annotations[0]})
    )
    assert await h.admission.reconcile("ns/a") == WRITE_OBSERVE_TIMEOUT_SECONDS
    assert states(h) == ["Ready"] and h.capacity.holds("ns/a")


@pytest.mark.parametrize(
    ("error", "answered"),
    [
        (ServerError(503, "ServiceUnavailable", "shutting down"), True),
        (ServerError(504, "Timeout", "request did not complete within 60s"), False),
        (TransportError("connection refused"), False),
    ],
    ids=["503", "504", "transport"],
)
async def test_an_answered_5xx_is_settled_by_a_reread_at_once_not_after_the_request_timeout(
    h: Harness, error: Exception, answered: bool
) -> None:
    # Chaos seed 7: a webhook outage answered our Ready entry write with a 500; the workload then
    # sat Pending with no message for the whole 65 s settle time.
    add(h, "a")
    writes(h).fail_at["check"] = error
    settle = await h.admission.reconcile("ns/a")
    assert settle is not None
    if answered:
        assert settle <= 2.0, "the apiserver answered: a re-read tells at once"
    else:
        assert settle == pytest.approx(UNKNOWN_WRITE_SETTLE_SECONDS), "may still land until the request timeout"
    h.now[0] += settle
    writes(h).read = Workload.model_validate(wl("a", resource_version="9"))
    await h.admission.reconcile("ns/a")
    assert writes(h).reads == 1 and states(h) == ["Ready"], "decided again from the fresh copy"
