"""Level names (issue 14, item 1): a Topology names its levels with ``kueue-tas.io/level-names``;
every annotation that takes a level accepts a name or a label key."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import builders as mk
import pytest
from hypothesis import given
from hypothesis import strategies as st
from plan_harness import assert_invalid, hosts, plan
from vocab import GPU, ZONE

from kueue_tas.api.kueue_objects import Topology
from kueue_tas.api.workload import Workload
from kueue_tas.capacity.live import LiveCapacity
from kueue_tas.capacity.rules import FlavorSpec
from kueue_tas.controllers.check_flavors import topology_problem
from kueue_tas.controllers.decide import Outcome, decide
from kueue_tas.controllers.informers import on_any_change
from kueue_tas.topology.level_names import (
    LEVEL_NAMES_ANNOTATION,
    LevelNames,
    level_names,
    level_names_problem,
    resolve_request,
)
from kueue_tas.topology.model import NodeInfo, PodSetRequest, SliceLayer, TopologyRequest

LEVELS = (mk.BLOCK, mk.RACK, mk.HOST)
NAMED = f"block={mk.BLOCK},rack={mk.RACK}"


def test_well_known_labels_are_named_by_default_and_the_annotation_adds_the_rest() -> None:
    assert level_names(None, LEVELS).labels == {"host": mk.HOST}
    assert level_names(None, (ZONE, mk.RACK, mk.HOST)).labels == {"zone": ZONE, "host": mk.HOST}
    names = level_names(f" rack = {mk.RACK} ,block={mk.BLOCK}", LEVELS)
    assert list(names.labels.items()) == [("block", mk.BLOCK), ("rack", mk.RACK), ("host", mk.HOST)]  # level order
    assert names.shown(mk.RACK) == f"rack ({mk.RACK})" and names.shown("x") == "x"
    # A default gives way: the annotation names the hostname level otherwise, or takes "host".
    assert level_names(f"node={mk.HOST}", LEVELS).labels == {"node": mk.HOST}
    assert level_names(f"host={mk.RACK}", LEVELS).labels == {"host": mk.RACK}


@pytest.mark.parametrize(
    ("raw", "problem"),
    [
        ("rack", "invalid value 'rack': expected name=label[,name=label...]"),
        (f"rack={mk.RACK},", "'' is not name=label"),
        (f"Rack={mk.RACK}", "invalid name 'Rack': must be a lowercase DNS label"),
        (f"a/b={mk.RACK}", "invalid name 'a/b'"),
        ("rack=example.com/row", "'example.com/row' is not a level of this Topology (levels: "),
        (f"{mk.BLOCK}={mk.RACK}", f"invalid name '{mk.BLOCK}'"),
        (f"rack={mk.RACK},rack={mk.BLOCK}", f"name 'rack' given twice ({mk.RACK}, {mk.BLOCK})"),
        (f"rack={mk.RACK},r={mk.RACK}", f"label '{mk.RACK}' named twice (rack, r)"),
    ],
)
def test_a_bad_annotation_is_one_line_naming_the_problem(raw: str, problem: str) -> None:
    found = level_names_problem(raw, LEVELS)
    assert found is not None and problem in found and "\n" not in found
    assert level_names(raw, LEVELS).labels == {"host": mk.HOST}  # only the defaults stand


def test_a_name_may_not_be_the_label_key_of_another_level() -> None:
    levels = ("rack", "row", mk.HOST)  # label keys without a prefix are label keys too
    assert level_names_problem("rack=row", levels) == "name 'rack' is the label key of another level"
    assert level_names_problem("rack=rack", levels) is None


def test_resolving_replaces_names_in_every_level_field_and_keeps_labels() -> None:
    names = level_names(NAMED, LEVELS)
    req = PodSetRequest(
        "main",
        4,
        {},
        TopologyRequest(required="block", slice_layers=(SliceLayer("rack", 2), SliceLayer("host", 1))),
    )
    out = resolve_request(req, LEVELS, names)
    assert out.topology == TopologyRequest(
        required=mk.BLOCK, slice_layers=(SliceLayer(mk.RACK, 2), SliceLayer(mk.HOST, 1))
    )
    labels = PodSetRequest("main", 4, {}, TopologyRequest(preferred=mk.RACK, slice_level=mk.HOST, slice_size=2))
    assert resolve_request(labels, LEVELS, names) is labels
    unknown = PodSetRequest("main", 4, {}, TopologyRequest(required="rak"))
    assert resolve_request(unknown, LEVELS, names).topology == TopologyRequest(required="rak")  # the check names it


@given(st.lists(st.sampled_from(["block", "rack", "host", mk.BLOCK, mk.RACK, mk.HOST, "zone"]), min_size=1, max_size=3))
def test_resolving_is_idempotent_and_lands_on_a_label_or_leaves_the_unknown(levels_asked: list[str]) -> None:
    names = level_names(NAMED, LEVELS)
    for level in levels_asked:
        label = names.label_of(level, LEVELS)
        assert names.label_of(label, LEVELS) == label
        assert label in LEVELS or label == level == "zone"


# --- the controller's decision --------------------------------------------------------------------


def _capacity(raw: str | None) -> LiveCapacity:
    live = LiveCapacity()
    live.set_flavors({"gpu": FlavorSpec("gpu", "topo", LEVELS, {"pool": "gpu"}, (), level_names(raw, LEVELS))})
    for rack in ("b1-r1", "b1-r2"):
        for h in range(2):
            labels = {mk.BLOCK: "b1", mk.RACK: rack, "pool": "gpu", mk.HOST: f"{rack}-h{h}"}
            live.upsert_node(NodeInfo(f"{rack}-h{h}", labels, {GPU: 4, "pods": 110}))
    return live


def _admitted(count: int, level: str) -> Workload:
    ann = {mk.REQUIRED: level}
    return Workload.model_validate(mk.workload("a", count, ann, namespace="ns", queue=None, admitted_flavor="gpu"))


def test_the_controller_places_a_named_level_as_its_label() -> None:
    by_name = decide(_admitted(8, "rack"), {"gpu"}, _capacity(NAMED))
    by_label = decide(_admitted(8, mk.RACK), {"gpu"}, _capacity(NAMED))
    assert by_name.outcome is Outcome.READY, by_name.message
    assert by_name.placements[0].assignment == by_label.placements[0].assignment
    assert len({d.values[0] for d in by_name.placements[0].assignment.domains}) == 2  # two hosts of one rack
    # Without the annotation "rack" means nothing here: rejected, with the names there are.
    d = decide(_admitted(8, "rack"), {"gpu"}, _capacity(None))
    assert d.outcome is Outcome.REJECTED
    assert d.message.endswith(
        f'unknown topology level "rack"; Topology "topo" has levels {", ".join(LEVELS)}; level names: host'
    )
    d = decide(_admitted(8, "rak"), {"gpu"}, _capacity(NAMED))
    assert d.message.endswith("; level names: block, rack, host"), d.message


def test_a_bad_annotation_makes_the_topology_invalid_for_the_check() -> None:
    topo = Topology.model_validate(
        mk.topology() | {"metadata": {"name": "topo", "annotations": {LEVEL_NAMES_ANNOTATION: "rack"}}}
    )
    assert topology_problem(topo) == (
        f"metadata.annotations[{LEVEL_NAMES_ANNOTATION}]: invalid value 'rack': expected name=label[,name=label...]"
    )
    good = Topology.model_validate(
        mk.topology() | {"metadata": {"name": "topo", "annotations": {LEVEL_NAMES_ANNOTATION: NAMED}}}
    )
    assert topology_problem(good) is None


class _Informer:
    def __init__(self) -> None:
        self.update: Any = None

    def add_handler(self, added: Any, updated: Any, deleted: Any) -> None:
        self.update = updated


def test_renaming_levels_is_a_configuration_change_though_the_spec_is_unchanged() -> None:
    calls: list[int] = []
    informer = _Informer()
    on_any_change(informer, lambda: calls.append(1), spec_only=True)  # type: ignore[arg-type]
    old = Topology.model_validate(mk.topology())
    renamed = Topology.model_validate(
        mk.topology() | {"metadata": {"name": "topo", "annotations": {LEVEL_NAMES_ANNOTATION: NAMED}}}
    )
    informer.update(old, Topology.model_validate(mk.topology(resource_version="2")))
    assert calls == []
    informer.update(old, renamed)
    assert calls == [1]


# --- plan -----------------------------------------------------------------------------------------


def _named_cluster(raw: str) -> list[dict[str, Any]]:
    objs = mk.cluster()
    topo = next(o for o in objs if o["kind"] == "Topology")
    topo["metadata"]["annotations"] = {LEVEL_NAMES_ANNOTATION: raw}
    return objs


def test_plan_places_by_name_as_by_label(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    by_name = plan(tmp_path, capsys, [*_named_cluster(NAMED), mk.job("a", 6, mk.required("block"))])
    by_label = plan(tmp_path, capsys, [*_named_cluster(NAMED), mk.job("a", 6, mk.required(mk.BLOCK))])
    assert by_name.code == 0, by_name.err
    assert hosts(by_name.ps("a")) == hosts(by_label.ps("a")) and sum(hosts(by_name.ps("a")).values()) == 6


def test_plan_refuses_an_unknown_name_listing_the_names(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    res = plan(tmp_path, capsys, [*_named_cluster(NAMED), mk.job("a", 1, mk.required("rak"))])
    assert_invalid(res, "Job/team-a/a", 'unknown topology level "rak"', "; level names: block, rack, host")


def test_plan_refuses_a_bad_annotation_on_the_topology(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    res = plan(tmp_path, capsys, [*_named_cluster("rack=example.com/row"), mk.job("a", 1, mk.required(mk.RACK))])
    assert_invalid(
        res, "Topology/topo", f"metadata.annotations[{LEVEL_NAMES_ANNOTATION}]", "'example.com/row' is not a level"
    )


def test_level_names_value_type() -> None:
    assert LevelNames().offered() == "" and LevelNames({"host": mk.HOST}).offered() == "; level names: host"


def test_plan_text_shows_the_names(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    res = plan(tmp_path, capsys, [*_named_cluster(NAMED), mk.job("a", 8, mk.required("rack"))], output="text")
    assert res.code == 0, res.err
    lines = [line.split("   [")[0] for line in res.out.splitlines()]
    assert lines[2:6] == [
        "    block=b0: 8 pod(s)",
        "      rack=b0-r0: 8 pod(s)",
        "        host=b0-r0-h0: 4 pod(s)",
        "        host=b0-r0-h1: 4 pod(s)",
    ]


def test_capacity_names_its_levels() -> None:
    from kueue_tas.cli.capacity import flavor_capacity

    snap = _capacity(NAMED).snapshot("gpu")
    assert snap is not None
    fc = flavor_capacity("gpu", {"pool": "gpu"}, snap, GPU)
    assert [(lvl.key, lvl.name) for lvl in fc.levels] == [(mk.BLOCK, "block"), (mk.RACK, "rack"), (mk.HOST, "host")]


def test_names_work_for_required_and_preferred_together(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pair = {mk.REQUIRED: "block", mk.PREFERRED: "rack"}
    by_name = plan(tmp_path, capsys, [*_named_cluster(NAMED), mk.job("a", 8, pair)])
    by_label = plan(
        tmp_path, capsys, [*_named_cluster(NAMED), mk.job("a", 8, {mk.REQUIRED: mk.BLOCK, mk.PREFERRED: mk.RACK})]
    )
    assert by_name.code == 0, by_name.err
    assert hosts(by_name.ps("a")) == hosts(by_label.ps("a"))
    upside_down = plan(
        tmp_path, capsys, [*_named_cluster(NAMED), mk.job("a", 8, {mk.REQUIRED: "rack", mk.PREFERRED: "block"})]
    )
    assert_invalid(upside_down, f'level "{mk.BLOCK}" is above the required level "{mk.RACK}"')


def test_a_huge_annotation_gives_a_short_line() -> None:
    found = level_names_problem("x" * 100_000, LEVELS)
    assert found is not None and len(found) < 200 and "(100000 characters)" in found
    found = level_names_problem("rack=" + "y" * 100_000, LEVELS)
    assert found is not None and len(found) < 300
