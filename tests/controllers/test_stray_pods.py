"""Stray pods after a node repair (chaos run seed 19): a deleted node's slots are moved, the node
comes back with its pods still bound to it; those pods fill no slot, so after the grace they
are deleted (UID precondition), the Job controller recreates them gated, and the ungater sends
them into the repaired slots. Never within the grace, never while our record is tampered with,
never a pod that fills a slot.

The node repair rig of ``test_node_repair`` (hosts h1, h2 in rack r1, h3, h4 in rack r2, 8 GPUs
each; ns/wl asks for 12 one-GPU pods in one rack: 8 on one host, 4 on another) on a fake clock.
"""

from __future__ import annotations

import copy
from typing import Any

import builders as mk
import pytest
from admission_harness import CHECK, ungater
from repair_harness import KEY, LABELS, Strays, rig, roles
from vocab import HOST, RACK

from kueue_tas.api import constants as c
from kueue_tas.capacity.assignment_record import assignment_tampering
from kueue_tas.controllers.stray.plan import stray_pods
from kueue_tas.controllers.stray.reconciler import EVENT_REASON, FAILED_REASON
from kueue_tas.kube.errors import Conflict, Forbidden, NotFound, ServerError, TooManyRequests
from kueue_tas.kube.slim import slim_pod
from kueue_tas.topology.assignment import DomainAssignment, TopologyAssignment
from kueue_tas.topology.codec.codec import encode_assignment_annotation


@pytest.fixture
def s() -> Strays:
    return Strays(rig())


async def repaired_after_delete(s: Strays) -> tuple[str, str, str, list[str]]:
    """Admit ns/wl with its pods running, delete its 4-pod host, repair onto spare h5; returns
    (deleted host, 8-pod host, rack, names of the pods on the deleted host)."""
    r = s.r
    before = await r.admit()
    small, big, rack = roles(before)
    s.running({big: 8}, prefix="big")
    on_small = s.running({small: 4}, prefix="small")
    r.node("h5", rack, event="ADDED")
    assert await s.judge() is None and s.deleter.deleted == []  # every pod fills a slot
    r.h.informers.nodes.handle_event("DELETED", mk.node(small, labels={RACK: rack, "pool": "gpu"}))
    await r.scan()  # a deleted node fails at once
    r.observe()
    assert r.hosts() == {big: 8, "h5": 4}
    return small, big, rack, on_small


def node_returns(s: Strays, host: str, rack: str, pods: list[str]) -> None:
    """The node object is re-created with the same name; its pods were never garbage-collected."""
    s.r.node(host, rack, event="ADDED")
    for name in pods:
        s.pod(name, host, event="MODIFIED", rv="2")


async def test_seed_19_stray_pods_of_a_returning_node_are_replaced_into_the_repaired_slots(s: Strays) -> None:
    r = s.r
    small, _, rack, on_small = await repaired_after_delete(s)
    # The node is back before the reaper looks (it was busy, or leadership was changing).
    node_returns(s, small, rack, on_small)
    assert await s.judge() == pytest.approx(5.0)  # stray, within the grace
    assert s.deleter.deleted == []
    r.clock.now += 5
    assert await s.judge() == pytest.approx(30.0)
    assert s.deleter.deleted == [("ns", n, f"uid-{n}") for n in sorted(on_small)]
    assert s.metric() == 4
    warnings = [(obj, kind, m) for obj, kind, reason, m in r.h.events.seen if reason == EVENT_REASON]
    assert len(warnings) == 8 and {kind for _, kind, _ in warnings} == {"Warning"}  # pod and Workload
    first = on_small[0]
    expected = (
        f"pod {first} on node {small} terminated: the assignment of workload ns/wl gives domain {small} "
        "of PodSet main no pods (stray for 5s)"
    )
    assert (f"Pod/{first}", "Warning", expected) in warnings and ("Workload/wl", "Warning", expected) in warnings

    # A second pass before the informer shows the deletes sends nothing again.
    await s.judge()
    assert len(s.deleter.deleted) == 4

    # Kubernetes: the pods terminate and go; the Job controller recreates them, gated.
    for name in on_small:
        s.pod(name, small, event="MODIFIED", rv="3", deleting=True)
    assert await s.judge() is None
    for name in on_small:
        s.pod(name, small, event="DELETED", rv="4", deleting=True)
    for i in range(4):
        s.pod(f"new-{i}", None)
    released, patches = ungater(r.h)
    await released.reconcile(KEY)
    assert sorted(patches) == [f"new-{i}" for i in range(4)]
    domains = {e.domain for e in released.expectations.pending[KEY].values()}
    assert domains == {("h5",)}  # into the repaired slots, never back onto the returned node
    assert len(s.deleter.deleted) == 4  # the 8 pods on the healthy host were never touched
    assert all(not n.startswith("big") for n in s.deleter.names())


