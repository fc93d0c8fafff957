"""The invariant checker's logic on crafted histories (no cluster): each invariant passes a clean
history and catches a crafted violation; stream-ordering noise shorter than the confirmation
window is not a violation."""

from __future__ import annotations

from typing import Any

from e2e.invariants import InvariantChecker
from kueue_tas.api import constants as kc
from kueue_tas.topology.assignment import DomainAssignment, TopologyAssignment
from kueue_tas.topology.codec.codec import encode_assignment_annotation

CHECK = "ac"
HOST = kc.HOSTNAME_LABEL
RACK = "rack"


def node(name: str, rack: str = "r1", gpu: int = 8) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": {HOST: name, RACK: rack}},
        "status": {"allocatable": {"cpu": "32", "nvidia.com/gpu": str(gpu), "pods": "110"}},
    }


def workload(
    uid: str,
    hosts: dict[str, int] | None,
    *,
    state: str = "Ready",
    message: str = "",
    gpu: int = 1,
    finished: bool = False,
) -> dict[str, Any]:
    ann = {}
    if hosts is not None:
        a = TopologyAssignment((HOST,), tuple(DomainAssignment((h,), n) for h, n in hosts.items()))
        ann[kc.TOPOLOGY_ASSIGNMENT_ANNOTATION] = encode_assignment_annotation([("main", a)])
    conds = [{"type": "Finished", "status": "True"}] if finished else []
    container = {"name": "c", "resources": {"requests": {"nvidia.com/gpu": str(gpu)}}}
    return {
        "metadata": {"name": f"wl-{uid}", "namespace": "ns", "uid": uid, "annotations": ann},
        "spec": {"podSets": [{"name": "main", "count": 4, "template": {"spec": {"containers": [container]}}}]},
        "status": {
            "conditions": conds,
            "admissionChecks": [{"name": CHECK, "state": state, "message": message}],
        },
    }


def pod(
    uid: str,
    wl: str,
    *,
    gated: bool = False,
    host: str | None = None,
    node_name: str | None = None,
    phase: str = "Pending",
    gpu: int = 1,
    deleting: bool = False,
) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "name": f"p-{uid}",
        "namespace": "ns",
        "uid": uid,
        "labels": {kc.WORKLOAD_LABEL: wl, kc.PODSET_LABEL: "main"},
    }
    if deleting:
        meta["deletionTimestamp"] = "2025-01-01T00:00:00Z"
    spec: dict[str, Any] = {"containers": [{"name": "c", "resources": {"requests": {"nvidia.com/gpu": str(gpu)}}}]}
    if gated:
        spec["schedulingGates"] = [{"name": kc.SCHEDULING_GATE}]
    if host:
        spec["nodeSelector"] = {HOST: host}
    if node_name:
        spec["nodeName"] = node_name
    return {"metadata": meta, "spec": spec, "status": {"phase": phase}}


def checker(*hosts: str) -> InvariantChecker:
    c = InvariantChecker({CHECK}, pending_bound_s=30, confirm_s=2)
    for h in hosts:
        c.node_event("ADDED", node(h), 0)
    return c


def kinds(c: InvariantChecker) -> list[str]:
    return [v.kind for v in c.violations]


def test_clean_history_passes_every_check() -> None:
    c = checker("h1", "h2")
    c.workload_event("ADDED", workload("w", None, state="Pending", message=""), 0)
    c.tick(0.5)  # Kueue added our entry; we answer within the bound
    c.workload_event("MODIFIED", workload("w", {"h1": 2, "h2": 2}), 1)
    for i in range(4):
        c.pod_event("ADDED", pod(f"p{i}", "w", gated=True), 1)
    for i in range(4):
        h = "h1" if i < 2 else "h2"
        c.pod_event("MODIFIED", pod(f"p{i}", "w", host=h), 2)
        c.pod_event("MODIFIED", pod(f"p{i}", "w", host=h, node_name=h, phase="Running"), 3)
    for t in range(3, 10):
        c.tick(float(t))
    for i in range(4):
        h = "h1" if i < 2 else "h2"
        c.pod_event("MODIFIED", pod(f"p{i}", "w", host=h, node_name=h, phase="Succeeded"), 10)
    c.workload_event("MODIFIED", workload("w", {"h1": 2, "h2": 2}, finished=True), 11)
    c.finish(50)
    assert c.violations == []
    assert {k for k, n in c.checks.items() if n} == {
        "domain-overfill",
        "node-overcommit",
        "double-booking",
        "bad-ungate",
        "silent-pending",
    }


