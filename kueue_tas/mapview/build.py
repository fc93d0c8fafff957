"""The topology map's model from what the controller and the CLI both hold: a ``LiveCapacity``
(its nodes, flavors and snapshots), the Workloads and the pods. Pure: no I/O, no clock (the
caller passes ``now``).

Free capacity and the free-slot counts come from the flavor's snapshot, so they are the
numbers the admitter would start from (``topology.explain.free``, ``topology.explain.free_slots``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from kueue_tas.api.pod_shape import PodShape, parse_pod_shape
from kueue_tas.api.workload import Workload
from kueue_tas.capacity.domain_records import hold_from, reservation_from, stamp
from kueue_tas.capacity.live import LiveCapacity
from kueue_tas.capacity.pod_counts import SlimPod
from kueue_tas.capacity.rules import FlavorSpec
from kueue_tas.mapview.model import (
    DomainTile,
    FlavorMap,
    HostTile,
    LevelSummary,
    MapModel,
    Mark,
)
from kueue_tas.mapview.workloads import PlannedWorkload, WorkloadInputs, workload_views
from kueue_tas.topology.engine import SCHEDULING_EFFECTS, TopologySnapshot, taint_string
from kueue_tas.topology.explain import leaf_free, level_fit, level_sums
from kueue_tas.topology.model import PODS, NodeInfo

# Taints the node lifecycle controller sets for NotReady and cordoned nodes: those marks say it.
LIFECYCLE_TAINTS = frozenset(
    {"node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable", "node.kubernetes.io/unschedulable"}
)
BASIC = ("cpu", "memory", PODS)


@dataclass
class MapOptions:
    resource: str | None = None  # the colour; default: the first extended resource, else cpu
    shape: PodShape | None = None  # default: 8 of the colour resource if extended, else 1
    notes: list[str] = field(default_factory=list)


def is_extended(resource: str) -> bool:
    """A resource Kubernetes itself does not define (``nvidia.com/gpu``): a qualified name
    outside the ``kubernetes.io`` domain."""
    domain, slash, _ = resource.partition("/")
    return bool(slash) and not (domain == "kubernetes.io" or domain.endswith(".kubernetes.io"))


def page_resources(snapshots: Iterable[TopologySnapshot], chosen: str | None) -> tuple[str, tuple[str, ...]]:
    """(the colour resource, every resource the page shows: that one first, then extended
    resources, cpu, memory and pods). Only resources some node has allocatable of count."""
    offered: set[str] = set()
    for snap in snapshots:
        cap = snap.capacity
        totals = cap.alloc.sum(axis=0) if cap.alloc.size else np.zeros(0, dtype=np.int64)
        offered.update(name for name, col in cap.columns.items() if col < totals.shape[0] and totals[col] > 0)
    extended = sorted(r for r in offered if is_extended(r))
    colour = chosen or (extended[0] if extended else "cpu")
    shown = [colour, *extended, *(r for r in BASIC if r in offered)]
    return colour, tuple(dict.fromkeys(shown))


def short_level_name(snap: TopologySnapshot, level: str) -> str:
    """The Topology's name for a level, else the label's last segment without a "topology-"
    prefix (``cloud.provider.com/topology-rack`` -> ``rack``): tile headers stay short."""
    name = snap.level_names.name_of(level)
    return name if name is not None else level.rsplit("/", 1)[-1].removeprefix("topology-")


def default_shape(resource: str) -> PodShape:
    return parse_pod_shape(f"{resource}={8 if is_extended(resource) else 1}")


def build_map(
    capacity: LiveCapacity,
    workloads: Iterable[Workload],
    pods: Iterable[SlimPod],
    inputs: WorkloadInputs,
    options: MapOptions | None = None,
    planned: Sequence[PlannedWorkload] = (),
) -> MapModel:
    """The page's model. ``inputs.capacity`` must be ``capacity``."""
    options = options or MapOptions()
    specs = capacity.flavors()
    snapshots: dict[str, TopologySnapshot] = {}
    for flavor in sorted(specs):
        snap = capacity.snapshot(flavor)
        if snap is not None:
            snapshots[flavor] = snap
    colour, resources = page_resources(snapshots.values(), options.resource)
    notes = list(options.notes)
    if (
        options.resource is not None
        and snapshots
        and not any(options.resource in snap.capacity.columns for snap in snapshots.values())
    ):
        notes.append(f"No node of a governed flavor has {options.resource}: every tile shows none.")
    shape = options.shape or default_shape(colour)
    workloads = list(workloads)
    views, failed = workload_views(inputs, workloads, pods, planned)
    kept = kept_domains(workloads)
    flavors = tuple(
        flavor_map(specs[name], snap, capacity.nodes().values(), resources, shape, failed, kept.get(name, {}))
        for name, snap in snapshots.items()
    )
    return MapModel(colour, resources, shape.text, flavors, tuple(views), tuple(notes))


