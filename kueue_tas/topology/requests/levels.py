"""Checks of a topology request against the levels of the Topology it will be placed on.

Kueue skips a flavor whose Topology lacks a requested level (``HasLevel``) and fails the
placement of multi-layer slices whose layers are out of order (``buildSliceSizeAtLevel``).
Both can never succeed later, so kueue-tas refuses them before placing: the controller
rejects the Workload, ``plan`` reports invalid input. Out-of-order layers keep Kueue's text.
A preferred level above the required one (kueue-tas's required + preferred, which Kueue
does not have) is refused the same way, with our text.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final, Literal

from kueue_tas.api import constants as c
from kueue_tas.topology import messages
from kueue_tas.topology.kube_syntax import label_name_errors
from kueue_tas.topology.model import TopologyRequest


@dataclass(frozen=True, slots=True)
class AboveRequired:
    """A preferred ``level`` above the ``required`` level of the same request."""

    level: str
    required: str


@dataclass(frozen=True, slots=True)
class LevelProblem:
    """What is wrong, and where: ``suffix`` after the annotation prefix, ``field`` inside
    Kueue's ``topologyRequest``. ``unknown`` is the level the Topology lacks; ``above`` a
    preferred level above the required one (``text`` words it); otherwise ``message`` is
    Kueue's text."""

    suffix: str
    field: str
    unknown: str | None = None
    message: str = ""
    above: AboveRequired | None = None

    def text(self, locate: Callable[[str, str], str]) -> str:
        """``message``, or for ``above`` the sentence naming the required setting where
        ``locate(suffix, field)`` (the caller's own wording of a place) puts it."""
        if self.above is None:
            return self.message
        where = locate(c.SUFFIX_REQUIRED_TOPOLOGY, "required")
        return (
            f'level "{self.above.level}" is above the required level "{self.above.required}" ({where}); '
            "the preferred level must be the required level or a level below it"
        )


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
    required, preferred = topology.required, topology.preferred
    if (
        required is not None
        and preferred is not None
        and topology.preferred_in_required
        and levels.index(preferred) < levels.index(required)
    ):
        return LevelProblem(
            c.SUFFIX_PREFERRED_TOPOLOGY, "preferred", above=AboveRequired(level=preferred, required=required)
        )
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


# Kueue's Topology CRD: 1 to 16 levels, each a label key of at most 316 characters, no level
# twice, kubernetes.io/hostname only as the lowest.
MAX_TOPOLOGY_LEVELS: Final = 16
MAX_LEVEL_LABEL_LENGTH: Final = 316

LevelsFaultKind = Literal["empty", "too_many", "too_long", "not_a_label", "duplicate", "hostname_not_lowest"]


@dataclass(frozen=True, slots=True)
class LevelsFault:
    """The first way a Topology's ``spec.levels`` breaks Kueue's schema (one rule; ``plan`` and
    the controller word it each in their own style). ``index``: the level at fault (for
    ``duplicate`` its second place, ``first`` its first); ``detail``: the label-key error."""

    kind: LevelsFaultKind
    index: int = -1
    level: str = ""
    first: int = -1
    detail: str = ""


def topology_levels_fault(levels: Sequence[str]) -> LevelsFault | None:
    if not levels:
        return LevelsFault("empty")
    if len(levels) > MAX_TOPOLOGY_LEVELS:
        return LevelsFault("too_many", index=len(levels))
    seen: dict[str, int] = {}
    for i, level in enumerate(levels):
        if len(level) > MAX_LEVEL_LABEL_LENGTH:
            return LevelsFault("too_long", i, level)
        errors = label_name_errors(level)
        if errors:
            return LevelsFault("not_a_label", i, level, detail=errors[0])
        if level in seen:
            return LevelsFault("duplicate", i, level, first=seen[level])
        seen[level] = i
    if c.HOSTNAME_LABEL in seen and levels[-1] != c.HOSTNAME_LABEL:
        return LevelsFault("hostname_not_lowest", seen[c.HOSTNAME_LABEL], c.HOSTNAME_LABEL)
    return None


def topology_levels_problem(levels: Sequence[str]) -> tuple[str, str] | None:
    """``(field under spec.levels, problem)`` for the first way ``levels`` breaks Kueue's
    Topology schema, or None (``plan``'s wording)."""
    fault = topology_levels_fault(levels)
    if fault is None:
        return None
    where = f"spec.levels[{fault.index}].nodeLabel"
    match fault.kind:
        case "empty":
            return "spec.levels", "must list at least one level"
        case "too_many":
            return "spec.levels", f"has {fault.index} entries, at most {MAX_TOPOLOGY_LEVELS} allowed"
        case "too_long":
            return where, f"is {len(fault.level)} characters long, at most {MAX_LEVEL_LABEL_LENGTH} allowed"
        case "not_a_label":
            return where, f"invalid label key {fault.level!r}: {fault.detail}"
        case "duplicate":
            return where, f"{fault.level!r} is already level {fault.first}: must be unique"
        case "hostname_not_lowest":
            return where, f"the {c.HOSTNAME_LABEL} label can only be used at the lowest level of topology"