def test_domain_overfill_caught_after_confirmation() -> None:
    c = checker("h1", "h2")
    c.workload_event("ADDED", workload("w", {"h1": 2, "h2": 2}), 0)
    for i in range(3):
        c.pod_event("ADDED", pod(f"p{i}", "w", host="h1", node_name="h1", phase="Running"), 0)
    c.tick(0.5)
    assert c.violations == []  # not yet confirmed
    c.tick(3)
    assert kinds(c) == ["domain-overfill"]
    assert "3 live pods in domain h1, the assignment gives it 2" in c.violations[0].detail


def test_overfill_at_a_higher_level_via_node_labels() -> None:
    """Pods counted by the node they are bound to: 3 pods in rack r1 whose hosts get 1 + 1 (and h3 0)."""
    c = checker("h1", "h2", "h3")
    a = TopologyAssignment((RACK, HOST), (DomainAssignment(("r1", "h1"), 1), DomainAssignment(("r1", "h2"), 1)))
    wl = workload("w", None)
    wl["metadata"]["annotations"][kc.TOPOLOGY_ASSIGNMENT_ANNOTATION] = encode_assignment_annotation([("main", a)])
    c.workload_event("ADDED", wl, 0)
    for i, h in enumerate(("h1", "h2", "h3")):
        c.pod_event("ADDED", pod(f"p{i}", "w", node_name=h, phase="Running"), 0)
    c.tick(0)
    c.tick(3)
    subjects = sorted(v.subject for v in c.violations)
    assert subjects == ["ns/wl-w[main] (whole topology)", "ns/wl-w[main] r1", "ns/wl-w[main] r1/h3"], subjects


def test_transient_overfill_from_stream_lag_is_not_a_violation() -> None:
    c = checker("h1")
    c.workload_event("ADDED", workload("w", {"h1": 2}), 0)
    for i in range(2):
        c.pod_event("ADDED", pod(f"p{i}", "w", host="h1", node_name="h1", phase="Running"), 0)
    # A replacement shows up before the deletion of the pod it replaces.
    c.pod_event("ADDED", pod("p2", "w", host="h1", node_name="h1", phase="Running"), 1)
    c.tick(1)
    c.pod_event("MODIFIED", pod("p0", "w", host="h1", node_name="h1", phase="Running", deleting=True), 1.5)
    c.tick(4)
    assert c.violations == []


def test_node_overcommit_caught() -> None:
    c = checker("h1")
    c.pod_event("ADDED", pod("a", "x", node_name="h1", phase="Running", gpu=5), 0)
    c.pod_event("ADDED", pod("b", "y", node_name="h1", phase="Running", gpu=5), 0)
    c.tick(0)
    c.tick(2.5)
    assert kinds(c) == ["node-overcommit"]
    assert "nvidia.com/gpu 10 > 8" in c.violations[0].detail


def test_terminal_pods_do_not_hold_their_node() -> None:
    c = checker("h1")
    c.pod_event("ADDED", pod("a", "x", node_name="h1", phase="Succeeded", gpu=5), 0)
    c.pod_event("ADDED", pod("b", "y", node_name="h1", phase="Running", gpu=5), 0)
    c.tick(0)
    c.tick(3)
    assert c.violations == []


def test_double_booking_caught_when_the_second_becomes_trusted() -> None:
    c = checker("h1")
    c.workload_event("ADDED", workload("a", {"h1": 6}), 0)
    c.workload_event("ADDED", workload("b", {"h1": 6}, state="Pending", message="waiting"), 1)
    assert c.violations == []
    c.workload_event("MODIFIED", workload("b", {"h1": 6}), 2)
    assert kinds(c) == ["double-booking"]
    assert "nvidia.com/gpu 12 > 8" in c.violations[0].detail


def rack_workload(uid: str, pods: int, *, state: str = "Ready") -> dict[str, Any]:
    """A workload decided while the Topology's lowest level was the rack: 1 GPU per pod in r1."""
    wl = workload(uid, None, state=state, message="" if state == "Ready" else "waiting")
    a = TopologyAssignment((RACK,), (DomainAssignment(("r1",), pods),))
    wl["metadata"]["annotations"][kc.TOPOLOGY_ASSIGNMENT_ANNOTATION] = encode_assignment_annotation([("main", a)])
    return wl


