"""The live capacity model: one placement snapshot per TAS flavor, kept current by events.

Fed by the informers (nodes, non-TAS pods, workloads holding assignments; what each
object contributes is decided in ``kueue_tas.capacity.rules``) and read by the admitter,
``kueue-tas capacity`` and ``kueue-tas plan``. Pod and workload events adjust the built
snapshots in place; a change to the node set (a node added, removed, relabelled, tainted,
turning NotReady, or changing allocatable) marks the snapshots stale, and the next decision
rebuilds them from the stores (no rebuild per decision).

"Assumed" usage is an assignment decided but not yet observed as Ready on the
Workload: it holds capacity from the decision on, so two workloads can never be
given the same capacity, and is replaced by the committed usage once observed.

Elastic slices: a workload that replaces another (``replaces=``) keeps the other's pods
where they are, so while both are held the replaced one holds only what the new one does
not cover (``rules.uncovered_usage``): the pair is charged its union, once. The decision
for the new slice runs ``without`` the replaced one (the engine charges what it keeps);
every other decision sees it. What each workload holds in the snapshots is recomputed from
these tables on every change (``_recharge``), so nothing is ever charged twice or left
behind.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager

from kueue_tas.capacity.daemonsets import DaemonSetReservations, DaemonSetSpec, Pair
from kueue_tas.capacity.rules import FlavorSpec, UsageEntry, charges_snapshot, uncovered_usage
from kueue_tas.topology.features import DEFAULT_GATES, FeatureGates
from kueue_tas.topology.model import NodeInfo, ResourceMap
from kueue_tas.topology.snapshot import TopologySnapshot


class LiveCapacity:
    def __init__(
        self, gates: FeatureGates = DEFAULT_GATES, *, snapshot_class: type[TopologySnapshot] = TopologySnapshot
    ) -> None:
        self.gates = gates
        # The class snapshots are built with; a seam for tests that check what reaches ``place``.
        self.snapshot_class = snapshot_class
        self._nodes: dict[str, NodeInfo] = {}
        self._pods: dict[str, tuple[str, ResourceMap]] = {}  # non-TAS pod key -> (node name, usage)
        self._committed: dict[str, tuple[UsageEntry, ...]] = {}  # workload key -> usage
        self._assumed: dict[str, tuple[UsageEntry, ...]] = {}
        self._replaces: dict[str, str] = {}  # workload -> the slice it replaces, while it holds usage
        self._hidden: set[str] = set()  # workloads a decision in progress must not see
        self._charged: dict[str, tuple[UsageEntry, ...]] = {}  # what each workload holds in the snapshots
        self._flavors: dict[str, FlavorSpec] = {}
        self._snapshots: dict[str, TopologySnapshot] = {}
        self._daemonsets = DaemonSetReservations()

    # --- flavors and nodes: structural changes ---------------------------------------------

    def set_flavors(self, specs: Mapping[str, FlavorSpec]) -> None:
        for name in list(self._snapshots):
            if self._flavors.get(name) != specs.get(name):
                del self._snapshots[name]
        self._flavors = dict(specs)

    def flavors(self) -> Mapping[str, FlavorSpec]:
        return self._flavors

    def upsert_node(self, node: NodeInfo) -> None:
        if self._nodes.get(node.name) == node:
            return  # heartbeats and other status noise change nothing we use
        self._nodes[node.name] = node
        self._snapshots.clear()
        self._reserve(self._daemonsets.set_node(node))

    def delete_node(self, name: str) -> None:
        if self._nodes.pop(name, None) is not None:
            self._snapshots.clear()
            self._reserve(self._daemonsets.delete_node(name))

    # --- usage: incremental ---------------------------------------------------------------

    def upsert_pod(self, key: str, node_name: str | None, usage: ResourceMap | None) -> None:
        """A non-TAS pod: charged while bound and not terminal (pass None to release)."""
        if node_name is not None and usage is not None and self._pods.get(key) == (node_name, usage):
            return  # a status update that changes nothing we charge
        self.delete_pod(key)
        if node_name is None or usage is None:
            return
        self._pods[key] = (node_name, usage)
        for snap in self._snapshots.values():
            snap.add_non_tas_usage(node_name, usage)

    def delete_pod(self, key: str) -> None:
        old = self._pods.pop(key, None)
        if old is not None:
            for snap in self._snapshots.values():
                snap.add_non_tas_usage(old[0], old[1], sign=-1)

    def set_workload_usage(self, key: str, entries: tuple[UsageEntry, ...], replaces: str | None = None) -> None:
        """Usage of a workload our check admitted (observed Ready); replaces earlier usage and
        any assumption for the same workload. ``replaces``: the slice it replaces (elastic)."""
        self._assumed.pop(key, None)
        self._set(self._committed, key, entries, replaces)

    def remove_workload_usage(self, key: str) -> None:
        self._set(self._committed, key, (), self._replaces.get(key))

    def assume(self, key: str, entries: tuple[UsageEntry, ...], replaces: str | None = None) -> None:
        self._set(self._assumed, key, entries, replaces)

    def forget(self, key: str) -> None:
        self._set(self._assumed, key, (), self._replaces.get(key))

    def holds(self, key: str) -> bool:
        return key in self._committed or key in self._assumed

    @contextmanager
    def without(self, key: str | None) -> Iterator[None]:
        """Hide one workload's usage for the duration (None: hide nothing): the decision for the
        slice that replaces it must not see it, every other decision must."""
        if key is None or key in self._hidden:
            yield
            return
        self._hidden.add(key)
        self._recharge(key)
        try:
            yield
        finally:
            self._hidden.discard(key)
            self._recharge(key)

    def _set(
        self, table: dict[str, tuple[UsageEntry, ...]], key: str, entries: tuple[UsageEntry, ...], replaces: str | None
    ) -> None:
        if entries:
            table[key] = entries
        else:
            table.pop(key, None)
        before = self._replaces.pop(key, None)
        if replaces is not None and replaces != key and self.holds(key):
            self._replaces[key] = replaces
        self._recharge(key)
        # The slices this one replaces (before and now) hold what it does not cover.
        for other in {before, replaces} - {None, key}:
            assert other is not None
            self._recharge(other)

    def _held(self, key: str) -> tuple[UsageEntry, ...]:
        return self._committed.get(key, ()) + self._assumed.get(key, ())

    def _effective(self, key: str) -> tuple[UsageEntry, ...]:
        """What ``key`` holds in the snapshots now."""
        if key in self._hidden:
            return ()
        entries = self._held(key)
        for new, old in self._replaces.items():
            if old == key and entries:
                entries = uncovered_usage(entries, self._held(new))
        return entries

    def _recharge(self, key: str) -> None:
        entries = self._effective(key)
        before = self._charged.pop(key, ())
        if entries:
            self._charged[key] = entries
        if entries == before:
            return
        for entry in before:
            self._charge(entry, -1)
        for entry in entries:
            self._charge(entry, 1)

    def _charge(self, entry: UsageEntry, sign: int) -> None:
        for name, snap in self._snapshots.items():
            if charges_snapshot(name, snap, entry.flavor, entry.assignment, self.gates):
                snap.add_tas_usage(entry.assignment, entry.per_pod, sign)

    # --- DaemonSets: reservations for daemon pods not charged yet (capacity.daemonsets) ----

    def upsert_daemonset(self, ds: DaemonSetSpec) -> None:
        self._reserve(self._daemonsets.set_daemonset(ds))

    def delete_daemonset(self, uid: str) -> None:
        self._reserve(self._daemonsets.delete_daemonset(uid))

    def daemon_pod(self, key: str, daemonset: str | None, charged_on: str | None) -> None:
        """A pod changed: the UID of the DaemonSet controlling it (None for other pods) and the
        node its charge holds (None when it holds none); ``forget_daemon_pod`` once deleted."""
        self._reserve(self._daemonsets.set_pod(key, daemonset, charged_on))

    def forget_daemon_pod(self, key: str) -> None:
        self._reserve(self._daemonsets.delete_pod(key))

    def _reserve(self, pairs: set[Pair]) -> None:
        # A reservation is charged as a non-TAS pod under a key no pod has (pod keys are
        # namespace/name), so snapshots built later see it like any other charge.
        for uid, node in pairs:
            usage = self._daemonsets.reservation((uid, node))
            self.upsert_pod(f"daemonset:{uid}@{node}", None if usage is None else node, usage)

    # --- reading --------------------------------------------------------------------------

    def snapshot(self, flavor: str) -> TopologySnapshot | None:
        """The flavor's current snapshot (built on demand); None for a flavor we do not govern."""
        snap = self._snapshots.get(flavor)
        if snap is not None:
            return snap
        spec = self._flavors.get(flavor)
        if spec is None:
            return None
        snap = self.snapshot_class.build(
            topology_name=spec.topology,
            levels=spec.levels,
            nodes=self._nodes.values(),
            flavor_node_labels=spec.node_labels,
            flavor_tolerations=spec.tolerations,
        )
        for node_name, usage in self._pods.values():
            snap.add_non_tas_usage(node_name, usage)
        self._snapshots[flavor] = snap
        for entries in self._charged.values():
            for entry in entries:
                if charges_snapshot(flavor, snap, entry.flavor, entry.assignment, self.gates):
                    snap.add_tas_usage(entry.assignment, entry.per_pod)
        return snap
