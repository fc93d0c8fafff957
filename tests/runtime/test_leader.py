from __future__ import annotations

import asyncio
from dataclasses import replace
from datetime import timedelta

import pytest
from virtual_time import EPOCH, VirtualClock, run_virtual, virtual_clock

from kueue_tas.kube.errors import AlreadyExists, Conflict, NotFound, ServerError
from kueue_tas.kube.lease import LeaseRecord, lease_body, parse_lease
from kueue_tas.runtime.config import Settings
from kueue_tas.runtime.leader import LeaderElectionLost, LeaderElector

SETTINGS = Settings(
    leader_election=True,
    lease_duration_seconds=15,
    renew_deadline_seconds=10,
    retry_period_seconds=2,
)
NS, NAME = SETTINGS.lease_namespace, SETTINGS.lease_name


class LeaseStore:
    """The API server's view: one Lease, resourceVersion checked on replace."""

    def __init__(self) -> None:
        self.record: LeaseRecord | None = None
        self.rv = 0
        self.history: list[tuple[float, str | None]] = []  # (time, holder) after each write

    def _write(self, record: LeaseRecord) -> LeaseRecord:
        self.rv += 1
        self.record = replace(record, resource_version=str(self.rv))
        self.history.append((asyncio.get_running_loop().time(), record.holder_identity))
        return self.record


class FakeLeaseApi:
    """One elector's connection to the store; can be cut off (errors) or made to hang."""

    def __init__(self, store: LeaseStore) -> None:
        self.store = store
        self.down = False
        self.hang = False
        self.calls = 0

    async def _gate(self) -> None:
        self.calls += 1
        await asyncio.sleep(0.01)  # a little latency
        if self.hang:
            await asyncio.sleep(10_000)
        if self.down:
            raise ServerError(503, "ServiceUnavailable", "apiserver unreachable")

    async def get(self, namespace: str, name: str) -> LeaseRecord:
        await self._gate()
        if self.store.record is None:
            raise NotFound(404, "NotFound", "lease not found")
        return self.store.record

    async def create(self, namespace: str, name: str, record: LeaseRecord) -> LeaseRecord:
        await self._gate()
        if self.store.record is not None:
            raise AlreadyExists(409, "AlreadyExists", "exists")
        return self.store._write(record)

    async def replace(self, namespace: str, name: str, record: LeaseRecord) -> LeaseRecord:
        await self._gate()
        if self.store.record is None:
            raise NotFound(404, "NotFound", "lease not found")
        if record.resource_version != self.store.record.resource_version:
            raise Conflict(409, "Conflict", "the object has been modified")
        return self.store._write(record)


class Leading:
    """on_started_leading that records when it started and when it was stopped."""

    def __init__(self, clock: VirtualClock, name: str, elector: LeaderElector | None = None) -> None:
        self.clock = clock
        self.name = name
        self.elector = elector
        self.started: float | None = None
        self.stopped: float | None = None
        self.finish = asyncio.Event()

    async def __call__(self) -> None:
        self.started = self.clock.now
        if self.elector is not None:
            assert self.elector.is_leader
        try:
            await self.finish.wait()
        finally:
            self.stopped = self.clock.now


def make(store: LeaseStore, identity: str, clock: VirtualClock, **kw: object) -> tuple[LeaderElector, FakeLeaseApi]:
    api = FakeLeaseApi(store)
    elector = LeaderElector(api, SETTINGS, identity, now=clock.wall, jitter=0.0, **kw)  # type: ignore[arg-type]
    return elector, api


def test_first_elector_acquires_and_renews() -> None:
    async def main() -> None:
        clock = virtual_clock()
        store = LeaseStore()
        a, _ = make(store, "a", clock)
        lead = Leading(clock, "a", a)
        task = asyncio.create_task(a.run(lead))
        await asyncio.sleep(30)
        assert a.is_leader and a.state == "leader"
        assert lead.started == pytest.approx(0.02, abs=0.05)
        rec = store.record
        assert rec is not None
        assert rec.holder_identity == "a"
        assert rec.lease_transitions == 0
        assert rec.lease_duration_seconds == 15
        assert rec.acquire_time == EPOCH + timedelta(seconds=0)
        assert rec.renew_time is not None and rec.renew_time > EPOCH + timedelta(seconds=25)
        renewals = [t for t, h in store.history if h == "a"]
        assert len(renewals) >= 14  # every ~2 s
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    run_virtual(main())


