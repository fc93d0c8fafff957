"""Pydantic models of Kueue's ``TopologyAssignment`` wire shapes, and their error texts.

The models hold exactly what Kueue's CRD schema allows (v1beta2 slices, the v1beta1
``domains`` form, our Workload annotation) plus our own bound on the domains one
assignment may expand to.  They are strict, as JSON is: ``2.0`` is not an integer,
``true`` is not a count.  Go decodes a ``null`` like an absent field and ignores
unknown fields, so do they.

Validation failures become :class:`AssignmentFormatError` with the path of the
offending field first, e.g. ``slices[1].podCounts.individual: has 3 entries,
domainCount is 4``.  Checks that relate one field to another (roots per domain,
values per level) raise :func:`_problem` with the path below the model they run on.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Annotated, Any

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    Strict,
    ValidationError,
    model_validator,
)
from pydantic.alias_generators import to_camel
from pydantic_core import ErrorDetails, PydanticCustomError

from kueue_tas.api.object_base import INT32_MAX

__all__ = [
    "MAX_DOMAINS_PER_SLICE",
    "MAX_LEVELS",
    "MAX_SLICES",
    "MAX_TOTAL_DOMAINS",
    "AssignmentFormatError",
    "AssignmentWire",
    "PodSetName",
    "PodSetsAnnotationWire",
    "check_expanded",
    "format_error",
]

# Limits of Kueue's v1beta2 API (kubebuilder markers on apis/kueue/v1beta2 types).
MAX_LEVELS = 16
MAX_LEVEL_KEY_LENGTH = 317
MAX_VALUE_LENGTH = 63
MAX_SLICES = 1000
MAX_DOMAINS_PER_SLICE = 100_000
# v1beta1 ``domains`` list limit.
MAX_V1BETA1_DOMAINS = 100_000
# Our own bound on the domains of one assignment, in both directions: Kueue's schema
# alone would let 1000 universal slices of 100 000 domains each (a few kilobytes of
# JSON) expand to 10^8 domains.  A million is far above any real cluster (Kueue's
# own tests go to 200 000).
MAX_TOTAL_DOMAINS = 1_000_000
_MAX_PODSET_NAME_LENGTH = 63
_PODSET_NAME_RE = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")


class AssignmentFormatError(ValueError):
    """A topology assignment (or its annotation) is malformed.

    The message starts with the path of the offending field, for example
    ``slices[1].podCounts.individual: has 3 entries, domainCount is 4``.
    """


def _problem(problem: str, *at: str | int) -> PydanticCustomError:
    """A failure of the field ``at`` below the model (or field) being validated."""
    return PydanticCustomError("assignment_format", "{problem}", {"problem": problem, "at": at})


# --- field types --------------------------------------------------------------------------------


def _tuple_as_list(v: object) -> object:
    # Python callers may hand tuples where JSON has arrays; strict lists take lists only.
    return list(v) if isinstance(v, tuple) else v


_Array = BeforeValidator(_tuple_as_list)


def _level_count(levels: list[str]) -> list[str]:
    if not 1 <= len(levels) <= MAX_LEVELS:
        raise _problem(f"has {len(levels)} entries, needs 1 to {MAX_LEVELS}")
    return levels


def _slice_size(n: int) -> int:
    if n > MAX_DOMAINS_PER_SLICE:
        raise _problem(f"is {n}, a slice holds at most {MAX_DOMAINS_PER_SLICE} domains")
    return n


def _podset_name(name: str) -> str:
    if not 1 <= len(name) <= _MAX_PODSET_NAME_LENGTH or not _PODSET_NAME_RE.fullmatch(name):
        raise _problem(f"{name!r} is not a valid podSet name (lowercase DNS label, at most 63 characters)")
    return name


LevelKey = Annotated[str, Field(max_length=MAX_LEVEL_KEY_LENGTH)]
LevelValue = Annotated[str, Field(max_length=MAX_VALUE_LENGTH)]
PodCount = Annotated[int, Field(ge=1, le=INT32_MAX)]
Levels = Annotated[list[LevelKey], _Array, AfterValidator(_level_count)]
PodSetName = Annotated[str, Strict(), AfterValidator(_podset_name)]


# --- models -------------------------------------------------------------------------------------


class _Wire(BaseModel):
    model_config = ConfigDict(strict=True, extra="ignore", alias_generator=to_camel)

    @model_validator(mode="before")
    @classmethod
    def _absent_nulls(cls, raw: object) -> object:
        if not isinstance(raw, Mapping):
            return raw  # pydantic reports "expected an object"
        fields = {k: v for k, v in raw.items() if v is not None}
        cls._check_fields(fields)
        return fields

    @classmethod
    def _check_fields(cls, fields: dict[Any, Any]) -> None:
        """Checks on which fields are present, before their values are validated."""


class _OneOf(_Wire):
    """Kueue's ``universal`` / ``individual`` pair: exactly one is set."""

    @classmethod
    def _check_fields(cls, fields: dict[Any, Any]) -> None:
        universal, individual = "universal" in fields, "individual" in fields
        if universal == individual:
            which = "both are set" if universal else "neither is set"
            raise _problem(f"exactly one of universal and individual must be set, {which}")


