"""Issue 12, deliverable 5: Events, the leader Lease and the AdmissionCheck ``Active`` condition
under every API fault, through the real client (``tests/faults.py``).

Events are best effort: a failed write is logged and reported, never raised, and the next one
lands; after a 429 none is sent until the Retry-After. The Lease: a candidate keeps trying and
leads once the fault is gone (honouring a 429's Retry-After); a leader survives one failed
renewal. The ``Active`` condition: a failed write is retried after a backoff (a 429 after its
Retry-After) and then written.
"""

from __future__ import annotations

import asyncio
from typing import Any

import builders as mk
import pytest
from faults import ALL_FAULTS, FakeApiServer, Fault, FaultySession, faulty_client
from kubernetes_asyncio import client as k8s
from virtual_time import run_virtual, virtual_clock

from kueue_tas.api import constants as c
from kueue_tas.controllers.checkstatus.reconciler import AdmissionCheckStatus, KubeCheckStatusWriter
from kueue_tas.controllers.informers import OurChecks, SharedInformers
from kueue_tas.kube.events import EventRecorder, ObjectRef
from kueue_tas.runtime.config import Settings
from kueue_tas.runtime.leader import LeaderElector
from kueue_tas.runtime.manager import Manager
from kueue_tas.runtime.metrics import Metrics

FAULTS = [pytest.param(kind, after, ra, id=fault) for fault, kind, after, ra in ALL_FAULTS]
REF = ObjectRef(c.KUEUE_API_VERSION, c.KIND_WORKLOAD, "wl", "ns", "uid-wl")
EVENTS = "/apis/events.k8s.io/v1/namespaces/ns/events"


async def client() -> tuple[FakeApiServer, k8s.ApiClient, FaultySession]:
    server = FakeApiServer()
    api, session = await faulty_client(server)
    return server, api, session


def events_on(server: FakeApiServer) -> list[dict[str, Any]]:
    return [o for p, o in server.objects.items() if p.startswith(EVENTS)]


# --- Events ------------------------------------------------------------------------------------


@pytest.mark.parametrize(("kind", "after_apply", "retry_after"), FAULTS)
async def test_a_failed_event_create_is_reported_never_raised_and_the_next_lands(
    kind: int | str, after_apply: bool, retry_after: float | None
) -> None:
    server, api, session = await client()
    ticks = [0.0]
    recorder = EventRecorder(api, timer=lambda: ticks[0])
    session.inject(Fault("POST", r"/events$", kind, after_apply=after_apply, retry_after=retry_after))
    assert await recorder.emit_event(REF, reason="TopologyAssigned", message="placed") is False
    ticks[0] += 61.0  # past any Retry-After
    assert await recorder.emit_event(REF, reason="TopologyAssigned", message="placed") is True
    assert len(events_on(server)) == (2 if after_apply else 1)


@pytest.mark.parametrize(("kind", "after_apply", "retry_after"), FAULTS)
async def test_a_failed_series_update_is_reported_and_the_series_goes_on(
    kind: int | str, after_apply: bool, retry_after: float | None
) -> None:
    server, api, session = await client()
    ticks = [0.0]
    recorder = EventRecorder(api, timer=lambda: ticks[0])
    assert await recorder.emit_event(REF, reason="R", message="m", type="Warning")
    session.inject(Fault("PATCH", r"/events/", kind, after_apply=after_apply, retry_after=retry_after))
    ticks[0] += 1.0
    ok = await recorder.emit_event(REF, reason="R", message="m", type="Warning")
    assert ok is (kind == 404 and not after_apply)  # a vanished Event is created afresh
    ticks[0] += 61.0 if kind == 429 else 1.0
    assert await recorder.emit_event(REF, reason="R", message="m", type="Warning")
    (first, *more) = sorted(events_on(server), key=lambda e: e["metadata"]["name"])
    assert more == [] or kind == 404, "one Event, its series counting the repeats"
    assert kind == 404 or first["series"]["count"] == 3


async def test_after_a_429_no_event_is_sent_until_retry_after() -> None:
    _server, api, session = await client()
    ticks = [0.0]
    recorder = EventRecorder(api, timer=lambda: ticks[0])
    session.inject(Fault("POST", r"/events$", 429, retry_after=5.0))
    assert not await recorder.emit_event(REF, reason="A", message="a")
    ticks[0] = 4.0
    assert not await recorder.emit_event(REF, reason="B", message="b")
    assert len(session.calls) == 1, "nothing sent while throttled"
    ticks[0] = 5.5
    assert await recorder.emit_event(REF, reason="C", message="c")
    assert len(session.calls) == 2


