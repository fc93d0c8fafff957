"""Issue 12, defect 1: a check whose flavors cannot be bound (Topology missing or deleted, a
flavor put on two Topologies, the flavor or the check's parameters missing) must never answer
Ready "no PodSet needs a topology assignment": the pods would be charged nowhere (double
booking). The entry stays Pending with the problem named, a Warning Event says it, and the
configuration change that fixes it decides the workload again."""

from __future__ import annotations

import builders as mk
from admission_harness import CHECK, Harness, drain, harness, workload
from vocab import GPU, LEVEL_NAMES, RACK

from kueue_tas.api import constants as c
from kueue_tas.api.workload import Workload
from kueue_tas.controllers.check_flavors import unusable_flavors
from kueue_tas.controllers.decide import Outcome, decide

PENDING_REASON = "TopologyUnavailable"


async def decided_pending(h: Harness, message: str) -> None:
    """One reconcile of ns/wl writes a Pending entry with ``message`` and a Warning Event, and
    holds no capacity."""
    free = h.free_gpus()
    assert await h.admission.reconcile("ns/wl") is None
    assert [(e["state"], e["message"]) for e in h.writes.checks] == [("Pending", message)]
    assert h.events.seen == [("Workload/wl", "Warning", PENDING_REASON, message)]
    assert h.writes.annotations == [] and h.writes.gated == []
    assert not h.capacity.holds("ns/wl") and h.free_gpus() == free


async def test_missing_topology_never_ready() -> None:
    h = harness(topology=False)
    h.add_workload(workload())
    await decided_pending(h, 'PodSet "main": Topology "topo" of ResourceFlavor "gpu" not found')
    # Our Pending entry comes back: nothing is written again (no write loop, no Event storm).
    h.modify_workload(
        workload(check_message=h.writes.checks[0]["message"], resource_version="6"),
    )
    assert await h.admission.reconcile("ns/wl") is None
    assert len(h.writes.checks) == 1 and len(h.events.seen) == 1
    # The Topology appears: the workload is queued and decided again, now Ready.
    await drain(h)
    h.informers.topologies.handle_event("ADDED", mk.topology("topo", (RACK, c.HOSTNAME_LABEL), resource_version="2"))
    assert await drain(h) == ["ns/wl"]
    assert await h.admission.reconcile("ns/wl") is None
    assert h.writes.checks[-1]["state"] == "Ready" and h.capacity.holds("ns/wl")


async def test_deleted_topology_never_ready() -> None:
    h = harness()
    h.informers.topologies.handle_event("DELETED", mk.topology("topo", (RACK, c.HOSTNAME_LABEL), resource_version="1"))
    h.add_workload(workload())
    await decided_pending(h, 'PodSet "main": Topology "topo" of ResourceFlavor "gpu" not found')


async def test_topology_without_levels_never_ready() -> None:
    h = harness()
    h.informers.topologies.handle_event("MODIFIED", mk.topology("topo", (), resource_version="2"))
    h.add_workload(workload())
    await decided_pending(
        h, 'PodSet "main": Topology "topo" of ResourceFlavor "gpu": spec.levels: must have at least 1 item'
    )


async def test_topology_with_malformed_level_names_never_ready_until_mended() -> None:
    """Issue 14: a bad ``kueue-tas.io/level-names`` makes the Topology unusable, as a bad level
    does; mending only the annotation (the spec unchanged) decides the workload again."""
    h = harness()
    bad = mk.topology("topo", (RACK, c.HOSTNAME_LABEL), resource_version="2")
    bad["metadata"]["annotations"] = {LEVEL_NAMES: f"rack={RACK},rack={c.HOSTNAME_LABEL}"}
    h.informers.topologies.handle_event("MODIFIED", bad)
    h.add_workload(workload())
    await decided_pending(
        h,
        'PodSet "main": Topology "topo" of ResourceFlavor "gpu": metadata.annotations[kueue-tas.io/level-names]: '
        f"name 'rack' given twice ({RACK}, {c.HOSTNAME_LABEL})",
    )
    await drain(h)
    good = mk.topology("topo", (RACK, c.HOSTNAME_LABEL), resource_version="3")
    good["metadata"]["annotations"] = {LEVEL_NAMES: f"rack={RACK}"}
    h.informers.topologies.handle_event("MODIFIED", good)
    assert await drain(h) == ["ns/wl"]
    assert await h.admission.reconcile("ns/wl") is None
    assert h.writes.checks[-1]["state"] == "Ready" and h.capacity.holds("ns/wl")


