"""Per-leaf free capacity of one flavor, as dense integer matrices.

Rows are the leaves of a TopologyTree, columns are resources. Kept separate
from the tree so that the live controller can update it incrementally from
informer events while the tree only changes with the node set.

Amounts are int64, and int64 sums wrap around: many nodes near the largest quantity
Kubernetes allows, or an assignment's count x request, would turn a rack's capacity
negative. So every cell saturates at +/- ``AMOUNT_LIMIT`` (its exact value is kept aside
while it does, so that adding and then removing an amount always restores the cell), and
``saturating_total`` / ``saturating_add_at`` sum cells across leaves without wrapping.
``AMOUNT_LIMIT`` leaves room for ``remaining`` (free - TAS usage - assumed usage) and is
far beyond any real amount (10^18 millicores, or bytes); a request beyond it never fits.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Final

import numpy as np
import numpy.typing as npt

from kueue_tas.topology.assignment import TopologyAssignment
from kueue_tas.topology.engine.tree import TopologyTree
from kueue_tas.topology.model import PODS, ResourceMap

Matrix = npt.NDArray[np.int64]

AMOUNT_LIMIT: Final = 2**60
SUM_LIMIT: Final = 2**62
_INT64_MAX: Final = 2**63 - 1


def usage_of(assignment: TopologyAssignment, per_pod: ResourceMap) -> Iterable[tuple[Sequence[str], dict[str, int]]]:
    """Per domain: ``count x per_pod`` plus ``pods: count``."""
    for dom in assignment.domains:
        usage = {name: value * dom.count for name, value in per_pod.items() if name != PODS}
        usage[PODS] = usage.get(PODS, 0) + dom.count
        yield dom.values, usage


_ALLOC, _FREE, _TAS = 0, 1, 2


def saturating_total(rows: Matrix) -> Matrix:
    """Column sums of ``rows``, saturated at +/- ``SUM_LIMIT`` instead of wrapping."""
    out: Matrix = rows.sum(axis=0, dtype=np.int64)
    shadow = rows.sum(axis=0, dtype=np.float64)  # approximate, but never wraps
    out[shadow >= SUM_LIMIT] = SUM_LIMIT
    out[shadow <= -SUM_LIMIT] = -SUM_LIMIT
    return out


def saturating_add_at(out: Matrix, index: npt.NDArray[np.int64], rows: Matrix) -> None:
    """``np.add.at(out, index, rows)``, the sums saturated at +/- ``SUM_LIMIT`` instead of wrapping."""
    shadow = out.astype(np.float64)
    np.add.at(out, index, rows)
    np.add.at(shadow, index, rows.astype(np.float64))
    out[shadow >= SUM_LIMIT] = SUM_LIMIT
    out[shadow <= -SUM_LIMIT] = -SUM_LIMIT


class CapacityMatrix:
    def __init__(self, tree: TopologyTree) -> None:
        self.tree = tree
        self.columns: dict[str, int] = {}
        n = len(tree.leaves)
        self.alloc: Matrix = np.zeros((n, 0), dtype=np.int64)  # allocatable of the leaf's nodes
        self.free: Matrix = np.zeros((n, 0), dtype=np.int64)  # allocatable minus non-TAS usage
        self.tas: Matrix = np.zeros((n, 0), dtype=np.int64)  # usage of admitted TAS workloads
        # (matrix, leaf, column) -> exact value of a saturated cell; empty in any real cluster.
        self._exact: dict[tuple[int, int, int], int] = {}
        # leaf -> how many charges seal it (``seal``); empty unless a Topology was re-levelled.
        self._sealed: dict[int, int] = {}
        names = sorted({r for nodes in tree.leaf_nodes for node in nodes for r in node.allocatable})
        self._ensure_columns(names)
        for leaf, nodes in enumerate(tree.leaf_nodes):
            for node in nodes:
                self._add_row(self.alloc, _ALLOC, leaf, node.allocatable, 1)
        self.free = self.alloc.copy()
        for (_, leaf, col), value in list(self._exact.items()):
            self._exact[(_FREE, leaf, col)] = value
        self._rebuild_left()

    def copy(self) -> CapacityMatrix:
        """The same numbers in arrays of its own, over the same (never changing) tree."""
        out = CapacityMatrix.__new__(CapacityMatrix)
        out.tree = self.tree
        out.columns = dict(self.columns)
        out.alloc, out.free, out.tas = self.alloc.copy(), self.free.copy(), self.tas.copy()
        out._exact = dict(self._exact)
        out._sealed = dict(self._sealed)
        out._left = self._left.copy()
        return out

    def _rebuild_left(self) -> None:
        # ``free - tas``, one row per resource, kept current by every change: a placement
        # then reads its resources' rows without subtracting (or copying) whole matrices.
        self._left: Matrix = np.ascontiguousarray((self.free - self.tas).T)
        for leaf in self._sealed:
            np.minimum(self._left[:, leaf], 0, out=self._left[:, leaf])

    def _refresh_left(self, leaf: int, amounts: Iterable[str]) -> None:
        sealed = leaf in self._sealed
        for name in amounts:
            col = self.columns[name]
            left = self.free.item(leaf, col) - self.tas.item(leaf, col)
            self._left[col, leaf] = min(left, 0) if sealed else left

    def seal(self, leaf: int, sign: int = 1) -> None:
        """Offer nothing of ``leaf`` to new placements while at least one charge seals it
        (``sign=-1`` lifts one): slots pinned to some of its nodes are still to be filled, and a
        placement on the leaf would let the kube-scheduler bind its pods there first. Usage and
        allocatable stay as they are; only what is left for a placement reads as none."""
        count = self._sealed.get(leaf, 0) + sign
        if count > 0:
            self._sealed[leaf] = count
        else:
            self._sealed.pop(leaf, None)
        self._refresh_left(leaf, self.columns)

    def seal_many(self, leaves: Iterable[int]) -> None:
        """``seal`` each of ``leaves`` once, at once (a placement's closed domains, on a copy)."""
        chosen = sorted(set(leaves))
        if not chosen:
            return
        for leaf in chosen:
            self._sealed[leaf] = self._sealed.get(leaf, 0) + 1
        index = np.asarray(chosen, dtype=np.int64)
        # What ``_refresh_left`` computes for a sealed leaf: ``free - tas``, at most 0.
        self._left[:, index] = np.minimum(self._left[:, index], 0)

    def sealed(self, leaf: int) -> bool:
        return leaf in self._sealed

    def add_assumed(self, assumed: Matrix | None, assignment: TopologyAssignment, per_pod: ResourceMap) -> Matrix:
        """``assumed`` (or nothing) plus the usage of ``assignment``, widened to every column: the
        usage a placement in progress has added, as rows of this matrix's leaves."""
        unit = self.vector({**per_pod, PODS: 1})  # also makes sure every column exists
        grown = np.zeros((len(self.tree.leaves), unit.size), dtype=np.int64)
        if assumed is not None:
            grown[:, : assumed.shape[1]] = assumed
        leaf_index_of = self.tree.leaf_index_of
        leaves: list[int] = []
        counts: list[int] = []
        for dom in assignment.domains:
            leaf = leaf_index_of(dom.values)
            if leaf is not None:
                leaves.append(leaf)
                counts.append(dom.count)
        if not leaves:
            return grown
        largest = max((abs(v) for name, v in per_pod.items() if name != PODS), default=0)
        if max(largest, 1) * max(map(abs, counts)) <= _INT64_MAX:
            # Every count x amount is exact in int64 (as usage_of's Python ints, which vector()
            # would clamp), so one scatter-add of the rows equals adding them one by one.
            np.add.at(grown, np.array(leaves, dtype=np.int64), np.array(counts, dtype=np.int64)[:, None] * unit)
            return grown
        for values, usage in usage_of(assignment, per_pod):
            leaf = leaf_index_of(values)
            if leaf is not None:
                grown[leaf] += self.vector(usage)
        return grown

    def left(self) -> Matrix:
        """What each leaf has left for a new placement (never below zero), a matrix of its own."""
        return np.maximum(self._left.T, 0)

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
        self._rebuild_left()

    def vector(self, amounts: ResourceMap) -> npt.NDArray[np.int64]:
        """A request as a row. Amounts beyond int64 (none that a quantity gives) read as the
        int64 maximum: still more than any cell holds, so they never fit."""
        self._ensure_columns(sorted(amounts))
        vec = np.zeros(len(self.columns), dtype=np.int64)
        for name, value in amounts.items():
            vec[self.columns[name]] = min(max(value, -_INT64_MAX), _INT64_MAX)
        return vec

    def _add_row(self, matrix: Matrix, which: int, leaf: int, amounts: ResourceMap, sign: int) -> None:
        exact = self._exact
        for name, value in amounts.items():
            col = self.columns[name]
            key = (which, leaf, col)
            held = exact.pop(key, None) if exact else None
            new = (matrix.item(leaf, col) if held is None else held) + sign * value
            if -AMOUNT_LIMIT < new < AMOUNT_LIMIT:
                matrix[leaf, col] = new
            else:
                exact[key] = new
                matrix[leaf, col] = AMOUNT_LIMIT if new > 0 else -AMOUNT_LIMIT

    def add_non_tas_usage(self, node_name: str, usage: ResourceMap, sign: int = 1) -> bool:
        """Returns False when the node is not part of this flavor's topology."""
        leaf = self.tree.leaf_by_node_name.get(node_name)
        if leaf is None:
            return False
        self._ensure_columns(sorted(usage))
        self._add_row(self.free, _FREE, leaf, usage, -sign)
        self._refresh_left(leaf, usage)
        return True

    def add_tas_usage(self, leaf: int, usage: ResourceMap, sign: int = 1) -> None:
        self._ensure_columns(sorted(usage))
        self._add_row(self.tas, _TAS, leaf, usage, sign)
        self._refresh_left(leaf, usage)

    def remaining(self, *, simulate_empty: bool, assumed: Matrix | None, allocatable_only: bool = False) -> Matrix:
        """Capacity left for a new placement. ``simulate_empty`` ignores TAS usage (Kueue's
        preemption probe); ``allocatable_only`` ignores all usage (can it ever fit?)."""
        rem = self.alloc.copy() if allocatable_only else self.free.copy() if simulate_empty else self._left.T.copy()
        if assumed is not None:
            # Columns added after the assumed usage was recorded hold no assumed usage.
            width = min(rem.shape[1], assumed.shape[1])
            rem[:, :width] -= assumed[:, :width]
        return rem

    def remaining_columns(
        self, cols: Sequence[int], *, simulate_empty: bool, assumed: Matrix | None, allocatable_only: bool = False
    ) -> list[npt.NDArray[np.int64]]:
        """``remaining(...)[:, col]`` for each of ``cols``, read-only: without assumed usage they
        are views of the capacity itself, so taking them costs nothing."""
        base = self.alloc.T if allocatable_only else self.free.T if simulate_empty else self._left
        width = 0 if assumed is None else assumed.shape[1]
        out = []
        for col in cols:
            row = base[col] - assumed[:, col] if assumed is not None and col < width else base[col].view()
            row.flags.writeable = False
            out.append(row)
        return out

    def leaf_free(self, leaf: int) -> dict[str, int]:
        """Remaining capacity of one leaf (for explanations and `plan -o text`)."""
        row = self._left[:, leaf]
        return {name: int(row[col]) for name, col in self.columns.items()}

    def totals(self) -> Mapping[str, int]:
        row = saturating_total(self.free - self.tas)
        return {name: int(row[col]) for name, col in self.columns.items()}
