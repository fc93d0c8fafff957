"""Node repair and stray-pod deletion wired to the admission harness: a rig (``rig``) of four 8-GPU
hosts in two racks, the roles a test gives them, the repair's metrics, and the stray-pod reaper
(``Strays``) on a rig."""

from __future__ import annotations

import copy
import dataclasses
from typing import Any

import builders as mk
from admission_harness import ALLOCATABLE, Harness, harness, repair_pass, workload
from vocab import GPU, HOST, RACK

from kueue_tas.api import constants as c
from kueue_tas.api.workload import Workload
from kueue_tas.controllers.deps import ControllerDeps
from kueue_tas.controllers.repair.reconciler import NodeRepair
from kueue_tas.controllers.rewrites import OurRewrites
from kueue_tas.controllers.stray.reconciler import StrayPods
from kueue_tas.runtime.config import Settings
from kueue_tas.topology.codec.codec import decode_assignment_annotation
from kueue_tas.topology.explain.free import domain_free
from kueue_tas.topology.features import FeatureGates

ANN = c.TOPOLOGY_ASSIGNMENT_ANNOTATION


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Rig:
    """The admission harness plus a NodeRepair on the same informers, capacity and writes."""

    def __init__(self, h: Harness, repair: NodeRepair, clock: Clock, rewrites: OurRewrites) -> None:
        self.h, self.repair, self.clock, self.rewrites = h, repair, clock, rewrites
        self.obj: dict[str, Any] = {}

    def node(
        self, name: str, rack: str, *, ready: bool = True, event: str = "MODIFIED", gpus: int = 8, **kw: Any
    ) -> None:
        labels = {RACK: rack, "pool": "gpu"}
        allocatable = {**ALLOCATABLE, GPU: str(gpus)}
        self.h.informers.nodes.handle_event(
            event, mk.node(name, labels=labels, allocatable=allocatable, ready=ready, resource_version="2", **kw)
        )

    async def admit(self, count: int = 12, annotations: dict[str, str] | None = None) -> dict[str, int]:
        """Admit ns/wl through the admission reconciler and show its writes through the informer;
        the hosts and pod counts of its assignment."""
        wanted = {**workload.args[2], **(annotations or {})}
        self.obj = mk.workload("wl", count, wanted, **workload.keywords)
        self.h.add_workload(self.obj)
        await self.h.admission.reconcile("ns/wl")
        self.observe()
        return self.hosts()

    async def read(self, _wl: Workload) -> Workload:
        """The writer's re-read: the Workload with every write so far (not yet in the informer)."""
        return Workload.model_validate(self.apiserver())

    def apiserver(self) -> dict[str, Any]:
        obj = copy.deepcopy(self.obj)
        if self.h.writes.annotations:
            obj["metadata"].setdefault("annotations", {})[ANN] = self.h.writes.annotations[-1]
        if self.h.writes.checks:
            obj["status"]["admissionChecks"] = [self.h.writes.checks[-1]]
        return obj

    def observe(self) -> None:
        """Play the apiserver: the last annotation and entry written land on the Workload."""
        obj = copy.deepcopy(self.obj)
        if self.h.writes.annotations:
            obj["metadata"].setdefault("annotations", {})[ANN] = self.h.writes.annotations[-1]
        entry = self.h.writes.checks[-1]
        obj["status"]["admissionChecks"] = [entry]
        if entry["state"] == "Ready":
            obj["status"]["conditions"].append(mk.condition("Admitted", time="2026-01-01T00:00:00Z"))
        obj["metadata"]["resourceVersion"] = str(int(obj["metadata"]["resourceVersion"]) + 1)
        self.obj = obj
        self.h.modify_workload(obj)

    def wl(self) -> Workload:
        wl = self.h.informers.workloads.store.get("ns/wl")
        assert wl is not None
        return wl

    def hosts(self) -> dict[str, int]:
        ((_, a),) = decode_assignment_annotation(self.wl().metadata.annotations[ANN])
        return {d.values[-1]: d.count for d in a.domains}

    async def scan(self) -> float | None:
        return await repair_pass(self.repair)

    def free(self, host: str) -> int:
        snap = self.h.capacity.snapshot("gpu")
        assert snap is not None
        return int(domain_free(snap).get((c.HOSTNAME_LABEL, host, GPU), 0))

    async def spare_and_failed_host(self) -> str:
        """Admit ns/wl, add spare host h5 to the rack of its 4-pod host, and have that host
        NotReady for the grace period; returns that host."""
        small, _, rack = roles(await self.admit())
        self.node("h5", rack, event="ADDED")
        self.node(small, rack, ready=False)
        self.clock.now += 30
        return small

    def events(self, reason: str) -> list[str]:
        return [m for _, _, r, m in self.h.events.seen if r == reason]


