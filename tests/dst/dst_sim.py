"""Test-only: deterministic simulation testing (DST) of ``kueue-tas run``.

Every reconciler that ``kueue_tas.controllers.setup.setup_controllers`` wires runs unchanged, on a real
``Manager`` whose ``kubernetes_asyncio`` client talks to the in-memory API server of
``dst_api``, beside the models of ``dst_world``. Everything runs on one asyncio loop whose clock
only the simulation moves. One ``random.Random(seed)`` picks every step: which watch delivers
its next event (so informers lag, each by its own amount, while time moves at most
``WATCH_LAG_SECONDS`` a step as long as an open watch has events to deliver), which pending write completes and how
(lands, refused, times out before or after it landed), which model acts (Kueue, the Job
controller, the scheduler), which fault strikes and when virtual time moves. Between steps the
loop runs until no callback is ready, then the monitor (``dst_invariants``) checks every
invariant. Same seed, same profile, same PYTHONHASHSEED: the same history, byte for byte.

``python tests/dst/dst_sim.py --runs N --seed S [--profile P]`` (``make dst``) runs a campaign.
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import gc
import hashlib
import logging
import os
import random
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
# The most virtual time one step moves while an open watch has events to deliver.
WATCH_LAG_SECONDS = 2.0
for extra in (HERE, HERE.parent):  # dst_* beside this file; builders, faults in tests/
    if str(extra) not in sys.path:
        sys.path.insert(0, str(extra))

import builders as mk  # noqa: E402
import structlog  # noqa: E402
from dst_api import PendingWrite, SimApiServer, complete, sim_client, split_path  # noqa: E402
from dst_invariants import CRASH, Monitor, Violation  # noqa: E402
from dst_world import (  # noqa: E402
    CHECK,
    CHECKS,
    FLAVORS,
    GPU,
    HOST,
    HUGE,
    JOBS,
    NODES,
    NS,
    PODS,
    POOL,
    QUEUES,
    RACK,
    TOPOLOGIES,
    WORKLOADS,
    Fleet,
    KueueModel,
    condition_true,
    entry_of,
    has_quota,
    pod_gates,
    ready_of,
)

import kueue_tas.controllers.check_entry_writes as admission_writes_module  # noqa: E402
import kueue_tas.controllers.decision_context as decision_context_module  # noqa: E402
import kueue_tas.kube.reflector as reflector_module  # noqa: E402
from kueue_tas.api import constants as c  # noqa: E402
from kueue_tas.controllers.decision_context import DecisionContext  # noqa: E402
from kueue_tas.controllers.repair.reconciler import NodeRepair  # noqa: E402
from kueue_tas.controllers.setup import LiveState, setup_controllers  # noqa: E402
from kueue_tas.kube.events import EventRecorder  # noqa: E402
from kueue_tas.runtime.config import Settings  # noqa: E402
from kueue_tas.runtime.manager import Manager  # noqa: E402
from kueue_tas.runtime.metrics import Metrics  # noqa: E402
from kueue_tas.topology.codec.codec import decode_assignment_annotation  # noqa: E402

EPOCH = datetime(2030, 1, 1, tzinfo=UTC)


# --- profiles: the scenario knobs ----------------------------------------------------------------


@dataclass(frozen=True)
class Profile:
    """What a run's world looks like and which faults it draws (weights per step)."""

    name: str
    hostname_differs: bool = False  # defect 1
    gate: str = c.SCHEDULING_GATE  # defect 5: a non-default scheduling_gate setting
    steps: int = 260
    drain: int = 400  # steps without faults after the chaos, before every workload finishes
    # write outcomes: (land, refuse, lost, landed-lost)
    write_mix: tuple[float, float, float, float] = (0.88, 0.04, 0.04, 0.04)
    evict: float = 0.0  # Kueue evicts (waitForPodsReady timeout) / preempts / deactivates
    node_flap: float = 0.0  # NotReady and back
    node_delete: float = 0.0
    relabel: float = 0.0
    cordon: float = 0.0
    uncordon: float = 0.5  # of the cordon draws, the share that uncordons a node
    kill_pod: float = 0.0  # a running pod fails; the Job makes a replacement
    kill_on_cordoned: float = 0.5  # of those, the share that strikes a pod on a cordoned node
    huge: float = 0.0  # defect 8: a node's extended resource grows to 10Ei
    topology_recreate: float = 0.0  # defect 7
    delete_workload: float = 0.0  # defect 3: a user deletes an admitted workload
    handover: float = 0.0  # defect 9: the leader is deposed; its in-flight writes may land late
    watch_faults: float = 0.02  # a watch ends, or answers 410 Gone
    elastic: float = 0.0  # an admitted elastic Job grows: a new slice replaces the admitted one
    delete_replaced: float = 0.0  # defect 4: a replaced (finished) slice is deleted
    feature_gates: tuple[tuple[str, bool], ...] = ()
    unique_names: bool = False  # every workload a new name (a stale repair is not resolved by a namesake)
    # what submitted workloads ask for: (level, "required" | "preferred"), drawn uniformly
    requests: tuple[tuple[str, str], ...] = ((RACK, "required"), (RACK, "preferred"), (HOST, "required"))
    # issue 31: the ClusterQueue's topology-preemption switch ("" leaves it off) with priorities
    # drawn per workload, and reservations after this long (0: off) with declared runtimes drawn
    preemption: str = ""
    reservation_after: float = 0.0

    def describe(self) -> str:
        knobs = [f"{k}={v}" for k, v in vars(self).items() if k not in ("name", "steps") and v]
        return f"{self.name}: " + ", ".join(knobs)


