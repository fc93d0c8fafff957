"""Bound pods and the slots of trusted assignments in the live capacity model (issue 12,
defects 2 and 6): every bound pod is charged once, on its node; a pod fills a slot of our
workload only when the Workload we track under its label holds that PodSet and domain; usage
follows a node relabelled into another rack; the outcome never depends on the order of events."""

from __future__ import annotations

import random

import builders as mk
from hypothesis import given, settings
from hypothesis import strategies as st
from vocab import BLOCK, GPU, RACK

from kueue_tas.api import constants as c
from kueue_tas.capacity.live import LiveCapacity
from kueue_tas.capacity.rules import FlavorSpec, PodClaim, UsageEntry
from kueue_tas.controllers.cache.reconciler import CapacityCache
from kueue_tas.controllers.informers import OurChecks, SharedInformers
from kueue_tas.runtime.config import Settings
from kueue_tas.runtime.manager import Manager
from kueue_tas.runtime.metrics import Metrics
from kueue_tas.topology.assignment import DomainAssignment, TopologyAssignment
from kueue_tas.topology.explain.free import domain_free
from kueue_tas.topology.model import NodeInfo, PodSetRequest, TopologyRequest

NODES = {"n1": "r1", "n2": "r1", "n3": "r2", "n4": "r2"}
WL = "ns/train"


def node(name: str, rack: str, gpus: int = 8) -> NodeInfo:
    return NodeInfo(name, {BLOCK: "b1", RACK: rack}, {GPU: gpus, "pods": 110})


def model() -> LiveCapacity:
    cap = LiveCapacity()
    cap.set_flavors({"gpu": FlavorSpec("gpu", "racks", (BLOCK, RACK), {})})
    for name, rack in NODES.items():
        cap.upsert_node(node(name, rack))
    return cap


def on_racks(*domains: tuple[str, int], pod_set: str = "main") -> tuple[UsageEntry, ...]:
    assignment = TopologyAssignment((BLOCK, RACK), tuple(DomainAssignment(("b1", r), n) for r, n in domains))
    return (UsageEntry("gpu", assignment, {GPU: 1}, pod_set),)


def ours(rack: str | None = "r1", workload: str = "uid-train", pod_set: str = "main", ns: str = "ns") -> PodClaim:
    return PodClaim(ns, workload, pod_set, () if rack is None else ((BLOCK, "b1"), (RACK, rack)))


def admitted(cap: LiveCapacity, *domains: tuple[str, int]) -> None:
    cap.identify(WL, "ns", "uid-train")
    cap.set_workload_usage(WL, on_racks(*domains))


def free(cap: LiveCapacity) -> dict[str, int]:
    snap = cap.snapshot("gpu")
    assert snap is not None
    got = domain_free(snap)
    return {r: got.get((RACK, f"b1,{r}", GPU), 0) for r in ("r1", "r2")}


def tas_used(cap: LiveCapacity) -> int:
    """GPUs charged as TAS usage (open slots and the pods filling slots), all leaves."""
    snap = cap.snapshot("gpu")
    assert snap is not None
    return int(snap.capacity.tas[:, snap.capacity.columns[GPU]].sum())


def one_gpu(cap: LiveCapacity, key: str, node_name: str, claim: PodClaim | None = None) -> None:
    cap.upsert_pod(key, node_name, {GPU: 1, "pods": 1}, claim)


def fits(cap: LiveCapacity, rack_pods: int) -> bool:
    snap = cap.snapshot("gpu")
    assert snap is not None
    request = PodSetRequest("main", rack_pods, {GPU: 1}, TopologyRequest(required=RACK))
    return snap.place([request])[0].assignment is not None


# --- defect 2: labels are a claim, not trust ------------------------------------------------------


def test_live_user_pod_with_our_label_but_no_admitted_workload_is_charged() -> None:
    cap = model()
    one_gpu(cap, "ns/fake", "n1", ours())
    assert free(cap) == {"r1": 15, "r2": 16}
    # Our label naming a Workload we track that holds nothing (not Ready): still charged.
    cap.identify(WL, "ns", "uid-train")
    assert free(cap) == {"r1": 15, "r2": 16}
    assert cap.slot_filled_by("ns/fake") is None


