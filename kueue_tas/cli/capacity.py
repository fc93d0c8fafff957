"""``kueue-tas capacity``: the free capacity of every domain of a Topology, as the admitter sees it.

Free = allocatable of the flavor's eligible nodes (Ready, schedulable, the flavor's node
labels, a label for every level) minus bound non-terminal pods that are not kueue-tas pods,
minus the assignments of Workloads our check holds Ready; never below zero on a leaf, and a
domain's free is the sum of its leaves'. The numbers come from the
controller's own model (``kueue_tas.capacity``: its rules feeding a ``LiveCapacity``), so they
are the numbers the next admission decision starts from.

``-o json`` prints, with these keys only::

    {"topologies": [{"name", "levels": [node label, ...], "message",
      "flavors": [{"name", "nodeLabels", "nodes", "resource",
        "levels": [{"key", "name", "domains": [{"values", "nodes", "allocatable", "free", "largest"}]}]}]}],
     "daemonSetReservations": [{"daemonSet", "node", "requests", "since", "until"}]}

``values`` are the domain's level values from the top level down; ``allocatable`` and
``free`` map resource -> integer in Kueue's units (cpu in millicores, memory and storage
in bytes, everything else in units, ``pods`` included); ``largest`` marks the domain with
the most free ``resource`` on its level (the first in name order on a tie); ``message`` is
empty unless the Topology has no flavor of ours. ``daemonSetReservations``: the capacity held for
DaemonSet pods not bound yet (``kueue_tas.capacity.daemonsets``), per DaemonSet (namespace/name)
and node, with its requests and the times it is held since and until (null: unknown / no limit);
the text form ends with the same, one line per DaemonSet.

``--html FILE`` writes the topology map page instead (``kueue_tas.mapview``; '-' for stdout): the
same capacity drawn as nested tiles, every workload our checks hold or wait for with its domains,
and the why-not of a pending one; ``--resource`` colours it, ``--shape`` sets the pod shape of its
free-slot summary.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import numpy as np

from kueue_tas.capacity.daemonsets import ReservationPolicy
from kueue_tas.capacity.feed import capacity_from_lists
from kueue_tas.capacity.live import LiveCapacity
from kueue_tas.cli.cluster_read import (
    ClusterReadError,
    ClusterState,
    load_settings,
    read_for_capacity,
    read_released_pods,
    run_read,
    tas_config,
)
from kueue_tas.cli.daemonset_holds import holds_json, holds_lines
from kueue_tas.cli.render import format_amount
from kueue_tas.topology.engine import TopologySnapshot, saturating_total
from kueue_tas.topology.explain import leaf_free, level_sums
from kueue_tas.topology.model import PODS

if TYPE_CHECKING:
    from kueue_tas.mapview.build import MapOptions

GPU = "nvidia.com/gpu"
BAR_WIDTH = 20
BOLD, RESET = "\x1b[1m", "\x1b[0m"


@dataclass(frozen=True, slots=True)
class DomainCapacity:
    values: tuple[str, ...]  # level values from the top level down to this domain's level
    nodes: int
    allocatable: Mapping[str, int]
    free: Mapping[str, int]
    largest: bool = False


@dataclass(frozen=True, slots=True)
class LevelCapacity:
    key: str
    domains: tuple[DomainCapacity, ...]  # in name order
    name: str | None = None  # the Topology's name for the level (``kueue-tas.io/level-names``)


@dataclass(frozen=True, slots=True)
class FlavorCapacity:
    name: str
    node_labels: Mapping[str, str]
    resource: str  # the resource the bars show
    levels: tuple[LevelCapacity, ...]

    @property
    def nodes(self) -> int:
        return sum(d.nodes for d in self.levels[0].domains) if self.levels else 0


@dataclass(frozen=True, slots=True)
class TopologyCapacity:
    name: str
    levels: tuple[str, ...]
    flavors: tuple[FlavorCapacity, ...]
    message: str = ""


def main_resource(allocatable: Mapping[str, int]) -> str:
    """The resource worth a bar: GPUs when the nodes have any, else cpu."""
    return GPU if allocatable.get(GPU, 0) > 0 else "cpu"


def flavor_capacity(
    name: str, node_labels: Mapping[str, str], snap: TopologySnapshot, resource: str | None = None
) -> FlavorCapacity:
    """Per-level totals of a flavor's snapshot: each domain sums the leaves below it."""
    tree, cap = snap.tree, snap.capacity
    columns = sorted(cap.columns, key=cap.columns.__getitem__)
    n_leaves = len(tree.leaves) if tree.depth else 0
    alloc_rows = cap.alloc.reshape(n_leaves, len(columns))
    free_rows = leaf_free(snap).reshape(n_leaves, len(columns))
    node_counts = np.asarray([len(nodes) for nodes in tree.leaf_nodes], dtype=np.int64).reshape(n_leaves, 1)
    per_level = level_sums(tree, np.hstack([alloc_rows, free_rows, node_counts]))
    total_alloc = dict(zip(columns, (int(v) for v in saturating_total(alloc_rows)), strict=True))
    bar = resource or main_resource(total_alloc)
    levels = []
    for level, totals in zip(tree.levels, per_level, strict=True):
        domains = [
            DomainCapacity(
                values=values,
                nodes=int(row[-1]),
                allocatable={col: int(row[i]) for i, col in enumerate(columns)},
                free={col: int(row[len(columns) + i]) for i, col in enumerate(columns)},
            )
            for values, row in zip(level.values, totals, strict=True)
        ]
        if domains:
            best = max(range(len(domains)), key=lambda i: (domains[i].free.get(bar, 0), -i))
            domains[best] = replace(domains[best], largest=True)
        levels.append(LevelCapacity(level.key, tuple(domains), snap.level_names.name_of(level.key)))
    return FlavorCapacity(name, dict(node_labels), bar, tuple(levels))


