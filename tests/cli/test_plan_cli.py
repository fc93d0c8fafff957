"""Contract tests of ``kueue-tas plan`` (docs/user-guide/plan.md).

Inputs are built as dicts (``builders``), dumped to files under ``tmp_path`` and
fed to ``kueue_tas.cli.main.main``; the placement engine itself is covered by
``tests/kueue_cases/test_placement.py``, so these tests check the wiring: input forms,
flavor -> topology mapping, capacity accounting, output shapes, exit codes and errors.

Default cluster (``mk.cluster()``): Topology ``topo`` = block / rack / hostname,
flavor ``gpu`` governed by AdmissionCheck ``tas``, 2 blocks x 2 racks x 2 hosts
of 4 GPUs: a rack holds 8 one-GPU pods, a block 16, the cluster 32.
"""

from __future__ import annotations

import copy
import io
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import builders as mk
import pytest
import yaml
from plan_harness import assert_invalid, blocks, hosts, plan, racks, run

from kueue_tas.cli.main import main
from kueue_tas.topology.assignment import DomainAssignment, TopologyAssignment
from kueue_tas.topology.codec.codec import decode_v1beta2, encode_assignment_annotation

REPO = Path(__file__).resolve().parents[2]
NOT_FIT_RACK_9 = 'topology "topo" allows to fit only 8 out of 9 pod(s)'
# The same after another job filled a rack: its two full hosts are reported as excluded.
NOT_FIT_RACK_9_AFTER = NOT_FIT_RACK_9 + '. Total nodes: 8; excluded: resource "nvidia.com/gpu": 2'
# In the one-rack cluster, when one of the two hosts is full.
ONE_HOST_FULL = '. Total nodes: 2; excluded: resource "nvidia.com/gpu": 1'


# --------------------------------------------------------------------------------------------
# input forms
# --------------------------------------------------------------------------------------------


def test_multi_document_yaml_and_several_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    kueue = mk.write_yaml(tmp_path / "kueue.yaml", mk.kueue_objects())
    nodes = mk.write_yaml(tmp_path / "nodes.yaml", mk.grid_nodes())
    jobs = mk.write_yaml(
        tmp_path / "jobs.yaml", [mk.job("a", 8, mk.required(mk.RACK)), mk.job("b", 9, mk.required(mk.RACK))]
    )
    res = run(capsys, "-f", kueue, "-f", nodes, "-f", jobs, "-o", "json")
    assert res.code == 0, res.err
    assert [w["name"] for w in res.workloads] == ["a", "b"]
    assert res.wl("a")["fits"] is True
    assert sum(hosts(res.ps("a")).values()) == 8
    assert len(racks(res.ps("a"))) == 1
    assert res.wl("b")["fits"] is False
    assert res.ps("b")["message"] == NOT_FIT_RACK_9_AFTER


