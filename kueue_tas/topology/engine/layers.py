"""Slice layers of a PodSet: which ones apply, and the slice size each level distributes in.

Kueue's ``PodSetSliceRequiredTopologyConstraints`` unifies the legacy pair
(slice topology + slice size) and the multi-layer list into one list of
(level, size) layers, coarsest first. The first layer is the "slice level" the
single-layer algorithm knows; every further layer only constrains how pods are
spread below it (``slice_size_at_level``).

``TASMultiLayerTopology`` is read at annotation-parsing time in Kueue (with the
gate off the constraints annotation is never turned into layers, and Kueue's test
"multi-layer topology: no feature gate; additional layers ignored" places such a
PodSet by its first layer only). The engine mirrors that: with the gate off a
request's ``slice_layers`` keep their first layer only.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from kueue_tas.topology import messages
from kueue_tas.topology.engine.tree import TopologyTree
from kueue_tas.topology.features import FeatureGates
from kueue_tas.topology.model import SliceLayer, TopologyRequest


def effective_layers(topology: TopologyRequest | None, gates: FeatureGates) -> tuple[SliceLayer, ...]:
    """The slice layers Kueue's scheduler sees for this request (size 0 when missing)."""
    if topology is None:
        return ()
    if topology.slice_layers:
        return topology.slice_layers if gates.multi_layer else topology.slice_layers[:1]
    if topology.slice_level is None:
        return ()
    return (SliceLayer(topology.slice_level, topology.slice_size or 0),)


def as_single_layer(topology: TopologyRequest | None, layers: tuple[SliceLayer, ...]) -> TopologyRequest | None:
    """The request with its first layer in the legacy slice fields (what the fast path reads)."""
    if topology is None or not topology.slice_layers:
        return topology
    first = layers[0]
    return dataclasses.replace(topology, slice_level=first.level, slice_size=first.size, slice_layers=())


@dataclass(frozen=True, slots=True)
class InnerLayers:
    """Slice size per level index below the first layer, and the layers for failure texts."""

    size_at_level: dict[int, int]
    layers: tuple[SliceLayer, ...]  # all layers when there are inner ones, else empty


NO_INNER_LAYERS = InnerLayers({}, ())


def inner_layers(
    tree: TopologyTree, layers: tuple[SliceLayer, ...], slice_size: int, slice_level_idx: int
) -> InnerLayers | str:
    """Kueue's buildSliceSizeAtLevel: every level from below one layer down to the next
    layer's level distributes in multiples of that next layer's size. Returns Kueue's
    failure text for an invalid layer list."""
    if len(layers) <= 1:
        return NO_INNER_LAYERS
    size_at_level: dict[int, int] = {}
    prev_size, prev_idx = slice_size, slice_level_idx
    for layer in layers[1:]:
        idx = tree.level_index(layer.level)
        if idx is None:
            return messages.no_additional_layer_level(layer.level)
        if idx <= prev_idx:
            return messages.additional_layer_not_lower(layer.level, tree.level_keys[prev_idx])
        if layer.size == 0 or prev_size % layer.size != 0:
            return messages.additional_layer_size(layer.size, prev_size)
        for lvl in range(prev_idx + 1, idx + 1):
            size_at_level[lvl] = layer.size
        prev_size, prev_idx = layer.size, idx
    return InnerLayers(size_at_level, layers)