# --- text ---------------------------------------------------------------------------------------


def bar(free: int, allocatable: int, width: int = BAR_WIDTH) -> str:
    """``[####......]``: the free share. Some free shows at least one ``#``, a full domain none,
    and only a wholly free domain a full bar, so the extremes are never rounded away."""
    if allocatable <= 0:
        return "[" + " " * width + "]"
    filled = round(width * max(free, 0) / allocatable)
    if free > 0:
        filled = max(filled, 1)
    if free < allocatable:
        filled = min(filled, width - 1)
    return "[" + "#" * filled + "." * (width - filled) + "]"


def _amounts(name: str, free: Mapping[str, int], alloc: Mapping[str, int]) -> str:
    return f"{name} {format_amount(name, free.get(name, 0))}/{format_amount(name, alloc.get(name, 0))}"


def _flavor_lines(fc: FlavorCapacity, color: bool) -> list[str]:
    labels = ", ".join(f"{k}={v}" for k, v in sorted(fc.node_labels.items())) or "none"
    head = (
        f"  Flavor {fc.name}: {fc.nodes} node(s), node labels {labels}; "
        f"bars: free/allocatable {fc.resource}, * = most free {fc.resource} on its level"
    )
    if not fc.levels or not fc.levels[0].domains:
        return [head, "    no eligible node (Ready, schedulable, with the flavor's node labels and every level label)"]
    # Depth-first order is the name order of the full value paths (a parent sorts before its children).
    rows = sorted(((d.values, lvl, d) for lvl in fc.levels for d in lvl.domains), key=lambda r: r[0])
    cells = []
    for values, lvl, d in rows:
        label = f"{'  ' * (len(values) + 1)}{lvl.name or lvl.key}={values[-1]}"
        res = _amounts(fc.resource, d.free, d.allocatable)
        pods = _amounts(PODS, d.free, d.allocatable) if fc.resource != PODS else ""
        cells.append((label, bar(d.free.get(fc.resource, 0), d.allocatable.get(fc.resource, 0)), res, pods, d.largest))
    w_label = max(len(cell[0]) for cell in cells)
    w_res = max(len(cell[2]) for cell in cells)
    w_pods = max(len(cell[3]) for cell in cells)
    lines = [head]
    for label, b, res, pods, largest in cells:
        line = f"{label:<{w_label}}  {b}  {res:<{w_res}}  {pods:<{w_pods}}"
        if largest:
            line = f"{line}  *"
            if color:
                line = f"{BOLD}{line}{RESET}"
        lines.append(line.rstrip())
    return lines


def render_text(topologies: Sequence[TopologyCapacity], *, color: bool = False, depth: int | None = None) -> str:
    """``depth`` shows only that many levels from the top (big clusters: blocks and racks)."""
    out: list[str] = []
    for tc in topologies:
        out.append(f"Topology {tc.name}: {' > '.join(tc.levels)}")
        if tc.message:
            out.append(f"  {tc.message}")
        for fc in tc.flavors:
            shown = fc if depth is None else replace(fc, levels=fc.levels[:depth])
            out.extend(_flavor_lines(shown, color))
    return "\n".join(out) + "\n"


# --- json ---------------------------------------------------------------------------------------


