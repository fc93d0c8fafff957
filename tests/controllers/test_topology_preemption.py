"""Topology-driven preemption in the admission (``controllers/preemption``): a higher-priority
workload that fits no rack has the cheapest lower-priority workloads evicted through Kueue (its
check entry on them turned Retry), the cleared rack is held for it, and nothing else is placed
there meanwhile; DryRun only reports; off by default and bounded by the ClusterQueue's own
``spec.preemption``."""

from __future__ import annotations

import copy
import json
from datetime import UTC, datetime
from typing import Any

import builders as mk
import pytest
from admission_harness import CHECK, T0, Harness, evicted, harness, ready, wl
from vocab import GPU, RACK

from kueue_tas.api import constants as c
from kueue_tas.topology.codec.codec import decode_assignment_annotation

SWITCH = "kueue-tas.io/topology-preemption"
WALL = datetime(2026, 1, 1, 2, 0, tzinfo=UTC)  # two hours after T0


def queue(h: Harness, switch: str | None, within: str = "LowerPriority") -> None:
    cq = mk.cluster_queue(
        "cq",
        ("gpu",),
        {CHECK: ["gpu"]},
        covered=(GPU,),
        quota="100",
        resource_version="2",
        preemption={"withinClusterQueue": within, "reclaimWithinCohort": "Never"},
    )
    if switch is not None:
        cq["metadata"]["annotations"] = {SWITCH: switch}
    h.informers.queues.handle_event("MODIFIED", cq)


def with_priority(obj: dict[str, Any], priority: int) -> dict[str, Any]:
    out = copy.deepcopy(obj)
    out["spec"]["priority"] = priority
    return out


async def admit(h: Harness, name: str, count: int, priority: int, admitted_at: str) -> dict[str, Any]:
    """Decide ``name`` and play Kueue's admission back: Ready entry seen, Admitted since ``admitted_at``."""
    obj = with_priority(wl(name, count), priority)
    h.add_workload(obj)
    assert await h.admission.reconcile(f"ns/{name}") is None
    assert h.writes.checks[-1]["state"] == "Ready"
    out = ready(h, obj)
    out["status"]["conditions"].append(mk.condition("Admitted", reason="Admitted", message="", time=admitted_at))
    h.modify_workload(out)
    return out


def rack_of(h: Harness) -> str:
    """The rack of the last assignment written (h1, h2 are rack r1; h3, h4 r2)."""
    ((_, assignment),) = decode_assignment_annotation(h.writes.annotations[-1])
    racks = {"r1" if d.values[-1] in ("h1", "h2") else "r2" for d in assignment.domains}
    assert len(racks) == 1, racks
    return racks.pop()


async def two_racks_busy(h: Harness) -> tuple[dict[str, Any], dict[str, Any]]:
    """ "old" (10 pods, admitted at T0) fills one rack, "new" (10 pods, admitted an hour later)
    the other: 6 GPUs free in each, so a 12-pod rack request fits neither."""
    old = await admit(h, "old", 10, 0, T0)
    new = await admit(h, "new", 10, 0, "2026-01-01T01:00:00Z")
    return old, new


def entry_of(h: Harness, text: str) -> dict[str, Any]:
    return next(e for e in reversed(h.writes.checks) if text in e["message"])


