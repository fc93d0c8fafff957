"""Our own data shape for Kueue's placement cases, plus small builders.

Units follow the engine: ``cpu`` in millicores, every other resource in base
units. ``PodSetCase.requests`` never contains ``pods`` (the engine adds one pod
per pod); a non-TAS pod's usage does contain ``pods: 1`` (one bound pod).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from kueue_tas.topology.assignment import DomainAssignment, TopologyAssignment
from kueue_tas.topology.model import (
    HOSTNAME_LABEL,
    NodeInfo,
    NodeSelectorTerm,
    PreferredSchedulingTerm,
    Taint,
    Toleration,
    TopologyRequest,
)

# Label keys used by Kueue's table.
HOST = HOSTNAME_LABEL
BLOCK = "cloud.com/topology-block"
RACK = "cloud.com/topology-rack"
SUBBLOCK = "cloud.com/topology-subblock"
SWITCH = "cloud.com/topology-switch"
DATACENTER = "cloud.com/datacenter"
AIZONE = "cloud.com/aizone"
ZONE = "zone"
GPU = "example.com/gpu"

GI = 1024 * 1024 * 1024

ONE_LEVEL = (HOST,)
TWO_LEVELS = (BLOCK, RACK)
THREE_LEVELS = (BLOCK, RACK, HOST)


def node(
    name: str,
    *,
    block: str | None = None,
    rack: str | None = None,
    host: str | None = None,
    labels: Mapping[str, str] | None = None,
    cpu: int | None = None,
    memory: int | None = None,
    pods: int | None = None,
    extra: Mapping[str, int] | None = None,
    taints: tuple[Taint, ...] = (),
    ready: bool = True,
    unschedulable: bool = False,
) -> NodeInfo:
    """A node; ``block``/``rack``/``host`` are shortcuts for the usual level labels."""
    lbls: dict[str, str] = {}
    if block is not None:
        lbls[BLOCK] = block
    if rack is not None:
        lbls[RACK] = rack
    if host is not None:
        lbls[HOST] = host
    lbls.update(labels or {})
    alloc: dict[str, int] = {}
    if cpu is not None:
        alloc["cpu"] = cpu
    if memory is not None:
        alloc["memory"] = memory
    if pods is not None:
        alloc["pods"] = pods
    alloc.update(extra or {})
    return NodeInfo(
        name=name,
        labels=lbls,
        allocatable=alloc,
        taints=taints,
        ready=ready,
        unschedulable=unschedulable,
    )


def on_hosts(*domains: tuple[str, int]) -> TopologyAssignment:
    """Expected assignment for a hostname-lowest topology: ``("x1", 2), ...`` in Kueue's order."""
    return TopologyAssignment(
        levels=(HOST,),
        domains=tuple(DomainAssignment(values=(h,), count=c) for h, c in domains),
    )


def on_domains(levels: tuple[str, ...], *domains: tuple[tuple[str, ...], int]) -> TopologyAssignment:
    """Expected assignment with full level values (lowest level is not the hostname)."""
    return TopologyAssignment(
        levels=levels,
        domains=tuple(DomainAssignment(values=v, count=c) for v, c in domains),
    )


def required(level: str, *, slice_level: str | None = None, slice_size: int | None = None) -> TopologyRequest:
    return TopologyRequest(required=level, slice_level=slice_level, slice_size=slice_size)


def preferred(level: str, *, slice_level: str | None = None, slice_size: int | None = None) -> TopologyRequest:
    return TopologyRequest(preferred=level, slice_level=slice_level, slice_size=slice_size)


def unconstrained(*, slice_level: str | None = None, slice_size: int | None = None) -> TopologyRequest:
    return TopologyRequest(unconstrained=True, slice_level=slice_level, slice_size=slice_size)


def slices_only(slice_level: str, slice_size: int | None) -> TopologyRequest:
    """Only the slice annotations, no required/preferred/unconstrained."""
    return TopologyRequest(slice_level=slice_level, slice_size=slice_size)


@dataclass(frozen=True)
class PodSetCase:
    """One PodSet of a case. ``topology=None`` means no TAS annotation at all;
    Kueue's harness then marks the PodSet as implied (unconstrained)."""

    count: int
    requests: Mapping[str, int]
    topology: TopologyRequest | None = None
    name: str = "main"
    tolerations: tuple[Toleration, ...] = ()
    node_selector: Mapping[str, str] = field(default_factory=dict)
    required_affinity: tuple[NodeSelectorTerm, ...] | None = None
    preferred_affinity: tuple[PreferredSchedulingTerm, ...] = ()
    # The PodSet's assignment before this decision: the admitted one (node replacement, with
    # KueueCase.unhealthy_nodes) or the replaced slice's (elastic scale up/down, KueueCase.elastic).
    current: TopologyAssignment | None = None
    want: TopologyAssignment | None = None
    reason: str = ""

    @property
    def implied(self) -> bool:
        return self.topology is None


@dataclass(frozen=True)
class UsageCase:
    """An already admitted TAS workload: ``count x per_pod + pods: count`` on each domain."""

    assignment: TopologyAssignment
    per_pod: Mapping[str, int]


@dataclass(frozen=True)
class KueueCase:
    name: str
    levels: tuple[str, ...]
    nodes: tuple[NodeInfo, ...]
    podsets: tuple[PodSetCase, ...]
    topology_name: str = "default"  # Kueue's FindTopologyAssignments harness always uses "default"
    node_labels: Mapping[str, str] | None = None
    flavor_tolerations: tuple[Toleration, ...] = ()
    # Bound, non-terminated, non-TAS pods: (node name, requests incl. "pods": 1).
    non_tas_pods: tuple[tuple[str, Mapping[str, int]], ...] = ()
    tas_usage: tuple[UsageCase, ...] = ()
    simulate_empty: bool = False
    # Feature gates that differ from Kueue v0.19.2's defaults (kueue_tas.topology.features).
    gates: Mapping[str, bool] = field(default_factory=dict)
    # Node replacement: the workload is admitted with PodSetCase.current and these nodes failed.
    unhealthy_nodes: tuple[str, ...] = ()
    # Elastic workload slice: PodSetCase.current is the assignment of the slice being replaced.
    elastic: bool = False
    # Usage of TAS workloads on other flavors that share this flavor's nodes (overlapping flavors).
    other_flavor_usage: tuple[UsageCase, ...] = ()
    note: str = ""
