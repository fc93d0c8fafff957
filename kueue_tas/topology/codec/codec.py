"""Kueue's ``TopologyAssignment`` wire formats, and our Workload annotation.

kueue-tas writes its assignments in Kueue's own v1beta2 shape, so any tool that
reads Kueue's TAS output can read ours.  This module converts between that shape
and the expanded :class:`~kueue_tas.topology.assignment.TopologyAssignment`.

v1beta2 shape (JSON field names and omission rules as Kueue's Go types)::

    {"levels": [key, ...],                       # 1..16 node-label keys
     "slices": [                                 # 0..1000, omitted when empty
       {"domainCount": n,                        # 1..100000 domains in this slice
        "valuesPerLevel": [                      # one entry per level
          {"universal": v}                       # every domain has value v, or
          {"individual": {"prefix": p,           # optional, omitted when ""
                          "suffix": s,           # optional, omitted when ""
                          "roots": [r, ...]}}],  # n roots: value i = p + roots[i] + s
        "podCounts": {"universal": c}            # every domain gets c pods, or
                     {"individual": [c, ...]}}]} # n counts

Domain *i* overall is found by concatenating the slices in order.

Encoding follows Kueue's default (``V1Beta2From`` with the Beta gate
``TASAssignmentsEncodingByHostnamePrefix`` on and domain reordering off):

1. When the lowest level is ``kubernetes.io/hostname`` and there are at least
   two domains, every hostname gets a *key*: its longest ``-``-terminated prefix
   that at least two domains share (a ``-`` in the last position does not start
   a prefix).  If the runs of consecutive equal keys would need more than 1000
   slices, shorter prefixes are tried; if none fits, there are no keys.
2. Each run (or the whole assignment, without keys) is cut into chunks of at
   most 100 000 domains, and each chunk becomes one compact slice.
3. If that gave more than one slice and there are at most 100 000 domains, the
   single compact slice over all domains is used instead when its JSON is
   strictly smaller.

A compact slice uses ``universal`` when all values of a level (or all counts)
are equal; otherwise ``individual`` with the longest common prefix and suffix
(the prefix is shortened when the two would overlap in the shortest value).
Domain order is never changed.

One deliberate difference: Kueue cuts prefixes and suffixes at byte positions
of the UTF-8 text, we cut at character positions, so a multi-byte character is
never split.  Kubernetes label values are ASCII, where both are the same.

Decoding validates through the pydantic models of :mod:`kueue_tas.topology.codec.wire`:
it accepts what Kueue's CRD schema accepts (including the v1beta1 ``levels`` +
``domains`` form), ignores unknown fields and ``null`` values as Go does, and
raises :class:`AssignmentFormatError` naming the field path and the problem for
anything else.  It also refuses slices of more than 100 000
domains (Kueue never writes them) and assignments of more than
MAX_TOTAL_DOMAINS domains, so a small document cannot expand to an enormous
assignment; encoding refuses the same, so whatever encodes also decodes.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping, Sequence
from typing import Any, Final, NoReturn

from pydantic import TypeAdapter, ValidationError

from kueue_tas.api.constants import HOSTNAME_LABEL
from kueue_tas.topology.assignment import DomainAssignment, TopologyAssignment
from kueue_tas.topology.codec.wire import (
    MAX_DOMAINS_PER_SLICE,
    MAX_LEVELS,
    MAX_SLICES,
    MAX_TOTAL_DOMAINS,
    AssignmentFormatError,
    AssignmentWire,
    PodSetName,
    PodSetsAnnotationWire,
    check_expanded,
    format_error,
)

__all__ = [
    "MAX_DOMAINS_PER_SLICE",
    "MAX_LEVELS",
    "MAX_SLICES",
    "MAX_TOTAL_DOMAINS",
    "AssignmentFormatError",
    "decode_assignment_annotation",
    "decode_v1beta2",
    "encode_assignment_annotation",
    "encode_v1beta2",
]

_PODSET_NAME: TypeAdapter[str] = TypeAdapter(PodSetName)

# --------------------------------------------------------------------------------------------
# Encoding
# --------------------------------------------------------------------------------------------


def encode_v1beta2(a: TopologyAssignment) -> dict[str, Any]:
    """The JSON-ready v1beta2 form of ``a``, exactly as Kueue serialises it.

    Raises :class:`AssignmentFormatError` when ``a`` cannot be represented
    (no levels, a domain with the wrong number of values, a count below 1, ...).
    """
    _check_assignment(a)
    levels = list(a.levels)
    slices = _choose_slices(a)
    out: dict[str, Any] = {"levels": levels}
    if slices:  # Go: `json:"slices,omitempty"`
        out["slices"] = slices
    return out


def encode_assignment_annotation(podsets: Sequence[tuple[str, TopologyAssignment]]) -> str:
    """The value of the ``kueue-tas.io/topology-assignment`` Workload annotation.

    Compact JSON: ``{"podSets":[{"name":...,"topologyAssignment":{...}}]}``.
    """
    if isinstance(podsets, str | bytes) or not isinstance(podsets, Sequence):
        _fail("podSets", f"expected a sequence of (name, assignment) pairs, got {type(podsets).__name__}")
    entries: list[dict[str, Any]] = []
    seen: set[str] = set()
    for i, item in enumerate(podsets):
        path = f"podSets[{i}]"
        if not isinstance(item, tuple) or len(item) != 2:
            _fail(path, "expected a (name, assignment) pair")
        name, assignment = item
        try:
            _PODSET_NAME.validate_python(name)
        except ValidationError as e:
            raise format_error(e, f"{path}.name") from None
        if name in seen:
            _fail(f"{path}.name", f"duplicate podSet name {name!r}")
        seen.add(name)
        if not isinstance(assignment, TopologyAssignment):
            _fail(f"{path}.topologyAssignment", f"expected a TopologyAssignment, got {type(assignment).__name__}")
        try:
            encoded = encode_v1beta2(assignment)
        except AssignmentFormatError as e:
            raise AssignmentFormatError(f"{path}.topologyAssignment.{e}") from None
        entries.append({"name": name, "topologyAssignment": encoded})
    return json.dumps({"podSets": entries}, separators=(",", ":"), ensure_ascii=False)


def _check_assignment(a: TopologyAssignment) -> None:
    """Refuses what Kueue's schema (or our domain bound) would refuse on decoding."""
    if not isinstance(a, TopologyAssignment):
        _fail("", f"expected a TopologyAssignment, got {type(a).__name__}")
    if not isinstance(a.domains, tuple | list):
        _fail("domains", f"expected a tuple of DomainAssignment, got {type(a.domains).__name__}")
    for i, d in enumerate(a.domains):
        if not isinstance(d, DomainAssignment):
            _fail(f"domains[{i}]", f"expected a DomainAssignment, got {type(d).__name__}")
    check_expanded(a.levels, [d.values for d in a.domains], [d.count for d in a.domains])