def test_leader_dies_other_takes_over_after_expiry() -> None:
    async def main() -> None:
        clock = virtual_clock()
        store = LeaseStore()
        a, _ = make(store, "a", clock, release_on_cancel=False)  # a crash: nothing released
        b, _ = make(store, "b", clock)
        lead_a, lead_b = Leading(clock, "a", a), Leading(clock, "b", b)
        ta = asyncio.create_task(a.run(lead_a))
        await asyncio.sleep(1)
        tb = asyncio.create_task(b.run(lead_b))
        await asyncio.sleep(20)
        assert a.is_leader and not b.is_leader
        assert b.state == "standby" and b.observed_holder == "a"
        ta.cancel()  # process dies
        with pytest.raises(asyncio.CancelledError):
            await ta
        last_renew_a = max(t for t, h in store.history if h == "a")
        await asyncio.sleep(30)
        assert b.is_leader
        assert lead_b.started is not None
        # not before the lease expired, and within one retry period after it
        assert last_renew_a + 15 <= lead_b.started <= last_renew_a + 15 + 2 + 0.1
        rec = store.record
        assert rec is not None
        assert rec.holder_identity == "b"
        assert rec.lease_transitions == 1
        assert rec.acquire_time is not None
        assert rec.acquire_time >= EPOCH + timedelta(seconds=last_renew_a + 15)
        tb.cancel()
        with pytest.raises(asyncio.CancelledError):
            await tb

    run_virtual(main())


@pytest.mark.parametrize("failure", ["down", "hang"])
def test_leader_that_cannot_renew_stops_before_lease_expires(failure: str) -> None:
    async def main() -> None:
        clock = virtual_clock()
        store = LeaseStore()
        a, api_a = make(store, "a", clock)
        b, _ = make(store, "b", clock)
        lead_a, lead_b = Leading(clock, "a", a), Leading(clock, "b", b)
        ta = asyncio.create_task(a.run(lead_a))
        await asyncio.sleep(1)
        tb = asyncio.create_task(b.run(lead_b))
        await asyncio.sleep(10)
        setattr(api_a, failure, True)  # a is partitioned from the API server
        last_renew_a = max(t for t, h in store.history if h == "a")
        with pytest.raises(LeaderElectionLost):
            await ta
        assert not a.is_leader and a.state == "stopped"
        assert lead_a.stopped is not None
        assert lead_a.stopped <= last_renew_a + 10 + 0.01  # within the renew deadline
        await asyncio.sleep(30)
        assert b.is_leader and lead_b.started is not None
        assert lead_a.stopped < last_renew_a + 15 <= lead_b.started  # never two leaders
        tb.cancel()
        with pytest.raises(asyncio.CancelledError):
            await tb

    run_virtual(main())


def test_graceful_release_gives_immediate_takeover() -> None:
    async def main() -> None:
        clock = virtual_clock()
        store = LeaseStore()
        a, _ = make(store, "a", clock)
        b, _ = make(store, "b", clock)
        lead_a, lead_b = Leading(clock, "a", a), Leading(clock, "b", b)
        ta = asyncio.create_task(a.run(lead_a))
        await asyncio.sleep(1)
        tb = asyncio.create_task(b.run(lead_b))
        await asyncio.sleep(10)
        ta.cancel()  # SIGTERM
        with pytest.raises(asyncio.CancelledError):
            await ta
        released_at = clock.now
        assert lead_a.stopped is not None and lead_a.stopped <= released_at
        rec = store.record
        assert rec is not None and rec.holder_identity is None and rec.lease_duration_seconds == 1
        await asyncio.sleep(5)
        assert b.is_leader and lead_b.started is not None
        assert lead_b.started - released_at <= 2 + 0.1  # next retry, not lease expiry
        assert store.record is not None and store.record.lease_transitions == 1
        tb.cancel()
        with pytest.raises(asyncio.CancelledError):
            await tb

    run_virtual(main())


def test_leading_coroutine_returning_releases_and_returns() -> None:
    async def main() -> None:
        clock = virtual_clock()
        store = LeaseStore()
        a, _ = make(store, "a", clock)
        lead = Leading(clock, "a", a)
        ta = asyncio.create_task(a.run(lead))
        await asyncio.sleep(5)
        lead.finish.set()
        await asyncio.wait_for(ta, 1)
        assert not a.is_leader
        assert store.record is not None and store.record.holder_identity is None

    run_virtual(main())


def test_leading_coroutine_error_is_reraised_after_release() -> None:
    async def main() -> None:
        store = LeaseStore()
        a, _ = make(store, "a", virtual_clock())

        async def boom() -> None:
            await asyncio.sleep(3)
            raise RuntimeError("controller crashed")

        with pytest.raises(RuntimeError, match="controller crashed"):
            await a.run(boom)
        assert store.record is not None and store.record.holder_identity is None

    run_virtual(main())


