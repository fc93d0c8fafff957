"""The admission reconciler wired to hand-fed shared informers, recording fakes for its writes
and Events, time from a clock the test moves (``Harness.now``), and a cluster of four 8-GPU
hosts in two racks under check ``tas`` (Topology ``topo``, flavor ``gpu``, ClusterQueue ``cq``).
Every admission test without a cluster uses it; ``wire`` alone gives the reconciler over empty
informers, for tests that bring their own nodes or configuration."""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from functools import partial
from typing import Any

import builders as mk
from vocab import GPU, HOST, RACK, REQUIRED

from kueue_tas.api import constants as c
from kueue_tas.api.workload import Workload
from kueue_tas.capacity.live import LiveCapacity
from kueue_tas.controllers.admission.reconciler import WorkloadAdmission
from kueue_tas.controllers.cache.reconciler import CapacityCache
from kueue_tas.controllers.check_entry_writes import AdmissionWriter
from kueue_tas.controllers.decision_context import DecisionContext
from kueue_tas.controllers.deps import ControllerDeps
from kueue_tas.controllers.guard.reconciler import AssignmentGuard
from kueue_tas.controllers.informers import OurChecks, SharedInformers
from kueue_tas.controllers.repair.reconciler import SCAN, NodeRepair
from kueue_tas.controllers.rewrites import OurRewrites
from kueue_tas.controllers.ungate.reconciler import Ungater
from kueue_tas.controllers.workload_annotations import NoOwnerReader, OwnerReader, WorkloadAnnotations
from kueue_tas.kube.events import EventSink, ObjectRef
from kueue_tas.runtime.config import Settings
from kueue_tas.runtime.manager import Manager
from kueue_tas.runtime.metrics import Metrics
from kueue_tas.topology.assignment import DomainAssignment, TopologyAssignment
from kueue_tas.topology.codec.codec import decode_assignment_annotation, encode_assignment_annotation
from kueue_tas.topology.engine.snapshot import TopologySnapshot
from kueue_tas.topology.explain.free import domain_free
from kueue_tas.topology.features import DEFAULT_GATES, FeatureGates

CHECK = "tas"
HOSTS = ("h1", "h2", "h3", "h4")
ALLOCATABLE = {"cpu": "16", "pods": "110", GPU: "8"}
T0 = "2026-01-01T00:00:00Z"

# Workload ns/wl: 8 one-GPU pods requiring a rack, quota reserved on ``gpu``, our check Pending.
workload = partial(
    mk.workload,
    "wl",
    8,
    {REQUIRED: RACK},
    namespace="ns",
    uid="u1",
    resource_version="5",
    queue=None,
    admitted_flavor="gpu",
    check=CHECK,
    check_state="Pending",
    check_time=T0,
    conditions=[mk.condition("QuotaReserved", reason="QuotaReserved", message="", time=T0)],
)


@dataclass
class Writes:
    checks: list[dict[str, Any]] = field(default_factory=list)
    annotations: list[str] = field(default_factory=list)
    annotation_writes: list[dict[str, str]] = field(default_factory=list)  # every key of each write
    gated: list[set[str]] = field(default_factory=list)
    wait_starts: list[str] = field(default_factory=list)
    holds: list[str] = field(default_factory=list)
    marks: list[dict[str, str]] = field(default_factory=list)  # every write_marks, in order
    # The next annotation / entry write raises this (once) instead of being recorded.
    fail_annotation: Exception | None = None
    fail_check: Exception | None = None
    fail_check_after: int = 0  # entry writes that land before ``fail_check`` is raised

    async def inject_gates(self, workload: Workload, podsets: set[str], gate: str) -> None:
        self.gated.append(set(podsets))

    async def write_annotation(self, workload: Workload, text: str, kept_slices: str | None = None) -> Workload:
        if self.fail_annotation is not None:
            exc, self.fail_annotation = self.fail_annotation, None
            raise exc
        self.annotations.append(text)
        annotations = {c.TOPOLOGY_ASSIGNMENT_ANNOTATION: text}
        if kept_slices is not None:
            annotations[c.KEPT_SLICES_ANNOTATION] = kept_slices
        self.annotation_writes.append(annotations)
        return written(workload, annotations)

    async def write_check(self, workload: Workload, entry: dict[str, Any]) -> None:
        if self.fail_check is not None and self.fail_check_after <= 0:
            exc, self.fail_check = self.fail_check, None
            raise exc
        self.fail_check_after -= 1
        self.checks.append(entry)

    async def read_workload(self, workload: Workload) -> Workload | None:
        return workload

    async def write_wait_start(self, workload: Workload, stamp: str) -> Workload:
        self.wait_starts.append(stamp)
        return written(workload, {c.PREFERRED_WAIT_STARTED_ANNOTATION: stamp})

    async def write_marks(self, workload: Workload, values: Mapping[str, str]) -> Workload:
        if c.PREEMPTION_HOLD_ANNOTATION in values:
            self.holds.append(values[c.PREEMPTION_HOLD_ANNOTATION])
        self.marks.append(dict(values))
        return written(workload, dict(values))


