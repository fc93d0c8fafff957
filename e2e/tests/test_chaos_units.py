"""The chaos campaign's pieces that need no cluster: plans, their log round trip, the manifests
they submit, the TCP relay's sever, and the end-of-run verdict."""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from kubernetes_asyncio.client.exceptions import ApiException

from e2e import jobs
from e2e.chaos import submit
from e2e.chaos.faults import topology_recreate
from e2e.chaos.job_backoff import backoff_s
from e2e.chaos.relay import Relay
from e2e.chaos.run import EventLog, read_plan
from e2e.chaos.scenario import BURST, BURST_SIZE, FAULTS, GPUS_PER_HOST, POOL_SHAPE, plan_run
from e2e.chaos.verdict import failed_jobs, judge
from e2e.nodes import NodePool
from kueue_tas.api import constants as kc

POOL = NodePool(name="p", blocks=POOL_SHAPE[0], racks_per_block=POOL_SHAPE[1], hosts_per_rack=POOL_SHAPE[2])
CAPACITY = {"host": GPUS_PER_HOST, "rack": GPUS_PER_HOST * POOL_SHAPE[2]}
CAPACITY["block"] = CAPACITY["rack"] * POOL_SHAPE[1]


def submissions(seed: int) -> list[dict[str, Any]]:
    out = []
    for a in plan_run(seed, 55):
        if a.kind == "submit":
            out.append(a.args)
        elif a.kind == BURST:
            out += a.args["submissions"]
    return out


def test_a_seed_gives_one_plan_and_seeds_differ() -> None:
    assert plan_run(7, 55) == plan_run(7, 55)
    assert plan_run(7, 55) != plan_run(8, 55)
    plan = plan_run(7, 55)
    assert [a.t for a in plan] == sorted(a.t for a in plan)
    assert all(0 <= a.t < 55 for a in plan)


def test_every_fault_type_is_drawn_and_one_burst_per_run() -> None:
    kinds: Counter[str] = Counter()
    for seed in range(20):
        plan = plan_run(seed, 55)
        kinds.update(a.kind for a in plan)
        bursts = [a for a in plan if a.kind == BURST]
        assert len(bursts) == 1 and len(bursts[0].args["submissions"]) == BURST_SIZE
    assert set(FAULTS) <= set(kinds), kinds
    only = plan_run(3, 55, faults=("watch_cut",))
    assert {a.kind for a in only} == {"submit", "watch_cut"}


def test_submissions_fit_their_domain_unless_planned_not_to() -> None:
    seen_modes: Counter[str] = Counter()
    for seed in range(10):
        for spec in submissions(seed):
            seen_modes[f"{spec['workload']}:{spec['mode']}"] += 1
            gpus = spec["gpu"] * submit.pods_of(spec)
            bounded = spec["mode"] in ("required", "slices", "group")
            limit = CAPACITY[spec["level"]] if bounded else CAPACITY["block"] * 2
            if spec.get("never_fits"):
                assert gpus > CAPACITY[spec["level"]], spec
            else:
                assert gpus <= limit, spec
            if spec["mode"] == "slices":
                assert spec["pods"] % spec["slice_size"] == 0, spec
            if spec["mode"] == "group":
                assert spec["replicated"][0][1:] == [1, 1], spec  # the single-pod leader a group needs
    for mode in ("required", "preferred", "unconstrained", "implied", "slices"):
        assert seen_modes[f"job:{mode}"], seen_modes
    for mode in ("required", "preferred", "group", "unconstrained"):
        assert seen_modes[f"jobset:{mode}"], seen_modes


def test_manifests_carry_the_planned_topology_request() -> None:
    spec = {
        "name": "s",
        "workload": "job",
        "mode": "slices",
        "level": "block",
        "slice_level": "rack",
        "slice_size": 4,
        "pods": 8,
        "gpu": 1,
        "indexed": True,
        "run_for": "2s",
    }
    ann = submit.manifest(spec, POOL)["spec"]["template"]["metadata"]["annotations"]
    assert ann[jobs.REQUIRED] == POOL.block_label
    assert ann[jobs.SLICE_REQUIRED] == POOL.rack_label
    assert ann[jobs.SLICE_SIZE] == "4"
    group = {
        "name": "g",
        "workload": "jobset",
        "mode": "group",
        "level": "rack",
        "gpu": 1,
        "run_for": "2s",
        "replicated": [["a", 1, 1], ["b", 2, 3]],
    }
    body = submit.manifest(group, POOL)
    rjs = body["spec"]["replicatedJobs"]
    assert [rj["template"]["spec"]["backoffLimit"] for rj in rjs] == [6, 6]
    for rj in rjs:
        tmpl_ann = rj["template"]["spec"]["template"]["metadata"]["annotations"]
        assert tmpl_ann[jobs.PREFIX + kc.SUFFIX_GROUP_NAME] == "g" and tmpl_ann[jobs.REQUIRED] == POOL.rack_label
    assert submit.pods_of(group) == 7


