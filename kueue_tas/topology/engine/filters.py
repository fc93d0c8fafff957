"""Which leaves a PodSet may use: taints, nodeSelector and required node affinity.

Kueue applies these only when the lowest topology level is the hostname, and
checks the first node seen for that hostname. The order of checks decides which
exclusion reason is recorded, so it follows Kueue: taints, nodeSelector, affinity.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import numpy.typing as npt

from kueue_tas.topology.engine.tree import TopologyTree
from kueue_tas.topology.messages import ExclusionStats
from kueue_tas.topology.model import (
    NodeInfo,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    Taint,
    Toleration,
)

SCHEDULING_EFFECTS = frozenset({"NoSchedule", "NoExecute"})


class InvalidSelectorError(ValueError):
    pass


def tolerates(tol: Toleration, taint: Taint) -> bool:
    """Kubernetes' Toleration.ToleratesTaint."""
    if tol.effect and tol.effect != taint.effect:
        return False
    if tol.key and tol.key != taint.key:
        return False
    if tol.operator in ("", "Equal"):
        return tol.value == taint.value
    return tol.operator == "Exists"


def taint_string(taint: Taint) -> str:
    if not taint.value:
        return f"{taint.key}:{taint.effect}"
    return f"{taint.key}={taint.value}:{taint.effect}"


def first_untolerated_taint(taints: Sequence[Taint], tolerations: Sequence[Toleration]) -> Taint | None:
    for taint in taints:
        if taint.effect not in SCHEDULING_EFFECTS:
            continue
        if not any(tolerates(t, taint) for t in tolerations):
            return taint
    return None


def _parse_int(value: str, req: NodeSelectorRequirement) -> int:
    try:
        return int(value, 10)
    except ValueError as exc:
        raise InvalidSelectorError(f"{req.key}: invalid integer value {value!r} for operator {req.operator}") from exc


def validate_term(term: NodeSelectorTerm) -> None:
    for req in term.match_expressions:
        op = req.operator
        if op in ("In", "NotIn"):
            if not req.values:
                raise InvalidSelectorError(f"{req.key}: values must be non-empty for operator {op}")
        elif op in ("Exists", "DoesNotExist"):
            if req.values:
                raise InvalidSelectorError(f"{req.key}: values must be empty for operator {op}")
        elif op in ("Gt", "Lt"):
            if len(req.values) != 1:
                raise InvalidSelectorError(f"{req.key}: exactly one value is required for operator {op}")
            _parse_int(req.values[0], req)
        else:
            raise InvalidSelectorError(f"{req.key}: {op!r} is not a valid node selector operator")
    for req in term.match_fields:
        if req.key != "metadata.name" or req.operator not in ("In", "NotIn") or len(req.values) != 1:
            raise InvalidSelectorError(
                f"{req.key}: only metadata.name with In/NotIn and exactly one value is supported in matchFields"
            )


def _requirement_matches(req: NodeSelectorRequirement, labels: Mapping[str, str]) -> bool:
    op = req.operator
    present = req.key in labels
    if op == "In":
        return present and labels[req.key] in req.values
    if op == "NotIn":
        return not present or labels[req.key] not in req.values
    if op == "Exists":
        return present
    if op == "DoesNotExist":
        return not present
    if op in ("Gt", "Lt"):
        if not present:
            return False
        try:
            have = int(labels[req.key], 10)
        except ValueError:
            return False
        want = int(req.values[0], 10)
        return have > want if op == "Gt" else have < want
    return False


def term_matches(term: NodeSelectorTerm, node: NodeInfo) -> bool:
    if not term.match_expressions and not term.match_fields:
        return False
    if not all(_requirement_matches(r, node.labels) for r in term.match_expressions):
        return False
    fields = {"metadata.name": node.name}
    return all(_requirement_matches(r, fields) for r in term.match_fields)


def affinity_matches(terms: Sequence[NodeSelectorTerm], node: NodeInfo) -> bool:
    return any(term_matches(t, node) for t in terms)


def eligible_leaves(
    tree: TopologyTree,
    tolerations: Sequence[Toleration],
    node_selector: Mapping[str, str],
    required_affinity: Sequence[NodeSelectorTerm] | None,
    stats: ExclusionStats,
) -> npt.NDArray[np.bool_]:
    """Mask of leaves that pass the node filters; records exclusions in ``stats``."""
    n = len(tree.leaves)
    mask = np.ones(n, dtype=np.bool_)
    if not tree.lowest_is_hostname:
        return mask
    if required_affinity is not None:
        for term in required_affinity:
            validate_term(term)
    selector = tuple(node_selector.items())
    # Only tainted leaves can be excluded when there is no selector and no affinity.
    candidates = range(n) if selector or required_affinity is not None else tree.tainted_leaves
    for leaf in candidates:
        node = tree.leaf_nodes[leaf][0]
        if node.taints:
            taint = first_untolerated_taint(node.taints, tolerations)
            if taint is not None:
                key = taint_string(taint)
                stats.taints[key] = stats.taints.get(key, 0) + 1
                mask[leaf] = False
                continue
        if selector and any(node.labels.get(k) != v for k, v in selector):
            stats.node_selector += 1
            mask[leaf] = False
            continue
        if required_affinity is not None and not affinity_matches(required_affinity, node):
            stats.affinity += 1
            mask[leaf] = False
    return mask
