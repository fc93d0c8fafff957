"""Reservations (``capacity/reservation``): only a workload blocked by fragmentation gets one, in
the domain where it fits soonest; others enter a reserved domain only as backfill or by leaving
the holder room; the limits per flavor hold."""

from __future__ import annotations

import builders as mk
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from placement_inputs import capacity_of, inputs, requests_of

from kueue_tas.capacity.live import LiveCapacity
from kueue_tas.capacity.reservation import (
    Occupant,
    Reservation,
    ReservationSettings,
    Waiting,
    choose_domain,
    due_reservations,
    expired,
    fragmented,
    place_respecting,
)
from kueue_tas.capacity.rules import UsageEntry
from kueue_tas.capacity.workload_placement import Domain, WorkloadRequests, place_workload
from kueue_tas.topology.assignment import DomainAssignment, TopologyAssignment

RACKS = ["b0-r0", "b0-r1", "b1-r0", "b1-r1"]
R0 = Domain("gpu", mk.RACK, ("b0", "b0-r0"))


def hold(capacity: LiveCapacity, key: str, per_host: dict[str, int]) -> None:
    domains = tuple(DomainAssignment((host,), n) for host, n in sorted(per_host.items()) if n)
    capacity.assume(key, (UsageEntry("gpu", TopologyAssignment((mk.HOST,), domains), {mk.GPU: 1}),))


def rack_request(capacity: LiveCapacity, pods: int) -> WorkloadRequests:
    return requests_of(capacity, inputs(pods, {mk.REQUIRED: mk.RACK}))


def host_request(capacity: LiveCapacity, pods: int) -> WorkloadRequests:
    return requests_of(capacity, inputs(pods, {mk.REQUIRED: mk.HOST}))


def racks_full_but_r0(capacity: LiveCapacity, occupants: dict[str, Occupant]) -> None:
    """Every rack but b0-r0 is full with unbounded workloads."""
    for rack in RACKS[1:]:
        key = f"ns/full-{rack}"
        hold(capacity, key, {f"{rack}-h0": 4, f"{rack}-h1": 4})
        occupants[key] = Occupant(key, None, 8)


def scene() -> tuple[LiveCapacity, dict[str, Occupant]]:
    """b0-r0: "a" (4 pods on h0, ends at 100), "b" (2 pods on h1, ends at 300), 2 GPUs free."""
    capacity = capacity_of()
    occupants: dict[str, Occupant] = {}
    racks_full_but_r0(capacity, occupants)
    hold(capacity, "ns/a", {"b0-r0-h0": 4})
    hold(capacity, "ns/b", {"b0-r0-h1": 2})
    occupants["ns/a"] = Occupant("ns/a", 100.0, 4)
    occupants["ns/b"] = Occupant("ns/b", 300.0, 2)
    return capacity, occupants


def test_fragmented_means_free_in_total_but_in_no_domain() -> None:
    capacity = capacity_of()
    # 4 GPUs free in each rack: 16 in total, no rack holds 8.
    for rack in RACKS:
        hold(capacity, f"ns/{rack}", {f"{rack}-h0": 4})
    assert fragmented(rack_request(capacity, 8), capacity)
    assert not fragmented(rack_request(capacity, 4), capacity)  # it fits: not waiting at all
    assert not fragmented(rack_request(capacity, 17), capacity)  # not free even in total


def test_the_domain_chosen_is_where_the_workload_fits_soonest() -> None:
    capacity, occupants = scene()
    # Rack b1-r1's occupant is bounded too, and ends before b0-r0 would make room for 8.
    occupants["ns/full-b1-r1"] = Occupant("ns/full-b1-r1", 200.0, 8)
    chosen = choose_domain(rack_request(capacity, 8), capacity, occupants)
    assert chosen is not None and chosen.domain == Domain("gpu", mk.RACK, ("b1", "b1-r1"))
    assert chosen.expected_fit == 200.0
    # Taken already: the next soonest is b0-r0 (both a and b must end: 300).
    second = choose_domain(rack_request(capacity, 8), capacity, occupants, taken=[chosen.domain])
    assert second is not None and second.domain == R0 and second.expected_fit == 300.0
    # Six pods need only "a" to end: 100.
    six = choose_domain(rack_request(capacity, 6), capacity, occupants)
    assert six is not None and six.domain == R0 and six.expected_fit == 100.0


def test_an_unbounded_occupant_makes_the_fit_time_unknown() -> None:
    capacity, occupants = scene()
    occupants["ns/b"] = Occupant("ns/b", None, 2)
    chosen = choose_domain(rack_request(capacity, 8), capacity, occupants)
    assert chosen is not None and chosen.expected_fit is None


def test_backfill_enters_a_reserved_domain_only_when_it_ends_before_the_holder_fits() -> None:
    capacity, occupants = scene()
    holder = rack_request(capacity, 8)
    reservation = Reservation("ns/holder", R0, 0.0, expected_fit=300.0)
    entrant = host_request(capacity, 2)
    args = ([reservation], {"ns/holder": holder}, occupants)
    placed, used = place_respecting(entrant, capacity, "ns/e", *args, now=0.0, runtime_s=150.0)
    assert placed.fits and used == reservation
    late, _ = place_respecting(entrant, capacity, "ns/e", *args, now=0.0, runtime_s=400.0)
    assert not late.fits  # it would still run when the holder is expected to fit
    unbounded, _ = place_respecting(entrant, capacity, "ns/e", *args, now=0.0)
    assert not unbounded.fits
    # The holder itself is not kept out of its own domain.
    own, _ = place_respecting(host_request(capacity, 2), capacity, "ns/holder", *args, now=0.0)
    assert own.fits