def test_live_matched_pod_is_charged_exactly_once() -> None:
    cap = model()
    admitted(cap, ("r1", 4))
    assert free(cap) == {"r1": 12, "r2": 16}
    for i in range(4):
        one_gpu(cap, f"ns/train-{i}", f"n{1 + i % 2}", ours())
        assert free(cap) == {"r1": 12, "r2": 16}
    assert all(cap.slot_filled_by(f"ns/train-{i}") == WL for i in range(4))
    # A fifth pod claiming the same slots finds none left: charged as well.
    one_gpu(cap, "ns/train-4", "n1", ours())
    assert free(cap) == {"r1": 11, "r2": 16}
    assert tas_used(cap) == 4  # four slots filled (on the pods' nodes), the fifth pod is other usage
    cap.delete_pod("ns/train-0")  # its slot is free again: the fifth pod fills it
    assert free(cap) == {"r1": 12, "r2": 16}
    assert tas_used(cap) == 4 and cap.slot_filled_by("ns/train-4") == WL
    # The Workload finishes: its pods still run, each charged once.
    cap.remove_workload_usage(WL)
    assert free(cap) == {"r1": 12, "r2": 16}
    cap.delete_pod("ns/train-4")
    assert free(cap) == {"r1": 13, "r2": 16}


def test_live_pod_claiming_workload_while_bound_outside_its_domains_is_charged() -> None:
    cap = model()
    admitted(cap, ("r1", 4))
    one_gpu(cap, "ns/out", "n3", ours(rack=None))  # no nodeSelector: its node says r2
    assert free(cap) == {"r1": 12, "r2": 15}
    one_gpu(cap, "ns/pinned-r2", "n4", ours(rack="r2"))
    assert free(cap) == {"r1": 12, "r2": 14}
    for claim in (ours(pod_set="ghost"), ours(workload="uid-other"), ours(ns="elsewhere")):
        one_gpu(cap, "ns/x", "n1", claim)
        assert free(cap) == {"r1": 11, "r2": 14}, claim
    assert cap.slot_filled_by("ns/x") is None


def test_a_decisions_usage_is_filled_by_no_pod() -> None:
    cap = model()
    cap.identify(WL, "ns", "uid-train")
    assignment = TopologyAssignment((BLOCK, RACK), (DomainAssignment(("b1", "r1"), 2),))
    cap.assume(WL, (UsageEntry("gpu", assignment, {GPU: 1}),))  # no PodSet: a decision not yet observed
    one_gpu(cap, "ns/early", "n1", ours())
    assert free(cap) == {"r1": 13, "r2": 16}  # over-charged until our Ready is observed, never under


# --- defect 6: usage follows the node -------------------------------------------------------------


def test_relabelled_node_takes_its_pods_usage_to_its_new_rack() -> None:
    cap = model()
    admitted(cap, ("r1", 8))
    for i in range(8):  # the whole workload on n1, pinned to r1 by the ungater's nodeSelector
        one_gpu(cap, f"ns/train-{i}", "n1", ours())
    assert free(cap) == {"r1": 8, "r2": 16}
    assert fits(cap, 16) and not fits(cap, 17)
    cap.upsert_node(node("n1", "r2"))  # relabelled while its pods run
    assert free(cap) == {"r1": 8, "r2": 16}  # r1 lost n1's 8 GPUs, r2 gained 8 GPUs and 8 pods
    snap = cap.snapshot("gpu")
    assert snap is not None
    got = domain_free(snap)
    assert got[(RACK, "b1,r1", "pods")] == 110 and got[(RACK, "b1,r2", "pods")] == 3 * 110 - 8
    # r2 now has 24 GPUs of which our pods use 8: a second workload cannot be given those 8.
    assert fits(cap, 16) and not fits(cap, 17)
    assert all(cap.slot_filled_by(f"ns/train-{i}") == WL for i in range(8))


def test_relabel_without_node_selectors_keeps_slots_charged_rather_than_lose_them() -> None:
    # Pods with no nodeSelector are placed by their node's labels: after a relabel they leave the
    # r1 slots open (held at r1) and are charged on their node in r2: over-charged, never double-booked.
    cap = model()
    admitted(cap, ("r1", 2))
    for i in range(2):
        one_gpu(cap, f"ns/train-{i}", "n1", ours(rack=None))
    assert free(cap) == {"r1": 14, "r2": 16}
    cap.upsert_node(node("n1", "r2"))
    assert free(cap) == {"r1": 6, "r2": 22}
    cap.upsert_node(node("n1", "r1"))
    assert free(cap) == {"r1": 14, "r2": 16}


