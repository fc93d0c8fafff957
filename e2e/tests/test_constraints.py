"""Issue 14 on the real local cluster: level names on the Topology (a request says ``rack``), a
malformed names annotation makes the check (and so Kueue's ClusterQueue) inactive until only the
annotation is mended, and required + preferred on one PodSet.

Each test has its own kwok pool (1 block x 2 racks x 2 hosts of 8 GPUs) and TAS stack.
"""

from __future__ import annotations

import asyncio
from typing import Any

from e2e import jobs, workloads
from e2e import stack as st
from e2e.controller import ControllerGroup
from e2e.kube import KUEUE_GROUP, KUEUE_VERSION, Kube, condition, condition_true, content_type, eventually
from e2e.nodes import BLOCK_LABEL, RACK_LABEL
from e2e.tests.admission_helpers import DECIDED, entry_of, hosts, small_pool
from kueue_tas.topology.level_names import LEVEL_NAMES_ANNOTATION

MERGE = "application/merge-patch+json"


async def name_levels(kube: Kube, topology: str, value: str) -> None:
    body = {"metadata": {"annotations": {LEVEL_NAMES_ANNOTATION: value}}}
    await kube.custom.patch_cluster_custom_object(
        KUEUE_GROUP, KUEUE_VERSION, "topologies", topology, body, **content_type(MERGE)
    )


async def active(kube: Kube, check: str, status: str) -> dict[str, Any] | None:
    ac = await kube.get_cluster_object(KUEUE_GROUP, KUEUE_VERSION, "admissionchecks", check)
    cond = condition(ac, "Active")
    return cond if cond and cond["status"] == status else None


async def test_a_request_names_its_level_and_a_bad_names_annotation_is_refused_until_mended(
    kube: Kube, namespace: str, unique: str, tas: ControllerGroup
) -> None:
    s = await st.tas_stack(kube, namespace, tas.controller_name, small_pool(unique, "ln"))
    racks = st.host_racks(s.pool)
    await name_levels(kube, s.topology, f"block={BLOCK_LABEL},rack={RACK_LABEL}")
    await jobs.create_job(kube, namespace, jobs.job("named", 12, required="rack"))
    wl = await workloads.wait_check(kube, s, "named", DECIDED)
    assert entry_of(wl, s)["state"] == "Ready", entry_of(wl, s)
    placed = hosts(wl)
    assert sum(placed.values()) == 12 and len({racks[h] for h in placed}) == 1  # one rack, by name
    await workloads.wait_admitted(kube, s, "named")

    # The same name given twice: the check turns inactive, so Kueue holds its ClusterQueue
    # inactive too and a new Job waits in the queue (no quota, so no entry of ours to write).
    await name_levels(kube, s.topology, f"rack={RACK_LABEL},rack={BLOCK_LABEL}")
    cond = await eventually("check inactive", lambda: active(kube, s.check, "False"), 30)
    assert cond["reason"] == "TopologyInvalid" and "name 'rack' given twice" in cond["message"], cond
    assert LEVEL_NAMES_ANNOTATION in cond["message"], cond

    async def queue_inactive() -> dict[str, Any] | None:
        cq = await kube.get_cluster_object(KUEUE_GROUP, KUEUE_VERSION, "clusterqueues", s.cluster_queue)
        found = condition(cq, "Active")
        return found if found and found["status"] == "False" else None

    await eventually("ClusterQueue inactive", queue_inactive, 30)
    await jobs.create_job(kube, namespace, jobs.job("waits", 2, required="rack"))
    await asyncio.sleep(5)
    waiting = await workloads.workload_of(kube, namespace, "waits", "Job")
    assert waiting is None or not condition_true(waiting, "QuotaReserved"), waiting

    # Mending only the annotation (the spec never changed) lets it through.
    await name_levels(kube, s.topology, f"rack={RACK_LABEL}")
    await eventually("check active again", lambda: active(kube, s.check, "True"), 30)
    wl = await workloads.wait_check(kube, s, "waits", DECIDED)
    assert entry_of(wl, s)["state"] == "Ready", entry_of(wl, s)
    assert len({racks[h] for h in hosts(wl)}) == 1


async def test_required_block_with_preferred_rack_lands_in_one_rack(
    kube: Kube, namespace: str, unique: str, tas: ControllerGroup
) -> None:
    s = await st.tas_stack(kube, namespace, tas.controller_name, small_pool(unique, "rp"))
    racks = st.host_racks(s.pool)
    pair = {jobs.REQUIRED: BLOCK_LABEL, jobs.PREFERRED: RACK_LABEL}
    await jobs.create_job(kube, namespace, jobs.job("pair", 10, annotations=pair))
    wl = await workloads.wait_check(kube, s, "pair", DECIDED)
    assert entry_of(wl, s)["state"] == "Ready", entry_of(wl, s)
    placed = hosts(wl)
    assert sum(placed.values()) == 10 and len({racks[h] for h in placed}) == 1  # a rack holds 16
    upside_down = {jobs.REQUIRED: RACK_LABEL, jobs.PREFERRED: BLOCK_LABEL}
    await jobs.create_job(kube, namespace, jobs.job("upside", 2, annotations=upside_down))
    _, message = await workloads.wait_rejected(kube, s, "upside")
    assert f'level "{BLOCK_LABEL}" is above the required level "{RACK_LABEL}"' in message, message
