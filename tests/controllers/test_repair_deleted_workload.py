"""Issue 27, defect 3: a Workload deleted during a node repair pass.

The pass works from the Workload list it copied at its start; a Workload deleted meanwhile
(here: while the pass waits for the decision lock an admission holds) was repaired from that
stale copy. Its write met a 404 and was left to a retry that never came (the workload was in
no later list), so the extra slots stayed held and ``OurRewrites.writing`` stayed true for
its key: a later Workload of the same name was never ungated (the ungater waits for the
repair) nor judged for stray pods (a decision of ours "being written"), and the next pass
took the dead repair's writes onto it. Now a 404, or a Workload of another UID under the
name, releases everything held for the key.
"""

from __future__ import annotations

import asyncio
from typing import Any

import builders as mk
from admission_harness import wl
from controller_cluster import JOB, KEY, WORKLOAD, Cluster, make_cluster

from kueue_tas.api import constants as c
from kueue_tas.api.workload import Workload
from kueue_tas.capacity.assignment_record import assignment_tampering, repairs_of
from kueue_tas.controllers.deps import ControllerDeps
from kueue_tas.controllers.stray.reconciler import StrayPods
from kueue_tas.controllers.ungate.reconciler import Ungater
from kueue_tas.kube.events import ObjectRef
from kueue_tas.runtime.config import Settings

NEW_UID = "uid-wl-2"


class Recorder:
    """The ungater's pod patcher, the stray-pod deleter and their Event sink."""

    def __init__(self) -> None:
        self.released: dict[str, str] = {}  # pod -> host
        self.deleted: list[str] = []

    async def patch(self, namespace: str, name: str, patch: dict[str, Any], resource_version: str) -> None:
        self.released[name] = patch["spec"]["nodeSelector"][c.HOSTNAME_LABEL]

    async def delete(self, namespace: str, name: str, uid: str) -> None:
        self.deleted.append(name)

    async def emit_event(self, regarding: ObjectRef, *, reason: str, message: str, type: str = "Normal") -> bool:
        return True


def delete_workload(cl: Cluster) -> None:
    obj = cl.stored()
    del cl.server.objects[WORKLOAD]
    cl.h.informers.workloads.handle_event("DELETED", obj)


def recreate_workload(cl: Cluster) -> None:
    """A new Workload under the same name (a new UID), quota reserved, our entry Pending."""
    cl.server.put(WORKLOAD, wl("wl", 12, uid=NEW_UID, owner=cl.server.get(JOB)))
    cl.sync()


async def repair_pass_while_deleted(cl: Cluster, *, recreate: bool) -> float | None:
    """A repair pass that waits on the decision lock (an admission deciding) while ns/wl is
    deleted (and with ``recreate`` created again under its name)."""
    async with cl.h.ctx.lock:
        scan = asyncio.create_task(cl.scan())
        for _ in range(20):
            await asyncio.sleep(0)
        assert not scan.done(), "the pass waits for the lock"
        delete_workload(cl)
        if recreate:
            recreate_workload(cl)
    return await scan


async def assert_new_workload_served_normally(cl: Cluster) -> None:
    """The new ns/wl is admitted on its own decision, ungated, and its pods are judged."""
    if cl.server.get(WORKLOAD) is None:
        recreate_workload(cl)
    assert await cl.decide() is None
    cl.admit()
    cl.sync()
    await cl.scan()  # no dead repair is taken onto the new workload
    stored = Workload.model_validate(cl.stored())
    assert stored.metadata.uid == NEW_UID
    assert not repairs_of(stored, {"tas"}) and assignment_tampering(stored, {"tas"}) is None
    assert not cl.h.capacity.holds_extra(KEY) and not cl.rewrites.writing(KEY)

    rec = Recorder()
    settings = Settings(leader_election=False, ungate_batch_period_seconds=0, stray_pod_grace_seconds=0)
    ungater = Ungater(
        ControllerDeps(
            informers=cl.h.informers, checks=cl.h.checks, events=rec, metrics=cl.h.metrics, settings=settings
        ),
        patcher=rec,
        repairing=cl.rewrites.writing,
    )
    strays = StrayPods(
        ControllerDeps(
            informers=cl.h.informers, checks=cl.h.checks, events=rec, metrics=cl.h.metrics, settings=settings
        ),
        capacity=cl.h.capacity,
        deleter=rec,
        clock=lambda: cl.h.now[0],
    )
    labels = {c.WORKLOAD_LABEL: NEW_UID, c.PODSET_LABEL: "main"}
    for i in range(12):
        pod = mk.pod(
            f"p{i}", namespace="ns", uid=f"p{i}", resource_version="1", labels=labels, gates=[c.SCHEDULING_GATE]
        )
        cl.h.informers.pods.handle_event("ADDED", pod)
    await ungater.reconcile(KEY)
    hosts = cl.hosts()
    assert sorted(rec.released.values()) == sorted(h for h, n in hosts.items() for _ in range(n)), "ungated"

    # A pod of the new workload running on a host its assignment does not name: judged stray.
    outside = next(h for h in ("h1", "h2", "h3", "h4") if h not in hosts)
    stray = mk.pod("stray", outside, namespace="ns", uid="stray", resource_version="1", labels=labels)
    stray["status"] = {"phase": "Running"}
    cl.h.informers.pods.handle_event("ADDED", stray)
    for _ in range(3):
        await strays.reconcile(KEY)
        cl.h.now[0] += 1
    assert rec.deleted == ["stray"], "judged for stray pods"


async def test_a_workload_deleted_during_the_pass_releases_what_its_repair_held() -> None:
    """Deleted while the pass waits: the repair decided from the stale copy meets a 404."""
    cl = await make_cluster()
    await cl.failed_host()
    await repair_pass_while_deleted(cl, recreate=False)
    assert not cl.h.capacity.holds_extra(KEY), "the dead repair's extra slots are released"
    assert not cl.rewrites.writing(KEY), "no repair of ours is writing for the name any more"
    await assert_new_workload_served_normally(cl)


async def test_a_workload_recreated_under_its_name_during_the_pass_is_not_repaired_from_the_old() -> None:
    """Deleted and created again while the pass waits: the repair of the old one must not land
    on the new one (its guarded write is refused, the UID differs), and holds nothing."""
    cl = await make_cluster()
    await cl.failed_host()
    await repair_pass_while_deleted(cl, recreate=True)
    stored = cl.stored()
    assert stored["metadata"]["uid"] == NEW_UID
    assert stored["status"]["admissionChecks"][0]["state"] == "Pending", "the old repair wrote nothing on it"
    assert not cl.h.capacity.holds_extra(KEY) and not cl.rewrites.writing(KEY)
    await assert_new_workload_served_normally(cl)
