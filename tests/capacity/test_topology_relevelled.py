"""A Topology deleted and re-created with other levels (issue 27, defect 7).

An admitted workload's assignment names its domains by the values of the levels its Topology
had when it was decided (the hostname alone when that was the lowest level). When the Topology
comes back with other levels (the lowest no longer the hostname, levels reordered, one added),
those values no longer name a domain of the new tree, yet the workload's open slots (pods not
bound yet) still hold the nodes they name: their pods are pinned there by nodeSelector. The
capacity model charges them against the nodes the assignment names, through the nodes' labels,
so another workload is never given that capacity.
"""

from __future__ import annotations

import itertools

import builders as mk
from admission_harness import CHECK, harness
from hypothesis import given, settings
from hypothesis import strategies as st
from vocab import BLOCK, GPU, HOST, RACK, REQUIRED

from kueue_tas.api import constants as c
from kueue_tas.capacity.live import LiveCapacity
from kueue_tas.capacity.rules import FlavorSpec, PodClaim, UsageEntry
from kueue_tas.topology.assignment import DomainAssignment, TopologyAssignment
from kueue_tas.topology.codec.codec import decode_assignment_annotation
from kueue_tas.topology.engine.tree import TopologyTree
from kueue_tas.topology.model import NodeInfo

# --- through the controller: Topology topo re-created without the hostname level ------------------


def required(level: str) -> dict[str, str]:
    return {REQUIRED: level}


async def test_open_slots_stay_charged_when_the_topology_comes_back_without_the_hostname() -> None:
    h = harness()  # h1, h2 in rack r1, h3, h4 in r2, 8 GPUs each; Topology (rack, hostname)
    a = mk.workload(
        "a",
        8,
        required(RACK),
        namespace="ns",
        uid="ua",
        resource_version="1",
        queue=None,
        admitted_flavor="gpu",
        check=CHECK,
        check_state="Pending",
        conditions=[mk.condition("QuotaReserved", reason="QuotaReserved", message="")],
    )
    h.add_workload(a)
    assert await h.admission.reconcile("ns/a") is None
    entry = h.writes.checks[-1]
    assert entry["state"] == "Ready"
    [(_, assigned)] = decode_assignment_annotation(h.writes.annotations[-1])
    assert assigned.levels == (HOST,)
    [host] = [d.values[0] for d in assigned.domains]  # 8 one-GPU pods fill one host
    admitted = mk.workload(
        "a",
        8,
        required(RACK),
        namespace="ns",
        uid="ua",
        resource_version="2",
        queue=None,
        admitted_flavor="gpu",
        check=CHECK,
        check_state="Ready",
        check_message=entry["message"],
        workload_annotations={c.TOPOLOGY_ASSIGNMENT_ANNOTATION: h.writes.annotations[-1]},
    )
    h.modify_workload(admitted)  # none of its pods is bound yet: 8 open slots on ``host``
    assert h.free_gpus() == 24

    # The admin deletes the Topology and creates it again with the rack as its lowest level.
    h.informers.topologies.handle_event("DELETED", mk.topology("topo", (RACK, HOST), resource_version="1"))
    h.informers.topologies.handle_event("ADDED", mk.topology("topo", (RACK,), resource_version="3"))
    snap = h.capacity.snapshot("gpu")
    assert snap is not None and snap.tree.level_keys == (RACK,)
    rack_of = {"h1": "r1", "h2": "r1", "h3": "r2", "h4": "r2"}
    col = snap.capacity.columns[GPU]
    charged = {v[-1]: int(snap.capacity.tas[i, col]) for i, v in enumerate(snap.tree.leaves.values)}
    assert charged == {rack_of[host]: 8, ({"r1", "r2"} - {rack_of[host]}).pop(): 0}, "A's open slots charged nowhere"

    async def decide(name: str, count: int, level: str) -> str:
        wl = mk.workload(
            name,
            count,
            required(level),
            namespace="ns",
            uid=f"u-{name}",
            resource_version="1",
            queue=None,
            admitted_flavor="gpu",
            check=CHECK,
            check_state="Pending",
            conditions=[mk.condition("QuotaReserved", reason="QuotaReserved", message="")],
        )
        h.add_workload(wl)
        before = len(h.writes.checks)
        await h.admission.reconcile(f"ns/{name}")
        [written] = h.writes.checks[before:]
        return str(written["state"])

    # B needs a whole rack: only the other rack is free of A's slots.
    assert await decide("b", 16, RACK) == "Ready"
    assert await decide("c", 9, RACK) == "Retry", "A's open capacity was given to another workload"


