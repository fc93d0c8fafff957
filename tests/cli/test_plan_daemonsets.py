"""``kueue-tas plan`` reads DaemonSets in its dump and holds their pods' requests on every node
they run on until the dump shows the pod (``kueue_tas.capacity.daemonsets``), as the controller does.

Default cluster (``mk.cluster()``): 2 blocks x 2 racks x 2 hosts of 4 GPUs; a rack holds 8
one-GPU pods.
"""

from __future__ import annotations

from pathlib import Path

import builders as mk
import pytest
from plan_harness import assert_invalid, plan, racks

RACK_JOB = mk.job("rack-job", 8, mk.required(mk.RACK))
# Two GPUs of every host of rack b0-r0: that rack keeps 4, too few for the rack job.
AGENT = mk.daemonset("gpu-agent", requests={mk.GPU: "2"}, node_selector={mk.RACK: "b0-r0"})


def test_the_rack_job_alone_takes_the_first_rack(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The control: the rack the agent needs is the one chosen when nothing holds it."""
    res = plan(tmp_path, capsys, [*mk.cluster(), RACK_JOB])
    assert res.code == 0, res.err
    assert racks(res.ps("rack-job")) == {"b0-r0": 8}


def test_a_daemonset_holds_its_nodes_before_its_pods_exist(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    res = plan(tmp_path, capsys, [*mk.cluster(), AGENT, RACK_JOB])
    assert res.code == 0, res.err
    assert res.err_lines == []  # DaemonSets are read, not skipped with a warning
    assert racks(res.ps("rack-job")) == {"b0-r1": 8}


def test_a_daemon_pod_in_the_dump_is_charged_once(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # Both hosts of b0-r0 run the agent; a 6-GPU job fits there only if each agent is charged once.
    pods = [mk.pod(f"gpu-agent-{h}", f"b0-r0-{h}", namespace="kube-system", gpus=2, owner=AGENT) for h in ("h0", "h1")]
    six = mk.job("six", 4, mk.required(mk.RACK))
    res = plan(tmp_path, capsys, [*mk.cluster(), AGENT, *pods, six])
    assert res.code == 0, res.err
    assert racks(res.ps("six")) == {"b0-r0": 4}


def test_a_daemonset_being_deleted_holds_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    deleting = mk.daemonset("gpu-agent", requests={mk.GPU: "2"}, node_selector={mk.RACK: "b0-r0"}, deleting=True)
    res = plan(tmp_path, capsys, [*mk.cluster(), deleting, RACK_JOB])
    assert res.code == 0, res.err
    assert racks(res.ps("rack-job")) == {"b0-r0": 8}


def test_a_malformed_daemonset_is_one_line_naming_the_field(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = mk.daemonset("gpu-agent", requests={"cpu": "lots"})
    res = plan(tmp_path, capsys, [*mk.cluster(), bad, RACK_JOB])
    assert_invalid(res, "DaemonSet/kube-system/gpu-agent", "spec.template.spec.containers[].resources", "cpu")


# --- who may reserve (issue 30): plan reads the controller's settings ---------------------------

TENANT_AGENT = mk.daemonset("gpu-agent", namespace="team-b", requests={mk.GPU: "2"}, node_selector={mk.RACK: "b0-r0"})


def test_a_tenants_daemonset_holds_nothing_unless_its_namespace_is_listed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    res = plan(tmp_path, capsys, [*mk.cluster(), TENANT_AGENT, RACK_JOB])
    assert res.code == 0, res.err
    assert racks(res.ps("rack-job")) == {"b0-r0": 8}
    config = tmp_path / "settings.yaml"
    config.write_text("daemonsetReservationNamespaces: [kube-system, team-b]\n", encoding="utf-8")
    res = plan(tmp_path, capsys, [*mk.cluster(), TENANT_AGENT, RACK_JOB], "--config", str(config))
    assert res.code == 0, res.err
    assert racks(res.ps("rack-job")) == {"b0-r1": 8}


def test_a_bad_settings_file_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "settings.yaml"
    config.write_text("daemonsetReservationSeconds: -1\n", encoding="utf-8")
    res = plan(tmp_path, capsys, [*mk.cluster(), RACK_JOB], "--config", str(config))
    assert res.code == 1
    assert len(res.err.splitlines()) == 1 and "daemonset_reservation_seconds" in res.err
