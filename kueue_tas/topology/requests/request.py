"""Pod-template annotations -> ``TopologyRequest``, with Kueue's rules and validation.

Semantics follow Kueue's ``jobframework.NewPodSetTopologyRequest(...).Build()``:
required, preferred and unconstrained are read in that priority order and only the
first one found is kept, except that required and preferred are kept together
(kueue-tas's extension, which Kueue's webhook refuses: all pods in one domain of the
required level, as few domains of the preferred level inside it as possible); the
multi-layer constraints (when TASMultiLayerTopology is on) win over the slice pair
(slice topology + slice size), which is used only when both are present; the group
name is kept only beside required or preferred; with no mode and no slice layer the
request is None.

Validation follows Kueue's webhook (``ValidateTASPodSetRequest`` and
``ValidateSliceSizeAnnotationUpperBound`` in ``jobframework/tas_validation.go``),
with the same wording: every problem found is reported, each naming the
annotation key, the value and what is wrong. Checks across the PodSets of a
group live in ``topology/requests/groups.py``; checks against a Topology's levels in
``topology/requests/levels.py``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kueue_tas.api import constants as c
from kueue_tas.topology.features import DEFAULT_GATES, MULTI_LAYER, FeatureGates
from kueue_tas.topology.kube_syntax import label_name_errors, parse_duration, parse_go_bool, parse_go_int32
from kueue_tas.topology.model import SliceLayer, TopologyRequest
from kueue_tas.topology.requests.slice_layers import (
    LAYER_COUNT_MESSAGE,
    MAX_LAYERS,
    PARSE_FAILURE_MESSAGE,
    SliceLayersDecodeError,
    decode_layers,
    layer_errors,
)

__all__ = [
    "AnnotationKeys",
    "TopologyRequestError",
    "annotation_keys",
    "has_topology_annotation",
    "label_name_errors",
    "parse_go_bool",
    "parse_go_int32",
    "parse_template_topology_request",
    "parse_topology_request",
    "template_annotations",
    "validate_topology_annotations",
]

# Kueue's Workload API caps spec.podSets[].topologyRequest.podSetGroupName at 256 characters;
# the annotation is copied there, so a longer one could never become a Workload.
MAX_GROUP_NAME_LENGTH = 256
_UINT64_MAX = 2**64 - 1


def slice_count_problem(size: int, count: int) -> str | None:
    """Why a slice of ``size`` pods cannot cut a PodSet of ``count`` pods, or None.

    Our rule, not Kueue's: Kueue v0.19.2 admits such a PodSet with only floor(count/size)*size
    pods assigned (its integration test "scheduler persists Count greater than the sum of
    TopologyAssignment domains"), which here would pin every pod to a domain charged for fewer
    or leave the rest gated forever. Worded as Kueue's other slice-size checks. A size below 1
    is refused elsewhere (Kueue's own texts)."""
    if size >= 1 and count % size != 0:
        return f"must evenly divide pod set count {count}"
    return None


class TopologyRequestError(ValueError):
    """Invalid topology annotations on a pod template. ``errors`` lists every problem."""

    def __init__(self, errors: list[str]) -> None:
        self.errors = list(errors)
        super().__init__("; ".join(self.errors))


@dataclass(frozen=True, slots=True)
class AnnotationKeys:
    required: str
    preferred: str
    unconstrained: str
    slice_required: str
    slice_size: str
    slice_constraints: str
    group: str
    preferred_wait: str

    @property
    def all(self) -> tuple[str, ...]:
        return (
            self.required,
            self.preferred,
            self.unconstrained,
            self.slice_required,
            self.slice_size,
            self.slice_constraints,
            self.group,
            self.preferred_wait,
        )


def annotation_keys(prefix: str = c.DEFAULT_ANNOTATION_PREFIX) -> AnnotationKeys:
    """The seven annotation keys under ``prefix`` (which ends with ``/``, e.g. ``kueue-tas.io/``)."""
    if not prefix.endswith("/"):
        raise ValueError(f"annotation prefix {prefix!r} must end with '/'")
    return AnnotationKeys(
        required=prefix + c.SUFFIX_REQUIRED_TOPOLOGY,
        preferred=prefix + c.SUFFIX_PREFERRED_TOPOLOGY,
        unconstrained=prefix + c.SUFFIX_UNCONSTRAINED_TOPOLOGY,
        slice_required=prefix + c.SUFFIX_SLICE_REQUIRED_TOPOLOGY,
        slice_size=prefix + c.SUFFIX_SLICE_SIZE,
        slice_constraints=prefix + c.SUFFIX_SLICE_CONSTRAINTS,
        group=prefix + c.SUFFIX_GROUP_NAME,
        preferred_wait=prefix + c.SUFFIX_PREFERRED_WAIT,
    )


# --- validation and parsing -------------------------------------------------------------------


def _invalid(key: str, value: str, problem: str) -> str:
    return f"annotation {key!r}: invalid value {json.dumps(value)}: {problem}"


def _forbidden(key: str, problem: str) -> str:
    return f"annotation {key!r}: forbidden: {problem}"


def _required(key: str, problem: str) -> str:
    return f"annotation {key!r}: required: {problem}"


def _is_go_uint64(value: str) -> bool:
    """Go's ``strconv.ParseUint(value, 10, 64)`` succeeds: ASCII digits only, in uint64 range."""
    return value.isascii() and value.isdigit() and int(value) <= _UINT64_MAX


def _group_errors(keys: AnnotationKeys, ann: Mapping[str, str]) -> list[str]:
    if keys.group not in ann:
        return []
    value = ann[keys.group]
    errors = []
    if _is_go_uint64(value):
        errors.append(_invalid(keys.group, value, "must not be a number"))
    if len(value) > MAX_GROUP_NAME_LENGTH:
        errors.append(_invalid(keys.group, value, f"must be no more than {MAX_GROUP_NAME_LENGTH} characters"))
    if keys.slice_size in ann:
        errors.append(_forbidden(keys.group, f"may not be set when '{keys.slice_size}' is specified"))
    if keys.slice_required in ann:
        errors.append(_forbidden(keys.group, f"may not be set when '{keys.slice_required}' is specified"))
    if keys.preferred not in ann and keys.required not in ann:
        errors.append(
            _forbidden(keys.group, f"may not be set when neither '{keys.preferred}' nor '{keys.required}' is specified")
        )
    return errors


def _constraints_errors(
    keys: AnnotationKeys, ann: Mapping[str, str], count: int | None, gates: FeatureGates
) -> list[str]:
    key = keys.slice_constraints
    if key not in ann:
        return []
    if not gates.multi_layer:
        return [_forbidden(key, f"the {MULTI_LAYER} feature gate must be enabled to use this annotation")]
    errors = []
    if keys.slice_required in ann:
        errors.append(_forbidden(key, f"may not be set when '{keys.slice_required}' is specified"))
    if keys.slice_size in ann:
        errors.append(_forbidden(key, f"may not be set when '{keys.slice_size}' is specified"))
    if keys.group in ann:
        errors.append(_forbidden(keys.group, f"may not be set when '{key}' is specified"))
    raw = ann[key]
    try:
        layers = decode_layers(raw)
    except SliceLayersDecodeError as exc:
        return [*errors, _invalid(key, raw, f"must be a valid JSON array: {exc}")]
    if not 1 <= len(layers) <= MAX_LAYERS:
        return [*errors, _invalid(key, raw, LAYER_COUNT_MESSAGE)]
    errors.extend(layer_errors(layers, prefix=f"annotation {key!r}: "))
    if count is not None and layers[0].size > count:
        errors.append(
            f"annotation {key!r}: invalid value {layers[0].size}: must not be greater than pod set count {count}"
        )
    elif count is not None and (problem := slice_count_problem(layers[0].size, count)) is not None:
        errors.append(f"annotation {key!r}: invalid value {layers[0].size}: {problem}")
    return errors


def validate_topology_annotations(
    annotations: Mapping[str, str] | None,
    *,
    prefix: str = c.DEFAULT_ANNOTATION_PREFIX,
    count: int | None = None,
    gates: FeatureGates = DEFAULT_GATES,
) -> list[str]:
    """Every problem with the topology annotations, in Kueue's webhook wording ([] when valid).

    ``count`` is the PodSet's pod count; when given, a slice size (or the first layer's
    size) above it, or not dividing it (``slice_count_problem``), is an error. ``gates`` decide
    whether the multi-layer annotation is allowed.
    """
    keys = annotation_keys(prefix)
    ann = annotations or {}
    errors: list[str] = []

    found_modes = [k for k in (keys.required, keys.preferred, keys.unconstrained) if k in ann]
    # Required with preferred is kueue-tas's extension (one required domain, as few preferred
    # ones inside it as possible); every other pair keeps Kueue's refusal and text.
    if len(found_modes) > 1 and found_modes != [keys.required, keys.preferred]:
        listed = ", ".join(json.dumps(k) for k in (keys.required, keys.preferred, keys.unconstrained))
        present = ", ".join(f"{k}={json.dumps(ann[k])}" for k in found_modes)
        errors.append(f"annotations {present}: must not contain more than one topology annotation: [{listed}]")

    for key in (keys.required, keys.preferred, keys.slice_required):
        if key in ann:
            errors.extend(_invalid(key, ann[key], msg) for msg in label_name_errors(ann[key]))

    errors.extend(_group_errors(keys, ann))

    if keys.unconstrained in ann and parse_go_bool(ann[keys.unconstrained]) is None:
        errors.append(_invalid(keys.unconstrained, ann[keys.unconstrained], "must be a boolean value"))

    if keys.slice_size in ann:
        raw = ann[keys.slice_size]
        size = parse_go_int32(raw)
        if size is None:
            errors.append(_invalid(keys.slice_size, raw, "must be a numeric value"))
        elif size < 1:
            errors.append(_invalid(keys.slice_size, raw, "must be greater than or equal to 1"))
        elif count is not None and size > count:
            errors.append(_invalid(keys.slice_size, raw, f"must not be greater than pod set count {count}"))
        elif count is not None and keys.slice_required in ann and (problem := slice_count_problem(size, count)):
            errors.append(_invalid(keys.slice_size, raw, problem))

    if keys.slice_required in ann and keys.slice_size not in ann:
        errors.append(_required(keys.slice_size, f"must be set when '{keys.slice_required}' is specified"))
    if keys.slice_size in ann and keys.slice_required not in ann:
        errors.append(_forbidden(keys.slice_size, f"may not be set when '{keys.slice_required}' is not specified"))
    errors.extend(_constraints_errors(keys, ann, count, gates))
    errors.extend(_wait_errors(keys, ann))
    return errors


# A wait longer than this is a typo (a day is already more than any queue should hold a job).
MAX_PREFERRED_WAIT_SECONDS = 24 * 3600.0


def _wait_errors(keys: AnnotationKeys, ann: Mapping[str, str]) -> list[str]:
    key = keys.preferred_wait
    if key not in ann:
        return []
    errors = []
    if keys.preferred not in ann:
        errors.append(_forbidden(key, f"may not be set when '{keys.preferred}' is not specified"))
    seconds = parse_duration(ann[key])
    if seconds is None:
        errors.append(_invalid(key, ann[key], "must be a duration such as 90s, 10m or 1h30m"))
    elif not 0 < seconds <= MAX_PREFERRED_WAIT_SECONDS:
        errors.append(_invalid(key, ann[key], "must be more than 0s and at most 24h"))
    return errors


def has_topology_annotation(
    annotations: Mapping[str, str] | None, *, prefix: str = c.DEFAULT_ANNOTATION_PREFIX
) -> bool:
    """True when any of our topology annotations is present (the template states its own request)."""
    if not annotations:
        return False
    return any(key in annotations for key in annotation_keys(prefix).all)


def parse_topology_request(
    annotations: Mapping[str, str] | None,
    *,
    prefix: str = c.DEFAULT_ANNOTATION_PREFIX,
    count: int | None = None,
    strict: bool = True,
    gates: FeatureGates = DEFAULT_GATES,
) -> TopologyRequest | None:
    """The PodSet's topology request from its pod-template annotations.

    Returns None when no mode annotation and no slice layer (complete slice pair, or
    multi-layer constraints while TASMultiLayerTopology is on) is present.

    ``strict`` (the default) first runs the webhook validation and raises
    ``TopologyRequestError`` listing every problem. With ``strict=False`` the
    request is built as Kueue's ``Build()`` does for objects that skipped the
    webhook: the first of required > preferred > unconstrained wins (required and
    preferred are kept together), an
    incomplete slice pair is ignored, and only a value that cannot be parsed at
    all (unconstrained not a boolean, slice size not an int32, constraints not a list
    of 1 to 3 layers, when used) raises.
    """
    keys = annotation_keys(prefix)
    ann = annotations or {}
    if strict:
        errors = validate_topology_annotations(ann, prefix=prefix, count=count, gates=gates)
        if errors:
            raise TopologyRequestError(errors)

    required = preferred = None
    unconstrained: bool | None = None
    if keys.required in ann:
        required = ann[keys.required]
    if keys.preferred in ann:
        preferred = ann[keys.preferred]
    if required is None and preferred is None and keys.unconstrained in ann:
        unconstrained = parse_go_bool(ann[keys.unconstrained])
        if unconstrained is None:
            raise TopologyRequestError(
                [_invalid(keys.unconstrained, ann[keys.unconstrained], "must be a boolean value")]
            )

    slice_level: str | None = None
    slice_size: int | None = None
    layers: tuple[SliceLayer, ...] = ()
    if gates.multi_layer and keys.slice_constraints in ann:
        layers = _lenient_layers(keys.slice_constraints, ann[keys.slice_constraints])
    elif keys.slice_required in ann and keys.slice_size in ann:
        slice_level = ann[keys.slice_required]
        slice_size = parse_go_int32(ann[keys.slice_size])
        if slice_size is None:
            raise TopologyRequestError([_invalid(keys.slice_size, ann[keys.slice_size], "must be a numeric value")])

    if required is None and preferred is None and unconstrained is None and slice_level is None and not layers:
        return None
    group = ann.get(keys.group) if required is not None or preferred is not None else None
    wait = parse_duration(ann[keys.preferred_wait]) if preferred is not None and keys.preferred_wait in ann else None
    return TopologyRequest(
        preferred_wait=wait if wait is not None and wait > 0 else None,
        required=required,
        preferred=preferred,
        unconstrained=unconstrained,
        slice_level=slice_level,
        slice_size=slice_size,
        group=group,
        slice_layers=layers,
    )


def _lenient_layers(key: str, raw: str) -> tuple[SliceLayer, ...]:
    """The layers as Kueue's ``Build()`` reads them: only undecodable JSON or a wrong count fail."""
    try:
        layers = decode_layers(raw)
    except SliceLayersDecodeError as exc:
        raise TopologyRequestError([f"annotation {key!r}: {PARSE_FAILURE_MESSAGE}: {exc}"]) from exc
    if not 1 <= len(layers) <= MAX_LAYERS:
        raise TopologyRequestError([f"annotation {key!r}: {LAYER_COUNT_MESSAGE}: got {len(layers)}"])
    return tuple(layers)


def template_annotations(template: Mapping[str, Any]) -> Mapping[str, str]:
    """``metadata.annotations`` of a PodTemplateSpec dict ({} when absent)."""
    metadata = template.get("metadata") or {}
    if not isinstance(metadata, Mapping):
        raise TopologyRequestError([f"template metadata must be a mapping, got {type(metadata).__name__}"])
    annotations = metadata.get("annotations") or {}
    if not isinstance(annotations, Mapping):
        got = type(annotations).__name__
        raise TopologyRequestError([f"template metadata.annotations must be a mapping, got {got}"])
    bad = [k for k, v in annotations.items() if not isinstance(v, str)]
    if bad:
        raise TopologyRequestError(
            [
                f"annotation {k!r}: value must be a string, got {type(annotations[k]).__name__} (quote it in YAML)"
                for k in bad
            ]
        )
    return annotations


def parse_template_topology_request(
    template: Mapping[str, Any],
    *,
    prefix: str = c.DEFAULT_ANNOTATION_PREFIX,
    count: int | None = None,
    strict: bool = True,
    gates: FeatureGates = DEFAULT_GATES,
) -> TopologyRequest | None:
    """``parse_topology_request`` on a PodTemplateSpec dict's annotations."""
    return parse_topology_request(
        template_annotations(template), prefix=prefix, count=count, strict=strict, gates=gates
    )
