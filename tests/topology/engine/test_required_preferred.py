"""Required and preferred on one PodSet (kueue-tas's extension; Kueue refuses the pair).

``podset-required-topology: R`` with ``podset-preferred-topology: P`` puts every pod in one
domain of R and, inside it, as few domains of P as Kueue's preferred climb finds: the search
starts at P and climbs level by level, but never above R, and never spreads over several R
domains. Covered here: parsing and validation (P above R refused, P at or below R accepted,
P == R the same as required alone), the engine on a concrete topology where the pair and
required alone place differently, failures, slices, PodSet groups, the Workload field, and
``plan``; ``test_required_preferred_properties.py`` checks the rules on random clusters.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import builders as mk
import pytest
from plan_harness import assert_invalid, plan
from vocab import HOST, RACK

from kueue_tas.api.workload import PodSetTopologyRequestModel
from kueue_tas.topology.assignment import DomainAssignment, TopologyAssignment
from kueue_tas.topology.engine.find_assignment import PlaceOptions, find_topology_assignment
from kueue_tas.topology.engine.placement import PlacementFailure
from kueue_tas.topology.engine.snapshot import TopologySnapshot
from kueue_tas.topology.features import FeatureGates
from kueue_tas.topology.model import NodeInfo, PodSetRequest, TopologyRequest
from kueue_tas.topology.requests.groups import GroupMember, group_errors
from kueue_tas.topology.requests.levels import level_problem
from kueue_tas.topology.requests.request import parse_topology_request, validate_topology_annotations
from kueue_tas.topology.requests.request_field import topology_request_from_field

P = "kueue-tas.io/"
REQ, PREF, UNC = P + "podset-required-topology", P + "podset-preferred-topology", P + "podset-unconstrained-topology"
ZONE = "zone"
LEVELS = (ZONE, RACK, HOST)


def node(zone: str, rack: str, host: str, pods: int) -> NodeInfo:
    """A node holding ``pods`` one-CPU pods."""
    return NodeInfo(host, {ZONE: zone, RACK: rack, HOST: host}, {"cpu": pods * 1000, "pods": 110})


def zones_a_and_b(not_ready: str = "") -> TopologySnapshot:
    """Zone A (12 pods): rack a1 = 2 hosts of 2, rack a2 = 4 hosts of 2. Zone B (6 pods, the
    tighter zone for 4 pods): racks b1 and b2 = 3 hosts of 1 each, so no rack of B holds 4."""
    nodes = [node("A", "a1", f"a1h{i}", 2) for i in range(2)]
    nodes += [node("A", "a2", f"a2h{i}", 2) for i in range(4)]
    nodes += [node("B", r, f"{r}h{i}", 1) for r in ("b1", "b2") for i in range(3)]
    nodes = [replace(n, ready=False) if n.name == not_ready else n for n in nodes]
    return TopologySnapshot.build(topology_name="t", levels=LEVELS, nodes=nodes)


def place(snap: TopologySnapshot, topo: TopologyRequest, count: int = 4, general: bool = False) -> dict[str, int]:
    """Host -> pods, through the fast path or (``general``) Kueue's general algorithm."""
    request = PodSetRequest("w", count, {"cpu": 1000}, topology=topo)
    opts = PlaceOptions(FeatureGates())
    got = find_topology_assignment(snap, request, None, None, opts, general_only=general)["w"]
    return {d.values[-1]: d.count for d in got.domains}


def failure(snap: TopologySnapshot, topo: TopologyRequest, count: int, general: bool = False) -> str:
    with pytest.raises(PlacementFailure) as err:
        place(snap, topo, count, general)
    return str(err.value)


# --- annotations ------------------------------------------------------------------------------


def test_required_with_preferred_is_accepted_and_kept_together() -> None:
    assert validate_topology_annotations({REQ: ZONE, PREF: RACK}) == []
    assert parse_topology_request({REQ: ZONE, PREF: RACK}) == TopologyRequest(required=ZONE, preferred=RACK)


@pytest.mark.parametrize("extra", [{REQ: ZONE}, {PREF: RACK}, {REQ: ZONE, PREF: RACK}])
def test_unconstrained_beside_required_or_preferred_is_still_refused(extra: dict[str, str]) -> None:
    [msg] = validate_topology_annotations({**extra, UNC: "true"})
    assert msg.endswith(f'must not contain more than one topology annotation: ["{REQ}", "{PREF}", "{UNC}"]')


