"""Node repair (issue 13, deliverables 1-3): failed nodes under an admitted workload are found in
one pass and repaired in one decision through the engine's node replacement, written with a
resourceVersion precondition and our record; when nothing fits, the nodeFailurePolicy decides.

The admission harness's cluster (hosts h1, h2 in rack r1, h3, h4 in rack r2, 8 GPUs each) plus
h5 in rack r1 where a test needs it; the workload ns/wl asks for 12 one-GPU pods in one rack,
so the admission puts 8 on one host and 4 on another (a multi-domain, gated PodSet). Time is a
fake clock the test moves.
"""

from __future__ import annotations

import asyncio
import copy
from typing import Any

import builders as mk
import pytest
from admission_harness import CHECK, guard, workload
from repair_harness import ANN, RACK_OF, Rig, metric, rig, roles
from vocab import GROUP_NAME, HOST, RACK, REQUIRED, SLICE_LEVEL, SLICE_SIZE

from kueue_tas.api import constants as c
from kueue_tas.api.workload import Workload
from kueue_tas.capacity.assignment_record import assignment_tampering, recorded, repairing, without_record
from kueue_tas.capacity.domain_records import Hold
from kueue_tas.capacity.workload_placement import Domain
from kueue_tas.controllers.repair.reconciler import SCAN
from kueue_tas.controllers.rewrites import OurRewrites
from kueue_tas.kube.errors import Conflict, ServerError, TransportError
from kueue_tas.topology.codec.codec import decode_assignment_annotation


@pytest.fixture
def r() -> Rig:
    return rig()


async def test_one_failed_node_moves_only_its_pods_inside_the_rack(r: Rig) -> None:
    before = await r.admit()
    small, big, rack = roles(before)
    assert RACK_OF[big] == rack  # one rack, as required
    spare = "h5"
    r.node(spare, rack, event="ADDED")

    r.node(small, rack, ready=False)
    assert await r.scan() == pytest.approx(30.0)  # within the grace: nothing yet
    assert len(r.h.writes.annotations) == 1
    r.clock.now += 30
    await r.scan()

    assert len(r.h.writes.annotations) == 2
    ((_, new),) = decode_assignment_annotation(r.h.writes.annotations[-1])
    assert {d.values[-1]: d.count for d in new.domains} == {big: 8, spare: 4}
    entry = r.h.writes.checks[-1]
    expected = f"node {small} NotReady for 30s: 4 pod(s) of PodSet main moved from {small} to {spare} in rack {rack}"
    assert entry["state"] == "Ready" and entry["message"].startswith(expected + " [record main=")
    assert entry["podSetUpdates"] == r.h.writes.checks[0]["podSetUpdates"]  # Kueue keeps them immutable
    assert r.events("TopologyRepaired") == [expected]
    assert r.free(spare) == 4  # the new slots are held from the decision on

    r.observe()
    assert r.hosts() == {big: 8, spare: 4}
    assert assignment_tampering(r.wl(), {CHECK}) is None
    assert await r.scan() is None  # repaired: nothing left to do
    assert r.free(spare) == 4  # held once, now as the trusted assignment
    assert len(r.h.writes.annotations) == 2
    assert metric(r, "kueue_tas_node_repairs_total", {"outcome": "done"}) == 1
    assert metric(r, "kueue_tas_failed_nodes_seen_total") == 1
    assert metric(r, "kueue_tas_node_repair_seconds_count") == 1


async def test_two_failed_nodes_are_repaired_in_one_decision(r: Rig) -> None:
    before = await r.admit()
    small, big, rack = roles(before)
    r.node(big, rack, ready=False)
    r.h.informers.nodes.handle_event("DELETED", mk.node(small, labels={RACK: rack, "pool": "gpu"}))
    r.clock.now += 31
    await r.scan()
    assert len(r.h.writes.annotations) == 2  # one decision, one write
    assert r.hosts() == before  # not seen through the informer yet
    r.observe()
    others = {h for h, k in RACK_OF.items() if k != rack}
    assert set(r.hosts()) == others and sorted(r.hosts().values()) == [4, 8]
    message = r.events("TopologyRepaired")[0]
    failed = ", ".join(sorted((f"{big} NotReady for 31s", f"{small} deleted")))
    assert message.startswith(f"nodes {failed}: 12 pod(s) of PodSet main moved from ")
    assert message.endswith(f"in rack {'r1' if rack == 'r2' else 'r2'}")
    assert metric(r, "kueue_tas_failed_nodes_seen_total") == 2


