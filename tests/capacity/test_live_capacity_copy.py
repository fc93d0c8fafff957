"""``LiveCapacity.copy_for_reading``: what the controller's topology map builds from in a worker
thread while events keep changing the live model. The copy must read as the live model did when
it was taken, and nothing fed to the live model afterwards may reach it (nor the reverse)."""

from __future__ import annotations

import builders as mk
import map_scene as scene
import numpy as np

from kueue_tas.api.workload import Workload
from kueue_tas.capacity.feed import feed_pod, feed_workload
from kueue_tas.capacity.trial_placement import trial_placement
from kueue_tas.controllers.informers import slim_node
from kueue_tas.kube.slim import slim_pod
from kueue_tas.topology.assignment import DomainAssignment, TopologyAssignment
from kueue_tas.topology.explain.free import leaf_free


def test_the_copy_reads_as_the_live_model_did_and_stays_so() -> None:
    tas = scene.kueue()
    live = scene.capacity(tas)
    before = leaf_free(live.snapshot("gpu")).copy()  # type: ignore[arg-type]
    big = next(w for w in scene.workloads() if w.name == "big")
    trial_before = trial_placement(big, live, tas.check_flavors)

    copy = live.copy_for_reading()
    snap = copy.snapshot("gpu")
    assert snap is not None and snap is not live.snapshot("gpu")
    assert dict(copy.flavors()) == dict(live.flavors()) and dict(copy.nodes()) == dict(live.nodes())
    assert np.array_equal(leaf_free(snap), before)
    assert trial_placement(big, copy, tas.check_flavors) == trial_before

    # The live model moves on: a pod takes 6 GPUs of h31, a new workload is admitted on h32,
    # a node joins b2-r3 and h11 leaves.
    feed_pod(live, slim_pod(mk.pod("late", "h31", namespace="ns", gpus=6)))
    admitted = mk.workload(
        "late-wl",
        1,
        namespace="ns",
        uid="uid-late",
        gpus=8,
        assignment=TopologyAssignment((scene.HOST,), (DomainAssignment(("h32",), 1),)),
        admitted_flavor="gpu",
        check_state="Ready",
        conditions=[mk.condition("QuotaReserved"), mk.condition("Admitted")],
    )
    feed_workload(live, Workload.model_validate(admitted), tas.checks)
    live.upsert_node(slim_node(mk.node("h33", labels={scene.BLOCK: "b2", scene.RACK: "b2-r3", "pool": "a"}, gpus=8)))
    live.delete_node("h11")
    moved = live.snapshot("gpu")
    assert moved is not None and not np.array_equal(leaf_free(moved), before)

    assert np.array_equal(leaf_free(snap), before)
    assert "h33" not in copy.nodes() and "h11" in copy.nodes()
    assert copy.snapshot("gpu") is snap, "the copy never rebuilds from tables it does not hold"
    assert trial_placement(big, copy, tas.check_flavors) == trial_before

    # Reading the copy (placing on it) leaves the live model alone, too.
    after = leaf_free(moved).copy()
    snap.capacity.vector({"example.com/new-resource": 1})  # adds a column to the copy only
    assert "example.com/new-resource" not in moved.capacity.columns
    assert np.array_equal(leaf_free(moved), after)
