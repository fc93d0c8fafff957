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

Decoding accepts what Kueue's CRD schema accepts (including the v1beta1
``levels`` + ``domains`` form), ignores unknown fields and ``null`` values as
Go does, and raises :class:`AssignmentFormatError` naming the field path and
the problem for anything else.  It also refuses slices of more than 100 000
domains (Kueue never writes them) and assignments of more than
MAX_TOTAL_DOMAINS domains, so a small document cannot expand to an enormous
assignment; encoding refuses the same, so whatever encodes also decodes.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any, NoReturn

from kueue_tas.api.constants import HOSTNAME_LABEL
from kueue_tas.topology.assignment import DomainAssignment, TopologyAssignment

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
_MAX_INT32 = 2**31 - 1
_MAX_PODSET_NAME_LENGTH = 63
_PODSET_NAME_RE = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")


class AssignmentFormatError(ValueError):
    """A topology assignment (or its annotation) is malformed.

    The message starts with the path of the offending field, for example
    ``slices[1].podCounts.individual: has 3 entries, domainCount is 4``.
    """


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
        _check_podset_name(name, f"{path}.name")
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
    if not isinstance(a, TopologyAssignment):
        _fail("", f"expected a TopologyAssignment, got {type(a).__name__}")
    levels = a.levels
    if not isinstance(levels, tuple | list):
        _fail("levels", f"expected a tuple of strings, got {type(levels).__name__}")
    if not 1 <= len(levels) <= MAX_LEVELS:
        _fail("levels", f"has {len(levels)} entries, needs 1 to {MAX_LEVELS}")
    for i, level in enumerate(levels):
        _check_text(level, f"levels[{i}]", MAX_LEVEL_KEY_LENGTH)
    domains = a.domains
    if not isinstance(domains, tuple | list):
        _fail("domains", f"expected a tuple of DomainAssignment, got {type(domains).__name__}")
    limit = min(MAX_TOTAL_DOMAINS, MAX_SLICES * MAX_DOMAINS_PER_SLICE)
    if len(domains) > limit:
        _fail("domains", f"has {len(domains)} entries, at most {limit} allowed")
    n_levels = len(levels)
    for i, d in enumerate(domains):
        if not isinstance(d, DomainAssignment):
            _fail(f"domains[{i}]", f"expected a DomainAssignment, got {type(d).__name__}")
        values = d.values
        if not isinstance(values, tuple | list) or len(values) != n_levels:
            got = len(values) if isinstance(values, tuple | list) else type(values).__name__
            _fail(f"domains[{i}].values", f"has {got} entries, levels has {n_levels}")
        for j, v in enumerate(values):
            _check_text(v, f"domains[{i}].values[{j}]", MAX_VALUE_LENGTH)
        _check_int32(d.count, f"domains[{i}].count", 1)


def _check_text(v: object, path: str, max_len: int) -> None:
    if not isinstance(v, str):
        _fail(path, f"expected a string, got {_kind(v)}")
    if len(v) > max_len:
        _fail(path, f"is {len(v)} characters long, at most {max_len} allowed")
    if not v.isascii():
        try:
            v.encode("utf-8")
        except UnicodeEncodeError:
            _fail(path, "is not valid Unicode text (lone surrogate)")


def _check_int32(v: object, path: str, minimum: int) -> None:
    if not isinstance(v, int) or isinstance(v, bool):
        _fail(path, f"expected an integer, got {_kind(v)}")
    if v < minimum:
        _fail(path, f"must be at least {minimum}, got {v}")
    if v > _MAX_INT32:
        _fail(path, f"must be at most {_MAX_INT32}, got {v}")


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
    return _decode_assignment(obj, "")


