"""The static topology tree of one flavor: which nodes count and how they nest.

Domains of each level are stored in *name order* (lexicographic order of their
level values), so a domain's index within its level doubles as Kueue's final
tie-break, and the children of a domain are one contiguous index range of the
level below. Built once per node-set change; placements only read it.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from kueue_tas.topology.model import HOSTNAME_LABEL, NodeInfo

IntArray = npt.NDArray[np.int64]


def node_is_eligible(node: NodeInfo, flavor_node_labels: Mapping[str, str], levels: Sequence[str]) -> bool:
    """Ready, schedulable, carrying the flavor's node labels and a label for every level."""
    if not node.ready or node.unschedulable:
        return False
    labels = node.labels
    for key, value in flavor_node_labels.items():
        if labels.get(key) != value:
            return False
    return all(level in labels for level in levels)


def domain_id(values: Sequence[str]) -> str:
    return ",".join(values)


@dataclass(frozen=True, slots=True)
class Level:
    """The domains of one level, in name order."""

    key: str
    values: tuple[tuple[str, ...], ...]  # full level values of each domain (levels 0..i)
    parent: IntArray  # index of the parent in the level above (-1 at the top level)
    child_start: IntArray  # children are [child_start, child_end) of the level below
    child_end: IntArray

    def __len__(self) -> int:
        return len(self.values)


