"""Free slots: per domain, how many more pods of a given shape fit (pure).

The capacity is what the admitter sees (``free.leaf_free``: allocatable minus every pod's
usage minus TAS assignments, admitted or assumed, never below zero), so these numbers agree
with ``kueue_tas_domain_free`` and ``kueue-tas capacity``. A pod lands on one host, so a
host's slots are counted on its own: the smallest ``free // request`` over the shape's
resources, and at most its free ``pods``; a domain's slots are the sum over its hosts. A
"host" is a leaf of the tree: one node when the lowest level is the hostname, else the nodes
sharing the lowest level's domain, counted as one (as the placement engine counts them).

A domain is *free* for a shape when nothing running there takes any of the shape's slots
(every host fits as many pods of the shape as it would empty) and it has at least one. Not
"no pod at all": DaemonSet pods run on every node of a real cluster, so that would leave no
domain free anywhere; a few CPU cores used by a node agent do not make an 8-GPU node
unavailable to an 8-GPU pod, and they do not make it free for a 1-CPU shape either.

Node taints, selectors and affinities are not applied: a shape has none, and the counts say
what the capacity allows. A shape naming a resource the flavor does not track (no node of it
has any) fits 0 pods anywhere, as the engine would place none.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from kueue_tas.api.object_base import INT32_MAX
from kueue_tas.api.pod_shape import PODS, PodShape, PodShapeError, parse_pod_shape
from kueue_tas.topology.engine.capacity_matrix import Matrix
from kueue_tas.topology.engine.snapshot import TopologySnapshot
from kueue_tas.topology.explain.free import leaf_free, level_sums

__all__ = [
    "DomainSlots",
    "LevelFit",
    "LevelSlots",
    "PodShape",
    "PodShapeError",
    "free_slots",
    "leaf_fit",
    "level_fit",
    "parse_pod_shape",
]

IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]


@dataclass(frozen=True, slots=True)
class DomainSlots:
    values: tuple[str, ...]  # level values from the top level down to this domain
    fit: int  # pods of the shape that still fit (the sum over its hosts)
    free: bool  # nothing running takes a slot of the shape here, and it has at least one


@dataclass(frozen=True, slots=True)
class LevelSlots:
    level: str  # label key
    domains: tuple[DomainSlots, ...]  # in name order

    @property
    def free_domains(self) -> int:
        return sum(d.free for d in self.domains)


@dataclass(frozen=True, slots=True)
class LevelFit:
    """One level's numbers as arrays, in the tree's domain order (what the gauges read)."""

    level: str
    fit: IntArray
    free: BoolArray


def _fit_per_leaf(capacity: Matrix, columns: dict[str, int], shape: PodShape) -> IntArray:
    """Pods of ``shape`` that fit in each row of ``capacity`` (leaves x resource columns)."""
    n = capacity.shape[0]
    wanted = {**shape.requests, PODS: 1}
    if any(name not in columns or columns[name] >= capacity.shape[1] for name in wanted):
        return np.zeros(n, dtype=np.int64)
    counts: IntArray = np.full(n, INT32_MAX, dtype=np.int64)
    for name, amount in wanted.items():
        np.minimum(counts, capacity[:, columns[name]] // amount, out=counts)
    np.maximum(counts, 0, out=counts)
    return counts


def leaf_fit(snapshot: TopologySnapshot, shape: PodShape) -> IntArray:
    """Per leaf: pods of ``shape`` that fit in what is free now. Reads the snapshot only (no
    column is added for a resource it does not track)."""
    return _fit_per_leaf(leaf_free(snapshot), snapshot.capacity.columns, shape)


def level_fit(snapshot: TopologySnapshot, shape: PodShape) -> list[LevelFit]:
    """Per level, top first: each domain's slots and whether it is free, as arrays."""
    tree = snapshot.tree
    if tree.depth == 0:
        return []
    cap = snapshot.capacity
    now = leaf_free(snapshot)
    fit = _fit_per_leaf(now, cap.columns, shape)
    empty = _fit_per_leaf(np.maximum(cap.alloc, 0), cap.columns, shape)
    taken = (fit < empty).astype(np.int64)
    # One pass up the tree for both: the slots, and how many hosts below have some taken.
    sums = level_sums(tree, np.stack([fit, taken], axis=1))
    return [
        LevelFit(level.key, per_level[:, 0], (per_level[:, 0] > 0) & (per_level[:, 1] == 0))
        for level, per_level in zip(tree.levels, sums, strict=True)
    ]


def free_slots(snapshot: TopologySnapshot, shape: PodShape) -> tuple[LevelSlots, ...]:
    """Per level, top first: every domain's slots for ``shape``, in name order."""
    out: list[LevelSlots] = []
    for level, numbers in zip(snapshot.tree.levels, level_fit(snapshot, shape), strict=True):
        domains = tuple(
            DomainSlots(values, fit, free)
            for values, fit, free in zip(level.values, numbers.fit.tolist(), numbers.free.tolist(), strict=True)
        )
        out.append(LevelSlots(level.key, domains))
    return tuple(out)