def capacity_json(topologies: Sequence[TopologyCapacity], depth: int | None = None) -> dict[str, Any]:
    return {
        "topologies": [
            {
                "name": tc.name,
                "levels": list(tc.levels),
                "message": tc.message,
                "flavors": [
                    {
                        "name": fc.name,
                        "nodeLabels": dict(fc.node_labels),
                        "nodes": fc.nodes,
                        "resource": fc.resource,
                        "levels": [
                            {
                                "key": lvl.key,
                                "name": lvl.name,
                                "domains": [
                                    {
                                        "values": list(d.values),
                                        "nodes": d.nodes,
                                        "allocatable": dict(d.allocatable),
                                        "free": dict(d.free),
                                        "largest": d.largest,
                                    }
                                    for d in lvl.domains
                                ],
                            }
                            for lvl in fc.levels[:depth]
                        ],
                    }
                    for fc in tc.flavors
                ],
            }
            for tc in topologies
        ]
    }


# --- command ------------------------------------------------------------------------------------


def run(args: argparse.Namespace) -> int:
    options = None
    if getattr(args, "html", None) is not None:
        from kueue_tas.cli.map_page import MapOptionError, map_options  # only the page needs them

        try:
            options = map_options(args.resource, args.shape)
        except MapOptionError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
    try:
        settings = load_settings(args.config, args.kubeconfig)

        async def read(api: Any) -> ClusterState:
            state = await read_for_capacity(api, settings.annotation_prefix, settings.scheduling_gate)
            if options is not None:  # the map counts our pods released but not bound per domain
                state.pods.extend(await read_released_pods(api, settings.annotation_prefix, settings.scheduling_gate))
            return state

        state = run_read(settings, read)
        tas = tas_config(state.config, settings.controller_name)
    except ClusterReadError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    for warning in state.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    names = sorted(state.config.topologies)
    if args.topology is not None:
        if args.topology not in state.config.topologies:
            known = ", ".join(names) or "none"
            print(f'error: Topology "{args.topology}" not found (Topologies: {known})', file=sys.stderr)
            return 1
        names = [args.topology]
    capacity = capacity_from_lists(
        tas.specs,
        tas.checks,
        state.nodes,
        state.pods,
        state.workloads,
        state.daemonsets,
        daemonset_policy=ReservationPolicy.from_settings(settings),
    )
    if options is not None:
        return _write_page(args, capacity, state, tas.check_flavors, options, settings.annotation_prefix)
    result = []
    for name in names:
        topo = state.config.topologies[name]
        flavors = []
        for flavor in sorted(f for f, spec in tas.specs.items() if spec.topology == name):
            snap = capacity.snapshot(flavor)
            assert snap is not None  # every flavor with a spec has a snapshot
            flavors.append(flavor_capacity(flavor, tas.specs[flavor].node_labels, snap, args.resource))
        message = (
            ""
            if flavors
            else (
                f"no flavor: no ClusterQueue lists an AdmissionCheck of controller {settings.controller_name} "
                "that points at this Topology"
            )
        )
        result.append(TopologyCapacity(name, topo.levels, tuple(flavors), message))
    held = capacity.daemonset_reservations()
    if args.output == "json":
        doc = capacity_json(result, args.depth) | {"daemonSetReservations": holds_json(held)}
        json.dump(doc, sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        sys.stdout.write(render_text(result, color=sys.stdout.isatty(), depth=args.depth))
        sys.stdout.write("".join(line + "\n" for line in holds_lines(held, "")))
    return 0


def _write_page(
    args: argparse.Namespace,
    capacity: LiveCapacity,
    state: ClusterState,
    check_flavors: dict[str, set[str]],
    options: MapOptions,
    prefix: str,
) -> int:
    from kueue_tas.cli.map_page import capacity_page
    from kueue_tas.mapview.model import map_hosts

    title = "kueue-tas capacity" + (f": Topology {args.topology}" if args.topology else "")
    page, model = capacity_page(
        capacity,
        state.workloads,
        state.pods,
        check_flavors,
        options,
        title=title,
        topology=args.topology,
        prefix=prefix,
    )
    if args.html == "-":
        sys.stdout.write(page)
        return 0
    try:
        with open(args.html, "w", encoding="utf-8") as out:
            out.write(page)
    except OSError as exc:
        print(f"error: --html {args.html}: {exc.strerror or exc}", file=sys.stderr)
        return 1
    nodes = sum(1 for f in model.flavors for _ in map_hosts(f))
    print(f"wrote {args.html}: {len(model.flavors)} flavor(s), {nodes} node(s), {len(model.workloads)} workload(s)")
    return 0