# --- the leader Lease ----------------------------------------------------------------------------

LEASE_SETTINGS = Settings(
    leader_election=True, lease_duration_seconds=15, renew_deadline_seconds=10, retry_period_seconds=2
)
LEASES = f"/apis/coordination.k8s.io/v1/namespaces/{LEASE_SETTINGS.lease_namespace}/leases"


def run_elector(body: Any) -> None:
    async def main() -> None:
        server, api, session = await client()
        elector = LeaderElector(api, LEASE_SETTINGS, "me", now=virtual_clock().wall, jitter=0.0)
        leading = asyncio.Event()

        async def lead() -> None:
            leading.set()
            await asyncio.sleep(3600)

        task = asyncio.create_task(elector.run(lead))
        try:
            await body(server, session, elector, leading, task)
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    run_virtual(main())


@pytest.mark.parametrize(("kind", "after_apply", "retry_after"), FAULTS)
def test_a_failed_lease_create_is_retried_until_leading(
    kind: int | str, after_apply: bool, retry_after: float | None
) -> None:
    async def body(server: FakeApiServer, session: FaultySession, elector: LeaderElector, leading: Any, _: Any) -> None:
        session.inject(Fault("POST", r"/leases$", kind, after_apply=after_apply, retry_after=retry_after))
        await asyncio.sleep(0.5)
        assert not elector.is_leader
        await asyncio.wait_for(leading.wait(), timeout=20)
        assert elector.is_leader
        lease = server.get(f"{LEASES}/{LEASE_SETTINGS.lease_name}")
        assert lease is not None and lease["spec"]["holderIdentity"] == "me"
        if kind == 429:
            assert virtual_clock().now >= (retry_after or 0), "Retry-After honoured"

    run_elector(body)


@pytest.mark.parametrize(("kind", "after_apply", "retry_after"), FAULTS)
def test_a_failed_renewal_keeps_the_lease(kind: int | str, after_apply: bool, retry_after: float | None) -> None:
    async def body(
        server: FakeApiServer, session: FaultySession, elector: LeaderElector, leading: Any, task: Any
    ) -> None:
        await asyncio.wait_for(leading.wait(), timeout=5)
        session.inject(Fault("PUT", r"/leases/", kind, after_apply=after_apply, retry_after=retry_after))
        await asyncio.sleep(30)
        assert any(call.fault == kind for call in session.calls), "the fault was hit"
        assert elector.is_leader and not task.done(), "one failed renewal is not a lost Lease"

    run_elector(body)


def test_a_leader_that_cannot_renew_for_the_deadline_stops() -> None:
    async def body(
        server: FakeApiServer, session: FaultySession, elector: LeaderElector, leading: Any, task: Any
    ) -> None:
        await asyncio.wait_for(leading.wait(), timeout=5)
        session.inject(Fault("PUT", r"/leases/", "timeout", times=100), Fault("GET", r"/leases/", 503, times=100))
        await asyncio.sleep(LEASE_SETTINGS.renew_deadline_seconds + LEASE_SETTINGS.retry_period_seconds + 1)
        assert task.done() and not elector.is_leader

    run_elector(body)


# --- the AdmissionCheck Active condition ------------------------------------------------------


@pytest.mark.parametrize(("kind", "after_apply", "retry_after"), FAULTS)
async def test_a_failed_active_condition_is_written_again_after_a_backoff(
    kind: int | str, after_apply: bool, retry_after: float | None
) -> None:
    server, api, session = await client()
    settings = Settings(leader_election=False)
    informers = SharedInformers.register(Manager(None, settings, Metrics()), settings.annotation_prefix)
    check_path = "/apis/kueue.x-k8s.io/v1beta2/admissionchecks/tas-check"
    ac = server.put(check_path, mk.admission_check("tas-check", "topo", c.CONTROLLER_NAME))
    informers.checks.handle_event("ADDED", ac)
    checks = OurChecks(informers.checks.store, settings.controller_name)
    status = AdmissionCheckStatus(informers=informers, checks=checks, writer=KubeCheckStatusWriter(api))
    session.inject(
        Fault("PATCH", r"/admissionchecks/tas-check/status$", kind, after_apply=after_apply, retry_after=retry_after)
    )
    delay = await status.reconcile("tas-check")
    expected = retry_after if kind == 429 else 1.0
    assert delay == expected, "retried after a backoff (a 429 after its Retry-After)"
    assert await status.reconcile("tas-check") is None
    stored = server.get(check_path)
    assert stored is not None
    (active,) = stored["status"]["conditions"]
    assert (active["type"], active["status"], active["reason"]) == ("Active", "False", "TopologyNotFound")