def test_incremental_snapshot_matches_a_rebuilt_one_after_a_relabel() -> None:
    cap = model()
    admitted(cap, ("r1", 3), ("r2", 1))
    free(cap)  # built: the events below adjust it in place
    for i, n in enumerate(("n1", "n2", "n3", "n1")):
        one_gpu(cap, f"ns/train-{i}", n, ours(rack=None))
    one_gpu(cap, "ns/other", "n4")
    before = free(cap)
    cap.upsert_node(node("n4", "r2", gpus=9))  # forces a rebuild from the tables
    after = free(cap)
    assert after == {"r1": before["r1"], "r2": before["r2"] + 1}


# --- order never matters -----------------------------------------------------------------------------

CLAIMS = st.one_of(
    st.none(),
    st.builds(
        PodClaim,
        st.sampled_from(["ns", "other"]),
        st.sampled_from(["uid-a", "uid-a", "uid-b", "uid-x"]),
        st.sampled_from(["main", "aux"]),
        st.sampled_from([(), ((BLOCK, "b1"), (RACK, "r1")), ((BLOCK, "b1"), (RACK, "r2"))]),
    ),
)
POD = st.tuples(st.sampled_from(sorted(NODES)), st.integers(1, 3), CLAIMS)
USAGE = st.lists(
    st.tuples(st.sampled_from(["r1", "r2"]), st.integers(1, 3), st.sampled_from(["main", "aux"])),
    max_size=3,
    unique_by=lambda d: (d[0], d[2]),
)
WORKLOAD = st.tuples(USAGE, st.booleans(), st.booleans())  # slots, committed or assumed, replaces the other


def histories(keys: list[str], version: st.SearchStrategy[object]) -> st.SearchStrategy[dict[str, list[object]]]:
    """Per key: its versions in order; None (last) when it is deleted."""
    versions = st.lists(version, min_size=1, max_size=3).flatmap(
        lambda vs: st.sampled_from([vs, [*vs, None]]) if vs else st.just(vs)
    )
    return st.dictionaries(st.sampled_from(keys), versions, max_size=len(keys))


Event = tuple[str, str, object]


def _apply(cap: LiveCapacity, event: Event) -> None:
    kind, key, value = event
    if kind == "pod":
        if value is None:
            cap.delete_pod(key)
        else:
            n, gpus, claim = value  # type: ignore[misc]
            cap.upsert_pod(key, n, {GPU: gpus, "pods": 1}, claim)
    elif kind == "node":
        cap.upsert_node(node(key, str(value)))
    elif value is None:  # the Workload is deleted (capacity_cache._on_deleted)
        cap.remove_workload_usage(key)
        cap.forget(key)
        cap.unidentify(key)
    else:
        usage, committed, replaces = value  # type: ignore[misc]
        cap.identify(key, "ns", "uid-" + key[-1])
        other = "ns/b" if key == "ns/a" else "ns/a"
        if committed:
            cap.forget(key)
            cap.set_workload_usage(key, _entries(usage), replaces=other if replaces else None)
        else:
            cap.remove_workload_usage(key)
            cap.assume(key, _entries(usage), replaces=other if replaces else None)


def _entries(usage: list[tuple[str, int, str]]) -> tuple[UsageEntry, ...]:
    return tuple(e for rack, n, ps in usage for e in on_racks((rack, n), pod_set=ps))


def _snapshot_free(cap: LiveCapacity) -> dict[tuple[str, ...], int]:
    """Per leaf and resource: allocatable minus other usage, and TAS usage (raw, not floored)."""
    snap = cap.snapshot("gpu")
    assert snap is not None
    out = {}
    for leaf, values in enumerate(snap.tree.leaves.values):
        for resource, col in snap.capacity.columns.items():
            out[("free", *values, resource)] = int(snap.capacity.free[leaf, col])
            out[("tas", *values, resource)] = int(snap.capacity.tas[leaf, col])
    return {k: v for k, v in out.items() if v} | {("tas-min",): int(snap.capacity.tas.min(initial=0))}


