"""Elastic workload slices in the live admission controller, without a cluster
(``admission_harness``), the engine's ``place`` calls recorded through
``LiveCapacity.snapshot_class``.

The controller follows ``plan``'s rule (``kueue_tas.topology.admitted.slice_replacement``): with both
elastic gates on, a new slice replacing a slice our check admitted is placed from that slice's
assignment, whose usage the decision does not see; until Kueue finishes the old slice, the pair
holds the union of their assignments, once.
"""

from __future__ import annotations

from typing import Any

import pytest
from elastic_harness import ELASTIC_ON, OLD_ON_H1, RecordingSnapshot, add, cluster, decide, on, used, workload

from kueue_tas.kube.errors import Conflict
from kueue_tas.topology.features import FeatureGates

# --- gates off: as before ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "gates", [FeatureGates(), FeatureGates({"ElasticJobsViaWorkloadSlices": False, **ELASTIC_ON.overrides})]
)
async def test_with_an_elastic_gate_off_the_new_slice_is_placed_afresh_and_both_are_charged(
    gates: FeatureGates,
) -> None:
    k = cluster(gates)
    add(k, workload("slice-1", 4, "Ready", assignment=OLD_ON_H1))
    add(k, workload("slice-2", 6, replaces="ns/slice-1"))
    assert await decide(k, "slice-2") == ("Retry", None)  # 4 + 6 > 8: the old slice still counts
    assert all("current" not in kw for kw in RecordingSnapshot.calls)
    add(k, workload("slice-2", 4, replaces="ns/slice-1", rv="2"), "MODIFIED")
    assert await decide(k, "slice-2") == ("Ready", on(("h2", 4)))
    add(k, workload("slice-2", 4, "Ready", assignment=on(("h2", 4)), replaces="ns/slice-1", rv="3"), "MODIFIED")
    assert used(k) == {"h1": 4, "h2": 4}


# --- gates on: what plan does ------------------------------------------------------------------------


async def test_scale_up_keeps_the_old_domains_adds_the_delta_and_charges_the_union_once() -> None:
    k = cluster(ELASTIC_ON)
    add(k, workload("slice-1", 4, "Ready", assignment=OLD_ON_H1))
    add(k, workload("big", 5))
    add(k, workload("other", 3))
    add(k, workload("slice-2", 6, replaces="ns/slice-1"))
    assert await decide(k, "big") == ("Retry", None)  # other decisions see the old slice

    state, assignment = await decide(k, "slice-2")
    assert (state, assignment) == ("Ready", on(("h1", 4), ("h2", 2)))  # the old pods stay on h1
    assert RecordingSnapshot.calls[-1]["current"] == {"main": OLD_ON_H1}
    assert RecordingSnapshot.calls[-1]["elastic"] is True
    assert used(k) == {"h1": 4, "h2": 2}, "the kept pods are charged once"
    assert await decide(k, "other") == ("Retry", None)  # 3 > the 2 GPUs left
    # Our Ready comes back: committed, still the union; Kueue then finishes the old slice.
    add(k, workload("slice-2", 6, "Ready", assignment=assignment, replaces="ns/slice-1", rv="2"), "MODIFIED")
    assert used(k) == {"h1": 4, "h2": 2}
    add(k, workload("slice-1", 4, "Ready", assignment=OLD_ON_H1, finished=True, rv="2"), "MODIFIED")
    assert used(k) == {"h1": 4, "h2": 2}
    k.informers.workloads.handle_event("DELETED", workload("slice-1", 4, "Ready", assignment=OLD_ON_H1, rv="3"))
    assert used(k) == {"h1": 4, "h2": 2}


async def test_scale_down_truncates_and_the_old_slice_holds_its_pods_until_it_is_finished() -> None:
    k = cluster(ELASTIC_ON)
    old = on(("h1", 4), ("h2", 2))
    add(k, workload("slice-1", 6, "Ready", assignment=old))
    add(k, workload("slice-2", 3, replaces="ns/slice-1"))
    state, assignment = await decide(k, "slice-2")
    assert (state, assignment) == ("Ready", on(("h1", 3)))
    assert RecordingSnapshot.calls[-1]["current"] == {"main": old}
    assert used(k) == {"h1": 4, "h2": 2}  # the old pods run until Kueue finishes the old slice
    add(k, workload("slice-2", 3, "Ready", assignment=assignment, replaces="ns/slice-1", rv="2"), "MODIFIED")
    assert used(k) == {"h1": 4, "h2": 2}
    add(k, workload("slice-1", 6, "Ready", assignment=old, finished=True, rv="2"), "MODIFIED")
    assert used(k) == {"h1": 3}, "only the new slice is charged"


async def test_a_dropped_decision_for_the_new_slice_gives_the_old_one_its_whole_charge() -> None:
    k = cluster(ELASTIC_ON)
    add(k, workload("slice-1", 4, "Ready", assignment=OLD_ON_H1))
    add(k, workload("slice-2", 3, replaces="ns/slice-1"))
    k.writes.fail_check = Conflict(409, "Conflict", "modified")
    assert await k.admission.reconcile("ns/slice-2") == 0.5
    assert used(k) == {"h1": 4} and not k.capacity.holds("ns/slice-2")


@pytest.mark.parametrize(
    "old",
    [
        workload("slice-1", 4, "Pending", assignment=OLD_ON_H1),  # not Ready
        workload("slice-1", 4, "Ready", assignment=OLD_ON_H1, check="someone-else"),  # not ours
        workload("slice-1", 4, "Ready", assignment=OLD_ON_H1, finished=True),  # finished already
        workload("slice-9", 4, "Ready", assignment=OLD_ON_H1),  # not the one named
    ],
    ids=["not-ready", "not-ours", "finished", "missing"],
)
async def test_naming_a_slice_our_check_does_not_hold_is_an_ordinary_placement(old: dict[str, Any]) -> None:
    k = cluster(ELASTIC_ON)
    add(k, old)
    add(k, workload("slice-2", 4, replaces="ns/slice-1"))
    state, _ = await decide(k, "slice-2")
    assert state == "Ready"
    assert all("current" not in kw for kw in RecordingSnapshot.calls)


async def test_the_decision_does_not_see_the_old_slice_only_what_the_engine_keeps_of_it() -> None:
    k = cluster(ELASTIC_ON)
    add(k, workload("slice-1", 2, "Ready", assignment=on(("h1", 2))))
    add(k, workload("slice-2", 4, replaces="ns/slice-1"))
    # The 2 added pods fit beside the kept ones on h1 only if those are not charged twice.
    assert await decide(k, "slice-2") == ("Ready", on(("h1", 4)))
    assert used(k) == {"h1": 4}
