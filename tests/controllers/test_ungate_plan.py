"""The ungater's pod-to-domain rules: exact counts whatever state the pods are in."""

from __future__ import annotations

from collections import Counter

from hypothesis import given
from hypothesis import strategies as st
from vocab import HOST

from kueue_tas.controllers.ungate.plan import PodView, plan_releases
from kueue_tas.topology.assignment import DomainAssignment, TopologyAssignment

A = TopologyAssignment(
    (HOST,), (DomainAssignment(("x1",), 2), DomainAssignment(("x2",), 3), DomainAssignment(("x3",), 1))
)


def gated(i: int, idx: int | None = None) -> PodView:
    return PodView(f"u{i}", f"p{i}", True, completion_index=idx, created=f"t{i:03d}")


def running(i: int, host: str, idx: int | None = None) -> PodView:
    return PodView(f"u{i}", f"p{i}", False, {HOST: host}, completion_index=idx, created=f"t{i:03d}")


def hosts(releases: list) -> Counter[str]:  # type: ignore[type-arg]
    return Counter(r.node_selector[HOST] for r in releases)


def test_greedy_fills_domains_in_assignment_order() -> None:
    rel = plan_releases(A, [gated(i) for i in range(6)], count=6)
    assert hosts(rel) == {"x1": 2, "x2": 3, "x3": 1}
    assert [r.pod.name for r in rel[:2]] == ["p0", "p1"]


def test_greedy_counts_already_released_pods() -> None:
    pods = [running(0, "x2"), running(1, "x2"), gated(2), gated(3), gated(4), gated(5)]
    assert hosts(plan_releases(A, pods, count=6)) == {"x1": 2, "x2": 1, "x3": 1}


def test_replacement_goes_to_freed_slot() -> None:
    # p1 on x1 failed and is gone from the live list; its replacement p9 must go to x1.
    pods = [running(0, "x1"), running(2, "x2"), running(3, "x2"), running(4, "x2"), running(5, "x3"), gated(9)]
    rel = plan_releases(A, pods, count=6)
    assert [(r.pod.name, r.node_selector[HOST]) for r in rel] == [("p9", "x1")]


def test_in_flight_releases_are_not_repeated_or_overfilled() -> None:
    pods = [gated(i) for i in range(6)]
    first = plan_releases(A, pods, count=6)
    in_flight = {r.pod.uid: (r.node_selector[HOST],) for r in first[:4]}
    second = plan_releases(A, pods, count=6, in_flight=in_flight)
    assert {r.pod.uid for r in second}.isdisjoint(in_flight)
    assert hosts(second) + Counter(v[0] for v in in_flight.values()) == {"x1": 2, "x2": 3, "x3": 1}


def test_rank_mode_keeps_consecutive_ranks_together() -> None:
    pods = [gated(i, idx=5 - i) for i in range(6)]
    rel = plan_releases(A, pods, count=6)
    by_index = {r.pod.completion_index: r.node_selector[HOST] for r in rel}
    assert by_index == {0: "x1", 1: "x1", 2: "x2", 3: "x2", 4: "x2", 5: "x3"}


def test_rank_mode_jobset_uses_job_index() -> None:
    pods = [PodView(f"u{j}{i}", f"p{j}{i}", True, completion_index=i, job_index=j) for j in range(2) for i in range(3)]
    rel = plan_releases(A, pods, count=6, sub_groups=2)
    got = {(r.pod.job_index, r.pod.completion_index): r.node_selector[HOST] for r in rel}
    assert got[(0, 0)] == "x1" and got[(0, 2)] == "x2" and got[(1, 2)] == "x3"


def test_rank_collision_falls_back_to_greedy() -> None:
    pods = [gated(0, idx=1), gated(1, idx=1), gated(2, idx=2)]
    assert hosts(plan_releases(A, pods, count=6)) == {"x1": 2, "x2": 1}


@given(
    st.lists(st.integers(1, 4), min_size=1, max_size=5),
    st.lists(st.tuples(st.booleans(), st.integers(0, 5)), max_size=25),
    st.booleans(),
)
def test_never_more_pods_than_a_domain_holds(
    counts: list[int], states: list[tuple[bool, int]], with_rank: bool
) -> None:
    assignment = TopologyAssignment((HOST,), tuple(DomainAssignment((f"x{i}",), c) for i, c in enumerate(counts)))
    total = sum(counts)
    pods = []
    for i, (is_gated, host) in enumerate(states):
        idx = i if with_rank else None
        if is_gated:
            pods.append(gated(i, idx))
        else:
            pods.append(running(i, f"x{host % len(counts)}", idx))
    rel = plan_releases(assignment, pods, count=total)
    live = Counter(p.node_selector[HOST] for p in pods if not p.gated) + hosts(rel)
    for i, c in enumerate(counts):
        already = sum(1 for p in pods if not p.gated and p.node_selector[HOST] == f"x{i}")
        assert live[f"x{i}"] <= max(c, already), (counts, states)
    assert len({r.pod.uid for r in rel}) == len(rel)
    assert all(r.pod.gated for r in rel)
