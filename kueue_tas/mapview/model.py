"""What the topology map page shows, as plain data (built by ``build``, drawn by ``render``).

One ``FlavorMap`` per governed flavor: its Topology's domains as nested tiles, top level
first, and the nodes ("hosts") under the lowest domains. When the lowest level is the
hostname, a host is itself the domain of that level (its ``values`` end with the hostname);
otherwise hosts sit inside the lowest domain, which the engine counts as one leaf.

A host is drawn when it carries the flavor's node labels and a label for every level: either
its capacity counts (``counted``: Ready, schedulable, as the engine's tree takes it) or it is
marked (not Ready, cordoned). Nodes lacking a level label have no place on the map and are
only counted (``FlavorMap.unplaced_nodes``).

Amounts are in the engine's units (cpu in millicores, memory in bytes, everything else in
units, ``pods`` included); free is what the admitter would see now (``topology.explain.free``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from kueue_tas.capacity.pod_counts import PodCounts
from kueue_tas.topology.engine import WhyNot


class Mark(StrEnum):
    """Why a host deserves a second look; each is a CSS class of its tile."""

    NOT_READY = "notready"  # Ready condition not True: its capacity does not count
    CORDONED = "cordoned"  # spec.unschedulable: its capacity does not count
    TAINTED = "tainted"  # a NoSchedule/NoExecute taint: only tolerating pods may use it
    FAILED = "failed"  # failed for an admitted workload placed on it (``capacity.node_health``)


class State(StrEnum):
    ADMITTED = "admitted"  # holds a trusted assignment (our check Ready)
    PENDING = "pending"  # holds none: would not fit now, or cannot be tried
    FITS = "fits"  # holds none, but would fit now (waiting for quota or for the admitter)
    PLANNED = "planned"  # ``plan``: placed in this run
    NOT_FIT = "notfit"  # ``plan``: does not fit


@dataclass(frozen=True, slots=True)
class Amount:
    free: int
    allocatable: int


@dataclass(frozen=True, slots=True)
class HostTile:
    node: str  # the node's name
    values: tuple[str, ...]  # its domain's values, top level down (ending with the hostname if a level)
    counted: bool  # a leaf of the engine's tree: its capacity counts
    # Per resource of ``MapModel.resources`` (same order): free is its leaf's (for a leaf of several
    # hosts, theirs together, and so is allocatable), 0 when not counted.
    free: tuple[int, ...]
    allocatable: tuple[int, ...]
    marks: tuple[Mark, ...] = ()
    notes: tuple[str, ...] = ()  # what the marks are: taints, failure details
    shared_leaf: bool = False  # its leaf holds other hosts too
    slots: int | None = None  # pods of the page's shape fitting on it (its leaf), when counted

    def amount(self, i: int) -> Amount:
        return Amount(self.free[i], self.allocatable[i])


@dataclass(frozen=True, slots=True)
class DomainTile:
    level: int  # index into the flavor's levels
    values: tuple[str, ...]  # top level down to this domain
    free: tuple[int, ...]  # over its counted hosts, per resource of ``MapModel.resources``
    allocatable: tuple[int, ...]
    children: tuple[DomainTile, ...] = ()
    hosts: tuple[HostTile, ...] = ()  # only in the lowest domains drawn
    slots: int | None = None  # pods of the shape fitting here
    free_for_shape: bool = False  # nothing running takes a slot of the shape here
    # Held for a preemptor or reserved for a waiting workload ("" for neither): who and until when.
    kept_for: str = ""

    @property
    def key(self) -> str:
        return domain_key(self.values)

    def amount(self, i: int) -> Amount:
        return Amount(self.free[i], self.allocatable[i])


@dataclass(frozen=True, slots=True)
class LevelSummary:
    """The free-slot summary of one level for the page's pod shape."""

    level: str
    fit: int  # pods of the shape that fit over all domains of the level
    free_domains: int  # domains nothing running takes a slot of the shape from
    domains: int


@dataclass(frozen=True, slots=True)
class FlavorMap:
    flavor: str
    topology: str
    levels: tuple[str, ...]  # label keys, top first
    level_names: tuple[str, ...]  # what the page calls them (``kueue-tas.io/level-names``)
    hostname_level: bool  # the lowest level is the hostname: hosts are its domains
    domains: tuple[DomainTile, ...]  # top level, name order
    hosts: tuple[HostTile, ...] = ()  # hosts of a Topology whose only level is the hostname
    unplaced_nodes: int = 0  # nodes of the flavor without every level label
    slots: tuple[LevelSummary, ...] = ()


@dataclass(frozen=True, slots=True)
class DomainCount:
    values: tuple[str, ...]  # as the assignment names it
    path: tuple[str, ...] | None  # top level down (the tile's values); None when its node is gone
    assigned: int
    bound: int = 0
    pending: int = 0

    @property
    def key(self) -> str | None:
        return None if self.path is None else domain_key(self.path)


@dataclass(frozen=True, slots=True)
class PodSetView:
    name: str
    count: int
    flavor: str | None
    topology: str | None
    domains: tuple[DomainCount, ...] = ()  # its assignment, or where it would go now
    why_not: WhyNot | None = None
    message: str = ""
    pods: PodCounts | None = None  # of an admitted workload


@dataclass(frozen=True, slots=True)
class WorkloadView:
    namespace: str
    name: str
    state: State
    kind: str = "Workload"
    queue: str | None = None  # LocalQueue
    cluster_queue: str | None = None
    podsets: tuple[PodSetView, ...] = ()

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True, slots=True)
class MapModel:
    resource: str  # the resource the tiles are coloured by
    resources: tuple[str, ...]  # every resource the page can show, the colour one first (index 0)
    shape: str | None  # the pod shape of the free-slot summary, as written
    flavors: tuple[FlavorMap, ...]
    workloads: tuple[WorkloadView, ...]
    notes: tuple[str, ...] = field(default=())


def map_hosts(fm: FlavorMap) -> list[HostTile]:
    """Every host tile of a flavor, in document order."""
    out: list[HostTile] = []

    def walk(d: DomainTile) -> None:
        for child in d.children:
            walk(child)
        out.extend(d.hosts)

    for d in fm.domains:
        walk(d)
    out.extend(fm.hosts)
    return out


def domain_key(values: tuple[str, ...]) -> str:
    """A domain's name on the page: its values joined by '/' (a label value holds no '/')."""
    return "/".join(values)
