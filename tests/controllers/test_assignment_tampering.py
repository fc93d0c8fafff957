"""Issue 12, defect 3: a user edits our assignment annotation on an admitted Workload.

Before: a malformed edit dropped the workload's usage (a log line only) and stopped its
ungating; a valid but different edit was trusted as written. Now our check entry (status)
records a digest per PodSet; on a mismatch the capacity model keeps charging what we decided,
the ungater releases no pod, and the guard restores our text (or, when it cannot know it after a
restart, re-places the workload through Retry), with a Warning Event."""

from __future__ import annotations

from admission_harness import (
    CHECK,
    HOSTS,
    Harness,
    add_gated_pods,
    admitted,
    edited,
    guard,
    harness,
    other_hosts,
    workload,
)
from admission_harness import ungater as ungater_of
from vocab import GPU, HOST

from kueue_tas.api import constants as c
from kueue_tas.api.workload import Workload
from kueue_tas.capacity.assignment_record import (
    assignment_tampering,
    podset_digest,
    record_suffix,
    recorded,
)
from kueue_tas.controllers.guard.reconciler import REASON
from kueue_tas.topology.assignment import DomainAssignment, TopologyAssignment
from kueue_tas.topology.codec.codec import decode_assignment_annotation, encode_assignment_annotation
from kueue_tas.topology.explain.free import domain_free

FIELD = f"metadata.annotations[{c.TOPOLOGY_ASSIGNMENT_ANNOTATION}]"


def per_host(h: Harness) -> dict[str, int]:
    snap = h.capacity.snapshot("gpu")
    assert snap is not None
    free = domain_free(snap)
    return {host: int(free[(HOST, host, GPU)]) for host in HOSTS}


async def test_our_ready_entry_records_the_assignment() -> None:
    h = harness()
    obj = await admitted(h)
    wl = Workload.model_validate(obj)
    [(name, ta)] = decode_assignment_annotation(h.writes.annotations[-1])
    assert recorded(h.writes.checks[-1]["message"]) == {name: podset_digest("u1", name, ta)}
    assert h.writes.checks[-1]["message"].startswith("topology assignment: main: 8 pods in ")
    assert h.writes.checks[-1]["message"].endswith(f"[record main={podset_digest('u1', name, ta)}]")
    assert assignment_tampering(wl, {CHECK}) is None


async def test_malformed_edit_keeps_charging_and_is_restored() -> None:
    h = harness()
    g = guard(h)
    obj = await admitted(h)
    before = per_host(h)
    assert sum(before.values()) == 32 - 8
    h.modify_workload(edited(obj, "{not json"))
    assert per_host(h) == before, "the edit dropped the workload's usage"
    assert await g.reconcile("ns/wl") is None
    assert h.writes.annotations[-1] == obj["metadata"]["annotations"][c.TOPOLOGY_ASSIGNMENT_ANNOTATION]
    [(_, kind, _, message)] = [e for e in h.events.seen if e[2] == REASON]
    assert kind == "Warning" and message.startswith(f"{FIELD}: no longer decodes: ")
    assert message.endswith("; restored the assignment kueue-tas recorded") and "\n" not in message


async def test_valid_but_different_edit_is_not_followed() -> None:
    h = harness()
    g = guard(h)
    obj = await admitted(h)
    before = per_host(h)
    text = obj["metadata"]["annotations"][c.TOPOLOGY_ASSIGNMENT_ANNOTATION]
    h.modify_workload(edited(obj, other_hosts(text)))
    assert per_host(h) == before, "the edited hosts were charged instead of ours"
    # The ungater releases no gated pod into the edited domains.
    ungater, patches = ungater_of(h)
    add_gated_pods(h)
    assert await ungater.reconcile("ns/wl") is None and patches == []
    assert await g.reconcile("ns/wl") is None
    assert h.writes.annotations[-1] == text
    [(_, _, _, message)] = [e for e in h.events.seen if e[2] == REASON]
    assert message == f'{FIELD}: PodSet "main" differs from the assignment kueue-tas recorded; restored the ' + (
        "assignment kueue-tas recorded"
    )
    # Once restored, the ungater follows our assignment again.
    h.modify_workload(edited(obj, text, rv="9"))
    await ungater.reconcile("ns/wl")  # asks to look again when the releases are due to be seen
    assert len(patches) == 8


