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
from typing import Any

import builders as mk
import pytest
from admission_harness import ALLOCATABLE, CHECK, RACK, T0, Harness, harness
from faults import FakeApiServer, Fault, FaultySession, Interleave, faulty_client
from kubernetes_asyncio import client as k8s
from test_admission_write_failures import wl

from kueue_tas.api import constants as c
from kueue_tas.api.workload import Workload
from kueue_tas.capacity.assignment_record import assignment_tampering, repairs_of
from kueue_tas.controllers.admission import UNKNOWN_WRITE_SETTLE_SECONDS
from kueue_tas.controllers.admission_writes import KubeAdmissionWriter
from kueue_tas.controllers.assignment_guard import AssignmentGuard, OurRewrites
from kueue_tas.controllers.node_repair import SCAN, NodeRepair
from kueue_tas.controllers.topology_health import KubeEntryWriter, TopologyHealth
from kueue_tas.kube.errors import Conflict
from kueue_tas.runtime.config import Settings
from kueue_tas.topology.codec import decode_assignment_annotation

KEY = "ns/wl"
JOB = "/apis/batch/v1/namespaces/ns/jobs/job"
WORKLOAD = "/apis/kueue.x-k8s.io/v1beta2/namespaces/ns/workloads/wl"
STATUS = r"/workloads/wl/status$"
RACK_OF = {"h1": "r1", "h2": "r1", "h3": "r2", "h4": "r2", "h5": "r1", "h6": "r2"}