def test_event_log_round_trips_the_plan(tmp_path: Path) -> None:
    plan = plan_run(11, 30)
    log = EventLog(tmp_path / "run.jsonl")
    log.write({"type": "run", "seed": 11, "duration_s": 30})
    for a in plan:
        log.write(a.to_json())
    log.write({"type": "outcome", "t": 1.0, "kind": "submit", "result": "x"})
    log.close()
    header, actions = read_plan(tmp_path / "run.jsonl")
    assert header["seed"] == 11 and actions == plan
    (tmp_path / "bad.jsonl").write_text(json.dumps(plan[0].to_json()) + "\n")
    with pytest.raises(ValueError, match="no run header"):
        read_plan(tmp_path / "bad.jsonl")


async def test_relay_forwards_and_sever_cuts_open_connections() -> None:
    async def echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while data := await reader.read(1024):
            writer.write(data)
            await writer.drain()
        writer.close()

    server = await asyncio.start_server(echo, "127.0.0.1", 0)
    relay = Relay("127.0.0.1", int(server.sockets[0].getsockname()[1]))
    port = await relay.start()
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"ping")
        assert await asyncio.wait_for(reader.read(4), 5) == b"ping"
        assert relay.sever(block_s=0.5) == 1
        assert await asyncio.wait_for(reader.read(4), 5) == b""  # the client sees its connection end
        writer.close()
        r2, w2 = await asyncio.open_connection("127.0.0.1", port)  # refused while blocked
        assert await asyncio.wait_for(r2.read(4), 5) == b""
        w2.close()
        await asyncio.sleep(0.6)
        r3, w3 = await asyncio.open_connection("127.0.0.1", port)
        w3.write(b"pong")
        assert await asyncio.wait_for(r3.read(4), 5) == b"pong"
        w3.close()
    finally:
        await relay.stop()
        server.close()
        await server.wait_closed()
    assert relay.severed >= 1 and relay.connections == 3


def wl(name: str, kind: str, conds: dict[str, str], entry: tuple[str, str] | None) -> dict[str, Any]:
    status: dict[str, Any] = {
        "conditions": [{"type": t, "status": "True", "reason": r} for t, r in conds.items()],
    }
    if entry:
        status["admissionChecks"] = [{"name": "ac", "state": entry[0], "message": entry[1]}]
    return {"metadata": {"name": f"wl-{name}", "ownerReferences": [{"kind": kind, "name": name}]}, "status": status}


def test_verdict_accepts_finished_or_pending_with_a_message_only() -> None:
    job: dict[str, Any] = {"workload": "job"}
    submitted: dict[str, dict[str, Any]] = {n: job for n in ("done", "waiting", "running", "silent", "missing")}
    submitted["js"] = {"workload": "jobset"}
    submitted["huge"] = {"workload": "job", "never_fits": True}
    workloads = [
        wl("done", "Job", {"Admitted": "Admitted", "Finished": "Succeeded"}, ("Ready", "ok")),
        wl("waiting", "Job", {"QuotaReserved": "QuotaReserved"}, ("Retry", "does not fit")),
        wl("running", "Job", {"Admitted": "Admitted"}, ("Ready", "assigned")),
        wl("silent", "Job", {"QuotaReserved": "QuotaReserved"}, ("Pending", "")),
        wl("js", "JobSet", {"Finished": "Succeeded"}, ("Ready", "ok")),
        wl("huge", "Job", {"Finished": "Succeeded"}, ("Ready", "ok")),
    ]
    v = judge(workloads, submitted, "ac")
    assert v.outcomes == Counter({"finished (Succeeded)": 3, "pending with a message (Retry)": 1})
    assert [p.split(":")[0] for p in v.problems] == [
        "Job huge can never fit, yet it ran and finished",
        "Job missing",
        "Job running",
        "Job silent",
    ]


