"""The seeded workload trace: Poisson arrivals of small, medium and large jobs (see ``JobMix``).

A job is one PodSet of ``pods`` pods of ``gpus_per_pod`` GPUs, required at ``level`` (None:
unconstrained). Its true runtime is drawn from a lognormal of its size class; its declared
maximum runtime (Kueue's ``spec.maximumExecutionTimeSeconds``) is the true one times a factor
>= 1, or None when runtimes are not declared. The arrival rate is set so that the offered
load, the expected GPU-hours arriving per hour, is ``load`` times the cluster's GPUs.
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterator
from dataclasses import dataclass

from .shapes import BLOCK, HOST, RACK, Shape

SMALL, MEDIUM, LARGE = "small", "medium", "large"
SIZES = (SMALL, MEDIUM, LARGE)


@dataclass(frozen=True, slots=True)
class JobMix:
    """Every parameter of the mix, in one place. Host counts of medium and large jobs are drawn
    uniformly between bounds given as fractions of a rack's hosts (so each shape gets jobs of its
    own rack's scale); a bound is at least the integer after it (medium: at least 2 and 3)."""

    small_share: float = 0.6  # of jobs, by count
    medium_share: float = 0.3  # the rest are large
    small_host_required: float = 0.5  # small jobs required on one host; the others unconstrained
    small_gpus: tuple[int, int] = (1, 8)  # one-GPU pods, capped at a host's GPUs
    medium_hosts: tuple[float, float] = (0.0, 0.25)  # whole-host pods, rack required
    large_multi_rack: float = 0.4  # large jobs spanning racks (block required); the others fill a rack
    large_rack_hosts: tuple[float, float] = (0.5, 1.0)  # rack-sized: rack required
    # Multi-rack: more than a rack's hosts, up to the larger of two racks and the smaller of these
    # shares of a block's and of the cluster's hosts (C: 8 racks of a 16-rack block; A: 2 racks).
    multi_rack_block_share: float = 0.5
    multi_rack_cluster_share: float = 0.2
    runtime_median_h: tuple[float, float, float] = (0.5, 1.0, 2.0)  # small, medium, large
    runtime_sigma: float = 1.0  # of the lognormal's log
    runtime_bounds_h: tuple[float, float] = (1 / 60, 24.0)  # true runtimes clipped to these
    declared_factor: tuple[float, float] = (1.0, 3.0)  # declared max = true x uniform(these)
    large_priority: int = 1  # with --priorities; small and medium jobs have 0


DEFAULT_MIX = JobMix()


@dataclass(frozen=True, slots=True)
class Job:
    id: int
    arrival: float  # hours
    size: str  # SMALL, MEDIUM or LARGE
    pods: int
    gpus_per_pod: int
    level: str | None  # the required level; None: unconstrained
    runtime: float  # hours, the true runtime
    declared: float | None  # hours, the declared maximum (>= runtime); None: not declared
    priority: int = 0

    @property
    def gpus(self) -> int:
        return self.pods * self.gpus_per_pod

    @property
    def work(self) -> float:
        """GPU-hours of one complete run."""
        return self.gpus * self.runtime


def _host_bounds(bounds: tuple[float, float], rack_hosts: int, floor: int) -> tuple[int, int]:
    low = max(floor, math.ceil(bounds[0] * rack_hosts))
    high = max(low + 1 if floor else low, math.floor(bounds[1] * rack_hosts))
    return low, high


def class_hosts(mix: JobMix, shape: Shape) -> dict[str, tuple[int, int]]:
    """Host-count bounds (inclusive) of medium, rack-sized and multi-rack jobs on ``shape``."""
    rack = shape.hosts_per_rack
    medium = _host_bounds(mix.medium_hosts, rack, 2)
    rack_sized = _host_bounds(mix.large_rack_hosts, rack, 0)
    block = rack * shape.racks_per_block
    widest = min(mix.multi_rack_block_share * block, mix.multi_rack_cluster_share * shape.hosts)
    multi = (rack + 1, max(2 * rack, math.floor(widest)))
    return {"medium": medium, "rack": (max(rack_sized[0], medium[1] + 1), rack_sized[1]), "multi": multi}


