"""The seeded traces both variants run: which Jobs, how many pods, which constraint.

Pure: the same seed gives the same trace, so Kueue's built-in TAS and kueue-tas see identical
input in every pair.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Literal

Mode = Literal["required", "preferred"]


@dataclass(frozen=True, slots=True)
class Shape:
    """A cluster and a trace: ``racks`` x ``hosts`` kwok nodes of ``gpus`` GPUs in one block;
    ``jobs`` Jobs of one-GPU pods whose sizes are drawn from ``sizes``, half requiring a rack,
    half preferring one; pods run ``run_seconds``; ``quota``: the ClusterQueue's GPU quota
    (None: more than the trace asks for, so only topology limits)."""

    name: str
    racks: int
    hosts: int
    gpus: int
    jobs: int
    sizes: tuple[int, ...]
    run_seconds: int
    capacity_quota: bool

    @property
    def nodes(self) -> int:
        return self.racks * self.hosts

    @property
    def cluster_gpus(self) -> int:
        return self.nodes * self.gpus


SHAPES: dict[str, Shape] = {
    # Kueue's own CI TAS performance layout (1 block x 10 racks x 64 hosts); everything fits at once.
    "uncontended": Shape("uncontended", 10, 64, 8, 300, (2, 4, 8), 20, capacity_quota=False),
    # 64 nodes for ~1,400 pods: about three waves, so placements are made on partly used racks
    # and Jobs wait for capacity; the quota equals the cluster's GPUs (as an admin would set it).
    "contended": Shape("contended", 4, 16, 8, 300, (2, 4, 8), 20, capacity_quota=True),
    # As many nodes as this machine's apiserver holds comfortably, the uncontended trace on them.
    "large": Shape("large", 40, 125, 8, 300, (2, 4, 8), 20, capacity_quota=False),
}


@dataclass(frozen=True, slots=True)
class JobSpec:
    name: str
    pods: int
    mode: Mode


def make_trace(shape: Shape, seed: int) -> list[JobSpec]:
    """``shape.jobs`` Jobs in submission order: sizes drawn uniformly, modes half and half
    (shuffled, so both kinds arrive interleaved)."""
    rng = random.Random(seed)
    half = shape.jobs // 2
    required: Mode = "required"
    preferred: Mode = "preferred"
    modes = [required] * half + [preferred] * (shape.jobs - half)
    rng.shuffle(modes)
    return [JobSpec(f"j{i:04d}", rng.choice(shape.sizes), mode) for i, mode in enumerate(modes)]


def with_nodes(shape: Shape, nodes: int) -> Shape:
    """``shape`` with about ``nodes`` nodes (hosts per rack kept, racks adjusted; at least one)."""
    racks = max(1, round(nodes / shape.hosts))
    return Shape(
        shape.name, racks, shape.hosts, shape.gpus, shape.jobs, shape.sizes, shape.run_seconds, shape.capacity_quota
    )
