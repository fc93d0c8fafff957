"""Issue 27, defects 2 and 9: no Ready entry of ours on a Workload state we did not decide.

Every writer of our check entry runs here against the in-memory API server through the real
client (``tests/faults.py``: server-side apply, resourceVersion preconditions). Kueue's
eviction (entry reset to Pending, ``Evicted``, quota withdrawn, a new resourceVersion) lands
between a writer's decision and its write (an :class:`~faults.Interleave` on that write). The
write must be refused, no Ready entry may land, and once Kueue reserves quota again the
workload is decided afresh (never admitted on the old assignment). A Ready entry found on an
evicted, quota-less Workload (an unguarded writer's: an older replica, a deposed leader) is
reset to Pending. And a deposed leader's Ready entry, decided on the version before the new
leader's writes, is refused when it lands late (defect 9).
"""

from __future__ import annotations

import dataclasses

import builders as mk
import pytest
from admission_harness import ALLOCATABLE, CHECK, T0, harness
from controller_cluster import KEY, RACK_OF, STATUS, WORKLOAD, Cluster, make_cluster
from faults import Fault, Interleave, faulty_client
from vocab import RACK

from kueue_tas.api import constants as c
from kueue_tas.api.workload import Workload
from kueue_tas.capacity.assignment_record import assignment_tampering, repairs_of
from kueue_tas.controllers.admission.reconciler import UNKNOWN_WRITE_SETTLE_SECONDS
from kueue_tas.controllers.check_entry_writes import KubeAdmissionWriter
from kueue_tas.controllers.deps import ControllerDeps
from kueue_tas.controllers.health.reconciler import KubeEntryWriter, TopologyHealth
from kueue_tas.controllers.repair.reconciler import NodeRepair
from kueue_tas.kube.errors import Conflict
from kueue_tas.runtime.config import Settings
from kueue_tas.runtime.metrics import Metrics


@pytest.fixture
async def cluster() -> Cluster:
    return await make_cluster()


# --- admission ----------------------------------------------------------------------------------


async def test_admission_an_eviction_after_the_annotation_write_gets_no_ready(cluster: Cluster) -> None:
    """The entry write follows the guarded annotation write; Kueue evicts in between."""
    cluster.session.interleave(Interleave("PATCH", STATUS, cluster.evict))
    delay = await cluster.decide()
    cluster.assert_no_ready_and_nothing_held()
    assert not cluster.h.capacity.holds(KEY), "the refused decision's capacity is released"
    # The watch shows the eviction: nothing is decided for a workload without quota.
    assert delay is not None
    cluster.h.now[0] += delay
    assert await cluster.decide() is None
    assert cluster.entry()["state"] == "Pending" and cluster.h.free_gpus() == 32
    await cluster.decided_afresh()


async def test_admission_resets_a_ready_entry_found_on_an_evicted_quota_less_workload(cluster: Cluster) -> None:
    """Kueue reset our entry and withdrew the quota, then an unguarded writer's Ready landed (an
    older replica, a deposed leader): kept, Kueue would admit it on that assignment at once when
    it reserves quota again."""
    await cluster.admitted()
    cluster.evict()
    cluster.kueue(lambda obj: obj["status"]["admissionChecks"][0].update(state="Ready", message="stale [record x]"))
    assert await cluster.decide() is None
    assert cluster.entry()["state"] == "Pending", "a Ready entry without an admission of ours is reset"
    assert cluster.entry()["message"].startswith("Reset to Pending by kueue-tas")
    assert not cluster.h.capacity.holds(KEY) and cluster.h.free_gpus() == 32
    await cluster.decided_afresh()


async def test_an_unanswered_entry_write_found_ready_on_an_evicted_workload_is_reset_not_kept(
    cluster: Cluster,
) -> None:
    """``_let_go``'s re-read after an unanswered Ready write: a Ready entry on a workload that is
    evicted and without quota did not land on the state we decided; it is no "landed after all"."""
    cluster.session.inject(Fault("PATCH", STATUS, "timeout"))
    assert await cluster.decide() == UNKNOWN_WRITE_SETTLE_SECONDS
    assert cluster.h.capacity.holds(KEY)
    cluster.evict()
    cluster.kueue(lambda obj: obj["status"]["admissionChecks"][0].update(state="Ready", message="late [record x]"))
    cluster.h.now[0] += UNKNOWN_WRITE_SETTLE_SECONDS
    assert await cluster.decide() is None
    assert cluster.entry()["state"] == "Pending"
    assert not cluster.h.capacity.holds(KEY) and cluster.h.free_gpus() == 32
    await cluster.decided_afresh()


# --- node repair --------------------------------------------------------------------------------