async def test_the_cheapest_victim_is_evicted_and_its_rack_held_for_the_preemptor() -> None:
    h = harness(wall=lambda: WALL)
    queue(h, "Enabled")
    old, new = await two_racks_busy(h)
    new_rack = rack_of(h)
    h.add_workload(with_priority(wl("hi", 12, uid="uid-hi"), 10))
    await h.admission.reconcile("ns/hi")
    # "new" has run one hour on 10 GPUs, "old" two: "new" is the cheaper victim.
    victim = entry_of(h, 'preempted by kueue-tas for workload "ns/hi" (priority 10)')
    assert victim["state"] == "Retry" and victim["name"] == CHECK
    assert f'"{new_rack}"' in victim["message"]
    mine = entry_of(h, "preempting 1 workload(s) of lower priority")
    assert mine["state"] == "Retry" and h.writes.checks.index(mine) < h.writes.checks.index(victim)
    assert "ns/new" in mine["message"] and "ns/old" not in mine["message"]
    assert mine["requeueAfterSeconds"] <= 5
    (hold,) = h.writes.holds
    assert json.loads(hold)["victims"] == ["ns/new"] and json.loads(hold)["values"][-1] == new_rack
    reasons = h.events.reasons()
    assert ("Workload/new", "Warning", "TopologyPreempted") in reasons
    assert ("Workload/hi", "Normal", "TopologyPreemption") in reasons
    assert h.metrics.topology_preemptions_total.labels("enabled")._value.get() == 1
    assert h.metrics.topology_preemption_victims_total.labels("enabled")._value.get() == 1

    # Kueue evicts "new" and reserves quota for it again before "hi" comes back: the rack it
    # left is held for "hi", so "new" does not go back there (it fits nowhere else).
    gone = evicted(new, quota=False)
    h.modify_workload(gone)
    back = with_priority(
        wl("new", 10, uid="uid-new", resource_version=str(int(gone["metadata"]["resourceVersion"]) + 1)), 0
    )
    h.modify_workload(back)
    await h.admission.reconcile("ns/new")
    assert h.writes.checks[-1]["state"] == "Retry"
    # "hi" is decided again: placed in the held rack, and no second preemption.
    # Kueue saw its Retry, requeued it and reserved quota again (its hold recorded on it).
    seen = with_priority(wl("hi", 12, uid="uid-hi", resource_version="8", check_state="Retry"), 10)
    seen["metadata"]["annotations"] = {c.PREEMPTION_HOLD_ANNOTATION: hold}
    h.modify_workload(seen)
    again = copy.deepcopy(seen)
    again["metadata"]["resourceVersion"] = "9"
    again["status"]["admissionChecks"][0]["state"] = "Pending"
    h.modify_workload(again)
    await h.admission.reconcile("ns/hi")
    assert h.writes.checks[-1]["state"] == "Ready"
    assert rack_of(h) == new_rack
    assert h.metrics.topology_preemptions_total.labels("enabled")._value.get() == 1
    assert old  # untouched throughout
    assert not any('workload "ns/hi"' in e["message"] and "old" in e["message"] for e in h.writes.checks)


async def test_dry_run_reports_and_evicts_nothing() -> None:
    h = harness(wall=lambda: WALL)
    queue(h, "DryRun")
    await two_racks_busy(h)
    before = len(h.writes.checks)
    h.add_workload(with_priority(wl("hi", 12, uid="uid-hi"), 10))
    await h.admission.reconcile("ns/hi")
    assert len(h.writes.checks) == before + 1  # its own Retry only
    mine = h.writes.checks[-1]
    assert mine["state"] == "Retry" and "topology preemption (DryRun) would evict 1 workload(s)" in mine["message"]
    assert h.writes.holds == []
    assert ("Workload/hi", "Normal", "TopologyPreemption") in h.events.reasons()
    assert h.metrics.topology_preemptions_total.labels("dry_run")._value.get() == 1
    assert h.ctx.holds.closed_for("ns/other", WALL.timestamp()) == []


@pytest.mark.parametrize(
    ("switch", "within", "priority"),
    [
        (None, "LowerPriority", 10),  # off by default: Kueue's own behaviour
        ("Disabled", "LowerPriority", 10),
        ("enabled", "LowerPriority", 10),  # not one of the three values: off, never evicts
        ("Enabled", "Never", 10),  # the ClusterQueue's own policy forbids it
        ("Enabled", "LowerPriority", 0),  # equal priority is never a victim
    ],
    ids=["default", "disabled", "unreadable-switch", "policy-never", "equal-priority"],
)
async def test_no_preemption_without_switch_policy_and_lower_priority(
    switch: str | None, within: str, priority: int
) -> None:
    h = harness(wall=lambda: WALL)
    queue(h, switch, within)
    await two_racks_busy(h)
    before = len(h.writes.checks)
    h.add_workload(with_priority(wl("hi", 12, uid="uid-hi"), priority))
    await h.admission.reconcile("ns/hi")
    assert len(h.writes.checks) == before + 1
    mine = h.writes.checks[-1]
    assert mine["state"] == "Retry" and "preempt" not in mine["message"]
    assert h.writes.holds == []


async def test_no_preemption_when_evicting_every_candidate_makes_no_room() -> None:
    """17 pods fit no 16-GPU rack, whoever leaves: Rejected, never a preemption."""
    h = harness(wall=lambda: WALL)
    queue(h, "Enabled")
    await two_racks_busy(h)
    h.add_workload(with_priority(wl("hi", 17, uid="uid-hi"), 10))
    await h.admission.reconcile("ns/hi")
    assert h.writes.checks[-1]["state"] == "Rejected"
    assert h.writes.holds == []


