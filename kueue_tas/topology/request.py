"""Pod-template annotations -> ``TopologyRequest``, with Kueue's rules and validation.

Semantics follow Kueue's ``jobframework.NewPodSetTopologyRequest(...).Build()``:
required, preferred and unconstrained are read in that priority order and only the
first one found is kept; the slice pair (slice topology + slice size) is used only
when both are present; with no mode and no slice pair the request is None.

Validation follows Kueue's webhook (``ValidateTASPodSetRequest`` and
``ValidateSliceSizeAnnotationUpperBound`` in ``jobframework/tas_validation.go``),
with the same wording: every problem found is reported, each naming the
annotation key, the value and what is wrong.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kueue_tas.api import constants as c
from kueue_tas.topology.model import TopologyRequest

_INT32_MAX = 2**31 - 1
_INT32_MIN = -(2**31)


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

    @property
    def all(self) -> tuple[str, ...]:
        return (self.required, self.preferred, self.unconstrained, self.slice_required, self.slice_size)


def annotation_keys(prefix: str = c.DEFAULT_ANNOTATION_PREFIX) -> AnnotationKeys:
    """The five annotation keys under ``prefix`` (which ends with ``/``, e.g. ``kueue-tas.io/``)."""
    if not prefix.endswith("/"):
        raise ValueError(f"annotation prefix {prefix!r} must end with '/'")
    return AnnotationKeys(
        required=prefix + c.SUFFIX_REQUIRED_TOPOLOGY,
        preferred=prefix + c.SUFFIX_PREFERRED_TOPOLOGY,
        unconstrained=prefix + c.SUFFIX_UNCONSTRAINED_TOPOLOGY,
        slice_required=prefix + c.SUFFIX_SLICE_REQUIRED_TOPOLOGY,
        slice_size=prefix + c.SUFFIX_SLICE_SIZE,
    )


# --- Go-compatible scalar parsing -------------------------------------------------------------

_GO_TRUE = frozenset({"1", "t", "T", "TRUE", "true", "True"})
_GO_FALSE = frozenset({"0", "f", "F", "FALSE", "false", "False"})
_GO_DECIMAL_INT = re.compile(r"^[+-]?[0-9]+$")


def parse_go_bool(value: str) -> bool | None:
    """Go's ``strconv.ParseBool``: the accepted spellings of true/false, else None."""
    if value in _GO_TRUE:
        return True
    if value in _GO_FALSE:
        return False
    return None


def parse_go_int32(value: str) -> int | None:
    """Go's ``strconv.ParseInt(value, 10, 32)``: optional sign, ASCII digits, int32 range; else None."""
    if not _GO_DECIMAL_INT.match(value):
        return None
    number = int(value)
    if number < _INT32_MIN or number > _INT32_MAX:
        return None
    return number


# --- label-name validation (apimachinery IsQualifiedName / metavalidation.ValidateLabelName) ---

_NAME_FMT = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_NAME_RE = re.compile(f"^{_NAME_FMT}$")
_NAME_MSG = (
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character"
)
_DNS1123_LABEL_FMT = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS1123_SUBDOMAIN_FMT = f"{_DNS1123_LABEL_FMT}(\\.{_DNS1123_LABEL_FMT})*"
_DNS1123_SUBDOMAIN_RE = re.compile(f"^{_DNS1123_SUBDOMAIN_FMT}$")
_DNS1123_SUBDOMAIN_MSG = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', "
    "and must start and end with an alphanumeric character"
)


def _regex_error(msg: str, fmt: str, *examples: str) -> str:
    shown = " or ".join(f"'{e}', " for e in examples)
    return f"{msg} (e.g. {shown}regex used for validation is '{fmt}')"


def label_name_errors(value: str) -> list[str]:
    """Problems with ``value`` as a label key (optional DNS-subdomain prefix, '/', name)."""
    errors: list[str] = []
    parts = value.split("/")
    if len(parts) == 1:
        name = parts[0]
    elif len(parts) == 2:
        prefix, name = parts
        if not prefix:
            errors.append("prefix part must be non-empty")
        else:
            if len(prefix) > 253:
                errors.append("prefix part must be no more than 253 bytes")
            if not _DNS1123_SUBDOMAIN_RE.match(prefix):
                detail = _regex_error(_DNS1123_SUBDOMAIN_MSG, _DNS1123_SUBDOMAIN_FMT, "example.com")
                errors.append("prefix part " + detail)
    else:
        return [
            "a valid label key "
            + _regex_error(_NAME_MSG, _NAME_FMT, "MyName", "my.name", "123-abc")
            + " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
        ]
    if not name:
        errors.append("name part must be non-empty")
    elif len(name) > 63:
        errors.append("name part must be no more than 63 bytes")
    if not _NAME_RE.match(name):
        errors.append("name part " + _regex_error(_NAME_MSG, _NAME_FMT, "MyName", "my.name", "123-abc"))
    return errors


