"""The ungater's passes, without a cluster: informer events in, pod patches out.

The shared informers are real (fed watch events by hand); the pod patcher and the Event sink
are injected recorders, so every test sees exactly which pods would be patched and how.
"""

from __future__ import annotations

import json
from typing import Any

import builders as mk
import pytest
from ungater_harness import CHECK, Harness, assignment, workload
from vocab import HOST

from kueue_tas.api import constants as c
from kueue_tas.controllers.ungate.writes import ungate_patch
from kueue_tas.kube.errors import Conflict, Invalid, TransportError
from kueue_tas.topology.features import FeatureGates


@pytest.fixture
def h() -> Harness:
    return Harness()


async def test_one_patch_per_pod_removes_only_our_gate_and_pins_the_domain(h: Harness) -> None:
    h.workload(assignment(("n1", 2), ("n2", 2)))
    for i in range(4):
        h.pod(f"p{i}", index=i, rv=str(10 + i))
    await h.run_pass()
    assert h.rec.selectors() == {"p0": "n1", "p1": "n1", "p2": "n2", "p3": "n2"}
    p0 = h.rec.patches[0]
    assert p0["rv"] == "10"
    assert p0["patch"]["spec"]["schedulingGates"] == [{"$patch": "delete", "name": c.SCHEDULING_GATE}]
    assert h.metrics.ungated_pods_total._value.get() == 4


async def test_no_pod_is_released_while_a_node_repair_of_its_workload_is_in_flight() -> None:
    """Chaos seed 2103: a repair moved a workload off a deleted node; before its writes landed
    the node came back, and releasing by the old annotation bound both pods there. The
    ungater waits for the repair, then is asked to look again."""
    in_flight = {"ns/wl"}
    h = Harness(repairing=lambda key: key in in_flight)
    h.workload(assignment(("n1", 2)))
    for i in range(2):
        h.pod(f"p{i}")
    assert await h.run_pass() is None
    assert h.rec.patches == []
    in_flight.clear()
    queue = h.ungater.queue
    while len(queue):  # what the informer events queued
        queue.done(await queue.get())
    assert queue.num_waiting() + len(queue) == 0
    h.ungater.repair_ended("ns/wl")
    assert len(queue) == 1
    await h.run_pass()
    assert h.rec.selectors() == {"p0": "n1", "p1": "n1"}


async def test_expectations_stop_a_second_pass_until_observed(h: Harness) -> None:
    h.workload(assignment(("n1", 2), ("n2", 2)))
    for i in range(4):
        h.pod(f"p{i}")  # no index: greedy mode
    await h.run_pass()
    assert len(h.rec.patches) == 4
    assert len(h.ungater.expectations) == 4
    # The patches have not been observed yet: the pods still look gated in the cache.
    h.rec.patches.clear()
    await h.run_pass()
    assert h.rec.patches == []
    # Observed: expectations are satisfied and nothing more is released.
    h.rec.patches = [
        {"name": f"p{i}", "patch": {"spec": {"nodeSelector": {HOST: "n1" if i < 2 else "n2"}}}} for i in range(4)
    ]
    h.observe_patches()
    h.rec.patches.clear()
    assert len(h.ungater.expectations) == 0
    await h.run_pass()
    assert h.rec.patches == []


async def test_deleted_pod_frees_its_slot_for_the_replacement(h: Harness) -> None:
    h.workload(assignment(("n1", 2), ("n2", 2)))
    for i in range(4):
        h.pod(f"p{i}")
    await h.run_pass()
    h.observe_patches()
    victim = next(p["name"] for p in h.rec.patches if p["patch"]["spec"]["nodeSelector"][HOST] == "n2")
    h.rec.patches.clear()
    h.pod(victim, "DELETED")
    h.pod("p-new")
    await h.run_pass()
    assert h.rec.selectors() == {"p-new": "n2"}


@pytest.mark.parametrize("how", ["succeeded", "failed", "terminating"])
async def test_finished_or_terminating_pod_frees_its_slot(h: Harness, how: str) -> None:
    h.workload(assignment(("n1", 1), ("n2", 1)))
    h.pod("a", gated=False, selector={HOST: "n1"})
    h.pod("b", gated=False, selector={HOST: "n2"})
    h.pod("c")
    await h.run_pass()
    assert h.rec.patches == []  # both domains full
    kw: dict[str, Any] = {"gated": False, "selector": {HOST: "n1"}, "rv": "2"}
    if how == "terminating":
        kw["deleting"] = True
    else:
        kw["phase"] = "Succeeded" if how == "succeeded" else "Failed"
    h.pod("a", "MODIFIED", **kw)
    await h.run_pass()
    assert h.rec.selectors() == {"c": "n1"}


