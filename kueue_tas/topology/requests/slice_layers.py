"""Kueue's multi-layer slice constraints: the JSON annotation value -> ``SliceLayer`` tuples.

The annotation holds ``[{"topology": <level>, "size": <n>}, ...]``, coarsest layer first.
Kueue reads it with Go's ``encoding/json`` into ``[]PodsetSliceRequiredTopologyConstraint``,
so the decoding here follows Go's rules, not Python's: keys match case-insensitively,
unknown keys are ignored, ``null`` leaves a field at its zero value, a size must be an
integer literal in int32 range (``1.0`` and ``1e2`` are refused), and NaN/Infinity are
not JSON. The validation texts are the webhook's
(``validateSliceRequiredTopologyConstraintsAnnotation`` in ``jobframework/tas_validation.go``).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from kueue_tas.api.object_base import INT32_MAX
from kueue_tas.topology.kube_syntax import INT32_MIN, label_name_errors
from kueue_tas.topology.model import SliceLayer

MAX_LAYERS = 3
LAYER_COUNT_MESSAGE = f"topology constraints must contain between 1 and {MAX_LAYERS} entries"
PARSE_FAILURE_MESSAGE = "failed to parse multi-layer topology constraints annotation"
_GO_TYPE = "v1beta2.PodsetSliceRequiredTopologyConstraint"


class SliceLayersDecodeError(ValueError):
    """The value is not what Go's json.Unmarshal accepts for the constraints list."""


class _Float:
    """A JSON number literal with a fraction or exponent, kept verbatim for Go's error text."""

    def __init__(self, literal: str) -> None:
        self.literal = literal


def _no_constant(name: str) -> Any:
    raise SliceLayersDecodeError(f"invalid character {name[0]!r} looking for beginning of value")


def _go_kind(value: object) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int | _Float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def decode_layers(text: str) -> list[SliceLayer]:
    """Go's ``json.Unmarshal(text, &[]PodsetSliceRequiredTopologyConstraint{})``.

    Missing or null fields decode to "" / 0 (as in Go), so the caller's validation sees them.
    """
    try:
        doc = json.loads(text, parse_float=_Float, parse_constant=_no_constant)
    except json.JSONDecodeError as exc:
        raise SliceLayersDecodeError(str(exc)) from exc
    if doc is None:
        return []
    if not isinstance(doc, list):
        raise SliceLayersDecodeError(f"json: cannot unmarshal {_go_kind(doc)} into Go value of type []{_GO_TYPE}")
    layers = []
    for entry in doc:
        if entry is None:
            layers.append(SliceLayer("", 0))
            continue
        if not isinstance(entry, dict):
            raise SliceLayersDecodeError(f"json: cannot unmarshal {_go_kind(entry)} into Go value of type {_GO_TYPE}")
        topology, size = "", 0
        for key, value in entry.items():  # later keys win, matched case-insensitively, as Go does
            field = key.lower()
            if value is None or field not in ("topology", "size"):
                continue
            if field == "topology":
                if not isinstance(value, str):
                    raise SliceLayersDecodeError(
                        f"json: cannot unmarshal {_go_kind(value)} into Go struct field "
                        f"PodsetSliceRequiredTopologyConstraint.topology of type string"
                    )
                topology = value
            else:
                ok = isinstance(value, int) and not isinstance(value, bool) and INT32_MIN <= value <= INT32_MAX
                if not ok:
                    shown = value.literal if isinstance(value, _Float) else str(value)
                    what = f"number {shown}" if isinstance(value, int | _Float) else _go_kind(value)
                    raise SliceLayersDecodeError(
                        f"json: cannot unmarshal {what} into Go struct field "
                        f"PodsetSliceRequiredTopologyConstraint.size of type int32"
                    )
                size = int(value)
        layers.append(SliceLayer(topology, size))
    return layers


def layer_errors(layers: Sequence[SliceLayer], prefix: str = "") -> list[str]:
    """The webhook's checks of decoded layers, each message starting with ``prefix[i].<field>``."""
    errors: list[str] = []
    for i, layer in enumerate(layers):
        errors.extend(
            f"{prefix}[{i}].topology: invalid value {json.dumps(layer.level)}: {msg}"
            for msg in label_name_errors(layer.level)
        )
        if layer.size < 1:
            errors.append(f"{prefix}[{i}].size: invalid value {layer.size}: must be greater than or equal to 1")
    seen: dict[str, int] = {}
    for i, layer in enumerate(layers):
        if layer.level in seen:
            errors.append(
                f"{prefix}[{i}].topology: duplicate value: "
                + json.dumps(f"{layer.level} (also at index {seen[layer.level]})")
            )
        else:
            seen[layer.level] = i
    for i in range(len(layers) - 1):
        parent, child = layers[i].size, layers[i + 1].size
        if child > 0 and parent % child != 0:
            errors.append(
                f"{prefix}[{i + 1}].size: invalid value {child}: must evenly divide the parent layer size {parent}"
            )
    return errors