BASE = Profile("base", evict=0.02, node_flap=0.01, kill_pod=0.01)
PROFILES: dict[str, Profile] = {
    p.name: p
    for p in (
        BASE,
        Profile("quiet", watch_faults=0.0, write_mix=(1.0, 0.0, 0.0, 0.0)),
        Profile("nodes", node_flap=0.02, node_delete=0.01, relabel=0.005, kill_pod=0.02, watch_faults=0.04),
        Profile(
            "faults", evict=0.03, node_flap=0.02, node_delete=0.01, relabel=0.005, kill_pod=0.02, watch_faults=0.04
        ),
        Profile("eks-hostnames", hostname_differs=True, node_flap=0.01),  # 1
        Profile("evictions", evict=0.08, write_mix=(0.9, 0.0, 0.05, 0.05)),  # 2
        Profile(
            "delete-during-repair", node_flap=0.02, node_delete=0.03, delete_workload=0.2, unique_names=True, steps=500
        ),  # 3
        Profile("custom-gate", gate="example.com/hold"),  # 5
        Profile(
            "cordon",
            cordon=0.02,
            uncordon=0.05,
            kill_pod=0.006,
            kill_on_cordoned=0.9,
            requests=((RACK, "preferred"),),
            steps=600,
        ),  # 6
        Profile("topology-recreate", topology_recreate=0.02),  # 7
        Profile("huge-allocatable", huge=0.02),  # 8
        Profile("handover", handover=0.03, evict=0.04),  # 9
        Profile(
            "elastic-delete-replaced",
            elastic=0.03,
            delete_replaced=0.03,
            feature_gates=(("ElasticJobsViaWorkloadSlicesWithTAS", True),),
            steps=400,
        ),  # 4
        Profile("elastic", elastic=0.03, feature_gates=(("ElasticJobsViaWorkloadSlicesWithTAS", True),), steps=400),
        # issue 31: victims evicted and domains held or reserved while Kueue evicts, writes fail
        # and watches lag; rack-sized requests so that domains, not quota, are what is short.
        Profile(
            "preemption-reservations",
            preemption="Enabled",
            reservation_after=5.0,
            evict=0.02,
            node_flap=0.01,
            requests=((RACK, "required"), (HOST, "required")),
            steps=400,
        ),
    )
}
# The smoke `make test` runs (tests/dst/test_dst.py): short schedules with write, watch and node
# faults (the mix of profile "nodes", which found nothing on the code before issue 27's fixes).
SMOKE = Profile("smoke", steps=40, drain=60, node_flap=0.02, node_delete=0.01, kill_pod=0.02, watch_faults=0.03)
PROFILES[SMOKE.name] = SMOKE
# The campaign's default mix (``make dst`` without PROFILE): every profile in turn.
CAMPAIGN = tuple(PROFILES)


# --- virtual time for the few clocks the controller reads besides the loop's ---------------------


class _Clock:
    now = 0.0


def _wall() -> datetime:
    return EPOCH + timedelta(seconds=_Clock.now)


class _SimDatetime(datetime):
    @classmethod
    def now(cls, tz: Any = None) -> Any:
        return _wall()


class _SimTime:
    """What ``reflector`` reads of ``time`` (stats and the empty-watch spin guard)."""

    @staticmethod
    def time() -> float:
        return EPOCH.timestamp() + _Clock.now

    @staticmethod
    def monotonic() -> float:
        return _Clock.now


@contextmanager
def virtual_clocks() -> Iterator[None]:
    """Point the controller's non-loop clocks at virtual time: the clock and wall defaults of
    DecisionContext and NodeRepair, ``now_rfc3339``'s datetime, the reflector's time."""
    patched: list[tuple[Any, str, Any]] = [
        (admission_writes_module, "datetime", _SimDatetime),
        (decision_context_module, "datetime", _SimDatetime),
        (reflector_module, "time", _SimTime),
    ]
    ctx_init, repair_init = DecisionContext.__init__, NodeRepair.__init__

    def ctx(self: Any, *args: Any, **kw: Any) -> None:
        kw.setdefault("clock", _SimTime.monotonic)
        kw.setdefault("wall", _wall)
        ctx_init(self, *args, **kw)

    def repair(self: Any, *args: Any, **kw: Any) -> None:
        kw.setdefault("wall", _SimTime.time)
        repair_init(self, *args, **kw)

    patched += [(DecisionContext, "__init__", ctx), (NodeRepair, "__init__", repair)]
    saved = [(owner, name, getattr(owner, name)) for owner, name, _ in patched]
    for owner, name, value in patched:
        setattr(owner, name, value)
    try:
        yield
    finally:
        for owner, name, value in saved:
            setattr(owner, name, value)