def test_a_job_past_its_backoff_limit_has_ended_before_the_job_controller_says_so() -> None:
    """Chaos seed 5060: the Job controller, behind after three apiserver restarts, had not marked
    a Job with 10 failed pods of backoffLimit 6 Failed 7 minutes on; Kueue finishes its Workload
    only then. Its own counts say it ended; a per-index limit counts otherwise."""
    jobs = [
        {"metadata": {"name": "over"}, "spec": {}, "status": {"failed": 7}},
        {"metadata": {"name": "at"}, "spec": {}, "status": {"failed": 6}},
        {"metadata": {"name": "own"}, "spec": {"backoffLimit": 1}, "status": {"failed": 2}},
        {"metadata": {"name": "indexed"}, "spec": {"backoffLimitPerIndex": 1}, "status": {"failed": 9}},
    ]
    assert failed_jobs(jobs) == {"over", "own"}
    submitted: dict[str, dict[str, Any]] = {n: {"workload": "job"} for n in ("over", "at")}
    submitted["huge"] = {"workload": "job", "never_fits": True}
    admitted = {"Admitted": "Admitted"}
    workloads = [wl("over", "Job", admitted, ("Ready", "ok")), wl("at", "Job", admitted, ("Ready", "ok"))]
    workloads.append(wl("huge", "Job", admitted, ("Ready", "ok")))
    v = judge(workloads, submitted, "ac", failed={"over", "huge"})
    assert v.outcomes == Counter({"failed (backoffLimit exceeded)": 2})
    assert [p.split(":")[0] for p in v.problems] == ["Job at", "Job huge can never fit, yet it ran and failed"]


class _Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def monotonic(self) -> float:
        return self.t

    async def sleep(self, s: float) -> None:
        self.t += s


def _job_dict(job: SimpleNamespace) -> dict[str, Any]:
    return {"metadata": {"name": job.metadata.name}, "spec": {}, "status": {"failed": job.status.failed}}


class _Workloads:
    """A cluster whose Workloads follow a script: the i-th list is returned on the i-th read;
    its Jobs report ``failed`` (Job name -> ``status.failed``) throughout."""

    def __init__(self, script: list[list[dict[str, Any]]], failed: dict[str, int] | None = None) -> None:
        self.script, self.reads = script, 0
        items = [
            SimpleNamespace(metadata=SimpleNamespace(name=n), status=SimpleNamespace(failed=f))
            for n, f in (failed or {}).items()
        ]
        self.batch = SimpleNamespace(list_namespaced_job=self._jobs)
        self.api = SimpleNamespace(sanitize_for_serialization=_job_dict)
        self._items = items

    async def _jobs(self, namespace: str) -> SimpleNamespace:
        return SimpleNamespace(items=self._items)

    async def workloads(self, namespace: str) -> list[dict[str, Any]]:
        self.reads += 1
        return self.script[min(self.reads, len(self.script)) - 1]


def _settle_run(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    script: list[list[dict[str, Any]]],
    failed: dict[str, int] | None = None,
) -> dict[str, Any]:
    from e2e.chaos import run as chaos_run
    from e2e.chaos.run import ChaosRun, Options

    clock = _Clock()
    monkeypatch.setattr(chaos_run, "time", SimpleNamespace(monotonic=clock.monotonic))
    monkeypatch.setattr(chaos_run, "asyncio", SimpleNamespace(sleep=clock.sleep))
    r = ChaosRun(None, 1, [], Options(settle_s=10, settle_cap_s=100), tmp_path / "log.jsonl")  # type: ignore[arg-type]
    r.submitted = {n: {"workload": "job"} for n in ("a", "b")}
    asyncio.run(r._settle(_Workloads(script, failed), "ac"))  # type: ignore[arg-type]
    lines = [json.loads(x) for x in (tmp_path / "log.jsonl").read_text().splitlines()]
    return next(x for x in lines if x["type"] == "verdict")


RUNNING = {"Admitted": "Admitted"}
DONE = {"Admitted": "Admitted", "Finished": "Succeeded"}


