"""A small cluster's capacity model and workloads to place on it through the one pipeline
(``capacity/workload_placement``): for the placement and preemption tests."""

from __future__ import annotations

from typing import Any

import builders as mk

from kueue_tas.api.kinds import parse_object
from kueue_tas.capacity.live import LiveCapacity
from kueue_tas.capacity.workload_placement import PodSetInput, WorkloadRequests, workload_requests
from kueue_tas.cli.planner import Planner

PREFIX = "kueue-tas.io/"


def capacity_of(*objects: dict[str, Any]) -> LiveCapacity:
    """The controller's capacity model of the default plan cluster: 2 blocks x 2 racks x 2 hosts
    of 4 GPUs, plus ``objects``."""
    parsed = [parse_object(o) for o in [*mk.kueue_objects(), *mk.grid_nodes(), *objects]]
    planner = Planner([p for p in parsed if p is not None])
    planner.snapshot("gpu", "test")
    return planner.capacity


def inputs(count: int = 8, annotations: dict[str, str] | None = None, name: str = "main") -> PodSetInput:
    template = mk.pod_template({mk.REQUIRED: mk.RACK} if annotations is None else annotations, gpus=1)
    return PodSetInput(name, count, template, "gpu")


def requests_of(capacity: LiveCapacity, *podsets: PodSetInput, scope: dict[str, str] | None = None) -> WorkloadRequests:
    got = workload_requests(podsets, capacity, prefix=PREFIX, workload_annotations=scope)
    assert isinstance(got, WorkloadRequests), got
    return got
