"""A necessary condition for a placement, read from the capacity model: the simulator's cut.

A required request of ``pods`` pods of ``g`` GPUs at a level can only fit in one domain of that
level, and a host takes at most ``free GPUs // g`` of its pods; so if no domain of the level
sums to ``pods`` such pods, no placement exists and the engine would say so. The simulator asks
this before calling the engine, never instead of it: the engine decides every job that passes.
Unconstrained requests are bounded by the whole cluster's sum.

The sums are read from the model's own per-host free capacity (``CapacityMatrix.left``) at most
once per pass; a placement during the pass only takes capacity, so sums read before it stay
upper bounds. An eviction frees capacity: ``stale`` makes the next question read them again.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from kueue_tas.capacity.live import LiveCapacity

from .shapes import FLAVOR, GPU


class FitBound:
    def __init__(self, capacity: LiveCapacity) -> None:
        snap = capacity.snapshot(FLAVOR)
        if snap is None:
            raise ValueError(f'flavor "{FLAVOR}" has no snapshot')
        self._capacity = capacity
        self._levels = snap.tree.levels
        self._keys = snap.tree.level_keys
        self._left: npt.NDArray[np.int64] | None = None
        self._most: dict[int, dict[str | None, int]] = {}  # GPUs per pod -> level -> most pods one domain takes

    def stale(self) -> None:
        self._left = None
        self._most.clear()

    def may_fit(self, pods: int, gpus_per_pod: int, level: str | None) -> bool:
        """False only if no domain of ``level`` (None: the cluster) can hold the pods."""
        most = self._most.get(gpus_per_pod)
        if most is None:
            most = self._most[gpus_per_pod] = self._sums(gpus_per_pod)
        return most.get(level, 0) >= pods

    def _sums(self, gpus_per_pod: int) -> dict[str | None, int]:
        if self._left is None:
            snap = self._capacity.snapshot(FLAVOR)
            assert snap is not None
            self._left = snap.capacity.left()[:, snap.capacity.columns[GPU]]
        per_domain = self._left // max(gpus_per_pod, 1)
        out: dict[str | None, int] = {None: int(per_domain.sum())}
        # From the leaves up: a domain's sum is its children's, which are contiguous below it.
        for depth in range(len(self._levels) - 1, -1, -1):
            if depth < len(self._levels) - 1:
                per_domain = np.add.reduceat(per_domain, self._levels[depth].child_start)
            out[self._keys[depth]] = int(per_domain.max()) if per_domain.size else 0
        return out