def show(r: Rig, annotation: str, entry: dict[str, Any], rv: str) -> None:
    """The Workload as the apiserver holds it after some of the repair's writes."""
    obj = copy.deepcopy(r.obj)
    obj["metadata"]["annotations"][ANN] = annotation
    obj["status"]["admissionChecks"] = [entry]
    obj["metadata"]["resourceVersion"] = rv
    r.h.modify_workload(obj)


async def drain_guard(g: Any) -> None:
    while len(g.queue):
        key = await g.queue.get()
        g.queue.done(key)
        await g.reconcile(key)


async def test_the_repair_announces_itself_so_its_own_annotation_is_never_tampering(r: Rig) -> None:
    g = guard(r.h, r.rewrites)
    await r.spare_and_failed_host()
    old_text = r.wl().metadata.annotations[ANN]
    r.h.writes.fail_check, r.h.writes.fail_check_after = ServerError(500), 1
    await r.scan()
    announce, new_text = r.h.writes.checks[-1], r.h.writes.annotations[-1]
    assert " [repairing main=" in announce["message"] and announce["message"].count("[record main=") == 1
    # Announced, annotation not written yet; then written, record not yet: neither is tampering.
    show(r, old_text, announce, "97")
    assert assignment_tampering(r.wl(), {CHECK}) is None
    show(r, new_text, announce, "98")
    assert assignment_tampering(r.wl(), {CHECK}) is None
    await drain_guard(g)
    assert len(r.h.writes.annotations) == 2 and r.h.writes.checks[-1] is announce  # the repair is still writing
    assert r.events("TopologyAssignmentTampered") == []


async def test_a_restart_between_the_repairs_writes_is_settled_not_requeued(r: Rig) -> None:
    """The controller stops after the annotation landed but before the record did: the next one
    (no repair of its own in progress) finds the tag and records what the annotation holds."""
    await r.spare_and_failed_host()
    r.h.writes.fail_check, r.h.writes.fail_check_after = ServerError(500), 1
    await r.scan()
    announce, new_text = r.h.writes.checks[-1], r.h.writes.annotations[-1]
    show(r, new_text, announce, "98")
    restarted = guard(r.h, OurRewrites())
    await drain_guard(restarted)
    settled = r.h.writes.checks[-1]
    assert settled["state"] == "Ready" and "[repairing" not in settled["message"]
    assert recorded(settled["message"]) == repairing(announce["message"])  # the repair's record
    assert without_record(settled["message"]) == without_record(announce["message"])  # what moved where
    show(r, new_text, settled, "99")
    assert assignment_tampering(r.wl(), {CHECK}) is None
    assert r.events("TopologyRepaired") and r.events("TopologyAssignmentTampered") == []
    assert all(e["state"] == "Ready" for e in r.h.writes.checks)


async def test_a_restart_before_the_annotation_landed_keeps_the_old_record(r: Rig) -> None:
    await r.spare_and_failed_host()
    old_text = r.wl().metadata.annotations[ANN]
    old_record = r.wl().status.admission_checks[0].message.rsplit(" [record ", 1)[1]
    r.h.writes.fail_annotation = Conflict(409)
    await r.scan()  # announced, then the annotation write is refused: dropped
    announce = next(e for e in reversed(r.h.writes.checks) if "[repairing" in e["message"])
    show(r, old_text, announce, "98")
    restarted = guard(r.h, OurRewrites())
    await drain_guard(restarted)
    settled = r.h.writes.checks[-1]
    assert settled["message"].endswith(" [record " + old_record)
    assert "not applied (kueue-tas stopped while writing it)" in settled["message"]
    assert r.events("TopologyRepaired") == []