class SimLoop(asyncio.SelectorEventLoop):
    """An event loop whose clock is :class:`_Clock`: only the simulation moves it. A timer fires
    once the clock has reached it, not a clock resolution early: the work queue re-arms a timer
    it finds early, which on a frozen clock would spin forever."""

    def __init__(self) -> None:
        super().__init__()
        self._clock_resolution = 0.0

    def time(self) -> float:
        return _Clock.now


# --- one run -------------------------------------------------------------------------------------


@dataclass
class Result:
    seed: int
    profile: str
    violation: Violation | None
    history: list[str]
    steps: int
    virtual_seconds: float
    faults: dict[str, int] = field(default_factory=dict)
    # Events the controller wrote, by reason (out of the history: a profile's tests check that
    # it exercises what it is for, e.g. preemptions happened).
    event_reasons: dict[str, int] = field(default_factory=dict)

    @property
    def digest(self) -> str:
        return hashlib.sha256("\n".join(self.history).encode()).hexdigest()[:16]

    def replay(self) -> str:
        return f"make dst RUNS=1 SEED={self.seed} PROFILE={self.profile}"


class Simulation:
    def __init__(self, seed: int, profile: Profile, ignore: frozenset[str] = frozenset()) -> None:
        self.seed = seed
        self.profile = profile
        self.rng = random.Random(seed)
        self.server = SimApiServer()
        self.fleet = Fleet(hostname_differs=profile.hostname_differs)
        self.kueue = KueueModel(
            self.server, profile.gate, quota=self.fleet.racks * self.fleet.hosts * self.fleet.gpus, now=self.stamp
        )
        self.monitor = Monitor(self.server, profile.gate, ignore=ignore)
        self.history: list[str] = []
        self.faults: dict[str, int] = {}
        self.term = 0
        self.live: LiveState | None = None
        self.manager_task: asyncio.Task[None] | None = None
        self.sent_at: dict[int, float] = {}
        self.epoch = 0
        self.names = 0
        self.down: dict[str, Any] = {}  # deleted nodes, to re-create
        self.violation: Violation | None = None

    # --- helpers ---------------------------------------------------------------------------------

    @staticmethod
    def stamp() -> str:
        return _wall().strftime("%Y-%m-%dT%H:%M:%SZ")

    def note(self, text: str) -> None:
        self.history.append(f"{_Clock.now:9.3f} {text}")

    def fault(self, kind: str, text: str) -> None:
        self.faults[kind] = self.faults.get(kind, 0) + 1
        self.note(f"FAULT {kind}: {text}")

    def setup(self) -> None:
        s = self.server
        s.clock = _SimTime.monotonic
        s.create(TOPOLOGIES, mk.topology("topo", (RACK, HOST)))
        s.create(FLAVORS, mk.flavor("gpu", POOL))
        s.create(CHECKS, mk.admission_check(CHECK, "topo", c.CONTROLLER_NAME))
        queue = mk.cluster_queue("cq", ("gpu",), {CHECK: ["gpu"]}, covered=(GPU,), quota=str(self.kueue.quota))
        if self.profile.preemption:
            queue["metadata"]["annotations"] = {"kueue-tas.io/topology-preemption": self.profile.preemption}
            queue["spec"]["preemption"] = {"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Never"}
        s.create(QUEUES, queue)
        for r, h in self.fleet.all():
            s.create(NODES, self.fleet.node(r, h, self.stamp()))

    async def start_controller(self) -> None:
        self.term += 1
        self.server.term = self.term
        api = await sim_client(self.server, self.term)
        settings = Settings(
            leader_election=False,
            scheduling_gate=self.profile.gate,
            feature_gates=dict(self.profile.feature_gates),
            reservation_after_seconds=self.profile.reservation_after,
        )
        manager = Manager(api, settings, Metrics())
        manager._events = EventRecorder(
            api, controller=settings.controller_name, instance=f"sim-{self.term}", now=_wall, timer=_SimTime.monotonic
        )
        self.live = setup_controllers(manager, settings)
        self.manager_task = asyncio.get_running_loop().create_task(manager.run(), name=f"manager-{self.term}")
        self.note(f"controller term {self.term} started")

    async def settle(self) -> None:
        """Run every ready callback (and those they make ready) before the next step."""
        loop = asyncio.get_running_loop()
        ready = loop._ready  # type: ignore[attr-defined]
        for _ in range(20000):
            await asyncio.sleep(0)
            if not ready:
                return
        raise RuntimeError("the loop never went quiet")

    def next_timer(self) -> float | None:
        loop = asyncio.get_running_loop()
        timers = [t.when() for t in loop._scheduled if not t.cancelled()]  # type: ignore[attr-defined]
        return min(timers) if timers else None

    def advance(self, seconds: float) -> None:
        _Clock.now += max(seconds, 0.0)

    # --- the step ----------------------------------------------------------------------------------

    def candidates(self, draining: bool) -> list[tuple[float, str, Callable[[], Any]]]:
        """(weight, name, action) of every step possible now; an action may be a coroutine."""
        out: list[tuple[float, str, Callable[[], Any]]] = []
        s, p = self.server, self.profile
        backlog = [w for w in s.open_watches() if s.backlog(w) is not None]
        if backlog:
            out.append((3.0, "deliver", lambda: self.deliver(self.rng.choice(backlog))))
        if s.pending:
            out.append((2.0, "complete", lambda: self.complete_write(self.rng.choice(s.pending), draining)))
        out.append((0.6, "time", self.time_step))
        wls = s.items(WORKLOADS)
        kueue = [wl for wl in wls if self.kueue_wants(wl)]
        if kueue:
            out.append((1.5, "kueue", lambda: self.kueue_step(self.rng.choice(kueue))))
        jobs = [j for j in s.items(JOBS) if self.job_wants(j)]
        if jobs:
            out.append((1.5, "job", lambda: self.job_step(self.rng.choice(jobs))))
        unbound = [pod for pod in s.items(PODS) if not pod["spec"].get("nodeName") and not pod_gates(pod)]
        if unbound:
            out.append((1.0, "bind", lambda: self.bind(self.rng.choice(unbound))))
        if draining:
            return out
        if len(wls) < 5:
            out.append((0.25, "submit", self.submit))
        finishing = [wl for wl in wls if self.running(wl) and self.all_running(wl)]
        if finishing:
            out.append((0.08, "finish", lambda: self.finish(self.rng.choice(finishing))))
        for weight, name, action in (
            (p.evict, "evict", self.evict),
            (p.node_flap, "node-flap", self.node_flap),
            (p.node_delete, "node-delete", self.node_delete),
            (p.relabel, "relabel", self.relabel),
            (p.cordon, "cordon", self.cordon),
            (p.kill_pod, "kill-pod", self.kill_pod),
            (p.huge, "huge", self.huge),
            (p.topology_recreate, "topology-recreate", self.topology_recreate),
            (p.delete_workload, "delete-workload", self.delete_workload),
            (p.handover, "handover", self.handover),
            (p.watch_faults, "watch", self.watch_fault),
            (p.elastic, "scale-up", self.scale_up),
            (p.delete_replaced, "delete-replaced", self.delete_replaced),
        ):
            if weight > 0:
                out.append((weight * 10, name, action))
        return out

    async def step(self, draining: bool) -> None:
        options = self.candidates(draining)
        total = sum(w for w, _, _ in options)
        pick = self.rng.random() * total
        chosen = options[-1][2]
        for weight, _, action in options:
            pick -= weight
            if pick <= 0:
                chosen = action
                break
        result = chosen()
        if asyncio.iscoroutine(result):
            await result

    # --- actions: delivery, writes, time ----------------------------------------------------------

    def deliver(self, w: Any) -> None:
        entry = self.server.deliver(w)
        if entry is not None:
            meta = entry.obj.get("metadata") or {}
            self.note(f"watch {w.collection.rsplit('/', 1)[-1]} <- {entry.type} {meta.get('name')} rv={entry.rv}")

    def complete_write(self, write: PendingWrite, draining: bool) -> None:
        land, refuse, lost, _ = self.profile.write_mix
        roll = self.rng.random()
        outcome = (
            "land"
            if draining or roll < land
            else "refuse"
            if roll < land + refuse
            else "lost"
            if roll < land + refuse + lost
            else "landed-lost"
        )
        if outcome != "land":
            self.faults[f"write-{outcome}"] = self.faults.get(f"write-{outcome}", 0) + 1
        before = self._entry_state(write)
        answer = complete(self.server, write, outcome)
        self.note(f"write #{write.rid} (term {write.owner}) {write.describe()} -> {outcome} {answer}")
        if before is not None and answer.startswith("200"):
            wl, was = before
            now = self.server.get(WORKLOADS, wl["metadata"].get("namespace", ""), wl["metadata"]["name"])
            if now is not None and (entry_of(now) or {}).get("state") == "Ready" and was != "Ready":
                found = self.monitor.ready_landed(
                    now["metadata"]["uid"], self.sent_at.get(write.rid, 0.0), _Clock.now, write.owner, self.term
                )
                if found is not None and self.violation is None and found.invariant not in self.monitor.ignore:
                    self.violation = found

    def _entry_state(self, write: PendingWrite) -> tuple[Any, str] | None:
        coll, ns, name, _ = split_path(write.path)
        if coll != WORKLOADS or name is None:
            return None
        wl = self.server.get(WORKLOADS, ns, name)
        return None if wl is None else (wl, (entry_of(wl) or {}).get("state", ""))

    def time_step(self) -> None:
        nxt = self.next_timer()
        if nxt is not None and self.rng.random() < 0.6:
            dt = max(nxt - _Clock.now, 0.0) + 0.001
        else:
            dt = self.rng.choice((0.2, 0.5, 1.0, 2.0, 5.0, 30.0))
        if any(self.server.backlog(w) is not None for w in self.server.open_watches()):
            # An open watch delivers within seconds; minutes of silence are a broken watch, which
            # the watch faults model. Unbounded, a few 30 s steps between one backlog's events left
            # an informer 90 s behind while its watch stood open (seeds 2006568, 2012757 at d47072d).
            dt = min(dt, WATCH_LAG_SECONDS)
        dt = min(dt, 120.0)
        self.advance(dt)
        self.note(f"time +{dt:.3f}s")

    # --- actions: Kueue, the Job controller, the scheduler ----------------------------------------

    def submit(self) -> None:
        existing = {wl["metadata"]["name"] for wl in self.server.items(WORKLOADS)}
        existing |= {j["metadata"]["name"] for j in self.server.items(JOBS)}
        pool = [f"w{i}" for i in range(6)]  # names come back: a later Workload of the same name
        if self.profile.unique_names:
            self.names += 1
            pool = [f"u{self.names}"]
        free = [n for n in pool if n not in existing]
        if not free:
            return
        name = self.rng.choice(free)
        count = self.rng.choice((1, 2, 3, 4, 6))
        level, mode = self.rng.choice(self.profile.requests)
        if level == HOST:
            count = min(count, self.fleet.gpus)
        priority = self.rng.choice((0, 1, 2)) if self.profile.preemption else None
        runtime = self.rng.choice((None, 60, 300)) if self.profile.reservation_after else None
        self.kueue.submit(name, count, level, mode, priority=priority, runtime=runtime)
        self.note(
            f"submit {name}: {count} pods, {mode} {level.rsplit('/', 1)[-1]}, priority {priority}, runtime {runtime}"
        )

    def kueue_wants(self, wl: Any) -> bool:
        entry = entry_of(wl) or {}
        if condition_true(wl, "Finished"):
            return False
        if wl["spec"].get("active") is False:
            return True  # reactivation
        if not has_quota(wl):
            return True
        if entry.get("state") in ("Retry", "Rejected"):
            return True
        return entry.get("state") == "Ready" and not condition_true(wl, "Admitted")

    def kueue_step(self, wl: Any) -> None:
        name = wl["metadata"]["name"]
        entry = entry_of(wl) or {}
        if wl["spec"].get("active") is False:
            new = copy.deepcopy(wl)
            new["spec"]["active"] = True
            self.server.replace(WORKLOADS, new)
            self.note(f"kueue: {name} reactivated")
        elif not has_quota(wl):
            if self.kueue.reserve(wl):
                self.epoch += 1
                self.monitor.reserved(wl["metadata"]["uid"], self.epoch, _Clock.now)
                self.note(f"kueue: {name} quota reserved (#{self.epoch})")
        elif entry.get("state") == "Retry":
            self.kueue.evict(wl, "AdmissionCheck")
            self.note(f"kueue: {name} requeued on Retry")
        elif entry.get("state") == "Rejected":
            self.kueue.finish(wl)
            self.note(f"kueue: {name} rejected, finished")
        else:
            self.kueue.admit(wl)
            self.note(f"kueue: {name} admitted")

    def job_wants(self, job: Any) -> bool:
        pods = self.kueue.pods_of(job["metadata"]["name"])
        if job["spec"].get("suspend"):
            return bool(pods)
        return len(pods) < int(job["spec"].get("parallelism", 1))

    def job_step(self, job: Any) -> None:
        text = self.kueue.job_step(job)
        if text:
            self.note(text)

    def bind(self, pod: Any) -> None:
        node = self.kueue.bind(pod)
        self.note(f"scheduler: {pod['metadata']['name']} -> {node or 'unschedulable'}")

    @staticmethod
    def running(wl: Any) -> bool:
        return condition_true(wl, "Admitted") and not condition_true(wl, "Finished")

    def all_running(self, wl: Any) -> bool:
        pods = self.kueue.pods_of(wl["metadata"]["labels"]["sim/job"])
        count = sum(ps["count"] for ps in wl["spec"]["podSets"])
        return len(pods) >= count and all(p["spec"].get("nodeName") for p in pods)

    def finish(self, wl: Any) -> None:
        self.kueue.finish(wl)
        self.note(f"finish {wl['metadata']['name']}")

    # --- actions: faults -------------------------------------------------------------------------

    def evict(self) -> None:
        wls = [
            wl
            for wl in self.server.items(WORKLOADS)
            if has_quota(wl)
            and not condition_true(wl, "Finished")
            and c.KUEUE_SLICE_REPLACEMENT_ANNOTATION not in (wl["metadata"].get("annotations") or {})
        ]
        if not wls:
            return
        wl = self.rng.choice(wls)
        reason = self.rng.choice(("PodsReadyTimeout", "Preempted", "Deactivated"))
        self.kueue.evict(wl, reason, deactivate=reason == "Deactivated")
        for pod in self.kueue.pods_of(wl["metadata"]["labels"]["sim/job"]):
            self.server.delete(PODS, NS, pod["metadata"]["name"])
        self.fault("evict", f"{wl['metadata']['name']} {reason}")

    def _node(self) -> Any | None:
        nodes = self.server.items(NODES)
        return self.rng.choice(nodes) if nodes else None

    def node_flap(self) -> None:
        node = self._node()
        if node is None:
            return
        node = copy.deepcopy(node)
        ready = ready_of(node)
        node["status"]["conditions"] = [mk.condition("Ready", not ready, time=self.stamp())]
        self.server.replace(NODES, node)
        if ready:
            self.monitor.node_unhealthy(node["metadata"]["name"], _Clock.now)
        self.fault("node-flap", f"{node['metadata']['name']} {'NotReady' if ready else 'Ready'}")

    def node_delete(self) -> None:
        if self.down and self.rng.random() < 0.5:
            name = sorted(self.down)[0]
            obj = self.down.pop(name)
            obj["metadata"].pop("resourceVersion", None)
            obj["metadata"].pop("uid", None)
            self.server.create(NODES, obj)
            self.fault("node-delete", f"{name} re-created")
            return
        node = self._node()
        if node is None:
            return
        name = node["metadata"]["name"]
        self.server.delete(NODES, "", name)
        self.down[name] = copy.deepcopy(node)
        self.monitor.node_unhealthy(name, _Clock.now)
        for pod in self.server.items(PODS):
            if pod["spec"].get("nodeName") == name:
                self.server.delete(PODS, NS, pod["metadata"]["name"])  # the pod GC
        self.fault("node-delete", f"{name} deleted")

    def relabel(self) -> None:
        node = self._node()
        if node is None:
            return
        node = copy.deepcopy(node)
        racks = [f"rack-{r}" for r in range(self.fleet.racks)]
        node["metadata"]["labels"][RACK] = self.rng.choice(racks)
        self.server.replace(NODES, node)
        self.monitor.node_unhealthy(node["metadata"]["name"], _Clock.now)
        self.fault("relabel", f"{node['metadata']['name']} -> {node['metadata']['labels'][RACK]}")

    def cordon(self) -> None:
        """Cordon a node that runs pods (a host under a running workload), or uncordon one."""
        nodes = self.server.items(NODES)
        cordoned = [n for n in nodes if n["spec"].get("unschedulable")]
        busy = {p["spec"].get("nodeName") for p in self.server.items(PODS)}
        if cordoned and self.rng.random() < self.profile.uncordon:
            node = copy.deepcopy(self.rng.choice(cordoned))
            node["spec"]["unschedulable"] = False
        else:
            pick = [n for n in nodes if n["metadata"]["name"] in busy and not n["spec"].get("unschedulable")]
            if not pick:
                return
            node = copy.deepcopy(self.rng.choice(pick))
            node["spec"]["unschedulable"] = True
            self.monitor.node_unhealthy(node["metadata"]["name"], _Clock.now)
        self.server.replace(NODES, node)
        self.fault("cordon", f"{node['metadata']['name']} unschedulable={node['spec']['unschedulable']}")

    def kill_pod(self) -> None:
        """A running pod fails, most often on a cordoned node (a drain in progress)."""
        running = [p for p in self.server.items(PODS) if p["spec"].get("nodeName")]
        if not running:
            return
        cordoned = {n["metadata"]["name"] for n in self.server.items(NODES) if n["spec"].get("unschedulable")}
        drained = [p for p in running if p["spec"]["nodeName"] in cordoned]
        pod = self.rng.choice(drained if drained and self.rng.random() < self.profile.kill_on_cordoned else running)
        self.server.delete(PODS, NS, pod["metadata"]["name"])
        self.fault("kill-pod", f"{pod['metadata']['name']} on {pod['spec']['nodeName']} failed")

    def huge(self) -> None:
        node = self._node()
        if node is None:
            return
        node = copy.deepcopy(node)
        node["status"]["allocatable"][HUGE] = "10Ei"
        self.server.replace(NODES, node)
        self.fault("huge", f"{node['metadata']['name']} allocatable {HUGE}=10Ei")

    def topology_recreate(self) -> None:
        topo = self.server.get(TOPOLOGIES, "", "topo")
        levels = [lv["nodeLabel"] for lv in (topo or {}).get("spec", {}).get("levels", [])]
        self.server.delete(TOPOLOGIES, "", "topo")
        other = (RACK,) if levels and levels[-1] == HOST else (RACK, HOST)
        self.server.create(TOPOLOGIES, mk.topology("topo", other))
        self.fault("topology-recreate", f"topo re-created with levels {[x.rsplit('/', 1)[-1] for x in other]}")

    def scale_up(self) -> None:
        wls = self.server.items(WORKLOADS)
        growing = {w["metadata"]["labels"]["sim/job"] for w in wls if not condition_true(w, "Admitted")}
        pick = [
            w
            for w in wls
            if self.running(w) and self.all_running(w) and w["metadata"]["labels"]["sim/job"] not in growing
        ]
        if not pick:
            return
        wl = self.rng.choice(pick)
        self.names += 1
        name = self.kueue.scale_up(wl, self.rng.choice((1, 2)), self.names)
        self.fault("scale-up", f"{wl['metadata']['name']} grows: slice {name} replaces it")

    def delete_replaced(self) -> None:
        done = [w for w in self.server.items(WORKLOADS) if condition_true(w, "Finished")]
        if not done:
            return
        wl = self.rng.choice(done)
        self.server.delete(WORKLOADS, NS, wl["metadata"]["name"])
        self.fault("delete-replaced", f"replaced slice {wl['metadata']['name']} deleted")

    def delete_workload(self) -> None:
        """A user deletes an admitted workload whose assignment has a failing host (a node repair
        of it is due) while a write to another workload is in flight (a repair pass awaiting
        it); now and then any admitted workload."""
        wls = [wl for wl in self.server.items(WORKLOADS) if self.running(wl)]
        if not wls:
            return
        serving = {
            n["metadata"]["labels"].get(HOST)
            for n in self.server.items(NODES)
            if ready_of(n) and not n["spec"].get("unschedulable")
        }
        hit = [wl for wl in wls if self._assigned_hosts(wl) - serving]
        writing = {split_path(w.path)[2] for w in self.server.pending if split_path(w.path)[0] == WORKLOADS}
        during = [wl for wl in hit if writing - {wl["metadata"]["name"]}]
        if during:
            wl = self.rng.choice(during)
        elif self.rng.random() < 0.1:
            wl = self.rng.choice(wls)
        else:
            return
        self.kueue.finish(wl)
        self.fault("delete-workload", f"{wl['metadata']['name']} deleted{' during a repair pass' if during else ''}")

    @staticmethod
    def _assigned_hosts(wl: Any) -> set[str]:
        text = (wl["metadata"].get("annotations") or {}).get(c.TOPOLOGY_ASSIGNMENT_ANNOTATION)
        try:
            pairs = decode_assignment_annotation(text) if text else []
        except ValueError:
            return set()
        return {d.values[ta.levels.index(HOST)] for _, ta in pairs if HOST in ta.levels for d in ta.domains}

    async def handover(self) -> None:
        """The leader is deposed: its tasks are cancelled; its writes in flight may still land."""
        if self.manager_task is None:
            return
        self.manager_task.cancel()
        await self.settle()
        self.fault(
            "handover",
            f"term {self.term} deposed, {sum(w.owner == self.term for w in self.server.pending)} writes in flight",
        )
        await self.start_controller()

    def watch_fault(self) -> None:
        watches = self.server.open_watches()
        if not watches:
            return
        w = self.rng.choice(watches)
        if self.rng.random() < 0.5:
            w.end()
            self.fault("watch-end", w.collection)
        else:
            self.server.expire(w)
            self.fault("watch-410", w.collection)

    # --- the run ---------------------------------------------------------------------------------------

    def check(self) -> Violation | None:
        if self.violation is not None:
            return self.violation
        task = self.manager_task
        if task is not None and task.done() and not task.cancelled() and task.exception() is not None:
            return Violation(CRASH, f"{type(task.exception()).__name__}: {task.exception()}")
        for w in self.server.pending:
            self.sent_at.setdefault(w.rid, _Clock.now)
        return self.monitor.check(_Clock.now, self.live.capacity if self.live else None)

    async def run(self) -> Result:
        self.setup()
        await self.start_controller()
        steps = 0
        violation: Violation | None = None
        for phase, count in (("chaos", self.profile.steps), ("drain", self.profile.drain)):
            if phase == "drain":
                self.note("drain: no more faults; nodes back")
                self.restore_nodes()
            for _ in range(count):
                await self.settle()
                violation = self.check()
                if violation is not None:
                    break
                await self.step(draining=phase == "drain")
                steps += 1
            if violation is not None:
                break
        if violation is None:
            violation = await self.final()
        if self.manager_task is not None:
            self.manager_task.cancel()
            await self.settle()
        reasons = Counter(str(e.get("reason", "")) for e in self.server.events)
        return Result(
            self.seed,
            self.profile.name,
            violation,
            self.history,
            steps,
            _Clock.now,
            self.faults,
            dict(reasons),
        )

    def restore_nodes(self) -> None:
        for _, obj in sorted(self.down.items()):
            obj["metadata"].pop("resourceVersion", None)
            obj["metadata"].pop("uid", None)
            self.server.create(NODES, obj)
        self.down.clear()
        for node in self.server.items(NODES):
            if not ready_of(node) or node["spec"].get("unschedulable"):
                fixed = copy.deepcopy(node)
                fixed["spec"].pop("unschedulable", None)
                fixed["status"]["conditions"] = [mk.condition("Ready", True, time=self.stamp())]
                self.server.replace(NODES, fixed)

    async def final(self) -> Violation | None:
        """Every workload finished: after the controller caught up, no capacity may be held."""
        for wl in self.server.items(WORKLOADS):
            self.kueue.finish(wl)
        self.note("final: every workload finished")
        for _ in range(200):
            await self.settle()
            s = self.server
            backlog = [w for w in s.open_watches() if s.backlog(w) is not None]
            if backlog:
                self.server.deliver(backlog[0])
            elif s.pending:
                complete(s, s.pending[0], "land")
            else:
                nxt = self.next_timer()
                if nxt is None or nxt - _Clock.now > 120:
                    break
                self.advance(nxt - _Clock.now + 0.001)
        await self.settle()
        found = self.check()
        if found is None and self.live is not None:
            found = self.monitor.leaks(self.live.capacity)
        return found


