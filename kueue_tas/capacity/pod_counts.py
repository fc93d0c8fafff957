"""A PodSet's pods counted per assigned domain (bound, pending, gated, ...), and each assigned
domain's path along the Topology's levels: what ``describe workload`` and the topology map
(``kueue_tas.mapview``) show under an assignment."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from kueue_tas.api.constants import HOSTNAME_LABEL
from kueue_tas.capacity.hostnames import NodeHosts
from kueue_tas.kube.slim import SlimPod

__all__ = ["PodCounts", "SlimPod", "domain_paths", "podset_pod_counts"]
from kueue_tas.topology.assignment import TopologyAssignment
from kueue_tas.topology.model import NodeInfo


@dataclass
class PodCounts:
    total: int = 0
    bound: int = 0
    pending: int = 0
    gated: int = 0
    finished: int = 0
    bound_elsewhere: int = 0
    unplaced: int = 0


def domain_paths(
    assignment: TopologyAssignment, topology_levels: tuple[str, ...], hosts: NodeHosts
) -> list[tuple[str, ...] | None]:
    """Each domain's values along the Topology's levels. A hostname-only assignment is completed
    from the labels of the Node that hostname names (``hosts``), as the controller resolves it."""
    if assignment.levels == topology_levels:
        return [d.values for d in assignment.domains]
    out: list[tuple[str, ...] | None] = []
    for d in assignment.domains:
        node = hosts.node(d.values[-1]) if assignment.levels[-1:] == (HOSTNAME_LABEL,) else None
        path = tuple(node.labels.get(level) for level in topology_levels) if node is not None else None
        if path is None or any(v is None for v in path) or path[-len(d.values) :] != d.values:
            out.append(None)
        else:
            out.append(tuple(v for v in path if v is not None))
    return out


def podset_pod_counts(
    pods: Iterable[SlimPod],
    assignment: TopologyAssignment | None,
    nodes: Mapping[str, NodeInfo],
) -> tuple[PodCounts, list[int], list[int]]:
    """Pod counts, plus bound and pending counts per assigned domain (assignment order).

    Without an assignment every bound pod is just "bound" and every released one "pending".
    ``nodes``: by Node name (what ``pod.spec.nodeName`` names); a bound pod's domain is read from
    its Node's labels, so an assignment's hostname values are matched against the label."""
    counts = PodCounts()
    n = len(assignment.domains) if assignment else 0
    domains = {d.values: i for i, d in enumerate(assignment.domains)} if assignment else {}
    levels = assignment.levels if assignment else ()
    bound = [0] * n
    pending = [0] * n
    for pod in pods:
        counts.total += 1
        if pod.is_terminal:
            counts.finished += 1
            continue
        if pod.gated and not pod.node_name:
            counts.gated += 1
            continue
        if pod.node_name:
            node = nodes.get(pod.node_name)
            labels: Mapping[str, str] = node.labels if node is not None else {}
        else:
            labels = pod.node_selector_map()
        at = domains.get(tuple(labels.get(lv) or "" for lv in levels)) if assignment else None
        if pod.node_name:
            if assignment is not None and at is None:
                counts.bound_elsewhere += 1
                continue
            counts.bound += 1
            if at is not None:
                bound[at] += 1
        else:
            if assignment is not None and at is None:
                counts.unplaced += 1
                continue
            counts.pending += 1
            if at is not None:
                pending[at] += 1
    return counts, bound, pending