def _clipped_lognormal_mean(median: float, sigma: float, low: float, high: float) -> float:
    """E[min(max(X, low), high)] for X lognormal with that median and log-sigma."""
    mu = math.log(median)

    def phi(x: float) -> float:
        return 0.5 * (1 + math.erf(x / math.sqrt(2)))

    a, b = (math.log(low) - mu) / sigma, (math.log(high) - mu) / sigma
    inside = median * math.exp(sigma**2 / 2) * (phi(b - sigma) - phi(a - sigma))
    return inside + low * phi(a) + high * (1 - phi(b))


def mean_work(mix: JobMix, shape: Shape) -> float:
    """Expected GPU-hours of one job of the mix on ``shape``."""
    hosts = class_hosts(mix, shape)
    gpus_small = sum(range(mix.small_gpus[0], min(mix.small_gpus[1], shape.gpus_per_host) + 1)) / (
        min(mix.small_gpus[1], shape.gpus_per_host) - mix.small_gpus[0] + 1
    )

    def mean_hosts(bounds: tuple[int, int]) -> float:
        return (bounds[0] + bounds[1]) / 2

    gpus_medium = mean_hosts(hosts["medium"]) * shape.gpus_per_host
    gpus_large = shape.gpus_per_host * (
        (1 - mix.large_multi_rack) * mean_hosts(hosts["rack"]) + mix.large_multi_rack * mean_hosts(hosts["multi"])
    )
    runtimes = [_clipped_lognormal_mean(m, mix.runtime_sigma, *mix.runtime_bounds_h) for m in mix.runtime_median_h]
    large_share = 1 - mix.small_share - mix.medium_share
    return (
        mix.small_share * gpus_small * runtimes[0]
        + mix.medium_share * gpus_medium * runtimes[1]
        + large_share * gpus_large * runtimes[2]
    )


def arrivals(
    shape: Shape,
    seed: int,
    *,
    load: float = 0.9,
    runtimes: bool = True,
    priorities: bool = False,
    mix: JobMix = DEFAULT_MIX,
) -> Iterator[Job]:
    """The endless trace of ``seed`` on ``shape``, in arrival order. The same seed, shape, load and
    mix give the same jobs whatever ``runtimes`` and ``priorities`` say (those only label them)."""
    rng = random.Random(seed)
    rate = load * shape.gpus / mean_work(mix, shape)  # jobs per hour
    hosts = class_hosts(mix, shape)
    low, high = mix.runtime_bounds_h
    now = 0.0
    job_id = 0
    while True:
        now += rng.expovariate(rate)
        u = rng.random()
        kind = rng.random()
        if u < mix.small_share:
            size, gpus_per_pod = SMALL, 1
            pods = rng.randint(mix.small_gpus[0], min(mix.small_gpus[1], shape.gpus_per_host))
            level: str | None = HOST if kind < mix.small_host_required else None
        elif u < mix.small_share + mix.medium_share:
            size, gpus_per_pod, level = MEDIUM, shape.gpus_per_host, RACK
            pods = rng.randint(*hosts["medium"])
        else:
            size, gpus_per_pod = LARGE, shape.gpus_per_host
            multi = kind < mix.large_multi_rack
            level = BLOCK if multi else RACK
            pods = rng.randint(*hosts["multi" if multi else "rack"])
        median = mix.runtime_median_h[SIZES.index(size)]
        runtime = min(max(rng.lognormvariate(math.log(median), mix.runtime_sigma), low), high)
        declared = runtime * rng.uniform(*mix.declared_factor)
        priority = mix.large_priority if priorities and size == LARGE else 0
        yield Job(job_id, now, size, pods, gpus_per_pod, level, runtime, declared if runtimes else None, priority)
        job_id += 1
