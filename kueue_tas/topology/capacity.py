"""Per-leaf free capacity of one flavor, as dense integer matrices.

Rows are the leaves of a TopologyTree, columns are resources. Kept separate
from the tree so that the live controller can update it incrementally from
informer events while the tree only changes with the node set.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import numpy.typing as npt

from kueue_tas.topology.model import ResourceMap
from kueue_tas.topology.tree import TopologyTree

Matrix = npt.NDArray[np.int64]


class CapacityMatrix:
    def __init__(self, tree: TopologyTree) -> None:
        self.tree = tree
        self.columns: dict[str, int] = {}
        n = len(tree.leaves)
        self.alloc: Matrix = np.zeros((n, 0), dtype=np.int64)  # allocatable of the leaf's nodes
        self.free: Matrix = np.zeros((n, 0), dtype=np.int64)  # allocatable minus non-TAS usage
        self.tas: Matrix = np.zeros((n, 0), dtype=np.int64)  # usage of admitted TAS workloads
        names = sorted({r for nodes in tree.leaf_nodes for node in nodes for r in node.allocatable})
        self._ensure_columns(names)
        for leaf, nodes in enumerate(tree.leaf_nodes):
            for node in nodes:
                self._add_row(self.alloc, leaf, node.allocatable, 1)
        self.free = self.alloc.copy()

    def _ensure_columns(self, names: list[str]) -> None:
        new = [n for n in names if n not in self.columns]
        if not new:
            return
        for name in new:
            self.columns[name] = len(self.columns)
        pad = ((0, 0), (0, len(new)))
        self.alloc = np.pad(self.alloc, pad)
        self.free = np.pad(self.free, pad)
        self.tas = np.pad(self.tas, pad)

    def vector(self, amounts: ResourceMap) -> npt.NDArray[np.int64]:
        self._ensure_columns(sorted(amounts))
        vec = np.zeros(len(self.columns), dtype=np.int64)
        for name, value in amounts.items():
            vec[self.columns[name]] = value
        return vec

    def _add_row(self, matrix: Matrix, leaf: int, amounts: ResourceMap, sign: int) -> None:
        for name, value in amounts.items():
            matrix[leaf, self.columns[name]] += sign * value

    def add_non_tas_usage(self, node_name: str, usage: ResourceMap, sign: int = 1) -> bool:
        """Returns False when the node is not part of this flavor's topology."""
        leaf = self.tree.leaf_by_node_name.get(node_name)
        if leaf is None:
            return False
        self._ensure_columns(sorted(usage))
        self._add_row(self.free, leaf, usage, -sign)
        return True

    def add_tas_usage(self, leaf: int, usage: ResourceMap, sign: int = 1) -> None:
        self._ensure_columns(sorted(usage))
        self._add_row(self.tas, leaf, usage, sign)

    def remaining(self, *, simulate_empty: bool, assumed: Matrix | None, allocatable_only: bool = False) -> Matrix:
        """Capacity left for a new placement. ``simulate_empty`` ignores TAS usage (Kueue's
        preemption probe); ``allocatable_only`` ignores all usage (can it ever fit?)."""
        rem = self.alloc.copy() if allocatable_only else self.free.copy() if simulate_empty else self.free - self.tas
        if assumed is not None:
            # Columns added after the assumed usage was recorded hold no assumed usage.
            width = min(rem.shape[1], assumed.shape[1])
            rem[:, :width] -= assumed[:, :width]
        return rem

    def leaf_free(self, leaf: int) -> dict[str, int]:
        """Remaining capacity of one leaf (for explanations and `plan -o text`)."""
        row = self.free[leaf] - self.tas[leaf]
        return {name: int(row[col]) for name, col in self.columns.items()}

    def totals(self) -> Mapping[str, int]:
        row = (self.free - self.tas).sum(axis=0)
        return {name: int(row[col]) for name, col in self.columns.items()}