def test_missing_file_among_several_means_missing_nodes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Objects from every -f are read: without the node file nothing fits."""
    kueue = mk.write_yaml(tmp_path / "kueue.yaml", mk.kueue_objects())
    jobs = mk.write_yaml(tmp_path / "jobs.yaml", [mk.job("a", 1, mk.required(mk.RACK))])
    res = run(capsys, "-f", kueue, "-f", jobs, "-o", "json")
    assert res.code == 0, res.err
    assert res.wl("a")["fits"] is False
    assert res.ps("a")["message"] == f"no topology domains at level: {mk.RACK}"


def test_json_object_json_array_and_json_list(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    objs = mk.cluster()
    as_list = mk.write_json(tmp_path / "cluster.json", {"apiVersion": "v1", "kind": "List", "items": objs[:4]})
    as_array = mk.write_json(tmp_path / "nodes.json", objs[4:])
    single = mk.write_json(tmp_path / "job.json", mk.job("a", 8, mk.required(mk.RACK)))
    res = run(capsys, "-f", as_list, "-f", as_array, "-f", single, "-o", "json")
    assert res.code == 0, res.err
    assert res.wl("a")["fits"] is True
    assert res.ps("a")["topology"] == "topo"
    assert sum(hosts(res.ps("a")).values()) == 8


def test_kind_list_yaml(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    doc = {"apiVersion": "v1", "kind": "List", "items": [*mk.cluster(), mk.job("a", 16, mk.required(mk.BLOCK))]}
    path = tmp_path / "list.yaml"
    path.write_text(yaml.safe_dump(doc), encoding="utf-8")
    res = run(capsys, "-f", str(path), "-o", "json")
    assert res.code == 0, res.err
    assert res.wl("a")["fits"] is True
    assert len(blocks(res.ps("a"))) == 1
    assert sum(hosts(res.ps("a")).values()) == 16


def test_stdin(tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    cluster = mk.write_yaml(tmp_path / "cluster.yaml", mk.cluster())
    monkeypatch.setattr(sys, "stdin", io.StringIO(yaml.safe_dump(mk.job("from-stdin", 4, mk.required(mk.RACK)))))
    res = run(capsys, "-f", cluster, "-f", "-", "-o", "json")
    assert res.code == 0, res.err
    assert [w["name"] for w in res.workloads] == ["from-stdin"]
    assert res.wl("from-stdin")["fits"] is True


def test_unknown_kinds_skipped_with_warning(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cfg", "namespace": "x"}, "data": {"a": "b"}}
    svc = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "svc"}, "spec": {}}
    res = plan(tmp_path, capsys, [cm, *mk.cluster(), svc, mk.job("a", 2, mk.required(mk.RACK))])
    assert res.code == 0, res.err
    assert res.wl("a")["fits"] is True
    warnings = [line for line in res.err_lines if "warning" in line]
    assert len(warnings) == 2, res.err
    assert "ConfigMap/cfg" in warnings[0]
    assert "Service/svc" in warnings[1]
    assert [w["name"] for w in res.workloads] == ["a"]  # the warnings do not leak into stdout


# --------------------------------------------------------------------------------------------
# flavor -> topology
# --------------------------------------------------------------------------------------------


def two_flavor_objects(on_flavors: list[str]) -> list[dict[str, Any]]:
    """Flavors gpu and h100 (disjoint node sets) in one queue; check ``tas`` with ``on_flavors``."""
    return [
        mk.topology(),
        mk.flavor("gpu"),
        mk.flavor("h100"),
        mk.admission_check(),
        mk.cluster_queue(flavors=("gpu", "h100"), checks={"tas": on_flavors}),
        *mk.grid_nodes(),
        *mk.grid_nodes(blocks=1, racks=1, hosts=2, group="h100", gpus=8),
    ]


def test_on_flavors_governs_only_the_named_flavor(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    objs = two_flavor_objects(["gpu"])
    # Only gpu has a topology, so it is the default flavor.
    res = plan(tmp_path, capsys, [*objs, mk.job("a", 8, mk.required(mk.RACK))])
    assert res.code == 0, res.err
    assert (res.ps("a")["flavor"], res.ps("a")["topology"]) == ("gpu", "topo")
    assert all(not h.startswith("h100") for h in hosts(res.ps("a")))
    # h100 is in the queue but not in onFlavors: not governed.
    res = plan(tmp_path, capsys, [*objs, mk.job("b", 2)], "--flavor", "h100")
    assert res.code == 0, res.err
    assert res.ps("b")["domains"] is None
    assert res.ps("b")["flavor"] == "h100"


def test_empty_on_flavors_governs_every_flavor_of_the_queue(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    objs = two_flavor_objects([])
    res = plan(tmp_path, capsys, [*objs, mk.job("a", 16, mk.required(mk.RACK))], "--flavor", "h100")
    assert res.code == 0, res.err
    assert (res.ps("a")["flavor"], res.ps("a")["topology"]) == ("h100", "topo")
    assert hosts(res.ps("a")) == {"h100-b0-r0-h0": 8, "h100-b0-r0-h1": 8}
    res = plan(tmp_path, capsys, [*objs, mk.job("a", 16, mk.required(mk.RACK))], "--flavor", "gpu")
    assert res.code == 0, res.err
    assert res.wl("a")["fits"] is False
    assert res.ps("a")["message"] == 'topology "topo" allows to fit only 8 out of 16 pod(s)'


def test_two_governed_flavors_without_flavor_choice_is_invalid(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    res = plan(tmp_path, capsys, [*two_flavor_objects([]), mk.job("a", 1, mk.required(mk.RACK))])
    assert_invalid(res, "Job/team-a/a", "spec.template", "cannot tell the flavor")


def test_admission_check_of_another_controller_is_ignored(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    objs = [
        mk.topology(),
        mk.flavor("gpu"),
        mk.admission_check("other", controller="example.com/provisioning"),
        mk.cluster_queue(checks={"other": []}),
        *mk.grid_nodes(),
    ]
    res = plan(tmp_path, capsys, [*objs, mk.job("plain", 2)], "--flavor", "gpu")
    assert res.code == 0, res.err
    assert res.ps("plain")["domains"] is None
    res = plan(tmp_path, capsys, [*objs, mk.job("annotated", 2, mk.required(mk.RACK))], "--flavor", "gpu")
    assert_invalid(res, "Job/team-a/annotated", "spec.template", "flavor 'gpu' has no topology")


def test_check_wins_over_flavor_topology_name(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    objs = [
        mk.topology(),
        mk.topology("hosts-only", levels=(mk.HOST,)),
        mk.flavor("gpu", topologyName="hosts-only"),
        mk.admission_check(),
        mk.cluster_queue(),
        *mk.grid_nodes(),
    ]
    res = plan(tmp_path, capsys, [*objs, mk.job("a", 2, mk.required(mk.RACK))])
    assert res.code == 0, res.err
    assert res.ps("a")["topology"] == "topo"


def test_flavor_topology_name_used_when_no_check_governs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    objs = [mk.topology(), mk.flavor("gpu", topologyName="topo"), *mk.grid_nodes()]
    res = plan(tmp_path, capsys, [*objs, mk.job("a", 8, mk.required(mk.RACK))])
    assert res.code == 0, res.err
    assert res.ps("a")["topology"] == "topo"
    assert len(racks(res.ps("a"))) == 1


# --------------------------------------------------------------------------------------------
# output formats
# --------------------------------------------------------------------------------------------

FIT_KEYS = {"name", "count", "flavor", "topology", "levels", "domains", "topologyAssignment", "message"}


def output_objects() -> list[dict[str, Any]]:
    return [
        *mk.cluster(),
        mk.job("fits", 8, mk.required(mk.RACK)),
        mk.job("nofit", 9, mk.required(mk.RACK)),
        mk.flavor("cpu"),
        mk.workload("plain", 2, admitted_flavor="cpu"),
    ]


def test_json_workload_keys_exactly_as_readme(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    res = plan(tmp_path, capsys, output_objects())
    assert res.code == 0, res.err
    for wl in res.workloads:
        assert set(wl) == {"namespace", "name", "fits", "podSets"}


def test_json_shape(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    res = plan(tmp_path, capsys, output_objects())
    assert res.code == 0, res.err
    assert set(res.json) == {"workloads"}
    assert [w["name"] for w in res.workloads] == ["fits", "nofit", "plain"]
    for wl in res.workloads:
        assert {"namespace", "name", "fits", "podSets"} <= set(wl)
        assert wl["namespace"] == mk.NS

    fits = res.wl("fits")
    assert fits["fits"] is True
    ps = res.ps("fits")
    assert set(ps) == FIT_KEYS
    assert (ps["name"], ps["count"], ps["flavor"], ps["topology"]) == ("main", 8, "gpu", "topo")
    assert ps["levels"] == [mk.HOST]
    # BestFit on an empty cluster: the first rack, its hosts in order.
    assert ps["domains"] == [{"values": ["b0-r0-h0"], "count": 4}, {"values": ["b0-r0-h1"], "count": 4}]
    decoded = decode_v1beta2(ps["topologyAssignment"])
    assert decoded == TopologyAssignment(
        (mk.HOST,), (DomainAssignment(("b0-r0-h0",), 4), DomainAssignment(("b0-r0-h1",), 4))
    )
    assert ps["message"] == ""

    nofit = res.wl("nofit")
    assert nofit["fits"] is False
    ps = res.ps("nofit")
    assert "domains" not in ps
    assert ps["message"] == NOT_FIT_RACK_9_AFTER
    assert (ps["name"], ps["count"], ps["flavor"], ps["topology"]) == ("main", 9, "gpu", "topo")

    ps = res.ps("plain")
    assert "domains" in ps and ps["domains"] is None
    assert ps["flavor"] == "cpu"
    assert ps["message"]


def test_yaml_output_matches_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    as_json = plan(tmp_path, capsys, output_objects()).json
    res = plan(tmp_path, capsys, output_objects(), output="yaml")
    assert res.code == 0, res.err
    assert yaml.safe_load(res.out) == as_json


def test_text_output_shows_domains_with_counts(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    res = plan(tmp_path, capsys, output_objects(), output="text")
    assert res.code == 0, res.err
    lines = res.out.splitlines()
    assert "Job team-a/fits: fits" in lines
    assert "  PodSet main (8 pods, flavor=gpu topology=topo)" in lines
    assert f"    {mk.BLOCK}=b0: 8 pod(s)" in lines
    assert f"      {mk.RACK}=b0-r0: 8 pod(s)" in lines
    # kubernetes.io/hostname is the level named "host" unless the Topology names it otherwise.
    host_lines = [line for line in lines if line.startswith("        host=")]
    assert [line.split("   [")[0] for line in host_lines] == [
        "        host=b0-r0-h0: 4 pod(s)",
        "        host=b0-r0-h1: 4 pod(s)",
    ]
    assert "nvidia.com/gpu=0" in host_lines[0]
    assert "Job team-a/nofit: DOES NOT FIT" in lines
    assert f"    {NOT_FIT_RACK_9_AFTER}" in lines
    assert any("plain" in line for line in lines)
    assert any("not governed" in line for line in lines)


def test_default_output_is_text(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = mk.write_yaml(tmp_path / "in.yaml", [*mk.cluster(), mk.job("a", 1, mk.required(mk.RACK))])
    res = run(capsys, "-f", path)
    assert res.code == 0
    assert res.out.splitlines()[0] == "Job team-a/a: fits"


def test_console_script(tmp_path: Path) -> None:
    path = mk.write_yaml(tmp_path / "in.yaml", [*mk.cluster(), mk.job("a", 9, mk.required(mk.RACK))])
    exe = REPO / ".venv" / "bin" / "kueue-tas"
    proc = subprocess.run([str(exe), "plan", "-f", path, "-o", "json"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["workloads"][0]["fits"] is False
    assert out["workloads"][0]["podSets"][0]["message"] == NOT_FIT_RACK_9
    bad = subprocess.run(
        [str(exe), "plan", "-f", str(tmp_path / "missing.yaml")], capture_output=True, text=True, timeout=120
    )
    assert bad.returncode == 1
    assert len(bad.stderr.strip().splitlines()) == 1
    assert "missing.yaml" in bad.stderr


def test_example_cluster_matches_readme(capsys: pytest.CaptureFixture[str]) -> None:
    res = run(capsys, "-f", str(REPO / "examples" / "cluster.yaml"), "-o", "json")
    assert res.code == 0, res.err
    assert [(w["name"], w["fits"]) for w in res.workloads] == [
        ("train-rack", True),
        ("train-block", True),
        ("too-big", False),
        ("js", True),
    ]
    assert res.ps("too-big")["message"] == (
        'topology "gpu-topology" allows to fit only 32 out of 40 pod(s). '
        'Total nodes: 16; excluded: resource "nvidia.com/gpu": 9'
    )
    assert res.ps("js", "workers")["count"] == 8


# --------------------------------------------------------------------------------------------
# placement modes
# --------------------------------------------------------------------------------------------


def test_required_fits_and_does_not_fit(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    res = plan(
        tmp_path,
        capsys,
        [
            *mk.cluster(),
            mk.job("block", 16, mk.required(mk.BLOCK)),
            mk.job("too-wide", 17, mk.required(mk.BLOCK)),
            mk.job("too-fat", 1, mk.required(mk.HOST), gpus=5),
        ],
    )
    assert res.code == 0, res.err
    assert res.wl("block")["fits"] is True
    assert blocks(res.ps("block")) == {"b0"}
    assert sum(hosts(res.ps("block")).values()) == 16
    # b0 is full now; b1 still holds 16.
    assert res.ps("too-wide")["message"] == (
        'topology "topo" allows to fit only 16 out of 17 pod(s). Total nodes: 8; excluded: resource "nvidia.com/gpu": 4'
    )
    assert res.ps("too-fat")["message"] == (
        'topology "topo" doesn\'t allow to fit any of 1 pod(s). Total nodes: 8; excluded: resource "nvidia.com/gpu": 8'
    )


def test_preferred_spreads_to_the_next_level(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    res = plan(
        tmp_path,
        capsys,
        [
            *mk.cluster(),
            mk.job("in-block", 12, {mk.PREFERRED: mk.RACK}),
            mk.job("everywhere", 20, {mk.PREFERRED: mk.RACK}),
            mk.job("too-many", 1, {mk.PREFERRED: mk.RACK}),
        ],
    )
    assert res.code == 0, res.err
    ps = res.ps("in-block")
    assert res.wl("in-block")["fits"] is True
    assert len(blocks(ps)) == 1  # does not fit a rack: one block
    assert sorted(racks(ps).values()) == [4, 8]
    ps = res.ps("everywhere")
    assert res.wl("everywhere")["fits"] is True
    assert sum(hosts(ps).values()) == 20
    assert len(blocks(ps)) == 2  # fits no block: spread
    assert res.wl("too-many")["fits"] is False
    assert res.ps("too-many")["message"].startswith('topology "topo" doesn\'t allow to fit any of 1 pod(s)')


def test_unconstrained(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    res = plan(
        tmp_path,
        capsys,
        [
            *mk.cluster(),
            mk.job("anywhere", 30, {mk.UNCONSTRAINED: "true"}),
            mk.job("rest", 3, {mk.UNCONSTRAINED: "true"}),
        ],
    )
    assert res.code == 0, res.err
    assert res.wl("anywhere")["fits"] is True
    assert sum(hosts(res.ps("anywhere")).values()) == 30
    assert len(blocks(res.ps("anywhere"))) == 2
    assert res.wl("rest")["fits"] is False
    assert res.ps("rest")["message"].startswith('topology "topo" allows to fit only 2 out of 3 pod(s)')


def test_implied_podset_is_placed_and_counted(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    res = plan(
        tmp_path,
        capsys,
        [*mk.cluster(), mk.job("implied", 28), mk.job("after", 5, {mk.UNCONSTRAINED: "true"})],
    )
    assert res.code == 0, res.err
    ps = res.ps("implied")
    assert res.wl("implied")["fits"] is True
    assert (ps["flavor"], ps["topology"]) == ("gpu", "topo")
    assert sum(hosts(ps).values()) == 28
    assert res.ps("after")["message"].startswith('topology "topo" allows to fit only 4 out of 5 pod(s)')


def test_slices(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    sliced = {mk.REQUIRED: mk.BLOCK, mk.SLICE_LEVEL: mk.RACK, mk.SLICE_SIZE: "6"}
    res = plan(
        tmp_path,
        capsys,
        [*mk.cluster(), mk.job("sliced", 12, sliced), mk.job("three-slices", 18, sliced)],
    )
    assert res.code == 0, res.err
    ps = res.ps("sliced")
    assert res.wl("sliced")["fits"] is True
    assert len(blocks(ps)) == 1
    assert sorted(racks(ps).values()) == [6, 6]  # without slices BestFit would give 8 + 4
    # b1 is the only block with two free racks; 3 slices of 6 need three racks.
    assert res.ps("three-slices")["message"] == (
        'topology "topo" allows to fit only 2 out of 3 slice(s). Total nodes: 8; excluded: resource "nvidia.com/gpu": 2'
    )


def test_without_slices_the_same_job_packs_a_rack(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    res = plan(tmp_path, capsys, [*mk.cluster(), mk.job("packed", 12, mk.required(mk.BLOCK))])
    assert sorted(racks(res.ps("packed")).values()) == [4, 8]


def test_jobset_two_replicated_jobs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    js = mk.jobset(
        "js",
        [
            mk.replicated_job("Driver", 1, 1, 1, mk.required(mk.HOST)),
            mk.replicated_job("Workers", 2, 4, 3, mk.required(mk.BLOCK)),  # 2 x min(4, 3) = 6
        ],
    )
    res = plan(tmp_path, capsys, [*mk.cluster(), js])
    assert res.code == 0, res.err
    wl = res.wl("js")
    assert wl["fits"] is True
    assert [(p["name"], p["count"]) for p in wl["podSets"]] == [("driver", 1), ("workers", 6)]
    assert sum(hosts(res.ps("js", "driver")).values()) == 1
    assert len(hosts(res.ps("js", "driver"))) == 1
    assert len(blocks(res.ps("js", "workers"))) == 1
    assert sum(hosts(res.ps("js", "workers")).values()) == 6


def test_jobset_podset_that_does_not_fit(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    js = mk.jobset(
        "js", [mk.replicated_job("Leader", 1, 1, 1, None), mk.replicated_job("Workers", 3, 3, 3, mk.required(mk.RACK))]
    )
    res = plan(tmp_path, capsys, [*mk.cluster(), js, mk.job("after", 32, {mk.UNCONSTRAINED: "true"})])
    assert res.code == 0, res.err
    assert res.wl("js")["fits"] is False
    assert res.ps("js", "workers")["message"] == 'topology "topo" allows to fit only 8 out of 9 pod(s)'
    # A workload that does not fit holds nothing: its leader is not charged.
    assert res.wl("after")["fits"] is True


# --------------------------------------------------------------------------------------------
# existing usage
# --------------------------------------------------------------------------------------------


def small_cluster() -> list[dict[str, Any]]:
    """One rack of two 4-GPU hosts."""
    return [*mk.kueue_objects(), *mk.grid_nodes(blocks=1, racks=1, hosts=2)]


def admitted(state: str, hosts_: dict[str, int] | None = None, annotation: str | None = None) -> dict[str, Any]:
    hosts_ = hosts_ or {"b0-r0-h0": 4}
    assignment = TopologyAssignment((mk.HOST,), tuple(DomainAssignment((h,), n) for h, n in hosts_.items()))
    held = assignment if annotation is None else annotation
    return mk.workload("running", sum(hosts_.values()), admitted_flavor="gpu", check_state=state, assignment=held)


def test_ready_workload_with_assignment_holds_capacity(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    res = plan(tmp_path, capsys, [*small_cluster(), mk.job("new", 8, mk.required(mk.RACK)), admitted("Ready")])
    assert res.code == 0, res.err
    assert [w["name"] for w in res.workloads] == ["new"]  # the admitted Workload is not placed again
    assert res.ps("new")["message"] == 'topology "topo" allows to fit only 4 out of 8 pod(s)' + ONE_HOST_FULL


def test_ready_workload_listed_first_also_holds_capacity(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    res = plan(tmp_path, capsys, [*small_cluster(), admitted("Ready"), mk.job("new", 4, mk.required(mk.RACK))])
    assert res.code == 0, res.err
    assert hosts(res.ps("new")) == {"b0-r0-h1": 4}


def test_pending_workload_assignment_not_trusted(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    res = plan(tmp_path, capsys, [*small_cluster(), mk.job("new", 8, mk.required(mk.RACK)), admitted("Pending")])
    assert res.code == 0, res.err
    assert [w["name"] for w in res.workloads] == ["new", "running"]
    assert res.wl("new")["fits"] is True
    # The Pending Workload is placed itself, after the job that took everything.
    assert res.wl("running")["fits"] is False
    assert res.ps("running")["message"].startswith('topology "topo" doesn\'t allow to fit any of 4 pod(s)')


def test_pending_workload_is_placed_itself(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    res = plan(tmp_path, capsys, [*small_cluster(), admitted("Pending", {"b0-r0-h1": 4})])
    assert res.code == 0, res.err
    assert res.wl("running")["fits"] is True
    assert sum(hosts(res.ps("running")).values()) == 4


def test_ready_workload_of_another_check_not_trusted(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    wl = admitted("Ready")
    wl["status"]["admissionChecks"][0]["name"] = "someone-else"
    res = plan(tmp_path, capsys, [*small_cluster(), mk.job("new", 8, mk.required(mk.RACK)), wl])
    assert res.code == 0, res.err
    assert res.wl("new")["fits"] is True


# --------------------------------------------------------------------------------------------
# non-TAS pods
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("extra", "fit"),
    [
        pytest.param(mk.pod("ds", "b0-r0-h0", gpus=4, namespace="kube-system"), 4, id="running-bound"),
        pytest.param(mk.pod("ds", "b0-r0-h0", gpus=4, namespace="kube-system", phase="Pending"), 4, id="pending-bound"),
        pytest.param(mk.pod("ds", "b0-r0-h0", gpus=4, namespace="kube-system", phase="Succeeded"), 8, id="succeeded"),
        pytest.param(mk.pod("ds", "b0-r0-h0", gpus=4, namespace="kube-system", phase="Failed"), 8, id="failed"),
        pytest.param(mk.pod("ds", None, gpus=4, namespace="kube-system", phase="Pending"), 8, id="unbound"),
        pytest.param(
            mk.pod("w-0", "b0-r0-h0", gpus=4, namespace="kube-system", labels={mk.WORKLOAD_LABEL: "x"}),
            4,  # issue 12, defect 2: our label without a Workload of ours behind it hides nothing
            id="our-label-no-workload",
        ),
    ],
)
def test_non_tas_pods(tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: dict[str, Any], fit: int) -> None:
    res = plan(tmp_path, capsys, [*small_cluster(), extra, mk.job("new", 8, mk.required(mk.RACK))])
    assert res.code == 0, res.err
    if fit == 8:
        assert res.wl("new")["fits"] is True
        assert hosts(res.ps("new")) == {"b0-r0-h0": 4, "b0-r0-h1": 4}
    else:
        assert res.ps("new")["message"] == f'topology "topo" allows to fit only {fit} out of 8 pod(s)' + ONE_HOST_FULL


def test_non_tas_pod_charged_by_node_name_not_hostname_label(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    n = mk.node("node-xyz", "b0", "b0-r0")
    n["metadata"]["labels"][mk.HOST] = "h-one"
    objs = [*mk.kueue_objects(), n, mk.node("b0-r0-h1"), mk.pod("ds", "node-xyz", gpus=3, namespace="kube-system")]
    res = plan(tmp_path, capsys, [*objs, mk.job("a", 8, mk.required(mk.RACK))])
    assert res.ps("a")["message"] == 'topology "topo" allows to fit only 5 out of 8 pod(s)'
    res = plan(tmp_path, capsys, [*objs, mk.job("b", 5, mk.required(mk.RACK))])
    assert hosts(res.ps("b")) == {"b0-r0-h1": 4, "h-one": 1}


def test_non_tas_pod_cpu_counts(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    hog = mk.pod("hog", "b0-r0-h1", gpus=0, namespace="kube-system")
    hog["spec"]["containers"][0]["resources"]["requests"] = {"cpu": "31"}
    res = plan(tmp_path, capsys, [*small_cluster(), hog, mk.job("new", 8, mk.required(mk.RACK), cpu="2")])
    assert res.ps("new")["message"] == (
        'topology "topo" allows to fit only 4 out of 8 pod(s). Total nodes: 2; excluded: resource "cpu": 1'
    )


# --------------------------------------------------------------------------------------------
# input order, flavors, Jobs with their Workloads
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("order", [("first", "second"), ("second", "first")])
def test_input_order(tmp_path: Path, capsys: pytest.CaptureFixture[str], order: tuple[str, str]) -> None:
    jobs = [mk.job(name, 5, mk.required(mk.RACK)) for name in order]
    res = plan(tmp_path, capsys, [*small_cluster(), *jobs])
    assert res.code == 0, res.err
    assert [w["name"] for w in res.workloads] == list(order)
    assert res.wl(order[0])["fits"] is True
    assert res.wl(order[1])["fits"] is False
    assert res.ps(order[1])["message"] == 'topology "topo" allows to fit only 3 out of 5 pod(s)' + ONE_HOST_FULL


def test_workload_admission_flavor_is_used(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    objs = two_flavor_objects([])
    wl = mk.workload("wl", 16, mk.required(mk.RACK), admitted_flavor="h100")
    res = plan(tmp_path, capsys, [*objs, wl], "--flavor", "gpu")  # --flavor is for PodSets without admission
    assert res.code == 0, res.err
    assert res.ps("wl")["flavor"] == "h100"
    assert res.wl("wl")["fits"] is True
    assert set(hosts(res.ps("wl"))) == {"h100-b0-r0-h0", "h100-b0-r0-h1"}


def test_flavor_option_selects_flavor(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    objs = two_flavor_objects([])
    res = plan(tmp_path, capsys, [*objs, mk.job("a", 4, mk.required(mk.RACK))], "--flavor", "gpu")
    assert res.code == 0, res.err
    assert res.ps("a")["flavor"] == "gpu"
    assert hosts(res.ps("a")) == {"b0-r0-h0": 4}


def test_unknown_flavor_option_is_invalid(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    res = plan(tmp_path, capsys, [*mk.cluster(), mk.job("a", 1)], "--flavor", "nope")
    assert_invalid(res, "--flavor", "nope")


def test_job_with_its_workload_is_placed_once(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    j = mk.job("train", 8, mk.required(mk.RACK), uid="uid-1")
    wl = mk.workload("job-train-abcde", 8, mk.required(mk.RACK), owner=j)
    res = plan(tmp_path, capsys, [*small_cluster(), j, wl, mk.job("other", 1, mk.required(mk.RACK))])
    assert res.code == 0, res.err
    assert [w["name"] for w in res.workloads] == ["job-train-abcde", "other"]
    assert res.wl("job-train-abcde")["fits"] is True
    assert res.wl("other")["fits"] is False  # the rack was charged once, by the Workload


def test_job_with_workload_listed_before_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    j = mk.job("train", 8, mk.required(mk.RACK))
    wl = mk.workload("job-train-abcde", 8, mk.required(mk.RACK), owner=j)
    res = plan(tmp_path, capsys, [*small_cluster(), wl, j])
    assert [w["name"] for w in res.workloads] == ["job-train-abcde"]


def test_workload_of_another_job_does_not_hide_a_job(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    other = mk.job("other", 1)
    wl = mk.workload("job-other-abcde", 1, owner=other)
    res = plan(tmp_path, capsys, [*small_cluster(), mk.job("train", 2, mk.required(mk.RACK)), wl])
    assert [w["name"] for w in res.workloads] == ["train", "job-other-abcde"]


def test_job_with_its_ready_workload_is_not_placed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    j = mk.job("train", 4, mk.required(mk.RACK), uid="uid-1")
    wl = admitted("Ready")
    wl["metadata"]["ownerReferences"] = [
        {"apiVersion": "batch/v1", "kind": "Job", "name": "train", "uid": "uid-1", "controller": True}
    ]
    res = plan(tmp_path, capsys, [*small_cluster(), j, wl, mk.job("other", 5, mk.required(mk.RACK))])
    assert res.code == 0, res.err
    assert [w["name"] for w in res.workloads] == ["other"]
    assert res.ps("other")["message"].startswith('topology "topo" allows to fit only 4 out of 5 pod(s)')


def test_jobset_with_its_workload_is_placed_once(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    js = mk.jobset("js", [mk.replicated_job("Workers", 2, 2, 2, mk.required(mk.RACK))])
    wl = mk.workload("jobset-js-abcde", 4, mk.required(mk.RACK), owner=js, podset_name="workers")
    res = plan(tmp_path, capsys, [*small_cluster(), js, wl])
    assert [w["name"] for w in res.workloads] == ["jobset-js-abcde"]


# --------------------------------------------------------------------------------------------
# not governed
# --------------------------------------------------------------------------------------------


def test_not_governed_podset(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    objs = [*mk.cluster(), mk.flavor("cpu"), mk.job("plain", 3)]
    res = plan(tmp_path, capsys, objs, "--flavor", "cpu")
    assert res.code == 0, res.err
    ps = res.ps("plain")
    assert ps["domains"] is None
    assert ps["flavor"] == "cpu"
    assert ps["count"] == 3
    assert "not governed" in ps["message"]
    assert "cpu" in ps["message"]
    assert res.err == ""


def test_not_governed_without_any_tas_flavor(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    res = plan(tmp_path, capsys, [*mk.grid_nodes(), mk.job("plain", 3)])
    assert res.code == 0, res.err
    assert res.ps("plain")["domains"] is None
    assert "not governed" in res.ps("plain")["message"]


def test_not_governed_podset_charges_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    objs = [*small_cluster(), mk.flavor("cpu"), mk.workload("plain", 8, admitted_flavor="cpu")]
    res = plan(tmp_path, capsys, [*objs, mk.job("tas", 8, mk.required(mk.RACK))])
    assert res.wl("tas")["fits"] is True


# --------------------------------------------------------------------------------------------
# invalid input
# --------------------------------------------------------------------------------------------


def test_unknown_topology_level(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    res = plan(tmp_path, capsys, [*mk.cluster(), mk.job("a", 1, mk.required("example.com/zone"))])
    assert_invalid(
        res,
        "Job/team-a/a",
        f"spec.template.metadata.annotations[{mk.REQUIRED}]",
        'unknown topology level "example.com/zone"',
    )


def test_unknown_slice_level_in_workload(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ann = {mk.REQUIRED: mk.BLOCK, mk.SLICE_LEVEL: "example.com/zone", mk.SLICE_SIZE: "2"}
    res = plan(tmp_path, capsys, [*mk.cluster(), mk.workload("w", 4, ann)])
    assert_invalid(
        res,
        "Workload/team-a/w",
        f"spec.podSets[0].template.metadata.annotations[{mk.SLICE_LEVEL}]",
        "unknown topology level",
    )


def test_malformed_quantity_in_job(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    res = plan(tmp_path, capsys, [*mk.cluster(), mk.job("a", 1, mk.required(mk.RACK), cpu="lots")])
    assert_invalid(res, "Job/team-a/a", "spec.template.spec.containers[].resources", "lots")


def test_malformed_quantity_in_jobset(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    js = mk.jobset("js", [mk.replicated_job("a", 1, 1, 1, None), mk.replicated_job("b", 1, 1, 1, None)])
    js["spec"]["replicatedJobs"][1]["template"]["spec"]["template"]["spec"]["containers"][0]["resources"] = {
        "requests": {"memory": "1Gx"}
    }
    res = plan(tmp_path, capsys, [*mk.cluster(), js])
    assert_invalid(res, "JobSet/team-a/js", "spec.replicatedJobs[1].template.spec.template", "1Gx")


def test_malformed_quantity_in_pod(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = mk.pod("ds", "b0-r0-h0", gpus=1, namespace="kube-system")
    bad["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "1.2.3"
    res = plan(tmp_path, capsys, [*mk.cluster(), bad, mk.job("a", 1, mk.required(mk.RACK))])
    assert_invalid(res, "Pod/kube-system/ds", "resources", "1.2.3")


def test_malformed_quantity_in_node(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = mk.node("bad-node", allocatable={"cpu": "32", "pods": "110", mk.GPU: "four"})
    res = plan(tmp_path, capsys, [*mk.cluster(), bad, mk.job("a", 1, mk.required(mk.RACK))])
    assert_invalid(res, "bad-node", "status.allocatable", "four")


def test_malformed_quantity_in_node_exits_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = mk.node("bad-node", allocatable={"cpu": "32", "pods": "110", mk.GPU: "four"})
    res = plan(tmp_path, capsys, [*mk.cluster(), bad, mk.job("a", 1, mk.required(mk.RACK))])
    assert_invalid(res, "status.allocatable", "four")


def test_annotated_podset_on_flavor_without_topology(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    objs = [*mk.cluster(), mk.flavor("cpu"), mk.job("a", 1, mk.required(mk.RACK))]
    res = plan(tmp_path, capsys, objs, "--flavor", "cpu")
    assert_invalid(res, "Job/team-a/a", "spec.template", "flavor 'cpu' has no topology")


def test_annotated_workload_admitted_on_flavor_without_topology(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    objs = [*mk.cluster(), mk.flavor("cpu"), mk.workload("w", 1, mk.required(mk.RACK), admitted_flavor="cpu")]
    res = plan(tmp_path, capsys, objs)
    assert_invalid(res, "Workload/team-a/w", "spec.podSets[0].template", "flavor 'cpu' has no topology")


def test_flavor_topology_missing_from_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    objs = [mk.flavor("gpu"), mk.admission_check(topology_name="ghost"), mk.cluster_queue(), *mk.grid_nodes()]
    res = plan(tmp_path, capsys, [*objs, mk.job("a", 1, mk.required(mk.RACK))])
    assert_invalid(res, "Job/team-a/a", "'gpu'", "'ghost'", "not in the input")


def test_unreadable_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = str(tmp_path / "nope.yaml")
    res = run(capsys, "-f", missing, "-o", "json")
    assert_invalid(res, missing, "cannot read")


def test_not_yaml(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("kind: Job\nmetadata: [unclosed\n", encoding="utf-8")
    res = run(capsys, "-f", str(path), "-o", "json")
    assert_invalid(res, str(path), "not valid YAML or JSON")


@pytest.mark.parametrize(
    ("annotations", "fragment"),
    [
        pytest.param({mk.SLICE_LEVEL: mk.RACK, mk.SLICE_SIZE: "abc"}, "abc", id="slice-size-abc"),
        pytest.param({mk.SLICE_LEVEL: mk.RACK, mk.SLICE_SIZE: "0"}, "0", id="slice-size-0"),
        pytest.param({mk.SLICE_LEVEL: mk.RACK}, mk.SLICE_SIZE, id="slice-size-missing"),
        pytest.param({mk.UNCONSTRAINED: "maybe"}, "maybe", id="unconstrained-not-bool"),
        pytest.param({mk.PREFERRED: mk.BLOCK, mk.UNCONSTRAINED: "true"}, "more than one", id="two-modes"),
    ],
)
def test_malformed_annotation(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], annotations: dict[str, str], fragment: str
) -> None:
    res = plan(tmp_path, capsys, [*mk.cluster(), mk.job("a", 4, annotations)])
    assert_invalid(res, "Job/team-a/a", "spec.template", "annotations", fragment)


def test_malformed_assignment_on_ready_workload(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    objs = [*small_cluster(), admitted("Ready", annotation='{"podSets": 7}'), mk.job("j", 1, mk.required(mk.RACK))]
    res = plan(tmp_path, capsys, objs)
    assert_invalid(res, "Workload/team-a/running", f"metadata.annotations[{mk.ASSIGNMENT}]", "podSets")


def test_malformed_assignment_on_ready_workload_alone(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    res = plan(tmp_path, capsys, [*small_cluster(), admitted("Ready", annotation='{"podSets": 7}')])
    assert_invalid(res, "Workload/team-a/running", f"metadata.annotations[{mk.ASSIGNMENT}]")


def test_malformed_assignment_on_pending_workload_is_ignored(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    res = plan(tmp_path, capsys, [*small_cluster(), admitted("Pending", annotation="not json")])
    assert res.code == 0, res.err
    assert res.wl("running")["fits"] is True


def test_assignment_naming_unknown_podset(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assignment = TopologyAssignment((mk.HOST,), (DomainAssignment(("b0-r0-h0",), 4),))
    text = encode_assignment_annotation([("ghost", assignment)])
    objs = [*small_cluster(), admitted("Ready", annotation=text), mk.job("j", 1, mk.required(mk.RACK))]
    res = plan(tmp_path, capsys, objs)
    assert_invalid(res, "Workload/team-a/running", f"metadata.annotations[{mk.ASSIGNMENT}]", "'ghost'")


def test_no_output_on_invalid_input_even_after_valid_objects(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    res = plan(tmp_path, capsys, [*mk.cluster(), mk.job("ok", 1, mk.required(mk.RACK)), mk.job("bad", 1, cpu="x")])
    assert_invalid(res, "Job/team-a/bad")


def test_malformed_shape_of_known_kind(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    j = mk.job("j", 1)
    j["spec"]["parallelism"] = "many"
    res = plan(tmp_path, capsys, [*mk.cluster(), j])
    assert_invalid(res, "Job/", "j", "spec.parallelism")


def test_warnings_then_one_error_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cfg"}}
    res = plan(tmp_path, capsys, [cm, *mk.cluster(), mk.job("bad", 1, mk.required("nope"))])
    assert res.code == 1
    assert res.out == ""
    errors = [line for line in res.err_lines if not line.startswith("warning:")]
    assert len(errors) == 1, res.err
    assert "Job/team-a/bad" in errors[0]


def test_conflicting_topologies_for_one_flavor(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    objs = [
        mk.topology(),
        mk.topology("other"),
        mk.flavor("gpu"),
        mk.admission_check(),
        mk.admission_check("tas2", "other"),
        mk.cluster_queue(),
        mk.cluster_queue("cq2", checks={"tas2": []}),
        *mk.grid_nodes(),
        mk.job("a", 1),
    ]
    res = plan(tmp_path, capsys, objs)
    assert_invalid(res, "ResourceFlavor 'gpu'", "'topo'", "'other'")


def test_non_utf8_file_is_a_clean_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "binary.yaml"
    path.write_bytes(b"\xff\xfe\x00k\x00i\x00n\x00d")
    res = run(capsys, "-f", str(path), "-o", "json")
    assert_invalid(res, str(path))


def test_metadata_not_a_mapping_is_a_clean_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    j = mk.job("j", 1)
    j["metadata"] = 5
    res = plan(tmp_path, capsys, [*mk.cluster(), j])
    assert_invalid(res, "Job", "metadata")


def test_unquoted_int_annotation_is_a_clean_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    j = mk.job("j", 4, {mk.SLICE_LEVEL: mk.HOST})
    j["spec"]["template"]["metadata"]["annotations"][mk.SLICE_SIZE] = 2  # YAML `podset-slice-size: 2`
    res = plan(tmp_path, capsys, [*mk.cluster(), j])
    assert_invalid(res, "Job/team-a/j", "spec.template", mk.SLICE_SIZE)


def test_requests_not_a_mapping_is_a_clean_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    j = mk.job("j", 4)
    j["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"] = ["cpu"]
    res = plan(tmp_path, capsys, [*mk.cluster(), j])
    assert_invalid(res, "Job/team-a/j", "spec.template.spec.containers[0].resources.requests: expected a mapping")


def test_malformed_toleration_is_a_clean_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    tol = [{"key": "a", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": "soon"}]
    res = plan(tmp_path, capsys, [*mk.cluster(), mk.job("j", 4, tolerations=tol)])
    assert_invalid(res, "Job/team-a/j", "tolerations")


def test_empty_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "empty.yaml"
    path.write_text("", encoding="utf-8")
    res = run(capsys, "-f", str(path), "-o", "json")
    assert res.code == 0, res.err
    assert res.json == {"workloads": []}


def test_annotation_prefix_option(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    kueue_keys = {"kueue.x-k8s.io/podset-required-topology": mk.RACK}
    objs = [*mk.cluster(), mk.job("a", 9, kueue_keys)]
    res = plan(tmp_path, capsys, objs, "--annotation-prefix", "kueue.x-k8s.io/")
    assert res.ps("a")["message"] == NOT_FIT_RACK_9
    res = plan(tmp_path, capsys, objs)  # default prefix: the Kueue key is not ours, the PodSet is implied
    assert res.wl("a")["fits"] is True


def test_annotation_prefix_without_slash_is_a_clean_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    objs = [*mk.cluster(), mk.job("a", 1, mk.required(mk.RACK))]
    path = mk.write_yaml(tmp_path / "in.yaml", objs)
    try:
        code = main(["plan", "-f", path, "--annotation-prefix", "kueue.x-k8s.io"])
    except SystemExit as exc:  # argparse usage error
        code = int(exc.code or 0)
    err = capsys.readouterr().err
    assert code in (1, 2)
    assert "must end with '/'" in err


# --------------------------------------------------------------------------------------------
# nodes
# --------------------------------------------------------------------------------------------


def replace_h0(**changes: Any) -> list[dict[str, Any]]:
    """small_cluster() with b0-r0-h0 rebuilt by ``mk.node(**changes)``."""
    args: dict[str, Any] = {"name": "b0-r0-h0", "block": "b0", "rack": "b0-r0", **changes}
    return [*mk.kueue_objects(), mk.node(**args), mk.node("b0-r0-h1")]


@pytest.mark.parametrize(
    "changes",
    [
        pytest.param({"ready": False}, id="not-ready"),
        pytest.param({"unschedulable": True}, id="unschedulable"),
        pytest.param({"rack": None}, id="no-rack-label"),
        pytest.param({"block": None}, id="no-block-label"),
        pytest.param({"group": "cpu"}, id="other-node-group"),
    ],
)
def test_ineligible_nodes_do_not_count(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], changes: dict[str, Any]
) -> None:
    res = plan(tmp_path, capsys, [*replace_h0(**changes), mk.job("a", 8, {mk.UNCONSTRAINED: "true"})])
    assert res.code == 0, res.err
    # Not "Total nodes: 2": the node is not a leaf at all.
    assert res.ps("a")["message"] == 'topology "topo" allows to fit only 4 out of 8 pod(s)'
    res = plan(tmp_path, capsys, [*replace_h0(**changes), mk.job("b", 4, {mk.UNCONSTRAINED: "true"})])
    assert hosts(res.ps("b")) == {"b0-r0-h1": 4}


def test_node_without_hostname_label_does_not_count(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    objs = replace_h0()
    del objs[-2]["metadata"]["labels"][mk.HOST]
    res = plan(tmp_path, capsys, [*objs, mk.job("a", 8, {mk.UNCONSTRAINED: "true"})])
    assert res.ps("a")["message"] == 'topology "topo" allows to fit only 4 out of 8 pod(s)'


def test_node_ready_condition_unknown_does_not_count(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    objs = replace_h0()
    objs[-2]["status"]["conditions"] = [{"type": "Ready", "status": "Unknown"}]
    res = plan(tmp_path, capsys, [*objs, mk.job("a", 8, {mk.UNCONSTRAINED: "true"})])
    assert res.ps("a")["message"] == 'topology "topo" allows to fit only 4 out of 8 pod(s)'


NO_SCHEDULE = {"key": "dedicated", "value": "infer", "effect": "NoSchedule"}


def test_taint_excludes_node(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    objs = replace_h0(taints=[NO_SCHEDULE])
    res = plan(tmp_path, capsys, [*objs, mk.job("a", 8, mk.required(mk.RACK))])
    assert res.code == 0, res.err
    assert res.ps("a")["message"] == (
        'topology "topo" allows to fit only 4 out of 8 pod(s). '
        'Total nodes: 2; excluded: taint "dedicated=infer:NoSchedule": 1'
    )


def test_no_execute_taint_without_value(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    objs = replace_h0(taints=[{"key": "maintenance", "effect": "NoExecute"}])
    res = plan(tmp_path, capsys, [*objs, mk.job("a", 8, mk.required(mk.RACK))])
    assert res.ps("a")["message"].endswith('excluded: taint "maintenance:NoExecute": 1')


def test_prefer_no_schedule_taint_does_not_exclude(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    objs = replace_h0(taints=[{**NO_SCHEDULE, "effect": "PreferNoSchedule"}])
    res = plan(tmp_path, capsys, [*objs, mk.job("a", 8, mk.required(mk.RACK))])
    assert res.wl("a")["fits"] is True


def test_taint_tolerated_by_pod_template(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    objs = replace_h0(taints=[NO_SCHEDULE])
    tol = [{"key": "dedicated", "operator": "Equal", "value": "infer", "effect": "NoSchedule"}]
    res = plan(tmp_path, capsys, [*objs, mk.job("a", 8, mk.required(mk.RACK), tolerations=tol)])
    assert res.code == 0, res.err
    assert res.wl("a")["fits"] is True
    assert hosts(res.ps("a")) == {"b0-r0-h0": 4, "b0-r0-h1": 4}


def test_wrong_toleration_does_not_help(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    objs = replace_h0(taints=[NO_SCHEDULE])
    tol = [{"key": "dedicated", "operator": "Equal", "value": "train", "effect": "NoSchedule"}]
    res = plan(tmp_path, capsys, [*objs, mk.job("a", 8, mk.required(mk.RACK), tolerations=tol)])
    assert res.wl("a")["fits"] is False


def test_taint_tolerated_by_flavor(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    objs = replace_h0(taints=[NO_SCHEDULE])
    flavor_index = next(i for i, o in enumerate(objs) if o["kind"] == "ResourceFlavor")
    objs[flavor_index] = mk.flavor("gpu", tolerations=[{"key": "dedicated", "operator": "Exists"}])
    res = plan(tmp_path, capsys, [*objs, mk.job("a", 8, mk.required(mk.RACK))])
    assert res.code == 0, res.err
    assert res.wl("a")["fits"] is True


def test_node_selector_on_template(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    res = plan(
        tmp_path,
        capsys,
        [*small_cluster(), mk.job("a", 8, mk.required(mk.RACK), nodeSelector={mk.HOST: "b0-r0-h1"})],
    )
    assert res.ps("a")["message"] == (
        'topology "topo" allows to fit only 4 out of 8 pod(s). Total nodes: 2; excluded: nodeSelector: 1'
    )


def test_inputs_not_mutated(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Running twice over the same file gives the same plan (no state leaks between runs)."""
    objs = [*mk.cluster(), mk.job("a", 8, mk.required(mk.RACK))]
    first = plan(tmp_path, capsys, copy.deepcopy(objs)).json
    second = plan(tmp_path, capsys, objs).json
    assert first == second
