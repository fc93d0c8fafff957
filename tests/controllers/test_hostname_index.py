"""Issue 27, defect 1: the hostname label is not the Node name (EKS clusters made by eksctl, kops,
``--hostname-override``). Assignments name hosts by their ``kubernetes.io/hostname`` label; every
consumer that turns such a value into a Node goes through ``capacity.hostnames.NodeHosts``.

Each consumer is tried on an EKS-like fleet: Node ``h1.ec2.internal`` labelled ``h1``.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import builders as mk
import pytest
from hostname_scenes import eks, eks_ungater, info, map_failures
from hypothesis import given, settings
from hypothesis import strategies as st
from repair_harness import Rig, Strays, rig, roles
from structlog.testing import capture_logs
from ungater_harness import Harness, assignment
from vocab import HOST, RACK

from kueue_tas.api import constants as c
from kueue_tas.capacity.feed import feed_pod
from kueue_tas.capacity.hostnames import NodeHosts, unambiguous
from kueue_tas.capacity.live import LiveCapacity
from kueue_tas.capacity.node_health import FailureKind, PodSetHosts, failed_nodes
from kueue_tas.capacity.pod_counts import domain_paths, podset_pod_counts
from kueue_tas.capacity.rules import FlavorSpec, UsageEntry
from kueue_tas.controllers.cache.reconciler import CapacityCache
from kueue_tas.controllers.informers import slim_node
from kueue_tas.controllers.ungate import reconciler as uc
from kueue_tas.kube.slim import slim_pod
from kueue_tas.topology.assignment import DomainAssignment, TopologyAssignment
from kueue_tas.topology.explain.free import domain_free
from kueue_tas.topology.model import NodeInfo

# --- the index --------------------------------------------------------------------------------


def test_a_hostname_names_the_one_node_that_carries_it() -> None:
    hosts = NodeHosts.of([info(eks("h1"), "h1"), info("h2", "h2"), info("bare", None)])
    found = hosts.node("h1")
    assert found is not None and found.name == eks("h1")
    assert hosts.node(eks("h1")) is None  # a Node name is not a hostname value
    assert hosts.node("bare") is None  # a Node without the label is in no hostname domain
    assert hosts.serves("h1") and hosts.serves("h2") and not hosts.serves("h9")


def test_a_hostname_two_nodes_carry_names_neither() -> None:
    old, new = info("old-h1", "h1", ready=False), info("new-h1", "h1")
    hosts = NodeHosts.of([old, new, info("h2", "h2")])
    assert hosts.node("h1") is None and not hosts.serves("h1")
    assert hosts.shared("h1") == ("new-h1", "old-h1") and hosts.shared("h2") == ()
    assert [n.name for n in unambiguous([old, new, info("h2", "h2")])] == ["h2"]


def test_the_node_store_index_follows_relabels_and_deletes() -> None:
    h = Harness()
    nodes = h.ungater_informers.nodes
    hosts = h.ungater_informers.hosts
    nodes.handle_event("ADDED", mk.node(eks("h1"), hostname="h1", resource_version="1"))
    assert hosts.serves("h1")
    nodes.handle_event("MODIFIED", mk.node(eks("h1"), hostname="h7", resource_version="2"))
    assert not hosts.serves("h1") and hosts.serves("h7")
    nodes.handle_event("DELETED", mk.node(eks("h1"), hostname="h7", resource_version="3"))
    assert not hosts.serves("h7")


# --- the ungater --------------------------------------------------------------------------------


async def test_ungater_releases_pods_onto_eks_named_nodes() -> None:
    h = Harness()
    eks_ungater(h)
    for host in ("n1", "n2"):
        h.ungater_informers.nodes.handle_event("ADDED", mk.node(eks(host), hostname=host, resource_version="1"))
    h.workload(assignment(("n1", 2), ("n2", 2)))
    for i in range(4):
        h.pod(f"p{i}", index=i)
    await h.run_pass()
    assert sorted(h.rec.selectors().values()) == ["n1", "n1", "n2", "n2"]


async def test_ungater_lets_held_pods_go_when_an_eks_named_node_serves_again() -> None:
    usable = {"n1": False}
    h = Harness(node_usable=lambda host: usable.get(host, False))
    h.workload(assignment(("n1", 1)))
    h.pod("a")
    await h.run_pass()
    assert h.rec.patches == []
    queued: list[str] = []
    h.ungater.queue.add_after = lambda key, _delay: queued.append(key)  # type: ignore[method-assign]
    usable["n1"] = True
    h.ungater_informers.nodes.handle_event("MODIFIED", mk.node(eks("n1"), hostname="n1", resource_version="2"))
    assert queued == ["ns/wl"]


async def test_ungater_holds_pods_of_a_hostname_two_nodes_carry_and_says_why() -> None:
    h = Harness()
    eks_ungater(h)
    h.ungater_informers.nodes.handle_event("ADDED", mk.node("old-n1", hostname="n1", resource_version="1"))
    h.ungater_informers.nodes.handle_event("ADDED", mk.node("new-n1", hostname="n1", resource_version="1"))
    h.workload(assignment(("n1", 1)))
    h.pod("a")
    await h.run_pass()
    assert h.rec.patches == []
    warnings = [m for kind, reason, m in h.rec.events if kind == "Workload" and reason == uc.HELD_REASON]
    assert len(warnings) == 1 and "pod a stays gated: its slot is on node n1" in warnings[0]
    assert "which is the kubernetes.io/hostname of several Nodes (new-n1, old-n1)" in warnings[0]
    said = len([e for e in h.rec.events if e[1] == uc.HELD_REASON])  # on the pod and the Workload
    await h.run_pass()
    assert len([e for e in h.rec.events if e[1] == uc.HELD_REASON]) == said == 2  # said once


# --- node repair --------------------------------------------------------------------------------

RACKS = {"h1": "r1", "h2": "r1", "h3": "r2", "h4": "r2"}


def eks_rig(**kw: Any) -> Rig:
    """The node-repair rig with every host re-created under an EKS-like Node name."""
    r = rig(**kw)
    for host, rack in RACKS.items():
        r.h.informers.nodes.handle_event("DELETED", mk.node(host, labels={RACK: rack, "pool": "gpu"}))
        r.node(eks(host), rack, event="ADDED", hostname=host)
    return r


async def test_repair_leaves_a_workload_on_ready_eks_named_nodes_alone() -> None:
    r = eks_rig()
    before = await r.admit()
    assert set(before) <= set(RACKS)  # assignments hold the label values
    assert await r.scan() is None
    assert len(r.h.writes.annotations) == 1 and len(r.h.writes.checks) == 1  # nothing moved
    assert not [e for e in r.h.events.reasons() if "Repair" in e[2]]
    assert r.h.metrics.registry.get_sample_value("kueue_tas_failed_nodes_seen_total") == 0


async def test_repair_moves_the_pods_of_a_failed_eks_named_node() -> None:
    r = eks_rig()
    small, big, rack = roles(await r.admit())
    r.node(eks("h5"), rack, event="ADDED", hostname="h5")
    r.node(eks(small), rack, ready=False, hostname=small)
    assert await r.scan() == pytest.approx(30.0)  # the grace runs on the Node's own condition
    r.clock.now += 30
    await r.scan()
    r.observe()
    assert r.hosts() == {big: 8, "h5": 4}
    expected = f"node {small} NotReady for 30s: 4 pod(s) of PodSet main moved from {small} to h5 in rack {rack}"
    assert r.events("TopologyRepaired") == [expected]


async def test_repair_waits_for_progressing_pods_on_an_eks_named_node() -> None:
    # TASReplaceNodeOnPodTermination: pods bound to the Node (by Node name) hold its hostname.
    r = eks_rig()
    small, _, rack = roles(await r.admit())
    r.node(eks("h5"), rack, event="ADDED", hostname="h5")
    pod = mk.pod("p0", eks(small), namespace="ns", uid="p0", labels={c.WORKLOAD_LABEL: "u1", c.PODSET_LABEL: "main"})
    r.h.informers.pods.handle_event("ADDED", pod)
    r.node(eks(small), rack, ready=False, hostname=small)
    r.clock.now += 60
    await r.scan()
    assert len(r.h.writes.annotations) == 1  # its pod still runs there: nothing moves yet
    r.h.informers.pods.handle_event("DELETED", pod)
    await r.scan()
    assert len(r.h.writes.annotations) == 2


async def test_repair_names_the_nodes_sharing_a_hostname() -> None:
    r = eks_rig()
    small, big, rack = roles(await r.admit())
    r.node(eks("h5"), rack, event="ADDED", hostname="h5")
    r.node("impostor", rack, event="ADDED", hostname=small)
    await r.scan()
    r.observe()
    assert r.hosts() == {big: 8, "h5": 4}
    shared = f"node {small} is the kubernetes.io/hostname of Nodes {eks(small)}, impostor"
    assert r.events("TopologyRepaired") == [
        f"{shared}: 4 pod(s) of PodSet main moved from {small} to h5 in rack {rack}"
    ]


def test_failed_nodes_rule_by_hostname() -> None:
    ps = PodSetHosts("main", ("h1", "h2", "h3"), (RACK, HOST), {}, ())
    hosts = NodeHosts.of([info(eks("h1"), "h1"), info("a", "h2"), info("b", "h2")])
    failures, _ = failed_nodes([ps], hosts, lambda _name: None, 30.0)
    assert {h: f.kind for h, f in failures.items()} == {"h2": FailureKind.SHARED, "h3": FailureKind.DELETED}


@settings(max_examples=40, deadline=None)
@given(
    ready=st.lists(st.booleans(), min_size=3, max_size=3),
    renamed=st.lists(st.booleans(), min_size=3, max_size=3),
    not_ready_for=st.floats(min_value=0, max_value=100),
)
def test_renaming_nodes_while_keeping_labels_changes_no_failure(
    ready: list[bool], renamed: list[bool], not_ready_for: float
) -> None:
    ps = PodSetHosts("main", ("h1", "h2", "h3"), (RACK, HOST), {}, ())
    base = [
        info(f"h{i + 1}", f"h{i + 1}", ready=ready[i], ready_status="True" if ready[i] else "False") for i in range(3)
    ]
    moved = [dataclasses.replace(n, name=eks(n.name)) if renamed[i] else n for i, n in enumerate(base)]
    since = {n.name: None if n.ready else not_ready_for for n in base} | {
        n.name: None if n.ready else not_ready_for for n in moved
    }
    one, _ = failed_nodes([ps], NodeHosts.of(base), since.get, 30.0, progressing={"h1"})
    two, _ = failed_nodes([ps], NodeHosts.of(moved), since.get, 30.0, progressing={moved[0].name})
    assert {h: (f.kind, f.detail) for h, f in one.items()} == {h: (f.kind, f.detail) for h, f in two.items()}


# --- stray pods -----------------------------------------------------------------------------------


async def test_a_stray_pod_pinned_to_an_eks_named_node_waits_for_the_grace() -> None:
    s = Strays(eks_rig())
    small, big, _ = roles(await s.r.admit())
    for i in range(8):
        s.pod(f"big-{i}", eks(big), selector={HOST: big})
    for i in range(4):
        s.pod(f"small-{i}", eks(small), selector={HOST: small})
    assert await s.judge() is None and s.deleter.deleted == []  # bound by Node name: every pod fills a slot
    s.pod("extra", None, selector={HOST: big})  # released, not bound yet: one too many on big
    assert await s.judge() == pytest.approx(5.0)  # its node exists: the grace applies
    assert s.deleter.deleted == []


async def test_a_stray_pod_pinned_to_a_hostname_no_node_carries_goes_at_once() -> None:
    s = Strays(eks_rig())
    _, big, rack = roles(await s.r.admit())
    for i in range(8):
        s.pod(f"big-{i}", eks(big), selector={HOST: big})
    s.pod("extra", None, selector={HOST: big})
    s.r.h.informers.nodes.handle_event("DELETED", mk.node(eks(big), labels={RACK: rack, "pool": "gpu"}))
    await s.judge()
    assert "extra" in s.deleter.names()


# --- the capacity model, describe and the map -----------------------------------------------------

SPEC = FlavorSpec("gpu", "topo", (RACK, HOST), {}, ())


def test_live_capacity_offers_nothing_of_a_hostname_two_nodes_carry() -> None:
    live = LiveCapacity()
    live.set_flavors({"gpu": SPEC})
    for node in (info(eks("h1"), "h1"), info("old-h2", "h2"), info("new-h2", "h2")):
        live.upsert_node(node)
    snap = live.snapshot("gpu")
    assert snap is not None
    assert [v[-1] for v in snap.tree.leaves.values] == ["h1"]
    live.delete_node("old-h2")
    snap = live.snapshot("gpu")
    assert snap is not None and [v[-1] for v in snap.tree.leaves.values] == ["h1", "h2"]


def test_domain_paths_complete_a_hostname_from_the_node_that_carries_it() -> None:
    a = TopologyAssignment((HOST,), (DomainAssignment(("h1",), 1),))
    # Node "h1" is another machine (labelled h9): a lookup by Node name would answer it.
    hosts = NodeHosts.of(
        [NodeInfo(eks("h1"), {HOST: "h1", RACK: "r1"}, {}), NodeInfo("h1", {HOST: "h9", RACK: "r2"}, {})]
    )
    assert domain_paths(a, (RACK, HOST), hosts) == [("r1", "h1")]


def test_the_map_marks_the_eks_named_node_that_failed_not_the_one_named_like_its_hostname() -> None:
    live = LiveCapacity()
    live.set_flavors({"gpu": SPEC})
    live.upsert_node(NodeInfo(eks("h1"), {HOST: "h1", RACK: "r1"}, {"cpu": 1000}, unschedulable=True))
    live.upsert_node(NodeInfo("h1", {HOST: "h9", RACK: "r1"}, {"cpu": 1000}))
    assert map_failures(live) == {eks("h1")}


def test_slim_node_keeps_the_hostname_label_apart_from_the_name() -> None:
    node = slim_node(mk.node(eks("h1"), hostname="h1"))
    assert node.name == eks("h1") and node.labels[HOST] == "h1"


def test_pod_counts_match_pods_bound_to_eks_named_nodes_with_their_hostname_domains() -> None:
    a = TopologyAssignment((HOST,), (DomainAssignment(("h1",), 2), DomainAssignment(("h2",), 1)))
    nodes = {eks(h): NodeInfo(eks(h), {HOST: h}, {}) for h in ("h1", "h2")}
    pods = [
        slim_pod(mk.pod(f"p{i}", eks(h), namespace="ns", selector={HOST: h})) for i, h in enumerate(("h1", "h1", "h2"))
    ]
    counts, bound, _ = podset_pod_counts(pods, a, nodes)
    assert (counts.bound, counts.bound_elsewhere, bound) == (3, 0, [2, 1])


def test_a_pod_bound_to_an_eks_named_node_fills_its_hostname_slot() -> None:
    live = LiveCapacity()
    live.set_flavors({"gpu": SPEC})
    live.upsert_node(info(eks("h1"), "h1"))
    live.identify("ns/wl", "ns", "u1")
    a = TopologyAssignment((HOST,), (DomainAssignment(("h1",), 1),))
    live.set_workload_usage("ns/wl", (UsageEntry("gpu", a, {"cpu": 100}, "main"),))
    pod = slim_pod(mk.pod("p", eks("h1"), namespace="ns", labels={c.WORKLOAD_LABEL: "u1", c.PODSET_LABEL: "main"}))
    feed_pod(live, pod)
    assert live.slot_filled_by("ns/p") == "ns/wl"


@settings(max_examples=30, deadline=None)
@given(
    renamed=st.lists(st.booleans(), min_size=4, max_size=4), used=st.lists(st.integers(0, 3), min_size=4, max_size=4)
)
def test_renaming_nodes_while_keeping_labels_changes_no_free_capacity(renamed: list[bool], used: list[int]) -> None:
    def model(names: list[str]) -> dict[tuple[str, str, str], int]:
        live = LiveCapacity()
        live.set_flavors({"gpu": SPEC})
        for i, name in enumerate(names):
            live.upsert_node(NodeInfo(name, {HOST: f"h{i}", RACK: f"r{i % 2}"}, {"cpu": 4000}))
            live.upsert_pod(f"ns/p{i}", name, {"cpu": 1000 * used[i]})
        a = TopologyAssignment((HOST,), (DomainAssignment(("h0",), 1), DomainAssignment(("h3",), 2)))
        live.set_workload_usage("ns/wl", (UsageEntry("gpu", a, {"cpu": 500}, "main"),))
        snap = live.snapshot("gpu")
        assert snap is not None
        return {k: int(v) for k, v in domain_free(snap).items()}

    plain = [f"h{i}" for i in range(4)]
    assert model(plain) == model([eks(n) if r else n for n, r in zip(plain, renamed, strict=True)])


def test_the_capacity_cache_says_once_which_nodes_no_hostname_names() -> None:
    h = Harness()
    cap = LiveCapacity()
    CapacityCache(cap, h.ungater_informers, h.checks)
    nodes = h.ungater_informers.nodes
    bare = mk.node("bare", resource_version="1")
    del bare["metadata"]["labels"][HOST]
    with capture_logs() as logs:
        nodes.handle_event("ADDED", bare)
        nodes.handle_event("MODIFIED", {**bare, "metadata": {**bare["metadata"], "resourceVersion": "2"}})
        nodes.handle_event("ADDED", mk.node("old-h1", hostname="h1", resource_version="1"))
        nodes.handle_event("ADDED", mk.node("new-h1", hostname="h1", resource_version="1"))
    said = [(e["event"], e["node"]) for e in logs if e["log_level"] == "warning"]
    assert said == [("node_without_hostname_label", "bare"), ("hostname_label_shared", "new-h1")]