class TopologyTree:
    """Levels of domains plus the mapping from nodes to leaves."""

    def __init__(
        self,
        levels: Sequence[str],
        leaf_values: list[tuple[str, ...]],
        leaf_nodes: list[list[NodeInfo]],
    ) -> None:
        self.level_keys: tuple[str, ...] = tuple(levels)
        self.lowest_is_hostname = bool(levels) and levels[-1] == HOSTNAME_LABEL
        self.levels: list[Level] = []
        # leaf_values are already in name order; build each level above by grouping prefixes.
        per_level_values: list[list[tuple[str, ...]]] = [[] for _ in levels]
        per_level_parent: list[list[int]] = [[] for _ in levels]
        depth = len(levels)
        last: list[tuple[str, ...] | None] = [None] * depth
        for values in leaf_values:
            for lvl in range(depth):
                prefix = values[: lvl + 1]
                if last[lvl] != prefix:
                    last[lvl] = prefix
                    for below in range(lvl + 1, depth):
                        last[below] = None
                    per_level_values[lvl].append(prefix)
                    per_level_parent[lvl].append(len(per_level_values[lvl - 1]) - 1 if lvl > 0 else -1)
        for lvl in range(depth):
            parent = np.asarray(per_level_parent[lvl], dtype=np.int64)
            n = len(per_level_values[lvl])
            if lvl + 1 < depth:
                child_parent = np.asarray(per_level_parent[lvl + 1], dtype=np.int64)
                start = np.searchsorted(child_parent, np.arange(n), side="left").astype(np.int64)
                end = np.searchsorted(child_parent, np.arange(n), side="right").astype(np.int64)
            else:
                start = np.zeros(n, dtype=np.int64)
                end = np.zeros(n, dtype=np.int64)
            self.levels.append(Level(levels[lvl], tuple(per_level_values[lvl]), parent, start, end))
        self.leaf_nodes = leaf_nodes
        self.leaf_ids: list[str] = [v[-1] if self.lowest_is_hostname else domain_id(v) for v in leaf_values]
        self.leaf_by_id: dict[str, int] = {lid: i for i, lid in enumerate(self.leaf_ids)}
        self.leaf_by_node_name: dict[str, int] = {node.name: i for i, nodes in enumerate(leaf_nodes) for node in nodes}
        # Node filters look at the first node of a leaf only (Kueue keeps one node per hostname).
        self.tainted_leaves: list[int] = [i for i, nodes in enumerate(leaf_nodes) if nodes[0].taints]
        self._label_columns: dict[str, tuple[npt.NDArray[np.object_], npt.NDArray[np.bool_]]] = {}
        # levels -> values at those levels -> the leaves holding a node labelled so
        # levels -> domain values -> (leaves holding a node of the domain, those of them holding
        # nodes outside it too): built on first use by ``_relevelled``.
        self._by_labels: dict[tuple[str, ...], dict[tuple[str, ...], tuple[tuple[int, ...], tuple[int, ...]]]] = {}
        self._domain_index: dict[int, dict[tuple[str, ...], int]] = {}  # depth -> domain values -> index, on first use

    def label_column(self, key: str) -> tuple[npt.NDArray[np.object_], npt.NDArray[np.bool_]]:
        """Per leaf, the value of label ``key`` on its first node ("" when absent) and whether
        it is present; ``metadata.name`` gives the node name. Cached: the tree never changes."""
        column = self._label_columns.get(key)
        if column is None:
            firsts = [nodes[0] for nodes in self.leaf_nodes]
            if key == "metadata.name":
                values = [n.name for n in firsts]
                present = [True] * len(firsts)
            else:
                values = [n.labels.get(key, "") for n in firsts]
                present = [key in n.labels for n in firsts]
            column = (np.array(values, dtype=object), np.array(present, dtype=np.bool_))
            self._label_columns[key] = column
        return column

    @classmethod
    def build(
        cls,
        levels: Sequence[str],
        nodes: Iterable[NodeInfo],
        flavor_node_labels: Mapping[str, str] | None = None,
    ) -> TopologyTree:
        labels = flavor_node_labels or {}
        lowest_is_hostname = bool(levels) and levels[-1] == HOSTNAME_LABEL
        by_leaf: dict[str, tuple[tuple[str, ...], list[NodeInfo]]] = {}
        for node in nodes:
            if not node_is_eligible(node, labels, levels):
                continue
            values = tuple(node.labels[level] for level in levels)
            # With a hostname leaf, nodes sharing a hostname label are one leaf and
            # the first node seen provides the higher-level values (as Kueue does).
            key = values[-1] if lowest_is_hostname else domain_id(values)
            entry = by_leaf.get(key)
            if entry is None:
                by_leaf[key] = (values, [node])
            else:
                entry[1].append(node)
        ordered = sorted(by_leaf.values(), key=lambda e: e[0])
        return cls(levels, [e[0] for e in ordered], [e[1] for e in ordered])

    @functools.cached_property
    def assignment_values(self) -> list[tuple[str, ...]]:
        """Per leaf, the values an assignment names it by: the hostname alone when the lowest
        level is the hostname (as Kueue writes them), the full path otherwise."""
        if self.lowest_is_hostname:
            return [(values[-1],) for values in self.leaves.values]
        return list(self.leaves.values)

    @property
    def leaves(self) -> Level:
        return self.levels[-1]

    @property
    def depth(self) -> int:
        return len(self.levels)

    def leaf_index_of(self, values: Sequence[str]) -> int | None:
        """The leaf that an assignment's domain values name, if it exists now.

        Kueue writes hostname-only values for hostname topologies and full paths
        otherwise; a full path in a hostname topology is accepted when it matches.
        """
        if len(values) == 0:
            return None
        if self.lowest_is_hostname:
            idx = self.leaf_by_id.get(values[-1])
            if idx is not None and len(values) > 1 and self.leaves.values[idx] != tuple(values):
                return None
            return idx
        return self.leaf_by_id.get(domain_id(values))

    def leaves_of(self, levels: Sequence[str], values: Sequence[str]) -> tuple[int, ...]:
        """The leaves an assignment's domain occupies, whatever levels it was written under:
        ``leaf_index_of`` when those are this tree's levels (or the hostname alone under a
        hostname tree), else every leaf holding a node whose labels have ``values`` at
        ``levels`` (an assignment decided before its Topology was re-created with other levels:
        its pods are pinned to those nodes by nodeSelector, whatever the tree is now)."""
        levels = tuple(levels)
        if self._native(levels):
            leaf = self.leaf_index_of(values)
            return () if leaf is None else (leaf,)
        return self._relevelled(levels).get(tuple(values), ((), ()))[0]

    def partly_named_leaves(self, levels: Sequence[str], values: Sequence[str]) -> tuple[int, ...]:
        """The leaves of ``leaves_of`` that also hold nodes outside the domain: a domain written
        under finer levels than this tree's (its Topology lost its hostname level). Pods still to
        come for it are pinned to some nodes of such a leaf, while a placement on the leaf lets
        the kube-scheduler use any of them."""
        levels = tuple(levels)
        if self._native(levels):
            return ()
        return self._relevelled(levels).get(tuple(values), ((), ()))[1]

    def _native(self, levels: tuple[str, ...]) -> bool:
        return levels == self.level_keys or (self.lowest_is_hostname and levels == (HOSTNAME_LABEL,))

    def _relevelled(self, levels: tuple[str, ...]) -> dict[tuple[str, ...], tuple[tuple[int, ...], tuple[int, ...]]]:
        index = self._by_labels.get(levels)
        if index is None:
            found: dict[tuple[str, ...], dict[int, int]] = {}
            for leaf, nodes in enumerate(self.leaf_nodes):
                for node in nodes:
                    if all(level in node.labels for level in levels):
                        per_leaf = found.setdefault(tuple(node.labels[level] for level in levels), {})
                        per_leaf[leaf] = per_leaf.get(leaf, 0) + 1
            index = {
                key: (
                    tuple(sorted(per_leaf)),
                    tuple(sorted(leaf for leaf, n in per_leaf.items() if n < len(self.leaf_nodes[leaf]))),
                )
                for key, per_leaf in found.items()
            }
            self._by_labels[levels] = index
        return index

    def leaf_range(self, depth: int, values: Sequence[str]) -> range:
        """The leaves under the domain of level ``depth`` with those values (the values of every
        level down to it; none when there is no such domain): contiguous, as the leaves are in
        name order and each domain's children are a slice of the level below."""
        index = self._domain_index.get(depth)
        if index is None:
            index = self._domain_index[depth] = {v: i for i, v in enumerate(self.levels[depth].values)}
        i = index.get(tuple(values))
        if i is None:
            return range(0)
        lo, hi = i, i + 1
        for below in range(depth, len(self.levels) - 1):
            lo, hi = int(self.levels[below].child_start[lo]), int(self.levels[below].child_end[hi - 1])
        return range(lo, hi)

    def level_index(self, key: str) -> int | None:
        try:
            return self.level_keys.index(key)
        except ValueError:
            return None
