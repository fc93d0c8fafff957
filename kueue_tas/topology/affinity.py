"""Preferred node affinity scores per leaf (gate TASRespectNodeAffinityPreferred).

As Kueue's feasibility check: only for hostname-lowest topologies, only on leaves
that pass the node filters, and a leaf scores the sum of the weights of the
terms its (first) node matches; terms with weight 0 or no requirement are ignored.
The scores then sum up the tree and rank domains before capacity (``domain_state``).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from kueue_tas.topology.filters import InvalidSelectorError, term_matches, validate_term
from kueue_tas.topology.model import PreferredSchedulingTerm
from kueue_tas.topology.placement import PlacementFailure
from kueue_tas.topology.tree import IntArray, TopologyTree


def preferred_scores(
    tree: TopologyTree, terms: Sequence[PreferredSchedulingTerm], eligible: npt.NDArray[np.bool_]
) -> IntArray:
    scores = np.zeros(len(tree.leaves), dtype=np.int64)
    used = [t for t in terms if t.weight != 0 and (t.preference.match_expressions or t.preference.match_fields)]
    if not used or not tree.lowest_is_hostname:
        return scores
    try:
        for term in used:
            validate_term(term.preference)
    except InvalidSelectorError as exc:
        raise PlacementFailure(f"invalid preferred node affinity terms: {exc}") from exc
    for leaf in np.flatnonzero(eligible).tolist():
        node = tree.leaf_nodes[leaf][0]
        scores[leaf] = sum(t.weight for t in used if term_matches(t.preference, node))
    return scores
