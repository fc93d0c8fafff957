"""Reservations in the admission (``controllers/reservation``): off by default; a workload that
has waited ``reservation_after_seconds`` while blocked by fragmentation gets the rack where it
fits soonest, recorded on it; other decisions enter that rack only as backfill or leaving the
holder room; placing the holder ends the reservation."""

from __future__ import annotations

import asyncio
import copy
import json
from datetime import UTC, datetime, timedelta
from typing import Any

import builders as mk
from admission_harness import ALLOCATABLE, T0, Harness, evicted, harness, ready, wl
from hypothesis import given, settings
from hypothesis import strategies as st
from vocab import RACK

from kueue_tas.api import constants as c
from kueue_tas.topology.codec.codec import decode_assignment_annotation

START = datetime(2026, 1, 1, 0, 30, tzinfo=UTC)  # half an hour after T0


def clock(h_now: list[datetime]) -> Any:
    return lambda: h_now[0]


def rack_of(h: Harness) -> str:
    ((_, assignment),) = decode_assignment_annotation(h.writes.annotations[-1])
    racks = {"r1" if d.values[-1] in ("h1", "h2") else "r2" for d in assignment.domains}
    assert len(racks) == 1, racks
    return racks.pop()


def with_runtime(obj: dict[str, Any], seconds: int | None) -> dict[str, Any]:
    out = copy.deepcopy(obj)
    if seconds is not None:
        out["spec"]["maximumExecutionTimeSeconds"] = seconds
    return out


async def admit(h: Harness, name: str, count: int, runtime: int | None) -> str:
    """Decide ``name`` (admitted at T0) and play Kueue's admission back; its rack."""
    obj = with_runtime(wl(name, count, uid=f"uid-{name}"), runtime)
    h.add_workload(obj)
    assert await h.admission.reconcile(f"ns/{name}") is None
    assert h.writes.checks[-1]["state"] == "Ready", h.writes.checks[-1]
    rack = rack_of(h)
    out = ready(h, obj)
    out["status"]["conditions"].append(mk.condition("Admitted", reason="Admitted", message="", time=T0))
    h.modify_workload(out)
    return rack


async def decide(h: Harness, obj: dict[str, Any]) -> dict[str, Any]:
    """Decide ``obj`` (as Kueue shows it, our entry Pending) and return our entry."""
    h.modify_workload(obj) if f"ns/{obj['metadata']['name']}" in h.informers.workloads.store else h.add_workload(obj)
    before = len(h.writes.checks)
    await h.admission.reconcile(f"ns/{obj['metadata']['name']}")
    assert len(h.writes.checks) == before + 1
    return h.writes.checks[-1]


def requeued(obj: dict[str, Any], marks: dict[str, str], version: int) -> dict[str, Any]:
    """``obj`` back with quota after Kueue requeued its Retry, carrying what we recorded."""
    out = copy.deepcopy(obj)
    out["metadata"].setdefault("annotations", {}).update(marks)
    out["metadata"]["resourceVersion"] = str(version)
    return out


async def blocked_big(h: Harness, now: list[datetime]) -> dict[str, Any]:
    """Rack r1 holds "a" (6 pods, ends an hour after T0), r2 holds "b" (12 pods, ends two hours
    after T0): 10 + 4 GPUs free, so "big" (12 pods, one rack) is blocked by fragmentation. It
    waits, then gets r1, where it fits soonest."""
    assert await admit(h, "a", 6, 3600) == "r1"
    assert await admit(h, "b", 12, 7200) == "r2"
    big = wl("big", 12, uid="uid-big")
    first = await decide(h, big)
    assert first["state"] == "Retry" and "reserved" not in first["message"]
    (marks,) = h.writes.marks
    assert marks == {c.WAITING_SINCE_ANNOTATION: "2026-01-01T00:30:00Z"}
    now[0] = START + timedelta(minutes=2)
    h.now[0] += 31  # past the wait for our own write to come back
    again = await decide(h, requeued(big, marks, 20))
    assert again["state"] == "Retry" and 'rack "r1" is reserved for this workload' in again["message"]
    assert again["requeueAfterSeconds"] <= 10  # tried again soon: its rack may free at any moment
    recorded = json.loads(h.writes.marks[-1][c.RESERVATION_ANNOTATION])
    assert recorded["values"] == ["r1"] and recorded["expectedFit"] == "2026-01-01T01:00:00Z"
    return requeued(big, {**marks, **h.writes.marks[-1]}, 21)


