"""Checks of a topology request against the levels of the Topology it will be placed on.

Kueue skips a flavor whose Topology lacks a requested level (``HasLevel``) and fails the
placement of multi-layer slices whose layers are out of order (``buildSliceSizeAtLevel``).
Both can never succeed later, so kueue-tas refuses them before placing: the controller
rejects the Workload, ``plan`` reports invalid input. Out-of-order layers keep Kueue's text.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from kueue_tas.api import constants as c
from kueue_tas.topology import messages
from kueue_tas.topology.model import TopologyRequest


@dataclass(frozen=True, slots=True)
class LevelProblem:
    """What is wrong, and where: ``suffix`` after the annotation prefix, ``field`` inside
    Kueue's ``topologyRequest``. ``unknown`` is the level the Topology lacks; otherwise
    ``message`` is Kueue's text."""

    suffix: str
    field: str
    unknown: str | None = None
    message: str = ""


def level_problem(levels: Sequence[str], topology: TopologyRequest | None) -> LevelProblem | None:
    """The first problem of ``topology`` on a Topology with ``levels`` (top-down), or None."""
    if topology is None:
        return None
    for suffix, field, level in (
        (c.SUFFIX_REQUIRED_TOPOLOGY, "required", topology.required),
        (c.SUFFIX_PREFERRED_TOPOLOGY, "preferred", topology.preferred),
        (c.SUFFIX_SLICE_REQUIRED_TOPOLOGY, "podSetSliceRequiredTopology", topology.slice_level),
    ):
        if level is not None and level not in levels:
            return LevelProblem(suffix, field, unknown=level)
    layers = topology.slice_layers
    for i, layer in enumerate(layers):
        if layer.level not in levels:
            return LevelProblem(*_layer_path(i, "topology"), unknown=layer.level)
    for i in range(1, len(layers)):
        parent, layer = layers[i - 1], layers[i]
        if levels.index(layer.level) <= levels.index(parent.level):
            return LevelProblem(
                *_layer_path(i, "topology"),
                message=messages.additional_layer_not_lower(layer.level, parent.level),
            )
        if layer.size > 0 and parent.size % layer.size != 0:
            return LevelProblem(
                *_layer_path(i, "size"),
                message=messages.additional_layer_size(layer.size, parent.size),
            )
    return None


def _layer_path(index: int, leaf: str) -> tuple[str, str]:
    return (
        f"{c.SUFFIX_SLICE_CONSTRAINTS}[{index}].{leaf}",
        f"podsetSliceRequiredTopologyConstraints[{index}].{leaf}",
    )