def _choose_slices(a: TopologyAssignment) -> list[dict[str, Any]]:
    """Kueue's choice: hostname-prefix runs, or one slice if its JSON is strictly smaller."""
    slices = _hostname_run_slices(a)
    n = len(a.domains)
    if len(slices) > 1 and n <= MAX_DOMAINS_PER_SLICE:
        single = [_compact_slice(a.domains, len(a.levels))]
        levels = list(a.levels)
        single_size = _go_json_size({"levels": levels, "slices": single})
        if single_size < _go_json_size({"levels": levels, "slices": slices}):
            return single
    return slices


def _hostname_run_slices(a: TopologyAssignment) -> list[dict[str, Any]]:
    """One compact slice per chunk of each run of domains sharing a hostname-prefix key.

    Without a hostname level (or without usable keys) the whole assignment is one
    run, so this is the single compact slice, chunked at MAX_DOMAINS_PER_SLICE.
    """
    domains = a.domains
    n = len(domains)
    keys: list[str] | None = None
    if n > 1 and a.levels[-1] == HOSTNAME_LABEL:
        keys = _hostname_prefix_keys([d.values[-1] for d in domains])
    n_levels = len(a.levels)
    return [
        _compact_slice(domains[start:end], n_levels)
        for run_start, run_end in _runs(keys, n)
        for start, end in _chunks(run_start, run_end)
    ]