async def fill_r2(h: Harness) -> None:
    """4 pods fill r2: what enters a rack now can only enter r1."""
    assert (await decide(h, wl("s1", 4, uid="uid-s1")))["state"] == "Ready" and rack_of(h) == "r2"
    h.modify_workload(ready(h, wl("s1", 4, uid="uid-s1")))


async def test_a_fragmented_workload_gets_the_rack_where_it_fits_soonest_and_others_respect_it() -> None:
    now = [START]
    h = harness(wall=clock(now), settings={"reservation_after_seconds": 60})
    await blocked_big(h, now)
    await fill_r2(h)
    # 6 unbounded pods fit only r1, where they would delay "big" (16 - 6 < 12 once "a" ends).
    assert (await decide(h, wl("s2", 6, uid="uid-s2")))["state"] == "Retry"
    # 5 pods ending in ten minutes, before "big" is expected to fit: backfill.
    s3 = with_runtime(wl("s3", 5, uid="uid-s3"), 600)
    assert (await decide(h, s3))["state"] == "Ready" and rack_of(h) == "r1"
    s3 = ready(h, s3)
    s3["status"]["conditions"].append(
        mk.condition("Admitted", reason="Admitted", message="", time="2026-01-01T00:32:00Z")
    )
    h.modify_workload(s3)
    # 1 unbounded pod leaves "big" room (16 - 1 once "s3" and "a" end): it enters.
    assert (await decide(h, wl("s4", 1, uid="uid-s4")))["state"] == "Ready" and rack_of(h) == "r1"
    h.modify_workload(ready(h, wl("s4", 1, uid="uid-s4")))
    # 4 more would not (16 - 5 < 12): refused, though r1 has room for them now.
    assert (await decide(h, wl("s5", 4, uid="uid-s5")))["state"] == "Retry"


async def test_a_holder_between_kueue_requeues_still_keeps_its_rack() -> None:
    """After our Retry Kueue evicts the holder and withdraws its quota until it requeues it: the
    copy then carries no admission, so no flavor says what the holder needs. Its rack stays kept
    all the same (e2e test_reservations, 2026-11-28: a 1-GPU Job entered the reserved rack in
    that window and the rack-sized holder never fitted)."""
    now = [START]
    h = harness(wall=clock(now), settings={"reservation_after_seconds": 60})
    big = await blocked_big(h, now)
    await fill_r2(h)
    h.modify_workload(evicted(big, quota=False))
    assert h.ctx.reservations.of("ns/big") is not None
    # 6 unbounded pods fit only r1, where "big" would no longer fit once "a" ends.
    assert (await decide(h, wl("s2", 6, uid="uid-s2")))["state"] == "Retry"
    # 4 leave it room (16 - 4 once "a" ends): they enter.
    assert (await decide(h, wl("s3", 4, uid="uid-s3")))["state"] == "Ready" and rack_of(h) == "r1"


async def test_usage_no_occupant_accounts_for_keeps_entrants_out_of_a_reserved_rack() -> None:
    """Pods that no admitted workload holds (a deleted workload's terminating pods, a foreign
    pod) fill the reserved rack so that the holder would not fit there even once every occupant
    ends: an entrant is refused rather than let in because "the holder cannot fit anyway"; those
    pods go, and the entrant would then keep the holder out."""
    now = [START]
    h = harness(wall=clock(now), settings={"reservation_after_seconds": 60})
    await blocked_big(h, now)
    await fill_r2(h)
    h.informers.pods.handle_event("ADDED", mk.pod("stray-0", node="h1", gpus=5, namespace="other", uid="uid-stray"))
    assert (await decide(h, wl("s2", 1, uid="uid-s2")))["state"] == "Retry"


async def test_a_rack_that_can_no_longer_hold_its_holder_is_given_up_for_one_that_can() -> None:
    """A host of the reserved rack goes away: 8 GPUs are left there, "big" needs 12. Kept, the
    reservation would only keep others out for hours; the holder's next decision ends it
    ("unfit") and takes r2, where it fits once "b" ends."""
    now = [START]
    h = harness(wall=clock(now), settings={"reservation_after_seconds": 60})
    big = await blocked_big(h, now)
    h1 = mk.node("h1", labels={RACK: "r1", "pool": "gpu"}, allocatable=ALLOCATABLE)
    h.informers.nodes.handle_event("DELETED", h1)
    h.now[0] += 31
    entry = await decide(h, requeued(big, {}, 30))
    assert entry["state"] == "Retry" and 'rack "r2" is reserved for this workload' in entry["message"], entry
    held = h.ctx.reservations.of("ns/big")
    assert held is not None and held.domain.values == ("r2",)
    assert h.metrics.reservation_held_seconds.labels("unfit")._sum.get() == 0.0
    assert h.metrics.reservations_made_total._value.get() == 2


