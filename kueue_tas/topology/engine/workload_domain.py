"""A workload-wide constraint: every PodSet of a workload in one domain of a level (pure).

kueue-tas's extension, for platforms that constrain a whole deployment (NVIDIA Dynamo's
deployment-level constraint, OSMO's "the whole workflow in one zone"): the Job or JobSet says
``kueue-tas.io/workload-required-topology: zone`` (or ``workload-preferred-topology``, or
both) and each PodSet keeps its own constraint inside that one domain.

* required ``W``: the PodSets are placed, in Kueue's order and each by its own request, inside
  one domain of ``W``; domains are tried tightest first (least aggregate room for the
  workload's total request, then name order), and the first where every PodSet fits wins.
  None fits: the PodSets fail with their reasons in the roomiest domain tried.
* preferred ``P``: the same at ``P``, then one level up at a time (as Kueue's preferred
  climbs), up to the top level; nowhere: placed as if no workload constraint were given.
* both: start at ``P``, climb no higher than ``W`` (as a PodSet's required + preferred).

A PodSet's own level must be the workload's level or below it (a PodSet cannot be spread wider
than the domain holding the whole workload); :func:`podset_level_problem` says which is not.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from kueue_tas.api import constants as c
from kueue_tas.api.object_base import INT32_MAX
from kueue_tas.topology.engine.capacity_matrix import Matrix
from kueue_tas.topology.engine.domain_state import descendant_range
from kueue_tas.topology.engine.find_assignment import DomainLimit
from kueue_tas.topology.engine.results import PodSetResult
from kueue_tas.topology.engine.tree import TopologyTree
from kueue_tas.topology.kube_syntax import label_name_errors
from kueue_tas.topology.level_names import LevelNames
from kueue_tas.topology.model import PODS, PodSetRequest
from kueue_tas.topology.requests.request import TopologyRequestError


@dataclass(frozen=True, slots=True)
class WorkloadTopology:
    """The workload-wide request: label keys (names resolved), at least one of the two."""

    required: str | None = None
    preferred: str | None = None

    def as_dict(self) -> dict[str, str]:
        """``{"required": ..., "preferred": ...}`` with the levels given (``plan -o json``)."""
        return {k: v for k, v in (("required", self.required), ("preferred", self.preferred)) if v is not None}

    @property
    def start(self) -> str:
        level = self.preferred if self.preferred is not None else self.required
        assert level is not None
        return level


def workload_keys(prefix: str = c.DEFAULT_ANNOTATION_PREFIX) -> tuple[str, str]:
    """The required and preferred annotation keys under ``prefix``."""
    return prefix + c.SUFFIX_WORKLOAD_REQUIRED_TOPOLOGY, prefix + c.SUFFIX_WORKLOAD_PREFERRED_TOPOLOGY


def workload_annotations(annotations: Mapping[str, str], prefix: str = c.DEFAULT_ANNOTATION_PREFIX) -> dict[str, str]:
    """The workload-wide annotations among ``annotations`` (only those keys)."""
    return {k: str(annotations[k]) for k in workload_keys(prefix) if k in annotations}


def parse_workload_topology(
    annotations: Mapping[str, str], prefix: str = c.DEFAULT_ANNOTATION_PREFIX
) -> WorkloadTopology | None:
    """The workload-wide request ``annotations`` carry (None: none), levels as written.
    Raises :class:`TopologyRequestError` with one line per malformed value."""
    required_key, preferred_key = workload_keys(prefix)
    errors = [
        f"annotation {key!r}: invalid value {json.dumps(annotations[key])}: {problem}"
        for key in (required_key, preferred_key)
        if key in annotations
        for problem in label_name_errors(annotations[key])
    ]
    if errors:
        raise TopologyRequestError(errors)
    required, preferred = annotations.get(required_key), annotations.get(preferred_key)
    if required is None and preferred is None:
        return None
    return WorkloadTopology(required, preferred)


def resolve_workload_topology(workload: WorkloadTopology, levels: Sequence[str], names: LevelNames) -> WorkloadTopology:
    """``workload`` with level names replaced by their label keys."""

    def label(level: str | None) -> str | None:
        return None if level is None else names.label_of(level, levels)

    return WorkloadTopology(label(workload.required), label(workload.preferred))


def workload_level_problem(
    workload: WorkloadTopology, levels: Sequence[str], names: LevelNames, topology: str, prefix: str
) -> str | None:
    """A level the Topology lacks, or a preferred level above the required one (resolved
    ``workload``), in one line naming the annotation; None when both are usable."""
    required_key, preferred_key = workload_keys(prefix)
    for key, level in ((required_key, workload.required), (preferred_key, workload.preferred)):
        if level is not None and level not in levels:
            return (
                f'annotation {key}: unknown topology level "{level}"; '
                f'Topology "{topology}" has levels {", ".join(levels)}{names.offered()}'
            )
    if (
        workload.required is not None
        and workload.preferred is not None
        and levels.index(workload.preferred) < levels.index(workload.required)
    ):
        return (
            f'annotation {preferred_key}: level "{workload.preferred}" is above the required level '
            f'"{workload.required}" (annotation {required_key}); the preferred level must be the '
            "required level or a level below it"
        )
    return None


def podset_level_problem(
    request: PodSetRequest, levels: Sequence[str], workload: WorkloadTopology
) -> tuple[str, str] | None:
    """(the PodSet's setting, its level) when that level is above the workload's level, else
    None. The workload's level is its required one, else its preferred one."""
    bound = workload.required if workload.required is not None else workload.preferred
    t = request.topology
    if t is None or bound not in levels:
        return None
    top = levels.index(bound)
    asked = (
        ("required", t.required),
        ("preferred", t.preferred),
        ("slice-required", t.slice_level),
        *(("slice-required", layer.level) for layer in t.slice_layers),
    )
    for setting, level in asked:
        if level is not None and level in levels and levels.index(level) < top:
            return setting, level
    return None


def _order(tree: TopologyTree, lvl: int, remaining: Matrix, need: np.ndarray) -> list[int]:
    """Domains of ``lvl`` that have, in aggregate, room for ``need`` (a necessary condition),
    tightest first: fewest whole copies of the workload's request fit, then name order."""
    leaves = len(tree.leaves)
    depth = len(tree.levels)
    cols = np.flatnonzero(need)
    out: list[tuple[int, int]] = []
    for d in range(len(tree.levels[lvl])):
        lo, hi = descendant_range(tree, lvl, d, depth - 1) if lvl < depth - 1 else (d, d + 1)
        if hi <= lo or hi > leaves:
            continue
        free = np.clip(remaining[lo:hi], 0, None).sum(axis=0)
        if cols.size == 0:
            out.append((0, d))
            continue
        copies = int(min(int(free[c] // need[c]) for c in cols))
        if copies >= 1:
            out.append((min(copies, INT32_MAX), d))
    return [d for _, d in sorted(out)]


def total_request(podsets: Sequence[PodSetRequest], vector: Callable[[dict[str, int]], np.ndarray]) -> np.ndarray:
    """What the whole workload asks for: count x (requests + one pod), summed over PodSets."""
    total: np.ndarray | None = None
    for ps in podsets:
        v = vector({**ps.requests, PODS: 1}) * ps.count
        if total is None:
            total = v
        else:
            width = max(total.shape[0], v.shape[0])
            total = np.pad(total, (0, width - total.shape[0])) + np.pad(v, (0, width - v.shape[0]))
    return total if total is not None else np.zeros(0, dtype=np.int64)


def place_in_one_domain(
    tree: TopologyTree,
    workload: WorkloadTopology,
    podsets: Sequence[PodSetRequest],
    remaining: Matrix,
    need: np.ndarray,
    place_inside: Callable[[DomainLimit | None], list[PodSetResult]],
    level_shown: Callable[[str], str] = lambda level: level,
) -> list[PodSetResult]:
    """The results of placing ``podsets`` under ``workload``. ``place_inside(limit)`` places
    every PodSet within the limit (None: anywhere) and returns its results in PodSet order;
    ``remaining`` is the capacity it starts from, ``need`` the workload's total request
    (:func:`total_request`) in its columns."""
    keys = tree.level_keys
    start = keys.index(workload.start)
    top = keys.index(workload.required) if workload.required is not None else 0
    width = min(remaining.shape[1], need.shape[0])
    if need[width:].any():
        # A resource no node offers: nothing fits anywhere; Kueue's own text says why.
        return place_inside(None)
    rem, want = remaining[:, :width], need[:width]
    roomiest: list[PodSetResult] | None = None  # the failure in the last domain tried at ``top``
    for lvl in range(start, top - 1, -1):
        for d in _order(tree, lvl, rem, want):
            results = place_inside(DomainLimit(lvl, d))
            if all(r.assignment is not None for r in results):
                return results
            if lvl == top:
                roomiest = [_within(r, tree, lvl, d, level_shown) for r in results]
    if workload.required is None:
        return place_inside(None)
    if roomiest is not None:
        return roomiest
    level = level_shown(workload.required)
    message = f'no domain of level "{level}" has room for every PodSet of the workload together'
    return [PodSetResult(ps.name, None, message) for ps in podsets]


def _within(
    result: PodSetResult, tree: TopologyTree, lvl: int, d: int, level_shown: Callable[[str], str]
) -> PodSetResult:
    if result.assignment is not None or not result.message:
        return result
    where = tree.levels[lvl].values[d][-1]
    level = level_shown(tree.level_keys[lvl])
    text = f'not every PodSet fits in one domain of level "{level}"; in the roomiest, "{where}": {result.message}'
    return PodSetResult(result.name, None, text, result.why_not)