async def test_repair_announcement_decided_on_the_pass_copy_is_refused_after_an_eviction(cluster: Cluster) -> None:
    failed = await cluster.failed_host()
    cluster.session.interleave(Interleave("PATCH", STATUS, cluster.evict))
    await cluster.scan()
    cluster.assert_no_ready_and_nothing_held()
    cluster.sync()
    await cluster.scan()
    assert cluster.entry()["state"] == "Pending", "an evicted workload is not repaired"
    await cluster.decided_afresh(avoid=failed)


async def test_repair_final_entry_is_refused_after_an_eviction(cluster: Cluster) -> None:
    failed = await cluster.failed_host()
    cluster.session.interleave(Interleave("PATCH", STATUS, cluster.evict, nth=2))  # the announcement lands
    await cluster.scan()
    cluster.assert_no_ready_and_nothing_held()
    cluster.sync()
    await cluster.scan()
    assert cluster.entry()["state"] == "Pending"
    await cluster.decided_afresh(avoid=failed)


async def test_repair_wait_note_is_refused_after_an_eviction(cluster: Cluster) -> None:
    failed = await cluster.failed_host(spare=False)
    cluster.session.interleave(Interleave("PATCH", STATUS, cluster.evict))
    await cluster.scan()
    cluster.assert_no_ready_and_nothing_held()
    cluster.sync()
    await cluster.scan()
    assert cluster.entry()["state"] == "Pending"
    await cluster.decided_afresh(avoid=failed)


async def test_repair_recovery_note_is_refused_after_an_eviction(cluster: Cluster) -> None:
    failed = await cluster.failed_host(spare=False)
    await cluster.scan()  # the Wait note lands
    assert "nodeFailurePolicy Wait" in cluster.entry()["message"]
    cluster.sync()
    cluster.node(failed)
    cluster.session.interleave(Interleave("PATCH", STATUS, cluster.evict))
    await cluster.scan()  # the recovery note, decided on the copy before the eviction
    cluster.assert_no_ready_and_nothing_held()
    await cluster.decided_afresh()


async def test_repair_requeue_retry_is_refused_after_an_eviction(cluster: Cluster) -> None:
    """Not a Ready entry, but a Retry written onto the next admission would evict it for a
    failure of the one before."""
    cluster.repair = NodeRepair(
        dataclasses.replace(
            cluster.h.ctx,
            deps=dataclasses.replace(
                cluster.h.ctx.deps,
                settings=Settings(
                    leader_election=False, node_failure_policy="Requeue", node_failure_requeue_after_seconds=10
                ),
            ),
            flavors_of=lambda _check: {"gpu"},
        ),
        rewrites=cluster.rewrites,
        wall=lambda: 0.0,
    )
    await cluster.failed_host(spare=False)
    await cluster.scan()  # noted: requeued in 10 s
    cluster.sync()
    cluster.h.now[0] += 10
    cluster.session.interleave(Interleave("PATCH", STATUS, cluster.evict))
    await cluster.scan()
    assert cluster.entry()["state"] == "Pending"
    assert cluster.refused() == [409]


# --- the assignment guard -----------------------------------------------------------------------


async def test_guard_settling_a_repair_tag_is_refused_after_an_eviction(cluster: Cluster) -> None:
    """A repair's announcement stands with no repair of ours writing it (its annotation write
    was refused): the guard settles it from the informer's copy, and Kueue evicts first."""
    await cluster.failed_host()
    cluster.session.inject(Fault("PATCH", r"/workloads/wl$", 403))
    await cluster.scan()
    assert repairs_of(Workload.model_validate(cluster.stored()), {CHECK}), "the announcement stands"
    assert not cluster.rewrites.writing(KEY)
    cluster.sync()
    assert len(cluster.guard.queue), "the guard is told to settle it"
    cluster.session.interleave(Interleave("PATCH", STATUS, cluster.evict))
    await cluster.guard.reconcile(KEY)
    cluster.assert_no_ready_and_nothing_held()
    cluster.sync()
    assert await cluster.guard.reconcile(KEY) is None
    assert cluster.entry()["state"] == "Pending"
    await cluster.decided_afresh()


# --- a deposed leader (defect 9) ----------------------------------------------------------------