async def test_after_a_restart_a_holder_waiting_for_quota_is_read_from_its_spec() -> None:
    """A restarted controller rebuilds the reservation from the holder's record while Kueue
    holds no quota for it: no decision of this process has read its requests, so its spec's
    PodSets on the reserved flavor stand for them; the rack stays kept."""
    now = [START]
    h = harness(wall=clock(now), settings={"reservation_after_seconds": 60})
    big = await blocked_big(h, now)
    await fill_r2(h)
    later = harness(wall=clock(now), settings={"reservation_after_seconds": 60})
    for key in ("ns/a", "ns/b", "ns/s1"):
        later.add_workload(h.informers.workloads.store[key].model_dump(by_alias=True, exclude_none=True, mode="json"))
    later.add_workload(evicted(big, quota=False))
    assert later.ctx.reservations.of("ns/big") is not None
    assert (await decide(later, wl("s2", 6, uid="uid-s2")))["state"] == "Retry"
    assert (await decide(later, wl("s3", 4, uid="uid-s3")))["state"] == "Ready" and rack_of(later) == "r1"


async def test_an_expired_reservation_stays_ended() -> None:
    """Past ``reservation_timeout_seconds`` the reservation ends, and stays ended: the record
    left on the holder (its wait is not over) neither brings it back when the holder's next copy
    arrives nor lets the holder's next decision reserve again at once, so the rack is open to
    everyone as a timeout promises."""
    now = [START]
    h = harness(wall=clock(now), settings={"reservation_after_seconds": 60, "reservation_timeout_seconds": 600})
    big = await blocked_big(h, now)
    await fill_r2(h)
    now[0] = START + timedelta(minutes=13)  # the reservation was made at minute 2
    h.now[0] += 31
    entry = await decide(h, requeued(big, {}, 40))
    assert entry["state"] == "Retry" and "reserved" not in entry["message"], entry
    assert h.ctx.reservations.of("ns/big") is None
    h.modify_workload(evicted(requeued(big, {}, 41), quota=False))  # its record still on it
    assert h.ctx.reservations.of("ns/big") is None
    assert h.metrics.reservation_held_seconds.labels("expired")._sum.get() == 660.0  # ended once
    assert h.metrics.reservations_made_total._value.get() == 1
    # 6 unbounded pods now enter r1.
    assert (await decide(h, wl("s2", 6, uid="uid-s2")))["state"] == "Ready" and rack_of(h) == "r1"


async def test_placing_the_holder_ends_its_reservation() -> None:
    now = [START]
    h = harness(wall=clock(now), settings={"reservation_after_seconds": 60})
    big = await blocked_big(h, now)
    assert h.ctx.reservations.of("ns/big") is not None
    # "a" finishes: its usage goes, and "big" fits its reserved rack.
    gone = h.informers.workloads.store["ns/a"].model_dump(by_alias=True, exclude_none=True, mode="json")
    gone["status"]["conditions"].append(mk.condition("Finished", reason="Succeeded", message="", time=T0))
    gone["metadata"]["resourceVersion"] = "40"
    h.modify_workload(gone)
    h.now[0] += 31
    now[0] = START + timedelta(minutes=7)  # five minutes after the reservation was made
    assert (await decide(h, big))["state"] == "Ready"  # the write's removal of the records: tests/write_faults
    assert rack_of(h) == "r1"
    placed = ready(h, big)
    placed["status"]["conditions"].append(mk.condition("Admitted", reason="Admitted", message="", time=T0))
    h.modify_workload(placed)
    assert h.ctx.reservations.of("ns/big") is None
    assert h.metrics.reservations_made_total._value.get() == 1
    held = h.metrics.reservation_held_seconds.labels("placed")
    assert held._sum.get() == 300.0


async def test_off_by_default() -> None:
    h = harness(wall=lambda: START)
    await admit(h, "a", 6, 3600)
    await admit(h, "b", 12, 7200)
    assert (await decide(h, wl("big", 12, uid="uid-big")))["state"] == "Retry"
    assert h.writes.marks == []
    assert h.ctx.reservations.all() == []


