"""The DaemonSet rule (``kueue_tas.capacity.daemonsets``): which nodes a DaemonSet's pod would
land on, what it requests, and the reservation each such node holds until that pod is charged."""

from __future__ import annotations

from typing import Any

import builders as mk
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kueue_tas.capacity.daemonsets import (
    DaemonSetError,
    DaemonSetReservations,
    DaemonSetSpec,
    daemonset_spec,
    runs_on,
)
from kueue_tas.kube.slim import slim_pod
from kueue_tas.topology.model import NodeInfo, Taint

Obj = dict[str, Any]
NOW = 1.8e9  # these DaemonSets and nodes carry no creation time: no bound applies


def spec(**kw: Any) -> DaemonSetSpec:
    ds = daemonset_spec(mk.daemonset("agent", **kw))
    assert ds is not None
    return ds


def node(name: str = "n0", labels: dict[str, str] | None = None, *taints: Taint) -> NodeInfo:
    return NodeInfo(name, {mk.HOST: name, **(labels or {})}, {"cpu": 8000, "pods": 10}, taints)


# --- the pod a DaemonSet would create -----------------------------------------------------------


def test_requests_are_the_pod_rule_plus_one_pod() -> None:
    ds = daemonset_spec(
        mk.daemonset("agent", requests={"cpu": "250m", "memory": "64Mi"})
        | {"metadata": {"name": "agent", "namespace": "kube-system", "uid": "u1"}}
    )
    assert ds is not None
    assert ds.key == "kube-system/agent"
    assert ds.uid == "u1"
    assert dict(ds.usage) == {"cpu": 250, "memory": 64 * 2**20, "pods": 1}


def test_init_containers_and_overhead_count_as_for_every_pod() -> None:
    raw = mk.daemonset("agent", requests={"cpu": "100m"})
    pod_spec = raw["spec"]["template"]["spec"]
    pod_spec["initContainers"] = [{"name": "i", "resources": {"requests": {"cpu": "1"}}}]
    pod_spec["overhead"] = {"cpu": "50m"}
    ds = daemonset_spec(raw)
    assert ds is not None
    assert dict(ds.usage) == {"cpu": 1050, "pods": 1}


def test_a_daemonset_being_deleted_creates_no_pods() -> None:
    assert daemonset_spec(mk.daemonset("agent", deleting=True)) is None


@pytest.mark.parametrize(
    ("edit", "field"),
    [
        (lambda r: r["spec"].update(template="x"), "spec.template"),
        (lambda r: r["spec"]["template"].update(spec=["x"]), "spec.template.spec"),
        (
            lambda r: r["spec"]["template"]["spec"]["containers"][0].update(resources={"requests": {"cpu": "lots"}}),
            "spec.template.spec.containers[].resources",
        ),
        (lambda r: r["spec"]["template"]["spec"].update(nodeSelector=["a"]), "spec.template.spec.nodeSelector"),
        (
            lambda r: r["spec"]["template"]["spec"].update(
                affinity={
                    "nodeAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": {
                            "nodeSelectorTerms": [{"matchExpressions": [{"key": "a", "operator": "Near"}]}]
                        }
                    }
                }
            ),
            "spec.template.spec.affinity.nodeAffinity",
        ),
        (lambda r: r["spec"]["template"]["spec"].update(tolerations=[7]), "spec.template.spec.tolerations"),
    ],
)
def test_a_malformed_template_names_its_field(edit: Any, field: str) -> None:
    raw = mk.daemonset("agent")
    edit(raw)
    with pytest.raises(DaemonSetError) as err:
        daemonset_spec(raw)
    assert err.value.field == field
    assert "\n" not in str(err.value)


# --- which nodes it runs on ---------------------------------------------------------------------


def test_node_selector_and_template_node_name() -> None:
    gpu = node("g", {"pool": "gpu"})
    cpu = node("c", {"pool": "cpu"})
    assert runs_on(spec(), gpu) and runs_on(spec(), cpu)
    assert [runs_on(spec(node_selector={"pool": "gpu"}), n) for n in (gpu, cpu)] == [True, False]
    assert [runs_on(spec(node_name="c"), n) for n in (gpu, cpu)] == [False, True]


def _affinity(*terms: Obj) -> Obj:
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": list(terms)}}}


def test_required_affinity_expressions_and_fields() -> None:
    gpu = node("g", {"pool": "gpu"})
    cpu = node("c", {"pool": "cpu"})
    not_cpu = spec(affinity=_affinity({"matchExpressions": [{"key": "pool", "operator": "NotIn", "values": ["cpu"]}]}))
    assert [runs_on(not_cpu, n) for n in (gpu, cpu)] == [True, False]
    # The affinity the DaemonSet controller itself writes into each pod: metadata.name.
    named = spec(affinity=_affinity({"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["c"]}]}))
    assert [runs_on(named, n) for n in (gpu, cpu)] == [False, True]
    # Terms are ORed.
    either = spec(
        affinity=_affinity(
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["c"]}]},
            {"matchExpressions": [{"key": "pool", "operator": "In", "values": ["gpu"]}]},
        )
    )
    assert runs_on(either, gpu) and runs_on(either, cpu)