async def test_a_hold_recorded_on_the_preemptor_is_in_force_after_a_restart() -> None:
    """A new process sees "hi" carrying its hold: the rack stays closed to others until then."""
    h = harness(wall=lambda: WALL)
    queue(h, "Enabled")
    until = "2026-01-01T02:05:00Z"
    hold = {"flavor": "gpu", "level": RACK, "values": ["r1"], "until": until, "victims": ["ns/new"]}
    hi = with_priority(wl("hi", 12, uid="uid-hi"), 10)
    hi["metadata"]["annotations"] = {c.PREEMPTION_HOLD_ANNOTATION: json.dumps(hold)}
    h.add_workload(hi)
    assert [d.values for d in h.ctx.holds.closed_for("ns/x", WALL.timestamp())] == [("r1",)]
    h.add_workload(wl("x", 10, uid="uid-x"))
    await h.admission.reconcile("ns/x")
    assert h.writes.checks[-1]["state"] == "Ready" and rack_of(h) == "r2"  # r1 would be the engine's pick
    # Past its time the hold is gone.
    later = datetime(2026, 1, 1, 2, 6, tzinfo=UTC).timestamp()
    h.ctx.holds.expire(later)
    assert h.ctx.holds.closed_for("ns/y", later) == []


async def test_a_hold_on_a_preemptor_kueue_has_requeued_without_quota_is_in_force_after_a_restart() -> None:
    """Between our Retry and Kueue's requeue the preemptor holds no quota, so its copy names no
    ClusterQueue: a new process still keeps its hold (a ClusterQueue has the switch Enabled),
    or a victim Kueue readmits meanwhile would go back into the rack cleared for it."""
    h = harness(wall=lambda: WALL)
    queue(h, "Enabled")
    hold = {"flavor": "gpu", "level": RACK, "values": ["r1"], "until": "2026-01-01T02:05:00Z", "victims": ["ns/new"]}
    hi = with_priority(wl("hi", 12, uid="uid-hi"), 10)
    hi["metadata"]["annotations"] = {c.PREEMPTION_HOLD_ANNOTATION: json.dumps(hold)}
    h.add_workload(evicted(hi, quota=False))
    assert [d.values for d in h.ctx.holds.closed_for("ns/x", WALL.timestamp())] == [("r1",)]
    # With no ClusterQueue opted in, no decision of ours could have made it: ignored.
    h2 = harness(wall=lambda: WALL)
    queue(h2, "DryRun")
    h2.add_workload(evicted(hi, quota=False))
    assert h2.ctx.holds.closed_for("ns/x", WALL.timestamp()) == []


async def test_preemption_waits_for_preemption_after_seconds() -> None:
    """With ``preemption_after_seconds`` a workload preempts only once it has waited that long for
    a domain (counted from its first Retry, recorded on it): the escalation after a reservation."""
    now = [WALL]
    h = harness(wall=lambda: now[0], settings={"preemption_after_seconds": 600})
    queue(h, "Enabled")
    await two_racks_busy(h)
    hi = with_priority(wl("hi", 12, uid="uid-hi"), 10)
    h.add_workload(hi)
    await h.admission.reconcile("ns/hi")
    first = h.writes.checks[-1]
    assert first["state"] == "Retry" and "preempt" not in first["message"]
    assert h.writes.marks == [{c.WAITING_SINCE_ANNOTATION: "2026-01-01T02:00:00Z"}]
    # Requeued by Kueue, ten minutes later, the wait's start recorded on it: now it preempts.
    now[0] = WALL.replace(minute=10)
    again = copy.deepcopy(hi)
    again["metadata"]["annotations"] = dict(h.writes.marks[0])
    again["metadata"]["resourceVersion"] = "20"
    h.modify_workload(again)
    h.now[0] += 31
    await h.admission.reconcile("ns/hi")
    assert any("preempting 1 workload(s)" in e["message"] for e in h.writes.checks)


@pytest.mark.parametrize(
    ("switch", "until"),
    [("Enabled", "2099-01-01T00:00:00Z"), ("Disabled", "2026-01-01T02:05:00Z")],
    ids=["longer-than-the-setting", "switch-off"],
)
async def test_a_hold_no_decision_of_ours_could_have_made_is_ignored(switch: str, until: str) -> None:
    """The admission policy keeps anyone else from writing a hold; behind it, a recorded hold is
    trusted only if this controller could have written it."""
    h = harness(wall=lambda: WALL)
    queue(h, switch)
    hold = {"flavor": "gpu", "level": RACK, "values": ["r1"], "until": until, "victims": []}
    hi = with_priority(wl("hi", 12, uid="uid-hi"), 10)
    hi["metadata"]["annotations"] = {c.PREEMPTION_HOLD_ANNOTATION: json.dumps(hold)}
    h.add_workload(hi)
    assert h.ctx.holds.closed_for("ns/x", WALL.timestamp()) == []