async def test_pods_bound_or_pinned_to_a_deleted_node_go_at_once_once_their_slots_moved(s: Strays) -> None:
    """Chaos seed 1188: a pod was released into a host just before the host was deleted; the
    repair moved its slot; the host came back 4 s later and the pod ran there for 10 s (the
    grace started again on a new leader). A pod whose node no longer exists runs nowhere and
    its slot has moved: it is deleted at the first look, before its node can return."""
    r = s.r
    small, _, rack, on_small = await repaired_after_delete(s)
    s.pod("late", None, selector={HOST: small})  # released (pinned) to the host, never bound
    assert await s.judge() == pytest.approx(30.0)  # deletes sent: the informer is given time
    assert s.deleter.names() == sorted([*on_small, "late"])
    messages = {m for _, _, reason, m in r.h.events.seen if reason == EVENT_REASON}
    assert (
        f"pod late (not yet bound) terminated: the assignment of workload ns/wl gives domain {small} of PodSet "
        f"main no pods (its node {small} no longer exists)"
    ) in messages
    # The node comes back before the deletes show: nothing is sent twice.
    node_returns(s, small, rack, on_small)
    await s.judge()
    assert len(s.deleter.deleted) == 5


async def test_a_pod_pinned_to_a_deleted_node_whose_slot_has_not_moved_is_left_alone(s: Strays) -> None:
    r = s.r
    before = await r.admit()
    small, big, rack = roles(before)
    s.running({big: 8, small: 4})
    # Deleted, not yet repaired (no spare host fits yet): the pods keep their slots.
    r.h.informers.nodes.handle_event("DELETED", mk.node(small, labels={RACK: rack, "pool": "gpu"}))
    assert await s.judge() is None and s.deleter.deleted == []


async def test_a_pod_is_not_deleted_within_the_grace_and_a_break_restarts_it(s: Strays) -> None:
    r = s.r
    before = await r.admit()
    small, big, _ = roles(before)
    s.running({big: 8, small: 4})
    # One pod too many on the 8-pod host: a replacement released just as another pod ends. The
    # slots go to the first pods by name, so the surplus is the last one.
    s.pod("z-late", big)
    assert await s.judge() == pytest.approx(5.0)
    r.clock.now += 4.9
    assert await s.judge() == pytest.approx(0.1)
    assert s.deleter.deleted == []
    # The pod it replaces finishes: the late one fills the slot; nothing is stray.
    s.pod(f"p-{big}-0", big, event="MODIFIED", rv="2", phase="Succeeded")
    assert await s.judge() is None
    r.clock.now += 60
    assert await s.judge() is None and s.deleter.deleted == []
    # Stray again later: a fresh grace, not the old one.
    s.pod("z-later", big)
    assert await s.judge() == pytest.approx(5.0)
    r.clock.now += 5
    await s.judge()
    assert s.deleter.names() == ["z-later"]  # the surplus pod, never one filling a slot


async def test_nothing_is_deleted_while_the_record_is_tampered_with(s: Strays) -> None:
    r = s.r
    await repaired_after_delete(s)
    obj = copy.deepcopy(r.obj)
    # Someone edits the annotation: every pod elsewhere than h5 is stray by the edited text.
    edited = TopologyAssignment((HOST,), (DomainAssignment(("h5",), 12),))
    obj["metadata"]["annotations"][c.TOPOLOGY_ASSIGNMENT_ANNOTATION] = encode_assignment_annotation([("main", edited)])
    obj["metadata"]["resourceVersion"] = "77"
    r.h.modify_workload(obj)
    assert assignment_tampering(r.wl(), {CHECK}) is not None
    assert await s.judge() is None
    r.clock.now += 60
    assert await s.judge() is None
    assert s.deleter.deleted == []


