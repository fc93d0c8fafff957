"""One chaos run: a clean namespace, node pool and TAS stack; two controller replicas behind a
severable relay; the planned submissions and faults; the invariant monitor throughout; then a
bounded wait for every workload to finish or wait with a message, and a teardown.

Everything that happens is appended to the run's event log (JSON lines): the plan first (what
``--replay`` re-executes), then each action's outcome, the violations and the verdict.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

import yaml
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from e2e import procs
from e2e import stack as st
from e2e.chaos import evidence, faults, submit
from e2e.chaos.job_backoff import JobBackoffs
from e2e.chaos.profile import MIXED, profile_for
from e2e.chaos.relay import Relay
from e2e.chaos.scenario import BURST, POOL_SHAPE, Action
from e2e.chaos.verdict import Verdict, failed_jobs, judge
from e2e.cluster_health import component_health
from e2e.cluster_state import State
from e2e.controller import LEASE_NAMESPACE, ControllerGroup
from e2e.kube import Kube, as_body, eventually, new_api_client
from e2e.monitor import Monitor
from e2e.nodes import POOL_LABEL, NodePool, default_allocatable
from e2e.rbac import service_account_kubeconfig
from e2e.webhooks import install_pod_gate, remove_pod_gate, webhook_env
from kueue_tas.api import constants as kc
from kueue_tas.controllers.timings import UNKNOWN_WRITE_SETTLE_SECONDS

# A Ready entry write that got no answer (the apiserver restarted under it) leaves the entry
# Pending, silent by design, until the write can no longer land and a re-read settles it
# (UNKNOWN_WRITE_SETTLE_SECONDS, past the apiserver's 60 s request timeout; chaos seed 101).
# The silent-pending bound is that window plus a decision's worth of slack.
PENDING_BOUND_S = UNKNOWN_WRITE_SETTLE_SECONDS + 25.0
# How long the actions of a run may take once the last one started, besides a component's restart.
ACTIONS_SETTLE_S = 120.0
HUGE_RESOURCE = "example.com/huge"


@dataclass
class Options:
    duration_s: float = 45.0
    settle_s: float = 90.0  # the end-of-run wait ends after this long without progress ...
    settle_cap_s: float = 420.0  # ... and after this long in all (a workload flapping forever)
    pending_bound_s: float = PENDING_BOUND_S
    burst_concurrency: int = 25
    profile: str = MIXED  # the controller settings: a profile's name, or drawn per seed


@dataclass
class RunResult:
    seed: int
    log: str
    problems: list[str] = field(default_factory=list)
    violations: list[str] = field(default_factory=list)
    checks: Counter[str] = field(default_factory=Counter)
    faults: Counter[str] = field(default_factory=Counter)
    submissions: int = 0
    outcomes: Counter[str] = field(default_factory=Counter)
    restarts: Counter[str] = field(default_factory=Counter)  # controller replicas restarted, by why
    wall_s: float = 0.0

    @property
    def ok(self) -> bool:
        return not self.problems and not self.violations


class EventLog:
    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._f: TextIO = path.open("w", encoding="utf-8")
        self._t0 = time.monotonic()

    def start_clock(self) -> None:
        self._t0 = time.monotonic()

    def write(self, record: dict[str, Any]) -> None:
        self._f.write(json.dumps({"at": round(time.monotonic() - self._t0, 2), **record}) + "\n")
        self._f.flush()

    def close(self) -> None:
        self._f.close()


def read_plan(path: Path) -> tuple[dict[str, Any], list[Action]]:
    """The run header and the planned actions of an event log (outcomes are ignored)."""
    header: dict[str, Any] = {}
    actions = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        d = json.loads(line)
        if d.get("type") == "run":
            header = d
        elif d.get("type") == "action":
            actions.append(Action.from_json(d))
    if not header:
        raise ValueError(f"{path}: no run header line")
    return header, sorted(actions, key=lambda a: a.t)


async def _relay_kubeconfig(api: client.ApiClient, state: State, relay_port: int, out: Path, gate: str) -> str:
    # The run's gate into the admission policy: the renamed profile's controllers inject their
    # own gate into Jobs, which the base's policy (naming the default gate) refused.
    path = await service_account_kubeconfig(api, state.kubeconfig, out, scheduling_gate=gate)
    cfg = yaml.safe_load(path.read_text(encoding="utf-8"))
    cfg["clusters"][0]["cluster"]["server"] = f"https://127.0.0.1:{relay_port}"
    path.write_text(yaml.safe_dump(cfg, sort_keys=False), encoding="utf-8")
    return str(path)


class ChaosRun:
    def __init__(self, state: State, seed: int, plan: list[Action], opts: Options, log_path: Path) -> None:
        self.state, self.seed, self.plan, self.opts = state, seed, plan, opts
        self.profile = profile_for(seed, opts.profile)
        self.log = EventLog(log_path)
        self.result = RunResult(seed, str(log_path))
        self.rid = f"{seed % 100000}-{uuid.uuid4().hex[:4]}"
        self.namespace = f"chaos-{self.rid}"
        b, r, h = POOL_SHAPE
        # Real fleets carry big and odd extended resources: 10Ei is beyond what a 64-bit count of
        # milli-units holds (such a node was once taken for deleted and its workloads moved).
        self.pool = NodePool(
            name=f"c{self.rid}",
            blocks=b,
            racks_per_block=r,
            hosts_per_rack=h,
            allocatable={**default_allocatable(), HUGE_RESOURCE: "10Ei"},
            name_suffix=self.profile.node_name_suffix,
        )
        self.submitted: dict[str, dict[str, Any]] = {}
        self.tasks: list[asyncio.Task[None]] = []

    async def execute(self) -> RunResult:
        t0 = time.monotonic()
        self.log.write(
            {
                "type": "run",
                "seed": self.seed,
                "duration_s": self.opts.duration_s,
                "pool": POOL_SHAPE,
                "profile": self.profile.name,
            }
        )
        for a in self.plan:
            self.log.write(a.to_json())
        api = await new_api_client(self.state.kubeconfig)
        kube = Kube(api)
        relay = Relay("127.0.0.1", self.state.ports["apiserver"])
        group: ControllerGroup | None = None
        monitor: Monitor | None = None
        rig: faults.Rig | None = None
        supervisor: asyncio.Task[None] | None = None
        try:
            await relay.start()
            run_dir = Path(self.state.run_dir)
            kubeconfig = await _relay_kubeconfig(
                api, self.state, relay.port, run_dir / f"chaos-{self.rid}.kubeconfig", self.profile.scheduling_gate
            )
            # Both replicas serve the pod webhook on one port; its configuration goes in before
            # they start, so the first to hold the certificate publishes the CA into it.
            webhook_port = procs.free_port()
            group = ControllerGroup(
                kubeconfig,
                run_dir / "logs" / "kueue-tas-chaos",
                replicas=2,
                extra_env={**webhook_env(webhook_port), **self.profile.env()},
            )
            while len(group.processes) < group.replicas:
                group.add_process()
            await install_pod_gate(api, webhook_port)
            self.log.write({"type": "controllers", "logs": [str(p.log_path) for p in group.processes]})
            await group.start()
            await kube.core.create_namespace(as_body({"metadata": {"name": self.namespace}}))
            if self.profile.big_jobs:
                preemption = {self.profile.key(kc.SUFFIX_TOPOLOGY_PREEMPTION): "Enabled"}
                stack = await st.priority_stack(
                    kube, self.namespace, group.controller_name, self.pool, gpu_quota=100000, annotations=preemption
                )
            else:
                stack = await st.tas_stack(kube, self.namespace, group.controller_name, self.pool)
            monitor = Monitor(
                api,
                checks=[stack.check],
                namespace=self.namespace,
                node_selector=f"{POOL_LABEL}={self.pool.name}",
                pending_bound_s=self.opts.pending_bound_s,
                scheduling_gate=self.profile.scheduling_gate,
            )
            await monitor.start()
            rig = faults.Rig(
                self.state,
                kube,
                group,
                relay,
                self.pool,
                self.namespace,
                random.Random(self.seed),
                topology=stack.topology,
            )
            supervisor = asyncio.create_task(faults.supervise(rig))
            self.log.write({"type": "phase", "phase": "faults", "controllers": group.controller_name})
            self.log.start_clock()
            await self._play(rig)
            self.log.write({"type": "phase", "phase": "settle"})
            verdict = await self._settle(kube, stack.check)
            self.result.problems += verdict.problems
            self.result.outcomes = verdict.outcomes
            await monitor.stop()
            self.result.violations = [v.line() for v in monitor.violations]
            self.result.checks = Counter(monitor.checker.checks)
            for v in monitor.violations:
                self.log.write({"type": "violation", "kind": v.kind, "subject": v.subject, "detail": v.detail})
            self.log.write({"type": "monitor", "events": dict(monitor.events), "errors": dict(monitor.errors)})
            unhealthy = {k: v for k, v in component_health(self.state).items() if v != "ok"}
            if unhealthy:
                self.result.problems.append(f"cluster components not healthy after the run: {unhealthy}")
        except Exception as e:  # a harness failure fails the run, with its reason in the log
            self.result.problems.append(f"harness error: {type(e).__name__}: {e}")
        finally:
            for t in [*self.tasks, *([supervisor] if supervisor else [])]:
                t.cancel()
            if rig is not None:
                self.result.restarts = Counter(rig.restarts)
            if monitor is not None and monitor.running:
                await monitor.stop()
            if rig is not None:
                faults.resume_all(rig)
            if group is not None:
                group.kill_all()
            await remove_pod_gate(api)  # failurePolicy Fail: nobody answers for it any more
            await relay.stop()
            if not self.result.ok:
                await self._keep_evidence(kube, group)
            await self._teardown(kube, group)
            if group is not None:
                Path(group.kubeconfig).unlink(missing_ok=True)  # it holds a bearer token
            await api.close()
            self.result.wall_s = round(time.monotonic() - t0, 1)
            self.log.write(
                {
                    "type": "result",
                    "ok": self.result.ok,
                    "problems": self.result.problems,
                    "violations": self.result.violations,
                    "faults": dict(self.result.faults),
                    "checks": dict(self.result.checks),
                    "outcomes": dict(self.result.outcomes),
                    "replica_restarts": dict(self.result.restarts),
                    "wall_s": self.result.wall_s,
                }
            )
            self.log.close()
        return self.result

    # ------------------------------------------------------------------ the fault phase

    async def _play(self, rig: faults.Rig) -> None:
        start = time.monotonic()
        for a in self.plan:
            delay = start + a.t - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)
            self.tasks.append(asyncio.create_task(self._act(rig, a)))
        # Restarts queue on one lock, each given T_COMPONENT to come back: three apiserver
        # restarts in a row on a loaded machine outlasted a flat 120 s (chaos seed 4020).
        limit = ACTIONS_SETTLE_S + faults.T_COMPONENT
        _, pending = await asyncio.wait(self.tasks, timeout=limit)
        for t in pending:
            t.cancel()
        if pending:
            self.result.problems.append(
                f"{len(pending)} action(s) still running {limit:.0f}s after the last one started"
            )

    async def _act(self, rig: faults.Rig, a: Action) -> None:
        try:
            if a.kind == "submit":
                outcome = await self._submit(rig, a.args)
            elif a.kind == BURST:
                sem = asyncio.Semaphore(self.opts.burst_concurrency)

                async def one(spec: dict[str, Any]) -> str:
                    async with sem:
                        return await self._submit(rig, spec)

                results = await asyncio.gather(*(one(s) for s in a.args["submissions"]))
                self.result.faults[BURST] += 1
                outcome = f"{len(results)} submissions"
            else:
                self.result.faults[a.kind] += 1
                outcome = await faults.INJECTORS[a.kind](rig, a.args)
            self.log.write({"type": "outcome", "t": a.t, "kind": a.kind, "result": outcome})
        except Exception as e:
            self.log.write({"type": "outcome", "t": a.t, "kind": a.kind, "error": f"{type(e).__name__}: {e}"})
            self.result.problems.append(f"{a.kind} at t={a.t}: {type(e).__name__}: {e}")

    async def _submit(self, rig: faults.Rig, spec: dict[str, Any]) -> str:
        outcome = await submit.create(rig.kube, self.namespace, spec, self.pool, self.profile)
        self.submitted[spec["name"]] = spec
        self.result.submissions += 1
        return f"{spec['workload']} {spec['name']}: {outcome}"

    # ------------------------------------------------------------------ the end

    async def _settle(self, kube: Kube, check: str) -> Verdict:
        """Wait until every workload has ended well; give up after ``settle_s`` without progress.

        Faults leave a backlog (evicted and re-queued Jobs, late admissions after an apiserver
        restart) that drains at the cluster's pace, not a fixed one (chaos seed 252): any change in
        what is still awaited counts as progress, and ``settle_cap_s`` bounds the whole wait.
        The Job controller's failure back-off (up to 6 min with nothing changing) counts as
        progress until it ends (``job_backoff``, chaos seed 828).
        """
        start = last_progress = time.monotonic()
        next_note = start + 5
        awaited: list[str] | None = None
        backoffs = JobBackoffs()
        while True:
            try:
                jobs = await kube.batch.list_namespaced_job(self.namespace)
                failed = failed_jobs([kube.api.sanitize_for_serialization(j) for j in jobs.items])
                verdict = judge(await kube.workloads(self.namespace), self.submitted, check, failed)
            except ApiException as e:
                verdict = Verdict(problems=[f"cannot list Workloads and Jobs: {e.status} {e.reason}"])
                jobs = None
            now = time.monotonic()
            if jobs is not None:
                backoffs.observe({j.metadata.name: j.status.failed or 0 for j in jobs.items if j.status}, now)
            if verdict.problems != awaited:
                awaited, last_progress = verdict.problems, now
            # A Job in the Job controller's failure back-off changes nothing until it ends.
            stalled = now - max(last_progress, backoffs.last_end()) > self.opts.settle_s
            if verdict.ok or stalled or now - start > self.opts.settle_cap_s:
                self.log.write(
                    {
                        "type": "verdict",
                        "outcomes": dict(verdict.outcomes),
                        "problems": verdict.problems,
                        "settle_s": round(now - start, 1),
                        "ended": "ok" if verdict.ok else "stalled" if stalled else "cap",
                    }
                )
                return verdict
            if now > next_note:  # what the run still waits for, in the log
                next_note = now + 5
                self.log.write(
                    {
                        "type": "settling",
                        "waiting": len(verdict.problems),
                        "first": verdict.problems[:3],
                        "job_backoff_s": backoffs.waiting(now),
                    }
                )
            await asyncio.sleep(1.0)

    async def _keep_evidence(self, kube: Kube, group: ControllerGroup | None) -> None:
        logs = sorted(group.log_dir.glob(f"e2e-{group.group_id}-*.log")) if group is not None else []
        dest = self.log.path.with_suffix(".evidence")
        missed = await evidence.keep(kube, self.namespace, logs, dest)
        self.log.write({"type": "evidence", "dir": str(dest), "missed": missed})

    async def _teardown(self, kube: Kube, group: ControllerGroup | None) -> None:
        core = kube.core
        with contextlib.suppress(ApiException):
            await core.delete_namespace(self.namespace, propagation_policy="Background")
        with contextlib.suppress(ApiException):
            await core.delete_collection_namespaced_pod(self.namespace, grace_period_seconds=0)

        async def no_pods() -> bool:
            return not (await core.list_namespaced_pod(self.namespace)).items

        with contextlib.suppress(TimeoutError):
            await eventually(f"pods of {self.namespace} deleted", no_pods, 30)
        with contextlib.suppress(Exception):
            await kube.cleanup()
        if group is not None:
            with contextlib.suppress(ApiException):
                await client.CoordinationV1Api(kube.api).delete_namespaced_lease(group.lease_name, LEASE_NAMESPACE)