def _runs(keys: list[str] | None, n: int) -> list[tuple[int, int]]:
    """Half-open index ranges of consecutive domains with equal keys."""
    if n == 0:
        return []
    if keys is None:
        return [(0, n)]
    runs: list[tuple[int, int]] = []
    start = 0
    for i in range(1, n):
        if keys[i] != keys[start]:
            runs.append((start, i))
            start = i
    runs.append((start, n))
    return runs


def _chunks(start: int, end: int) -> list[tuple[int, int]]:
    return [(s, min(s + MAX_DOMAINS_PER_SLICE, end)) for s in range(start, end, MAX_DOMAINS_PER_SLICE)]


def _slice_count(keys: list[str]) -> int:
    """Slices needed for the runs of ``keys``, each cut at MAX_DOMAINS_PER_SLICE."""
    total = 0
    for start, end in _runs(keys, len(keys)):
        total += -(-(end - start) // MAX_DOMAINS_PER_SLICE)
    return total


def _hostname_prefix_keys(hostnames: list[str]) -> list[str] | None:
    """Per hostname, the reusable ``-``-terminated prefix that decides its run.

    Candidates of a hostname are its prefixes ending just after a ``-`` that is
    not the last character.  A candidate is reusable when it is a candidate of
    at least two domains.  At depth ``d`` a hostname's key is its longest
    reusable candidate among its first ``d``; depths are tried from the deepest
    down until the runs fit in MAX_SLICES slices.  ``None`` when no depth fits
    (or no hostname has a candidate): then all domains form one run.

    Reusable candidates of one hostname are always its *first* ``r`` candidates
    (another hostname with a longer shared prefix shares every shorter one too),
    so the key at depth ``d`` is simply candidate ``min(r, d) - 1``.
    """
    ends_per_host: list[list[int]] = []
    seen: dict[str, int] = {}
    for h in hostnames:
        ends = [i + 1 for i in range(len(h) - 1) if h[i] == "-"]
        ends_per_host.append(ends)
        for e in ends:
            p = h[:e]
            if seen.get(p, 0) < 2:
                seen[p] = seen.get(p, 0) + 1
    max_depth = max(len(ends) for ends in ends_per_host)
    if max_depth == 0:
        return None
    reusable: list[int] = []
    for h, ends in zip(hostnames, ends_per_host, strict=True):
        r = 0
        while r < len(ends) and seen[h[: ends[r]]] >= 2:
            r += 1
        reusable.append(r)
    # Depths beyond the deepest reusable candidate give the same keys.
    depth = min(max_depth, max(max(reusable), 1))
    while depth >= 1:
        keys = [
            h[: ends[min(r, depth) - 1]] if r > 0 else ""
            for h, ends, r in zip(hostnames, ends_per_host, reusable, strict=True)
        ]
        if _slice_count(keys) <= MAX_SLICES:
            return keys
        depth -= 1
    return None


def _compact_slice(domains: Sequence[DomainAssignment], n_levels: int) -> dict[str, Any]:
    counts = [d.count for d in domains]
    first = counts[0]
    same = all(c == first for c in counts)
    pod_counts: dict[str, Any] = {"universal": first} if same else {"individual": counts}
    return {
        "domainCount": len(domains),
        "valuesPerLevel": [_level_values([d.values[i] for d in domains]) for i in range(n_levels)],
        "podCounts": pod_counts,
    }


def _level_values(values: list[str]) -> dict[str, Any]:
    lo, hi = min(values), max(values)
    if lo == hi:
        return {"universal": lo}
    # The common prefix of the smallest and largest string is that of all of them.
    prefix_len = _common_prefix_len(lo, hi)
    reversed_values = [v[::-1] for v in values]
    suffix_len = _common_prefix_len(min(reversed_values), max(reversed_values))
    shortest = min(len(v) for v in values)
    if prefix_len + suffix_len > shortest:
        prefix_len = shortest - suffix_len
    individual: dict[str, Any] = {}
    if prefix_len:
        individual["prefix"] = lo[:prefix_len]
    if suffix_len:
        individual["suffix"] = lo[len(lo) - suffix_len :]
    individual["roots"] = [v[prefix_len : len(v) - suffix_len] for v in values]
    return {"individual": individual}


def _common_prefix_len(a: str, b: str) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


def _go_json_size(obj: Any) -> int:
    """Bytes of Go's ``json.Marshal`` output for ``obj`` (compact, UTF-8).

    Go additionally escapes ``<``, ``>`` and ``&`` (6 bytes instead of 1) and
    U+2028/U+2029 (6 bytes instead of 3); otherwise it escapes like Python.
    """
    text = json.dumps(obj, separators=(",", ":"), ensure_ascii=False)
    size = len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))
    size += 5 * (text.count("<") + text.count(">") + text.count("&"))
    size += 3 * (text.count("\u2028") + text.count("\u2029"))
    return size


