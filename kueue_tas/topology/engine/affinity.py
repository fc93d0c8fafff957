"""Preferred node affinity scores per leaf (gate TASRespectNodeAffinityPreferred).

As Kueue's feasibility check: only for hostname-lowest topologies, only on leaves
that pass the node filters, and a leaf scores the sum of the weights of the
terms its (first) node matches; terms with weight 0 or no requirement are ignored.
The scores then sum up the tree and rank domains before capacity (``domain_state``).
Requirements are evaluated over whole label columns of the tree at once.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from kueue_tas.topology.engine.filters import InvalidSelectorError, validate_term
from kueue_tas.topology.engine.placement import PlacementFailure
from kueue_tas.topology.engine.tree import IntArray, TopologyTree
from kueue_tas.topology.model import NodeSelectorRequirement, NodeSelectorTerm, PreferredSchedulingTerm

BoolArray = npt.NDArray[np.bool_]


def _int_or_none(value: object) -> int | None:
    try:
        return int(str(value), 10)
    except ValueError:
        return None


def requirement_mask(tree: TopologyTree, req: NodeSelectorRequirement) -> BoolArray:
    """Leaves whose first node satisfies ``req`` (the semantics of ``filters``)."""
    values, present = tree.label_column(req.key)
    op = req.operator
    if op == "In":
        return present & np.isin(values, list(req.values))
    if op == "NotIn":
        return ~present | ~np.isin(values, list(req.values))
    if op == "Exists":
        return present.copy()
    if op == "DoesNotExist":
        return ~present
    want = int(req.values[0], 10)
    have = [_int_or_none(v) for v in values.tolist()]
    ok = [h is not None and (h > want if op == "Gt" else h < want) for h in have]
    return present & np.array(ok, dtype=np.bool_)


def term_mask(tree: TopologyTree, term: NodeSelectorTerm) -> BoolArray:
    mask = np.ones(len(tree.leaves), dtype=np.bool_)
    for req in (*term.match_expressions, *term.match_fields):
        mask &= requirement_mask(tree, req)
    return mask


def preferred_scores(tree: TopologyTree, terms: Sequence[PreferredSchedulingTerm], eligible: BoolArray) -> IntArray:
    scores = np.zeros(len(tree.leaves), dtype=np.int64)
    used = [t for t in terms if t.weight != 0 and (t.preference.match_expressions or t.preference.match_fields)]
    if not used or not tree.lowest_is_hostname:
        return scores
    try:
        for term in used:
            validate_term(term.preference)
    except InvalidSelectorError as exc:
        raise PlacementFailure(f"invalid preferred node affinity terms: {exc}") from exc
    for term in used:
        scores += np.where(term_mask(tree, term.preference), term.weight, 0)
    scores[~eligible] = 0
    return scores