async def test_flavor_on_two_topologies_never_ready() -> None:
    h = harness()
    # A second check of ours puts ``gpu`` on another Topology through another ClusterQueue.
    h.informers.topologies.handle_event("ADDED", mk.topology("other", (RACK,), resource_version="1"))
    h.informers.checks.handle_event("ADDED", mk.admission_check("tas2", "other", resource_version="1"))
    cq2 = mk.cluster_queue("cq2", ("gpu",), {"tas2": ["gpu"]}, covered=(GPU,), resource_version="1")
    h.informers.queues.handle_event("ADDED", cq2)
    h.add_workload(workload())
    await decided_pending(
        h,
        "PodSet \"main\": ResourceFlavor 'gpu': put on Topology 'topo' by AdmissionCheck 'tas' "
        "and on Topology 'other' by AdmissionCheck 'tas2'",
    )


async def test_one_conflicting_flavor_leaves_the_others_governed() -> None:
    h = harness()
    h.informers.flavors.handle_event("ADDED", mk.flavor("spare", {"pool": "gpu"}, resource_version="1"))
    h.informers.topologies.handle_event("ADDED", mk.topology("other", (RACK,), resource_version="1"))
    h.informers.checks.handle_event("ADDED", mk.admission_check("tas2", "other", resource_version="1"))
    cq2 = mk.cluster_queue("cq2", ("spare",), {"tas2": ["spare"]}, covered=(GPU,), resource_version="1")
    cq3 = mk.cluster_queue("cq3", ("spare",), {CHECK: ["spare"]}, covered=(GPU,), resource_version="1")
    h.informers.queues.handle_event("ADDED", cq2)
    h.informers.queues.handle_event("ADDED", cq3)
    h.add_workload(workload())  # on ``gpu``, which only ``tas`` puts on ``topo``
    assert await h.admission.reconcile("ns/wl") is None
    assert h.writes.checks[-1]["state"] == "Ready" and h.capacity.holds("ns/wl")


async def test_missing_flavor_never_ready() -> None:
    h = harness()
    h.informers.flavors.handle_event("DELETED", mk.flavor("gpu", {"pool": "gpu"}, resource_version="1"))
    h.add_workload(workload())
    await decided_pending(h, 'PodSet "main": ResourceFlavor "gpu" not found')


async def test_check_parameters_not_a_topology_never_ready() -> None:
    h = harness()
    h.informers.checks.handle_event("MODIFIED", mk.admission_check(CHECK, None, resource_version="2"))
    h.add_workload(workload())
    await decided_pending(
        h,
        'PodSet "main": AdmissionCheck "tas": spec.parameters must reference a kueue.x-k8s.io Topology '
        "(apiGroup kueue.x-k8s.io, kind Topology)",
    )


async def test_implied_podset_on_an_unbound_flavor_is_pending_too() -> None:
    # No topology annotation at all: the flavor is meant to be ours, so its pods must be charged.
    h = harness(topology=False)
    h.add_workload(workload(podsets=[mk.podset("main", 8)]))
    await decided_pending(h, 'PodSet "main": Topology "topo" of ResourceFlavor "gpu" not found')


def test_unusable_flavors_leaves_governed_ones_out() -> None:
    h = harness()
    ac = h.informers.checks.store.get(CHECK)
    assert ac is not None
    i = h.informers
    args = ({CHECK: ac}, i.queues.store.values(), i.topologies.store.get, i.flavors.store.get)
    assert unusable_flavors(CHECK, *args, {"gpu"}, c.CONTROLLER_NAME) == {}
    # Seen here before the capacity model has it: still not usable.
    assert unusable_flavors(CHECK, *args, set(), c.CONTROLLER_NAME) == {
        "gpu": 'ResourceFlavor "gpu" is not yet in the capacity model'
    }


def test_decide_pending_names_every_podset_of_an_unusable_flavor() -> None:
    h = harness()
    wl = workload(podsets=[mk.podset("a", 2), mk.podset("b", 2)])
    d = decide(Workload.model_validate(wl), {"gpu"}, h.capacity, unusable={"gpu": "broken"})
    assert d.outcome is Outcome.PENDING and d.message == 'PodSets "a", "b": broken' and d.placements == []
