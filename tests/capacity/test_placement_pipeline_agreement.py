"""The admission decision, ``kueue-tas plan`` and the trial placement of ``describe`` and the map
answer alike for the same workload on the same cluster (issue 29: one placement pipeline,
``capacity/workload_placement``).

Hypothesis draws a cluster (racks of hosts with GPUs, some taken by bound non-TAS pods) and one
Workload Kueue reserved quota for (one to three PodSets, each asking required / preferred /
unconstrained / nothing at a level, some levels the Topology lacks, some PodSet groups, a
workload-wide constraint). The three callers must agree on whether it fits and, when it does,
on every PodSet's assignment; when it does not, on which PodSet and why (decide's message
carries the trial's).
"""

from __future__ import annotations

from typing import Any

import builders as mk
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kueue_tas.api.kinds import parse_object
from kueue_tas.api.workload import Workload
from kueue_tas.capacity.trial_placement import trial_placement
from kueue_tas.cli.planner import Planner
from kueue_tas.controllers.decide import Outcome, decide
from kueue_tas.topology.requests.plan_requests import PlanInputError

LEVELS = (mk.BLOCK, mk.RACK, mk.HOST, "example.com/missing-level")
KINDS = ("required", "preferred", "unconstrained", None)


@st.composite
def podsets(draw: st.DrawFn) -> list[dict[str, Any]]:
    n = draw(st.integers(1, 3))
    grouped = n >= 2 and draw(st.booleans())
    out = []
    for i in range(n):
        kind = draw(st.sampled_from(KINDS))
        annotations: dict[str, str] = {}
        if kind == "unconstrained":
            annotations[mk.UNCONSTRAINED] = "true"
        elif kind is not None:
            annotations[f"kueue-tas.io/podset-{kind}-topology"] = draw(st.sampled_from(LEVELS))
        if grouped and i < 2:
            annotations["kueue-tas.io/podset-group-name"] = "g"
        count = 1 if grouped and i == 0 else draw(st.integers(1, 10))
        out.append(mk.podset(f"ps{i}", count, annotations, gpus=draw(st.integers(1, 4))))
    return out


@st.composite
def scenes(draw: st.DrawFn) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    racks = draw(st.integers(1, 3))
    hosts = draw(st.integers(1, 3))
    nodes = mk.grid_nodes(blocks=2, racks=racks, hosts=hosts)
    taken = [
        mk.pod(f"other-{i}", node["metadata"]["name"], gpus=draw(st.integers(1, 4)), uid=f"other-{i}")
        for i, node in enumerate(nodes)
        if draw(st.booleans())
    ]
    scope = draw(st.sampled_from([None, ("required", mk.BLOCK), ("preferred", mk.RACK), ("required", mk.HOST)]))
    wl_annotations = {} if scope is None else {f"kueue-tas.io/workload-{scope[0]}-topology": scope[1]}
    workload = mk.workload(
        "w",
        podsets=draw(podsets()),
        uid="w-uid",
        workload_annotations=wl_annotations,
        admitted_flavor="gpu",
        check_state="Pending",
    )
    return [*mk.kueue_objects(), *nodes, *taken], workload


def planner(objects: list[dict[str, Any]]) -> Planner:
    parsed = [parse_object(o) for o in objects]
    return Planner([p for p in parsed if p is not None])


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenes())
def test_decide_plan_and_the_trial_placement_agree(scene: tuple[list[dict[str, Any]], dict[str, Any]]) -> None:
    cluster, raw = scene
    wl = Workload.model_validate(raw)
    model = planner(cluster)
    model.snapshot("gpu", "test")  # the capacity model of the cluster, fed as plan feeds it
    capacity = model.capacity

    # The controller reads the workload-wide constraint from the Workload's own annotations first.
    decision = decide(wl, {"gpu"}, capacity, workload_annotations=wl.metadata.annotations)
    trials = {t.name: t for t in trial_placement(wl, capacity, {"tas": ["gpu"]})}
    try:
        [plan] = [p for p in planner([*cluster, raw]).run() if p.name == "w"]
    except PlanInputError as exc:
        plan_error: str | None = str(exc)
    else:
        plan_error = None

    if decision.outcome == Outcome.READY:
        decided = {p.name: p.assignment for p in decision.placements}
        assert plan_error is None, plan_error
        assert {p.name: p.assignment for p in plan.podsets} == decided
        assert {n: t.assignment for n, t in trials.items()} == decided
        return
    # Not placed: nothing fits in trial or plan either, and each names the same cause.
    assert not all(t.fits for t in trials.values())
    if plan_error is not None:  # plan words a refused request as an input error
        assert decision.outcome == Outcome.REJECTED and "can never fit" not in decision.message
        return
    assert not plan.fits
    failed = next(t for t in trials.values() if t.message and not t.fits and not t.message.startswith("not tried"))
    plan_failed = next(p for p in plan.podsets if p.name == failed.name)
    assert plan_failed.message == failed.message
    if "can never fit" in decision.message:  # judged again on the empty cluster: its own words
        assert any(f'PodSet "{n}"' in decision.message for n, t in trials.items() if not t.fits)
    else:
        assert failed.message in decision.message
