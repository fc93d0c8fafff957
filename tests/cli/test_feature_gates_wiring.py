"""Kueue's TAS feature gates reach plan, the controller settings and the capacity rules."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import builders as mk
import pytest
from vocab import GPU, SLICE_CONSTRAINTS

from kueue_tas.capacity.live import LiveCapacity
from kueue_tas.capacity.rules import FlavorSpec, UsageEntry
from kueue_tas.cli.main import build_parser, main
from kueue_tas.runtime.config import ConfigError, Settings
from kueue_tas.topology.assignment import DomainAssignment, TopologyAssignment
from kueue_tas.topology.features import KUEUE_DEFAULTS, FeatureGates
from kueue_tas.topology.model import HOSTNAME_LABEL, NodeInfo, PodSetRequest, TopologyRequest

pytestmark = pytest.mark.usefixtures("no_settings_env")


def plan(tmp_path: Path, capsys: pytest.CaptureFixture[str], objects: list[dict[str, Any]], *args: str) -> Any:
    path = mk.write_yaml(tmp_path / f"in-{len(list(tmp_path.iterdir()))}.yaml", objects)
    capsys.readouterr()
    code = main(["plan", "-f", path, "-o", "json", *args])
    cap = capsys.readouterr()
    return code, (json.loads(cap.out) if cap.out else None), cap.err.strip()


# --- plan --feature-gates ---------------------------------------------------------------------


def test_unknown_gate_is_one_line_naming_the_known_ones(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = plan(tmp_path, capsys, mk.cluster(), "--feature-gates", "TASBalancedPlacement=true,Nope=true")
    assert code == 1 and out is None
    assert len(err.splitlines()) == 1
    assert err.startswith("error: --feature-gates: unknown feature gate 'Nope'; known gates: ")
    assert all(name in err for name in KUEUE_DEFAULTS)
    code, _, err = plan(tmp_path, capsys, mk.cluster(), "--feature-gates", "TASBalancedPlacement=maybe")
    assert code == 1 and "TASBalancedPlacement" in err and "not a boolean" in err


def test_gates_reach_request_parsing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    layers = json.dumps([{"topology": mk.RACK, "size": 4}, {"topology": mk.HOST, "size": 2}])
    job = mk.job("j", 8, {mk.REQUIRED: mk.BLOCK, SLICE_CONSTRAINTS: layers})
    code, _, err = plan(tmp_path, capsys, [*mk.cluster(), job])
    assert code == 0, err
    code, _, err = plan(tmp_path, capsys, [*mk.cluster(), job], "--feature-gates", "TASMultiLayerTopology=false")
    assert code == 1
    assert "the TASMultiLayerTopology feature gate must be enabled to use this annotation" in err


def shared_node_flavors() -> list[dict[str, Any]]:
    """Flavors ``a`` and ``b`` over the same two nodes of one rack (same node labels), both governed."""
    return [
        mk.topology(),
        mk.flavor("a", node_labels={"node-group": "gpu"}),
        mk.flavor("b", node_labels={"node-group": "gpu"}),
        mk.admission_check(),
        mk.cluster_queue(flavors=("a", "b")),
        *mk.grid_nodes(1, 1, 2),
    ]


def admitted_on_a() -> dict[str, Any]:
    assignment = TopologyAssignment((mk.HOST,), (DomainAssignment(("b0-r0-h0",), 4),))
    return mk.workload("running", 4, admitted_flavor="a", check_state="Ready", assignment=assignment)


def test_overlapping_flavors_gate_decides_cross_flavor_charging(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    objs = [*shared_node_flavors(), admitted_on_a(), mk.job("new", 8, mk.required(mk.RACK))]
    code, out, err = plan(tmp_path, capsys, objs, "--flavor", "b")
    assert code == 0, err
    assert out["workloads"][0]["fits"] is False  # flavor b sees the 4 GPUs used through flavor a
    code, out, err = plan(
        tmp_path, capsys, objs, "--flavor", "b", "--feature-gates", "TASHandleOverlappingFlavors=false"
    )
    assert code == 0, err
    assert out["workloads"][0]["fits"] is True


def test_live_capacity_follows_the_overlapping_gate() -> None:
    def build(gates: FeatureGates) -> LiveCapacity:
        live = LiveCapacity(gates)
        spec = {"pool": "gpu"}
        live.set_flavors(
            {f: FlavorSpec(f, "topo", (HOSTNAME_LABEL,), spec) for f in ("a", "b")},
        )
        live.upsert_node(NodeInfo("n1", {HOSTNAME_LABEL: "n1", "pool": "gpu"}, {GPU: 4, "pods": 10}))
        assignment = TopologyAssignment((HOSTNAME_LABEL,), (DomainAssignment(("n1",), 4),))
        live.set_workload_usage("ns/w", (UsageEntry("a", assignment, {GPU: 1}),))
        return live

    def fits_on_b(live: LiveCapacity) -> bool:
        snap = live.snapshot("b")
        assert snap is not None
        request = PodSetRequest("main", 1, {GPU: 1}, TopologyRequest(required=HOSTNAME_LABEL))
        [result] = snap.place([request])
        return result.assignment is not None

    assert not fits_on_b(build(FeatureGates()))
    assert fits_on_b(build(FeatureGates({"TASHandleOverlappingFlavors": False})))


# --- controller settings ----------------------------------------------------------------------


def test_settings_file_env_and_run_validation(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert Settings().feature_gates == {}
    f = tmp_path / "config.yaml"
    f.write_text("featureGates:\n  TASBalancedPlacement: true\n")
    assert Settings.from_file(f).feature_gates == {"TASBalancedPlacement": True}
    f.write_text("feature_gates: {TASRespectNodeAffinityPreferred: true}\n")
    assert Settings.from_file(f).feature_gates == {"TASRespectNodeAffinityPreferred": True}
    monkeypatch.setenv(
        "KUEUE_TAS_FEATURE_GATES", "TASBalancedPlacement=true, ElasticJobsViaWorkloadSlicesWithTAS=false"
    )
    s = Settings.from_file(f)  # the environment wins over the file
    assert s.feature_gates == {"TASBalancedPlacement": True, "ElasticJobsViaWorkloadSlicesWithTAS": False}
    monkeypatch.setenv("KUEUE_TAS_FEATURE_GATES", "TASBalancedPlacement")
    with pytest.raises(ConfigError, match="feature_gates: 'TASBalancedPlacement': expected Name=true or Name=false"):
        Settings.load()
    monkeypatch.setenv("KUEUE_TAS_FEATURE_GATES", "TASBalancedPlacement=perhaps")
    with pytest.raises(ConfigError, match=r"feature_gates\.TASBalancedPlacement"):
        Settings.load()
    # an unknown name is a configuration error of `run`, before anything starts
    monkeypatch.setenv("KUEUE_TAS_FEATURE_GATES", "NoSuchGate=true")
    assert main(["run"]) == 1
    out = capsys.readouterr().out.strip()
    assert out.startswith("error: invalid kueue-tas settings: feature_gates: unknown feature gate 'NoSuchGate'")
    assert "TASBalancedPlacement" in out


def test_run_help_lists_the_gates_with_defaults() -> None:
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    run_help = sub.choices["run"].format_help()
    for name, default in KUEUE_DEFAULTS.items():
        assert any(line.split() == [name, "true" if default else "false"] for line in run_help.splitlines()), name
    assert "KUEUE_TAS_FEATURE_GATES" in run_help


def test_gates_reach_the_engine(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    prefer = {"key": mk.HOST, "operator": "In", "values": ["b1-r1-h1"]}
    affinity = {
        "nodeAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 100, "preference": {"matchExpressions": [prefer]}}
            ]
        }
    }
    objs = [*mk.cluster(), mk.job("j", 2, mk.required(mk.RACK), affinity=affinity)]
    hosts = []
    for gate in ("", "TASRespectNodeAffinityPreferred=true"):
        code, out, err = plan(tmp_path, capsys, objs, "--feature-gates", gate)
        assert code == 0, err
        hosts.append([d["values"][0] for d in out["workloads"][0]["podSets"][0]["domains"]])
    assert hosts[0] != ["b1-r1-h1"]  # without the gate the preference is ignored
    assert hosts[1] == ["b1-r1-h1"]
