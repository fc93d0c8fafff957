"""The live capacity model: one placement snapshot per TAS flavor, kept current by events.

Fed by the informers (nodes, bound pods, workloads holding assignments; what each object
contributes is decided in ``kueue_tas.capacity.rules``) and read by the admitter,
``kueue-tas capacity`` and ``kueue-tas plan``. Pod and workload events adjust the built
snapshots in place; a change to the node set (a node added, removed, relabelled, tainted,
turning NotReady, or changing allocatable) marks the snapshots stale, and the next decision
rebuilds them from these tables (no rebuild per decision).

Every bound pod is charged once, on its node: a pod that fills a slot of a trusted
assignment (``pod_slots``) as that workload's TAS usage, any other pod as non-TAS usage. A
workload holds, at its domains, only the slots no pod fills yet. So usage follows the node: a
node relabelled into another rack takes its pods' usage with it, while the slots they fill
stay filled.

"Assumed" usage is an assignment decided but not yet observed as Ready on the
Workload: it holds capacity from the decision on, so two workloads can never be
given the same capacity, and is replaced by the committed usage once observed. A decision
may be made on a copy newer than the informer's (a re-read while the watch lags): copies no
newer than the one decided on, delivered late, are superseded by the decision and change
nothing it holds (``behind``; issue 27, simulator base seed 166).

Elastic slices: a workload that replaces another (``replaces=``) keeps the other's pods
where they are, so while both are held the replaced one holds only what the new one does
not cover (``rules.uncovered_usage``): the pair is charged its union, once, and the kept
pods fill the new slice's slots first. The decision for the new slice runs ``without`` the
replaced one (neither its slots nor the pods filling them are charged: the engine charges
what it keeps); every other decision sees it.
"""

from __future__ import annotations

import dataclasses
import heapq
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from types import MappingProxyType

from kueue_tas.api.constants import HOSTNAME_LABEL
from kueue_tas.api.object_base import resource_version_older_or_same
from kueue_tas.capacity.daemonsets import (
    DEFAULT_POLICY,
    DaemonSetReservations,
    DaemonSetSpec,
    Pair,
    Reservation,
    ReservationPolicy,
)
from kueue_tas.capacity.hostnames import unambiguous
from kueue_tas.capacity.pod_slots import OpenSlots, PodSlots, SlotCharge
from kueue_tas.capacity.rules import FlavorSpec, PodClaim, UsageEntry, charges_snapshot, uncovered_usage
from kueue_tas.topology.assignment import DomainAssignment, TopologyAssignment
from kueue_tas.topology.engine import TopologySnapshot
from kueue_tas.topology.features import DEFAULT_GATES, FeatureGates
from kueue_tas.topology.model import NodeInfo, ResourceMap