def test_an_unbounded_workload_enters_when_it_leaves_the_holder_room() -> None:
    """The holder needs 4 of b0-r0's 8 GPUs: once "a" ends there are 6, so 2 more pods there do
    not delay it; a holder needing 6 would then have to wait for "b" too."""
    capacity, occupants = scene()
    entrant = host_request(capacity, 2)
    reservation = Reservation("ns/holder", R0, 0.0, expected_fit=100.0)
    room = place_respecting(
        entrant, capacity, "ns/e", [reservation], {"ns/holder": rack_request(capacity, 4)}, occupants, now=0.0
    )
    assert room[0].fits and room[1] == reservation
    tight = place_respecting(
        entrant, capacity, "ns/e", [reservation], {"ns/holder": rack_request(capacity, 6)}, occupants, now=0.0
    )
    assert not tight[0].fits
    # The probe left nothing held behind.
    assert place_workload(rack_request(capacity, 2), capacity).fits


def test_due_reservations_wait_their_turn_and_keep_the_limits() -> None:
    capacity = capacity_of()
    occupants: dict[str, Occupant] = {}
    for i, rack in enumerate(RACKS):
        key = f"ns/half-{rack}"
        hold(capacity, key, {f"{rack}-h0": 4})
        occupants[key] = Occupant(key, 100.0 * (i + 1), 4)
    eight = rack_request(capacity, 8)
    waiting = [Waiting(f"ns/big{i}", eight, since=float(i)) for i in range(6)]
    knobs = ReservationSettings(reserve_after_s=60.0, max_per_flavor=3, max_without_runtimes=1)
    assert due_reservations(waiting, capacity, [], occupants, now=30.0, settings=knobs) == []
    got = due_reservations(waiting, capacity, [], occupants, now=100.0, settings=knobs)
    assert [r.holder for r in got] == ["ns/big0", "ns/big1", "ns/big2"]  # oldest first, three at most
    assert len({r.domain for r in got}) == 3
    assert [r.expected_fit for r in got] == [100.0, 200.0, 300.0]  # soonest domains first
    # Unknown fit times: one at most.
    unbounded = {k: Occupant(k, None, o.pods) for k, o in occupants.items()}
    got = due_reservations(waiting, capacity, [], unbounded, now=100.0, settings=knobs)
    assert [r.holder for r in got] == ["ns/big0"]
    # Not fragmented (not free even in total): no reservation, although a rack would make room.
    for rack in RACKS:
        hold(capacity, f"ns/more-{rack}", {f"{rack}-h1": 3})
        occupants[f"ns/more-{rack}"] = Occupant(f"ns/more-{rack}", 50.0, 3)
    assert choose_domain(eight, capacity, occupants) is not None
    assert due_reservations(waiting, capacity, [], occupants, now=1000.0, settings=knobs) == []
    assert expired(got, now=100.0 + knobs.timeout_s, settings=knobs) == got
    assert expired(got, now=100.0 + knobs.timeout_s - 1, settings=knobs) == []


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    held=st.lists(st.tuples(st.sampled_from(["h0", "h1"]), st.integers(1, 4), st.integers(1, 9)), max_size=4),
    holder_pods=st.integers(1, 8),
    entrant_pods=st.integers(1, 4),
)
def test_a_reservation_never_blocks_a_workload_that_leaves_the_holder_room(
    held: list[tuple[str, int, int]], holder_pods: int, entrant_pods: int
) -> None:
    """Oracle, written apart from the module: take b0-r0's occupants away in the order they end
    and count how many must go before the holder fits, with and without the entrant there."""
    capacity = capacity_of()
    occupants: dict[str, Occupant] = {}
    racks_full_but_r0(capacity, occupants)
    free = {"h0": 4, "h1": 4}
    for i, (host, n, end) in enumerate(held):
        n = min(n, free[host])
        if n == 0:
            continue
        free[host] -= n
        hold(capacity, f"ns/o{i}", {f"b0-r0-{host}": n})
        occupants[f"ns/o{i}"] = Occupant(f"ns/o{i}", float(end * 100), n)
    holder = rack_request(capacity, holder_pods)
    entrant = requests_of(capacity, inputs(entrant_pods, {mk.REQUIRED: mk.RACK}))
    reservation = Reservation("ns/holder", R0, 0.0, expected_fit=None)
    placed, used = place_respecting(entrant, capacity, "ns/e", [reservation], {"ns/holder": holder}, occupants, now=0.0)

    # Ending order as documented: by expected end, the larger first among those ending together.
    inside = sorted(
        (o for k, o in occupants.items() if not k.startswith("ns/full")),
        key=lambda o: (o.expected_end or 0, -o.pods, o.key),
    )
    others = [Domain("gpu", mk.RACK, (r.split("-")[0], r)) for r in RACKS[1:]]

    def first_room() -> int | None:
        for n in range(len(inside) + 1):
            if place_workload(holder, capacity, without=[o.key for o in inside[:n]], closed=others).fits:
                return n
        return None

    before = first_room()
    room_now = place_workload(entrant, capacity, closed=others)
    if not room_now.fits:
        assert not placed.fits  # nowhere to go at all
        return
    capacity.assume("ns/e", room_now.usage(entrant))
    after = first_room()
    capacity.forget("ns/e")
    leaves_room = before is None or (after is not None and after <= before)
    assert placed.fits == leaves_room
    if placed.fits:
        assert used == reservation
