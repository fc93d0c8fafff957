"""Shapes of the pod-template fields the placement reads, and one-line texts of validation errors.

Pod templates stay raw dicts in the models (they are written back unchanged), so nothing
checks their shape when an object is read. ``template_shape_error`` does, for the fields
requests, node constraints and tolerations are read from, so that a list where a mapping
belongs is reported with its path instead of failing deep inside the engine.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError
from pydantic.alias_generators import to_camel


class _Shape(BaseModel):
    model_config = ConfigDict(extra="allow", alias_generator=to_camel)


class _ResourceRequirements(_Shape):
    requests: dict[str, Any] | None = None
    limits: dict[str, Any] | None = None


class _Container(_Shape):
    resources: _ResourceRequirements | None = None
    restart_policy: str | None = None


class _Requirement(_Shape):
    key: Any = None
    operator: Any = None
    values: list[Any] | None = None


class _Term(_Shape):
    match_expressions: list[_Requirement] | None = None
    match_fields: list[_Requirement] | None = None


class _Selector(_Shape):
    node_selector_terms: list[_Term] | None = None


class _Preferred(_Shape):
    weight: int | None = None
    preference: _Term | None = None


class _NodeAffinity(_Shape):
    required_during_scheduling_ignored_during_execution: _Selector | None = None
    preferred_during_scheduling_ignored_during_execution: list[_Preferred] | None = None


class _Affinity(_Shape):
    node_affinity: _NodeAffinity | None = None


class _PodSpec(_Shape):
    containers: list[_Container] | None = None
    init_containers: list[_Container] | None = None
    overhead: dict[str, Any] | None = None
    resources: _ResourceRequirements | None = None
    node_selector: dict[str, Any] | None = None
    affinity: _Affinity | None = None
    tolerations: list[dict[str, Any]] | None = None


class _Metadata(_Shape):
    annotations: dict[str, Any] | None = None
    labels: dict[str, Any] | None = None


class _PodTemplate(_Shape):
    metadata: _Metadata | None = None
    spec: _PodSpec | None = None


def json_kind(value: object) -> str:
    """The JSON/YAML name of ``value``'s type, for 'expected X, got Y' messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, dict):
        return "mapping"
    return "array" if isinstance(value, list) else type(value).__name__


def error_line(exc: ValidationError, prefix: str = "") -> str:
    """The first error of ``exc`` as ``<path>: <problem>``, the path under ``prefix``."""
    err = exc.errors(include_url=False)[0]
    ctx = err.get("ctx", {})
    path = prefix
    for part in err["loc"]:
        path += f"[{part}]" if isinstance(part, int) else (f".{part}" if path else str(part))
    match err["type"]:
        case "dict_type" | "model_type" | "model_attributes_type":
            problem = f"expected a mapping, got {json_kind(err['input'])}"
        case "list_type":
            problem = f"expected an array, got {json_kind(err['input'])}"
        case "int_type" | "int_parsing" | "int_from_float":
            problem = f"expected an integer, got {err['input']!r}"
        case "greater_than_equal":
            problem = f"must be at least {ctx.get('ge')}, got {err['input']}"
        case "less_than_equal":
            problem = f"must be at most {ctx.get('le')}, got {err['input']}"
        case "too_long":
            problem = f"has {ctx.get('actual_length')} entries, at most {ctx.get('max_length')} allowed"
        case _:
            problem = err["msg"]
    return f"{path}: {problem}" if path else problem


def template_shape_error(template: Any, path: str) -> str | None:
    """``<path>.<field>: <problem>`` for the first field of a pod template of the wrong type, else None."""
    try:
        _PodTemplate.model_validate(template)
    except ValidationError as exc:
        return error_line(exc, path)
    return None
