"""The head-to-head benchmark's pure parts: the trace, the timelines built from watch states,
and the figures (a wrong percentile or a correctness check that cannot fail would make its
verdict worthless)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from benchmarks.vs_kueue.floor_check import wants_ready
from benchmarks.vs_kueue.report import RunFigures, figures, pair_ratios, percentile, table
from benchmarks.vs_kueue.timeline import (
    JobState,
    PodState,
    Timelines,
    WorkloadState,
    job_state,
    pod_state,
    workload_state,
)
from benchmarks.vs_kueue.trace import SHAPES, JobSpec, make_trace, with_nodes


def test_the_trace_is_seeded_and_half_required() -> None:
    shape = SHAPES["uncontended"]
    a, b = make_trace(shape, 7), make_trace(shape, 7)
    assert a == b and a != make_trace(shape, 8)
    assert len(a) == 300 and sum(j.mode == "required" for j in a) == 150
    assert {j.pods for j in a} == {2, 4, 8}
    assert SHAPES["uncontended"].nodes == 640 and with_nodes(shape, 5000).nodes == 4992


@given(st.lists(st.floats(0, 1000, allow_nan=False), min_size=1, max_size=200), st.sampled_from([50, 90, 99, 100]))
def test_percentile_is_nearest_rank(values: list[float], q: int) -> None:
    got = percentile(values, q)
    ordered = sorted(values)
    at_or_below = sum(1 for v in ordered if v <= got)
    assert got in values
    assert at_or_below >= len(values) * q / 100, "at least q% of the values are <= the q-th percentile"
    assert sum(1 for v in ordered if v < got) < len(values) * q / 100


def feed(tls: Timelines, job: str, pods: int, node_of: list[str], t0: float) -> None:
    tls.on_job(JobState(job, pods, True, False), t0)
    tls.on_workload(WorkloadState(job, False, False, False), t0 + 0.5)
    tls.on_workload(WorkloadState(job, True, False, False), t0 + 1)
    tls.on_workload(WorkloadState(job, True, True, False), t0 + 2)
    tls.on_workload(WorkloadState(job, True, True, True), t0 + 3)
    tls.on_job(JobState(job, pods, False, False), t0 + 4)
    for i in range(pods):
        tls.on_pod(PodState(job, f"{job}-{i}", True, ""), t0 + 5 + i * 0.1)
    for i in range(pods):
        tls.on_pod(PodState(job, f"{job}-{i}", False, ""), t0 + 6)
        tls.on_pod(PodState(job, f"{job}-{i}", False, node_of[i]), t0 + 7 + i)
    tls.on_job(JobState(job, pods, False, True), t0 + 30)


def test_stages_are_reached_when_the_last_pod_reaches_them() -> None:
    tls = Timelines()
    feed(tls, "a", 2, ["n1", "n2"], 100.0)
    at = tls.jobs["a"].at
    assert at == {
        "created": 100,
        "workload_created": 100.5,
        "quota_reserved": 101,
        "check_ready": 102,
        "admitted": 103,
        "unsuspended": 104,
        "pods_created": 105.1,
        "ungated": 106,
        "bound": 108,
    }
    assert tls.finished() == 1


def test_figures_flag_a_required_job_split_across_racks() -> None:
    tls = Timelines()
    feed(tls, "ok", 2, ["n1", "n2"], 0.0)
    feed(tls, "split", 2, ["n1", "n3"], 10.0)
    feed(tls, "pref", 2, ["n1", "n3"], 20.0)
    trace = [JobSpec("ok", 2, "required"), JobSpec("split", 2, "required"), JobSpec("pref", 2, "preferred")]
    fig = figures("tas", trace, tls.jobs, {"n1": "r1", "n2": "r1", "n3": "r2"})
    assert fig.required_jobs == 2 and fig.required_split == ["split: ['r1', 'r2']"]
    assert fig.preferred_racks == {2: 1}
    assert fig.wall_s == 50.0  # first created at 0, last finished at 20 + 30
    assert fig.to_admission[50] == 3.0 and fig.to_bound[99] == 8.0
    assert fig.stages["workload_created->quota_reserved"] == 0.5


def test_an_unfinished_job_is_an_error_not_a_figure() -> None:
    tls = Timelines()
    tls.on_job(JobState("a", 1, True, False), 0.0)
    with pytest.raises(ValueError, match="did not finish"):
        figures("tas", [JobSpec("a", 1, "required")], tls.jobs, {})


def run(variant: str, scale: float) -> RunFigures:
    return RunFigures(
        variant,
        10 * scale,
        {50: 1 * scale, 90: 2 * scale, 99: 3 * scale},
        {50: 2 * scale, 90: 3 * scale, 99: 4 * scale},
        {},
    )


def test_ratios_are_kueue_tas_over_kueue_per_pair() -> None:
    pairs = [(run("kueue", 1.0), run("tas", 0.5)), (run("kueue", 2.0), run("tas", 3.0))]
    ratios = pair_ratios(pairs)
    assert ratios["wall_s"] == [0.5, 1.5] and ratios["bound_p99_s"] == [0.5, 1.5]
    text = table("uncontended", pairs)
    assert "wall_s" in text and "0.50 1.50" in text


def test_watch_states_from_raw_objects() -> None:
    job = {"metadata": {"name": "j"}, "spec": {"parallelism": 4, "suspend": False}, "status": {}}
    assert job_state(job) == JobState("j", 4, False, False)
    wl = {
        "metadata": {"ownerReferences": [{"kind": "Job", "name": "j"}]},
        "status": {
            "conditions": [{"type": "QuotaReserved", "status": "True"}, {"type": "Admitted", "status": "False"}],
            "admissionChecks": [{"name": "ac", "state": "Ready"}],
        },
    }
    assert workload_state(wl) == WorkloadState("j", True, True, False)
    pod = {
        "metadata": {"uid": "u", "labels": {"batch.kubernetes.io/job-name": "j"}},
        "spec": {"schedulingGates": [{"name": "kueue.x-k8s.io/topology"}]},
    }
    assert pod_state(pod) == PodState("j", "u", True, "")


def test_the_floor_check_turns_ready_only_a_pending_entry_after_quota_reservation() -> None:
    def wl(reserved: bool, state: str | None) -> dict[str, Any]:
        status: dict[str, Any] = {"conditions": [{"type": "QuotaReserved", "status": "True" if reserved else "False"}]}
        if state is not None:
            status["admissionChecks"] = [{"name": "ac", "state": state}, {"name": "other", "state": "Pending"}]
        return {"metadata": {"name": "w"}, "status": status}

    assert wants_ready(wl(True, "Pending"), "ac")
    assert not wants_ready(wl(False, "Pending"), "ac")  # no quota yet: Kueue has not asked
    assert not wants_ready(wl(True, "Ready"), "ac")  # written already
    assert not wants_ready(wl(True, None), "ac")  # Kueue has not added the entry
    assert not wants_ready(wl(True, "Pending"), "other-check")
