"""Topology-driven preemption's victim choice (``capacity/preemption``): the cheapest set in the
cost order (highest victim priority, then work lost, then count), checked against brute force
on small clusters; nothing when no set makes room; the live model untouched."""

from __future__ import annotations

import itertools
from typing import Any

import builders as mk
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from placement_inputs import capacity_of, inputs, requests_of

from kueue_tas.capacity.live import LiveCapacity
from kueue_tas.capacity.preemption import Candidate, cost_of, find_preemption, search_levels
from kueue_tas.capacity.rules import UsageEntry
from kueue_tas.capacity.workload_placement import Domain, WorkloadRequests, place_workload
from kueue_tas.topology.assignment import DomainAssignment, TopologyAssignment

HOSTS = [f"b{b}-r{r}-h{h}" for b in range(2) for r in range(2) for h in range(2)]
GPUS_PER_HOST = 4


def hold(capacity: LiveCapacity, key: str, per_host: dict[str, int]) -> None:
    domains = tuple(DomainAssignment((host,), n) for host, n in sorted(per_host.items()) if n)
    entry = UsageEntry("gpu", TopologyAssignment((mk.HOST,), domains), {mk.GPU: 1})
    capacity.assume(key, (entry,))


def rack_of(host: str) -> str:
    return host.rsplit("-h", 1)[0]


def brute_force(
    requests: WorkloadRequests, capacity: LiveCapacity, candidates: list[Candidate], max_victims: int
) -> tuple[int, float, int] | None:
    best: tuple[int, float, int] | None = None
    for n in range(1, max_victims + 1):
        for subset in itertools.combinations(candidates, n):
            if place_workload(requests, capacity, without=[c.key for c in subset]).fits:
                cost = cost_of(subset)
                best = cost if best is None or cost < best else best
    return best


@st.composite
def admitted(draw: st.DrawFn) -> list[tuple[dict[str, int], int, int]]:
    """Up to 6 workloads, each on 1-3 hosts within what the hosts have left: (per host, priority,
    work)."""
    free = dict.fromkeys(HOSTS, GPUS_PER_HOST)
    out: list[tuple[dict[str, int], int, int]] = []
    for _ in range(draw(st.integers(1, 6))):
        hosts = draw(st.lists(st.sampled_from(HOSTS), min_size=1, max_size=3, unique=True))
        per_host = {h: draw(st.integers(0, free[h])) for h in hosts}
        if not any(per_host.values()):
            continue
        for h, n in per_host.items():
            free[h] -= n
        out.append((per_host, draw(st.integers(0, 2)), draw(st.integers(1, 20))))
    return out


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    workloads=admitted(),
    pods=st.integers(1, 16),
    level=st.sampled_from([mk.RACK, mk.BLOCK, mk.HOST]),
    max_victims=st.integers(1, 4),
)
def test_the_choice_is_the_cheapest_set_brute_force_finds(
    workloads: list[tuple[dict[str, int], int, int]], pods: int, level: str, max_victims: int
) -> None:
    capacity = capacity_of()
    candidates = []
    for i, (per_host, priority, work) in enumerate(workloads):
        hold(capacity, f"ns/w{i}", per_host)
        candidates.append(Candidate(f"ns/w{i}", priority, float(work)))
    requests = requests_of(capacity, inputs(pods, {mk.REQUIRED: level}))
    if place_workload(requests, capacity).fits:
        return  # nothing to preempt for
    expected = brute_force(requests, capacity, candidates, max_victims)
    found = find_preemption(requests, capacity, candidates, max_victims=max_victims)
    if expected is None:
        assert found is None
        return
    assert found is not None and found.exact
    assert found.cost == expected
    assert len(found.victims) <= max_victims
    # The answer is real: evicting exactly these lets it fit, in the domain named.
    again = place_workload(requests, capacity, without=[c.key for c in found.victims])
    assert again.fits
    depth = [mk.BLOCK, mk.RACK, mk.HOST].index(level)
    for assignment in found.placement.assignments().values():
        for d in assignment.domains:
            host = d.values[-1]
            path = (host.split("-")[0], rack_of(host), host)
            assert path[: depth + 1] == found.domain.values
    # The live model was not changed by the search.
    assert not place_workload(requests, capacity).fits


def test_nothing_when_evicting_every_candidate_makes_no_room() -> None:
    """A 9-pod rack request can never fit a 8-GPU rack: no victims, however cheap."""
    capacity = capacity_of()
    hold(capacity, "ns/low", {"b0-r0-h0": 4})
    requests = requests_of(capacity, inputs(9, {mk.REQUIRED: mk.RACK}))
    assert find_preemption(requests, capacity, [Candidate("ns/low", 0, 1.0)]) is None


