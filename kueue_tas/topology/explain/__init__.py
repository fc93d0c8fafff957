"""What the engine's state means to a reader: free capacity per domain (``free``), free slots
for a pod shape (``free_slots``), whether an admitted placement is still enforceable
(``placement_health``), and patience for preferred (``patience``).

Entry points: ``domain_free``, ``level_fit``, ``placement_problems``, ``hold``.
Never: change the snapshot it reads.
"""

from __future__ import annotations

from kueue_tas.topology.explain.free import domain_free, domain_label, leaf_free, level_sums
from kueue_tas.topology.explain.free_slots import level_fit
from kueue_tas.topology.explain.patience import hold, wait_note
from kueue_tas.topology.explain.placement_health import NodeIndex, PlacedPodSet, placement_problems, required_levels

__all__ = [
    "NodeIndex",
    "PlacedPodSet",
    "domain_free",
    "domain_label",
    "hold",
    "leaf_free",
    "level_fit",
    "level_sums",
    "placement_problems",
    "required_levels",
    "wait_note",
]