async def test_a_dropped_repair_leaves_no_tag_behind(r: Rig) -> None:
    g = guard(r.h, r.rewrites)
    await r.spare_and_failed_host()
    r.h.writes.fail_annotation = Conflict(409)
    await r.scan()
    announce = r.h.writes.checks[-1]
    assert "[repairing" in announce["message"]
    show(r, r.wl().metadata.annotations[ANN], announce, "98")
    await drain_guard(g)  # the drop told the guard; no repair of ours writes the tag any more
    assert "[repairing" not in r.h.writes.checks[-1]["message"]


async def test_a_conflict_drops_the_held_slots_and_decides_again(r: Rig) -> None:
    spare = "h5"
    await r.spare_and_failed_host()
    r.h.writes.fail_annotation = Conflict(409)
    assert await r.scan() == pytest.approx(0.5)
    assert r.free(spare) == 8  # nothing held for a write that did not land
    r.clock.now += 7
    await r.scan()
    assert len(r.h.writes.annotations) == 2  # the second decision was written
    # The latency runs from when the node was counted failed, not from the second decision.
    assert metric(r, "kueue_tas_node_repair_seconds_count") == 1
    assert metric(r, "kueue_tas_node_repair_seconds_sum") >= 7


async def test_wait_notes_once_then_repairs_when_a_node_is_added(r: Rig) -> None:
    before = await r.admit()
    small, _, rack = roles(before)
    r.node(small, rack, ready=False)
    r.clock.now += 40
    assert await r.scan() == pytest.approx(30.0)
    r.clock.now += 30
    await r.scan()
    pending = r.events("TopologyRepairPending")
    assert len(pending) == 1  # once
    assert pending[0].startswith(f"node {small} NotReady for 40s: no replacement fits: ")
    # h1 is full of the workload's own pods: only a node can make room, and the note says so.
    assert "can never fit, in its domain, even with every other workload gone" in pending[0]
    assert pending[0].endswith("waiting for the failed nodes to serve again or for new nodes (nodeFailurePolicy Wait)")
    note = r.h.writes.checks[-1]
    assert note["state"] == "Ready" and note["message"].startswith(pending[0] + " [record main=")
    assert metric(r, "kueue_tas_node_repairs_pending") == 1
    assert len(r.h.writes.annotations) == 1

    r.node("h5", rack, event="ADDED")
    await r.scan()
    assert r.events("TopologyRepaired")[0].endswith(f"moved from {small} to h5 in rack {rack}")
    assert metric(r, "kueue_tas_node_repairs_pending") == 0


async def test_requeue_sets_retry_after_the_timeout() -> None:
    r = rig(node_failure_policy="Requeue", node_failure_requeue_after_seconds=120)
    before = await r.admit()
    small, _, rack = roles(before)
    r.node(small, rack, ready=False)
    r.clock.now += 30
    assert await r.scan() == pytest.approx(30.0)
    assert r.events("TopologyRepairPending")[0].endswith(
        "requeued in 120s unless a replacement fits (nodeFailurePolicy Requeue)"
    )
    r.clock.now += 119
    await r.scan()
    assert r.h.writes.checks[-1]["state"] == "Ready"
    r.clock.now += 1
    await r.scan()
    entry = r.h.writes.checks[-1]
    assert entry["state"] == "Retry"
    assert entry["message"].startswith(f"node {small} NotReady for 150s: no replacement fits: ")
    assert entry["message"].endswith("requeued after 120s without a replacement (nodeFailurePolicy Requeue)")
    assert metric(r, "kueue_tas_node_repairs_total", {"outcome": "impossible"}) == 1
    await r.scan()
    assert [e["state"] for e in r.h.writes.checks].count("Retry") == 1  # written once


