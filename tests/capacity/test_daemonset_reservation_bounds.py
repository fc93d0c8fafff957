"""What bounds a DaemonSet reservation (issue 30, finding 2), rule by rule: the policy (listed
namespaces, system priority classes), the fit on the empty node, the time since the DaemonSet or
the Node arrived; the controller's clock that lets a reservation lapse; and where ``capacity``
and ``describe`` say which DaemonSet holds what."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime
from typing import Any

import builders as mk
import map_scene as scene
import pytest
from structlog.testing import capture_logs
from vocab import GPU

from kueue_tas.capacity.daemonsets import (
    DEFAULT_POLICY,
    DaemonSetError,
    DaemonSetReservations,
    DaemonSetSpec,
    ReservationPolicy,
    daemonset_spec,
)
from kueue_tas.capacity.feed import capacity_from_lists
from kueue_tas.capacity.live import LiveCapacity
from kueue_tas.cli import capacity as cap
from kueue_tas.cli.cluster_read import ClusterState
from kueue_tas.cli.describe_build import describe_workload
from kueue_tas.cli.describe_output import describe_json, render_text
from kueue_tas.cli.main import main
from kueue_tas.controllers.cache.reconciler import CapacityCache
from kueue_tas.runtime.config import ConfigError, Settings
from kueue_tas.topology.model import NodeInfo

T = datetime(2026, 1, 1, tzinfo=UTC).timestamp()
# The capacity command reads the time of day: a DaemonSet created in 2100 is still held.
LATER = datetime(2100, 1, 1, tzinfo=UTC).timestamp() - T


def at(seconds: float) -> str:
    return datetime.fromtimestamp(T + seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def spec(namespace: str = "kube-system", created: float | None = 0, **kw: Any) -> DaemonSetSpec:
    raw = mk.daemonset("agent", namespace=namespace, **kw)
    if created is not None:
        raw["metadata"]["creationTimestamp"] = at(created)
    ds = daemonset_spec(raw)
    assert ds is not None
    return ds


def node(name: str, created: float | None = -1000, **alloc: int) -> NodeInfo:
    allocatable = {"cpu": 8000, "pods": 10, GPU: 8} | alloc
    return NodeInfo(name, {mk.HOST: name}, allocatable, created="" if created is None else at(created))


# --- the pod a DaemonSet would create: what the policy reads ------------------------------------


def test_namespace_priority_class_and_creation_time_are_read() -> None:
    raw = mk.daemonset("agent", namespace="team-a")
    raw["spec"]["template"]["spec"]["priorityClassName"] = "system-node-critical"
    raw["metadata"]["creationTimestamp"] = at(5)
    ds = daemonset_spec(raw)
    assert ds is not None
    assert (ds.namespace, ds.priority_class, ds.created) == ("team-a", "system-node-critical", T + 5)
    raw["metadata"]["creationTimestamp"] = "yesterday"
    with pytest.raises(DaemonSetError) as err:
        daemonset_spec(raw)
    assert err.value.field == "metadata.creationTimestamp"


def test_the_policy_trusts_listed_namespaces_and_priority_classes_only() -> None:
    policy = ReservationPolicy(frozenset({"infra"}), frozenset({"daemons"}), 60)
    assert policy.trusts(spec("infra"))
    assert not policy.trusts(spec("kube-system"))  # the list is the admin's, not ours
    raw = mk.daemonset("agent", namespace="team-a")
    raw["spec"]["template"]["spec"]["priorityClassName"] = "daemons"
    ds = daemonset_spec(raw)
    assert ds is not None and policy.trusts(ds)
    assert not ReservationPolicy(frozenset({"infra"}), frozenset(), 60).trusts(ds)


def test_the_settings_defaults_are_the_rules_defaults() -> None:
    assert ReservationPolicy.from_settings(Settings()) == DEFAULT_POLICY
    assert DEFAULT_POLICY.namespaces == {"kube-system", "gpu-operator"}
    # Any namespace may name a system priority class unless a ResourceQuota forbids it: trusting
    # one by default let a tenant's DaemonSet take every node's GPUs (issue 30 review).
    assert DEFAULT_POLICY.priority_classes == frozenset()


def test_the_settings_read_lists_from_the_environment_and_refuse_bad_names(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KUEUE_TAS_DAEMONSET_RESERVATION_NAMESPACES", "kube-system, infra")
    monkeypatch.setenv("KUEUE_TAS_DAEMONSET_RESERVATION_PRIORITY_CLASSES", "")
    s = Settings.load()
    assert s.daemonset_reservation_namespaces == ("kube-system", "infra")
    assert ReservationPolicy.from_settings(s).priority_classes == frozenset()
    monkeypatch.setenv("KUEUE_TAS_DAEMONSET_RESERVATION_NAMESPACES", "Kube_System")
    with pytest.raises(ConfigError, match=r"daemonset_reservation_namespaces: 'Kube_System' is not a namespace"):
        Settings.load()


# --- fits on the empty node ---------------------------------------------------------------------


def test_a_pod_that_cannot_fit_on_the_empty_node_reserves_nothing_there() -> None:
    r = DaemonSetReservations()
    r.set_node(node("big", **{GPU: 16}))
    r.set_node(node("small"))
    r.set_node(node("no-gpu", **{GPU: 0}))
    ds = spec(requests={GPU: "9"})
    r.set_daemonset(ds)
    assert set(r.reservations(T)) == {(ds.uid, "big")}
    # A resource the node does not have at all, and the pod itself (pods: 1 over pods: 0).
    fpga = spec(requests={"example.com/fpga": "1"})
    r.set_daemonset(fpga)
    assert set(r.reservations(T)) == set()
    r2 = DaemonSetReservations()
    r2.set_node(node("full", pods=0))
    r2.set_daemonset(spec())
    assert r2.reservations(T) == {}


def test_a_node_that_grows_to_fit_is_held_from_then_on() -> None:
    """The node's allocatable decides too: a change that does not change where the DaemonSet
    runs must still re-judge the pair."""
    live = LiveCapacity(clock=lambda: T)
    live.upsert_daemonset(spec(requests={GPU: "9"}))
    live.upsert_node(node("n0"))
    assert live.daemonset_reservations() == []
    live.upsert_node(node("n0", **{GPU: 16}))
    assert [(r.node, dict(r.usage)[GPU]) for r in live.daemonset_reservations()] == [("n0", 9)]
    live.upsert_node(node("n0"))
    assert live.daemonset_reservations() == []


# --- bounded in time ----------------------------------------------------------------------------


def test_held_from_the_later_arrival_until_the_bound() -> None:
    r = DaemonSetReservations(ReservationPolicy(seconds=300))
    r.set_node(node("old", created=-1000))
    r.set_node(node("new", created=100))
    ds = spec(created=0)
    r.set_daemonset(ds)
    held = {name: r.held((ds.uid, name), T + 10) for name in ("old", "new")}
    assert {n: (h.since, h.until) for n, h in held.items() if h} == {
        "old": (T, T + 300),  # the DaemonSet arrived after the node
        "new": (T + 100, T + 400),  # the node joined after the DaemonSet
    }
    assert set(r.reservations(T + 299)) == {(ds.uid, "old"), (ds.uid, "new")}
    assert set(r.reservations(T + 300)) == {(ds.uid, "new")}
    assert r.reservations(T + 400) == {}
    # No creation time anywhere (a hand-written dump): nothing bounds it.
    r.set_daemonset(spec(created=None))
    r.set_node(node("old", created=None))
    assert set(r.reservations(T + 10**6)) == {(ds.uid, "old")}
    # 0 s: reservations are off, even for those.
    off = DaemonSetReservations(ReservationPolicy(seconds=0))
    off.set_node(node("old", created=None))
    off.set_daemonset(spec(created=None))
    assert off.reservations(T) == {}


def test_the_live_model_lets_reservations_lapse_on_its_clock() -> None:
    now = [T + 10]
    live = LiveCapacity(clock=lambda: now[0])
    live.upsert_node(node("n0"))
    live.upsert_daemonset(spec(requests={GPU: "1"}))
    assert live.next_lapse() == T + 300
    now[0] = T + 299
    assert live.expire_reservations() == []
    live.upsert_node(node("n1", created=200))  # joins later: its own bound
    assert live.next_lapse() == T + 300
    now[0] = T + 300
    (lapsed,) = live.expire_reservations()
    assert (lapsed.daemonset, lapsed.node, lapsed.since, lapsed.until) == ("kube-system/agent", "n0", T, T + 300)
    assert [r.node for r in live.daemonset_reservations()] == ["n1"]
    assert live.next_lapse() == T + 500
    # A pod of the DaemonSet bound and gone again after the bound: nothing comes back.
    live.daemon_pod("kube-system/agent-x", "uid-agent", "n0")
    live.forget_daemon_pod("kube-system/agent-x")
    assert [r.node for r in live.daemonset_reservations()] == ["n1"]
    now[0] = T + 500
    assert [r.node for r in live.expire_reservations()] == ["n1"]
    assert live.next_lapse() is None and live.daemonset_reservations() == []


async def test_the_controller_releases_a_lapsed_reservation_and_logs_it() -> None:
    from admission_harness import harness

    h = harness()
    now = [T + 299.9]
    capacity = LiveCapacity(clock=lambda: now[0])
    cache = CapacityCache(capacity, h.informers, h.checks)
    raw = mk.daemonset("agent", requests={GPU: "1"})
    raw["metadata"]["creationTimestamp"] = at(0)
    # The harness's nodes carry no creation time: each is held from the DaemonSet's.
    h.informers.daemonsets.handle_event("ADDED", raw)
    assert [r.node for r in capacity.daemonset_reservations()] == ["h1", "h2", "h3", "h4"]
    now[0] = T + 300
    with capture_logs() as logs:
        task = asyncio.create_task(cache.run_lapses())
        await asyncio.sleep(0.05)
        task.cancel()
    assert capacity.daemonset_reservations() == []
    lapsed = [e for e in logs if e["event"] == "daemonset_reservation_lapsed"]
    assert [(e["daemonset"], e["node"], e["until"], e["log_level"]) for e in lapsed] == [
        ("kube-system/agent", n, at(300), "warning") for n in ("h1", "h2", "h3", "h4")
    ]


# --- capacity and describe say which DaemonSet holds what ---------------------------------------


def _agent(namespace: str = "kube-system", created: float = 0) -> dict[str, Any]:
    name = "agent" if namespace == "kube-system" else f"agent-{namespace}"
    raw = mk.daemonset(name, namespace=namespace, requests={GPU: "1", "cpu": "250m"})
    raw["metadata"]["creationTimestamp"] = at(created)
    return raw


def _capacity_output(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    specs = [s for raw in (_agent(created=LATER), _agent("team-a", LATER)) if (s := daemonset_spec(raw)) is not None]
    state = ClusterState(scene.kueue_config(), scene.nodes(), scene.pods(), scene.workloads(), daemonsets=specs)
    monkeypatch.setattr(cap, "load_settings", lambda config, kubeconfig: Settings(daemonset_reservation_seconds=600))
    monkeypatch.setattr(cap, "run_read", lambda settings, read: state)
    capsys.readouterr()
    assert main(["capacity", *argv]) == 0
    return capsys.readouterr().out


def test_capacity_lists_each_reservation_in_json(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    held = json.loads(_capacity_output(monkeypatch, capsys, "-o", "json"))["daemonSetReservations"]
    # Only the listed namespace's DaemonSet; on every node it runs on (h22's taint keeps it out).
    assert {h["daemonSet"] for h in held} == {"kube-system/agent"}
    assert sorted(h["node"] for h in held) == sorted(n.name for n in scene.nodes() if not n.taints)
    assert held[0]["requests"] == {"cpu": 250, GPU: 1, "pods": 1}
    assert (held[0]["since"], held[0]["until"]) == (at(LATER), at(LATER + 600))


def test_capacity_text_ends_with_one_line_per_daemonset(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    lines = _capacity_output(monkeypatch, capsys).splitlines()
    at_head = lines.index("DaemonSet reservations (capacity held for daemon pods not bound yet):")
    (line,) = lines[at_head + 1 :]
    count = len([n for n in scene.nodes() if not n.taints])
    assert line.startswith(f"  kube-system/agent: cpu 0.25, {GPU} 1, pods 1 on {count} node(s) (h11, h12, h21, ")
    assert line.endswith(f"); since {at(LATER)}, until {at(LATER + 600)} at the latest")


def test_describe_names_the_daemonsets_holding_the_nodes_it_would_use() -> None:
    tas = scene.kueue()
    big = next(w for w in scene.workloads() if w.name == "big")
    specs = [s for s in (daemonset_spec(_agent()),) if s is not None]
    live = capacity_from_lists(tas.specs, tas.checks, scene.nodes(), scene.pods(), scene.workloads(), specs, now=T + 10)
    desc = describe_workload(big, tas, scene.nodes(), [], capacity=live)
    held = describe_json(desc)["daemonSetReservations"]
    assert {h["daemonSet"] for h in held} == {"kube-system/agent"} and len(held) > 0
    assert all((h["since"], h["until"]) == (at(0), at(300)) for h in held)
    assert "  DaemonSet reservations (capacity held for daemon pods not bound yet):" in render_text(desc)
    # Lapsed: nothing held, nothing said.
    later = capacity_from_lists(
        tas.specs, tas.checks, scene.nodes(), scene.pods(), scene.workloads(), specs, now=T + 300
    )
    desc = describe_workload(big, tas, scene.nodes(), [], capacity=later)
    assert describe_json(desc)["daemonSetReservations"] == []
    assert "DaemonSet reservations" not in render_text(desc)
