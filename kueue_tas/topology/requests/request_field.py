"""Kueue's own request field, ``Workload.spec.podSets[].topologyRequest`` -> ``TopologyRequest``.

Kueue's job controllers fill this field from the ``kueue.x-k8s.io/`` pod-template
annotations; a Workload written directly may carry it alone. kueue-tas honours it field
for field when the template has none of our annotations (when both are present, the
annotations win: they are what the user wrote for kueue-tas).

A PodSet requests TAS explicitly when one of required, preferred, unconstrained, the slice
pair or the slice constraints is set (Kueue's ``IsExplicitlyRequestingTAS``); podIndexLabel,
subGroupIndexLabel and subGroupCount, which Kueue sets on every PodSet it builds, are
accepted and not used. A group name without any of those still groups the PodSet, as in
Kueue's scheduler.

Validation is what the API server always enforces on that field, the CRD's limits
(lengths, at most 3 layers, sizes >= 1), with their texts: a Workload breaking them cannot
exist. The Workload webhook's ``validateTASSliceSize`` (gate TASValidateWorkloadSliceSize)
is not applied: it guards writes only, came with Kueue 0.19 behind a gate that may be off,
and Kueue's scheduler places a stored Workload as it is. The slice pair therefore reaches
the engine as written and gets Kueue's scheduler answer: a slice level without a size (or
with a size below 1) fails with "slice topology requested, but slice size not provided", a
size without a level asks for no slices (Kueue's own TestFindTopologyAssignments cases use
both). Where both the slice pair and the constraints are set, the constraints win, as in
Kueue. Slices that do not divide the PodSet's count are refused (``slice_count_problem``, the
rule the annotations follow too).
"""

from __future__ import annotations

from collections.abc import Mapping

from kueue_tas.api.workload import PodSetTopologyRequestModel
from kueue_tas.topology.model import SliceLayer, TopologyRequest
from kueue_tas.topology.requests.request import (
    MAX_GROUP_NAME_LENGTH,
    TopologyRequestError,
    has_topology_annotation,
    slice_count_problem,
)
from kueue_tas.topology.requests.slice_layers import MAX_LAYERS

FIELD = "topologyRequest"
_LEVEL_MAX = 63


class TopologyFieldError(TopologyRequestError):
    """Invalid ``topologyRequest``; each of ``errors`` starts with ``topologyRequest.<field>``."""


def field_is_explicit(field: PodSetTopologyRequestModel | None) -> bool:
    """Kueue's ``IsExplicitlyRequestingTAS`` for one PodSet."""
    return field is not None and (
        field.unconstrained is not None
        or field.required is not None
        or field.preferred is not None
        or field.pod_set_slice_required_topology is not None
        or field.pod_set_slice_size is not None
        or bool(field.podset_slice_required_topology_constraints)
    )


def uses_field(annotations: Mapping[str, str] | None, field: PodSetTopologyRequestModel | None, prefix: str) -> bool:
    """Whether the PodSet's request comes from ``topologyRequest`` (no annotation of ours, and
    the field asks for something)."""
    if field is None or has_topology_annotation(annotations, prefix=prefix):
        return False
    return field_is_explicit(field) or field.pod_set_group_name is not None


def _too_long(name: str, value: str | None, limit: int) -> list[str]:
    if value is not None and len(value) > limit:
        return [f"{FIELD}.{name}: Too long: may not be more than {limit} bytes"]
    return []


def validate_topology_field(field: PodSetTopologyRequestModel) -> list[str]:
    """Every problem the API server's schema reports for this field ([] when valid)."""
    errors = [
        *_too_long("required", field.required, _LEVEL_MAX),
        *_too_long("preferred", field.preferred, _LEVEL_MAX),
        *_too_long("podSetGroupName", field.pod_set_group_name, MAX_GROUP_NAME_LENGTH),
        *_too_long("podSetSliceRequiredTopology", field.pod_set_slice_required_topology, _LEVEL_MAX),
    ]
    layers = field.podset_slice_required_topology_constraints
    name = "podsetSliceRequiredTopologyConstraints"
    if len(layers) > MAX_LAYERS:
        errors.append(f"{FIELD}.{name}: Too many: {len(layers)}: must have at most {MAX_LAYERS} items")
    for i, layer in enumerate(layers):
        path = f"{FIELD}.{name}[{i}]"
        if not layer.topology:
            errors.append(f'{path}.topology: Invalid value: "": should be at least 1 chars long')
        errors.extend(_too_long(f"{name}[{i}].topology", layer.topology, _LEVEL_MAX))
        if layer.size < 1:
            errors.append(f"{path}.size: Invalid value: {layer.size}: should be greater than or equal to 1")
    return errors


def _slice_count_errors(field: PodSetTopologyRequestModel, count: int) -> list[str]:
    """The slices the engine would cut (constraints win over the pair, as in Kueue) must divide ``count``."""
    layers = field.podset_slice_required_topology_constraints
    if layers:
        path, size = f"{FIELD}.podsetSliceRequiredTopologyConstraints[0].size", layers[0].size
    elif field.pod_set_slice_required_topology is not None and field.pod_set_slice_size is not None:
        path, size = f"{FIELD}.podSetSliceSize", field.pod_set_slice_size
    else:
        return []
    problem = slice_count_problem(size, count)
    return [] if problem is None else [f"{path}: Invalid value: {size}: {problem}"]


def topology_request_from_field(field: PodSetTopologyRequestModel, count: int | None = None) -> TopologyRequest | None:
    """The request the field states (None when it states none); ``TopologyFieldError`` if invalid.
    With ``count`` (the PodSet's pods), slices that do not divide it are refused
    (``slice_count_problem``)."""
    errors = validate_topology_field(field)
    if count is not None:
        errors.extend(_slice_count_errors(field, count))
    if errors:
        raise TopologyFieldError(errors)
    if not field_is_explicit(field) and field.pod_set_group_name is None:
        return None
    layers = tuple(SliceLayer(layer.topology, layer.size) for layer in field.podset_slice_required_topology_constraints)
    slice_level = None if layers else field.pod_set_slice_required_topology
    slice_size = None if layers else field.pod_set_slice_size
    return TopologyRequest(
        required=field.required,
        preferred=field.preferred,
        unconstrained=field.unconstrained,
        slice_level=slice_level,
        slice_size=slice_size,
        group=field.pod_set_group_name,
        slice_layers=layers,
    )
