"""The ungater never releases a replacement before its slot is free (issue 13, deliverable 4):
a Terminating pod still bound to its node keeps its slot until it is gone (Kueue #10076), and
no pod is released onto a node that cannot take it (Kueue #14092)."""

from __future__ import annotations

import builders as mk
import pytest
from ungater_harness import Harness, assignment
from vocab import HOST


@pytest.fixture
def h() -> Harness:
    return Harness()


async def test_terminating_pod_on_its_node_keeps_its_slot_until_gone(h: Harness) -> None:
    h.workload(assignment(("n1", 1), ("n2", 1)))
    h.pod("a", gated=False, selector={HOST: "n1"}, node="n1")
    h.pod("b", gated=False, selector={HOST: "n2"}, node="n2")
    h.pod("a", "MODIFIED", gated=False, selector={HOST: "n1"}, node="n1", deleting=True, rv="2")
    h.pod("a2")  # the Job controller's replacement, born gated
    await h.run_pass()
    assert h.rec.patches == []  # a still runs on n1
    h.pod("a", "DELETED", gated=False, selector={HOST: "n1"}, node="n1", deleting=True, rv="3")
    await h.run_pass()
    assert h.rec.selectors() == {"a2": "n1"}


async def test_rank_mode_replacement_waits_for_the_pod_it_replaces(h: Harness) -> None:
    h.workload(assignment(("n1", 2), ("n2", 2)))
    for i in range(4):
        node = "n1" if i < 2 else "n2"
        h.pod(f"p{i}", index=i, gated=False, selector={HOST: node}, node=node)
    h.pod("p2", "MODIFIED", index=2, gated=False, selector={HOST: "n2"}, node="n2", deleting=True, rv="2")
    h.pod("p2b", index=2)
    await h.run_pass()
    assert h.rec.patches == []
    h.pod("p2", "MODIFIED", index=2, gated=False, selector={HOST: "n2"}, node="n2", phase="Failed", rv="3")
    await h.run_pass()
    assert h.rec.selectors() == {"p2b": "n2"}


async def test_a_terminating_pod_outside_the_assignment_holds_nothing(h: Harness) -> None:
    # After a repair moved n3's slot to n7, the pod stuck Terminating on the dead n3 holds no slot.
    h.workload(assignment(("n1", 1), ("n7", 1)))
    h.pod("a", gated=False, selector={HOST: "n1"}, node="n1")
    h.pod("b", gated=False, selector={HOST: "n3"}, node="n3", deleting=True)
    h.pod("b2")
    await h.run_pass()
    assert h.rec.selectors() == {"b2": "n7"}


def harness_with(usable: dict[str, bool]) -> Harness:
    """A harness whose ungater asks ``usable`` whether a node can take a pod now."""
    return Harness(node_usable=lambda name: usable.get(name, False))


async def test_no_release_onto_a_node_that_cannot_take_the_pod() -> None:
    usable = {"n1": True, "n2": False}
    h = harness_with(usable)
    h.workload(assignment(("n1", 1), ("n2", 1)))
    h.pod("a")
    h.pod("b")
    await h.run_pass()
    assert h.rec.selectors() == {"a": "n1"}  # b stays gated while n2 is NotReady
    h.observe_patches()
    h.rec.patches.clear()
    usable["n2"] = True
    await h.run_pass()
    assert h.rec.selectors() == {"b": "n2"}


async def test_a_node_that_serves_again_lets_its_held_pods_go_without_a_pod_event() -> None:
    """Chaos seed 451: a one-host Job's pod was held back while its node flapped NotReady for 7 s;
    nothing about the pod or the Workload changed afterwards, so only the node's own event can
    bring the ungater back to it."""
    usable = {"n1": False}
    h = harness_with(usable)
    h.workload(assignment(("n1", 1)))
    h.pod("a")
    await h.run_pass()
    assert h.rec.patches == []
    queued: list[str] = []
    h.ungater.queue.add_after = lambda key, _delay: queued.append(key)  # type: ignore[method-assign]
    h.ungater_informers.nodes.handle_event("MODIFIED", mk.node("n2", labels={HOST: "n2"}))
    h.ungater_informers.nodes.handle_event("MODIFIED", mk.node("n1", labels={HOST: "n1"}, ready=False))
    assert queued == []  # another node, or n1 still NotReady: nothing to do
    usable["n1"] = True
    h.ungater_informers.nodes.handle_event("MODIFIED", mk.node("n1", labels={HOST: "n1"}))
    assert queued == ["ns/wl"]
    h.ungater_informers.nodes.handle_event("MODIFIED", mk.node("n1", labels={HOST: "n1"}, resource_version="3"))
    assert queued == ["ns/wl"]  # once: nothing is held back from n1 any more
    await h.run_pass()
    assert h.rec.selectors() == {"a": "n1"}