def written(workload: Workload, annotations: dict[str, str]) -> Workload:
    """``workload`` as an annotation write leaves it: the annotations set, a newer resourceVersion."""
    version = workload.metadata.resource_version
    metadata = workload.metadata.model_copy(
        update={
            "annotations": {**workload.metadata.annotations, **annotations},
            "resource_version": str(int(version) + 1) if version and version.isdigit() else version,
        }
    )
    return workload.model_copy(update={"metadata": metadata})


@dataclass
class Events:
    seen: list[tuple[str, str, str, str]] = field(default_factory=list)  # (object, type, reason, message)

    async def emit_event(self, regarding: ObjectRef, *, reason: str, message: str, type: str = "Normal") -> bool:
        self.seen.append((f"{regarding.kind}/{regarding.name}", type, reason, message))
        return True

    def reasons(self) -> list[tuple[str, str, str]]:
        """(object, type, reason) of every Event, for tests that do not match on the message."""
        return [(obj, kind, reason) for obj, kind, reason, _ in self.seen]


@dataclass
class Harness:
    ctx: DecisionContext
    admission: WorkloadAdmission
    writes: Writes
    events: Events
    now: list[float]  # what the reconciler's clock reads; tests move it
    decided: list[int]  # how many decisions the reconciler reported

    @property
    def informers(self) -> SharedInformers:
        return self.ctx.informers

    @property
    def checks(self) -> OurChecks:
        return self.ctx.checks

    @property
    def capacity(self) -> LiveCapacity:
        return self.ctx.capacity

    @property
    def metrics(self) -> Metrics:
        return self.ctx.metrics

    def free_gpus(self) -> int:
        """Free GPUs over every host of ``gpu`` (0 when the flavor has no snapshot)."""
        snap = self.capacity.snapshot("gpu")
        if snap is None:
            return 0
        free = domain_free(snap)
        return sum(int(free[(HOST, h, GPU)]) for h in HOSTS)

    def add_workload(self, obj: dict[str, Any]) -> None:
        self.informers.workloads.handle_event("ADDED", obj)

    def modify_workload(self, obj: dict[str, Any]) -> None:
        self.informers.workloads.handle_event("MODIFIED", obj)


def wire(
    gates: FeatureGates = DEFAULT_GATES,
    *,
    snapshot_class: type[TopologySnapshot] = TopologySnapshot,
    writer: AdmissionWriter | None = None,
    events: EventSink | None = None,
    owners: OwnerReader | None = None,
    wall: Callable[[], datetime] | None = None,
    settings: Mapping[str, Any] | None = None,
) -> Harness:
    """The reconciler over empty informers (no nodes, Topology, flavor, check or queue yet), its
    capacity model building ``snapshot_class`` snapshots. ``writer`` / ``events``: what it
    writes through instead of the recording fakes (``Harness.writes`` is ``writer`` when that is
    a :class:`Writes`)."""
    knobs = Settings(leader_election=False, **(settings or {}))
    metrics = Metrics()
    informers = SharedInformers.register(Manager(None, knobs, metrics), knobs.annotation_prefix)
    checks = OurChecks(informers.checks.store, knobs.controller_name)
    capacity = LiveCapacity(gates, snapshot_class=snapshot_class)
    cache = CapacityCache(capacity, informers, checks)
    writes = writer if isinstance(writer, Writes) else Writes()
    recorded, now, decided = Events(), [1000.0], [0]
    ctx = DecisionContext(
        ControllerDeps(
            informers=informers,
            checks=checks,
            events=recorded if events is None else events,
            metrics=metrics,
            settings=knobs,
            gates=gates,
        ),
        capacity=capacity,
        flavors_of=cache.flavors_of,
        writer=writes if writer is None else writer,
        clock=lambda: now[0],
        workload_annotations=WorkloadAnnotations(owners or NoOwnerReader()),
    )
    if wall is not None:
        ctx = dataclasses.replace(ctx, wall=wall)
    admission = WorkloadAdmission(ctx, decided=lambda: decided.__setitem__(0, decided[0] + 1))
    return Harness(ctx, admission, writes, recorded, now, decided)


