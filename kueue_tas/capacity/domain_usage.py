"""Which workloads hold usage in which domain of a level: preemption's victims and
reservations' occupants are both looked for by domain.

Assignments are read through the tree's ``leaves_of``, so an assignment written under other
levels (a Topology re-created since) still names the leaves its pods are pinned to.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from kueue_tas.capacity.live import LiveCapacity
from kueue_tas.capacity.workload_placement import Domain
from kueue_tas.topology.assignment import TopologyAssignment
from kueue_tas.topology.engine import TopologySnapshot

__all__ = ["domains_apart", "domains_except", "keys_by_domain"]


def keys_by_domain(
    snap: TopologySnapshot, capacity: LiveCapacity, keys: Iterable[str], flavor: str, depth: int
) -> dict[tuple[str, ...], list[str]]:
    """Domain values at ``depth`` -> the workloads of ``keys`` holding usage of ``flavor`` there,
    in the order of ``keys``."""
    tree = snap.tree
    out: dict[tuple[str, ...], list[str]] = {}
    for key in keys:
        domains: set[tuple[str, ...]] = set()
        for entry in capacity.entries(key):
            if entry.flavor != flavor:
                continue
            for d in entry.assignment.domains:
                for leaf in tree.leaves_of(entry.assignment.levels, d.values):
                    domains.add(tree.leaves.values[leaf][: depth + 1])
        for values in sorted(domains):
            out.setdefault(values, []).append(key)
    return out


def domains_except(snap: TopologySnapshot, domain: Domain) -> list[Domain]:
    """Every other domain of ``domain``'s level: closed, they leave a placement only ``domain``."""
    depth = snap.tree.level_index(domain.level)
    if depth is None:
        return []
    return [Domain(domain.flavor, domain.level, v) for v in snap.tree.levels[depth].values if v != domain.values]


def domains_apart(
    capacity: LiveCapacity, domains: Iterable[Domain], current: Mapping[str, TopologyAssignment]
) -> list[Domain]:
    """The ``domains`` that hold none of ``current``'s pods: a node repair keeps each pod inside
    its workload's own domain, so a domain held for another workload closes to it only where the
    workload does not run already (one it runs in stays open to its own repair)."""
    out = []
    for domain in domains:
        snap = capacity.snapshot(domain.flavor)
        if snap is None:
            continue
        tree = snap.tree
        depth = len(domain.values)
        inside = any(
            tree.leaves.values[leaf][:depth] == domain.values
            for assignment in current.values()
            for d in assignment.domains
            for leaf in tree.leaves_of(assignment.levels, d.values)
        )
        if not inside:
            out.append(domain)
    return out