async def test_rank_mode_replacement_returns_to_its_rank_domain(h: Harness) -> None:
    h.workload(assignment(("n1", 2), ("n2", 2)))
    h.pod("p0", index=0, gated=False, selector={HOST: "n1"})
    h.pod("p1", index=1, gated=False, selector={HOST: "n1"})
    h.pod("p3", index=3, gated=False, selector={HOST: "n2"})
    h.pod("p2b", index=2)  # the replacement of index 2
    await h.run_pass()
    assert h.rec.selectors() == {"p2b": "n2"}


async def test_restart_rebuilds_from_the_list_and_releases_only_what_is_left() -> None:
    first = Harness()
    first.workload(assignment(("n1", 3), ("n2", 3)))
    for i in range(6):
        first.pod(f"p{i}")
    first.rec.fail = {"p4": Conflict(409), "p5": Conflict(409)}
    await first.run_pass()
    done = {p["name"]: p["patch"]["spec"]["nodeSelector"] for p in first.rec.patches}
    assert len(done) == 4
    # A new process: no expectations, the list shows what the first one released.
    second = Harness()
    second.workload(assignment(("n1", 3), ("n2", 3)))
    for i in range(6):
        name = f"p{i}"
        if name in done:
            second.pod(name, gated=False, selector=done[name])
        else:
            second.pod(name)
    await second.run_pass()
    final = {**{k: v[HOST] for k, v in done.items()}, **second.rec.selectors()}
    assert sorted(final.values()) == ["n1", "n1", "n1", "n2", "n2", "n2"]
    assert set(second.rec.selectors()) == {"p4", "p5"}


async def test_conflict_holds_the_slot_until_the_newer_version_is_seen(h: Harness) -> None:
    # The pod changed since the informer's copy (an earlier patch of ours may have released it):
    # its slot stays taken until the informer shows the newer version.
    h.workload(assignment(("n1", 2)))
    h.pod("a")
    h.pod("b")
    h.rec.fail = {"a": Conflict(409, "Conflict", "the object has been modified")}
    delay = await h.run_pass()
    assert delay is not None and delay > 0
    assert set(h.ungater.expectations.of("ns/wl")) == {"uid-a", "uid-b"}
    await h.run_pass()
    assert h.rec.selectors() == {"b": "n1"}
    h.pod("a", "MODIFIED", rv="2")  # the newer version: still gated, so our patch did not land
    assert set(h.ungater.expectations.of("ns/wl")) == {"uid-b"}
    await h.run_pass()
    assert h.rec.selectors() == {"b": "n1", "a": "n1"}


async def test_refused_patch_leaves_events_and_is_not_retried_until_the_pod_changes(h: Harness) -> None:
    h.workload(assignment(("n1", 1), ("n2", 2)))
    h.pod("a", index=0)
    h.pod("b", index=1)
    h.pod("c", index=2)
    h.rec.fail = {"a": Invalid(422, "Invalid", "spec.nodeSelector: Invalid value: only additions are allowed")}
    await h.run_pass()
    assert h.rec.selectors() == {"b": "n2", "c": "n2"}
    kinds = {(kind, reason) for kind, reason, _ in h.rec.events}
    assert kinds == {("Pod", "TopologyUngateFailed"), ("Workload", "TopologyUngateFailed")}
    assert all("could not release pod a" in msg and "only additions" in msg for _, _, msg in h.rec.events)
    assert h.metrics.ungate_errors_total._value.get() == 1
    h.observe_patches()
    h.rec.patches.clear()
    await h.run_pass()
    assert h.rec.patches == []  # same version: not retried
    h.pod("a", "MODIFIED", index=0, rv="7")  # the user fixed the pod
    await h.run_pass()
    assert h.rec.selectors() == {"a": "n1"}


async def test_nothing_happens_unless_our_entry_is_ready(h: Harness) -> None:
    h.workload(assignment(("n1", 2)), state="Pending")
    h.pod("a")
    await h.run_pass()
    assert h.rec.patches == []
    h.workloads.handle_event(
        "MODIFIED",
        {
            **workload(assignment=assignment(("n1", 2))),
            "status": {
                "admissionChecks": [
                    {"name": "someone-else", "state": "Ready", "lastTransitionTime": "2026-01-01T00:00:00Z"}
                ]
            },
        },
    )
    await h.run_pass()
    assert h.rec.patches == []