def configure(informers: SharedInformers, *, topology: bool = True) -> None:
    """Kueue's side: Topology ``topo`` (rack, host; left out without ``topology``), flavor ``gpu``
    on nodes labelled ``pool: gpu``, check ``tas`` on it, ClusterQueue ``cq`` with 100 GPUs."""
    if topology:
        informers.topologies.handle_event("ADDED", mk.topology("topo", (RACK, HOST), resource_version="1"))
    informers.flavors.handle_event("ADDED", mk.flavor("gpu", {"pool": "gpu"}, resource_version="1"))
    informers.checks.handle_event("ADDED", mk.admission_check(CHECK, "topo", c.CONTROLLER_NAME, resource_version="1"))
    cq = mk.cluster_queue("cq", ("gpu",), {CHECK: ["gpu"]}, covered=(GPU,), quota="100", resource_version="1")
    informers.queues.handle_event("ADDED", cq)


def harness(
    *,
    topology: bool = True,
    writer: AdmissionWriter | None = None,
    events: EventSink | None = None,
    owners: OwnerReader | None = None,
    wall: Callable[[], datetime] | None = None,
    settings: Mapping[str, Any] | None = None,
) -> Harness:
    """``wire`` over the four hosts and ``configure``; ``wall``: the time of day it reads;
    ``settings``: fields of ``Settings`` other than their defaults."""
    h = wire(writer=writer, events=events, owners=owners, wall=wall, settings=settings)
    for n, rack in (("h1", "r1"), ("h2", "r1"), ("h3", "r2"), ("h4", "r2")):
        h.informers.nodes.handle_event(
            "ADDED", mk.node(n, labels={RACK: rack, "pool": "gpu"}, allocatable=ALLOCATABLE, resource_version="1")
        )
    configure(h.informers, topology=topology)
    return h


async def drain(h: Harness) -> list[str]:
    """The keys queued for admission, taken off the queue."""
    keys = []
    while len(h.admission.queue):
        key = await h.admission.queue.get()
        h.admission.queue.done(key)
        keys.append(key)
    return keys


# --- an admitted workload whose assignment annotation a user edits ------------------------------


async def admitted(h: Harness) -> dict[str, Any]:
    """Decide ns/wl and play back our writes: the Workload as Kueue shows it once admitted."""
    h.add_workload(workload())
    assert await h.admission.reconcile("ns/wl") is None
    entry = h.writes.checks[-1]
    assert entry["state"] == "Ready"
    ann = {c.TOPOLOGY_ASSIGNMENT_ANNOTATION: h.writes.annotations[-1]}
    obj = workload(check_state="Ready", check_message=entry["message"], workload_annotations=ann, resource_version="7")
    h.modify_workload(obj)
    return obj


def edited(obj: dict[str, Any], text: str | None, rv: str = "8") -> dict[str, Any]:
    """``obj`` with our annotation set to ``text`` (removed if None), at resourceVersion ``rv``."""
    annotations = dict(obj["metadata"]["annotations"])
    if text is None:
        del annotations[c.TOPOLOGY_ASSIGNMENT_ANNOTATION]
    else:
        annotations[c.TOPOLOGY_ASSIGNMENT_ANNOTATION] = text
    return {**obj, "metadata": {**obj["metadata"], "annotations": annotations, "resourceVersion": rv}}


def other_hosts(text: str) -> str:
    """A valid assignment of the same size on a host the original left free."""
    [(name, ta)] = decode_assignment_annotation(text)
    used = {d.values[-1] for d in ta.domains}
    free = next(h for h in HOSTS if h not in used)
    return encode_assignment_annotation([(name, TopologyAssignment((HOST,), (DomainAssignment((free,), ta.total),)))])


def guard(h: Harness, rewrites: OurRewrites | None = None) -> AssignmentGuard:
    """The assignment guard on ``h``; ``rewrites``: the node repair's, when one runs beside it."""
    return AssignmentGuard(
        ControllerDeps(
            informers=h.informers,
            checks=h.checks,
            events=h.events,
            metrics=Metrics(),
            settings=Settings(leader_election=False),
        ),
        writer=h.writes,
        rewrites=rewrites,
    )