def decode_assignment_annotation(text: str) -> list[tuple[str, TopologyAssignment]]:
    """The ``(podset name, assignment)`` pairs stored in our Workload annotation."""
    if not isinstance(text, str):
        _fail("", f"annotation value must be a string, got {type(text).__name__}")
    try:
        doc = json.loads(text, parse_constant=_reject_constant)
    except RecursionError:
        _fail("", "not valid JSON: nested too deeply")
    except ValueError as e:
        _fail("", f"not valid JSON: {e}")
    root = _mapping(doc, "")
    podsets = _list(_required(root, "podSets", ""), "podSets")
    out: list[tuple[str, TopologyAssignment]] = []
    seen: set[str] = set()
    for i, entry in enumerate(podsets):
        path = f"podSets[{i}]"
        m = _mapping(entry, path)
        name = _required(m, "name", path)
        _check_podset_name(name, f"{path}.name")
        if name in seen:
            _fail(f"{path}.name", f"duplicate podSet name {name!r}")
        seen.add(name)
        ta = _required(m, "topologyAssignment", path)
        out.append((name, _decode_assignment(ta, f"{path}.topologyAssignment")))
    return out


def _reject_constant(name: str) -> NoReturn:
    raise ValueError(f"{name} is not allowed")


def _decode_assignment(obj: object, path: str) -> TopologyAssignment:
    m = _mapping(obj, path)
    levels_raw = _list(_required(m, "levels", path), _join(path, "levels"))
    if not 1 <= len(levels_raw) <= MAX_LEVELS:
        _fail(_join(path, "levels"), f"has {len(levels_raw)} entries, needs 1 to {MAX_LEVELS}")
    levels = tuple(_string(v, f"{_join(path, 'levels')}[{i}]", MAX_LEVEL_KEY_LENGTH) for i, v in enumerate(levels_raw))
    slices = m.get("slices")
    domains = m.get("domains")
    if slices is not None and domains is not None:
        _fail(path, "has both slices (v1beta2) and domains (v1beta1); expected one of them")
    if domains is not None:
        return TopologyAssignment(levels, _decode_v1beta1_domains(domains, len(levels), path))
    if slices is None:
        return TopologyAssignment(levels, ())
    return TopologyAssignment(levels, _decode_slices(slices, len(levels), path))


def _decode_v1beta1_domains(raw: object, n_levels: int, path: str) -> tuple[DomainAssignment, ...]:
    dpath = _join(path, "domains")
    items = _list(raw, dpath)
    if len(items) > MAX_V1BETA1_DOMAINS:
        _fail(dpath, f"has {len(items)} entries, at most {MAX_V1BETA1_DOMAINS} allowed")
    out: list[DomainAssignment] = []
    for i, item in enumerate(items):
        ipath = f"{dpath}[{i}]"
        m = _mapping(item, ipath)
        vpath = f"{ipath}.values"
        values_raw = _list(_required(m, "values", ipath), vpath)
        if len(values_raw) != n_levels:
            _fail(vpath, f"has {len(values_raw)} entries, levels has {n_levels}")
        values = tuple(_string(v, f"{vpath}[{j}]", MAX_VALUE_LENGTH) for j, v in enumerate(values_raw))
        count = _int32(_required(m, "count", ipath), f"{ipath}.count", 1)
        out.append(DomainAssignment(values, count))
    return tuple(out)


def _decode_slices(raw: object, n_levels: int, path: str) -> tuple[DomainAssignment, ...]:
    spath = _join(path, "slices")
    items = _list(raw, spath)
    if len(items) > MAX_SLICES:
        _fail(spath, f"has {len(items)} entries, at most {MAX_SLICES} allowed")
    out: list[DomainAssignment] = []
    for i, item in enumerate(items):
        out.extend(_decode_slice(item, n_levels, f"{spath}[{i}]", MAX_TOTAL_DOMAINS - len(out)))
    return tuple(out)


