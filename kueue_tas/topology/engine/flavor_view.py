"""What the engine reads of one flavor: its tree of domains, the capacity matrix over it and
the flavor's tolerations (``TopologySnapshot`` is one; the engine's algorithms take this view,
not the snapshot that calls them, so nothing below the snapshot depends on it)."""

from __future__ import annotations

from typing import Protocol

from kueue_tas.topology.engine.capacity_matrix import CapacityMatrix
from kueue_tas.topology.engine.tree import TopologyTree
from kueue_tas.topology.model import Toleration


class FlavorView(Protocol):
    @property
    def topology_name(self) -> str: ...

    @property
    def tree(self) -> TopologyTree: ...

    @property
    def capacity(self) -> CapacityMatrix: ...

    @property
    def flavor_tolerations(self) -> tuple[Toleration, ...]: ...
