"""Issue 27, defect 8: a Node with an allocatable amount above 2**63 - 1 milli-units (``10Ei`` of an
extended resource) is usable. Its amount is clamped to the most Kubernetes counts
(``api.quantity.MAX_MILLI_UNITS`` milli-units: more than any pod can request, since a request
beyond it is refused); it used to fail the node transform, so the node looked deleted and node
repair moved workloads off a Ready node."""

from __future__ import annotations

import builders as mk
from admission_harness import ALLOCATABLE
from repair_harness import rig, roles
from vocab import HOST, RACK, REQUIRED

from kueue_tas.api.quantity import MAX_MILLI_UNITS
from kueue_tas.api.workload import Workload
from kueue_tas.capacity.live import LiveCapacity
from kueue_tas.capacity.rules import FlavorSpec
from kueue_tas.controllers.decide import Outcome, decide
from kueue_tas.controllers.informers import SharedInformers, slim_node
from kueue_tas.runtime.config import Settings
from kueue_tas.runtime.manager import Manager
from kueue_tas.runtime.metrics import Metrics
from kueue_tas.topology.explain.free import domain_free

HUGE = "example.com/huge"
MOST = MAX_MILLI_UNITS // 1000  # base units of a non-cpu resource


def huge_node(name: str, rack: str = "r1", amount: str = "10Ei") -> dict[str, object]:
    return mk.node(
        name, labels={RACK: rack, "pool": "gpu"}, allocatable={**ALLOCATABLE, HUGE: amount}, resource_version="3"
    )


def test_the_node_transform_clamps_an_amount_beyond_int64_milli_units() -> None:
    node = slim_node(huge_node("h1"))
    assert node.allocatable[HUGE] == MOST
    assert node.allocatable["cpu"] == 16_000  # the other amounts exactly
    cpu = slim_node(mk.node("h2", allocatable={"cpu": "1e17", "pods": "110"}))
    assert cpu.allocatable["cpu"] == MAX_MILLI_UNITS  # cpu in millicores
    assert slim_node(huge_node("h3", amount="-10Ei")).allocatable[HUGE] == -MOST


def test_the_node_informer_keeps_such_a_node() -> None:
    settings = Settings(leader_election=False)
    informers = SharedInformers.register(Manager(None, settings, Metrics()), settings.annotation_prefix)
    informers.nodes.handle_event("ADDED", huge_node("h1"))
    assert informers.nodes.stats.transform_errors == 0
    stored = informers.nodes.store.get("h1")
    assert stored is not None and stored.allocatable[HUGE] == MOST


def test_the_capacity_model_places_on_it_and_its_totals_stay_exact() -> None:
    cap = LiveCapacity()
    cap.set_flavors({"gpu": FlavorSpec("gpu", "topo", (RACK, HOST), {"pool": "gpu"})})
    for name in ("h1", "h2"):
        cap.upsert_node(slim_node(huge_node(name)))
    podset = mk.podset("main", 3, {REQUIRED: HOST}, gpus=0)
    podset["template"]["spec"]["containers"][0]["resources"] = {"requests": {HUGE: "1"}}
    wl = Workload.model_validate(
        mk.workload("a", 3, podsets=[podset], namespace="ns", queue=None, admitted_flavor={HUGE: "gpu"})
    )
    d = decide(wl, {"gpu"}, cap)
    assert d.outcome is Outcome.READY, d.message
    snap = cap.snapshot("gpu")
    assert snap is not None
    free = domain_free(snap)
    assert free[(HOST, "h1", HUGE)] == MOST and free[(RACK, "r1", HUGE)] == 2 * MOST  # no wrap, no float


async def test_node_repair_leaves_a_workload_on_such_a_node_alone() -> None:
    r = rig()
    small, big, rack = roles(await r.admit())
    r.h.informers.nodes.handle_event("MODIFIED", huge_node(small, rack))
    assert r.h.informers.nodes.store.get(small) is not None  # not taken for deleted
    assert await r.scan() is None
    assert len(r.h.writes.annotations) == 1  # nothing moved off the Ready node
    assert r.h.metrics.registry.get_sample_value("kueue_tas_failed_nodes_seen_total") == 0
    assert r.hosts()[small] == 4 and r.hosts()[big] == 8