def test_group_members_must_agree_on_both_levels() -> None:
    def member(name: str, count: int, preferred: str) -> GroupMember:
        request = TopologyRequest(required=ZONE, preferred=preferred, group="g")
        return GroupMember(name, count, request, f"{name}: group", f'PodSet "{name}"')

    assert group_errors([member("leader", 1, RACK), member("workers", 4, RACK)]) == []
    errors = group_errors([member("leader", 1, HOST), member("workers", 4, RACK)])
    assert [e.podset for e in errors] == ["leader", "workers"]
    assert errors[0].message == (
        f"must specify '{REQ}' or '{PREF}' topology consistent with 'PodSet \"workers\"' in group 'g'"
    )


def test_workload_field_keeps_both() -> None:
    field = PodSetTopologyRequestModel.model_validate({"required": ZONE, "preferred": RACK})
    assert topology_request_from_field(field) == TopologyRequest(required=ZONE, preferred=RACK)


# --- levels -----------------------------------------------------------------------------------


def test_preferred_above_required_is_refused_naming_both() -> None:
    problem = level_problem(LEVELS, TopologyRequest(required=RACK, preferred=ZONE))
    assert problem is not None
    assert (problem.suffix, problem.field, problem.unknown) == ("podset-preferred-topology", "preferred", None)
    text = problem.text(lambda suffix, field: f"annotation {P}{suffix}")
    assert text == (
        f'level "{ZONE}" is above the required level "{RACK}" (annotation {REQ}); '
        "the preferred level must be the required level or a level below it"
    )
    assert problem.text(lambda suffix, field: f"topologyRequest.{field}").endswith(
        f'"{RACK}" (topologyRequest.required); the preferred level must be the required level or a level below it'
    )


@pytest.mark.parametrize(("required", "preferred"), [(ZONE, RACK), (ZONE, HOST), (RACK, HOST), (RACK, RACK)])
def test_preferred_at_or_below_required_is_accepted(required: str, preferred: str) -> None:
    assert level_problem(LEVELS, TopologyRequest(required=required, preferred=preferred)) is None


def test_unknown_preferred_level_is_reported_before_the_order() -> None:
    problem = level_problem(LEVELS, TopologyRequest(required=RACK, preferred="example.com/row"))
    assert problem is not None and problem.unknown == "example.com/row" and problem.field == "preferred"


def test_under_unconstrained_the_preferred_level_is_not_used() -> None:
    """Only a Workload's topologyRequest can say all three; required alone counts then, as in Kueue."""
    topo = TopologyRequest(required=RACK, preferred=ZONE, unconstrained=True)
    assert level_problem(LEVELS, topo) is None
    snap = zones_a_and_b()
    assert place(snap, topo) == place(snap, TopologyRequest(required=RACK, unconstrained=True))


# --- the engine -------------------------------------------------------------------------------


@pytest.mark.parametrize("general", [False, True], ids=["fast", "general"])
def test_required_alone_takes_the_tightest_zone_the_pair_a_whole_rack(general: bool) -> None:
    snap = zones_a_and_b()
    # Required zone: zone B (6) is the best fit, and no rack of B holds 4, so two racks.
    assert place(snap, TopologyRequest(required=ZONE), general=general) == {
        "b1h0": 1,
        "b1h1": 1,
        "b1h2": 1,
        "b2h0": 1,
    }
    # With preferred rack: the best-fit rack of all (a1, exactly 4) in zone A.
    pair = place(snap, TopologyRequest(required=ZONE, preferred=RACK), general=general)
    assert pair == {"a1h0": 2, "a1h1": 2}
    # The climb starts at the host (none holds 4) and stops at the first level that fits: rack.
    assert place(snap, TopologyRequest(required=ZONE, preferred=HOST), general=general) == pair


@pytest.mark.parametrize("general", [False, True], ids=["fast", "general"])
def test_preferred_equal_to_required_is_required(general: bool) -> None:
    snap = zones_a_and_b()
    for level in (ZONE, RACK):
        alone = TopologyRequest(required=level)
        assert place(snap, TopologyRequest(required=level, preferred=level), general=general) == place(
            snap, alone, general=general
        )
    both = failure(snap, TopologyRequest(required=HOST, preferred=HOST), 4, general)
    assert both == failure(snap, TopologyRequest(required=HOST), 4, general)


@pytest.mark.parametrize("general", [False, True], ids=["fast", "general"])
def test_no_single_required_domain_fits_fails_as_required(general: bool) -> None:
    """Two zones of 3 pods: 4 pods never spread over zones, unlike preferred alone."""
    nodes = [node(z, f"{z}-r", f"{z}-h{i}", 1) for z in ("A", "B") for i in range(3)]
    snap = TopologySnapshot.build(topology_name="t", levels=LEVELS, nodes=nodes)
    msg = failure(snap, TopologyRequest(required=ZONE, preferred=RACK), 4, general)
    assert msg == 'topology "t" allows to fit only 3 out of 4 pod(s)'
    assert msg == failure(snap, TopologyRequest(required=ZONE), 4, general)
    spread = place(snap, TopologyRequest(preferred=RACK), general=general)
    assert sum(spread.values()) == 4 and {h[0] for h in spread} == {"A", "B"}


