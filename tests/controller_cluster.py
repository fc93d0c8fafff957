"""One controller's reconcilers (admission, node repair, assignment guard) on a fake API server
shared with Kueue's model, through the real client with faults injected (``faults.py``): ns/wl,
12 one-GPU pods in one rack, on the admission harness's four hosts."""

from __future__ import annotations

import dataclasses
from typing import Any

import builders as mk
from admission_harness import ALLOCATABLE, CHECK, T0, Harness, harness, repair_pass, wl
from faults import FakeApiServer, FaultySession, faulty_client
from kubernetes_asyncio import client as k8s
from vocab import RACK

from kueue_tas.api import constants as c
from kueue_tas.api.workload import Workload
from kueue_tas.capacity.assignment_record import assignment_tampering
from kueue_tas.controllers.check_entry_writes import KubeAdmissionWriter
from kueue_tas.controllers.deps import ControllerDeps
from kueue_tas.controllers.guard.reconciler import AssignmentGuard
from kueue_tas.controllers.repair.reconciler import NodeRepair
from kueue_tas.controllers.rewrites import OurRewrites
from kueue_tas.runtime.config import Settings
from kueue_tas.runtime.metrics import Metrics
from kueue_tas.topology.codec.codec import decode_assignment_annotation

KEY = "ns/wl"
JOB = "/apis/batch/v1/namespaces/ns/jobs/job"
WORKLOAD = "/apis/kueue.x-k8s.io/v1beta2/namespaces/ns/workloads/wl"
STATUS = r"/workloads/wl/status$"
RACK_OF = {"h1": "r1", "h2": "r1", "h3": "r2", "h4": "r2", "h5": "r1", "h6": "r2"}


