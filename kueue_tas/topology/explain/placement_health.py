"""Whether the placement of admitted PodSets can still be enforced by their Topology (pure).

An assignment is made against a Topology and its nodes. Both change after admission: a
Topology can be deleted or lose a level, and the nodes of a domain can disappear, lose their
labels or stop being Ready. The pods already running stay where they are, but a pod that is
recreated there (a retry, a replacement) is released into a domain that may no longer be
enforced. This module names each such problem in one line; the controller puts them on our
check entry and in Events, ``describe`` shows them.

For a PodSet with a required constraint (``required`` or slice levels), the domains that
constraint is about are those of its finest required level: each of them holds its pods'
assignment domains. Such a domain *no longer exists* when no node carries its labels, and is
*no longer whole* when its Ready, schedulable nodes cannot hold the pods assigned there even
with nothing else running (only allocatable is counted: this is about the topology, not
about capacity other workloads use).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from kueue_tas.topology.assignment import TopologyAssignment
from kueue_tas.topology.engine.tree import node_is_eligible
from kueue_tas.topology.model import PODS, NodeInfo, ResourceMap, TopologyRequest

# Per workload, domain problems named one by one up to this many (then counted).
MAX_DOMAIN_PROBLEMS = 5


@dataclass(frozen=True, slots=True)
class PlacedPodSet:
    """One admitted PodSet: its assignment, the levels its request requires its pods to share
    (``required_levels``), and one pod's requests."""

    name: str
    assignment: TopologyAssignment
    required_levels: tuple[str, ...] = ()
    per_pod: ResourceMap | None = None


def required_levels(request: TopologyRequest | None) -> tuple[str, ...]:
    """The levels a request makes its pods share: the required level and every slice level."""
    if request is None:
        return ()
    levels = [request.required, request.slice_level, *(layer.level for layer in request.slice_layers)]
    return tuple(dict.fromkeys(level for level in levels if level))


class NodeIndex:
    """The nodes of one flavor (those carrying its node labels), looked up by the values they
    carry at some levels. Built once per set of nodes and shared by every workload's check."""

    def __init__(self, nodes: Iterable[NodeInfo], flavor_node_labels: Mapping[str, str]) -> None:
        self.flavor_node_labels = dict(flavor_node_labels)
        self._nodes = [n for n in nodes if all(n.labels.get(k) == v for k, v in self.flavor_node_labels.items())]
        self._by_levels: dict[tuple[str, ...], dict[tuple[str, ...], list[NodeInfo]]] = {}

    def in_domain(self, levels: tuple[str, ...], values: tuple[str, ...]) -> list[NodeInfo]:
        groups = self._by_levels.get(levels)
        if groups is None:
            groups = {}
            for n in self._nodes:
                if all(level in n.labels for level in levels):
                    groups.setdefault(tuple(n.labels[level] for level in levels), []).append(n)
            self._by_levels[levels] = groups
        return groups.get(values, [])


def pods_fitting(node: NodeInfo, per_pod: ResourceMap | None, limit: int) -> int:
    """How many pods of ``per_pod`` the node's allocatable holds with nothing else on it (at most ``limit``)."""
    fits = limit
    if PODS in node.allocatable:
        fits = min(fits, node.allocatable[PODS])
    for resource, amount in (per_pod or {}).items():
        if amount > 0 and resource != PODS:
            fits = min(fits, node.allocatable.get(resource, 0) // amount)
    return max(fits, 0)


def _label_text(levels: Sequence[str], values: Sequence[str]) -> str:
    return ",".join(f"{k}={v}" for k, v in zip(levels, values, strict=True))


def placement_problems(
    topology: str,
    topology_levels: tuple[str, ...] | None,
    podsets: Sequence[PlacedPodSet],
    nodes: NodeIndex,
) -> list[str]:
    """One line per reason the placement of ``podsets`` (all on one flavor of Topology
    ``topology``) is no longer enforced; [] when it still is. ``topology_levels`` None: the
    Topology no longer exists."""
    if topology_levels is None:
        return [f'Topology "{topology}" no longer exists']
    gone_levels: dict[str, None] = {}
    domain_problems: list[str] = []
    for ps in podsets:
        missing = [lv for lv in (*ps.required_levels, *ps.assignment.levels) if lv not in topology_levels]
        gone_levels.update(dict.fromkeys(missing))
        if missing or not ps.required_levels:
            continue
        domain_problems.extend(_domain_problems(ps, topology_levels, nodes))
    out = [f"topology level {level} is no longer available" for level in gone_levels]
    if len(domain_problems) > MAX_DOMAIN_PROBLEMS:
        more = len(domain_problems) - MAX_DOMAIN_PROBLEMS
        domain_problems = [*domain_problems[:MAX_DOMAIN_PROBLEMS], f"and {more} more domain problem(s)"]
    return out + domain_problems


def _domain_problems(ps: PlacedPodSet, topology_levels: tuple[str, ...], nodes: NodeIndex) -> list[str]:
    finest = max(topology_levels.index(level) for level in ps.required_levels)
    req_levels = topology_levels[: finest + 1]
    a = ps.assignment
    assigned: dict[tuple[str, ...], int] = {}
    held: dict[tuple[str, ...], int] = {}
    out: list[str] = []
    for d in a.domains:
        members = nodes.in_domain(a.levels, d.values)
        if set(req_levels) <= set(a.levels):
            required = tuple(d.values[a.levels.index(level)] for level in req_levels)
        elif not members:
            out.append(f'PodSet "{ps.name}": domain {_label_text(a.levels, d.values)} no longer exists')
            continue
        else:
            # A hostname-only assignment: the node tells which domain of the required level it is in.
            lost = next((level for level in req_levels if level not in members[0].labels), None)
            if lost is not None:
                out.append(
                    f'PodSet "{ps.name}": the node of domain {_label_text(a.levels, d.values)} no longer '
                    f"carries label {lost}"
                )
                continue
            required = tuple(members[0].labels[level] for level in req_levels)
        assigned[required] = assigned.get(required, 0) + d.count
        fit = sum(
            pods_fitting(n, ps.per_pod, d.count)
            for n in members
            if node_is_eligible(n, nodes.flavor_node_labels, topology_levels)
        )
        held[required] = held.get(required, 0) + min(fit, d.count)
    for required, count in assigned.items():
        where = _label_text(req_levels, required)
        if not nodes.in_domain(req_levels, required):
            out.append(f'PodSet "{ps.name}": required domain {where} no longer exists')
        elif held[required] < count:
            out.append(
                f'PodSet "{ps.name}": required domain {where} is no longer whole: the Ready nodes its pods '
                f"were assigned to hold {held[required]} of {count}"
            )
    return out