def test_lower_priority_beats_less_work_and_work_beats_count() -> None:
    """Every rack is full. Rack b0-r0 holds one priority-1 workload (1 unit of work); b0-r1 two
    priority-0 ones (50 each); b1-r0 one priority-0 workload (200); b1-r1 three priority-0 ones
    (20 each). An 8-pod rack request clears b1-r1: priority 0 before 1, then 60 < 100 < 200
    units of work lost, although it takes the most victims."""
    capacity = capacity_of()
    layout: dict[str, list[tuple[dict[str, int], int, float]]] = {
        "b0-r0": [({"b0-r0-h0": 4, "b0-r0-h1": 4}, 1, 1.0)],
        "b0-r1": [({"b0-r1-h0": 4}, 0, 50.0), ({"b0-r1-h1": 4}, 0, 50.0)],
        "b1-r0": [({"b1-r0-h0": 4, "b1-r0-h1": 4}, 0, 200.0)],
        "b1-r1": [({"b1-r1-h0": 4}, 0, 20.0), ({"b1-r1-h1": 2}, 0, 20.0), ({"b1-r1-h1": 2}, 0, 20.0)],
    }
    candidates = []
    for rack, held in layout.items():
        for i, (per_host, priority, work) in enumerate(held):
            hold(capacity, f"ns/{rack}-{i}", per_host)
            candidates.append(Candidate(f"ns/{rack}-{i}", priority, work))
    requests = requests_of(capacity, inputs(8, {mk.REQUIRED: mk.RACK}))
    found = find_preemption(requests, capacity, candidates)
    assert found is not None
    assert found.domain == Domain("gpu", mk.RACK, ("b1", "b1-r1"))
    assert {c.key for c in found.victims} == {"ns/b1-r1-0", "ns/b1-r1-1", "ns/b1-r1-2"}
    # With at most two victims, b0-r1's pair (100) is the cheapest left.
    two = find_preemption(requests, capacity, candidates, max_victims=2)
    assert two is not None and {c.key for c in two.victims} == {"ns/b0-r1-0", "ns/b0-r1-1"}


def test_a_partly_needed_domain_evicts_only_what_makes_room() -> None:
    """A 4-pod rack request and the one rack with room to clear holding 2 + 2 + 4 pods: the 4-pod
    workload alone makes room, unless it costs more than the two 2-pod ones together."""
    capacity = capacity_of()
    for rack in ("b0-r1", "b1-r0", "b1-r1"):
        hold(capacity, f"ns/other-{rack}", {f"{rack}-h0": 4, f"{rack}-h1": 4})
    hold(capacity, "ns/a", {"b0-r0-h0": 2})
    hold(capacity, "ns/b", {"b0-r0-h0": 2})
    hold(capacity, "ns/c", {"b0-r0-h1": 4})
    requests = requests_of(capacity, inputs(4, {mk.REQUIRED: mk.RACK}))
    cheap_c = [Candidate("ns/a", 0, 10.0), Candidate("ns/b", 0, 10.0), Candidate("ns/c", 0, 15.0)]
    found = find_preemption(requests, capacity, cheap_c)
    assert found is not None and [c.key for c in found.victims] == ["ns/c"]
    dear_c = [Candidate("ns/a", 0, 10.0), Candidate("ns/b", 0, 10.0), Candidate("ns/c", 0, 25.0)]
    found = find_preemption(requests, capacity, dear_c)
    assert found is not None and {c.key for c in found.victims} == {"ns/a", "ns/b"}


def test_a_tiny_budget_still_answers_but_says_it_is_not_exact() -> None:
    capacity = capacity_of()
    for i, host in enumerate(HOSTS):
        hold(capacity, f"ns/w{i}", {host: 4})
    candidates = [Candidate(f"ns/w{i}", 0, float(10 - i)) for i in range(len(HOSTS))]
    requests = requests_of(capacity, inputs(8, {mk.REQUIRED: mk.RACK}))
    full = find_preemption(requests, capacity, candidates)
    assert full is not None and full.exact
    cut = find_preemption(requests, capacity, candidates, budget=4)
    assert cut is not None and not cut.exact
    assert place_workload(requests, capacity, without=[c.key for c in cut.victims]).fits


def test_search_levels_follow_the_request() -> None:
    capacity = capacity_of()
    levels = [mk.BLOCK, mk.RACK, mk.HOST]

    def levels_for(annotations: dict[str, str], scope: dict[str, Any] | None = None) -> list[str]:
        return search_levels(requests_of(capacity, inputs(2, annotations), scope=scope), levels)

    assert levels_for({mk.REQUIRED: mk.RACK}) == [mk.RACK]
    assert levels_for({mk.PREFERRED: mk.RACK}) == [mk.RACK, mk.BLOCK]
    assert levels_for({}) == [mk.BLOCK]
    assert levels_for({mk.PREFERRED: mk.HOST}, {"kueue-tas.io/workload-required-topology": mk.BLOCK}) == [mk.BLOCK]
