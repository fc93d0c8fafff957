"""``kueue-tas plan`` with the workload-wide constraint (issue 14, item 6): read from the Job's or
JobSet's metadata (or a Workload's, or its owner's in the input), placed as the controller
places it, refused in one line as the controller refuses it, shown in the text view and JSON.

The builders' cluster: blocks b0, b1 > racks of 2 hosts x 4 GPUs (8 per rack, 16 per block).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import builders as mk
import pytest
from plan_harness import assert_invalid, plan
from vocab import WORKLOAD_PREFERRED, WORKLOAD_REQUIRED


def two_models(**annotations: str) -> dict[str, Any]:
    """A JobSet of two 6-pod instances, each in one rack."""
    body = mk.jobset(
        "models",
        [mk.replicated_job(f"model{i}", 1, 6, 6, {mk.REQUIRED: mk.RACK}) for i in (1, 2)],
    )
    if annotations:
        body["metadata"]["annotations"] = dict(annotations)
    return body


def blocks(res_json: dict[str, Any]) -> set[str]:
    [wl] = res_json["workloads"]
    return {d["values"][0].split("-")[0] for ps in wl["podSets"] for d in ps["domains"]}


def test_the_jobsets_required_block_keeps_both_instances_in_one_block(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A 3-pod Job first fills half of rack b0-r0: per instance, best fit would then take
    # b0-r1 (8 free) for model1 and b1-r0 for model2, two blocks.
    busy = mk.job("busy", 3, {mk.REQUIRED: mk.RACK})
    plain = plan(tmp_path, capsys, [*mk.cluster(), busy, two_models()])
    assert plain.code == 0, plain.err
    wide = plan(tmp_path, capsys, [*mk.cluster(), busy, two_models(**{WORKLOAD_REQUIRED: mk.BLOCK})])
    assert wide.code == 0, wide.err
    [_, wl] = wide.json["workloads"]
    assert wl["workloadTopology"] == {"required": mk.BLOCK}
    assert len({d["values"][0].split("-")[0] for ps in wl["podSets"] for d in ps["domains"]}) == 1
    [_, before] = plain.json["workloads"]
    assert "workloadTopology" not in before
    assert len({d["values"][0].split("-")[0] for ps in before["podSets"] for d in ps["domains"]}) == 2


def test_the_text_view_names_the_one_domain(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    res = plan(tmp_path, capsys, [*mk.cluster(), two_models(**{WORKLOAD_REQUIRED: mk.BLOCK})], output="text")
    assert res.code == 0, res.err
    lines = res.out.splitlines()
    assert f"  workload in {mk.BLOCK} b0 (workload-required-topology: {mk.BLOCK})" in lines, res.out
    spread = plan(tmp_path, capsys, [*mk.cluster(), two_models(**{WORKLOAD_PREFERRED: mk.RACK})], output="text")
    assert f"  workload in {mk.BLOCK} b0 (workload-required-topology" not in spread.out
    assert f"  workload spread over 2 domains of {mk.RACK} (workload-preferred-topology: {mk.RACK}: " in spread.out


def test_a_workload_reads_its_owners_annotations_from_the_input(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    owner = mk.job("train", 12, uid="job-uid")
    owner["metadata"]["annotations"] = {WORKLOAD_REQUIRED: "nonsense!"}
    wl = mk.workload("wl", 12, {mk.REQUIRED: mk.RACK}, owner=owner, admitted_flavor="gpu")
    res = plan(tmp_path, capsys, [*mk.cluster(), owner, wl])
    assert_invalid(res, "Workload/team-a/wl: workload: annotation 'kueue-tas.io/workload-required-topology': ")


@pytest.mark.parametrize(
    ("annotations", "fragment"),
    [
        (
            {WORKLOAD_REQUIRED: mk.RACK, WORKLOAD_PREFERRED: mk.BLOCK},
            f'workload: annotation {WORKLOAD_PREFERRED}: level "{mk.BLOCK}" is above the required level "{mk.RACK}"',
        ),
        (
            {WORKLOAD_REQUIRED: "row"},
            f'workload: annotation {WORKLOAD_REQUIRED}: unknown topology level "row"; Topology "topo" has levels',
        ),
        (
            {WORKLOAD_REQUIRED: mk.HOST},
            f'PodSet "model1": its required level "{mk.RACK}" is broader than the workload\'s level',
        ),
    ],
)
def test_a_constraint_that_cannot_hold_is_one_error_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], annotations: dict[str, str], fragment: str
) -> None:
    res = plan(tmp_path, capsys, [*mk.cluster(), two_models(**annotations)])
    assert_invalid(res, "JobSet/team-a/models: ", fragment)