# --- the rule, over any change of levels --------------------------------------------------------

ZONE = "example.com/zone"
KEYS = (ZONE, BLOCK, RACK, HOST)
ALLOCATABLE = 100


def cluster_nodes() -> list[NodeInfo]:
    """2 zones x 2 blocks x 2 racks x 2 hosts; racks and blocks named apart in each zone."""
    nodes = []
    for z, b, r, n in itertools.product(range(2), range(2), range(2), range(2)):
        labels = {ZONE: f"z{z}", BLOCK: f"z{z}b{b}", RACK: f"z{z}b{b}r{r}", HOST: f"h{z}{b}{r}{n}"}
        nodes.append(NodeInfo(f"node-{z}{b}{r}{n}", labels, {GPU: ALLOCATABLE, "pods": 1000}))
    return nodes


LEVELS = st.lists(st.sampled_from(KEYS), min_size=1, max_size=4, unique=True).map(tuple)


def assignment_on(tree: TopologyTree, picks: list[tuple[int, int]]) -> TopologyAssignment:
    """An assignment at ``tree``'s lowest level as Kueue writes it: ``count`` pods on leaf ``i``."""
    values = tree.assignment_values
    levels = (HOST,) if tree.lowest_is_hostname else tree.level_keys
    domains: dict[tuple[str, ...], int] = {}
    for i, count in picks:
        key = values[i % len(values)]
        domains[key] = domains.get(key, 0) + count
    return TopologyAssignment(levels, tuple(DomainAssignment(v, n) for v, n in sorted(domains.items())))


@settings(max_examples=150, deadline=None)
@given(LEVELS, LEVELS, st.lists(st.tuples(st.integers(0, 15), st.integers(1, 20)), min_size=1, max_size=6))
def test_open_slots_are_charged_on_the_nodes_they_name_whatever_the_new_levels(
    before: tuple[str, ...], after: tuple[str, ...], picks: list[tuple[int, int]]
) -> None:
    nodes = cluster_nodes()
    cap = LiveCapacity()
    cap.set_flavors({"gpu": FlavorSpec("gpu", "topo", before, {})})
    for node in nodes:
        cap.upsert_node(node)
    first = cap.snapshot("gpu")
    assert first is not None
    a = assignment_on(first.tree, picks)
    cap.set_workload_usage("ns/a", (UsageEntry("gpu", a, {GPU: 1}, "main"),))

    cap.set_flavors({"gpu": FlavorSpec("gpu", "topo", after, {})})  # deleted and re-created
    snap = cap.snapshot("gpu")
    assert snap is not None
    col = snap.capacity.columns[GPU]
    charged = {i: int(snap.capacity.tas[i, col]) for i in range(len(snap.tree.leaves.values))}
    leaf_of_node = snap.tree.leaf_by_node_name

    # Independently: the new leaves holding the nodes each of A's domains names, by their labels.
    at_least = dict.fromkeys(charged, 0)
    for d in a.domains:
        named = {n.name for n in nodes if all(n.labels[k] == v for k, v in zip(a.levels, d.values, strict=True))}
        leaves = {leaf_of_node[name] for name in named}
        assert leaves, f"domain {d.values} names no node"
        for leaf in leaves:  # pinned by nodeSelector to those nodes: any of them may take the pods
            at_least[leaf] += d.count
    for leaf, need in at_least.items():
        assert charged[leaf] >= need, f"leaf {snap.tree.leaves.values[leaf]}: {charged[leaf]} < {need}"
    # Charged once where a domain lies in one new leaf (always so when the new leaves are coarser).
    if all(len({leaf_of_node[n.name] for n in nodes if _in(n, a, d)}) == 1 for d in a.domains):
        assert charged == at_least
    # And back under the first levels, exactly as before the change.
    cap.set_flavors({"gpu": FlavorSpec("gpu", "topo", before, {})})
    again = cap.snapshot("gpu")
    assert again is not None
    col = again.capacity.columns[GPU]
    assert int(again.capacity.tas[:, col].sum()) == a.total