async def test_a_podset_on_one_host_is_gated_and_moved_to_another_host(r: Rig) -> None:
    """With repairs on, a single-host PodSet is gated at admission (no nodeSelector in the entry),
    so its pods can follow a repair: all 8 move to a free host of the same rack."""
    before = await r.admit(count=8)
    assert len(before) == 1
    (host,) = before
    assert r.h.writes.gated == [{"main"}]
    assert "nodeSelector" not in r.h.writes.checks[-1]["podSetUpdates"][0]
    rack = RACK_OF[host]
    r.node(host, rack, unschedulable=True)
    await r.scan()
    (other,) = (h for h, rk in RACK_OF.items() if rk == rack and h != host)
    assert r.events("TopologyRepaired") == [
        f"node {host} unschedulable: 8 pod(s) of PodSet main moved from {host} to {other} in rack {rack}"
    ]
    r.observe()
    assert r.hosts() == {other: 8}


async def test_a_podset_pinned_by_node_selector_is_not_moved_in_place() -> None:
    """An entry that pins its PodSet by nodeSelector (admitted with TASFailedNodeReplacement off,
    or by an older kueue-tas) cannot follow a repair: Kueue keeps podSetUpdates unchanged."""
    r = rig()
    before = await r.admit(count=8)
    (host,) = before
    pinned_entry = copy.deepcopy(r.obj["status"]["admissionChecks"][0])
    pinned_entry["podSetUpdates"][0]["nodeSelector"] = {c.HOSTNAME_LABEL: host}
    r.h.writes.checks.append(pinned_entry)
    r.observe()
    r.node(host, RACK_OF[host], unschedulable=True)
    await r.scan()
    assert len(r.h.writes.annotations) == 1
    assert r.events("TopologyRepairPending") == [
        f'node {host} unschedulable: no replacement fits: PodSet "main" runs in one domain, pinned there by '
        "the nodeSelector of the check's podSetUpdates, which Kueue keeps unchanged while the workload is "
        "admitted; waiting for the node to serve again (nodeFailurePolicy Wait)"
    ]


async def test_a_node_back_within_the_grace_changes_nothing(r: Rig) -> None:
    before = await r.admit()
    small, _, rack = roles(before)
    r.node(small, rack, ready=False)
    r.clock.now += 20
    await r.scan()
    r.node(small, rack, ready=True)
    r.clock.now += 60
    assert await r.scan() is None
    assert len(r.h.writes.annotations) == 1 and r.h.events.seen[1:] == []
    assert metric(r, "kueue_tas_failed_nodes_seen_total") == 0


async def test_the_replacement_keeps_whole_slices(r: Rig) -> None:
    slices = {SLICE_LEVEL: c.HOSTNAME_LABEL, SLICE_SIZE: "4"}
    before = await r.admit(annotations=slices)
    small, _, rack = roles(before)
    r.node("h5", rack, event="ADDED", gpus=2)
    r.node("h6", rack, event="ADDED", gpus=2)
    r.node(small, rack, ready=False)
    r.clock.now += 30
    await r.scan()
    # Four GPUs are free in the rack, but no host holds a whole slice of 4.
    assert len(r.h.writes.annotations) == 1
    assert r.events("TopologyRepairPending")[0].startswith(f"node {small} NotReady for 30s: no replacement fits: ")
    r.node("h7", rack, event="ADDED")
    await r.scan()
    r.observe()
    assert r.hosts()["h7"] == 4 and "h5" not in r.hosts() and "h6" not in r.hosts()


async def test_held_slots_survive_failed_entry_writes_and_unrelated_events(r: Rig) -> None:
    small = await r.spare_and_failed_host()
    r.h.writes.fail_check, r.h.writes.fail_check_after = ServerError(503), 1  # the announcement lands
    assert await r.scan() == pytest.approx(1.0)  # the entry write is retried after 1 s
    assert r.events("TopologyRepairFailed")[0].startswith("recording the repaired assignment failed")
    # Kueue touches the Workload meanwhile (old annotation, old record): the new slots stay held.
    r.obj["metadata"]["resourceVersion"] = "50"
    r.h.modify_workload(r.obj)
    assert r.free("h5") == 4
    r.clock.now += 1
    await r.scan()
    assert r.h.writes.checks[-1]["message"].startswith(f"node {small} NotReady for 30s: 4 pod(s)")
    r.observe()
    assert r.free("h5") == 4 and r.hosts()["h5"] == 4