def test_taints_need_tolerations_for_noschedule_and_noexecute_only() -> None:
    dedicated = Taint("dedicated", "gpu", "NoSchedule")
    assert not runs_on(spec(), node("n", None, dedicated))
    assert not runs_on(spec(), node("n", None, Taint("dedicated", "gpu", "NoExecute")))
    assert runs_on(spec(), node("n", None, Taint("dedicated", "gpu", "PreferNoSchedule")))
    tolerant = spec(tolerations=[{"key": "dedicated", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"}])
    assert runs_on(tolerant, node("n", None, dedicated))
    assert runs_on(spec(tolerations=[{"operator": "Exists"}]), node("n", None, dedicated))


@pytest.mark.parametrize(
    "taint",
    [
        Taint("node.kubernetes.io/not-ready", "", "NoExecute"),
        Taint("node.kubernetes.io/unreachable", "", "NoExecute"),
        Taint("node.kubernetes.io/disk-pressure", "", "NoSchedule"),
        Taint("node.kubernetes.io/memory-pressure", "", "NoSchedule"),
        Taint("node.kubernetes.io/pid-pressure", "", "NoSchedule"),
        Taint("node.kubernetes.io/unschedulable", "", "NoSchedule"),
    ],
)
def test_the_controllers_default_tolerations(taint: Taint) -> None:
    assert runs_on(spec(), node("n", None, taint))
    # Each default covers its own effect only.
    other = "NoSchedule" if taint.effect == "NoExecute" else "NoExecute"
    assert not runs_on(spec(), node("n", None, Taint(taint.key, "", other)))


def test_network_unavailable_is_tolerated_by_host_network_daemons_only() -> None:
    taint = Taint("node.kubernetes.io/network-unavailable", "", "NoSchedule")
    assert not runs_on(spec(), node("n", None, taint))
    assert runs_on(spec(host_network=True), node("n", None, taint))


# --- the pods a DaemonSet owns ------------------------------------------------------------------


def test_slim_pods_name_their_controlling_daemonset() -> None:
    ds = mk.daemonset("agent", uid="u1")
    assert slim_pod(mk.pod("agent-x", "n0", owner=ds)).daemonset == "u1"
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j", "uid": "u2"}}
    assert slim_pod(mk.pod("j-x", "n0", owner=job)).daemonset is None
    not_controller = mk.pod("agent-y", "n0", owner=ds)
    not_controller["metadata"]["ownerReferences"][0]["controller"] = False
    assert slim_pod(not_controller).daemonset is None
    assert slim_pod(mk.pod("plain", "n0")).daemonset is None


# --- reservations -------------------------------------------------------------------------------


def test_reserved_until_the_daemon_pod_is_charged_on_the_node() -> None:
    r = DaemonSetReservations()
    ds = spec(requests={"cpu": "1"})
    r.set_node(node("n0"))
    r.set_node(node("n1"))
    assert r.set_daemonset(ds) == {(ds.uid, "n0"), (ds.uid, "n1")}
    assert r.reservations(NOW) == {(ds.uid, "n0"): ds.usage, (ds.uid, "n1"): ds.usage}
    # Created but not bound yet: it holds nothing, so the reservation stays.
    assert r.set_pod("kube-system/agent-a", ds.uid, None) == set()
    assert r.reservation((ds.uid, "n0"), NOW) == ds.usage
    assert r.set_pod("kube-system/agent-a", ds.uid, "n0") == {(ds.uid, "n0")}
    assert r.reservations(NOW) == {(ds.uid, "n1"): ds.usage}
    # A pod of another DaemonSet or none covers nothing.
    r.set_pod("kube-system/other", "other-uid", "n1")
    r.set_pod("team-a/plain", None, "n1")
    assert r.reservations(NOW) == {(ds.uid, "n1"): ds.usage}
    # The daemon pod finished or deleted: the controller will create another.
    assert r.set_pod("kube-system/agent-a", ds.uid, None) == {(ds.uid, "n0")}
    assert r.reservation((ds.uid, "n0"), NOW) == ds.usage
    r.set_pod("kube-system/agent-b", ds.uid, "n0")
    assert r.delete_pod("kube-system/agent-b") == {(ds.uid, "n0")}
    assert r.reservation((ds.uid, "n0"), NOW) == ds.usage
    # The DaemonSet deleted: every reservation goes.
    assert r.delete_daemonset(ds.uid) == {(ds.uid, "n0"), (ds.uid, "n1")}
    assert r.reservations(NOW) == {}


def test_nodes_joining_leaving_and_changing() -> None:
    r = DaemonSetReservations()
    ds = spec(node_selector={"pool": "gpu"})
    r.set_daemonset(ds)
    assert r.reservations(NOW) == {}
    assert r.set_node(node("n0", {"pool": "gpu"})) == {(ds.uid, "n0")}
    assert set(r.reservations(NOW)) == {(ds.uid, "n0")}
    assert r.set_node(node("n0", {"pool": "gpu"}, Taint("maintenance", "", "NoExecute"))) == {(ds.uid, "n0")}
    assert r.reservations(NOW) == {}
    r.set_node(node("n0", {"pool": "gpu"}))
    assert r.delete_node("n0") == {(ds.uid, "n0")}
    assert r.reservations(NOW) == {}


# --- the property: a DaemonSet is never charged twice on a node ---------------------------------

UIDS = ["d0", "d1"]
NODES = ["n0", "n1", "n2"]
PODS = [f"p{i}" for i in range(5)]


@st.composite
def daemonsets(draw: st.DrawFn, uid: str) -> DaemonSetSpec:
    raw = mk.daemonset(
        uid,
        uid=uid,
        requests={"cpu": f"{draw(st.integers(0, 500))}m"},
        node_selector=draw(st.sampled_from([None, {"pool": "a"}, {"pool": "b"}])),
        tolerations=draw(st.sampled_from([None, [{"key": "t", "operator": "Exists"}]])),
    )
    ds = daemonset_spec(raw)
    assert ds is not None
    return ds


@st.composite
def nodes(draw: st.DrawFn, name: str) -> NodeInfo:
    taints = (Taint("t", "", "NoSchedule"),) if draw(st.booleans()) else ()
    return node(name, {"pool": draw(st.sampled_from(["a", "b"]))}, *taints)


@st.composite
def events(draw: st.DrawFn) -> list[tuple[str, Any]]:
    out: list[tuple[str, Any]] = []
    for _ in range(draw(st.integers(0, 40))):
        kind = draw(st.sampled_from(["ds", "ds-", "node", "node-", "pod", "pod", "pod", "pod-"]))
        if kind == "ds":
            out.append((kind, draw(daemonsets(draw(st.sampled_from(UIDS))))))
        elif kind == "ds-":
            out.append((kind, draw(st.sampled_from(UIDS))))
        elif kind == "node":
            out.append((kind, draw(nodes(draw(st.sampled_from(NODES))))))
        elif kind == "node-":
            out.append((kind, draw(st.sampled_from(NODES))))
        elif kind == "pod":
            owner = draw(st.sampled_from([*UIDS, "other", None]))
            out.append((kind, (draw(st.sampled_from(PODS)), owner, draw(st.sampled_from([*NODES, None])))))
        else:
            out.append((kind, draw(st.sampled_from(PODS))))
    return out


def apply(r: DaemonSetReservations, state: dict[str, dict[str, Any]], kind: str, arg: Any) -> None:
    if kind == "ds":
        r.set_daemonset(arg)
        state["ds"][arg.uid] = arg
    elif kind == "ds-":
        r.delete_daemonset(arg)
        state["ds"].pop(arg, None)
    elif kind == "node":
        r.set_node(arg)
        state["node"][arg.name] = arg
    elif kind == "node-":
        r.delete_node(arg)
        state["node"].pop(arg, None)
    elif kind == "pod":
        r.set_pod(*arg)
        state["pod"][arg[0]] = arg
    else:
        r.delete_pod(arg)
        state["pod"].pop(arg, None)


@settings(max_examples=300, deadline=None)
@given(events())
def test_reserved_and_existing_pods_never_charge_a_daemonset_twice_on_a_node(history: list[tuple[str, Any]]) -> None:
    r = DaemonSetReservations()
    state: dict[str, dict[str, Any]] = {"ds": {}, "node": {}, "pod": {}}
    for kind, arg in history:
        apply(r, state, kind, arg)
        reserved = r.reservations(NOW)
        for uid, ds in state["ds"].items():
            for name, n in state["node"].items():
                pods = sum(1 for _k, owner, on in state["pod"].values() if owner == uid and on == name)
                held = (uid, name) in reserved
                assert not (held and pods), "a reservation next to a charged daemon pod"
                # Where the DaemonSet runs, its pod is charged once: reserved or its own pod.
                assert held == (runs_on(ds, n) and pods == 0)
                if held:
                    assert reserved[(uid, name)] == ds.usage
        assert {uid for uid, _n in reserved} <= set(state["ds"])
        assert {name for _u, name in reserved} <= set(state["node"])
    # The order of events does not matter: the final objects alone give the same reservations.
    fresh = DaemonSetReservations()
    for p in state["pod"].values():
        fresh.set_pod(*p)
    for ds in state["ds"].values():
        fresh.set_daemonset(ds)
    for n in state["node"].values():
        fresh.set_node(n)
    assert fresh.reservations(NOW) == r.reservations(NOW)