def test_settle_waits_past_its_window_while_workloads_progress(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Chaos seed 252: a backlog that drains slowly but steadily is waited for, not failed."""
    slow = [[wl("a", "Job", RUNNING, ("Ready", "x")), wl("b", "Job", RUNNING, ("Ready", "x"))]] * 8
    slow += [[wl("a", "Job", DONE, ("Ready", "x")), wl("b", "Job", RUNNING, ("Ready", "x"))]] * 8
    slow += [[wl("a", "Job", DONE, ("Ready", "x")), wl("b", "Job", DONE, ("Ready", "x"))]]
    v = _settle_run(tmp_path, monkeypatch, slow)
    assert v["ended"] == "ok" and v["problems"] == [] and v["settle_s"] > 10


def test_settle_gives_up_when_nothing_moves_and_at_its_cap(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    stuck = [[wl("a", "Job", DONE, ("Ready", "x")), wl("b", "Job", RUNNING, ("Ready", "x"))]]
    v = _settle_run(tmp_path, monkeypatch, stuck)
    assert v["ended"] == "stalled" and len(v["problems"]) == 1 and 10 < v["settle_s"] < 13
    flapping = [
        [wl("a", "Job", DONE, ("Ready", "x")), wl("b", "Job", RUNNING, ("Ready", f"try {i}"))] for i in range(500)
    ]
    (tmp_path / "f").mkdir()
    v = _settle_run(tmp_path / "f", monkeypatch, flapping)
    assert v["ended"] == "cap" and 100 < v["settle_s"] < 103


def test_settle_waits_out_the_job_controllers_failure_backoff(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Chaos seed 828: six pods of Job w4 deleted -> the Job controller waits 320 s before
    creating them again, nothing changes meanwhile; that is not a stuck workload."""
    assert [backoff_s(n) for n in (0, 1, 2, 3, 6, 7, 40)] == [0, 10, 20, 40, 320, 360, 360]
    waits = [[wl("a", "Job", DONE, ("Ready", "x")), wl("b", "Job", RUNNING, ("Ready", "x"))]] * 45
    waits += [[wl("a", "Job", DONE, ("Ready", "x")), wl("b", "Job", DONE, ("Ready", "x"))]]
    v = _settle_run(tmp_path, monkeypatch, waits, failed={"a": 0, "b": 3})  # 40 s of back-off
    assert v["ended"] == "ok" and 44 < v["settle_s"] < 48
    (tmp_path / "s").mkdir()
    v = _settle_run(tmp_path / "s", monkeypatch, waits, failed={"a": 0, "b": 2})  # 20 s, then 10 s
    assert v["ended"] == "stalled" and 30 < v["settle_s"] < 33


def test_a_failed_run_keeps_its_logs_and_objects_even_when_a_read_fails(tmp_path: Path) -> None:
    """Seeds 653 and 832 could not be diagnosed: their namespace and replica logs were gone."""
    from e2e.chaos import evidence

    log = tmp_path / "e2e-abc-0.log"
    log.write_text('{"event": "ungated"}\n')

    async def pods(namespace: str) -> dict[str, Any]:
        return {"items": [{"metadata": {"name": "p", "namespace": namespace}}]}

    async def down(*_: Any) -> Any:
        raise OSError("connection refused")

    kube = SimpleNamespace(
        api=SimpleNamespace(sanitize_for_serialization=lambda o: o),
        core=SimpleNamespace(list_namespaced_pod=pods, list_namespaced_event=down),
        batch=SimpleNamespace(list_namespaced_job=pods),
        custom=SimpleNamespace(list_namespaced_custom_object=down),
    )
    dest = tmp_path / "run-1.evidence"
    missed = asyncio.run(evidence.keep(kube, "ns", [log, tmp_path / "gone.log"], dest))  # type: ignore[arg-type]
    assert (dest / "e2e-abc-0.log").read_text() == '{"event": "ungated"}\n'
    assert json.loads((dest / "pods.json").read_text())["items"][0]["metadata"]["namespace"] == "ns"
    assert (dest / "jobs.json").exists() and not (dest / "events.json").exists()
    assert [m.split(":")[0] for m in missed] == [str(tmp_path / "gone.log"), "events", "workloads"]


def test_the_new_faults_are_drawn_with_bounded_arguments() -> None:
    seen: dict[str, list[dict[str, Any]]] = {}
    for seed in range(40):
        for a in plan_run(seed, 55):
            seen.setdefault(a.kind, []).append(a.args)
    for kind in ("workload_deactivate", "host_cordon", "topology_recreate"):
        assert seen.get(kind), f"{kind} never drawn in 40 seeds"
    assert all(0 <= a["seconds"] <= 4 for a in seen["workload_deactivate"])
    assert any(a["seconds"] < 1 for a in seen["workload_deactivate"])  # races with our writes
    assert all(3 <= a["seconds"] <= 10 for a in seen["host_cordon"])
    assert all(2 <= a["seconds"] <= 6 for a in seen["topology_recreate"])


def test_a_renamed_profile_moves_every_topology_key_and_mixed_is_drawn_per_seed() -> None:
    from e2e.chaos.profile import DEFAULT, MIXED, RENAMED, profile_for

    for spec in submissions(5):
        body = submit.manifest(spec, POOL, RENAMED)
        templates = (
            [body["spec"]["template"]]
            if body["kind"] == "Job"
            else [rj["template"]["spec"]["template"] for rj in body["spec"]["replicatedJobs"]]
        )
        for tmpl in templates:
            keys = [k for k in (tmpl["metadata"].get("annotations") or {}) if "topology" in k or "slice" in k]
            assert all(k.startswith(RENAMED.annotation_prefix) for k in keys), keys
    assert RENAMED.env()["KUEUE_TAS_SCHEDULING_GATE"] == RENAMED.scheduling_gate
    assert RENAMED.node_name_suffix and not DEFAULT.node_name_suffix  # EKS-like Node names
    drawn = [profile_for(seed, MIXED) for seed in range(60)]
    assert drawn == [profile_for(seed, MIXED) for seed in range(60)]
    assert sum(p is RENAMED for p in drawn) == 20 and DEFAULT in drawn
    assert {profile_for(seed, MIXED).name for seed in (7, 8, 9)} == {"default", "renamed"}
    assert profile_for(3, "renamed") is RENAMED


def test_the_big_jobs_profile_prioritises_big_submissions_and_turns_the_features_on() -> None:
    from e2e.chaos.profile import BIG_GPUS, BIG_JOBS, MIXED, profile_for
    from e2e.stack import PRIORITY_LABEL

    classes = []
    for spec in submissions(8):
        body = submit.manifest(spec, POOL, BIG_JOBS)
        big = submit.pods_of(spec) * int(spec["gpu"]) >= BIG_GPUS
        label = body["metadata"]["labels"][PRIORITY_LABEL]
        assert label == f"{'high' if big else 'low'}-{POOL.name}", (spec, label)
        classes.append(label.split("-")[0])
    assert {"high", "low"} <= set(classes), classes  # both sides of a preemption are submitted
    env = BIG_JOBS.env()
    assert float(env["KUEUE_TAS_RESERVATION_AFTER_SECONDS"]) > 0
    assert env["KUEUE_TAS_ANNOTATION_PREFIX"] != "kueue-tas.io/"
    assert BIG_JOBS.node_name_suffix
    drawn = [profile_for(seed, MIXED).name for seed in range(120)]
    assert drawn.count("big-jobs") == 20 and drawn.count("renamed") == 40
    assert [profile_for(seed, MIXED).name for seed in (1, 2, 3)] == ["big-jobs", "default", "renamed"]  # the smoke


class _TopologyStore:
    """One cluster-scoped Topology with create/read/delete as the API answers them."""

    def __init__(self, levels: list[dict[str, str]]) -> None:
        self.levels: list[dict[str, str]] | None = levels

    async def get_cluster_custom_object(self, group: str, version: str, plural: str, name: str) -> dict[str, Any]:
        if self.levels is None:
            raise ApiException(status=404, reason="NotFound")
        return {"spec": {"levels": [dict(lv) for lv in self.levels]}}

    async def delete_cluster_custom_object(self, group: str, version: str, plural: str, name: str) -> None:
        if self.levels is None:
            raise ApiException(status=404, reason="NotFound")
        self.levels = None

    async def create_cluster_custom_object(self, group: str, version: str, plural: str, body: Any) -> None:
        if self.levels is not None:
            raise ApiException(status=409, reason="AlreadyExists")
        self.levels = [dict(lv) for lv in body["spec"]["levels"]]


async def test_overlapping_topology_recreates_restore_the_original_levels() -> None:
    """Chaos seed 3005 drew two re-levellings 3.6 s apart: the second read the Topology while the
    first held it deleted or re-levelled. Each must read under the lock and restore the original."""
    original = [{"nodeLabel": "block"}, {"nodeLabel": "rack"}, {"nodeLabel": "kubernetes.io/hostname"}]
    store = _TopologyStore(original)
    rig = SimpleNamespace(topology="tas", topology_lock=asyncio.Lock(), kube=SimpleNamespace(custom=store))
    first = asyncio.create_task(topology_recreate(rig, {"seconds": 0.3}))  # type: ignore[arg-type]
    await asyncio.sleep(0.1)
    second = asyncio.create_task(topology_recreate(rig, {"seconds": 0.1}))  # type: ignore[arg-type]
    said = await asyncio.gather(first, second)
    assert all("restored" in s for s in said)
    assert store.levels == original
