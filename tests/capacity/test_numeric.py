"""Huge amounts in the capacity model (issue 12, defect 5, live consequences): int64 cells and
sums saturate instead of wrapping or raising, a change and its reversal always restore the
model, a node whose allocatable no int64 can hold is capped at the most Kubernetes counts and
used (issue 27, defect 8: leaving it out made a Ready node look deleted), and ``decide``
answers with a message instead of raising."""

from __future__ import annotations

import random
import warnings
from collections.abc import Iterator

import builders as mk
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from vocab import BLOCK, HOST, RACK, REQUIRED

from kueue_tas.api import constants as c
from kueue_tas.api.workload import Workload
from kueue_tas.capacity.feed import feed_workload
from kueue_tas.capacity.live import LiveCapacity
from kueue_tas.capacity.rules import FlavorSpec, UsageEntry, UsageError, workload_usage
from kueue_tas.controllers.cache.reconciler import CapacityCache
from kueue_tas.controllers.decide import Outcome, decide
from kueue_tas.controllers.informers import OurChecks, SharedInformers, slim_node
from kueue_tas.runtime.config import Settings
from kueue_tas.runtime.manager import Manager
from kueue_tas.runtime.metrics import Metrics
from kueue_tas.topology.assignment import DomainAssignment, TopologyAssignment
from kueue_tas.topology.engine.capacity_matrix import AMOUNT_LIMIT, SUM_LIMIT, CapacityMatrix, saturating_total
from kueue_tas.topology.engine.snapshot import TopologySnapshot
from kueue_tas.topology.engine.tree import TopologyTree
from kueue_tas.topology.explain.free import domain_free, level_free
from kueue_tas.topology.model import NodeInfo

NEAR_INT64_CORES = "9223372036854775"  # x 1000 millicores: just under 2**63