class LiveCapacity:
    def __init__(
        self,
        gates: FeatureGates = DEFAULT_GATES,
        *,
        snapshot_class: type[TopologySnapshot] = TopologySnapshot,
        daemonset_policy: ReservationPolicy = DEFAULT_POLICY,
        clock: Callable[[], float] = time.time,
    ) -> None:
        """``daemonset_policy``: which DaemonSets reserve, and for how long; ``clock``: epoch
        seconds, what a DaemonSet reservation's bound is measured against (``expire_reservations``
        re-reads it; the rule itself is pure)."""
        self.gates = gates
        # The class snapshots are built with; a seam for tests that check what reaches ``place``.
        self.snapshot_class = snapshot_class
        self._nodes: dict[str, NodeInfo] = {}
        self._committed: dict[str, tuple[UsageEntry, ...]] = {}  # workload key -> usage
        self._assumed: dict[str, tuple[UsageEntry, ...]] = {}
        # Held on top of a trusted assignment until its successor is seen (node repair): unlike
        # an assumption, no event of the workload clears it, only ``release_extra``.
        self._extra: dict[str, tuple[UsageEntry, ...]] = {}
        self._replaces: dict[str, str] = {}  # workload -> the slice it replaces, while it holds usage
        self._hidden: set[str] = set()  # workloads a decision in progress must not see
        self._decided_on: dict[str, str] = {}  # workload -> resourceVersion its assumption was decided on
        self._decided_uid: dict[str, str] = {}  # workload -> UID of the Workload its assumption is for
        self._fenced: dict[str, tuple[UsageEntry, ...]] = {}  # an earlier leader's decision maybe in flight
        self._fenced_at: dict[str, str | None] = {}  # workload -> the resourceVersion its fence guards
        self._flavors: dict[str, FlavorSpec] = {}
        self._snapshots: dict[str, TopologySnapshot] = {}
        self._slots = PodSlots(self._node_labels, self._apply)
        self._daemonsets = DaemonSetReservations(daemonset_policy)
        self._clock = clock
        self._reserved: dict[Pair, Reservation] = {}  # what each pair holds now
        self._lapses: list[tuple[float, Pair]] = []  # heap of (until, pair); stale entries skipped

    # --- flavors and nodes: structural changes ---------------------------------------------

    def set_flavors(self, specs: Mapping[str, FlavorSpec]) -> None:
        for name in list(self._snapshots):
            if self._flavors.get(name) != specs.get(name):
                del self._snapshots[name]
        self._flavors = dict(specs)

    def flavors(self) -> Mapping[str, FlavorSpec]:
        return self._flavors

    def upsert_node(self, node: NodeInfo) -> None:
        old = self._nodes.get(node.name)
        if old == node:
            return  # heartbeats and other status noise change nothing we use
        self._nodes[node.name] = node
        self._snapshots.clear()
        if old is None or old.labels != node.labels:
            self._slots.node_relabelled(node.name)
        self._reserve(self._daemonsets.set_node(node))

    def delete_node(self, name: str) -> None:
        if self._nodes.pop(name, None) is not None:
            self._snapshots.clear()
            self._slots.node_relabelled(name)
            self._reserve(self._daemonsets.delete_node(name))

    def nodes(self) -> Mapping[str, NodeInfo]:
        """Every node fed in, by name, eligible or not (read-only: change nodes through upserts)."""
        return MappingProxyType(self._nodes)

    def _node_labels(self, name: str) -> Mapping[str, str] | None:
        node = self._nodes.get(name)
        return None if node is None else node.labels

    # --- usage: incremental ---------------------------------------------------------------

    def upsert_pod(
        self, key: str, node_name: str | None, usage: ResourceMap | None, claim: PodClaim | None = None
    ) -> None:
        """A bound, not finished pod, charged on its node (pass None to release); ``claim``: the
        workload slot it says it fills (``rules.pod_claim``), honoured only if it does."""
        if node_name is None or usage is None:
            self.delete_pod(key)
        else:
            self._slots.upsert_pod(key, node_name, usage, claim)

    def delete_pod(self, key: str) -> None:
        self._slots.delete_pod(key)

    def identify(self, key: str, namespace: str, workload_label: str, kept: tuple[str, ...] = ()) -> None:
        """Workload ``key`` is the one our workload label ``workload_label`` names in ``namespace``
        (``rules.workload_identity``): the pods carrying it may fill its slots. ``kept``: the labels
        of earlier elastic slices whose running pods its assignment includes
        (``slice_replacement.kept_slices``); their pods fill its slots once their Workloads are gone."""
        self._slots.identify(key, (namespace, workload_label), tuple((namespace, label) for label in kept))

    def unidentify(self, key: str) -> None:
        self._slots.identify(key, None)

    def set_workload_usage(self, key: str, entries: tuple[UsageEntry, ...], replaces: str | None = None) -> None:
        """Usage of a workload our check admitted (observed Ready); replaces earlier usage and
        any assumption for the same workload. ``replaces``: the slice it replaces (elastic)."""
        self._assumed.pop(key, None)
        self._decided_on.pop(key, None)
        self._decided_uid.pop(key, None)
        self._set(self._committed, key, entries, replaces)

    def remove_workload_usage(self, key: str) -> None:
        self._set(self._committed, key, (), self._replaces.get(key))

    def assume(
        self,
        key: str,
        entries: tuple[UsageEntry, ...],
        replaces: str | None = None,
        decided_on: str | None = None,
        uid: str | None = None,
    ) -> None:
        """Hold ``entries`` for a decision not yet seen Ready; ``decided_on``: the resourceVersion
        of the Workload it was decided on (copies no newer are then ``behind``); ``uid``: that
        Workload's UID (the deletion of an earlier Workload of the name leaves it: ``decided_for_other``)."""
        # I1: a decision's usage is held from here, before the lock is released, until seen Ready.
        self._set(self._assumed, key, entries, replaces)
        for table, value in ((self._decided_on, decided_on), (self._decided_uid, uid)):
            if value:
                table[key] = value
            else:
                table.pop(key, None)

    def forget(self, key: str) -> None:
        self._decided_on.pop(key, None)
        self._decided_uid.pop(key, None)
        self._set(self._assumed, key, (), self._replaces.get(key))

    def decided_for_other(self, key: str, uid: str | None) -> bool:
        """The decision held for ``key`` is for another Workload than the one with ``uid``: one
        created under the name after it (an admission decides from a re-read, ahead of the
        informer that still has the earlier one's deletion to deliver)."""
        held = self._decided_uid.get(key)
        return key in self._assumed and held is not None and uid is not None and held != uid

    def fence(self, key: str, entries: tuple[UsageEntry, ...], resource_version: str | None) -> None:
        """Hold ``entries`` for ``key`` while it stays at ``resource_version``: the assignment an
        earlier leader annotated and whose Ready entry, guarded by exactly that version, may
        still land (``unfence`` once any newer version is seen, or the write can no longer land)."""
        self._fenced_at[key] = resource_version
        self._set(self._fenced, key, entries, self._replaces.get(key))

    def unfence(self, key: str) -> tuple[UsageEntry, ...]:
        """Release ``key``'s fence; what it held (empty: none)."""
        entries = self._fenced.get(key, ())
        self._fenced_at.pop(key, None)
        if key in self._fenced:
            self._set(self._fenced, key, (), self._replaces.get(key))
        return entries

    def fenced(self) -> dict[str, str | None]:
        """Workload -> the resourceVersion its fence guards."""
        return dict(self._fenced_at)

    def behind(self, key: str, resource_version: str | None) -> bool:
        """A copy of ``key`` at ``resource_version`` is no newer than the Workload its assumption
        was decided on: what it shows (an earlier admission's Ready entry, its eviction, a
        Pending entry) is superseded by that decision, so it neither frees nor replaces it."""
        return key in self._assumed and resource_version_older_or_same(resource_version, self._decided_on.get(key))

    def hold_extra(self, key: str, entries: tuple[UsageEntry, ...]) -> None:
        """Hold ``entries`` for ``key`` besides what it holds otherwise, until ``release_extra``:
        the slots a node repair adds, from its decision until the informer shows the new
        assignment (an unrelated event of the workload in between must not free them)."""
        self._set(self._extra, key, entries, self._replaces.get(key))

    def release_extra(self, key: str) -> None:
        if key in self._extra:
            self._set(self._extra, key, (), self._replaces.get(key))

    def holds_extra(self, key: str) -> bool:
        """A node repair's added slots are held for ``key`` (its new assignment not yet seen)."""
        return key in self._extra

    def holds(self, key: str) -> bool:
        return key in self._committed or key in self._assumed

    def entries(self, key: str) -> tuple[UsageEntry, ...]:
        """Everything held for ``key``: its committed, assumed, extra and fenced usage (where a
        preemption would free capacity by evicting it)."""
        return self._held(key)

    def assumes(self, key: str) -> bool:
        """A decision for ``key`` holds capacity that no Ready entry has confirmed yet."""
        return key in self._assumed

    @contextmanager
    def without(self, key: str | None) -> Iterator[None]:
        """Hide one workload's usage for the duration (None: hide nothing): the decision for the
        slice that replaces it must not see it, every other decision must."""
        if key is None or key in self._hidden:
            yield
            return
        self._hidden.add(key)
        self._slots.set_hidden(key, True)
        try:
            yield
        finally:
            self._hidden.discard(key)
            self._slots.set_hidden(key, False)

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
        self._slots.set_replaces(key, self._replaces.get(key))
        self._slots.set_entries(key, self._effective(key))
        # The slices this one replaces (before and now) hold what it does not cover.
        for other in {before, replaces} - {None, key}:
            assert other is not None
            self._slots.set_entries(other, self._effective(other))

    def _held(self, key: str) -> tuple[UsageEntry, ...]:
        return (
            self._committed.get(key, ())
            + self._assumed.get(key, ())
            + self._extra.get(key, ())
            + self._fenced.get(key, ())
        )

    def _effective(self, key: str) -> tuple[UsageEntry, ...]:
        """The slots ``key`` holds, before pods fill them."""
        entries = self._held(key)
        for new, old in self._replaces.items():
            if old == key and entries:
                entries = uncovered_usage(entries, self._held(new))
        return entries

    # --- the snapshots ------------------------------------------------------------------------

    def _apply(self, charge: SlotCharge, sign: int) -> None:
        for name, snap in self._snapshots.items():
            self._apply_to(name, snap, charge, sign)

    def _apply_to(self, name: str, snap: TopologySnapshot, charge: SlotCharge, sign: int) -> None:
        if isinstance(charge, OpenSlots):
            entry = charge.entry
            if charges_snapshot(name, snap, entry.flavor, entry.assignment, self.gates):
                domain = TopologyAssignment(entry.assignment.levels, (DomainAssignment(charge.domain, charge.count),))
                snap.add_tas_usage(domain, entry.per_pod, sign, seals=charge.opened)
        elif charge.entry is None:
            snap.add_non_tas_usage(charge.node, charge.usage, sign)
        elif charges_snapshot(name, snap, charge.entry.flavor, charge.entry.assignment, self.gates):
            leaf = snap.tree.leaf_by_node_name.get(charge.node)
            if leaf is not None:
                snap.capacity.add_tas_usage(leaf, charge.usage, sign)

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

    def _reserve(self, pairs: set[Pair] | tuple[Pair, ...]) -> None:
        # A reservation is charged as a non-TAS pod under a key no pod has (pod keys are
        # namespace/name), so snapshots built later see it like any other charge.
        if not pairs:
            return
        now = self._clock()
        for pair in pairs:
            held = self._daemonsets.held(pair, now)
            uid, node = pair
            if held is None:
                self._reserved.pop(pair, None)
            else:
                before = self._reserved.get(pair)
                self._reserved[pair] = held
                if held.until is not None and (before is None or before.until != held.until):
                    heapq.heappush(self._lapses, (held.until, pair))
            self.upsert_pod(
                f"daemonset:{uid}@{node}", None if held is None else node, None if held is None else held.usage
            )

    def now(self) -> float:
        """The clock DaemonSet reservations are bounded by (epoch seconds)."""
        return self._clock()

    def expire_reservations(self) -> list[Reservation]:
        """Release the DaemonSet reservations whose time is up by the clock (its pod stayed
        unbound): what each held. The controller calls this at ``next_lapse``."""
        now = self._clock()
        lapsed = []
        while self._lapses and self._lapses[0][0] <= now:
            until, pair = heapq.heappop(self._lapses)
            held = self._reserved.get(pair)
            if held is not None and held.until == until:
                lapsed.append(held)
                self._reserve((pair,))
        return lapsed

    def next_lapse(self) -> float | None:
        """When (clock seconds) the next DaemonSet reservation lapses; None: none will."""
        while self._lapses:
            until, pair = self._lapses[0]
            held = self._reserved.get(pair)
            if held is not None and held.until == until:
                return until
            heapq.heappop(self._lapses)
        return None

    def daemonset_reservations(self) -> list[Reservation]:
        """Every DaemonSet reservation held now, by DaemonSet then node."""
        return sorted(self._reserved.values(), key=lambda r: (r.daemonset, r.node))

    # --- reading --------------------------------------------------------------------------

    def slot_filled_by(self, pod_key: str) -> str | None:
        """The workload one of whose slots this bound pod fills; None if it fills none."""
        return self._slots.slot_filled_by(pod_key)

    def every_node_serving(self) -> LiveCapacity:
        """Its flavors over every node it knows, each as if Ready and schedulable, holding
        nothing: the cluster once the nodes cordoned or NotReady now serve again (can a request
        ever fit?). For reading only, like ``copy_for_reading``."""
        return self._reader(
            {
                name: dataclasses.replace(node, ready=True, unschedulable=False, ready_status="True")
                for name, node in self._nodes.items()
            }
        )

    def _reader(self, nodes: dict[str, NodeInfo]) -> LiveCapacity:
        """A model for reading over this one's flavors and ``nodes``, holding no pods or workloads."""
        out = LiveCapacity(self.gates, snapshot_class=self.snapshot_class, clock=self._clock)
        out._flavors = dict(self._flavors)
        out._nodes = nodes
        return out

    def copy_for_reading(self) -> LiveCapacity:
        """What a reader sees now (flavors, nodes, a copy of each flavor's snapshot), apart from
        this model, so that another thread can read it while events keep changing this one (the
        controller's topology map). For reading only: it holds no pods or workloads, so nothing
        may be fed to it. Stale snapshots are built first, here."""
        out = self._reader(dict(self._nodes))
        out._reserved = dict(self._reserved)
        for flavor in self._flavors:
            snap = self.snapshot(flavor)
            if snap is not None:
                out._snapshots[flavor] = snap.copy()
        return out

    def snapshot(self, flavor: str) -> TopologySnapshot | None:
        """The flavor's current snapshot (built on demand); None for a flavor we do not govern."""
        snap = self._snapshots.get(flavor)
        if snap is not None:
            return snap
        spec = self._flavors.get(flavor)
        if spec is None:
            return None
        nodes: Iterable[NodeInfo] = self._nodes.values()
        if spec.levels[-1:] == (HOSTNAME_LABEL,):
            # A hostname several Nodes carry names neither: none of their capacity is offered,
            # or a pod counted on the hostname could land on either (``capacity.hostnames``).
            nodes = unambiguous(nodes)
        snap = self.snapshot_class.build(
            topology_name=spec.topology,
            levels=spec.levels,
            nodes=nodes,
            flavor_node_labels=spec.node_labels,
            flavor_tolerations=spec.tolerations,
            level_names=spec.level_names,
        )
        for charge in self._slots.charges():
            self._apply_to(flavor, snap, charge, 1)
        self._snapshots[flavor] = snap
        return snap
