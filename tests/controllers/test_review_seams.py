"""Adversarial review of issue 27's merged fixes: the seams between the hostname index, the
ungater's held-pod explanation and the guarded writers. Each test failed on main 3c498ea."""

from __future__ import annotations

from typing import Any

import builders as mk
import pytest
from admission_harness import T0
from controller_cluster import KEY, make_cluster
from elastic_harness import ELASTIC_ON, add, cluster, replaced_then_deleted, with_annotations
from faults import Fault
from hostname_scenes import eks_ungater, map_failures
from ungater_harness import Harness, assignment, workload
from vocab import HOST, RACK

from kueue_tas.api import constants as c
from kueue_tas.capacity.live import LiveCapacity
from kueue_tas.capacity.rules import FlavorSpec
from kueue_tas.controllers.admission.reconciler import STALE_READY_REASON
from kueue_tas.controllers.deps import ControllerDeps
from kueue_tas.controllers.repair.writes import UNKNOWN_WRITE_RECHECK_SECONDS
from kueue_tas.controllers.stray.reconciler import StrayPods
from kueue_tas.controllers.ungate import reconciler as uc
from kueue_tas.runtime.config import Settings
from kueue_tas.topology.model import NodeInfo


def shared_n1() -> tuple[Harness, list[str]]:
    """Nodes old-n1 and new-n1 both labelled n1; ns/wl's pod a held back from n1 (shared); the
    keys the ungater queues from then on."""
    h = Harness()
    eks_ungater(h)
    nodes = h.ungater_informers.nodes
    nodes.handle_event("ADDED", mk.node("old-n1", hostname="n1", resource_version="1"))
    nodes.handle_event("ADDED", mk.node("new-n1", hostname="n1", resource_version="1"))
    h.workload(assignment(("n1", 1)))
    h.pod("a")
    queued: list[str] = []
    h.ungater.queue.add_after = lambda key, _delay: queued.append(key)  # type: ignore[method-assign]
    return h, queued


@pytest.mark.parametrize(("kind", "hostname"), [("MODIFIED", "n9"), ("DELETED", "n1")], ids=["relabelled", "deleted"])
async def test_a_pod_held_on_a_shared_hostname_goes_when_the_other_node_leaves_it(kind: str, hostname: str) -> None:
    """The stale Node's hostname is fixed (relabelled away) or the Node deleted: n1 names new-n1
    alone and serves. The node event may carry the new label only; without looking at the old
    one the held pod waits for an event of its own workload that may never come."""
    h, queued = shared_n1()
    await h.run_pass()
    assert h.rec.patches == []
    h.ungater_informers.nodes.handle_event(kind, mk.node("old-n1", hostname=hostname, resource_version="2"))
    assert h.ungater_informers.hosts.serves("n1")
    assert queued == ["ns/wl"], "the pod held back from n1 is looked at again"
    await h.run_pass()
    assert h.rec.selectors() == {"a": "n1"}


# --- node repair: the annotation write whose answer was lost -------------------------------------


async def test_repair_final_entry_is_not_written_on_a_reread_copy_kueue_evicted() -> None:
    """The repaired annotation lands but its answer is lost; Kueue evicts before the settle time
    ends (the watch has not shown it yet). The re-read that decides whether the annotation
    landed shows the eviction: the final Ready entry must not be written onto that copy (its
    resourceVersion would let it land: a Ready entry on a Workload Kueue evicted)."""
    cluster = await make_cluster()
    await cluster.failed_host()
    cluster.session.inject(Fault("PATCH", r"/workloads/wl$", "timeout", after_apply=True))
    assert await cluster.scan() == UNKNOWN_WRITE_RECHECK_SECONDS
    assert "[repairing" in cluster.entry()["message"]
    cluster.evict()
    cluster.h.now[0] += UNKNOWN_WRITE_RECHECK_SECONDS
    await cluster.scan()
    assert cluster.entry()["state"] == "Pending", "a Ready entry landed on a workload Kueue had evicted"
    assert not cluster.h.capacity.holds_extra(KEY), "nothing stays held for an evicted workload"
    assert not cluster.rewrites.writing(KEY)


# --- admission: a Ready entry on a workload Kueue is still stopping -----------------------------


async def test_an_eviction_kueue_is_still_carrying_out_resets_nothing() -> None:
    """Kueue evicts in two steps: ``Evicted`` first (the quota still reserved, our entry Ready as
    we decided it) while the job stops, then it withdraws the quota and resets our entry itself.
    In between our Ready entry is the one we decided, on a state we decided: it is no stale
    entry, and no "TopologyAdmissionReset" Warning (naming a state no decision of ours was made
    on) may follow every ordinary preemption."""
    cluster = await make_cluster()
    await cluster.admitted()
    writes = len(cluster.session.calls)
    cluster.kueue(
        lambda obj: obj["status"]["conditions"].append(
            mk.condition("Evicted", reason="Preempted", message="Preempted to accommodate a workload", time=T0)
        )
    )
    assert await cluster.decide() is None
    assert cluster.entry()["state"] == "Ready"
    assert len(cluster.session.calls) == writes, "nothing written while Kueue carries out its eviction"
    assert not [r for _, _, r, _ in cluster.h.events.seen if r == STALE_READY_REASON]
    cluster.evict()  # Kueue's second step: quota withdrawn, our entry reset by Kueue
    assert await cluster.decide() is None
    assert cluster.entry()["state"] == "Pending"
    assert not cluster.h.capacity.holds(KEY)


# --- the ungater's memory of held pods ------------------------------------------------------------