@pytest.fixture(autouse=True)
def overflow_is_an_error() -> Iterator[None]:
    """NumPy only warns when int64 wraps: in these tests a wrap fails."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        yield


def rack_nodes(cpu: str, n: int = 3, rack: str = "r1") -> list[NodeInfo]:
    raws = [mk.node(f"{rack}-h{i}", labels={BLOCK: "b1", RACK: rack}, gpus=8) for i in range(n)]
    for raw in raws:
        raw["status"]["allocatable"]["cpu"] = cpu
    return [slim_node(raw) for raw in raws]


def live(levels: tuple[str, ...], nodes: list[NodeInfo]) -> LiveCapacity:
    cap = LiveCapacity()
    cap.set_flavors({"gpu": FlavorSpec("gpu", "topo", levels, {})})
    for node in nodes:
        cap.upsert_node(node)
    return cap


def workload(name: str, count: int, cpu: str, level: str = RACK) -> Workload:
    podset = mk.podset("main", count, {REQUIRED: level}, cpu=cpu)
    return Workload.model_validate(
        mk.workload(name, count, podsets=[podset], namespace="ns", queue=None, admitted_flavor="gpu")
    )


# --- decide ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("levels", [(BLOCK, RACK), (BLOCK, RACK, HOST)], ids=["rack-leaves", "host-leaves"])
def test_decide_on_nodes_near_int64_does_not_wrap(levels: tuple[str, ...]) -> None:
    # Three nodes of ~2**63 millicores in one rack: a rack leaf summing them used to wrap negative
    # (the rack looked full); it saturates, and a one-cpu workload is placed.
    cap = live(levels, rack_nodes(NEAR_INT64_CORES))
    d = decide(workload("a", 2, "1"), {"gpu"}, cap)
    assert d.outcome is Outcome.READY, d.message
    snap = cap.snapshot("gpu")
    assert snap is not None
    assert all(int(m.min()) >= 0 for m in level_free(snap))


def test_decide_with_a_request_beyond_what_the_model_holds_is_rejected_naming_podset_and_resource() -> None:
    cap = live((BLOCK, RACK), rack_nodes(NEAR_INT64_CORES))
    d = decide(workload("a", 3, "4611686018427387"), {"gpu"}, cap)  # 2**62 millicores a pod
    assert d.outcome is Outcome.REJECTED
    assert d.message.startswith('PodSet "main" can never fit') and 'resource "cpu"' in d.message


def test_decide_with_a_request_beyond_int64_is_rejected_naming_podset_and_resource() -> None:
    cap = live((BLOCK, RACK), rack_nodes("32"))
    d = decide(workload("a", 1, "9223372036854776"), {"gpu"}, cap)  # > 2**63 - 1 millicores
    assert d.outcome is Outcome.REJECTED
    assert d.message.startswith('PodSet "main": quantity') and "'cpu'" in d.message and "\n" not in d.message


def test_decide_does_not_raise_when_a_trusted_assignment_charges_more_than_int64() -> None:
    # count x request of an admitted (or edited) assignment beyond int64: charging it used to raise
    # OverflowError while the flavor's snapshot was built, inside every decision on the flavor.
    cap = live((BLOCK, RACK, HOST), rack_nodes("32") + rack_nodes("32", rack="r2"))
    huge = TopologyAssignment((HOST,), (DomainAssignment(("r1-h0",), 4),))
    cap.set_workload_usage("ns/huge", (UsageEntry("gpu", huge, {"cpu": 2**62}, "main"),))
    d = decide(workload("b", 2, "1", level=HOST), {"gpu"}, cap)
    assert d.outcome is Outcome.READY, d.message
    assert "r1-h0" not in {dom.values[-1] for p in d.placements for dom in p.assignment.domains}
    cap.remove_workload_usage("ns/huge")
    snap = cap.snapshot("gpu")
    assert snap is not None
    assert domain_free(snap)[(HOST, "r1-h0", "cpu")] == 32_000  # released exactly


# --- a node no int64 can hold, through the controller's informers -----------------------------------


def test_node_with_absurd_allocatable_is_capped_kept_and_its_flavor_still_decides() -> None:
    settings_ = Settings(leader_election=False)
    informers = SharedInformers.register(Manager(None, settings_, Metrics()), settings_.annotation_prefix)
    checks = OurChecks(informers.checks.store, settings_.controller_name)
    cap = LiveCapacity()
    CapacityCache(cap, informers, checks)
    for name in ("h1", "h2", "bad"):
        informers.nodes.handle_event("ADDED", mk.node(name, labels={RACK: "r1", "pool": "gpu"}, gpus=8))
    informers.topologies.handle_event("ADDED", mk.topology("topo", (RACK, HOST)))
    informers.flavors.handle_event("ADDED", mk.flavor("gpu", {"pool": "gpu"}))
    informers.checks.handle_event("ADDED", mk.admission_check("tas", "topo", c.CONTROLLER_NAME))
    informers.queues.handle_event("ADDED", mk.cluster_queue("cq", ("gpu",), {"tas": ["gpu"]}, covered=("cpu",)))
    absurd = mk.node("bad", labels={RACK: "r1", "pool": "gpu"}, allocatable={"cpu": "1e17", "pods": "110"})
    informers.nodes.handle_event("MODIFIED", absurd)  # 10**20 millicores: capped at 2**63 - 1
    assert informers.nodes.stats.transform_errors == 0
    kept = informers.nodes.store.get("bad")
    assert kept is not None and kept.allocatable["cpu"] == 2**63 - 1
    snap = cap.snapshot("gpu")
    assert snap is not None and set(snap.tree.leaf_by_node_name) == {"h1", "h2", "bad"}
    assert domain_free(snap)[(RACK, "r1", "cpu")] == AMOUNT_LIMIT + 2 * 32_000  # saturated, never wrapped
    d = decide(workload("a", 16, "1"), {"gpu"}, cap)
    assert d.outcome is Outcome.READY, d.message


# --- the matrix: saturating cells, exact reversal, saturating sums ----------------------------------

AMOUNTS = st.one_of(st.integers(0, 2**20), st.integers(2**50, 2**64), st.integers(0, 2**80))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 2), st.sampled_from(["cpu", "x"]), AMOUNTS), max_size=12), st.randoms())
def test_cells_saturate_and_every_change_reverses_exactly(
    changes: list[tuple[int, str, int]], rnd: random.Random
) -> None:
    nodes = [NodeInfo(f"n{i}", {HOST: f"n{i}"}, {"cpu": 2**62, "x": 7}) for i in range(3)]
    tree = TopologyTree.build((HOST,), nodes)
    cap = CapacityMatrix(tree)
    before = (cap.free.copy(), cap.tas.copy())
    exact_free = {(leaf, r): 2**62 if r == "cpu" else 7 for leaf in range(3) for r in ("cpu", "x")}
    for leaf, resource, amount in changes:
        cap.add_non_tas_usage(f"n{leaf}", {resource: amount})
        cap.add_tas_usage(leaf, {resource: amount})
        exact_free[(leaf, resource)] -= amount
        col = cap.columns[resource]
        assert int(cap.free[leaf, col]) == max(-AMOUNT_LIMIT, min(AMOUNT_LIMIT, exact_free[(leaf, resource)]))
        remaining = cap.remaining(simulate_empty=False, assumed=None)
        assert remaining.dtype == np.int64 and int(remaining.min()) >= -2 * AMOUNT_LIMIT
    rnd.shuffle(changes)
    for leaf, resource, amount in changes:
        cap.add_non_tas_usage(f"n{leaf}", {resource: amount}, sign=-1)
        cap.add_tas_usage(leaf, {resource: amount}, sign=-1)
    assert np.array_equal(cap.free, before[0]) and np.array_equal(cap.tas, before[1])


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(0, AMOUNT_LIMIT), min_size=1, max_size=40))
def test_sums_across_leaves_saturate_instead_of_wrapping(amounts: list[int]) -> None:
    nodes = [NodeInfo(f"n{i}", {RACK: f"r{i % 3}", HOST: f"n{i}"}, {"x": a}) for i, a in enumerate(amounts)]
    tree = TopologyTree.build((RACK, HOST), nodes)
    cap = CapacityMatrix(tree)
    total = int(saturating_total(cap.free)[cap.columns["x"]])
    assert total == min(sum(amounts), SUM_LIMIT) or (sum(amounts) > SUM_LIMIT * 0.999 and total >= SUM_LIMIT * 0.999)
    assert cap.totals()["x"] == total
    racks = level_free_of(cap)
    for r in range(3):
        true = sum(a for i, a in enumerate(amounts) if i % 3 == r)
        assert racks.get(f"r{r}", 0) == min(true, SUM_LIMIT) or true > SUM_LIMIT * 0.999


def level_free_of(cap: CapacityMatrix) -> dict[str, int]:
    snap = TopologySnapshot("t", cap.tree, cap)
    top = level_free(snap)[0]
    return {v[0]: int(top[i, cap.columns["x"]]) for i, v in enumerate(cap.tree.levels[0].values)}


def test_ten_thousand_nodes_at_2_to_the_53_sum_without_wrapping() -> None:
    nodes = [NodeInfo(f"n{i}", {RACK: f"r{i // 100}", HOST: f"n{i}"}, {"x": 2**53}) for i in range(10_000)]
    cap = CapacityMatrix(TopologyTree.build((RACK, HOST), nodes))
    assert cap.totals()["x"] == SUM_LIMIT  # 2**53 x 10,000 is beyond int64: saturated, not negative
    assert set(level_free_of(cap).values()) == {100 * 2**53}


def test_trusted_workload_whose_template_is_out_of_range_keeps_its_slots_full() -> None:
    # We never admit such a template (decide rejects it), but an edit can make one: the controller
    # must neither fail its informer handler (nor its resync loop) nor free the slots.
    on_h0 = TopologyAssignment((HOST,), (DomainAssignment(("r1-h0",), 1),))
    podset = mk.podset("main", 1, {REQUIRED: HOST}, cpu="1e20")
    wl = Workload.model_validate(
        mk.workload(
            "edited",
            1,
            podsets=[podset],
            namespace="ns",
            queue=None,
            admitted_flavor="gpu",
            assignment=on_h0,
            check_state="Ready",
        )
    )
    cap = live((BLOCK, RACK, HOST), rack_nodes("32", n=2))
    feed_workload(cap, wl, {"tas"})
    with pytest.raises(UsageError, match="out of range"):
        workload_usage(wl, {"tas"}, {"gpu"}, strict=True)  # plan: one line naming the field
    d = decide(workload("b", 1, "1", level=HOST), {"gpu"}, cap)
    assert d.outcome is Outcome.READY, d.message
    assert {dom.values[-1] for p in d.placements for dom in p.assignment.domains} == {"r1-h1"}