async def test_while_a_repair_is_being_written_only_a_pod_neither_assignment_keeps_goes(s: Strays) -> None:
    """Either assignment may be the one that stands once the repair's writes settle (an
    annotation write with no answer is only settled a minute later): a pod one of them keeps
    stays, a pod neither keeps goes after the grace as always (DST seed 3301264: a pod released
    to a cordoned host stayed bound outside every assignment for 80 s while two repairs of its
    workload were written, the second one's write lost)."""
    r = s.r
    before = await r.admit()
    small, big, rack = roles(before)
    s.running({big: 8})
    r.node("h5", rack, event="ADDED")
    r.node(small, rack, ready=False)
    s.pod("gone", small, deleting=True)  # evicted by the taint manager, stuck on the dead node
    s.pod("z-late", big)  # one too many on the 8-pod host: no slot in either assignment
    r.clock.now += 30
    await r.scan()  # decided and written; the informer has not shown it yet
    assert r.h.capacity.holds_extra(KEY) and r.rewrites.writing(KEY)
    assert await s.judge() == pytest.approx(5.0)
    r.clock.now += 5
    await s.judge()
    assert s.deleter.names() == ["z-late"]  # "gone" fills a slot of the assignment being replaced


async def test_delete_failures_follow_the_error_rules(s: Strays) -> None:
    r = s.r
    small, _, rack, on_small = await repaired_after_delete(s)
    node_returns(s, small, rack, on_small)
    await s.judge()
    r.clock.now += 5
    s.deleter.fail = [Forbidden(403, "Forbidden", "no"), ServerError(503), NotFound(404), Conflict(409)]
    # Refused: a Warning, looked at again in 30 s; no answer: again in 2 s; gone, or re-created
    # under its name: done (not sent again until the informer has had time to show it).
    assert await s.judge() == pytest.approx(2.0)
    assert s.deleter.names() == []
    failed = [m for _, _, reason, m in r.h.events.seen if reason == FAILED_REASON]
    assert failed == [f"could not terminate stray pod {on_small[0]}: 403 Forbidden: no"] * 2  # pod, Workload
    s.deleter.fail = [TooManyRequests(429, retry_after=7.0), Forbidden(403, "Forbidden", "no")]
    r.clock.now += 2
    assert await s.judge() == pytest.approx(7.0)  # the server's Retry-After
    assert len([1 for *_, reason, _ in r.h.events.seen if reason == FAILED_REASON]) == 4
    s.deleter.fail = [Forbidden(403, "Forbidden", "no")] * 2
    r.clock.now += 30
    await s.judge()
    assert len([1 for *_, reason, _ in r.h.events.seen if reason == FAILED_REASON]) == 4  # once per pod
    assert s.deleter.names() == sorted(on_small[2:])
    assert s.metric() == 2


def test_the_rule_never_names_a_pod_that_fills_a_slot_or_one_it_cannot_place() -> None:
    ta = TopologyAssignment((HOST,), (DomainAssignment(("h1",), 1),))

    def pod(name: str, node: str, selector: dict[str, str] | None, **kw: Any) -> Any:
        return slim_pod(mk.pod(name, node, namespace="ns", labels=LABELS, selector=selector, **kw))

    pods = [
        pod("a", "h1", {HOST: "h1"}),
        pod("b", "h2", {HOST: "h2"}),
        pod("c", "h9", None),  # no selector, node unknown: cannot tell its domain
        pod("d", "h2", {HOST: "h2"}, deleting=True),
        pod("e", "h2", {HOST: "h2"}, phase="Failed"),
    ]
    labels = {"h1": {HOST: "h1"}, "h2": {HOST: "h2"}}
    found = stray_pods({"main": ta}, pods, labels.get, lambda _key: False)
    assert [(x.pod.name, x.domain, x.count) for x in found] == [("b", ("h2",), 0)]
    assert stray_pods({"main": ta}, pods, labels.get, lambda _key: True) == []