def test_a_node_deleted_just_before_the_decision_still_counts_for_it() -> None:
    """Chaos seed 4048: a host of rack r1 was deleted while a new leader, its node informer some
    tenths of a second behind on a loaded machine, filled the rack on the view that still held
    it. The decision was right on what the controller could see; the node failing after it is
    the repair's matter, not capacity given twice."""
    c = checker("h1", "h2")
    c.node_event("DELETED", node("h2"), 10.0)
    c.workload_event("ADDED", rack_workload("a", 12, state="Pending"), 10.5)  # annotated 0.5 s later
    c.workload_event("MODIFIED", rack_workload("a", 12), 11.0)
    assert c.violations == [] and c.checks["double-booking"] == 1


def test_a_node_deleted_well_before_the_decision_counts_no_more() -> None:
    c = checker("h1", "h2")
    c.node_event("DELETED", node("h2"), 10.0)
    c.workload_event("ADDED", rack_workload("a", 12, state="Pending"), 10.0 + c.decision_lag_s + 0.1)
    c.workload_event("MODIFIED", rack_workload("a", 12), 20.0)
    assert kinds(c) == ["double-booking"]
    assert "nvidia.com/gpu 12 > 8" in c.violations[0].detail and "ns/wl-a[main]@r1x12" in c.violations[0].detail


def test_a_readmission_on_the_same_text_is_judged_from_now() -> None:
    """Evicted, then re-admitted on an identical assignment: the annotation write changed
    nothing, so its first sighting says nothing about when the new decision was made."""
    c = checker("h1", "h2")
    c.workload_event("ADDED", rack_workload("a", 12), 1.0)
    c.workload_event("MODIFIED", rack_workload("a", 12, state="Pending"), 5.0)  # evicted
    c.node_event("DELETED", node("h2"), 10.0)
    c.workload_event("MODIFIED", rack_workload("a", 12), 20.0)
    assert kinds(c) == ["double-booking"] and "nvidia.com/gpu 12 > 8" in c.violations[0].detail


def test_a_node_back_after_its_deletion_counts_once() -> None:
    c = checker("h1", "h2")
    c.node_event("DELETED", node("h2"), 10.0)
    c.node_event("ADDED", node("h2"), 10.2)
    c.workload_event("ADDED", rack_workload("a", 16), 10.5)
    c.workload_event("ADDED", rack_workload("b", 1), 30.0)
    assert kinds(c) == ["double-booking"] and "nvidia.com/gpu 17 > 16" in c.violations[0].detail


def test_capacity_released_by_a_finished_workload_can_be_reused() -> None:
    c = checker("h1")
    c.workload_event("ADDED", workload("a", {"h1": 6}), 0)
    c.workload_event("MODIFIED", workload("a", {"h1": 6}, finished=True), 1)
    c.workload_event("ADDED", workload("b", {"h1": 6}), 2)
    c.workload_event("DELETED", workload("a", {"h1": 6}, finished=True), 3)
    c.workload_event("ADDED", workload("c", {"h1": 2}), 4)
    assert c.violations == []
    assert c.checks["double-booking"] == 3  # a, b and c each checked once, when trusted


def test_a_relist_judges_a_newly_trusted_assignment_against_the_whole_list() -> None:
    """Chaos seed 1038: after an apiserver restart the Workload list showed b newly Ready on h1
    and a, listed after it, finished meanwhile; judged item by item, b was counted beside a's
    stale assignment (12 > 8), a double booking that never was."""
    c = checker("h1")
    c.workload_event("ADDED", workload("a", {"h1": 6}), 0)
    c.workload_event("ADDED", workload("b", {"h1": 6}, state="Pending", message="waiting"), 1)
    c.resync("workloads", [workload("b", {"h1": 6}), workload("a", {"h1": 6}, finished=True)], 2)
    assert c.violations == [] and c.checks["double-booking"] == 2
    # A list that really shows both trusted is still caught.
    c.resync(
        "workloads", [workload("b", {"h1": 6}), workload("a", {"h1": 6}, finished=True), workload("d", {"h1": 4})], 3
    )
    assert kinds(c) == ["double-booking"] and "nvidia.com/gpu 10 > 8" in c.violations[0].detail


