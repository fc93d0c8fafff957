"""A gated pod the ungater holds back is explained (issue 27, defect 6).

A replacement pod whose slot is on a host that cannot take it now (cordoned, NotReady, gone)
stays gated: released there it would wait pinned to a node that may never serve again. While
other pods of the workload still progress on a cordoned host, no node repair moves the slot
either (Kueue's TASReplaceNodeOnPodTermination), so the pod can stay gated for long. It must
not stay so silently: a Warning Event on the Workload and a structured log line name the pod,
the host and the reason, once per pod and reason, not on every pass.
"""

from __future__ import annotations

import builders as mk
from structlog.testing import capture_logs
from ungater_harness import Harness, assignment
from vocab import HOST

from kueue_tas.capacity.hostnames import node_serving_problem
from kueue_tas.controllers.informers import slim_node
from kueue_tas.controllers.ungate import reconciler as uc


def harness_with(problems: dict[str, str | None]) -> Harness:
    """A harness whose ungater reads why a node cannot take a pod from ``problems``."""
    return Harness(node_problem=lambda name: problems.get(name, "does not exist"))


def held_events(h: Harness) -> list[str]:
    return [message for kind, reason, message in h.rec.events if reason == uc.HELD_REASON and kind == "Workload"]


def held_lines(logs: list[dict[str, object]]) -> list[dict[str, object]]:
    return [line for line in logs if line.get("event") == "pod_held_back"]


def progressing_on_n2(h: Harness) -> None:
    """ns/wl: 1 pod on n1, 2 on n2; b runs on n2 and a on n1, c replaces a pod of n2 that failed."""
    h.workload(assignment(("n1", 1), ("n2", 2)))
    h.pod("a", gated=False, selector={HOST: "n1"}, node="n1", phase="Running")
    h.pod("b", gated=False, selector={HOST: "n2"}, node="n2", phase="Running")
    h.pod("c")


async def test_a_pod_held_back_from_a_cordoned_host_is_explained_once() -> None:
    h = harness_with({"n1": None, "n2": "is cordoned (spec.unschedulable)"})
    progressing_on_n2(h)
    with capture_logs() as logs:
        await h.run_pass()
        assert h.rec.patches == []  # c's slot is on n2, which takes no new pods
        [event] = held_events(h)
        assert "pod c" in event and "node n2" in event and "cordoned" in event
        [line] = held_lines(logs)
        assert line["pod"] == "c" and line["node"] == "n2" and line["workload"] == "ns/wl"
        assert line["reason"] == "is cordoned (spec.unschedulable)"
        assert line["log_level"] == "warning"
        for _ in range(3):  # later passes (pod status updates, other pods' events) stay quiet
            h.pod("b", "MODIFIED", gated=False, selector={HOST: "n2"}, node="n2", phase="Running", rv="2")
            await h.run_pass()
        assert len(held_events(h)) == 1, "the explanation was repeated on every pass"
        assert len(held_lines(logs)) == 1
    # The pod on the pod's own object too, for `kubectl describe pod`.
    assert any(kind == "Pod" and reason == uc.HELD_REASON for kind, reason, _ in h.rec.events)


async def test_a_new_reason_or_a_new_hold_is_explained_again() -> None:
    problems: dict[str, str | None] = {"n1": None, "n2": "is cordoned (spec.unschedulable)"}
    h = harness_with(problems)
    progressing_on_n2(h)
    await h.run_pass()
    problems["n2"] = "is NotReady"  # the same pod, held for another reason
    await h.run_pass()
    events = held_events(h)
    assert len(events) == 2 and "NotReady" in events[1] and "pod c" in events[1]
    problems["n2"] = None  # the host serves again: c goes, and is no longer held
    h.ungater_informers.nodes.handle_event("MODIFIED", mk.node("n2", labels={HOST: "n2"}))
    await h.run_pass()
    assert h.rec.selectors() == {"c": "n2"}
    h.observe_patches()
    # Later c fails; its replacement d is held back from n2 cordoned again: a new explanation.
    problems["n2"] = "is cordoned (spec.unschedulable)"
    h.pod("c", "MODIFIED", gated=False, selector={HOST: "n2"}, node="n2", phase="Failed", uid="uid-c", rv="9")
    h.pod("d")
    await h.run_pass()
    events = held_events(h)
    assert len(events) == 3 and "pod d" in events[2] and "cordoned" in events[2]


def test_the_reason_a_node_takes_no_pods_is_named() -> None:
    assert node_serving_problem(None) == "does not exist"
    cordoned = slim_node(mk.node("n1", labels={HOST: "n1"}, unschedulable=True))
    assert node_serving_problem(cordoned) == "is cordoned (spec.unschedulable)"
    assert node_serving_problem(slim_node(mk.node("n1", labels={HOST: "n1"}, ready=False))) == "is NotReady"
    assert node_serving_problem(slim_node(mk.node("n1", labels={HOST: "n1"}))) is None


async def test_a_pod_held_for_long_is_explained_again_after_the_reminder_period() -> None:
    """DST seed 206943 (cordon): a pod held back for ten minutes had one Event at the start and
    then nothing, though Events expire (the apiserver's --event-ttl) and the kube-scheduler
    repeats its own FailedScheduling at least every five minutes. A held pod is explained again
    ``HELD_REMIND_SECONDS`` after its last explanation, and the pass that holds it asks to be
    run again then, as no event of the pod or node would bring it back."""
    now = [0.0]
    h = Harness(
        clock=lambda: now[0],
        node_problem=lambda name: None if name == "n1" else "is cordoned (spec.unschedulable)",
    )
    progressing_on_n2(h)
    delay = await h.run_pass()
    assert len(held_events(h)) == 1
    assert delay is not None and 0 < delay <= uc.HELD_REMIND_SECONDS + 0.01, "nothing brings the pass back"
    now[0] = uc.HELD_REMIND_SECONDS / 2
    await h.run_pass()
    assert len(held_events(h)) == 1, "reminded before the period"
    now[0] = uc.HELD_REMIND_SECONDS + 0.5
    delay = await h.run_pass()
    events = held_events(h)
    assert len(events) == 2 and "pod c" in events[1] and "cordoned" in events[1]
    assert delay is not None and delay > uc.HELD_REMIND_SECONDS - 1
    assert uc.HELD_REMIND_SECONDS < 300, "must remind within the kube-scheduler's five minutes"


async def test_a_pass_with_nothing_held_asks_for_no_reminder() -> None:
    now = [0.0]
    h = Harness(clock=lambda: now[0], node_problem=lambda _name: None)
    progressing_on_n2(h)
    await h.run_pass()
    h.observe_patches()  # c released and seen so: no expectation, nothing held
    assert await h.run_pass() is None
    assert held_events(h) == []