async def test_a_reservation_record_is_ignored_while_reservations_are_off() -> None:
    h = harness(wall=lambda: START)
    record = {"flavor": "gpu", "level": "x", "values": ["r1"], "since": "2026-01-01T00:00:00Z"}
    big = wl("big", 12, uid="uid-big")
    big["metadata"]["annotations"] = {c.RESERVATION_ANNOTATION: json.dumps(record)}
    h.add_workload(big)
    assert h.ctx.reservations.all() == []


# --- the property: whatever the holder's state, no entrant keeps it out -------------------------

ENTER, EVICT_HOLDER, DECIDE_HOLDER, RESTART = "enter", "evict-holder", "decide-holder", "restart"
R1_GPUS, BIG = 16, 12
FIT_AT = datetime(2026, 1, 1, 1, 0, tzinfo=UTC)  # "a" ends: when "big" is expected to fit r1

steps = st.lists(
    st.one_of(
        st.tuples(st.just(ENTER), st.integers(1, 6), st.sampled_from([None, 600, 7200])),
        st.tuples(st.just(EVICT_HOLDER), st.none(), st.none()),
        st.tuples(st.just(DECIDE_HOLDER), st.none(), st.none()),
        st.tuples(st.just(RESTART), st.none(), st.none()),
    ),
    min_size=1,
    max_size=12,
)


@settings(max_examples=40, deadline=None)
@given(steps)
def test_no_entrant_keeps_the_holder_out_whatever_state_the_holder_is_in(
    plan: list[tuple[str, int | None, int | None]],
) -> None:
    """r1 is reserved for "big" (12 pods) and fits it once "a" ends; r2 is full. Entrants of 1-6
    pods, unbounded or declaring 10 min (backfill: they end before "a") or 2 h, arrive while
    Kueue evicts and requeues "big" and the controller restarts. Whatever the order: the pods in
    r1 of every entrant that is not backfill leave "big" its 12 GPUs once "a" ends."""
    asyncio.run(_play(plan))


async def _play(plan: list[tuple[str, int | None, int | None]]) -> None:
    now = [START]
    knobs = {"reservation_after_seconds": 60}
    h = harness(wall=clock(now), settings=knobs)
    holder = await blocked_big(h, now)
    await fill_r2(h)
    version = 100
    staying: dict[str, int] = {}  # entrant -> its pods in r1 that "big" must fit beside
    for i, (op, pods, runtime) in enumerate(plan):
        version += 1
        if op == ENTER:
            assert pods is not None
            name = f"e{i}"
            obj = with_runtime(wl(name, pods, uid=f"uid-{name}"), runtime)
            if (await decide(h, obj))["state"] != "Ready":
                continue
            placed = ready(h, obj)
            placed["status"]["conditions"].append(
                mk.condition("Admitted", reason="Admitted", message="", time=now[0].strftime("%Y-%m-%dT%H:%M:%SZ"))
            )
            h.modify_workload(placed)
            backfill = runtime is not None and now[0] + timedelta(seconds=runtime) <= FIT_AT
            if rack_of(h) == "r1" and not backfill:
                staying[name] = pods
            assert sum(staying.values()) + BIG <= R1_GPUS, (plan[: i + 1], staying)
        elif op == EVICT_HOLDER:
            holder = evicted(holder, quota=False) if "admission" in holder["status"] else holder
            holder["metadata"]["resourceVersion"] = str(version)
            h.modify_workload(holder)
        elif op == DECIDE_HOLDER:
            back = requeued(holder, {}, version)
            if "admission" not in back["status"]:
                back = requeued(wl("big", BIG, uid="uid-big"), holder["metadata"]["annotations"], version)
            h.now[0] += 31
            entry = await decide(h, back)
            assert entry["state"] == "Retry", entry
            assert 'rack "r1" is reserved for this workload' in entry["message"], entry
            holder = back
        else:
            # The new process reads every Workload; "big" as the API server has it (its records).
            later = harness(wall=clock(now), settings=knobs)
            for stored in h.informers.workloads.store.values():
                if stored.metadata.name != "big":
                    later.add_workload(stored.model_dump(by_alias=True, exclude_none=True, mode="json"))
            later.add_workload(holder)
            assert later.ctx.reservations.of("ns/big") is not None
            h = later
        now[0] += timedelta(seconds=30)