def test_ungate_into_a_domain_outside_the_assignment() -> None:
    c = checker("h1", "h2")
    c.workload_event("ADDED", workload("w", {"h1": 2}), 0)
    c.pod_event("ADDED", pod("p", "w", gated=True), 0)
    c.pod_event("MODIFIED", pod("p", "w", host="h2"), 1)
    assert kinds(c) == ["bad-ungate"]
    assert "ungated into h2" in c.violations[0].detail


def test_ungate_seen_before_its_workload_update_is_judged_when_that_arrives() -> None:
    c = checker("h1")
    c.workload_event("ADDED", workload("w", None, state="Pending", message="x"), 0)
    c.pod_event("ADDED", pod("p", "w", gated=True), 0)
    c.pod_event("MODIFIED", pod("p", "w", host="h1"), 1)
    c.tick(1.5)
    c.workload_event("MODIFIED", workload("w", {"h1": 1}), 2)
    c.finish(10)
    assert c.violations == []
    assert c.checks["bad-ungate"] == 1


def test_ungate_of_a_workload_without_assignment() -> None:
    c = checker("h1")
    c.pod_event("ADDED", pod("p", "w", gated=True), 0)
    c.pod_event("MODIFIED", pod("p", "w", host="h1"), 1)
    c.tick(2)
    assert c.violations == []
    c.tick(3.5)
    assert kinds(c) == ["bad-ungate"]
    assert "no assignment of ours" in c.violations[0].detail


def test_pod_ungated_twice() -> None:
    c = checker("h1")
    c.workload_event("ADDED", workload("w", {"h1": 2}), 0)
    c.pod_event("ADDED", pod("p", "w", gated=True), 0)
    c.pod_event("MODIFIED", pod("p", "w", host="h1"), 1)
    c.pod_event("MODIFIED", pod("p", "w", gated=True, host="h1"), 2)
    c.pod_event("MODIFIED", pod("p", "w", host="h1"), 3)
    assert kinds(c) == ["bad-ungate"]
    assert "ungated 2 times" in c.violations[0].detail


def test_silent_pending_beyond_the_bound() -> None:
    c = checker()
    c.workload_event("ADDED", workload("w", None, state="Pending", message=""), 0)
    c.workload_event("ADDED", workload("v", None, state="Retry", message="does not fit"), 0)
    c.tick(0)
    c.tick(29)
    assert c.violations == []
    c.tick(31)
    assert kinds(c) == ["silent-pending"]
    assert c.violations[0].subject == "workload ns/wl-w"


def test_a_message_before_the_bound_clears_silent_pending() -> None:
    c = checker()
    c.workload_event("ADDED", workload("w", None, state="Pending", message=""), 0)
    c.tick(0)
    c.workload_event("MODIFIED", workload("w", None, state="Retry", message="no fit"), 20)
    c.tick(20)
    c.workload_event("MODIFIED", workload("w", None, state="Pending", message=""), 25)
    c.tick(25)
    c.tick(50)
    assert c.violations == []
    c.tick(56)
    assert kinds(c) == ["silent-pending"]


def test_resync_drops_objects_a_broken_watch_missed_deleting() -> None:
    c = checker("h1")
    c.workload_event("ADDED", workload("w", {"h1": 2}), 0)
    for i in range(3):
        c.pod_event("ADDED", pod(f"p{i}", "w", host="h1", node_name="h1", phase="Running"), 0)
    c.tick(0)
    c.resync("pods", [pod(f"p{i}", "w", host="h1", node_name="h1", phase="Running") for i in range(2)], 1)
    c.tick(3)
    assert c.violations == []
    assert len(c.pods) == 2