def simulate(seed: int, profile: Profile | str, ignore: frozenset[str] = frozenset()) -> Result:
    """One schedule, on a fresh loop and virtual clock; same arguments, same history.
    ``ignore``: invariants not reported (to look past a known defect for the next one)."""
    chosen = PROFILES[profile] if isinstance(profile, str) else profile
    # Garbage of earlier schedules in this process (their loops, clients, tasks) is collected
    # now, not at some allocation inside this one: its finalizers changed later schedules'
    # histories (elastic seed 70013 after 13 others gave a new digest on every run).
    gc.collect()
    _Clock.now = 0.0
    random.seed(seed)  # the reflector's backoff jitter draws from the global generator
    loop = SimLoop()
    try:
        asyncio.set_event_loop(loop)
        with virtual_clocks():
            return loop.run_until_complete(Simulation(seed, chosen, ignore).run())
    finally:
        try:
            for task in asyncio.all_tasks(loop):
                task.cancel()
            loop.run_until_complete(asyncio.sleep(0))
        finally:
            asyncio.set_event_loop(None)
            loop.close()


def quiet_logs() -> None:
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.CRITICAL))
    logging.disable(logging.CRITICAL)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="deterministic simulation of kueue-tas run")
    ap.add_argument("--runs", type=int, default=100)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--profile", default="", help=f"one of {', '.join(PROFILES)} (default: all in turn)")
    ap.add_argument("--steps", type=int, default=0, help="chaos and drain steps per schedule (default: the profile's)")
    ap.add_argument("--tail", type=int, default=25)
    ap.add_argument("--keep-going", action="store_true", help="do not stop at the first violation")
    ap.add_argument(
        "--ignore",
        action="append",
        default=[],
        help="an invariant not to report (repeatable): hunt past a known defect",
    )
    args = ap.parse_args(argv)
    if os.environ.get("PYTHONHASHSEED") is None:
        print("note: set PYTHONHASHSEED=0 for replays across processes (make dst does)", file=sys.stderr)
    quiet_logs()
    # What the imports built lives for the whole run: kept out of every schedule's collection
    # (a full collection walked it all, a tenth of the run), the same set alone or in a campaign.
    gc.collect()
    gc.freeze()
    names = [args.profile] if args.profile else list(CAMPAIGN)
    print(f"dst: {args.runs} schedules from seed {args.seed}, profiles: {', '.join(names)}")
    for n in names:
        print(f"  {PROFILES[n].describe()}")
    started = time.monotonic()
    faults: dict[str, int] = {}
    found = 0
    steps = 0
    for i in range(args.runs):
        seed = args.seed + i
        profile = PROFILES[names[i % len(names)]]
        if args.steps:
            profile = replace(profile, steps=args.steps, drain=args.steps)
        result = simulate(seed, profile, frozenset(args.ignore))
        steps += result.steps
        for k, v in result.faults.items():
            faults[k] = faults.get(k, 0) + v
        if result.violation is not None:
            found += 1
            print(f"\nVIOLATION seed={seed} profile={profile.name} invariant={result.violation.invariant}")
            print(f"  {result.violation.detail}")
            print(f"  history digest {result.digest}; last {args.tail} of {len(result.history)} steps:")
            for line in result.history[-args.tail :]:
                print(f"    {line}")
            extra = "".join(f" --ignore {name}" for name in args.ignore) + (
                f" --steps {args.steps}" if args.steps else ""
            )
            print(f"  replay: {result.replay()}{f' DST_ARGS={extra.strip()!r}' if extra else ''}")
            if not args.keep_going:
                break
    minutes = (time.monotonic() - started) / 60
    done = i + 1
    print(
        f"\ndst: {done} schedules, {steps} steps, {found} violations, "
        f"{done / minutes if minutes else 0:.0f} schedules/minute ({minutes * 60:.1f}s)"
    )
    print("fault mix: " + ", ".join(f"{k}={v}" for k, v in sorted(faults.items())))
    if done == 1:
        print(f"history digest {result.digest} ({len(result.history)} steps, {result.virtual_seconds:.0f}s virtual)")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
