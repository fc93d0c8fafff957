"""The failed-node detection rule (``kueue_tas.capacity.node_health``): pure, no clock."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from vocab import HOST, RACK

from kueue_tas.capacity.hostnames import NodeHosts
from kueue_tas.capacity.node_health import (
    FailureKind,
    NodeFailure,
    PodSetHosts,
    PodTermination,
    describe_failures,
    failed_nodes,
    grace_left,
    hostname_hosts,
    node_failure,
)
from kueue_tas.topology.model import NodeInfo, Taint, Toleration
from kueue_tas.topology.requests.inputs import node_info

LEVELS = (RACK, HOST)


def node(
    name: str,
    *,
    ready: bool = True,
    status: str | None = None,
    unschedulable: bool = False,
    taints: tuple[Taint, ...] = (),
    labels: dict[str, str] | None = None,
) -> NodeInfo:
    return NodeInfo(
        name,
        {RACK: "r1", HOST: name, "pool": "gpu"} if labels is None else labels,
        {"cpu": 1000},
        taints=taints,
        ready=ready,
        unschedulable=unschedulable,
        ready_status=status if status is not None else ("True" if ready else "False"),
    )


def ps(*hosts: str, tolerations: tuple[Toleration, ...] = (), name: str = "workers") -> PodSetHosts:
    return PodSetHosts(name, hosts, LEVELS, {"pool": "gpu"}, tolerations)


def verdict(n: NodeInfo | None, *, waited: float | None = None, podsets: tuple[PodSetHosts, ...] = ()) -> str | None:
    failure = node_failure("x3", n, podsets or (ps("x3"),), waited, 30.0)
    return None if failure is None else str(failure)


def test_a_healthy_node_serves() -> None:
    assert verdict(node("x3")) is None


def test_not_ready_fails_only_after_the_grace() -> None:
    sick = node("x3", ready=False)
    assert verdict(sick, waited=29.9) is None
    assert verdict(sick, waited=30.0) == "node x3 NotReady for 30s"
    assert verdict(node("x3", ready=False, status="Unknown"), waited=95.5) == "node x3 Unknown for 95s"
    assert grace_left(sick, 10.0, 30.0) == pytest.approx(20.0)
    assert grace_left(sick, 31.0, 30.0) is None
    assert grace_left(node("x3"), None, 30.0) is None


def test_no_ready_condition_fails_at_once() -> None:
    assert verdict(node("x3", ready=False, status=""), waited=0) == "node x3 has no Ready condition"


def test_deleted_unschedulable_and_lost_labels_fail_at_once() -> None:
    assert verdict(None) == "node x3 deleted"
    assert verdict(node("x3", unschedulable=True)) == "node x3 unschedulable"
    assert verdict(node("x3", labels={HOST: "x3", "pool": "gpu"})) == f"node x3 lost label {RACK}"
    assert verdict(node("x3", labels={HOST: "x3", RACK: "r1", "pool": "cpu"})) == "node x3 lost label pool"


def test_an_untolerated_no_execute_taint_fails_the_node() -> None:
    taint = Taint("maintenance", "now", "NoExecute")
    assert verdict(node("x3", taints=(taint,))) == "node x3 tainted maintenance=now:NoExecute"
    tolerant = ps("x3", tolerations=(Toleration("maintenance", "Exists"),))
    assert verdict(node("x3", taints=(taint,)), podsets=(tolerant,)) is None
    # One PodSet on the node that does not tolerate it is enough (as Kueue judges it).
    assert verdict(node("x3", taints=(taint,)), podsets=(tolerant, ps("x3", name="launcher"))) is not None
    assert verdict(node("x3", taints=(Taint("maintenance", "now", "NoSchedule"),))) is None


def test_lifecycle_taints_wait_for_the_grace() -> None:
    unreachable = Taint("node.kubernetes.io/unreachable", "", "NoExecute")
    sick = node("x3", ready=False, status="Unknown", taints=(unreachable,))
    assert verdict(sick, waited=5) is None
    assert verdict(sick, waited=31) == "node x3 Unknown for 31s"


def test_node_info_carries_the_ready_condition() -> None:
    raw = {
        "metadata": {"name": "x3", "labels": {HOST: "x3"}},
        "status": {
            "conditions": [{"type": "Ready", "status": "Unknown", "lastTransitionTime": "2030-01-01T00:00:00Z"}]
        },
    }
    info = node_info(raw)
    assert (info.ready, info.ready_status, info.ready_since) == (False, "Unknown", "2030-01-01T00:00:00Z")
    assert node_info({"metadata": {"name": "y"}}).ready_status == ""


def test_one_pass_reports_every_failed_node_and_the_next_deadline() -> None:
    nodes = {
        "x1": node("x1"),
        "x2": node("x2", ready=False),
        "x3": node("x3", ready=False),
        "x5": node("x5", unschedulable=True),
    }
    since = {"x2": 12.0, "x3": 40.0}
    failures, wait = failed_nodes(
        (ps("x1", "x2", "x3"), ps("x4", "x5", name="launcher")), NodeHosts.of(nodes.values()), since.get, 30.0
    )
    assert failures == {
        "x3": NodeFailure("x3", FailureKind.NOT_READY, "NotReady for 40s"),
        "x4": NodeFailure("x4", FailureKind.DELETED, "deleted"),
        "x5": NodeFailure("x5", FailureKind.UNSCHEDULABLE, "unschedulable"),
    }
    assert wait == pytest.approx(18.0)
    assert describe_failures(failures.values()) == "nodes x3 NotReady for 40s, x4 deleted, x5 unschedulable"


def test_only_hostname_level_assignments_name_nodes() -> None:
    assert hostname_hosts((RACK, HOST), [("r1", "x1"), ("r1", "x2"), ("r1", "x1")]) == ("x1", "x2")
    assert hostname_hosts((RACK,), [("r1",)]) == ()


@given(
    st.dictionaries(
        st.sampled_from(["a", "b", "c", "d", "e"]),
        st.tuples(st.booleans(), st.booleans(), st.floats(0, 100)),
    ),
    st.lists(st.sampled_from(["a", "b", "c", "d", "e", "f"]), unique=True),
)
def test_the_workload_pass_is_the_per_node_rule(spec: dict[str, tuple[bool, bool, float]], hosts: list[str]) -> None:
    nodes = {n: node(n, ready=r, unschedulable=u) for n, (r, u, _) in spec.items()}
    waited = {n: w for n, (r, _, w) in spec.items() if not r}
    failures, _ = failed_nodes((ps(*hosts),), NodeHosts.of(nodes.values()), waited.get, 30.0)
    expected = {h for h in hosts if node_failure(h, nodes.get(h), (ps(*hosts),), waited.get(h), 30.0) is not None}
    assert set(failures) == expected
    for h in hosts:
        r, u, w = spec.get(h, (True, False, 0.0))
        assert (h in failures) == (h not in spec or u or (not r and w >= 30.0))


KUEUE = PodTermination()  # Kueue v0.19.2's defaults


def test_progressing_pods_keep_a_failing_node_serving_their_workload() -> None:
    """Kueue's TASReplaceNodeOnPodTermination (default on): a node with a pod of the workload
    still running there has not failed for it; a deleted node, or one without a Ready
    condition, has (as in Kueue)."""

    def judged(n: NodeInfo | None, gates: PodTermination = KUEUE, waited: float = 60.0) -> str | None:
        failure = node_failure("x3", n, (ps("x3"),), waited, 30.0, progressing=True, gates=gates)
        return None if failure is None else str(failure)

    sick = node("x3", ready=False)
    assert judged(sick) is None
    assert judged(node("x3", taints=(Taint("maintenance", "now", "NoExecute"),))) is None
    assert judged(node("x3", unschedulable=True)) is None
    assert judged(node("x3", labels={HOST: "x3", "pool": "gpu"})) is None
    assert judged(None) == "node x3 deleted"
    assert judged(node("x3", ready=False, status=""), waited=0) == "node x3 has no Ready condition"
    # TASReplaceNodeDueToNotReadyOverFixedTime: NotReady past the grace fails whatever the pods do.
    fixed = PodTermination(not_ready_over_fixed_time=True)
    assert judged(sick, fixed) == "node x3 NotReady for 60s"
    assert judged(sick, fixed, waited=10) is None
    assert judged(node("x3", unschedulable=True, ready=False), fixed) == "node x3 NotReady for 60s"
    assert judged(node("x3", unschedulable=True), fixed) is None
    # TASReplaceNodeOnPodTermination off: the pods do not matter.
    assert judged(sick, PodTermination(on_pod_termination=False)) == "node x3 NotReady for 60s"


def test_failed_nodes_reports_the_nodes_its_pods_spare() -> None:
    nodes = {"x3": node("x3", ready=False), "x4": node("x4", unschedulable=True), "x5": node("x5")}
    spared: set[str] = set()
    failures, wait = failed_nodes(
        (ps("x3", "x4", "x5", "x6"),),
        NodeHosts.of(nodes.values()),
        lambda _n: 40.0,
        30.0,
        progressing={"x3", "x5", "x6"},
        spared=spared,
    )
    assert set(failures) == {"x4", "x6"}  # x6 is deleted: failed at once, its pods or not
    assert spared == {"x3"} and wait is None
