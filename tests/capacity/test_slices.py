"""Elastic slices in the live capacity model: a new slice and the slice it replaces are charged
their union while both are held, the replaced one is hidden only from the new slice's decision,
and capacity is never given twice nor left behind."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from vocab import GPU

from kueue_tas.api.constants import HOSTNAME_LABEL
from kueue_tas.capacity.live import LiveCapacity
from kueue_tas.capacity.rules import FlavorSpec, UsageEntry, uncovered_usage
from kueue_tas.topology.assignment import DomainAssignment, TopologyAssignment
from kueue_tas.topology.explain.free import domain_free
from kueue_tas.topology.model import NodeInfo

HOSTS = ("h0", "h1", "h2")
ALLOCATABLE = 100  # large enough that free capacity never floors at zero: every charge shows
OLD, NEW, OTHER = "ns/old", "ns/new", "ns/other"


def on(*domains: tuple[str, int], flavor: str = "gpu", gpus: int = 1) -> tuple[UsageEntry, ...]:
    assignment = TopologyAssignment((HOSTNAME_LABEL,), tuple(DomainAssignment((h,), n) for h, n in domains))
    return (UsageEntry(flavor, assignment, {GPU: gpus}),)


def live() -> LiveCapacity:
    cap = LiveCapacity()
    cap.set_flavors({"gpu": FlavorSpec("gpu", "topo", (HOSTNAME_LABEL,), {})})
    for h in (*HOSTS, "spare"):
        cap.upsert_node(NodeInfo(h, {HOSTNAME_LABEL: h}, {GPU: ALLOCATABLE, "pods": 1000}))
    return cap


def used(cap: LiveCapacity) -> dict[str, int]:
    snap = cap.snapshot("gpu")
    assert snap is not None
    free = domain_free(snap)
    taken = {h: ALLOCATABLE - free[(HOSTNAME_LABEL, h, GPU)] for h in HOSTS}
    return {h: n for h, n in taken.items() if n}


def rebuilt(cap: LiveCapacity, n: int) -> dict[str, int]:
    """``used`` after a node change makes the model rebuild its snapshots from its tables."""
    cap.upsert_node(NodeInfo("spare", {HOSTNAME_LABEL: "spare"}, {GPU: ALLOCATABLE + n, "pods": 1000}))
    return used(cap)


# --- the rule --------------------------------------------------------------------------------------


def test_uncovered_usage_is_what_the_new_slice_does_not_keep() -> None:
    old = on(("h0", 4), ("h1", 2))
    assert uncovered_usage(old, on(("h0", 4), ("h1", 2), ("h2", 3))) == ()  # scale up keeps every old pod
    assert uncovered_usage(old, on(("h0", 3))) == on(("h0", 1), ("h1", 2))  # scale down keeps a prefix
    assert uncovered_usage(old, ()) == old
    # Other pods (requests, flavor) cover nothing.
    assert uncovered_usage(old, on(("h0", 4), gpus=2)) == old
    assert uncovered_usage(old, on(("h0", 4), flavor="other")) == old
    # A pod of the new slice covers one old pod only, across PodSets alike.
    assert uncovered_usage((*on(("h0", 2)), *on(("h0", 2))), on(("h0", 3))) == on(("h0", 1))


# --- the pair in the live model --------------------------------------------------------------------


def test_scale_up_pair_is_charged_once() -> None:
    cap = live()
    cap.set_workload_usage(OLD, on(("h0", 4)))
    new = on(("h0", 4), ("h1", 2))
    cap.assume(NEW, new, replaces=OLD)
    assert used(cap) == {"h0": 4, "h1": 2}, "the kept pods were charged twice"
    cap.set_workload_usage(NEW, new, replaces=OLD)  # our Ready observed
    assert used(cap) == {"h0": 4, "h1": 2} == rebuilt(cap, 1)
    cap.remove_workload_usage(OLD)  # Kueue finished the old slice
    assert used(cap) == {"h0": 4, "h1": 2} == rebuilt(cap, 2)
    cap.remove_workload_usage(NEW)
    assert used(cap) == {} == rebuilt(cap, 3)


def test_scale_down_pair_holds_the_old_slice_until_it_is_finished() -> None:
    cap = live()
    cap.set_workload_usage(OLD, on(("h0", 4), ("h1", 2)))
    cap.assume(NEW, on(("h0", 3)), replaces=OLD)
    assert used(cap) == {"h0": 4, "h1": 2}  # the old pods still run until Kueue finishes that slice
    cap.remove_workload_usage(OLD)
    assert used(cap) == {"h0": 3} == rebuilt(cap, 1)


def test_a_dropped_decision_gives_the_old_slice_back_its_whole_charge() -> None:
    cap = live()
    cap.set_workload_usage(OLD, on(("h0", 4)))
    cap.assume(NEW, on(("h0", 4), ("h1", 2)), replaces=OLD)
    cap.forget(NEW)  # a conflicting write
    assert used(cap) == {"h0": 4} == rebuilt(cap, 1)
    assert not cap.holds(NEW)


def test_without_hides_the_old_slice_from_one_decision_only() -> None:
    cap = live()
    cap.set_workload_usage(OLD, on(("h0", 4)))
    cap.set_workload_usage(OTHER, on(("h2", 1)))
    with cap.without(OLD):
        assert used(cap) == {"h2": 1}
        assert rebuilt(cap, 1) == {"h2": 1}  # a rebuild during the decision hides it too
        cap.set_workload_usage(OLD, on(("h0", 5)))  # an event during the decision
        assert used(cap) == {"h2": 1}
    assert used(cap) == {"h0": 5, "h2": 1} == rebuilt(cap, 2)
    with cap.without(None):
        assert used(cap) == {"h0": 5, "h2": 1}


OPS = st.sampled_from(("assume", "commit", "forget", "remove"))
ASSIGNMENTS = st.lists(st.tuples(st.sampled_from(HOSTS), st.integers(1, 5)), max_size=3, unique_by=lambda d: d[0])


@settings(max_examples=150, deadline=None)
@given(
    st.lists(st.tuples(st.sampled_from((OLD, NEW, OTHER)), OPS, ASSIGNMENTS, st.booleans(), st.booleans()), max_size=14)
)
def test_usage_is_never_given_twice_nor_left_behind(
    ops: list[tuple[str, str, list[tuple[str, int]], bool, bool]],
) -> None:
    """Any order of events on a replaced slice, its replacement (held as one, or not: gates off)
    and a bystander: each host is charged the bystander's pods plus, for a linked pair, the
    larger of the two slices' pods there (each kept pod once), else their sum; whether read
    incrementally, after a rebuild or inside the new slice's decision."""
    cap = live()
    held: dict[str, dict[str, dict[str, int]]] = {k: {"assumed": {}, "committed": {}} for k in (OLD, NEW, OTHER)}
    linked = False
    for step, (key, op, domains, link, decide_new) in enumerate(ops):
        entries = on(*domains)
        replaces = OLD if key == NEW and link else None
        if op == "assume":
            cap.assume(key, entries, replaces=replaces)
            held[key]["assumed"] = dict(domains)
        elif op == "commit":
            cap.set_workload_usage(key, entries, replaces=replaces)
            held[key] = {"assumed": {}, "committed": dict(domains)}
        elif op == "forget":
            cap.forget(key)
            held[key]["assumed"] = {}
        else:
            cap.remove_workload_usage(key)
            held[key]["committed"] = {}
        if key == NEW and op in ("assume", "commit"):
            linked = link

        def pods(k: str, h: str) -> int:
            return held[k]["assumed"].get(h, 0) + held[k]["committed"].get(h, 0)

        pair = max if linked else (lambda a, b: a + b)
        want = {h: pods(OTHER, h) + pair(pods(OLD, h), pods(NEW, h)) for h in HOSTS}
        assert used(cap) == {h: n for h, n in want.items() if n}
        if decide_new:
            with cap.without(OLD):
                hidden = {h: pods(OTHER, h) + pods(NEW, h) for h in HOSTS}
                assert used(cap) == {h: n for h, n in hidden.items() if n}
        assert rebuilt(cap, step) == {h: n for h, n in want.items() if n}
    for key in held:
        cap.forget(key)
        cap.remove_workload_usage(key)
    assert used(cap) == {} == rebuilt(cap, len(ops) + 1)
