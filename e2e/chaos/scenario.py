"""What a chaos run does and when, drawn from its seed (pure: no I/O).

A run's plan is a list of timed ``Action``s: submissions (a random mix of Jobs and JobSets) and
faults. The same seed always gives the same plan; the plan is written to the run's event log
first, so ``--replay`` re-executes exactly it (a log can also be cut down by hand).

The pool is ``POOL_SHAPE`` (blocks x racks x hosts) of 8-GPU nodes: a host holds 8 GPUs, a rack
24, a block 48, the pool 96. Submissions are sized against that: most fit (required, preferred,
unconstrained, implied, slices, PodSet groups), about one in ten can never fit and must end
pending with a message.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

POOL_SHAPE = (2, 2, 3)
GPUS_PER_HOST = 8
FAULTS = (
    "leader_kill",
    "leader_pause",
    "apiserver_restart",
    "watch_cut",
    "pod_delete",
    "node_flap",
    "node_delete",
    "kueue_restart",
    "workload_deactivate",
    "host_cordon",
    "topology_recreate",
)
BURST = "burst"
BURST_SIZE = 50
LEASE_SECONDS = 6  # the ControllerGroup's lease: a pause longer than this loses it
RUN_FOR = ("2s", "3s", "4s", "6s")


@dataclass(frozen=True)
class Action:
    t: float  # seconds after the fault phase starts
    kind: str  # "submit", "burst" or a fault of FAULTS
    args: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"type": "action", "t": self.t, "kind": self.kind, "args": self.args}

    @staticmethod
    def from_json(d: dict[str, Any]) -> Action:
        return Action(float(d["t"]), str(d["kind"]), dict(d.get("args") or {}))


def _fitting_job(rng: random.Random, name: str, small: bool = False) -> dict[str, Any]:
    mode = rng.choice(("required", "preferred", "unconstrained", "implied", "slices"))
    gpu = 1 if small else rng.choice((1, 1, 2))
    spec: dict[str, Any] = {
        "name": name,
        "workload": "job",
        "mode": mode,
        "gpu": gpu,
        "indexed": rng.random() < 0.7,
        "run_for": rng.choice(RUN_FOR),
    }
    if small:
        spec["pods"] = rng.randint(1, 3)
        spec["level"] = rng.choice(("host", "rack"))
        if mode == "slices":
            spec.update(mode="required", level="rack")
        return spec
    if mode == "slices":
        size = rng.choice((2, 4))
        spec.update(level="block", slice_level="rack", slice_size=size, pods=size * rng.randint(1, 3), gpu=1)
        spec["indexed"] = True
        return spec
    level = rng.choice(("host", "rack", "rack", "block"))
    cap = {"host": GPUS_PER_HOST, "rack": 24, "block": 48}[level]
    spec.update(level=level, pods=rng.randint(1, max(1, min(16, cap // gpu))))
    return spec


def _jobset(rng: random.Random, name: str) -> dict[str, Any]:
    mode = rng.choice(("required", "preferred", "group", "unconstrained"))
    level = rng.choice(("rack", "block"))
    return {
        "name": name,
        "workload": "jobset",
        "mode": mode,
        "level": level,
        "gpu": 1,
        "run_for": rng.choice(RUN_FOR),
        # A PodSet group needs a single-pod PodSet (Kueue's leader/workers rule).
        "replicated": [["a", 1, 1], ["b", rng.randint(1, 2), rng.randint(1, 6)]]
        if mode == "group"
        else [["a", rng.randint(1, 2), rng.randint(1, 4)], ["b", 1, rng.randint(1, 4)]],
    }


def _cannot_fit(rng: random.Random, name: str) -> dict[str, Any]:
    """Larger than any domain it may use: it must end Rejected or Retry, with a message."""
    level, pods, gpu = rng.choice((("rack", 13, 2), ("block", 25, 2), ("host", 5, 2), ("block", 100, 1)))
    return {
        "name": name,
        "workload": "job",
        "mode": "required",
        "level": level,
        "pods": pods,
        "gpu": gpu,
        "indexed": True,
        "run_for": "2s",
        "never_fits": True,
    }


def random_submission(rng: random.Random, name: str) -> dict[str, Any]:
    r = rng.random()
    if r < 0.1:
        return _cannot_fit(rng, name)
    if r < 0.35:
        return _jobset(rng, name)
    return _fitting_job(rng, name)


def _fault_args(rng: random.Random, kind: str) -> dict[str, Any]:
    n_nodes = POOL_SHAPE[0] * POOL_SHAPE[1] * POOL_SHAPE[2]
    if kind == "leader_kill":
        return {"restart_after": round(rng.uniform(1, 4), 1)}
    if kind == "leader_pause":
        return {"seconds": round(rng.uniform(LEASE_SECONDS + 1.5, LEASE_SECONDS + 5), 1)}
    if kind == "watch_cut":
        return {"block_s": rng.choice((0.0, 0.0, round(rng.uniform(1, 3), 1)))}
    if kind == "pod_delete":
        return {"count": rng.randint(1, 3), "pick": rng.randrange(1 << 30)}
    if kind == "node_flap":
        return {"node": rng.randrange(n_nodes), "seconds": round(rng.uniform(3, 10), 1)}
    if kind == "workload_deactivate":
        # Mostly shorter than a decision's writes, so the eviction and our Ready race.
        return {"pick": rng.randrange(1 << 30), "seconds": rng.choice((0.0, 0.2, 0.5, round(rng.uniform(1, 4), 1)))}
    if kind == "host_cordon":
        return {"pick": rng.randrange(1 << 30), "seconds": round(rng.uniform(3, 10), 1)}
    if kind == "topology_recreate":
        return {"seconds": round(rng.uniform(2, 6), 1)}
    if kind == "node_delete":
        return {"node": rng.randrange(n_nodes), "recreate_after": round(rng.uniform(4, 12), 1)}
    return {}


def plan_run(
    seed: int,
    duration_s: float,
    faults: tuple[str, ...] = (*FAULTS, BURST),
    mean_arrival_s: float = 2.0,
    mean_fault_gap_s: float = 5.0,
) -> list[Action]:
    """The actions of one run, ordered by time: submissions until 8 s before the end, a fault
    every few seconds from 3 s on, and (if enabled) one burst of ``BURST_SIZE`` submissions."""
    rng = random.Random(seed)
    actions: list[Action] = []
    t, i = 0.0, 0
    for _ in range(4):  # a few at once, so the first faults find work in flight
        actions.append(Action(0.0, "submit", random_submission(rng, f"w{i}")))
        i += 1
    while (t := t + rng.expovariate(1 / mean_arrival_s)) < duration_s - 8:
        actions.append(Action(round(t, 2), "submit", random_submission(rng, f"w{i}")))
        i += 1
    kinds = [k for k in faults if k != BURST]
    t = rng.uniform(2, 4)
    while kinds and t < duration_s:
        kind = rng.choice(kinds)
        actions.append(Action(round(t, 2), kind, _fault_args(rng, kind)))
        t += rng.uniform(0.4, 1.6) * mean_fault_gap_s
    if BURST in faults:
        subs = [_fitting_job(rng, f"burst{j}", small=True) for j in range(BURST_SIZE)]
        actions.append(Action(round(rng.uniform(0.2, 0.6) * duration_s, 2), BURST, {"submissions": subs}))
    return sorted(actions, key=lambda a: a.t)
