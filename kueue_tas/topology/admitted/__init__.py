"""Follow-ups of an admitted workload: which admitted slice a new elastic Workload replaces and
which pods it keeps (``slice_replacement``), and which Workloads of a ``plan`` input are placed
again from an existing assignment (``plan_replacements``). The placing itself is the engine's
(``replacement``, ``elastic``).

Entry points: ``replaced_slice_ref``, ``kept_slices``, ``ReplacementIndex``.
Never: place anything.
"""

from __future__ import annotations

from kueue_tas.topology.admitted.plan_replacements import ReplacementIndex
from kueue_tas.topology.admitted.slice_replacement import (
    MAX_KEPT_SLICES,
    SliceRef,
    kept_slice_labels,
    kept_slices,
    kept_slices_value,
    place_options,
    replaced_slice,
    replaced_slice_ref,
    slice_current,
)

__all__ = [
    "MAX_KEPT_SLICES",
    "ReplacementIndex",
    "SliceRef",
    "kept_slice_labels",
    "kept_slices",
    "kept_slices_value",
    "place_options",
    "replaced_slice",
    "replaced_slice_ref",
    "slice_current",
]