class IndividualValues(_Wire):
    prefix: LevelValue = ""
    suffix: LevelValue = ""
    roots: Annotated[list[LevelValue], _Array]


class LevelValues(_OneOf):
    universal: LevelValue | None = None
    individual: IndividualValues | None = None

    def column(self, n: int) -> list[str]:
        """The value of each of the ``n`` domains of the slice at this level."""
        if self.individual is None:
            return [self.universal or ""] * n
        ind = self.individual
        return [ind.prefix + root + ind.suffix for root in ind.roots]


class PodCounts(_OneOf):
    universal: PodCount | None = None
    individual: Annotated[list[PodCount], _Array] | None = None

    def counts(self, n: int) -> list[int]:
        return [self.universal or 1] * n if self.individual is None else self.individual


class SliceWire(_Wire):
    domain_count: Annotated[int, Field(ge=1, le=INT32_MAX), AfterValidator(_slice_size)]
    values_per_level: Annotated[list[LevelValues], _Array]
    pod_counts: PodCounts

    @model_validator(mode="after")
    def _sizes_match_domain_count(self) -> SliceWire:
        n = self.domain_count
        for j, level in enumerate(self.values_per_level):
            if level.individual is not None and len(level.individual.roots) != n:
                got = len(level.individual.roots)
                raise _problem(f"has {got} entries, domainCount is {n}", "valuesPerLevel", j, "individual", "roots")
        individual = self.pod_counts.individual
        if individual is not None and len(individual) != n:
            raise _problem(f"has {len(individual)} entries, domainCount is {n}", "podCounts", "individual")
        return self


class DomainWire(_Wire):
    values: Annotated[list[LevelValue], _Array]
    count: PodCount


def _check_values_per_domain(levels: list[str], values: Iterable[Sequence[str]], *at: str) -> None:
    for i, v in enumerate(values):
        if len(v) != len(levels):
            raise _problem(f"has {len(v)} entries, levels has {len(levels)}", *at, i, "values")


class AssignmentWire(_Wire):
    """Kueue's v1beta2 ``TopologyAssignment``, or its v1beta1 form (``domains``)."""

    levels: Levels
    slices: Annotated[list[SliceWire], _Array, Field(max_length=MAX_SLICES)] | None = None
    domains: Annotated[list[DomainWire], _Array, Field(max_length=MAX_V1BETA1_DOMAINS)] | None = None

    @classmethod
    def _check_fields(cls, fields: dict[Any, Any]) -> None:
        if "slices" in fields and "domains" in fields:
            raise _problem("has both slices (v1beta2) and domains (v1beta1); expected one of them")

    @model_validator(mode="after")
    def _fits_levels_and_bound(self) -> AssignmentWire:
        _check_values_per_domain(self.levels, (d.values for d in self.domains or ()), "domains")
        total = 0
        for i, s in enumerate(self.slices or []):
            if len(s.values_per_level) != len(self.levels):
                got = len(s.values_per_level)
                raise _problem(f"has {got} entries, levels has {len(self.levels)}", "slices", i, "valuesPerLevel")
            total += s.domain_count
            if total > MAX_TOTAL_DOMAINS:
                n = s.domain_count
                raise _problem(
                    f"is {n}, which takes the assignment past {MAX_TOTAL_DOMAINS} domains", "slices", i, "domainCount"
                )
        return self


def _list_as_tuple(v: object) -> object:
    return tuple(v) if isinstance(v, list) else v