async def test_an_annotation_write_with_no_answer_is_settled_by_a_reread(r: Rig) -> None:
    await r.spare_and_failed_host()
    r.h.writes.fail_annotation = TransportError("connection reset")
    assert await r.scan() == pytest.approx(1.0)  # looked for soon: it may have landed
    assert r.free("h5") == 4
    r.clock.now += 1
    # Not there: the apiserver may still apply it: wait out the settle time, holding the slots.
    assert await r.scan() == pytest.approx(64.0)
    assert r.free("h5") == 4
    r.clock.now += 64
    # The re-read shows the old annotation: it never landed; released and decided again.
    await r.scan()
    assert r.free("h5") == 8
    await r.scan()
    assert len(r.h.writes.annotations) == 2 and r.events("TopologyRepaired")


async def test_wait_says_it_waits_for_nodes_when_no_room_could_ever_be_made(r: Rig) -> None:
    """16 pods fill rack r1 (h1 and h2, 8 GPUs each); h2 is deleted: no rack can hold 16 pods any
    more even empty, so the note names what can end the wait (nodes), not capacity."""
    before = await r.admit(count=16)
    assert sorted(before.values()) == [8, 8]
    victim = sorted(before)[1]
    r.node(victim, RACK_OF[victim], event="DELETED")
    await r.scan()
    (note,) = r.events("TopologyRepairPending")
    assert note.startswith(f"node {victim} deleted: no replacement fits: "), note
    assert "can never fit, in its domain, even with every other workload gone" in note
    assert note.endswith("waiting for the failed nodes to serve again or for new nodes (nodeFailurePolicy Wait)")
    assert "waiting for capacity" not in note


async def test_wait_says_it_waits_for_capacity_when_another_workload_holds_the_room(r: Rig) -> None:
    """The spare host h5 is full of someone else's pod: room can come from that pod ending, so the
    note waits for capacity; when it ends, the repair moves the pods there."""
    small, _, rack = roles(await r.admit())
    r.node("h5", rack, event="ADDED")
    r.h.informers.pods.handle_event("ADDED", mk.pod("other", "h5", gpus=8, uid="other-uid"))
    r.node(small, rack, ready=False)
    r.clock.now += 30
    await r.scan()
    (note,) = r.events("TopologyRepairPending")
    assert "can never fit" not in note
    assert note.endswith("; waiting for capacity (nodeFailurePolicy Wait)"), note
    r.h.informers.pods.handle_event("DELETED", mk.pod("other", "h5", gpus=8, uid="other-uid"))
    await r.scan()
    assert r.events("TopologyRepaired")[0].endswith(f"moved from {small} to h5 in rack {rack}")


async def test_a_podset_group_is_repaired_inside_the_domain_it_shares() -> None:
    """A leader + workers group (podset-group-name) placed together in one rack: the failed
    worker host's pods move inside that rack, the leader stays where it is."""
    r = rig()
    group = {REQUIRED: RACK, GROUP_NAME: "g"}
    podsets = [mk.podset("leader", 1, group, gpus=1), mk.podset("workers", 12, group, gpus=1)]
    r.obj = mk.workload("wl", podsets=podsets, **{k: v for k, v in workload.keywords.items()})
    r.h.add_workload(r.obj)
    await r.h.admission.reconcile("ns/wl")
    r.observe()
    placed = {
        name: {d.values[-1]: d.count for d in a.domains}
        for name, a in decode_assignment_annotation(r.wl().metadata.annotations[ANN])
    }
    hosts_used = set(placed["leader"]) | set(placed["workers"])
    (rack,) = {RACK_OF[h] for h in hosts_used}
    victim = min(placed["workers"], key=lambda h: (placed["workers"][h], h))
    assert victim not in placed["leader"]  # leader 1 + workers 7 on one host, workers 5 on the other
    r.node("h5", rack, event="ADDED")
    r.node(victim, rack, ready=False)
    r.clock.now += 30
    await r.scan()
    r.observe()
    after = {
        name: {d.values[-1]: d.count for d in a.domains}
        for name, a in decode_assignment_annotation(r.wl().metadata.annotations[ANN])
    }
    assert after["leader"] == placed["leader"]
    assert victim not in after["workers"] and sum(after["workers"].values()) == 12
    assert {RACK_OF.get(h, rack) for h in (*after["workers"], *after["leader"])} == {rack}
    assert r.events("TopologyRepaired"), (placed, after)