def _in(node: NodeInfo, a: TopologyAssignment, d: DomainAssignment) -> bool:
    return all(node.labels[k] == v for k, v in zip(a.levels, d.values, strict=True))


# --- open slots pinned inside a coarser leaf seal it until their pods are bound ----------------


def sealed_leaves(cap: LiveCapacity) -> set[str]:
    snap = cap.snapshot("gpu")
    assert snap is not None
    return {snap.tree.leaves.values[i][-1] for i in range(len(snap.tree.leaves.values)) if snap.capacity.sealed(i)}


@settings(max_examples=120, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 15), st.integers(1, 3)), min_size=1, max_size=5),
    st.lists(st.tuples(st.booleans(), st.integers(0, 60)), max_size=40),
)
def test_a_rack_holding_open_hostname_slots_offers_nothing_until_they_are_bound(
    picks: list[tuple[int, int]], binds: list[tuple[bool, int]]
) -> None:
    """Decided per host, then the Topology keeps the rack only. A new placement on a rack is
    pinned to the rack alone, so the kube-scheduler could bind it onto a host whose slots wait
    for gated pods: while any slot of a host is open, its rack offers nothing. The rule holds
    after any sequence of binds and deletions, whichever order LiveCapacity sees them in."""
    nodes = cluster_nodes()
    cap = LiveCapacity()
    cap.set_flavors({"gpu": FlavorSpec("gpu", "topo", (RACK, HOST), {})})
    for node in nodes:
        cap.upsert_node(node)
    first = cap.snapshot("gpu")
    assert first is not None
    a = assignment_on(first.tree, picks)
    cap.identify("ns/a", "ns", "ua")
    cap.set_workload_usage("ns/a", (UsageEntry("gpu", a, {GPU: 1}, "main"),))
    cap.set_flavors({"gpu": FlavorSpec("gpu", "topo", (RACK,), {})})
    node_of = {n.labels[HOST]: n for n in nodes}
    # One pod key per slot; a bind puts it on its host (pinned by nodeSelector), a delete removes it.
    slots = [(d.values[-1], k) for d in a.domains for k in range(d.count)]
    bound: set[int] = set()
    for bind, pick in binds:
        i = pick % len(slots)
        host, _ = slots[i]
        if bind:
            claim = PodClaim("ns", "ua", "main", ((HOST, host),))
            cap.upsert_pod(f"ns/a-{i}", node_of[host].name, {GPU: 1, "pods": 1}, claim)
            bound.add(i)
        else:
            cap.delete_pod(f"ns/a-{i}")
            bound.discard(i)
        open_hosts = {slots[j][0] for j in range(len(slots)) if j not in bound}
        assert sealed_leaves(cap) == {node_of[h].labels[RACK] for h in open_hosts}
    snap = cap.snapshot("gpu")
    assert snap is not None
    for i in range(len(snap.tree.leaves.values)):
        if snap.capacity.sealed(i):
            assert all(v <= 0 for v in snap.capacity.leaf_free(i).values()), "a sealed rack still offers capacity"
    cap.remove_workload_usage("ns/a")
    assert sealed_leaves(cap) == set(), "a seal outlived the workload"
    # Rebuilt from scratch (a node changed): the same seals as kept incrementally.
    cap.set_workload_usage("ns/a", (UsageEntry("gpu", a, {GPU: 1}, "main"),))
    expected = {node_of[slots[j][0]].labels[RACK] for j in range(len(slots)) if j not in bound}
    assert sealed_leaves(cap) == expected
    cap.upsert_node(NodeInfo(nodes[0].name, {**nodes[0].labels, "x": "y"}, nodes[0].allocatable))
    assert sealed_leaves(cap) == expected