# --------------------------------------------------------------------------------------------
# Decoding
# --------------------------------------------------------------------------------------------


def decode_v1beta2(obj: Mapping[str, Any]) -> TopologyAssignment:
    """The expanded assignment from Kueue's v1beta2 (or v1beta1) JSON form."""
    try:
        wire = AssignmentWire.model_validate(obj)
    except ValidationError as e:
        raise format_error(e) from None
    return _expand(wire)


# The controller's reconcilers (capacity, ungater, guard, node repair, stray pods, topology
# health) each read every admitted workload's annotation, on every pass and event: one parse per
# distinct text serves them all. Only texts up to this size are kept (the cache stays ~16 MB at
# most); the assignments are frozen, each caller gets its own list.
_DECODED_CACHE_TEXT_LIMIT: Final = 16 * 1024


def decode_assignment_annotation(text: str) -> list[tuple[str, TopologyAssignment]]:
    """The ``(podset name, assignment)`` pairs stored in our Workload annotation."""
    if isinstance(text, str) and len(text) <= _DECODED_CACHE_TEXT_LIMIT:
        return list(_decode_cached(text))
    return list(_decode(text))


@functools.lru_cache(maxsize=1024)
def _decode_cached(text: str) -> tuple[tuple[str, TopologyAssignment], ...]:
    return _decode(text)


def _decode(text: str) -> tuple[tuple[str, TopologyAssignment], ...]:
    if not isinstance(text, str):
        _fail("", f"annotation value must be a string, got {type(text).__name__}")
    try:
        doc = json.loads(text, parse_constant=_reject_constant)
    except RecursionError:
        _fail("", "not valid JSON: nested too deeply")
    except ValueError as e:
        _fail("", f"not valid JSON: {e}")
    try:
        wire = PodSetsAnnotationWire.model_validate(doc)
    except ValidationError as e:
        raise format_error(e) from None
    return tuple((entry.name, _expand(entry.topology_assignment)) for entry in wire.pod_sets)


def _reject_constant(name: str) -> NoReturn:
    raise ValueError(f"{name} is not allowed")


def _expand(wire: AssignmentWire) -> TopologyAssignment:
    """One DomainAssignment per domain; the wire models already bounded their number."""
    levels = tuple(wire.levels)
    if wire.domains is not None:
        return TopologyAssignment(levels, tuple(DomainAssignment(tuple(d.values), d.count) for d in wire.domains))
    out: list[DomainAssignment] = []
    for s in wire.slices or ():
        n = s.domain_count
        columns = [level.column(n) for level in s.values_per_level]
        counts = s.pod_counts.counts(n)
        out.extend(DomainAssignment(tuple(col[i] for col in columns), counts[i]) for i in range(n))
    return TopologyAssignment(levels, tuple(out))


def _fail(path: str, problem: str) -> NoReturn:
    raise AssignmentFormatError(f"{path}: {problem}" if path else problem)