class Cluster:
    """One controller's reconcilers (admission, node repair, assignment guard) on an API
    server shared with Kueue's model (``evict``, ``readmit``, ``admit``)."""

    def __init__(
        self, server: FakeApiServer, session: FaultySession, api: k8s.ApiClient, h: Harness, **settings: Any
    ) -> None:
        self.server, self.session, self.session_api, self.h = server, session, api, h
        self.rewrites = OurRewrites()
        ctx = dataclasses.replace(
            h.ctx, flavors_of=lambda _check: {"gpu"}, settings=Settings(leader_election=False, **settings)
        )
        self.repair = NodeRepair(ctx, rewrites=self.rewrites, wall=lambda: 0.0)
        self.guard = AssignmentGuard(
            informers=h.informers,
            checks=h.checks,
            writer=h.ctx.writer,
            events=h.events,
            settings=ctx.settings,
            rewrites=self.rewrites,
        )

    # --- the watch and Kueue --------------------------------------------------------------------

    def sync(self) -> None:
        """The watch catches up with the server."""
        obj = self.server.get(WORKLOAD)
        assert obj is not None
        self.h.informers.workloads.handle_event("MODIFIED", obj)

    def stored(self) -> dict[str, Any]:
        obj = self.server.get(WORKLOAD)
        assert obj is not None
        return obj

    def entry(self) -> dict[str, Any]:
        (entry,) = self.stored()["status"]["admissionChecks"]
        return entry

    def kueue(self, change: Any) -> None:
        """Kueue's own write: ``change(obj)`` on the stored Workload (a new resourceVersion)."""
        obj = self.stored()
        change(obj)
        self.server.put(WORKLOAD, obj)

    def evict(self) -> None:
        """Kueue evicts (preemption) and withdraws the quota: our entry reset to Pending."""

        def change(obj: dict[str, Any]) -> None:
            status = obj["status"]
            previous = status["admissionChecks"][0]["state"]
            status["admissionChecks"] = [
                {
                    "name": CHECK,
                    "state": "Pending",
                    "message": f"Reset to Pending after eviction. Previously: {previous}",
                    "lastTransitionTime": T0,
                }
            ]
            status["conditions"] = [
                mk.condition("QuotaReserved", False, reason="Pending", message="", time=T0),
                mk.condition("Evicted", reason="Preempted", message="Preempted to accommodate a workload", time=T0),
            ]
            status.pop("admission", None)

        self.kueue(change)

    def readmit(self) -> None:
        """Quota reserved again; our entry stays as it is (Pending after Kueue's reset)."""
        fresh = wl("wl", 12)["status"]

        def change(obj: dict[str, Any]) -> None:
            obj["status"]["admission"] = fresh["admission"]
            obj["status"]["conditions"] = [
                mk.condition("QuotaReserved", reason="QuotaReserved", message="", time=T0),
                mk.condition("Evicted", False, reason="QuotaReserved", message="", time=T0),
            ]

        self.kueue(change)

    def admit(self) -> None:
        """Every check Ready: Kueue admits."""
        assert self.entry()["state"] == "Ready"
        self.kueue(lambda obj: obj["status"]["conditions"].append(mk.condition("Admitted", time=T0)))

    # --- our controller -------------------------------------------------------------------------

    async def decide(self) -> float | None:
        self.sync()
        return await self.h.admission.reconcile(KEY)

    async def admitted(self) -> dict[str, int]:
        """ns/wl decided, written, admitted by Kueue and seen: its hosts and pod counts."""
        assert await self.decide() is None
        self.admit()
        self.sync()
        return self.hosts()

    def hosts(self, obj: dict[str, Any] | None = None) -> dict[str, int]:
        text = (obj or self.stored())["metadata"]["annotations"][c.TOPOLOGY_ASSIGNMENT_ANNOTATION]
        ((_, a),) = decode_assignment_annotation(text)
        return {d.values[-1]: d.count for d in a.domains}

    def node(self, name: str, *, ready: bool = True, event: str = "MODIFIED") -> None:
        labels = {RACK: RACK_OF[name], "pool": "gpu"}
        node = mk.node(name, labels=labels, allocatable=ALLOCATABLE, ready=ready, resource_version="2")
        self.h.informers.nodes.handle_event(event, node)

    async def scan(self) -> float | None:
        return await self.repair.reconcile(SCAN)

    async def failed_host(self, *, spare: bool = True) -> str:
        """ns/wl admitted; the host holding 4 of its pods NotReady past the grace (a spare host
        in its rack with ``spare``): the host."""
        hosts = await self.admitted()
        small = next(h for h, n in hosts.items() if n == 4)
        if spare:
            self.node("h5" if RACK_OF[small] == "r1" else "h6", event="ADDED")
        self.node(small, ready=False)
        self.h.now[0] += 31
        return small

    def refused(self) -> list[int]:
        """The status of every entry write the server refused with a Conflict."""
        return [call.status for call in self.session.calls if call.path.endswith("/status") and call.status == 409]

    def assert_no_ready_and_nothing_held(self) -> None:
        assert self.entry()["state"] == "Pending", "a Ready entry landed on a workload Kueue had evicted"
        assert self.refused() == [409], "the write decided on the older Workload was refused"
        assert not self.h.capacity.holds_extra(KEY), "nothing stays held for the refused write"
        assert not self.rewrites.writing(KEY)

    async def decided_afresh(self, avoid: str | None = None) -> None:
        """Kueue reserves quota again: the workload is decided anew (a new Ready entry with a new
        record, matching the annotation; never on ``avoid``)."""
        decisions = self.h.decided[0]
        self.readmit()
        assert await self.decide() is None
        assert self.h.decided[0] == decisions + 1, "a fresh decision"
        assert self.entry()["state"] == "Ready"
        assert assignment_tampering(Workload.model_validate(self.stored()), {CHECK}) is None
        if avoid is not None:
            assert avoid not in self.hosts(), "placed on the nodes as they are now, not the old assignment"


async def make_cluster() -> Cluster:
    """ns/wl on the API server (12 one-GPU pods in one rack, quota reserved, our entry Pending)
    and one controller over the harness's four hosts."""
    server = FakeApiServer()
    job = server.put(JOB, mk.job("job", 12, namespace="ns", uid="job-uid"))
    server.put(WORKLOAD, wl("wl", 12, owner=job))
    api, session = await faulty_client(server)
    h = harness(writer=KubeAdmissionWriter(api))
    for name in ("h1", "h2", "h3", "h4"):
        h.informers.nodes.handle_event(
            "MODIFIED", mk.node(name, labels={RACK: RACK_OF[name], "pool": "gpu"}, allocatable=ALLOCATABLE)
        )
    h.informers.workloads.handle_event("ADDED", server.get(WORKLOAD))
    return Cluster(server, session, api, h)


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
            flavors_of=lambda _check: {"gpu"},
            settings=Settings(
                leader_election=False, node_failure_policy="Requeue", node_failure_requeue_after_seconds=10
            ),
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
        informers=cluster.h.informers,
        checks=cluster.h.checks,
        writer=KubeEntryWriter(cluster.session_api),
        events=cluster.h.events,
        settings=Settings(leader_election=False),
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