def rig(gates: FeatureGates | None = None, **settings: Any) -> Rig:
    h = harness()
    clock = Clock()
    rewrites = OurRewrites()
    deps = dataclasses.replace(
        h.ctx.deps, settings=Settings(leader_election=False, **settings), gates=gates or h.ctx.gates
    )
    ctx = dataclasses.replace(h.ctx, deps=deps, flavors_of=lambda _check: {"gpu"}, clock=clock)
    repair = NodeRepair(ctx, rewrites=rewrites, wall=lambda: 0.0)
    r = Rig(h, repair, clock, rewrites)
    h.writes.read_workload = r.read  # type: ignore[method-assign]
    return r


RACK_OF = {"h1": "r1", "h2": "r1", "h3": "r2", "h4": "r2"}


def roles(hosts: dict[str, int]) -> tuple[str, str, str]:
    """(host with 4 pods, host with 8, its rack) of the 12-pod assignment."""
    small = next(h for h, n in hosts.items() if n == 4)
    big = next(h for h, n in hosts.items() if n == 8)
    return small, big, RACK_OF[small]


def metric(r: Rig, name: str, labels: dict[str, str] | None = None) -> float:
    value = r.h.metrics.registry.get_sample_value(name, labels or {})
    return 0.0 if value is None else value


LABELS = {c.WORKLOAD_LABEL: "u1", c.PODSET_LABEL: "main"}
KEY = "ns/wl"


class Deleter:
    def __init__(self) -> None:
        self.deleted: list[tuple[str, str, str]] = []  # (namespace, name, uid)
        self.fail: list[Exception] = []  # raised by the next deletes, in order

    async def delete(self, namespace: str, name: str, uid: str) -> None:
        if self.fail:
            raise self.fail.pop(0)
        self.deleted.append((namespace, name, uid))

    def names(self) -> list[str]:
        return sorted(name for _, name, _ in self.deleted)


class Strays:
    """The rig plus StrayPods on its informers and capacity, on the rig's clock."""

    def __init__(self, r: Rig, grace: float = 5.0) -> None:
        self.r = r
        self.deleter = Deleter()
        self.strays = StrayPods(
            ControllerDeps(
                informers=r.h.informers,
                checks=r.h.checks,
                events=r.h.events,
                metrics=r.h.metrics,
                settings=Settings(leader_election=False, stray_pod_grace_seconds=grace),
            ),
            capacity=r.h.capacity,
            deleter=self.deleter,
            clock=r.clock,
            rewrites=r.rewrites,
        )

    def pod(self, name: str, node: str | None, event: str = "ADDED", rv: str = "1", **kw: Any) -> None:
        gated = node is None and not kw.get("selector")
        selector = kw.pop("selector", None if node is None else {HOST: node})
        obj = mk.pod(
            name,
            node,
            namespace="ns",
            uid=f"uid-{name}",
            resource_version=rv,
            labels=LABELS,
            gpus=1,
            gates=[c.SCHEDULING_GATE] if gated else [],
            selector=selector,
            **kw,
        )
        self.r.h.informers.pods.handle_event(event, obj)

    def running(self, hosts: dict[str, int], prefix: str = "p") -> list[str]:
        """Bound, running pods filling ``hosts``; their names, host by host."""
        names = []
        for host, count in sorted(hosts.items()):
            for i in range(count):
                name = f"{prefix}-{host}-{i}"
                self.pod(name, host)
                names.append(name)
        return names

    async def judge(self) -> float | None:
        return await self.strays.reconcile(KEY)

    def metric(self) -> float:
        value = self.r.h.metrics.registry.get_sample_value("kueue_tas_stray_pods_terminated_total")
        return 0.0 if value is None else value