def test_pods_bound_to_a_deleted_node_count_nowhere() -> None:
    """Seed 255: a node is deleted, the repair moves its slots to another host of the same rack at
    once (as Kueue's does), and the pods still bound to the gone node must not overfill the rack."""
    c = checker("h1", "h2", "h3")
    one = TopologyAssignment((RACK, HOST), (DomainAssignment(("r1", "h1"), 2),))
    moved = TopologyAssignment((RACK, HOST), (DomainAssignment(("r1", "h2"), 2),))
    wl = workload("w", None)
    wl["metadata"]["annotations"][kc.TOPOLOGY_ASSIGNMENT_ANNOTATION] = encode_assignment_annotation([("main", one)])
    c.workload_event("ADDED", wl, 0)
    for i in range(2):
        c.pod_event("ADDED", pod(f"p{i}", "w", node_name="h1", phase="Running"), 0)
    c.node_event("DELETED", node("h1"), 1)
    wl["metadata"]["annotations"][kc.TOPOLOGY_ASSIGNMENT_ANNOTATION] = encode_assignment_annotation([("main", moved)])
    c.workload_event("MODIFIED", wl, 1.5)
    for i in range(2, 4):
        c.pod_event("ADDED", pod(f"p{i}", "w", node_name="h2", phase="Running"), 2)
    for t in (2.0, 3.0, 5.0, 8.0):
        c.tick(t)
    assert c.violations == [], [v.line() for v in c.violations]
    assert c.checks["domain-overfill"] > 0
    # The same pods on a node that still exists do overfill: the exemption is for deleted nodes only.
    c.node_event("ADDED", node("h1"), 9)
    c.tick(9)
    c.tick(12)
    assert c.violations == []  # re-created with them: the reaper's window (see the next test)
    c.tick(20)
    c.tick(23)
    assert set(kinds(c)) == {"domain-overfill"} and any(v.subject.endswith(" r1") for v in c.violations)


def test_ungated_pods_pinned_to_a_deleted_node_count_nowhere() -> None:
    """Chaos seed 451: three pods were ungated into h1 just before h1 was deleted; the repair moved
    their slots and the stray-pod reaper deleted them 5 s later. Unbound, pinned to a node that is
    gone, they were never in the domain."""
    c = checker("h1", "h2")
    c.workload_event("ADDED", workload("w", {"h1": 3}), 0)
    for i in range(3):
        c.pod_event("ADDED", pod(f"p{i}", "w", host="h1"), 0)
    c.node_event("DELETED", node("h1"), 0.5)
    c.workload_event("MODIFIED", workload("w", {"h2": 3}), 1)
    for t in (1.0, 3.0, 6.0):
        c.tick(t)
    assert c.violations == [], [v.line() for v in c.violations]


def test_ungated_pods_pinned_to_a_deleted_eks_named_node_count_nowhere() -> None:
    """The same on an EKS-like pool (issue 27): the pods are pinned by hostname label, the deleted
    Node is named ``h1.ec2.internal``; the checker finds it through the label, not the name."""
    c = InvariantChecker({CHECK}, pending_bound_s=30, confirm_s=2)
    for h in ("h1", "h2"):
        c.node_event("ADDED", eks_node(h), 0)
    c.workload_event("ADDED", workload("w", {"h1": 3}), 0)
    for i in range(3):
        c.pod_event("ADDED", pod(f"p{i}", "w", host="h1"), 0)
    c.node_event("DELETED", eks_node("h1"), 0.5)
    c.workload_event("MODIFIED", workload("w", {"h2": 3}), 1)
    for t in (1.0, 3.0, 6.0):
        c.tick(t)
    assert c.violations == [], [v.line() for v in c.violations]


def eks_node(host: str) -> dict[str, Any]:
    """``node(host)`` named as eksctl names it: the hostname label is not the name."""
    obj = node(host)
    obj["metadata"]["name"] = host + ".ec2.internal"
    return obj


def test_a_node_with_10ei_of_a_resource_is_checked_for_overcommit_by_its_real_amounts() -> None:
    """Issue 27 (defect 8): the amount is capped as the controller caps it, not read as nothing."""
    c = InvariantChecker({CHECK}, pending_bound_s=30, confirm_s=2)
    for name in ("h1", "h2"):
        huge = node(name, gpu=1)
        huge["status"]["allocatable"]["example.com/huge"] = "10Ei"
        c.node_event("ADDED", huge, 0)
    c.workload_event("ADDED", workload("w", {"h1": 1, "h2": 2}), 0)
    c.pod_event("ADDED", pod("p0", "w", host="h1", node_name="h1", phase="Running"), 0)
    for i in (1, 2):
        c.pod_event("ADDED", pod(f"p{i}", "w", host="h2", node_name="h2", phase="Running"), 0)
    for t in (1.0, 4.0):
        c.tick(t)
    # h1 holds what it offers; h2 is asked 2 GPUs of 1.
    assert [v.subject for v in c.violations if v.kind == "node-overcommit"] == ["node h2"]


