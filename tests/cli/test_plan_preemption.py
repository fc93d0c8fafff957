"""``kueue-tas plan`` shows what topology-driven preemption would evict: a workload that fits
only by preemption has ``fits: false`` and ``preemption`` (the domain, the victims); plan evicts
nothing, and with the switch Enabled places nothing else in that domain, as the controller
holds it. The same decision as the controller's (``capacity.preemption_policy`` and
``capacity.preemption``)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import builders as mk
import pytest

from kueue_tas.api.kinds import parse_object
from kueue_tas.cli.main import main
from kueue_tas.cli.planner import Planner, WorkloadPlan
from kueue_tas.cli.render import render_text
from kueue_tas.topology.assignment import DomainAssignment, TopologyAssignment

NOW = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
RACKS = [("b0", "b0-r0"), ("b0", "b0-r1"), ("b1", "b1-r0"), ("b1", "b1-r1")]


def queue(switch: str | None) -> dict[str, Any]:
    cq = mk.cluster_queue(preemption={"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Never"})
    if switch is not None:
        cq["metadata"]["annotations"] = {"kueue-tas.io/topology-preemption": switch}
    return cq


def running(name: str, rack: str, hours: int) -> dict[str, Any]:
    """6 pods of priority 0 in ``rack`` (4 + 2 on its hosts), admitted ``hours`` before NOW."""
    assignment = TopologyAssignment(
        (mk.HOST,), (DomainAssignment((f"{rack}-h0",), 4), DomainAssignment((f"{rack}-h1",), 2))
    )
    since = f"2026-01-01T{12 - hours:02d}:00:00Z"
    wl = mk.workload(
        name,
        6,
        {mk.REQUIRED: mk.RACK},
        admitted_flavor="gpu",
        check_state="Ready",
        assignment=assignment,
        conditions=[mk.condition("QuotaReserved", time=since), mk.condition("Admitted", time=since)],
    )
    wl["spec"]["priority"] = 0
    return wl


def waiting(name: str, pods: int, priority: int) -> dict[str, Any]:
    wl = mk.workload(name, pods, {mk.REQUIRED: mk.RACK}, admitted_flavor="gpu", check_state="Pending")
    wl["spec"]["priority"] = priority
    return wl


def scene(switch: str | None) -> list[dict[str, Any]]:
    """Every rack holds 6 of its 8 GPUs; "hi" (8 pods, priority 10) fits none, then four 2-pod
    workloads of priority 0 fill the 2 GPUs left in each rack."""
    objects = [mk.topology(), mk.flavor("gpu"), mk.admission_check(), queue(switch), *mk.grid_nodes()]
    # The rack whose workload has run least (b1-r1, one hour) is the cheapest to clear.
    objects += [running(f"run-{rack}", rack, hours) for (_, rack), hours in zip(RACKS, (4, 3, 2, 1), strict=True)]
    objects.append(waiting("hi", 8, 10))
    objects += [waiting(f"small-{i}", 2, 0) for i in range(4)]
    return objects


def plan(objects: list[dict[str, Any]]) -> tuple[Planner, dict[str, WorkloadPlan]]:
    models = [m for m in (parse_object(o) for o in objects) if m is not None]
    planner = Planner(models, now=NOW.timestamp())
    return planner, {p.name: p for p in planner.run()}


def test_enabled_shows_the_victims_and_holds_their_rack_for_the_rest_of_the_plan() -> None:
    planner, plans = plan(scene("Enabled"))
    hi = plans["hi"]
    assert not hi.fits and hi.preemption is not None
    assert hi.preemption.mode == "Enabled"
    assert hi.preemption.values == ("b1", "b1-r1") and hi.preemption.levels == (mk.BLOCK, mk.RACK)
    assert hi.preemption.victims == ((mk.NS, "run-b1-r1", 0),)
    # Nothing was evicted: the victim still counts, and its rack is closed to the small ones,
    # so the fourth finds no room (without the hold it would take b1-r1's 2 free GPUs).
    assert [plans[f"small-{i}"].fits for i in range(4)] == [True, True, True, False]
    assignments = [plans[f"small-{i}"].podsets[0].assignment for i in range(3)]
    placed = {d.values[-1].rsplit("-h", 1)[0] for a in assignments if a is not None for d in a.domains}
    assert "b1-r1" not in placed
    text = render_text(list(plans.values()), planner)
    assert (
        "topology preemption would evict 1 workload(s) of lower priority from "
        f'{mk.RACK} "b1-r1": {mk.NS}/run-b1-r1 (priority 0)' in text
    )


def test_dry_run_shows_the_victims_and_holds_nothing() -> None:
    _, plans = plan(scene("DryRun"))
    assert plans["hi"].preemption is not None and plans["hi"].preemption.mode == "DryRun"
    assert all(plans[f"small-{i}"].fits for i in range(4))


@pytest.mark.parametrize("switch", [None, "Disabled"])
def test_without_the_switch_nothing_is_shown(switch: str | None) -> None:
    _, plans = plan(scene(switch))
    assert plans["hi"].preemption is None and not plans["hi"].fits
    assert all(plans[f"small-{i}"].fits for i in range(4))


def test_json_output_carries_the_preemption(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "cluster.yaml"
    mk.write_yaml(path, scene("Enabled"))
    assert main(["plan", "-f", str(path), "-o", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    hi = next(w for w in doc["workloads"] if w["name"] == "hi")
    assert hi["fits"] is False
    assert hi["preemption"]["mode"] == "Enabled"
    assert hi["preemption"]["domain"] == {"levels": [mk.BLOCK, mk.RACK], "values": ["b1", "b1-r1"]}
    (victim,) = hi["preemption"]["victims"]
    assert victim["name"] == "run-b1-r1" and victim["priority"] == 0
