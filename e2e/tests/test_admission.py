"""The admitter on the real local cluster: assignments, refusals, capacity, restarts, metrics.

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
from e2e.kube import KUEUE_GROUP, KUEUE_VERSION, Kube, condition, consistently, content_type, eventually
from e2e.nodes import GPU, RACK_LABEL, NodePool
from e2e.pods import GATE, PODSET_LABEL, WORKLOAD_LABEL, create_bound_pod, pods_of
from kueue_tas.api.constants import HOSTNAME_LABEL

DECIDED = ("Ready", "Retry", "Rejected")
HOST_GPUS = 8


def small_pool(unique: str, prefix: str = "a") -> NodePool:
    return NodePool(name=f"{prefix}{unique}", blocks=1, racks_per_block=2, hosts_per_rack=2)


def entry_of(wl: dict[str, Any], s: st.TasStack) -> dict[str, Any]:
    entry = workloads.check_entry(wl, s.check)
    assert entry is not None, wl.get("status")
    return entry


async def events_of(kube: Kube, wl: dict[str, Any], reason: str) -> list[dict[str, Any]]:
    return [
        e
        for e in await workloads.events_for(kube, wl["metadata"]["namespace"], wl["metadata"]["name"])
        if e.get("reason") == reason
    ]


async def wait_event(kube: Kube, wl: dict[str, Any], reason: str) -> dict[str, Any]:
    async def found() -> dict[str, Any] | None:
        events = await events_of(kube, wl, reason)
        return events[0] if events else None

    return await eventually(f"{reason} Event on Workload {wl['metadata']['name']}", found, 20)


async def bound_pods(kube: Kube, namespace: str, job: str, n: int) -> list[dict[str, Any]]:
    async def all_bound() -> list[dict[str, Any]] | None:
        pods = await pods_of(kube, namespace, f"batch.kubernetes.io/job-name={job}")
        live = [p for p in pods if not p["metadata"].get("deletionTimestamp")]
        return live if len(live) == n and all(p["spec"].get("nodeName") for p in live) else None

    return await eventually(f"{n} pods of Job {job} bound", all_bound, 60)


def hosts(wl: dict[str, Any], podset: str = "main") -> Counter[str]:
    return Counter({values[-1]: n for values, n in workloads.domain_counts(wl, podset).items()})


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
    assert update["labels"] == {WORKLOAD_LABEL: big["metadata"]["uid"], PODSET_LABEL: "main"}
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
    assert update["nodeSelector"] == {HOSTNAME_LABEL: host}  # one domain: pinned through podSetUpdates
    assert update["labels"] == {WORKLOAD_LABEL: small["metadata"]["uid"], PODSET_LABEL: "main"}
    assert GATE not in await jobs.job_gates(kube, namespace, "small")
    assert sum(placed[h] for h in placed if h == host) + count <= HOST_GPUS

    await workloads.wait_admitted(kube, s, "big")
    assert Counter(p["spec"]["nodeName"] for p in await bound_pods(kube, namespace, "big", 12)) == placed
    small_pods = await bound_pods(kube, namespace, "small", 4)
    assert {p["spec"]["nodeName"] for p in small_pods} == {host}
    assert all(p["metadata"]["labels"][WORKLOAD_LABEL] == small["metadata"]["uid"] for p in small_pods)


async def test_leader_metrics_show_admissions_and_domain_free(
    kube: Kube, namespace: str, unique: str, tas: ControllerGroup
) -> None:
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


# --- b. no fit now: Retry, explained; fits once a node is added ------------------------------


async def test_no_fit_retries_with_explanation_then_admitted_after_node_added(
    kube: Kube, namespace: str, unique: str, tas: ControllerGroup
) -> None:
    s = await st.tas_stack(kube, namespace, tas.controller_name, small_pool(unique, "b"))
    racks = st.host_racks(s.pool)
    fill_racks = []
    for name in ("fill-1", "fill-2"):  # 10 GPUs in each rack: 6 left per rack
        await jobs.create_job(kube, namespace, jobs.job(name, 10, required=RACK_LABEL))
        wl = await workloads.wait_check(kube, s, name, DECIDED)
        assert entry_of(wl, s)["state"] == "Ready"
        fill_racks.append({racks[h] for h in hosts(wl)})
    assert fill_racks[0] != fill_racks[1] and all(len(r) == 1 for r in fill_racks)

    await jobs.create_job(kube, namespace, jobs.job("wait", 8, required=RACK_LABEL))
    wl = await workloads.wait_check(kube, s, "wait", ("Retry", "Ready", "Rejected"))
    entry = entry_of(wl, s)
    assert entry["state"] == "Retry", entry
    message = entry["message"]
    assert f'topology "{s.topology}" allows to fit only 6 out of 8 pod(s)' in message, message
    assert "Total nodes: 4; excluded: " in message and f'resource "{GPU}"' in message, message
    assert entry.get("requeueAfterSeconds", 0) > 0
    assert workloads.ASSIGNMENT_ANNOTATION not in (wl["metadata"].get("annotations") or {})
    event = await wait_event(kube, wl, "TopologyNotFitting")
    assert event["type"] == "Warning" and "allows to fit only 6 out of 8" in event["note"]

    new_host = await st.add_node(kube, s.pool, 1, 1, 3)
    racks[new_host] = "b1-r1"
    wl = await workloads.wait_check(kube, s, "wait", ("Ready", "Rejected"), timeout_s=45)
    assert entry_of(wl, s)["state"] == "Ready"
    assert workloads.racks_of(wl, "main", racks) == {"b1-r1": 8}
    assert new_host in hosts(wl)


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


async def test_jobset_two_replicated_jobs_each_placed_gate_only_where_multi_domain(
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
    assert updates["leader"]["nodeSelector"] == {HOSTNAME_LABEL: next(iter(leader))}
    assert not updates["workers"].get("nodeSelector")
    for name in ("leader", "workers"):
        assert updates[name]["labels"] == {WORKLOAD_LABEL: wl["metadata"]["uid"], PODSET_LABEL: name}
    assert await jobs.jobset_gates(kube, namespace, "js") == {"leader": [], "workers": [GATE]}
    await workloads.wait_admitted(kube, s, "js", owner_kind="JobSet")


# --- e. pods outside the queue reduce what fits -----------------------------------------------


async def test_daemonset_like_pods_are_subtracted(
    kube: Kube, namespace: str, unique: str, tas: ControllerGroup
) -> None:
    s = await st.tas_stack(kube, namespace, tas.controller_name, small_pool(unique, "e"))
    for rack in (1, 2):
        await create_bound_pod(kube, namespace, f"ds-r{rack}", f"{s.pool.name}-b1-r{rack}-h1", gpu=1)
    # 16 one-GPU pods fill an empty rack exactly; with one GPU taken in each rack none fits.
    await jobs.create_job(kube, namespace, jobs.job("full-rack", 16, required=RACK_LABEL))
    wl = await workloads.wait_check(kube, s, "full-rack", DECIDED)
    entry = entry_of(wl, s)
    assert entry["state"] == "Retry", entry  # not Rejected: it fits on the empty topology
    assert "allows to fit only 15 out of 16 pod(s)" in entry["message"], entry["message"]

    await kube.core.delete_namespaced_pod("ds-r2", namespace, grace_period_seconds=0)
    wl = await workloads.wait_check(kube, s, "full-rack", ("Ready", "Rejected"), timeout_s=45)
    assert entry_of(wl, s)["state"] == "Ready"
    assert workloads.racks_of(wl, "main", st.host_racks(s.pool)) == {"b1-r2": 16}


# --- f. no double booking ----------------------------------------------------------------------


async def test_concurrent_jobs_never_share_a_rack_and_the_third_waits(
    kube: Kube, namespace: str, unique: str, tas: ControllerGroup
) -> None:
    s = await st.tas_stack(kube, namespace, tas.controller_name, small_pool(unique, "f"))
    racks = st.host_racks(s.pool)
    names = ("r-1", "r-2", "r-3")
    await asyncio.gather(*(jobs.create_job(kube, namespace, jobs.job(n, 16, required=RACK_LABEL)) for n in names))
    wls = {n: await workloads.wait_check(kube, s, n, DECIDED) for n in names}
    states = {n: entry_of(wl, s)["state"] for n, wl in wls.items()}
    ready = sorted(n for n, state in states.items() if state == "Ready")
    assert len(ready) == 2, states
    (waiting,) = set(names) - set(ready)
    assert states[waiting] == "Retry", states
    assert "doesn't allow to fit any of 16 pod(s)" in entry_of(wls[waiting], s)["message"]
    held = [workloads.racks_of(wls[n], "main", racks) for n in ready]
    assert held[0].keys() != held[1].keys() and all(list(h.values()) == [16] for h in held)

    async def still_waiting() -> bool:
        wl = await workloads.workload_of(kube, namespace, waiting)
        return wl is not None and (workloads.check_entry(wl, s.check) or {}).get("state") != "Ready"

    await consistently(f"{waiting} not admitted while both racks are held", still_waiting, 4)

    freed = ready[0]
    await jobs.delete_job(kube, namespace, freed)
    await workloads.wait_workload_gone(kube, namespace, freed)
    wl = await workloads.wait_check(kube, s, waiting, ("Ready", "Rejected"), timeout_s=45)
    assert entry_of(wl, s)["state"] == "Ready"
    assert workloads.racks_of(wl, "main", racks) == held[0]


# --- g. controller restart mid-way -------------------------------------------------------------


async def test_restart_mid_way_double_books_nothing(
    kube: Kube, namespace: str, unique: str, tas_factory: Callable[..., Awaitable[ControllerGroup]]
) -> None:
    group = await tas_factory(replicas=1)
    s = await st.tas_stack(kube, namespace, group.controller_name, small_pool(unique, "g"))
    racks = st.host_racks(s.pool)
    # Each job takes one whole host (8 x 1 GPU in one rack): 4 hosts hold exactly 4 of the 5.
    before: dict[str, dict[str, Any]] = {}
    for name in ("j1", "j2"):
        await jobs.create_job(kube, namespace, jobs.job(name, 8, required=RACK_LABEL))
        before[name] = await workloads.wait_check(kube, s, name, DECIDED)
        assert entry_of(before[name], s)["state"] == "Ready"

    await jobs.create_job(kube, namespace, jobs.job("j3", 8, required=RACK_LABEL))
    await workloads.wait_check(kube, s, "j3", ("Pending", *DECIDED))  # quota reserved: the decision may be in flight
    group.processes[0].kill()
    for name in ("j4", "j5"):
        await jobs.create_job(kube, namespace, jobs.job(name, 8, required=RACK_LABEL))
    # What a crash between the annotation write and the Ready entry leaves behind: an assignment
    # on a Workload whose entry is Pending. It must not hold capacity (here: every host).
    j4 = await workloads.wait_check(kube, s, "j4", ("Pending",))
    await stale_assignment(kube, j4, list(racks))

    await group.restart(group.processes[0])
    await group.wait_leader()
    names = ("j1", "j2", "j3", "j4", "j5")

    async def all_decided() -> dict[str, dict[str, Any]] | None:
        out: dict[str, dict[str, Any]] = {}
        for n in names:
            wl = await workloads.workload_of(kube, namespace, n)
            if wl is None:
                return None
            entry = workloads.check_entry(wl, s.check)
            if not entry or entry.get("state") not in ("Ready", "Retry"):
                return None
            out[n] = wl
        return out

    wls = await eventually("every job Ready or Retry after the restart", all_decided, 60)
    ready = [n for n in names if entry_of(wls[n], s)["state"] == "Ready"]
    assert len(ready) == 4, {n: entry_of(wls[n], s) for n in names}  # 4 hosts, one host each
    for name in ("j1", "j2"):  # admitted before the kill: kept as they were
        assert workloads.assignment(wls[name]) == workloads.assignment(before[name])
    per_host: Counter[str] = Counter()
    for n in ready:
        assert sum(hosts(wls[n]).values()) == 8
        per_host.update(hosts(wls[n]))
    assert all(per_host[h] <= HOST_GPUS for h in per_host), per_host
    per_rack: Counter[str] = Counter()
    for h, count in per_host.items():
        per_rack[racks[h]] += count
    assert all(v <= 2 * HOST_GPUS for v in per_rack.values()), per_rack
    assert sum(per_host.values()) == 4 * HOST_GPUS
    (retry,) = set(names) - set(ready)
    assert "doesn't allow to fit any of 8 pod(s)" in entry_of(wls[retry], s)["message"]


async def stale_assignment(kube: Kube, wl: dict[str, Any], hostnames: list[str]) -> None:
    """Write an assignment annotation claiming every host (8 pods each) on a Workload."""
    from kueue_tas.topology.assignment import DomainAssignment, TopologyAssignment
    from kueue_tas.topology.codec import encode_assignment_annotation

    claim = TopologyAssignment((HOSTNAME_LABEL,), tuple(DomainAssignment((h,), HOST_GPUS) for h in sorted(hostnames)))
    patch = {
        "metadata": {"annotations": {workloads.ASSIGNMENT_ANNOTATION: encode_assignment_annotation([("main", claim)])}}
    }
    await kube.custom.patch_namespaced_custom_object(
        KUEUE_GROUP,
        KUEUE_VERSION,
        wl["metadata"]["namespace"],
        "workloads",
        wl["metadata"]["name"],
        patch,
        **content_type("application/merge-patch+json"),
    )


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