def test_pods_a_recreated_node_brings_back_count_only_after_the_reapers_window() -> None:
    """Chaos seeds 601 and 702: a node deleted under running pods, their slots moved at once by
    the repair, the node re-created 5 s later with the pods still bound. The stray-pod reaper
    deletes them within its grace; if it did not, the overfill is recorded."""
    c = checker("h1", "h2")
    c.workload_event("ADDED", workload("w", {"h1": 2}), 0)
    for i in range(2):
        c.pod_event("ADDED", pod(f"p{i}", "w", host="h1", node_name="h1", phase="Running"), 0)
    c.node_event("DELETED", node("h1"), 1)
    c.workload_event("MODIFIED", workload("w", {"h2": 2}), 1.5)
    c.node_event("ADDED", node("h1"), 5)
    for t in (5.0, 7.0, 10.0, 14.0):
        c.tick(t)
    assert c.violations == [], [v.line() for v in c.violations]
    for t in (16.0, 19.0):  # past 5 + the window (10 s): the reaper should have deleted them
        c.tick(t)
    assert kinds(c) and set(kinds(c)) == {"domain-overfill"}


def test_a_pod_bound_after_the_node_came_back_is_not_exempt() -> None:
    c = checker("h1", "h2")
    c.workload_event("ADDED", workload("w", {"h2": 2}), 0)
    c.node_event("DELETED", node("h1"), 1)
    c.node_event("ADDED", node("h1"), 2)
    for i in range(2):
        c.pod_event("ADDED", pod(f"p{i}", "w", host="h1", node_name="h1", phase="Running"), 3)
    c.tick(3)
    c.tick(6)
    assert set(kinds(c)) == {"domain-overfill"}


def test_a_pod_pinned_before_the_delete_and_bound_after_the_return_is_the_reapers() -> None:
    """Chaos seed 1188: released (pinned) into h1 just before h1 was deleted, bound when h1 came
    back: the same late pod as one bound before, the reaper's within its window."""
    c = checker("h1", "h2")
    c.workload_event("ADDED", workload("w", {"h1": 1}), 0)
    c.pod_event("ADDED", pod("p0", "w", host="h1"), 0)
    c.node_event("DELETED", node("h1"), 1)
    c.workload_event("MODIFIED", workload("w", {"h2": 1}), 1.5)
    c.node_event("ADDED", node("h1"), 4)
    c.pod_event("MODIFIED", pod("p0", "w", host="h1", node_name="h1", phase="Running"), 5)
    for t in (5.0, 8.0, 12.0):
        c.tick(t)
    assert c.violations == [], [v.line() for v in c.violations]
    for t in (15.0, 18.0):
        c.tick(t)
    assert set(kinds(c)) == {"domain-overfill"}


def test_pinned_pods_of_a_deleted_node_named_unlike_its_hostname_are_not_counted() -> None:
    """EKS: the Node ``ip-10-0-0-1.ec2.internal`` carries hostname ``ip-10-0-0-1``. Pods pinned by
    the hostname selector to a node that was deleted and whose slots moved are not an overfill;
    the monitor finds the node by its label, not by taking the label value as its name."""
    c = InvariantChecker({CHECK}, pending_bound_s=30, confirm_s=2)
    for host in ("ip-10-0-0-1", "ip-10-0-0-2"):
        c.node_event("ADDED", {**node(host), "metadata": {"name": f"{host}.ec2.internal", "labels": {HOST: host}}}, 0)
    c.workload_event("ADDED", workload("w", {"ip-10-0-0-1": 3}), 0)
    for i in range(3):
        c.pod_event("ADDED", pod(f"p{i}", "w", host="ip-10-0-0-1"), 0)
    gone = {**node("ip-10-0-0-1"), "metadata": {"name": "ip-10-0-0-1.ec2.internal", "labels": {HOST: "ip-10-0-0-1"}}}
    c.node_event("DELETED", gone, 0.5)
    c.workload_event("MODIFIED", workload("w", {"ip-10-0-0-2": 3}), 1)
    for t in (1.0, 3.0, 6.0):
        c.tick(t)
    assert c.violations == [], [v.line() for v in c.violations]


