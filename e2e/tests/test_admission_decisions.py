"""The admitter on the real local cluster, one Workload at a time: the assignment it writes for a
required rack, a preferred rack and a JobSet, with the check entry, gates, Events and metrics
that go with it; malformed requests Rejected; the AdmissionCheck's Active condition.

Every test gets a private pool of kwok nodes (1 block x 2 racks x 2 hosts, 8 GPUs each, so a
rack holds 16 one-GPU pods) and its own Topology/flavor/check/queues, so tests can share the
session's controller group (``tas``) without seeing each other's capacity.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Awaitable, Callable
from typing import Any

from e2e import jobs, workloads
from e2e import stack as st
from e2e.controller import ControllerGroup, parse_metrics
from e2e.kube import KUEUE_GROUP, KUEUE_VERSION, Kube, condition, eventually
from e2e.nodes import GPU, RACK_LABEL
from e2e.pods import GATE, PODSET_LABEL, WORKLOAD_LABEL, pods_of
from e2e.tests.admission_helpers import DECIDED, HOST_GPUS, entry_of, hosts, small_pool, wait_event
from kueue_tas.api.constants import GATED_LABEL as GATED
from kueue_tas.api.constants import HOSTNAME_LABEL


async def bound_pods(kube: Kube, namespace: str, job: str, n: int) -> list[dict[str, Any]]:
    async def all_bound() -> list[dict[str, Any]] | None:
        pods = await pods_of(kube, namespace, f"batch.kubernetes.io/job-name={job}")
        live = [p for p in pods if not p["metadata"].get("deletionTimestamp")]
        return live if len(live) == n and all(p["spec"].get("nodeName") for p in live) else None

    return await eventually(f"{n} pods of Job {job} bound", all_bound, 60)


# --- a. required rack that fits --------------------------------------------------------------


async def test_required_rack_fits_annotation_entry_gate_event_and_pods(
    kube: Kube, namespace: str, unique: str, tas: ControllerGroup
) -> None:
    s = await st.tas_stack(kube, namespace, tas.controller_name, small_pool(unique))
    racks = st.host_racks(s.pool)
    await jobs.create_job(kube, namespace, jobs.job("big", 12, required=RACK_LABEL))
    await jobs.create_job(kube, namespace, jobs.job("small", 4, required=RACK_LABEL))

    big = await workloads.wait_check(kube, s, "big", DECIDED)
    entry = entry_of(big, s)
    assert entry["state"] == "Ready", entry
    assert workloads.assignment(big)["main"]["levels"] == [HOSTNAME_LABEL]  # hostname only, as Kueue writes it
    placed = hosts(big)
    assert sum(placed.values()) == 12
    assert {racks[h] for h in placed} == {next(racks[h] for h in placed)}  # one rack
    assert len(placed) == 2 and all(n <= HOST_GPUS for n in placed.values())  # 12 GPUs need two hosts
    update = workloads.pod_set_updates(entry)["main"]
    assert update["labels"] == {WORKLOAD_LABEL: big["metadata"]["uid"], PODSET_LABEL: "main", GATED: "true"}
    assert not update.get("nodeSelector")  # several domains: the ungater pins each pod
    assert GATE in await jobs.job_gates(kube, namespace, "big")
    event = await wait_event(kube, big, "TopologyAssigned")
    assert event["type"] == "Normal" and "12 pods in 2 domain(s)" in event["note"]

    small = await workloads.wait_check(kube, s, "small", DECIDED)
    entry = entry_of(small, s)
    assert entry["state"] == "Ready", entry
    ((host, count),) = hosts(small).items()
    assert count == 4
    update = workloads.pod_set_updates(entry)["main"]
    # One host, yet gated: a pin in podSetUpdates could never follow a node repair (Kueue keeps
    # podSetUpdates unchanged while admitted), so the ungater pins these pods too, as Kueue's does.
    assert not update.get("nodeSelector")
    assert update["labels"] == {WORKLOAD_LABEL: small["metadata"]["uid"], PODSET_LABEL: "main", GATED: "true"}
    assert GATE in await jobs.job_gates(kube, namespace, "small")
    assert sum(placed[h] for h in placed if h == host) + count <= HOST_GPUS

    await workloads.wait_admitted(kube, s, "big")
    assert Counter(p["spec"]["nodeName"] for p in await bound_pods(kube, namespace, "big", 12)) == placed
    small_pods = await bound_pods(kube, namespace, "small", 4)
    assert {p["spec"]["nodeName"] for p in small_pods} == {host}
    assert all(p["metadata"]["labels"][WORKLOAD_LABEL] == small["metadata"]["uid"] for p in small_pods)


async def test_leader_metrics_show_admissions_and_domain_free(
    kube: Kube, namespace: str, unique: str, tas_factory: Callable[..., Awaitable[ControllerGroup]]
) -> None:
    """With the per-host series asked for (``metrics_hostname_level``; off by default, issue 30:
    at 10,000 nodes they are most of the exposition)."""
    tas = await tas_factory(replicas=1, KUEUE_TAS_METRICS_HOSTNAME_LEVEL="true")
    s = await st.tas_stack(kube, namespace, tas.controller_name, small_pool(unique, "m"))
    await jobs.create_job(kube, namespace, jobs.job("eight", 8, required=RACK_LABEL))
    wl = await workloads.wait_check(kube, s, "eight", DECIDED)
    assert entry_of(wl, s)["state"] == "Ready"
    ((host, _),) = hosts(wl).items()
    leader = await tas.wait_leader()

    def ours(samples: list[tuple[str, dict[str, str], float]]) -> dict[tuple[str, str, str], float]:
        return {
            (lb["level"], lb["domain"], lb["resource"]): v
            for name, lb, v in samples
            if name == "kueue_tas_domain_free" and lb["topology"] == s.topology and lb["flavor"] == s.flavor
        }

    async def published() -> list[tuple[str, dict[str, str], float]] | None:
        samples = parse_metrics(await asyncio.to_thread(leader.metrics))
        free = ours(samples)
        return samples if free.get((HOSTNAME_LABEL, host, GPU)) == 0 else None

    samples = await eventually("domain free published after the admission", published, 20)
    ready = [v for name, lb, v in samples if name == "kueue_tas_admissions_total" and lb["outcome"] == "ready"]
    assert ready and ready[0] > 0
    free = ours(samples)
    assert free[(s.pool.block_label, "b1", GPU)] == 4 * HOST_GPUS - 8
    assert sorted(v for (lvl, _, res), v in free.items() if lvl == RACK_LABEL and res == GPU) == [8, 16]
    assert {d for (lvl, d, _) in free if lvl == HOSTNAME_LABEL} == set(st.host_racks(s.pool))
    lag = {lb["resource"]: v for name, lb, v in samples if name == "kueue_tas_informer_lag_seconds"}
    assert {"pods", "nodes", "workloads.kueue.x-k8s.io"} <= set(lag) and all(v >= 0 for v in lag.values())


# --- c. preferred spreads when no single rack fits --------------------------------------------


async def test_preferred_rack_spreads_over_racks_when_none_fits(
    kube: Kube, namespace: str, unique: str, tas: ControllerGroup
) -> None:
    s = await st.tas_stack(kube, namespace, tas.controller_name, small_pool(unique, "c"))
    await jobs.create_job(kube, namespace, jobs.job("wide", 20, preferred=RACK_LABEL))
    wl = await workloads.wait_check(kube, s, "wide", DECIDED)
    entry = entry_of(wl, s)
    assert entry["state"] == "Ready", entry
    per_rack = workloads.racks_of(wl, "main", st.host_racks(s.pool))
    assert len(per_rack) == 2 and sum(per_rack.values()) == 20
    assert all(n <= HOST_GPUS for n in hosts(wl).values())
    assert GATE in await jobs.job_gates(kube, namespace, "wide")
    assert not workloads.pod_set_updates(entry)["main"].get("nodeSelector")


# --- d. a JobSet with two replicated jobs ------------------------------------------------------


async def test_jobset_two_replicated_jobs_each_placed_and_gated(
    kube: Kube, namespace: str, unique: str, tas: ControllerGroup
) -> None:
    s = await st.tas_stack(kube, namespace, tas.controller_name, small_pool(unique, "d"))
    racks = st.host_racks(s.pool)
    body = jobs.jobset(
        "js",
        [
            ("leader", 1, 1, jobs.pod_template(gpu=1, required=RACK_LABEL)),
            ("workers", 2, 2, jobs.pod_template(gpu=4, required=RACK_LABEL)),  # 16 GPUs: two hosts of a rack
        ],
    )
    await jobs.create_jobset(kube, namespace, body)
    wl = await workloads.wait_check(kube, s, "js", DECIDED, owner_kind="JobSet")
    entry = entry_of(wl, s)
    assert entry["state"] == "Ready", entry
    assert set(workloads.assignment(wl)) == {"leader", "workers"}
    leader, workers = hosts(wl, "leader"), hosts(wl, "workers")
    assert sum(leader.values()) == 1 and len(leader) == 1
    assert sum(workers.values()) == 4 and len(workers) == 2 and set(workers.values()) == {2}
    assert len({racks[h] for h in workers}) == 1
    # The leader's 1 GPU leaves 15 in its rack, so the workers' 16 went to the other one.
    assert {racks[h] for h in leader}.isdisjoint({racks[h] for h in workers})
    updates = workloads.pod_set_updates(entry)
    # Both gated, the one-host leader too (so a node repair can move it): no pin in podSetUpdates.
    assert not updates["leader"].get("nodeSelector") and not updates["workers"].get("nodeSelector")
    for name in ("leader", "workers"):
        assert updates[name]["labels"] == {WORKLOAD_LABEL: wl["metadata"]["uid"], PODSET_LABEL: name, GATED: "true"}
    assert await jobs.jobset_gates(kube, namespace, "js") == {"leader": [GATE], "workers": [GATE]}
    await workloads.wait_admitted(kube, s, "js", owner_kind="JobSet")
    leader_pods = await bound_pods(kube, namespace, "js-leader-0", 1)  # JobSet names its Jobs <js>-<job>-<i>
    assert [p["spec"]["nodeName"] for p in leader_pods] == list(leader)


# --- h. malformed annotations: Rejected, the rest unaffected -----------------------------------


async def test_malformed_annotations_rejected_good_job_still_admitted(
    kube: Kube, namespace: str, unique: str, tas: ControllerGroup
) -> None:
    s = await st.tas_stack(kube, namespace, tas.controller_name, small_pool(unique, "h"))
    bad = {
        "bad-level": {jobs.REQUIRED: "no-such-level"},
        "bad-size": {jobs.SLICE_REQUIRED: RACK_LABEL, jobs.SLICE_SIZE: "abc"},
        "lone-size": {jobs.SLICE_SIZE: "2"},
    }
    for name, ann in bad.items():
        await jobs.create_job(kube, namespace, jobs.job(name, 4, annotations=ann))
    await jobs.create_job(kube, namespace, jobs.job("good", 4, required=RACK_LABEL))

    messages = {}
    for name in bad:
        wl, message = await workloads.wait_rejected(kube, s, name)
        messages[name] = message

        async def deactivated(name: str = name) -> bool:  # Kueue deactivates what our check rejects
            wl = await workloads.workload_of(kube, namespace, name)
            return wl is not None and wl["spec"].get("active") is False

        await eventually(f"Workload of {name} deactivated", deactivated, 20)
        assert workloads.ASSIGNMENT_ANNOTATION not in (wl["metadata"].get("annotations") or {})
        assert GATE not in await jobs.job_gates(kube, namespace, name)
        event = await wait_event(kube, wl, "TopologyRequestRejected")
        assert event["type"] == "Warning" and event["note"] in message, (event["note"], message)
    levels = ", ".join(s.levels)
    assert 'unknown topology level "no-such-level"' in messages["bad-level"], messages
    assert f'Topology "{s.topology}" has levels {levels}' in messages["bad-level"], messages
    assert jobs.SLICE_SIZE in messages["bad-size"] and "abc" in messages["bad-size"], messages
    assert "must be a numeric value" in messages["bad-size"], messages
    assert jobs.SLICE_SIZE in messages["lone-size"] and jobs.SLICE_REQUIRED in messages["lone-size"], messages

    good = await workloads.wait_check(kube, s, "good", DECIDED)
    assert entry_of(good, s)["state"] == "Ready"
    assert sum(hosts(good).values()) == 4
    await workloads.wait_admitted(kube, s, "good")


# --- i. the AdmissionCheck's Active condition ---------------------------------------------------


async def test_admission_check_active_follows_its_topology(
    kube: Kube, namespace: str, unique: str, tas: ControllerGroup
) -> None:
    s = await st.tas_stack(kube, namespace, tas.controller_name, small_pool(unique, "i"))

    async def active(name: str, status: str) -> dict[str, Any] | None:
        ac = await kube.get_cluster_object(KUEUE_GROUP, KUEUE_VERSION, "admissionchecks", name)
        cond = condition(ac, "Active")
        return cond if cond and cond["status"] == status else None

    cond = await eventually("stack check Active", lambda: active(s.check, "True"), 20)
    assert cond["reason"] == "Active" and s.topology in cond["message"]

    check, topology = f"ac-late-{unique}", f"topo-late-{unique}"
    await kube.create_admission_check(
        check, tas.controller_name, {"apiGroup": KUEUE_GROUP, "kind": "Topology", "name": topology}
    )
    cond = await eventually("check Inactive without its Topology", lambda: active(check, "False"), 20)
    assert cond["reason"] == "TopologyNotFound" and f'"{topology}"' in cond["message"], cond

    await kube.create_topology(topology, s.levels)
    cond = await eventually("check Active once its Topology exists", lambda: active(check, "True"), 20)
    assert cond["reason"] == "Active"