async def test_pods_of_other_workloads_and_ungated_pods_are_never_patched(h: Harness) -> None:
    h.workload(assignment(("n1", 2)))
    foreign = {c.WORKLOAD_LABEL: "another-uid", c.PODSET_LABEL: "main"}
    h.pods.handle_event(
        "ADDED",
        mk.pod(
            "foreign",
            namespace="ns",
            uid="uid-foreign",
            resource_version="1",
            labels=foreign,
            gates=(c.SCHEDULING_GATE,),
            phase="Pending",
        ),
    )
    h.pod("mine-free", gated=False, other_gates=("example.com/other",))
    await h.run_pass()
    assert h.rec.patches == []


async def test_ungate_patch_shape() -> None:
    body = ungate_patch("g/x", {"a": "1"})
    assert json.loads(json.dumps(body)) == {
        "spec": {"schedulingGates": [{"$patch": "delete", "name": "g/x"}], "nodeSelector": {"a": "1"}}
    }


async def test_restart_lists_in_any_order_and_resync_finds_the_gated_pods(h: Harness) -> None:
    # At start the informers list independently: pods before their Workload, and the Workload
    # before our AdmissionChecks are known. No event after that would bring these pods back.
    h.checks.current = set()
    h.pod("a")
    h.pod("b")
    h.workload(assignment(("n1", 2)))
    assert len(h.ungater.queue) == 0 and h.ungater.queue.num_waiting() == 0
    h.checks.current = {CHECK}
    h.ungater.resync()
    assert len(h.ungater.queue) + h.ungater.queue.num_waiting() == 1
    await h.run_pass()
    assert h.rec.selectors() == {"a": "n1", "b": "n1"}


async def test_no_response_holds_the_slot_until_the_pod_is_seen_again(h: Harness) -> None:
    # The patch may have landed: its slot stays taken (no Event yet) until the informer shows
    # the pod; still gated at a newer version means it did not land, and the pod goes again.
    h.workload(assignment(("n1", 2)))
    h.pod("a")
    h.pod("b")
    h.rec.fail = {"a": TransportError("connection reset")}
    delay = await h.run_pass()
    assert delay is not None and delay > 60
    assert set(h.ungater.expectations.of("ns/wl")) == {"uid-a", "uid-b"} and h.rec.events == []
    await h.run_pass()
    assert h.rec.selectors() == {"b": "n1"}
    h.pod("a", "MODIFIED", rv="2")
    await h.run_pass()
    assert h.rec.selectors() == {"b": "n1", "a": "n1"}


# --- elastic workload slices --------------------------------------------------------------------

OLD_UID = "wl-uid-0"


def elastic_harness(gates: str) -> Harness:
    h = Harness()
    h.ungater.gates = FeatureGates.parse(gates)
    return h


def slices(h: Harness) -> None:
    """ns/wl-0 (2 pods, both running on n1) is replaced by ns/wl: 4 pods kept on n1 + 2 on n2."""
    old_wl = mk.workload(
        "wl-0",
        2,
        gpus=0,
        namespace="ns",
        uid=OLD_UID,
        resource_version="1",
        queue=None,
        check=CHECK,
        check_state="Ready",
        check_time="2026-01-01T00:00:00Z",
        assignment=assignment(("n1", 2)),
    )
    h.workloads.handle_event("ADDED", old_wl)
    new_wl = workload(
        assignment=assignment(("n1", 2), ("n2", 2)),
        workload_annotations={c.KUEUE_SLICE_REPLACEMENT_ANNOTATION: "ns/wl-0"},
    )
    h.workloads.handle_event("ADDED", new_wl)
    for i in range(2):  # the old slice's pods: released earlier, running on n1
        labels = {c.WORKLOAD_LABEL: OLD_UID, c.PODSET_LABEL: "main"}
        h.pods.handle_event(
            "ADDED",
            mk.pod(
                f"old{i}",
                node="n1",
                namespace="ns",
                uid=f"uid-old{i}",
                labels=labels,
                selector={HOST: "n1"},
                phase="Running",
            ),
        )
    h.pod("new0")  # the delta: two gated pods of the new slice
    h.pod("new1")


async def test_elastic_delta_pods_go_around_the_pods_the_replaced_slice_keeps() -> None:
    h = elastic_harness("ElasticJobsViaWorkloadSlicesWithTAS=true")
    slices(h)
    await h.run_pass()
    assert h.rec.selectors() == {"new0": "n2", "new1": "n2"}


async def test_without_the_elastic_gate_the_old_slice_pods_are_not_counted() -> None:
    h = elastic_harness("")
    slices(h)
    await h.run_pass()
    # The gate off, the annotation means nothing: the new slice's own pods fill n1 first.
    assert h.rec.selectors() == {"new0": "n1", "new1": "n1"}