async def test_the_annotation_write_is_guarded_by_the_version_after_the_announcement(r: Rig) -> None:
    """The announcement (a status write) changes the Workload's resourceVersion: guarding the
    annotation with the version the decision saw would always conflict with ourselves."""
    versions: list[str | None] = []
    write = r.h.writes.write_annotation

    async def spy(wl: Workload, text: str) -> Workload:
        versions.append(wl.metadata.resource_version)
        return await write(wl, text)

    async def read(_wl: Workload) -> Workload:
        obj = r.apiserver()
        obj["metadata"]["resourceVersion"] = "77"  # the announcement's
        return Workload.model_validate(obj)

    await r.spare_and_failed_host()
    r.h.writes.write_annotation = spy  # type: ignore[method-assign]
    r.h.writes.read_workload = read  # type: ignore[method-assign]
    await r.scan()
    assert versions == ["77"] and r.events("TopologyRepaired")


async def test_a_workload_changed_after_the_announcement_is_decided_again(r: Rig) -> None:
    await r.spare_and_failed_host()

    async def read(_wl: Workload) -> Workload:
        obj = r.apiserver()
        obj["metadata"]["annotations"][ANN] = obj["metadata"]["annotations"][ANN].replace('"main"', '"main" ')
        return Workload.model_validate(obj)

    r.h.writes.read_workload = read  # type: ignore[method-assign]
    assert await r.scan() == pytest.approx(0.5)
    assert len(r.h.writes.annotations) == 1 and r.free("h5") == 8  # nothing written, nothing held


async def test_the_repairs_writes_keep_the_topology_health_note_in_front(r: Rig) -> None:
    """Dropping the note would have topology health write it back between the repair's writes,
    turning the guarded annotation write into a conflict with ourselves, again and again."""
    small, _, rack = roles(await r.admit())
    noted = copy.deepcopy(r.h.writes.checks[-1])
    noted["message"] = f"rack {rack} is no longer whole; placement not enforced. " + noted["message"]
    r.h.writes.checks.append(noted)
    r.observe()
    r.node("h5", rack, event="ADDED")
    r.node(small, rack, ready=False)
    r.clock.now += 30
    await r.scan()
    announce, final = r.h.writes.checks[-2:]
    assert "[repairing main=" in announce["message"] and "[repairing" not in final["message"]
    for e in (announce, final):
        assert e["message"].startswith(f"rack {rack} is no longer whole; placement not enforced. node {small} NotReady")


async def test_an_annotation_write_that_landed_unanswered_is_confirmed_by_a_prompt_reread(r: Rig) -> None:
    """DST seed 300116 (cordon): the repair's annotation write landed but its answer was lost.
    Waiting the whole settle time (65 s) before the re-read kept the repair unfinished, so the
    stray-pod rule could not judge the pod left on the cordoned host, which ran outside the new
    assignment for over a minute. A write can land late, never un-land: a prompt re-read that
    shows our text under our announcement proves it landed; only a re-read without it must
    wait out the settle time."""
    from kueue_tas.controllers.repair.writes import UNKNOWN_WRITE_RECHECK_SECONDS
    from kueue_tas.controllers.timings import UNKNOWN_WRITE_SETTLE_SECONDS

    write = r.h.writes.write_annotation

    async def landed_unanswered(wl: Workload, text: str) -> Workload:
        await write(wl, text)
        raise TransportError("read timed out")

    await r.spare_and_failed_host()
    r.h.writes.write_annotation = landed_unanswered  # type: ignore[method-assign]
    r.h.writes.read_workload = r.read  # type: ignore[method-assign]
    delay = await r.scan()
    assert delay is not None and delay <= UNKNOWN_WRITE_RECHECK_SECONDS < UNKNOWN_WRITE_SETTLE_SECONDS
    assert not r.events("TopologyRepaired")
    r.clock.now += delay
    await r.scan()
    assert r.events("TopologyRepaired"), "the landed write was not confirmed before the settle time"
    assert "[repairing" not in r.h.writes.checks[-1]["message"]


