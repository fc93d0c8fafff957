"""A Workload deleted and created again under its name: the deletion of the earlier one must not
take away what the model holds for the later one (DST faults seed 1003563 at fdcb57a).

The admission reconciler decides from a re-read when its informer lags, so its decision (and the
capacity it assumes) can be for the new Workload while the informer still has to deliver the old
one's deletion. Before the fix that deletion, keyed by namespace/name like everything else, forgot
the new decision's assumption and dropped its write-in-flight record: the next decision was
given the same host (a host with 5 GPUs assigned to admitted workloads, 4 allocatable).
"""

from __future__ import annotations

from admission_harness import GPU, HOST, harness, workload

from kueue_tas.capacity.rules import UsageEntry
from kueue_tas.topology.assignment import DomainAssignment, TopologyAssignment

KEY = "ns/wl"
ON_H1 = (UsageEntry("gpu", TopologyAssignment((HOST,), (DomainAssignment(("h1",), 4),)), {GPU: 1}),)


def test_the_old_workloads_deletion_keeps_the_new_ones_decision() -> None:
    h = harness()
    free = h.free_gpus()
    h.informers.workloads.handle_event("ADDED", workload(uid="old", resource_version="2"))
    h.capacity.assume(KEY, ON_H1, decided_on="10", uid="new")
    h.informers.workloads.handle_event("DELETED", workload(uid="old", resource_version="9"))
    assert h.capacity.assumes(KEY), "the deletion of the earlier Workload forgot the new one's decision"
    assert h.free_gpus() == free - 4
    # The informer catches up with the new Workload; its own deletion does forget the decision.
    h.informers.workloads.handle_event("ADDED", workload(uid="new", resource_version="10"))
    assert h.capacity.assumes(KEY)
    h.informers.workloads.handle_event("DELETED", workload(uid="new", resource_version="11"))
    assert not h.capacity.assumes(KEY) and h.free_gpus() == free


def test_a_decision_with_no_uid_is_forgotten_by_any_deletion_of_the_name() -> None:
    """Nothing says whose it is (a decision recorded without the UID): forgotten, as before."""
    h = harness()
    h.informers.workloads.handle_event("ADDED", workload(uid="old", resource_version="2"))
    h.capacity.assume(KEY, ON_H1, decided_on="10")
    h.informers.workloads.handle_event("DELETED", workload(uid="old", resource_version="9"))
    assert not h.capacity.assumes(KEY)