# --- validation and parsing -------------------------------------------------------------------


def _invalid(key: str, value: str, problem: str) -> str:
    return f"annotation {key!r}: invalid value {json.dumps(value)}: {problem}"


def _forbidden(key: str, problem: str) -> str:
    return f"annotation {key!r}: forbidden: {problem}"


def _required(key: str, problem: str) -> str:
    return f"annotation {key!r}: required: {problem}"


def validate_topology_annotations(
    annotations: Mapping[str, str] | None,
    *,
    prefix: str = c.DEFAULT_ANNOTATION_PREFIX,
    count: int | None = None,
) -> list[str]:
    """Every problem with the topology annotations, in Kueue's webhook wording ([] when valid).

    ``count`` is the PodSet's pod count; when given, a slice size above it is an error.
    """
    keys = annotation_keys(prefix)
    ann = annotations or {}
    errors: list[str] = []

    found_modes = [k for k in (keys.required, keys.preferred, keys.unconstrained) if k in ann]
    if len(found_modes) > 1:
        listed = ", ".join(json.dumps(k) for k in (keys.required, keys.preferred, keys.unconstrained))
        present = ", ".join(f"{k}={json.dumps(ann[k])}" for k in found_modes)
        errors.append(f"annotations {present}: must not contain more than one topology annotation: [{listed}]")

    for key in (keys.required, keys.preferred, keys.slice_required):
        if key in ann:
            errors.extend(_invalid(key, ann[key], msg) for msg in label_name_errors(ann[key]))

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

    if keys.slice_required in ann and keys.slice_size not in ann:
        errors.append(_required(keys.slice_size, f"must be set when '{keys.slice_required}' is specified"))
    if keys.slice_size in ann and keys.slice_required not in ann:
        errors.append(_forbidden(keys.slice_size, f"may not be set when '{keys.slice_required}' is not specified"))
    return errors


def has_topology_annotation(
    annotations: Mapping[str, str] | None, *, prefix: str = c.DEFAULT_ANNOTATION_PREFIX
) -> bool:
    """True when any of the five topology annotations is present (an explicit TAS request)."""
    if not annotations:
        return False
    return any(key in annotations for key in annotation_keys(prefix).all)


def parse_topology_request(
    annotations: Mapping[str, str] | None,
    *,
    prefix: str = c.DEFAULT_ANNOTATION_PREFIX,
    count: int | None = None,
    strict: bool = True,
) -> TopologyRequest | None:
    """The PodSet's topology request from its pod-template annotations.

    Returns None when no mode annotation and no complete slice pair is present.

    ``strict`` (the default) first runs the webhook validation and raises
    ``TopologyRequestError`` listing every problem. With ``strict=False`` the
    request is built as Kueue's ``Build()`` does for objects that skipped the
    webhook: the first of required > preferred > unconstrained wins, an
    incomplete slice pair is ignored, and only a value that cannot be parsed at
    all (unconstrained not a boolean, slice size not an int32, when used) raises.
    """
    keys = annotation_keys(prefix)
    ann = annotations or {}
    if strict:
        errors = validate_topology_annotations(ann, prefix=prefix, count=count)
        if errors:
            raise TopologyRequestError(errors)

    required = preferred = None
    unconstrained: bool | None = None
    if keys.required in ann:
        required = ann[keys.required]
    elif keys.preferred in ann:
        preferred = ann[keys.preferred]
    elif keys.unconstrained in ann:
        unconstrained = parse_go_bool(ann[keys.unconstrained])
        if unconstrained is None:
            raise TopologyRequestError(
                [_invalid(keys.unconstrained, ann[keys.unconstrained], "must be a boolean value")]
            )

    slice_level: str | None = None
    slice_size: int | None = None
    if keys.slice_required in ann and keys.slice_size in ann:
        slice_level = ann[keys.slice_required]
        slice_size = parse_go_int32(ann[keys.slice_size])
        if slice_size is None:
            raise TopologyRequestError([_invalid(keys.slice_size, ann[keys.slice_size], "must be a numeric value")])

    if required is None and preferred is None and unconstrained is None and slice_level is None:
        return None
    return TopologyRequest(
        required=required,
        preferred=preferred,
        unconstrained=unconstrained,
        slice_level=slice_level,
        slice_size=slice_size,
    )


def template_annotations(template: Mapping[str, Any]) -> Mapping[str, str]:
    """``metadata.annotations`` of a PodTemplateSpec dict ({} when absent)."""
    metadata = template.get("metadata") or {}
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
) -> TopologyRequest | None:
    """``parse_topology_request`` on a PodTemplateSpec dict's annotations."""
    return parse_topology_request(template_annotations(template), prefix=prefix, count=count, strict=strict)