def test_a_renamed_gate_is_the_one_that_counts_as_gated() -> None:
    c = InvariantChecker({CHECK}, pending_bound_s=30, confirm_s=2, scheduling_gate="tas.example.com/placement")
    c.node_event("ADDED", node("h1"), 0)
    c.workload_event("ADDED", workload("w", {"h1": 1}), 0)
    renamed = pod("p0", "w")
    renamed["spec"]["schedulingGates"] = [{"name": "tas.example.com/placement"}]
    c.pod_event("ADDED", renamed, 0)
    assert c.pods["p0"].gated
    c.pod_event("MODIFIED", pod("p0", "w", host="h1"), 1)
    assert not c.pods["p0"].gated and c._ungates["p0"] == 1


def test_pods_left_on_a_host_a_repair_took_their_slots_from_are_the_reapers_within_its_window() -> None:
    """Chaos seed 111: pods pinned to h1 were bound just as h1 was cordoned and a node repair
    moved their slots to h2. The stray-pod reaper deletes them within its grace; if it did not,
    the overfill is recorded once the window has passed."""
    c = checker("h1", "h2")
    c.workload_event("ADDED", workload("w", {"h1": 2}), 0)
    for i in range(2):
        c.pod_event("ADDED", pod(f"p{i}", "w", host="h1", node_name="h1", phase="Running"), 0)
    c.workload_event("MODIFIED", workload("w", {"h2": 2}), 1)
    for t in (1.0, 3.0, 6.0, c.resurrection_window_s - 1):
        c.tick(t)
    assert c.violations == [], [v.line() for v in c.violations]
    past = 1 + c.resurrection_window_s  # the reaper's grace + 5 s after the repair
    for t in (past + 0.5, past + 3):
        c.tick(t)
    assert set(kinds(c)) == {"domain-overfill"}


def test_the_reapers_window_waits_while_the_apiserver_is_out_of_sight() -> None:
    """Chaos seed 4016: a 35 s apiserver restart began just as the reaper deleted the pods a
    repair had left on a cordoned host. Nobody could delete (or see) anything meanwhile: the
    window counts only the time the apiserver could be seen, and a frozen view records nothing."""
    c = checker("h1", "h2")
    c.workload_event("ADDED", workload("w", {"h1": 2}), 0)
    for i in range(2):
        c.pod_event("ADDED", pod(f"p{i}", "w", host="h1", node_name="h1", phase="Running"), 0)
    c.workload_event("MODIFIED", workload("w", {"h2": 2}), 1)
    c.tick(4.0)
    c.blinded(5.0)
    for t in (10.0, 20.0, 38.0):
        c.tick(t)  # out of sight: the view is frozen, nothing is judged
    c.sighted(40.0)
    for t in (40.5, 41.0, 44.0):  # 4 + 4 s seen since the repair: still within the window
        c.tick(t)
    assert c.violations == [], [v.line() for v in c.violations]
    seen_past = 40.0 + (1 + c.resurrection_window_s - 5.0)  # the window's seen seconds used up
    for t in (seen_past + 0.5, seen_past + 3):
        c.tick(t)
    assert set(kinds(c)) == {"domain-overfill"}


def test_a_violation_in_sight_is_recorded_after_its_confirmation_in_sight() -> None:
    c = checker("h1")
    c.pod_event("ADDED", pod("a", "x", node_name="h1", phase="Running", gpu=5), 0)
    c.pod_event("ADDED", pod("b", "y", node_name="h1", phase="Running", gpu=5), 0)
    c.tick(0.5)
    c.blinded(1.0)
    c.tick(30.0)
    assert c.violations == []
    c.sighted(31.0)
    c.tick(31.5)
    assert c.violations == []  # 0.5 + 0.5 s in sight: not yet confirmed
    c.tick(33.0)
    assert kinds(c) == ["node-overcommit"]


def test_a_repair_excuses_no_pod_in_a_domain_it_did_not_take_slots_from() -> None:
    c = checker("h1", "h2", "h3")
    c.workload_event("ADDED", workload("w", {"h1": 2, "h3": 1}), 0)
    c.workload_event("MODIFIED", workload("w", {"h2": 2, "h3": 1}), 1)
    for i in range(2):  # h3 kept its one slot: two pods there overfill it at once
        c.pod_event("ADDED", pod(f"p{i}", "w", host="h3", node_name="h3", phase="Running"), 1)
    for t in (1.5, 4.0):
        c.tick(t)
    assert set(kinds(c)) == {"domain-overfill"}