async def test_a_deposed_leaders_ready_entry_landing_after_the_new_leaders_is_refused(cluster: Cluster) -> None:
    """Leader A decided on resourceVersion N and wrote its annotation (N+1); its entry write,
    cancelled in the hand-over, is still on the wire. Leader B, on the state as it is (one of
    A's hosts cordoned meanwhile), decides and writes (N+2, N+3). A's entry then arrives."""
    old = cluster
    api, session = await faulty_client(old.server)
    new = Cluster(old.server, session, api, harness(writer=KubeAdmissionWriter(api)))
    for name in ("h1", "h2", "h3", "h4"):
        new.node(name, event="ADDED")
    placed_by_old: dict[str, int] = {}

    async def hand_over() -> None:
        placed_by_old.update(old.hosts())
        cordoned = next(iter(placed_by_old))
        labels = {RACK: RACK_OF[cordoned], "pool": "gpu"}
        node = mk.node(cordoned, labels=labels, allocatable=ALLOCATABLE, unschedulable=True, resource_version="3")
        new.h.informers.nodes.handle_event("MODIFIED", node)
        new.h.informers.workloads.handle_event("ADDED", old.server.get(WORKLOAD))
        assert await new.h.admission.reconcile(KEY) is None
        assert new.entry()["state"] == "Ready"

    old.session.interleave(Interleave("PATCH", STATUS, hand_over))
    await old.decide()
    assert old.refused() == [409], "the deposed leader's late write is refused"
    stored = Workload.model_validate(old.stored())
    assert new.hosts() != placed_by_old
    assert assignment_tampering(stored, {CHECK}) is None, "the entry records the new leader's assignment"
    assert new.entry()["state"] == "Ready"


# --- a Conflict is judged on a re-read, never retried blindly ----------------------------------


async def test_repair_final_entry_refused_after_an_unrelated_change_lands_on_the_reread_copy(cluster: Cluster) -> None:
    """Kueue touches the Workload between the annotation write and the final entry (a condition
    of its own): the re-read still shows our announcement over the new annotation, so the entry
    is written on that copy; the slots stay held throughout."""
    failed = await cluster.failed_host()
    spare = "h5" if RACK_OF[failed] == "r1" else "h6"

    def pods_ready() -> None:
        cluster.kueue(lambda obj: obj["status"]["conditions"].append(mk.condition("PodsReady", time=T0)))

    cluster.session.interleave(Interleave("PATCH", STATUS, pods_ready, nth=2))
    wake = await cluster.scan()
    assert cluster.refused() == [409] and "[repairing" in cluster.entry()["message"]
    assert cluster.h.capacity.holds_extra(KEY) and cluster.rewrites.writing(KEY)
    assert wake is not None
    cluster.h.now[0] += wake
    await cluster.scan()
    stored = Workload.model_validate(cluster.stored())
    assert "[repairing" not in cluster.entry()["message"] and assignment_tampering(stored, {CHECK}) is None
    assert failed not in cluster.hosts() and spare in cluster.hosts()
    assert [m for _, _, r, m in cluster.h.events.seen if r == "TopologyRepaired"]


async def test_repair_announcement_whose_answer_was_lost_counts_as_landed(cluster: Cluster) -> None:
    """The announcement applied, its answer lost: tried again on the copy the repair was decided
    on, it is refused (our own write moved the version); the re-read shows it landed."""
    failed = await cluster.failed_host()
    cluster.session.inject(Fault("PATCH", STATUS, "timeout", after_apply=True))
    wake = await cluster.scan()
    assert wake is not None and "[repairing" in cluster.entry()["message"]
    cluster.h.now[0] += wake
    await cluster.scan()
    assert cluster.refused() == [409]
    stored = Workload.model_validate(cluster.stored())
    assert "[repairing" not in cluster.entry()["message"] and assignment_tampering(stored, {CHECK}) is None
    assert failed not in cluster.hosts()


# --- topology health (already guarded before issue 27) -------------------------------------------


async def test_topology_health_note_is_refused_after_an_eviction(cluster: Cluster) -> None:
    health = TopologyHealth(
        ControllerDeps(
            informers=cluster.h.informers,
            checks=cluster.h.checks,
            events=cluster.h.events,
            metrics=Metrics(),
            settings=Settings(leader_election=False),
        ),
        writer=KubeEntryWriter(cluster.session_api),
    )
    await cluster.failed_host(spare=False)  # its rack is no longer whole: a note is due
    cluster.session.interleave(Interleave("PATCH", STATUS, cluster.evict))
    assert await health.reconcile(KEY) is not None
    cluster.assert_no_ready_and_nothing_held()
    cluster.sync()
    assert await health.reconcile(KEY) is None
    assert cluster.entry()["state"] == "Pending"


async def test_the_wait_start_write_is_refused_on_a_workload_changed_since_the_decision(cluster: Cluster) -> None:
    """A preferred wait's start is written before its Retry entry, which is guarded by the
    version the first write leaves: that first write must itself be guarded, or after Kueue's
    eviction and new reservation the Retry lands on the new reservation."""
    decided_on = Workload.model_validate(cluster.stored())
    cluster.evict()
    with pytest.raises(Conflict):
        await KubeAdmissionWriter(cluster.session_api).write_wait_start(decided_on, "2030-01-01T00:00:00Z")
    annotations = cluster.stored()["metadata"].get("annotations") or {}
    assert c.PREFERRED_WAIT_STARTED_ANNOTATION not in annotations
