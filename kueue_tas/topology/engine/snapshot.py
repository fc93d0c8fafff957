"""Capacity snapshot of one TAS flavor, and the placement entry point.

A snapshot = the static tree of eligible nodes + their free capacity (minus
non-TAS pods and admitted TAS assignments). ``place`` places the PodSets of
one workload in order, each success reducing the capacity for the next, and
stops at the first failure, as Kueue does.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence

from kueue_tas.topology.assignment import TopologyAssignment
from kueue_tas.topology.engine.capacity_matrix import CapacityMatrix, Matrix, usage_of
from kueue_tas.topology.engine.elastic import place_elastic
from kueue_tas.topology.engine.find_assignment import DomainLimit, PlaceOptions, find_topology_assignment
from kueue_tas.topology.engine.placement import PlacementFailure
from kueue_tas.topology.engine.podset_groups import PlacementGroup, group_podsets, ordered_results
from kueue_tas.topology.engine.replacement import replace_nodes, touches
from kueue_tas.topology.engine.results import PodSetResult
from kueue_tas.topology.engine.tree import TopologyTree
from kueue_tas.topology.engine.why_not import WhyNot
from kueue_tas.topology.engine.workload_domain import WorkloadTopology, place_in_one_domain, total_request
from kueue_tas.topology.features import DEFAULT_GATES, FeatureGates
from kueue_tas.topology.level_names import LevelNames
from kueue_tas.topology.model import (
    NodeInfo,
    PodSetRequest,
    ResourceMap,
    Toleration,
)


class TopologySnapshot:
    def __init__(
        self,
        topology_name: str,
        tree: TopologyTree,
        capacity: CapacityMatrix,
        flavor_tolerations: Sequence[Toleration] = (),
        level_names: LevelNames | None = None,
    ) -> None:
        self.topology_name = topology_name
        self.tree = tree
        self.capacity = capacity
        self.flavor_tolerations = tuple(flavor_tolerations)
        self.level_names = level_names or LevelNames()

    @classmethod
    def build(
        cls,
        *,
        topology_name: str,
        levels: Sequence[str],
        nodes: Iterable[NodeInfo],
        flavor_node_labels: Mapping[str, str] | None = None,
        flavor_tolerations: Sequence[Toleration] = (),
        level_names: LevelNames | None = None,
    ) -> TopologySnapshot:
        tree = TopologyTree.build(levels, nodes, flavor_node_labels)
        return cls(topology_name, tree, CapacityMatrix(tree), flavor_tolerations, level_names)

    @property
    def levels(self) -> tuple[str, ...]:
        return self.tree.level_keys

    def copy(self) -> TopologySnapshot:
        """A snapshot that later usage changes of this one leave alone (the tree is shared: it
        never changes once built)."""
        return type(self)(
            self.topology_name, self.tree, self.capacity.copy(), self.flavor_tolerations, self.level_names
        )

    def add_non_tas_usage(self, node_name: str, usage: ResourceMap, sign: int = 1) -> None:
        """Charge a bound non-TAS pod's usage (its requests plus ``pods: 1``) to a node by name
        (``sign=-1`` releases it)."""
        self.capacity.add_non_tas_usage(node_name, usage, sign)

    def add_tas_usage(
        self, assignment: TopologyAssignment, per_pod: ResourceMap, sign: int = 1, *, seals: int | None = None
    ) -> None:
        """Charge an existing assignment. Domains whose nodes are not in the tree now (gone or
        NotReady) are skipped, as Kueue skips them.

        An assignment written under other levels (its Topology deleted and re-created with a
        lowest level that is no longer the hostname, or levels reordered) is charged on the
        leaves holding the nodes its domains name (``TopologyTree.leaves_of``, by node
        labels). Kueue's cache keys an admitted workload's usage by domain values alone and
        drops what no leaf of the new tree matches, which would free capacity the workload's
        pods are pinned to and hand it to the next workload; we keep charging it instead (the
        workload's note then says its placement is no longer enforced: ``placement_health``).
        A domain that spans several new leaves (written under a coarser level) is charged whole
        on each: its pods may land on any of them, and capacity given twice is the one outcome
        we never allow; the over-charge lasts until they are bound and charged where they run.
        A domain that names only some nodes of a leaf (written under a finer level: the
        hostname, before the Topology lost it) seals that leaf (``CapacityMatrix.seal``) until
        its pods are bound: a new placement on the leaf is pinned to the leaf alone, and the
        kube-scheduler, which does not see gated pods, could bind it onto those nodes first.
        ``seals``: how the number of such domains changes with this charge (``LiveCapacity``
        charges open slots by difference, and a domain seals once however many it has open);
        by default ``sign``, for a caller charging whole domains."""
        levels = assignment.levels
        for values, usage in usage_of(assignment, per_pod):
            for leaf in self.tree.leaves_of(levels, values):
                self.capacity.add_tas_usage(leaf, usage, sign)
            if seals != 0:
                for leaf in self.tree.partly_named_leaves(levels, values):
                    self.capacity.seal(leaf, sign if seals is None else seals)

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
        workload: WorkloadTopology | None = None,
    ) -> list[PodSetResult]:
        """Place the PodSets of one workload, group by group (``podset_groups``); each success
        reduces capacity for the next, and after the first failure nothing more is placed.

        Every member of a failing group gets the same failure text. ``allocatable_only``
        places on the empty cluster: a failure there means "never fits".

        ``current`` (PodSet name -> assignment; never charged by the caller) selects the two
        follow-up decisions: with ``unhealthy_nodes``, node replacement (``replacement``: each
        assignment is charged whole, as Kueue's cache holds the admitted usage; its healthy
        part is kept and the pods of the unhealthy nodes are placed again); with ``elastic``
        (and both elastic gates on), the replacement of a workload slice (``elastic``).
        ``workload``: kueue-tas's workload-wide constraint (``workload_domain``), for a fresh
        placement (a repair keeps every pod's domain, so it never leaves the workload's).
        """
        opts = PlaceOptions(gates, simulate_empty, allocatable_only)
        fresh = not (unhealthy_nodes and current) and not (elastic and gates.elastic_tas and current)
        if workload is not None and fresh:
            need = total_request(podsets, self.capacity.vector)  # first: it may add columns
            remaining = self.capacity.remaining(
                simulate_empty=simulate_empty, assumed=None, allocatable_only=allocatable_only
            )

            def inside(limit: DomainLimit | None) -> list[PodSetResult]:
                run = _Run(self, podsets, opts, limit)
                run.place_groups(None)
                return ordered_results(podsets, run.got)

            return place_in_one_domain(self.tree, workload, podsets, remaining, need, inside, self.level_names.called)
        run = _Run(self, podsets, opts)
        if unhealthy_nodes and current:
            run.replace_nodes(current, set(unhealthy_nodes))
        else:
            run.place_groups(current if elastic and gates.elastic_tas else None)
        return ordered_results(podsets, run.got)

    def domains_at(self, assignments: Iterable[TopologyAssignment], level: str) -> set[tuple[str, ...]]:
        """The domains of ``level`` (full paths) holding pods of ``assignments``; domains whose
        node is not a leaf now (gone, NotReady) are left out: where they are cannot be told."""
        idx = self.levels.index(level)
        out: set[tuple[str, ...]] = set()
        for ta in assignments:
            for d in ta.domains:
                leaf = self.tree.leaf_index_of(d.values) if d.count else None
                if leaf is not None:
                    out.add(self.tree.leaves.values[leaf][: idx + 1])
        return out


class _Run:
    """The state of one ``place`` call: results so far and the usage they add."""

    def __init__(
        self,
        snap: TopologySnapshot,
        podsets: Sequence[PodSetRequest],
        opts: PlaceOptions,
        limit: DomainLimit | None = None,
    ) -> None:
        """``limit``: every placement stays inside that domain (a workload-wide constraint)."""
        self.snap = snap
        self.limit = limit
        self.podsets = podsets
        self.opts = opts
        self.got: dict[int, PodSetResult] = {}
        self._assumed: Matrix | None = None
        # Usage is folded into the matrix only when a later placement needs it (most
        # workloads have a single PodSet).
        self._pending: list[tuple[TopologyAssignment, ResourceMap]] = []

    @property
    def assumed(self) -> Matrix | None:
        for assignment, per_pod in self._pending:
            self._assumed = self.snap.capacity.add_assumed(self._assumed, assignment, per_pod)
        self._pending.clear()
        return self._assumed

    def _charge(self, assignment: TopologyAssignment, per_pod: ResourceMap) -> None:
        self._pending.append((assignment, per_pod))

    def _ok(self, idx: int, assignment: TopologyAssignment | None, charge: TopologyAssignment | None) -> None:
        ps = self.podsets[idx]
        self.got[idx] = PodSetResult(ps.name, assignment)
        if charge is not None:
            self._charge(charge, ps.requests)

    def _fail(self, indices: Iterable[int], message: str, why_not: WhyNot | None = None) -> None:
        for idx in indices:
            self.got[idx] = PodSetResult(self.podsets[idx].name, None, message, why_not)

    def _place_group(self, group: PlacementGroup) -> bool:
        podsets = self.podsets
        leader = podsets[group.leader] if group.leader is not None else None
        try:
            assignments = find_topology_assignment(
                self.snap, podsets[group.workers], leader, self.assumed, self.opts, limit=self.limit
            )
        except PlacementFailure as failure:
            self._fail(group.members, str(failure), failure.why_not)
            return False
        for idx in group.members:
            assignment = assignments.get(podsets[idx].name)
            self._ok(idx, assignment, assignment)
        return True

    def place_groups(self, previous: Mapping[str, TopologyAssignment] | None) -> None:
        """Kueue's normal path; ``previous`` holds the replaced slice's assignments (elastic)."""
        podsets = self.podsets
        for group in group_podsets(podsets):
            workers = podsets[group.workers]
            leader = podsets[group.leader] if group.leader is not None else None
            outcome = None
            if previous is not None and workers.name in previous:
                leader_previous = previous.get(leader.name) if leader is not None else None
                outcome = place_elastic(
                    self.snap,
                    workers,
                    leader,
                    previous[workers.name],
                    leader_previous,
                    self.assumed,
                    self.opts,
                )
            if outcome is None:
                if not self._place_group(group):
                    return
                continue
            if outcome.failure is not None:
                self._fail([group.workers], outcome.failure)
                return
            for idx in group.members:
                assignment = outcome.assignments.get(podsets[idx].name)
                self._ok(idx, assignment, assignment)

    def replace_nodes(self, current: Mapping[str, TopologyAssignment], unhealthy: set[str]) -> None:
        """Node replacement for every PodSet whose assignment uses an unhealthy node; the
        others keep theirs. A group without any current assignment is placed afresh."""
        podsets, snap = self.podsets, self.snap
        if not self.opts.gates.failed_node_replacement:
            unhealthy = set()  # Kueue never asks for a replacement with the gate off
        # The whole admitted assignment stays charged, the unhealthy nodes' share included:
        # Kueue's cache keeps the Workload's admitted usage until the new assignment is
        # admitted, so a Ready unhealthy node only takes replacement pods it still has room for.
        for ps in podsets:
            cur = current.get(ps.name)
            if cur is not None:
                self._charge(cur, ps.requests)
        for group in group_podsets(podsets):
            if not any(podsets[idx].name in current for idx in group.members):
                if not self._place_group(group):
                    return
                continue
            for idx in group.members:
                ps = podsets[idx]
                cur = current.get(ps.name)
                if cur is None:
                    continue
                if not touches(cur, unhealthy):
                    self._ok(idx, cur, None)
                    continue
                try:
                    merged, added = replace_nodes(snap, ps, cur, unhealthy, self.assumed, self.opts)
                except PlacementFailure as failure:
                    self._fail([idx], str(failure), failure.why_not)
                    return
                self._ok(idx, merged, added)
