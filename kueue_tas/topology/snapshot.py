"""Capacity snapshot of one TAS flavor, and the placement entry point.

A snapshot = the static tree of eligible nodes + their free capacity (minus
non-TAS pods and admitted TAS assignments). ``place`` places the PodSets of
one workload in order, each success reducing the capacity for the next, and
stops at the first failure, as Kueue does.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence

import numpy as np

from kueue_tas.api import constants as c
from kueue_tas.topology.assignment import TopologyAssignment
from kueue_tas.topology.capacity import CapacityMatrix, Matrix
from kueue_tas.topology.features import DEFAULT_GATES, FeatureGates
from kueue_tas.topology.find_assignment import PlaceOptions, find_topology_assignment
from kueue_tas.topology.model import (
    HOSTNAME_LABEL,
    PODS,
    NodeInfo,
    PodSetRequest,
    ResourceMap,
    Toleration,
    TopologyRequest,
)
from kueue_tas.topology.placement import PlacementFailure
from kueue_tas.topology.podset_groups import group_podsets, ordered_results
from kueue_tas.topology.results import PodSetResult
from kueue_tas.topology.tree import TopologyTree


def usage_of(assignment: TopologyAssignment, per_pod: ResourceMap) -> Iterable[tuple[Sequence[str], dict[str, int]]]:
    """Per domain: ``count x per_pod`` plus ``pods: count``."""
    for dom in assignment.domains:
        usage = {name: value * dom.count for name, value in per_pod.items() if name != PODS}
        usage[PODS] = usage.get(PODS, 0) + dom.count
        yield dom.values, usage


def charges_snapshot(
    snapshot_flavor: str,
    snap: TopologySnapshot,
    usage_flavor: str,
    a: TopologyAssignment,
    gates: FeatureGates = DEFAULT_GATES,
) -> bool:
    """Whether an assignment made on ``usage_flavor`` holds capacity in this flavor's snapshot:
    its own flavor always; flavors sharing hostnames see each other's hostname-level usage
    (Kueue, with TASHandleOverlappingFlavors; without it each flavor sees only its own)."""
    if snapshot_flavor == usage_flavor:
        return True
    return gates.overlapping_flavors and a.levels == (HOSTNAME_LABEL,) and snap.tree.lowest_is_hostname


class TopologySnapshot:
    def __init__(
        self,
        topology_name: str,
        tree: TopologyTree,
        capacity: CapacityMatrix,
        flavor_tolerations: Sequence[Toleration] = (),
    ) -> None:
        self.topology_name = topology_name
        self.tree = tree
        self.capacity = capacity
        self.flavor_tolerations = tuple(flavor_tolerations)

    @classmethod
    def build(
        cls,
        *,
        topology_name: str,
        levels: Sequence[str],
        nodes: Iterable[NodeInfo],
        flavor_node_labels: Mapping[str, str] | None = None,
        flavor_tolerations: Sequence[Toleration] = (),
    ) -> TopologySnapshot:
        tree = TopologyTree.build(levels, nodes, flavor_node_labels)
        return cls(topology_name, tree, CapacityMatrix(tree), flavor_tolerations)

    @property
    def levels(self) -> tuple[str, ...]:
        return self.tree.level_keys

    def unknown_level(self, topology: TopologyRequest | None) -> tuple[str, str] | None:
        """(annotation suffix, level) of the first requested level this topology does not have."""
        if topology is None:
            return None
        for suffix, level in (
            (c.SUFFIX_REQUIRED_TOPOLOGY, topology.required),
            (c.SUFFIX_PREFERRED_TOPOLOGY, topology.preferred),
            (c.SUFFIX_SLICE_REQUIRED_TOPOLOGY, topology.slice_level),
        ):
            if level is not None and level not in self.levels:
                return suffix, level
        return None

    def add_non_tas_usage(self, node_name: str, usage: ResourceMap, sign: int = 1) -> None:
        """Charge a bound non-TAS pod's usage (its requests plus ``pods: 1``) to a node by name
        (``sign=-1`` releases it)."""
        self.capacity.add_non_tas_usage(node_name, usage, sign)

    def add_tas_usage(self, assignment: TopologyAssignment, per_pod: ResourceMap, sign: int = 1) -> None:
        """Charge an existing assignment. Domains that are not leaves now (node gone or
        NotReady) are skipped, as Kueue skips them."""
        for values, usage in usage_of(assignment, per_pod):
            leaf = self.tree.leaf_index_of(values)
            if leaf is not None:
                self.capacity.add_tas_usage(leaf, usage, sign)

    def place(
        self,
        podsets: Sequence[PodSetRequest],
        *,
        gates: FeatureGates = DEFAULT_GATES,
        simulate_empty: bool = False,
        allocatable_only: bool = False,
        current: Mapping[str, TopologyAssignment] | None = None,
        unhealthy_nodes: Collection[str] = (),
        elastic: bool = False,
    ) -> list[PodSetResult]:
        """Place the PodSets of one workload, group by group (``podset_groups``); each success
        reduces capacity for the next, and after the first failure nothing more is placed.

        Every member of a failing group gets the same failure text. ``allocatable_only``
        places on the empty cluster: a failure there means "never fits".
        """
        opts = PlaceOptions(gates, simulate_empty, allocatable_only)
        got: dict[int, PodSetResult] = {}
        assumed: Matrix | None = None
        for group in group_podsets(podsets):
            workers = podsets[group.workers]
            leader = podsets[group.leader] if group.leader is not None else None
            try:
                assignments = find_topology_assignment(self, workers, leader, assumed, opts)
            except PlacementFailure as failure:
                for idx in group.members:
                    got[idx] = PodSetResult(podsets[idx].name, None, str(failure))
                break
            for idx in group.members:
                ps = podsets[idx]
                assignment = assignments.get(ps.name)
                got[idx] = PodSetResult(ps.name, assignment)
                if assignment is not None:
                    assumed = self._add_assumed(assumed, assignment, ps.requests)
        return ordered_results(podsets, got)

    def _add_assumed(self, assumed: Matrix | None, assignment: TopologyAssignment, per_pod: ResourceMap) -> Matrix:
        self.capacity.vector({**per_pod, PODS: 1})  # make sure every column exists
        ncols = len(self.capacity.columns)
        grown = np.zeros((len(self.tree.leaves), ncols), dtype=np.int64)
        if assumed is not None:
            grown[:, : assumed.shape[1]] = assumed
        for values, usage in usage_of(assignment, per_pod):
            leaf = self.tree.leaf_index_of(values)
            if leaf is not None:
                grown[leaf] += self.capacity.vector(usage)[:ncols]
        return grown