async def test_an_annotation_write_not_seen_by_the_prompt_reread_waits_out_the_settle_time(r: Rig) -> None:
    """Not there yet is not "never": the apiserver may still apply it, so the repair neither
    finishes nor is decided again before the settle time."""
    from kueue_tas.controllers.timings import UNKNOWN_WRITE_SETTLE_SECONDS

    async def lost(_wl: Workload, _text: str) -> Workload:
        raise TransportError("read timed out")

    await r.spare_and_failed_host()
    r.h.writes.write_annotation = lost  # type: ignore[method-assign]
    r.h.writes.read_workload = r.read  # type: ignore[method-assign]
    written = len(r.h.writes.annotations)
    delay = await r.scan()
    assert delay is not None
    r.clock.now += delay
    wait = await r.scan()
    assert wait is not None and wait == pytest.approx(UNKNOWN_WRITE_SETTLE_SECONDS - delay, abs=0.01)
    assert not r.events("TopologyRepaired") and len(r.h.writes.annotations) == written
    r.clock.now += wait
    assert await r.scan() == pytest.approx(0.5)  # not landed: released and decided again


async def test_a_write_that_hangs_holds_up_no_pass(r: Rig) -> None:
    """DST seed 1003508 (cordon): the pass awaited each decided repair's writes in turn, so one
    workload's write the apiserver sat on for 60 s stopped every other repair (and the stray-pod
    rule, which waits for repairs in flight, left a pod outside its assignment for a minute). The
    pass now only decides; each workload's writes advance on the writers' queue."""
    stuck: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    write = r.h.writes.write_check

    async def hangs(wl: Workload, entry: dict[str, Any]) -> None:
        if "[repairing" in entry.get("message", ""):
            await stuck  # the announcement never answers
        await write(wl, entry)

    await r.spare_and_failed_host()
    r.h.writes.write_check = hangs  # type: ignore[method-assign]
    await asyncio.wait_for(r.repair.reconcile(SCAN), timeout=5)  # the pass is not held up
    assert len(r.repair.writing) == 1, "the decided repair was not handed to the writers"
    key = await r.repair.writing.get()
    writer = asyncio.create_task(r.repair.advance_writes(key))
    await asyncio.sleep(0)
    await asyncio.wait_for(r.repair.reconcile(SCAN), timeout=5)  # nor while its write hangs
    assert not writer.done()
    stuck.set_result(None)
    await writer
    r.repair.writing.done(key)
    assert any("[repairing" in e["message"] for e in r.h.writes.checks)  # announced, then written whole
    assert r.events("TopologyRepaired")


async def test_a_repair_does_not_move_pods_into_a_domain_held_for_another_workload(r: Rig) -> None:
    """I14: spare host h5 is held for another workload's preemption: the repair of the failed
    host's pods may not use it (nothing else in the rack has room: the repair waits); the hold
    gone, it moves them there."""
    before = await r.admit()
    small, _, rack = roles(before)
    spare = "h5"
    r.node(spare, rack, event="ADDED")
    until = r.h.ctx.wall().timestamp() + 300
    r.h.ctx.holds.add(Hold("ns/other", Domain("gpu", HOST, (rack, spare)), until, ()))
    r.node(small, rack, ready=False)
    r.clock.now += 31
    await r.scan()
    assert len(r.h.writes.annotations) == 1  # no repair written
    assert spare not in r.hosts()
    r.h.ctx.holds.release("ns/other")
    r.clock.now += 31
    await r.scan()
    ((_, new),) = decode_assignment_annotation(r.h.writes.annotations[-1])
    assert spare in {d.values[-1] for d in new.domains}