def ungater(h: Harness, **settings: Any) -> tuple[Ungater, list[str]]:
    """An ungater on ``h``'s informers with ``settings``, and the pods it releases (names)."""
    patches: list[str] = []

    class Patcher:
        async def patch(self, namespace: str, name: str, patch: dict[str, Any], resource_version: str) -> None:
            patches.append(name)

    released = Ungater(
        ControllerDeps(
            informers=h.informers,
            checks=h.checks,
            events=h.events,
            metrics=h.metrics,
            settings=Settings(leader_election=False, **settings),
        ),
        patcher=Patcher(),
    )
    return released, patches


def add_gated_pods(h: Harness, count: int = 8) -> None:
    """ns/wl's pods p0.. of PodSet main, created gated by the Job controller."""
    labels = {c.WORKLOAD_LABEL: "u1", c.PODSET_LABEL: "main"}
    for i in range(count):
        pod = mk.pod(
            f"p{i}", namespace="ns", uid=f"p{i}", resource_version="1", labels=labels, gates=[c.SCHEDULING_GATE]
        )
        h.informers.pods.handle_event("ADDED", pod)


async def repair_pass(repair: NodeRepair) -> float | None:
    """One node-repair pass, then the writes it handed to its writers (``NodeRepair.writing``), as
    ``kueue-tas run`` runs them before the next event; the soonest delay any of them asked for."""
    delays = [await repair.reconcile(SCAN)]
    while len(repair.writing):
        key = await repair.writing.get()
        repair.writing.done(key)
        delays.append(await repair.advance_writes(key))
    asked = [d for d in delays if d is not None]
    return min(asked) if asked else None


def evicted(obj: dict[str, Any], *, quota: bool = True) -> dict[str, Any]:
    """``obj`` as Kueue's eviction leaves it: Evicted, our entry reset to Pending; with ``quota``
    False also the quota withdrawn (the job has stopped)."""
    out = copy.deepcopy(obj)
    previous = out["status"]["admissionChecks"][0]["state"]
    out["status"]["admissionChecks"] = [
        {"name": "tas", "state": "Pending", "message": f"Reset to Pending after eviction. Previously: {previous}"}
    ]
    out["status"]["conditions"] = [
        mk.condition("QuotaReserved", quota, reason="QuotaReserved" if quota else "Pending", message="", time=T0),
        mk.condition("Evicted", reason="Preempted", message="Preempted to accommodate a workload", time=T0),
    ]
    if not quota:
        del out["status"]["admission"]
    out["metadata"]["resourceVersion"] = str(int(out["metadata"]["resourceVersion"]) + 1)
    return out


def readmitted(obj: dict[str, Any]) -> dict[str, Any]:
    """Quota reserved again after an eviction: Evicted back to False, our entry still Pending."""
    out = workload(resource_version=str(int(obj["metadata"]["resourceVersion"]) + 1))
    if obj["metadata"].get("annotations"):
        out["metadata"]["annotations"] = copy.deepcopy(obj["metadata"]["annotations"])
    out["status"]["conditions"].append(mk.condition("Evicted", False, reason="QuotaReserved", message="", time=T0))
    return out


def ready(h: Harness, obj: dict[str, Any]) -> dict[str, Any]:
    """``obj`` as it is once our last decision's writes are seen: annotation and Ready entry."""
    out = copy.deepcopy(obj)
    out["metadata"].setdefault("annotations", {})[c.TOPOLOGY_ASSIGNMENT_ANNOTATION] = h.writes.annotations[-1]
    out["status"]["admissionChecks"] = [h.writes.checks[-1]]
    out["metadata"]["resourceVersion"] = str(int(out["metadata"]["resourceVersion"]) + 1)
    return out


def hosts_of(obj: dict[str, Any]) -> dict[str, int]:
    ((_, assignment),) = decode_assignment_annotation(obj["metadata"]["annotations"][c.TOPOLOGY_ASSIGNMENT_ANNOTATION])
    assert assignment.levels == (HOST,)
    return {d.values[0]: d.count for d in assignment.domains}


def wl(name: str, count: int = 12, **kw: Any) -> dict[str, Any]:
    """A Workload of ``count`` one-GPU pods requiring one rack (a rack has 16 GPUs)."""
    args: dict[str, Any] = {
        "namespace": "ns",
        "uid": f"uid-{name}",
        "resource_version": "5",
        "queue": None,
        "admitted_flavor": "gpu",
        "check": CHECK,
        "check_state": "Pending",
        "check_time": T0,
        "conditions": [mk.condition("QuotaReserved", reason="QuotaReserved", message="", time=T0)],
    }
    args.update(kw)
    return mk.workload(name, count, {REQUIRED: RACK}, **args)