class Cluster:
    """One controller's reconcilers (admission, node repair, assignment guard) on an API
    server shared with Kueue's model (``evict``, ``readmit``, ``admit``)."""

    def __init__(
        self, server: FakeApiServer, session: FaultySession, api: k8s.ApiClient, h: Harness, **settings: Any
    ) -> None:
        self.server, self.session, self.session_api, self.h = server, session, api, h
        self.rewrites = OurRewrites()
        deps = dataclasses.replace(h.ctx.deps, settings=Settings(leader_election=False, **settings))
        ctx = dataclasses.replace(h.ctx, deps=deps, flavors_of=lambda _check: {"gpu"})
        self.repair = NodeRepair(ctx, rewrites=self.rewrites, wall=lambda: 0.0)
        self.guard = AssignmentGuard(
            ControllerDeps(
                informers=h.informers, checks=h.checks, events=h.events, metrics=Metrics(), settings=ctx.settings
            ),
            writer=h.ctx.writer,
            rewrites=self.rewrites,
        )

    # --- the watch and Kueue --------------------------------------------------------------------

    def sync(self) -> None:
        """The watch catches up with the server."""
        obj = self.server.get(WORKLOAD)
        assert obj is not None
        self.h.informers.workloads.handle_event("MODIFIED", obj)

    def stored(self) -> dict[str, Any]:
        obj = self.server.get(WORKLOAD)
        assert obj is not None
        return obj

    def entry(self) -> dict[str, Any]:
        (entry,) = self.stored()["status"]["admissionChecks"]
        return entry

    def kueue(self, change: Any) -> None:
        """Kueue's own write: ``change(obj)`` on the stored Workload (a new resourceVersion)."""
        obj = self.stored()
        change(obj)
        self.server.put(WORKLOAD, obj)

    def evict(self) -> None:
        """Kueue evicts (preemption) and withdraws the quota: our entry reset to Pending."""

        def change(obj: dict[str, Any]) -> None:
            status = obj["status"]
            previous = status["admissionChecks"][0]["state"]
            status["admissionChecks"] = [
                {
                    "name": CHECK,
                    "state": "Pending",
                    "message": f"Reset to Pending after eviction. Previously: {previous}",
                    "lastTransitionTime": T0,
                }
            ]
            status["conditions"] = [
                mk.condition("QuotaReserved", False, reason="Pending", message="", time=T0),
                mk.condition("Evicted", reason="Preempted", message="Preempted to accommodate a workload", time=T0),
            ]
            status.pop("admission", None)

        self.kueue(change)

    def readmit(self) -> None:
        """Quota reserved again; our entry stays as it is (Pending after Kueue's reset)."""
        fresh = wl("wl", 12)["status"]

        def change(obj: dict[str, Any]) -> None:
            obj["status"]["admission"] = fresh["admission"]
            obj["status"]["conditions"] = [
                mk.condition("QuotaReserved", reason="QuotaReserved", message="", time=T0),
                mk.condition("Evicted", False, reason="QuotaReserved", message="", time=T0),
            ]

        self.kueue(change)

    def admit(self) -> None:
        """Every check Ready: Kueue admits."""
        assert self.entry()["state"] == "Ready"
        self.kueue(lambda obj: obj["status"]["conditions"].append(mk.condition("Admitted", time=T0)))

    # --- our controller -------------------------------------------------------------------------

    async def decide(self) -> float | None:
        self.sync()
        return await self.h.admission.reconcile(KEY)

    async def admitted(self) -> dict[str, int]:
        """ns/wl decided, written, admitted by Kueue and seen: its hosts and pod counts."""
        assert await self.decide() is None
        self.admit()
        self.sync()
        return self.hosts()

    def hosts(self, obj: dict[str, Any] | None = None) -> dict[str, int]:
        text = (obj or self.stored())["metadata"]["annotations"][c.TOPOLOGY_ASSIGNMENT_ANNOTATION]
        ((_, a),) = decode_assignment_annotation(text)
        return {d.values[-1]: d.count for d in a.domains}

    def node(self, name: str, *, ready: bool = True, event: str = "MODIFIED") -> None:
        labels = {RACK: RACK_OF[name], "pool": "gpu"}
        node = mk.node(name, labels=labels, allocatable=ALLOCATABLE, ready=ready, resource_version="2")
        self.h.informers.nodes.handle_event(event, node)

    async def scan(self) -> float | None:
        return await repair_pass(self.repair)

    async def failed_host(self, *, spare: bool = True) -> str:
        """ns/wl admitted; the host holding 4 of its pods NotReady past the grace (a spare host
        in its rack with ``spare``): the host."""
        hosts = await self.admitted()
        small = next(h for h, n in hosts.items() if n == 4)
        if spare:
            self.node("h5" if RACK_OF[small] == "r1" else "h6", event="ADDED")
        self.node(small, ready=False)
        self.h.now[0] += 31
        return small

    def refused(self) -> list[int]:
        """The status of every entry write the server refused with a Conflict."""
        return [call.status for call in self.session.calls if call.path.endswith("/status") and call.status == 409]

    def assert_no_ready_and_nothing_held(self) -> None:
        assert self.entry()["state"] == "Pending", "a Ready entry landed on a workload Kueue had evicted"
        assert self.refused() == [409], "the write decided on the older Workload was refused"
        assert not self.h.capacity.holds_extra(KEY), "nothing stays held for the refused write"
        assert not self.rewrites.writing(KEY)

    async def decided_afresh(self, avoid: str | None = None) -> None:
        """Kueue reserves quota again: the workload is decided anew (a new Ready entry with a new
        record, matching the annotation; never on ``avoid``)."""
        decisions = self.h.decided[0]
        self.readmit()
        assert await self.decide() is None
        assert self.h.decided[0] == decisions + 1, "a fresh decision"
        assert self.entry()["state"] == "Ready"
        assert assignment_tampering(Workload.model_validate(self.stored()), {CHECK}) is None
        if avoid is not None:
            assert avoid not in self.hosts(), "placed on the nodes as they are now, not the old assignment"


async def make_cluster() -> Cluster:
    """ns/wl on the API server (12 one-GPU pods in one rack, quota reserved, our entry Pending)
    and one controller over the harness's four hosts."""
    server = FakeApiServer()
    job = server.put(JOB, mk.job("job", 12, namespace="ns", uid="job-uid"))
    server.put(WORKLOAD, wl("wl", 12, owner=job))
    api, session = await faulty_client(server)
    h = harness(writer=KubeAdmissionWriter(api))
    for name in ("h1", "h2", "h3", "h4"):
        h.informers.nodes.handle_event(
            "MODIFIED", mk.node(name, labels={RACK: RACK_OF[name], "pool": "gpu"}, allocatable=ALLOCATABLE)
        )
    h.informers.workloads.handle_event("ADDED", server.get(WORKLOAD))
    return Cluster(server, session, api, h)