async def test_the_ungater_forgets_the_hostnames_of_a_deleted_workloads_held_pods() -> None:
    """Pods held back from hostnames that never serve again (their Nodes deleted: autoscaled
    pools churn through names): once their workload is gone, nothing of it stays behind, not
    even an empty entry per hostname (one per deleted hostname, for the process's lifetime)."""
    h = Harness()
    eks_ungater(h)  # no Node carries any hostname: every slot's node "does not exist"
    h.workload(assignment(("gone-1", 1), ("gone-2", 1)))
    h.pod("a")
    h.pod("b")
    await h.run_pass()
    assert h.rec.patches == [] and set(h.ungater._held) == {"gone-1", "gone-2"}
    h.workloads.handle_event("DELETED", workload(assignment=assignment(("gone-1", 1), ("gone-2", 1))))
    assert h.ungater._held == {}
    assert h.ungater._explained == {}


# --- the kept-slices record names only earlier slices -------------------------------------------


async def test_a_record_naming_another_admitted_workload_never_costs_that_workload_its_pods() -> None:
    """``kept-slice-pods`` is a plain annotation on the Workload: anyone who may edit Workloads
    in the namespace can add the label of another admitted workload to a slice's record (the
    record is not part of the digest our entry holds). That workload's pods are its own, filling
    its own slots; judged as the slice's, a released pod of it that is not bound yet is stray
    and deleted."""
    k = cluster(ELASTIC_ON)
    clock = [0.0]
    deleted: list[str] = []

    class Deleter:
        async def delete(self, namespace: str, name: str, uid: str) -> None:
            deleted.append(name)

    strays = StrayPods(
        ControllerDeps(
            informers=k.informers,
            checks=k.checks,
            events=k.events,
            metrics=k.metrics,
            settings=Settings(leader_election=False, stray_pod_grace_seconds=5),
            gates=ELASTIC_ON,
        ),
        capacity=k.capacity,
        deleter=Deleter(),
        clock=lambda: clock[0],
    )
    new = await replaced_then_deleted(k, {"o0": "h1", "o1": "h1"})  # slice-2: h1 x2 (kept), h2 x2
    # "other" (admitted on h1, 2 pods): one of its pods released onto h1, not bound yet.
    released = mk.pod(
        "other-0",
        None,
        namespace="ns",
        uid="uid-other-0",
        gpus=1,
        labels={c.WORKLOAD_LABEL: "other", c.PODSET_LABEL: "main"},
        selector={HOST: "h1"},
    )
    k.informers.pods.handle_event("ADDED", released)
    edited = with_annotations(new, {c.KEPT_SLICES_ANNOTATION: "slice-1,other"})
    edited["metadata"]["resourceVersion"] = "3"
    add(k, edited, "MODIFIED")
    await strays.reconcile("ns/slice-2")
    clock[0] = 60.0
    await strays.reconcile("ns/slice-2")
    assert deleted == [], "another workload's pod was judged against the slice's assignment"


# --- the ungater: the awaits between a plan and its patches ---------------------------------------


async def test_no_pod_is_released_onto_a_node_cordoned_while_the_held_pods_were_explained() -> None:
    """The plan is made without an await; the explanations of held pods are then sent, one
    Event per pod and per Workload (each an API call, seconds under a slow apiserver), before the
    releases. A node cordoned meanwhile must not receive a pod planned for it: pinned there it
    would wait for the node, as a pod held back would, but with no slot the repair could move."""
    problems: dict[str, str | None] = {"n1": None, "n2": "is cordoned (spec.unschedulable)"}
    h = Harness()
    rec = h.rec

    class CordonsN1WhileExplaining:
        async def emit_event(self, regarding: Any, *, reason: str, message: str, type: str = "Normal") -> bool:
            problems["n1"] = "is cordoned (spec.unschedulable)"
            return await rec.emit_event(regarding, reason=reason, message=message, type=type)

    h.ungater = uc.Ungater(
        ControllerDeps(
            informers=h.ungater_informers,
            checks=h.checks,
            events=CordonsN1WhileExplaining(),
            metrics=h.metrics,
            settings=h.ungater.settings,
        ),
        patcher=rec,
        node_problem=lambda host: problems.get(host, "does not exist"),
    )
    h.workload(assignment(("n1", 1), ("n2", 1)))
    h.pod("a", index=0)
    h.pod("b", index=1)
    assert await h.run_pass() == uc.HELD_RECHECK_SECONDS, "looked at again soon, to explain the late hold"
    assert [e for e in rec.events if e[1] == uc.HELD_REASON], "the pod held back from n2 was explained"
    assert rec.patches == [], "a pod was released onto n1, cordoned while the explanations went out"
    await h.run_pass()
    assert any(kind == "Workload" and "node n1" in m for kind, r, m in rec.events if r == uc.HELD_REASON)
    problems["n1"] = None
    h.ungater_informers.nodes.handle_event("MODIFIED", mk.node("n1", hostname="n1", resource_version="2"))
    await h.run_pass()
    assert list(rec.selectors().values()) == ["n1"]


# --- the map ----------------------------------------------------------------------------------------


def test_the_map_marks_no_node_named_like_a_hostname_no_node_carries() -> None:
    """The Node whose hostname ``h1`` a workload was placed on is gone; Node ``h1`` is another
    machine (labelled h9), healthy. The failure of hostname h1 is no failure of Node h1."""
    live = LiveCapacity()
    live.set_flavors({"gpu": FlavorSpec("gpu", "topo", (RACK, HOST), {}, ())})
    live.upsert_node(NodeInfo("h1", {HOST: "h9", RACK: "r1"}, {"cpu": 1000}))
    failed = map_failures(live)
    assert "h1" not in failed, "a healthy Node was marked failed for the hostname it happens to be named"