def _decode_slice(raw: object, n_levels: int, path: str, room: int) -> list[DomainAssignment]:
    m = _mapping(raw, path)
    n = _int32(_required(m, "domainCount", path), f"{path}.domainCount", 1)
    if n > MAX_DOMAINS_PER_SLICE:
        _fail(f"{path}.domainCount", f"is {n}, a slice holds at most {MAX_DOMAINS_PER_SLICE} domains")
    if n > room:
        _fail(f"{path}.domainCount", f"is {n}, which takes the assignment past {MAX_TOTAL_DOMAINS} domains")

    vpath = f"{path}.valuesPerLevel"
    per_level_raw = _list(_required(m, "valuesPerLevel", path), vpath)
    if len(per_level_raw) != n_levels:
        _fail(vpath, f"has {len(per_level_raw)} entries, levels has {n_levels}")
    columns = [_decode_level_values(v, n, f"{vpath}[{j}]") for j, v in enumerate(per_level_raw)]

    counts = _decode_pod_counts(_required(m, "podCounts", path), n, f"{path}.podCounts")
    return [DomainAssignment(tuple(col[i] for col in columns), counts[i]) for i in range(n)]


def _decode_level_values(raw: object, n: int, path: str) -> list[str]:
    m = _mapping(raw, path)
    universal = m.get("universal")
    individual = m.get("individual")
    if (universal is None) == (individual is None):
        which = "both are set" if universal is not None else "neither is set"
        _fail(path, f"exactly one of universal and individual must be set, {which}")
    if universal is not None:
        return [_string(universal, f"{path}.universal", MAX_VALUE_LENGTH)] * n
    ipath = f"{path}.individual"
    im = _mapping(individual, ipath)
    prefix_raw = im.get("prefix")
    suffix_raw = im.get("suffix")
    prefix = "" if prefix_raw is None else _string(prefix_raw, f"{ipath}.prefix", MAX_VALUE_LENGTH)
    suffix = "" if suffix_raw is None else _string(suffix_raw, f"{ipath}.suffix", MAX_VALUE_LENGTH)
    rpath = f"{ipath}.roots"
    roots = _list(_required(im, "roots", ipath), rpath)
    if len(roots) != n:
        _fail(rpath, f"has {len(roots)} entries, domainCount is {n}")
    return [prefix + _string(r, f"{rpath}[{k}]", MAX_VALUE_LENGTH) + suffix for k, r in enumerate(roots)]


def _decode_pod_counts(raw: object, n: int, path: str) -> list[int]:
    m = _mapping(raw, path)
    universal = m.get("universal")
    individual = m.get("individual")
    if (universal is None) == (individual is None):
        which = "both are set" if universal is not None else "neither is set"
        _fail(path, f"exactly one of universal and individual must be set, {which}")
    if universal is not None:
        return [_int32(universal, f"{path}.universal", 1)] * n
    ipath = f"{path}.individual"
    items = _list(individual, ipath)
    if len(items) != n:
        _fail(ipath, f"has {len(items)} entries, domainCount is {n}")
    return [_int32(c, f"{ipath}[{k}]", 1) for k, c in enumerate(items)]


# --------------------------------------------------------------------------------------------
# Small checkers shared by both directions
# --------------------------------------------------------------------------------------------


def _fail(path: str, problem: str) -> NoReturn:
    raise AssignmentFormatError(f"{path}: {problem}" if path else problem)


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


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


def _mapping(v: object, path: str) -> Mapping[Any, Any]:
    if not isinstance(v, Mapping):
        _fail(path, f"expected an object, got {_kind(v)}")
    return v


def _list(v: object, path: str) -> Sequence[Any]:
    if not isinstance(v, list | tuple):
        _fail(path, f"expected an array, got {_kind(v)}")
    return v


def _required(m: Mapping[Any, Any], key: str, path: str) -> Any:
    v = m.get(key)
    if v is None:
        _fail(_join(path, key), "is required")
    return v


def _string(v: object, path: str, max_len: int) -> str:
    _check_text(v, path, max_len)
    assert isinstance(v, str)
    return v


def _int32(v: object, path: str, minimum: int) -> int:
    _check_int32(v, path, minimum)
    assert isinstance(v, int)
    return v


def _check_podset_name(name: object, path: str) -> None:
    if not isinstance(name, str):
        _fail(path, f"expected a string, got {_kind(name)}")
    if not 1 <= len(name) <= _MAX_PODSET_NAME_LENGTH or not _PODSET_NAME_RE.fullmatch(name):
        _fail(path, f"{name!r} is not a valid podSet name (lowercase DNS label, at most 63 characters)")