@settings(max_examples=200, deadline=None)
@given(
    histories([f"ns/p{i}" for i in range(10)], POD),
    histories(["ns/a", "ns/b"], WORKLOAD),
    histories(sorted(NODES), st.sampled_from(["r1", "r2"])),
    st.randoms(use_true_random=False),
)
def test_slots_and_charges_do_not_depend_on_the_order_of_events(
    pods: dict[str, list[object]], wls: dict[str, list[object]], racks: dict[str, list[object]], rnd: random.Random
) -> None:
    """Events in a random interleaving, snapshots read in between (later events adjust them in
    place), against a fresh model fed only the final objects: the same charges, leaf by leaf,
    TAS and other usage apart; never a negative charge; the same with one workload hidden."""
    histories_ = [("pod", k, v) for k, v in pods.items()] + [("wl", k, v) for k, v in wls.items()]
    histories_ += [("node", k, [r for r in v if r is not None]) for k, v in racks.items()]
    queues = [[(kind, key, value) for value in values] for kind, key, values in histories_ if values]
    incremental = model()
    while queues:
        i = rnd.randrange(len(queues))
        _apply(incremental, queues[i].pop(0))
        if not queues[i]:
            queues.pop(i)
        if rnd.random() < 0.4:
            free(incremental)
    fresh = model()
    for kind, key, values in sorted(histories_, key=lambda h: ("node", "wl", "pod").index(h[0])):
        if values and values[-1] is not None:
            _apply(fresh, (kind, key, values[-1]))
    assert _snapshot_free(incremental) == _snapshot_free(fresh)
    assert _snapshot_free(incremental)[("tas-min",)] >= 0
    for key in ("ns/a", "ns/b"):
        with incremental.without(key):
            hidden = _snapshot_free(incremental)
        with fresh.without(key):
            assert _snapshot_free(fresh) == hidden
        assert _snapshot_free(incremental) == _snapshot_free(fresh)
    for key in pods:
        assert incremental.slot_filled_by(key) == fresh.slot_filled_by(key)


# --- through the controller's informers (CapacityCache) ---------------------------------------------


def test_informers_charge_pods_once_follow_relabels_and_forget_deleted_workloads() -> None:
    settings_ = Settings(leader_election=False)
    informers = SharedInformers.register(Manager(None, settings_, Metrics()), settings_.annotation_prefix)
    cap = LiveCapacity()
    CapacityCache(cap, informers, OurChecks(informers.checks.store, settings_.controller_name))
    for name, rack in NODES.items():
        informers.nodes.handle_event("ADDED", mk.node(name, labels={BLOCK: "b1", RACK: rack}, gpus=8))
    informers.topologies.handle_event("ADDED", mk.topology("racks", (BLOCK, RACK)))
    informers.flavors.handle_event("ADDED", mk.flavor("gpu", {}))
    informers.checks.handle_event("ADDED", mk.admission_check("tas", "racks", c.CONTROLLER_NAME))
    informers.queues.handle_event("ADDED", mk.cluster_queue("cq", ("gpu",), {"tas": ["gpu"]}, covered=(GPU,)))
    wl = mk.workload(
        "train",
        4,
        namespace="ns",
        uid="uid-train",
        queue=None,
        admitted_flavor="gpu",
        check_state="Ready",
        assignment=on_racks(("r1", 4))[0].assignment,
    )
    informers.workloads.handle_event("ADDED", wl)
    assert free(cap) == {"r1": 12, "r2": 16}
    labels = {c.WORKLOAD_LABEL: "uid-train", c.PODSET_LABEL: "main"}
    pinned = {BLOCK: "b1", RACK: "r1"}
    for i in range(4):
        pod = mk.pod(f"train-{i}", "n1", namespace="ns", gpus=1, labels=labels, selector=pinned)
        informers.pods.handle_event("ADDED", pod)
    fake = mk.pod("fake", "n3", namespace="other", gpus=2, labels=labels, selector=pinned)
    informers.pods.handle_event("ADDED", fake)
    assert free(cap) == {"r1": 12, "r2": 14}  # ours once; the copy in another namespace charged
    informers.nodes.handle_event("MODIFIED", mk.node("n1", labels={BLOCK: "b1", RACK: "r2"}, gpus=8))
    assert free(cap) == {"r1": 8, "r2": 18}  # r1 lost n1; n1's 4 pods moved to r2 with it
    informers.workloads.handle_event("DELETED", wl)
    assert free(cap) == {"r1": 8, "r2": 18}  # its pods still run: charged on their node
    for i in range(4):
        informers.pods.handle_event("DELETED", mk.pod(f"train-{i}", "n1", namespace="ns"))
    assert free(cap) == {"r1": 8, "r2": 22}