class _ExpandedColumns(BaseModel):
    """The expanded form column by column: no model per domain, so a million domains validate fast."""

    model_config = ConfigDict(strict=True)

    levels: Levels
    values: Annotated[
        list[Annotated[tuple[LevelValue, ...], BeforeValidator(_list_as_tuple)]], Field(max_length=MAX_TOTAL_DOMAINS)
    ]
    counts: list[PodCount]

    @model_validator(mode="after")
    def _fits_levels(self) -> _ExpandedColumns:
        _check_values_per_domain(self.levels, self.values)
        return self


def _domains_loc(loc: tuple[str | int, ...]) -> tuple[str | int, ...]:
    """``values[i]...`` and ``counts[i]`` as the domain fields they were taken from."""
    match loc:
        case ("values", int(i), *rest):
            return ("domains", i, "values", *rest)
        case ("values",) | ("counts",):
            return ("domains",)
        case ("counts", int(i)):
            return ("domains", i, "count")
        case (int(i), "values", *rest):  # from _check_values_per_domain
            return ("domains", i, "values", *rest)
    return loc


def check_expanded(levels: object, values: Sequence[object], counts: Sequence[object]) -> None:
    """Refuses an expanded assignment that Kueue's schema (or our domain bound) would refuse.

    ``values[i]`` and ``counts[i]`` are domain ``i``'s; errors name ``domains[i]...``.
    """
    try:
        _ExpandedColumns.model_validate({"levels": levels, "values": values, "counts": counts})
    except ValidationError as e:
        raise format_error(e, relocate=_domains_loc) from None


class PodSetAssignmentWire(_Wire):
    name: PodSetName
    topology_assignment: AssignmentWire


class PodSetsAnnotationWire(_Wire):
    """Our Workload annotation: ``{"podSets": [{"name", "topologyAssignment"}]}``."""

    pod_sets: Annotated[list[PodSetAssignmentWire], _Array]

    @model_validator(mode="after")
    def _unique_names(self) -> PodSetsAnnotationWire:
        seen: set[str] = set()
        for i, entry in enumerate(self.pod_sets):
            if entry.name in seen:
                raise _problem(f"duplicate podSet name {entry.name!r}", "podSets", i, "name")
            seen.add(entry.name)
        return self


# --- errors -------------------------------------------------------------------------------------


def _kind(v: object) -> str:
    """JSON-ish name of a value's type, for messages."""
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, int):
        return "integer"
    if isinstance(v, float):
        return "number"
    if isinstance(v, str):
        return "string"
    if isinstance(v, Mapping):
        return "object"
    if isinstance(v, list | tuple):
        return "array"
    return type(v).__name__


def _describe(err: ErrorDetails) -> str:
    value, ctx = err["input"], err.get("ctx", {})
    match err["type"]:
        case "assignment_format":
            return str(ctx["problem"])
        case "missing":
            return "is required"
        case "string_type":
            return f"expected a string, got {_kind(value)}"
        case "string_unicode":
            return "is not valid Unicode text (lone surrogate)"
        case "int_type":
            return f"expected an integer, got {_kind(value)}"
        case "list_type" | "tuple_type":
            return f"expected an array, got {_kind(value)}"
        case "model_type" | "model_attributes_type" | "dict_type":
            return f"expected an object, got {_kind(value)}"
        case "string_too_long":
            return f"is {len(value)} characters long, at most {ctx['max_length']} allowed"
        case "too_long":
            return f"has {ctx['actual_length']} entries, at most {ctx['max_length']} allowed"
        case "greater_than_equal":
            return f"must be at least {ctx['ge']}, got {value}"
        case "less_than_equal":
            return f"must be at most {ctx['le']}, got {value}"
    return err["msg"]  # a check we did not foresee still names the field


def format_error(
    e: ValidationError,
    prefix: str = "",
    relocate: Callable[[tuple[str | int, ...]], tuple[str | int, ...]] | None = None,
) -> AssignmentFormatError:
    """The first failure of ``e`` as one line: ``<field path>: <problem>``."""
    err = e.errors(include_url=False)[0]
    loc = tuple(err["loc"])
    if err["type"] == "assignment_format":
        loc += tuple(err.get("ctx", {})["at"])
    if relocate is not None:
        loc = relocate(loc)
    path = prefix
    for part in loc:
        path += f"[{part}]" if isinstance(part, int) else (f".{part}" if path else part)
    problem = _describe(err)
    return AssignmentFormatError(f"{path}: {problem}" if path else problem)