def test_slices_inside_the_preferred_domain() -> None:
    snap = zones_a_and_b()
    topo = TopologyRequest(required=ZONE, preferred=RACK, slice_level=HOST, slice_size=2)
    assert place(snap, topo) == {"a1h0": 2, "a1h1": 2}
    assert place(snap, topo, general=True) == {"a1h0": 2, "a1h1": 2}


def test_slice_level_above_the_preferred_level_fails_with_kueues_text() -> None:
    """A slice must fit inside the chosen domain, which may be a preferred-level domain: Kueue's
    rule for the podset level applies with the preferred level."""
    topo = TopologyRequest(required=ZONE, preferred=HOST, slice_level=RACK, slice_size=4)
    assert failure(zones_a_and_b(), topo, 4) == f"podset slice topology {RACK} is above the podset topology {HOST}"


def test_leader_and_workers_share_the_preferred_rack() -> None:
    snap = zones_a_and_b()

    def racks(topo: TopologyRequest) -> set[str]:
        grouped = TopologyRequest(required=topo.required, preferred=topo.preferred, group="g")
        leader = PodSetRequest("leader", 1, {"cpu": 1000}, topology=grouped)
        workers = PodSetRequest("workers", 3, {"cpu": 1000}, topology=grouped)
        results = snap.place([leader, workers])
        hosts = {d.values[-1] for r in results if r.assignment is not None for d in r.assignment.domains}
        assert sum(r.assignment.total for r in results if r.assignment is not None) == 4
        return {h[:2] for h in hosts}

    assert racks(TopologyRequest(required=ZONE)) == {"b1", "b2"}
    assert racks(TopologyRequest(required=ZONE, preferred=RACK)) == {"a1"}


def test_node_replacement_stays_in_the_required_domain() -> None:
    """a1h0 fails: its 2 pods go to zone A's other rack a2, though a fresh placement of 2 pods
    would take the best-fit rack of all (b1, in zone B)."""
    snap = zones_a_and_b(not_ready="a1h0")
    topo = TopologyRequest(required=ZONE, preferred=RACK)
    ps = PodSetRequest("w", 4, {"cpu": 1000}, topology=topo)
    current = TopologyAssignment((HOST,), (DomainAssignment(("a1h0",), 2), DomainAssignment(("a1h1",), 2)))
    [res] = snap.place([ps], current={"w": current}, unhealthy_nodes=["a1h0"])
    assert res.assignment is not None
    assert {d.values[-1]: d.count for d in res.assignment.domains} == {"a1h1": 2, "a2h0": 2}
    assert place(zones_a_and_b(), topo, 2) == {"b1h0": 1, "b1h1": 1}


def test_the_engine_refuses_a_preferred_level_above_the_required_one() -> None:
    """The controller and ``plan`` refuse it first (``level_problem``); the engine never climbs down."""
    msg = failure(zones_a_and_b(), TopologyRequest(required=RACK, preferred=ZONE), 4)
    assert msg == f"preferred topology {ZONE} is above the required topology {RACK}"


# --- plan -------------------------------------------------------------------------------------


def test_plan_shows_both_levels(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    objects = [*mk.cluster(), mk.job("pair", 4, {REQ: mk.BLOCK, PREF: mk.HOST})]
    res = plan(tmp_path, capsys, objects, output="text")
    assert res.code == 0, res.err
    lines = res.out.splitlines()
    assert f"  PodSet main (4 pods, flavor=gpu topology=topo required={mk.BLOCK} preferred={mk.HOST})" in lines
    # the hostname level is drawn by its default name
    assert [line.split("   [")[0] for line in lines if line.startswith("        host=")] == [
        "        host=b0-r0-h0: 4 pod(s)"
    ]


def test_plan_refuses_preferred_above_required(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    res = plan(tmp_path, capsys, [*mk.cluster(), mk.job("bad", 4, {REQ: mk.RACK, PREF: mk.BLOCK})])
    assert_invalid(
        res,
        f"spec.template.metadata.annotations[{PREF}]: "
        f'level "{mk.BLOCK}" is above the required level "{mk.RACK}" '
        f"(spec.template.metadata.annotations[{REQ}]); "
        "the preferred level must be the required level or a level below it",
    )
