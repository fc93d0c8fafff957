"""Issue 13, deliverable 5 (pure half): which admitted placements their Topology no longer
enforces, and the note that says so on our Ready entry without touching its record."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from vocab import BLOCK, GPU, HOST, RACK

from kueue_tas.capacity.assignment_record import record_suffix, recorded
from kueue_tas.controllers.decide import CHECK_MESSAGE_LIMIT
from kueue_tas.controllers.health_note import note_of, with_note, without_note
from kueue_tas.topology.assignment import DomainAssignment, TopologyAssignment
from kueue_tas.topology.explain.placement_health import NodeIndex, PlacedPodSet, placement_problems, required_levels
from kueue_tas.topology.model import NodeInfo, SliceLayer, TopologyRequest

LEVELS = (BLOCK, RACK, HOST)


def node(name: str, rack: str, *, block: str = "b1", ready: bool = True, gpus: int = 4, **labels: str) -> NodeInfo:
    return NodeInfo(
        name,
        {BLOCK: block, RACK: rack, HOST: name, "pool": "gpu", **labels},
        {GPU: gpus, "pods": 110},
        ready=ready,
    )


def cluster(*nodes: NodeInfo) -> NodeIndex:
    return NodeIndex(nodes, {"pool": "gpu"})


HEALTHY = (node("h1", "r1"), node("h2", "r1"), node("h3", "r2"), node("h4", "r2"))
# 8 one-GPU pods required in one rack, on h1 and h2 (a hostname-only assignment, as Kueue's).
ON_R1 = PlacedPodSet(
    "workers",
    TopologyAssignment((HOST,), (DomainAssignment(("h1",), 4), DomainAssignment(("h2",), 4))),
    (RACK,),
    {GPU: 1},
)


def test_healthy_placement_has_no_problem() -> None:
    assert placement_problems("topo", LEVELS, [ON_R1], cluster(*HEALTHY)) == []


def test_deleted_topology() -> None:
    assert placement_problems("topo", None, [ON_R1], cluster(*HEALTHY)) == ['Topology "topo" no longer exists']


def test_lost_level_is_named_as_the_issue_says() -> None:
    problems = placement_problems("topo", (BLOCK, HOST), [ON_R1], cluster(*HEALTHY))
    assert problems == [f"topology level {RACK} is no longer available"]


def test_lost_level_of_the_assignment_itself() -> None:
    unconstrained = PlacedPodSet("w", ON_R1.assignment, (), {GPU: 1})
    assert placement_problems("topo", (BLOCK, RACK), [unconstrained], cluster(*HEALTHY)) == [
        f"topology level {HOST} is no longer available"
    ]


def test_not_ready_node_leaves_the_required_domain_not_whole() -> None:
    nodes = cluster(node("h1", "r1", ready=False), *HEALTHY[1:])
    assert placement_problems("topo", LEVELS, [ON_R1], nodes) == [
        f'PodSet "workers": required domain {BLOCK}=b1,{RACK}=r1 is no longer whole: '
        "the Ready nodes its pods were assigned to hold 4 of 8"
    ]


def test_node_shrunk_below_its_pods() -> None:
    nodes = cluster(node("h1", "r1", gpus=2), *HEALTHY[1:])
    assert "hold 6 of 8" in placement_problems("topo", LEVELS, [ON_R1], nodes)[0]


def test_deleted_node_and_relabelled_node() -> None:
    # h2's pods are all held; h1's rack cannot be told any more, so its domain is named.
    assert placement_problems("topo", LEVELS, [ON_R1], cluster(*HEALTHY[1:])) == [
        f'PodSet "workers": domain {HOST}=h1 no longer exists'
    ]
    unlabelled = NodeInfo("h1", {BLOCK: "b1", HOST: "h1", "pool": "gpu"}, {GPU: 4})
    assert placement_problems("topo", LEVELS, [ON_R1], cluster(unlabelled, *HEALTHY[1:])) == [
        f'PodSet "workers": the node of domain {HOST}=h1 no longer carries label {RACK}'
    ]


def test_required_domain_gone_when_the_assignment_names_it() -> None:
    # Without a hostname level the assignment carries every level: the rack is named in it.
    levels = (BLOCK, RACK)
    placed = PlacedPodSet("w", TopologyAssignment(levels, (DomainAssignment(("b1", "r1"), 8),)), (RACK,), {GPU: 1})
    moved = cluster(node("h1", "r9"), node("h2", "r9"))
    assert placement_problems("topo", levels, [placed], moved) == [
        f'PodSet "w": required domain {BLOCK}=b1,{RACK}=r1 no longer exists'
    ]
    assert placement_problems("topo", levels, [placed], cluster(*HEALTHY)) == []


def test_preferred_podsets_are_not_judged_for_domains() -> None:
    preferred = PlacedPodSet("w", ON_R1.assignment, (), {GPU: 1})
    assert placement_problems("topo", LEVELS, [preferred], cluster(*HEALTHY[1:])) == []


def test_nodes_of_other_flavors_do_not_count() -> None:
    other = NodeInfo("h1", {BLOCK: "b1", RACK: "r1", HOST: "h1", "pool": "cpu"}, {GPU: 4})
    assert "no longer exists" in placement_problems("topo", LEVELS, [ON_R1], cluster(other, *HEALTHY[1:]))[0]


def test_required_levels_of_a_request() -> None:
    assert required_levels(None) == ()
    assert required_levels(TopologyRequest(preferred=RACK)) == ()
    assert required_levels(TopologyRequest(required=BLOCK, slice_level=RACK, slice_size=2)) == (BLOCK, RACK)
    layered = TopologyRequest(slice_layers=(SliceLayer(BLOCK, 4), SliceLayer(RACK, 2)))
    assert required_levels(layered) == (BLOCK, RACK)


def test_many_domain_problems_are_counted_not_listed() -> None:
    hosts = [node(f"h{i}", f"r{i}") for i in range(8)]
    placed = [
        PlacedPodSet(f"p{i}", TopologyAssignment((HOST,), (DomainAssignment((f"h{i}",), 1),)), (RACK,), {GPU: 1})
        for i in range(8)
    ]
    problems = placement_problems("topo", LEVELS, placed, cluster(*[NodeInfo(h.name, h.labels, {}) for h in hosts]))
    assert len(problems) == 6 and problems[-1] == "and 3 more domain problem(s)"


# --- the note on the entry ------------------------------------------------------------------------

RECORD = record_suffix("u1", [("workers", ON_R1.assignment)])
MESSAGE = "topology assignment: workers: 8 pods in 2 domain(s)" + RECORD


def test_note_goes_in_front_and_comes_off_again() -> None:
    noted = with_note(MESSAGE, [f"topology level {RACK} is no longer available"])
    assert noted == f"topology level {RACK} is no longer available; placement not enforced. {MESSAGE}"
    assert note_of(noted) == f"topology level {RACK} is no longer available"
    assert without_note(noted) == MESSAGE
    assert with_note(noted, []) == MESSAGE
    assert with_note(noted, ["other"]) == f"other; placement not enforced. {MESSAGE}"
    assert note_of(MESSAGE) == ""


@given(
    summary=st.text(min_size=0, max_size=40_000).filter(lambda s: "placement not enforced" not in s),
    problems=st.lists(st.text(min_size=1, max_size=3000).filter(lambda s: "placement" not in s), max_size=4),
)
def test_note_never_loses_the_record_nor_the_limit(summary: str, problems: list[str]) -> None:
    message = summary[: CHECK_MESSAGE_LIMIT - len(RECORD)] + RECORD
    noted = with_note(message, problems)
    assert len(noted) <= CHECK_MESSAGE_LIMIT
    assert recorded(noted) == recorded(message)
    if problems and len(message) + 6000 < CHECK_MESSAGE_LIMIT:
        assert without_note(noted) == message
    assert recorded(with_note(noted, [])) == recorded(message)