async def test_restart_after_edit_re_places_the_workload() -> None:
    h = harness()
    obj = await admitted(h)
    text = obj["metadata"]["annotations"][c.TOPOLOGY_ASSIGNMENT_ANNOTATION]
    moved = other_hosts(text)
    # A new process: it first sees the Workload already edited.
    h2 = harness()
    g = guard(h2)
    h2.add_workload(edited(obj, moved))
    # Conservative until Kueue re-places it: the edited assignment, as far as it decodes, is charged.
    assert sum(per_host(h2).values()) == 32 - 8
    assert await g.reconcile("ns/wl") is None
    [entry] = h2.writes.checks
    assert entry["name"] == CHECK and entry["state"] == "Retry"
    assert entry["message"].startswith(f'{FIELD}: PodSet "main" differs from the assignment kueue-tas recorded; ')
    assert "re-placed" in entry["message"] and h2.writes.annotations == []
    assert [e[1:3] for e in h2.events.seen] == [("Warning", REASON)]


async def test_restart_after_malformed_edit_re_places_and_names_the_problem() -> None:
    h = harness()
    obj = await admitted(h)
    h2 = harness()
    g = guard(h2)
    h2.add_workload(edited(obj, '{"podSets": 7}'))
    assert await g.reconcile("ns/wl") is None
    [entry] = h2.writes.checks
    assert entry["state"] == "Retry" and entry["message"].startswith(f"{FIELD}: no longer decodes: ")


async def test_entries_without_a_record_are_trusted_as_written() -> None:
    # Admitted by the previous version: no record in the message.
    ta = TopologyAssignment((HOST,), (DomainAssignment(("h3",), 4),))
    wl = Workload.model_validate(
        workload(check_state="Ready", check_message="topology assignment: main: 4 pods in 1 domain(s)", assignment=ta)
    )
    assert assignment_tampering(wl, {CHECK}) is None


def test_record_ignores_encoding_and_domain_order() -> None:
    a = TopologyAssignment((HOST,), (DomainAssignment(("h1",), 2), DomainAssignment(("h2",), 3)))
    b = TopologyAssignment((HOST,), (DomainAssignment(("h2",), 3), DomainAssignment(("h1",), 2)))
    assert podset_digest("u", "main", a) == podset_digest("u", "main", b)
    assert podset_digest("u", "main", a) != podset_digest("v", "main", a)  # another Workload
    changed = TopologyAssignment((HOST,), (DomainAssignment(("h1",), 3), DomainAssignment(("h2",), 2)))
    assert podset_digest("u", "main", a) != podset_digest("u", "main", changed)
    assert recorded("topology assignment: x" + record_suffix("u", [("main", a), ("w", b)])) == {
        "main": podset_digest("u", "main", a),
        "w": podset_digest("u", "w", b),
    }
    assert recorded("no record here") == {}


async def test_a_second_check_of_ours_merging_its_podset_is_not_tampering() -> None:
    ta = TopologyAssignment((HOST,), (DomainAssignment(("h3",), 4),))
    other = TopologyAssignment((HOST,), (DomainAssignment(("h4",), 2),))
    message = "topology assignment: main" + record_suffix("u1", [("main", ta)])
    text = encode_assignment_annotation([("main", ta), ("worker", other)])
    wl = Workload.model_validate(
        workload(
            check_state="Ready", check_message=message, workload_annotations={c.TOPOLOGY_ASSIGNMENT_ANNOTATION: text}
        )
    )
    assert assignment_tampering(wl, {CHECK}) is None