def test_conflicts_are_retried_and_transitions_counted() -> None:
    async def main() -> None:
        clock = virtual_clock()
        store = LeaseStore()
        # A lease left behind by an old holder long ago.
        store.record = LeaseRecord(
            holder_identity="old",
            lease_duration_seconds=15,
            acquire_time=EPOCH - timedelta(hours=1),
            renew_time=EPOCH - timedelta(minutes=30),
            lease_transitions=4,
            resource_version="7",
        )
        store.rv = 7
        a, _ = make(store, "a", clock)
        b, _ = make(store, "b", clock)
        la, lb = Leading(clock, "a"), Leading(clock, "b")
        ta = asyncio.create_task(a.run(la))
        tb = asyncio.create_task(b.run(lb))  # both race for the expired lease: one gets a 409
        await asyncio.sleep(10)
        assert a.is_leader != b.is_leader
        rec = store.record
        assert rec is not None and rec.lease_transitions == 5
        assert rec.holder_identity in ("a", "b")
        for t in (ta, tb):
            t.cancel()
        await asyncio.gather(ta, tb, return_exceptions=True)

    run_virtual(main())


def test_leader_notices_lease_taken_by_other() -> None:
    async def main() -> None:
        clock = virtual_clock()
        store = LeaseStore()
        a, _ = make(store, "a", clock)
        lead = Leading(clock, "a", a)
        ta = asyncio.create_task(a.run(lead))
        await asyncio.sleep(5)
        rec = store.record
        assert rec is not None
        store._write(replace(rec, holder_identity="intruder"))  # e.g. an admin edit
        with pytest.raises(LeaderElectionLost):
            await ta
        assert lead.stopped is not None and lead.stopped <= 5 + 2 + 0.1

    run_virtual(main())


def test_a_leader_paused_past_its_renew_deadline_may_not_write_when_it_resumes() -> None:
    """A stop signal or a frozen VM: the process resumes with its queued writes and its renew
    loop not yet run. ``may_write`` answers from the process's own clock, so a write that would
    be sent in that first step is refused (chaos seed 4048's review of defect 9's fence)."""

    async def main() -> None:
        clock = virtual_clock()
        store = LeaseStore()
        a, _ = make(store, "a", clock)
        b, _ = make(store, "b", clock)
        assert a.may_write() and b.may_write()  # standbys that never led: their own upkeep
        answers: list[tuple[str, bool]] = []

        async def leading() -> None:
            answers.append(("leading", a.may_write()))
            await asyncio.sleep(3)
            answers.append(("renewed", a.may_write()))
            clock.advance(SETTINGS.renew_deadline_seconds + 0.5)  # paused: no callback ran meanwhile
            answers.append(("resumed", a.may_write()))
            await asyncio.sleep(10_000)

        ta = asyncio.create_task(a.run(leading))
        await asyncio.sleep(1)
        tb = asyncio.create_task(b.run(Leading(clock, "b", b)))
        with pytest.raises(LeaderElectionLost):
            await ta
        assert answers == [("leading", True), ("renewed", True), ("resumed", False)]
        assert not a.may_write()  # deposed: nothing but its Lease until the process exits
        assert b.may_write()
        tb.cancel()
        with pytest.raises(asyncio.CancelledError):
            await tb

    run_virtual(main())


def test_disabled_election_just_runs() -> None:
    async def main() -> None:
        store = LeaseStore()
        settings = Settings(leader_election=False)
        api = FakeLeaseApi(store)
        e = LeaderElector(api, settings, "solo")
        seen: list[bool] = []

        async def lead() -> None:
            seen.append(e.is_leader)

        await e.run(lead)
        assert seen == [True] and api.calls == 0 and e.state == "stopped"

    run_virtual(main())


def test_lease_body_uses_microtime_and_round_trips() -> None:
    rec = LeaseRecord(
        holder_identity="a",
        lease_duration_seconds=15,
        acquire_time=EPOCH,
        renew_time=EPOCH + timedelta(microseconds=5),
        lease_transitions=2,
        resource_version="9",
    )
    body = lease_body(NS, NAME, rec)
    assert body["spec"]["acquireTime"] == "2030-01-01T00:00:00.000000Z"
    assert body["spec"]["renewTime"] == "2030-01-01T00:00:00.000005Z"
    assert body["metadata"] == {"name": NAME, "namespace": NS, "resourceVersion": "9"}
    assert parse_lease(body) == rec
    cleared = lease_body(NS, NAME, replace(rec, holder_identity=None))
    assert "holderIdentity" not in cleared["spec"]
    assert parse_lease({"spec": {"renewTime": "2030-01-01T00:00:00.123456789Z"}}).renew_time == EPOCH + timedelta(
        microseconds=123456
    )