def _marks(node: NodeInfo, failed: Mapping[str, list[str]]) -> tuple[tuple[Mark, ...], tuple[str, ...]]:
    marks: list[Mark] = []
    notes: list[str] = []
    if not node.ready:
        marks.append(Mark.NOT_READY)
        notes.append(f"Ready={node.ready_status or 'missing'}")
    if node.unschedulable:
        marks.append(Mark.CORDONED)
        notes.append("cordoned (unschedulable)")
    taints = [t for t in node.taints if t.effect in SCHEDULING_EFFECTS and t.key not in LIFECYCLE_TAINTS]
    if taints:
        marks.append(Mark.TAINTED)
        notes.extend(f"taint {taint_string(t)}" for t in taints)
    if node.name in failed:
        marks.append(Mark.FAILED)
        notes.extend(failed[node.name])
    return tuple(marks), tuple(notes)


def kept_domains(workloads: Iterable[Workload]) -> dict[str, dict[tuple[str, ...], str]]:
    """Flavor -> domain values -> what keeps the domain for a waiting workload: a preemption's hold
    or a reservation, as recorded on the workload (``capacity.domain_records``)."""
    out: dict[str, dict[tuple[str, ...], str]] = {}
    for wl in workloads:
        if wl.is_finished:
            continue
        hold = hold_from(wl)
        if hold is not None:
            text = f"held for {hold.preemptor} until {stamp(hold.until)} (preemption)"
            out.setdefault(hold.domain.flavor, {})[hold.domain.values] = text
        reserved = reservation_from(wl)
        if reserved is not None:
            text = f"reserved for {reserved.holder} since {stamp(reserved.since)}"
            out.setdefault(reserved.domain.flavor, {})[reserved.domain.values] = text
    return out


def flavor_map(
    spec: FlavorSpec,
    snap: TopologySnapshot,
    nodes: Iterable[NodeInfo],
    resources: Sequence[str],
    shape: PodShape,
    failed: Mapping[str, list[str]],
    kept: Mapping[tuple[str, ...], str] | None = None,
) -> FlavorMap:
    tree, cap = snap.tree, snap.capacity
    levels = spec.levels
    depth = len(levels)
    hostname_level = tree.lowest_is_hostname
    # Per level, per domain of the tree: (free..., allocatable...) of ``resources``, as Python ints.
    picked = [cap.columns.get(r) for r in resources]
    have = [i for i, col in enumerate(picked) if col is not None]
    columns = np.array([picked[i] for i in have], dtype=np.int64)
    width = len(resources)

    def rows(matrix: np.ndarray) -> np.ndarray:
        out = np.zeros((matrix.shape[0], width), dtype=np.int64)
        if have:
            out[:, have] = matrix[:, columns]
        return out

    sums = level_sums(tree, np.hstack([rows(leaf_free(snap)), rows(cap.alloc)]))
    numbers = [[(tuple(r[:width]), tuple(r[width:])) for r in level.tolist()] for level in sums]
    index = [{values: i for i, values in enumerate(level.values)} for level in tree.levels]
    fits = level_fit(snap, shape)
    fit_of = [(f.fit.tolist(), f.free.tolist()) for f in fits]
    leaf_sizes = [len(n) for n in tree.leaf_nodes]
    zero = (0,) * width

    hosts: list[HostTile] = []
    unplaced = 0
    for node in nodes:
        labels = node.labels
        if any(labels.get(k) != v for k, v in spec.node_labels.items()):
            continue  # not a node of this flavor
        if any(level not in labels for level in levels):
            unplaced += 1
            continue
        leaf = tree.leaf_by_node_name.get(node.name)
        marks, notes = _marks(node, failed)
        if leaf is None:
            values = tuple(labels[level] for level in levels)
            offered = tuple(int(node.allocatable.get(r, 0)) for r in resources)
            hosts.append(HostTile(node.name, values, False, zero, offered, marks, notes))
            continue
        free, alloc = numbers[-1][leaf]
        slots = fit_of[-1][0][leaf] if hostname_level and fits else None
        hosts.append(
            HostTile(node.name, tree.leaves.values[leaf], True, free, alloc, marks, notes, leaf_sizes[leaf] > 1, slots)
        )
    hosts.sort(key=lambda h: (h.values, h.node))
    # Domains drawn: every level but the hostname one (its domains are the hosts).
    drawn = depth - 1 if hostname_level else depth

    def tiles(level: int, members: list[HostTile]) -> tuple[DomainTile, ...]:
        out = []
        start = 0
        while start < len(members):
            prefix = members[start].values[: level + 1]
            end = start + 1
            while end < len(members) and members[end].values[: level + 1] == prefix:
                end += 1
            group = members[start:end]
            row = index[level].get(prefix)
            free, alloc = numbers[level][row] if row is not None else (zero, zero)
            slots, whole = (fit_of[level][0][row], fit_of[level][1][row]) if row is not None and fits else (0, False)
            inner = level + 1 < drawn
            out.append(
                DomainTile(
                    level,
                    prefix,
                    free,
                    alloc,
                    tiles(level + 1, group) if inner else (),
                    () if inner else tuple(group),
                    slots if fits else None,
                    bool(whole),
                    (kept or {}).get(prefix, ""),
                )
            )
            start = end
        return tuple(out)

    summary = tuple(LevelSummary(f.level, int(f.fit.sum()), int(f.free.sum()), int(f.fit.size)) for f in fits)
    return FlavorMap(
        spec.flavor,
        spec.topology,
        levels,
        tuple(short_level_name(snap, level) for level in levels),
        hostname_level,
        tiles(0, hosts) if drawn > 0 else (),
        tuple(hosts) if drawn == 0 else (),
        unplaced,
        summary,
    )
