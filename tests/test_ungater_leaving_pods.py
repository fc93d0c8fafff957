"""The ungater never releases a replacement before its slot is free (issue 13, deliverable 4):
a Terminating pod still bound to its node keeps its slot until it is gone (Kueue #10076), and
no pod is released onto a node that cannot take it (Kueue #14092)."""

from __future__ import annotations

import pytest
from test_ungater_controller import HOST, Harness, assignment

from kueue_tas.controllers import ungater as uc


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


async def test_no_release_onto_a_node_that_cannot_take_the_pod() -> None:
    usable = {"n1": True, "n2": False}
    h = Harness()
    h.ungater = uc.Ungater(
        informers=h.ungater_informers,
        checks=h.checks,
        patcher=h.rec,
        events=h.rec,
        metrics=h.metrics,
        settings=h.ungater.settings,
        node_usable=lambda name: usable.get(name, False),
    )
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
