"""Conversions from Kubernetes objects (models or plain dicts) to the engine's plain types."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from kueue_tas.api import constants as c
from kueue_tas.api.models import Node, TaintModel, TolerationModel
from kueue_tas.api.quantity import resource_list_to_ints
from kueue_tas.api.resources import pod_requests
from kueue_tas.topology.model import (
    NodeInfo,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    PodSetRequest,
    Taint,
    Toleration,
)
from kueue_tas.topology.request import parse_template_topology_request


def _as_node(node: Node | Mapping[str, Any]) -> Node:
    return node if isinstance(node, Node) else Node.model_validate(node)


def taint(t: TaintModel | Mapping[str, Any]) -> Taint:
    m = t if isinstance(t, TaintModel) else TaintModel.model_validate(t)
    return Taint(key=m.key, value=m.value, effect=m.effect)


def toleration(t: TolerationModel | Mapping[str, Any]) -> Toleration:
    m = t if isinstance(t, TolerationModel) else TolerationModel.model_validate(t)
    return Toleration(key=m.key, operator=m.operator, value=m.value, effect=m.effect)


def tolerations(items: Sequence[TolerationModel | Mapping[str, Any]] | None) -> tuple[Toleration, ...]:
    return tuple(toleration(t) for t in items or ())


def node_info(node: Node | Mapping[str, Any]) -> NodeInfo:
    """A Node as the engine sees it; allocatable converted to Kueue units (QuantityError if malformed)."""
    m = _as_node(node)
    return NodeInfo(
        name=m.metadata.name,
        labels=dict(m.metadata.labels),
        allocatable=resource_list_to_ints(m.status.allocatable),
        taints=tuple(taint(t) for t in m.spec.taints),
        ready=m.ready,
        unschedulable=m.spec.unschedulable,
    )


def _requirement(d: Mapping[str, Any]) -> NodeSelectorRequirement:
    return NodeSelectorRequirement(
        key=str(d.get("key", "")),
        operator=str(d.get("operator", "")),
        values=tuple(str(v) for v in d.get("values") or ()),
    )


def _term(d: Mapping[str, Any]) -> NodeSelectorTerm:
    return NodeSelectorTerm(
        match_expressions=tuple(_requirement(r) for r in d.get("matchExpressions") or ()),
        match_fields=tuple(_requirement(r) for r in d.get("matchFields") or ()),
    )


def node_constraints(
    pod_spec: Mapping[str, Any],
) -> tuple[Mapping[str, str], tuple[NodeSelectorTerm, ...] | None]:
    """A PodSpec's ``nodeSelector`` and its required node-affinity terms (None when it has none)."""
    selector = {str(k): str(v) for k, v in (pod_spec.get("nodeSelector") or {}).items()}
    node_affinity = (pod_spec.get("affinity") or {}).get("nodeAffinity") or {}
    required = node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution")
    if required is None:
        return selector, None
    terms = tuple(_term(t) for t in required.get("nodeSelectorTerms") or ())
    return selector, terms


def podset_request(
    name: str,
    count: int,
    template: Mapping[str, Any],
    prefix: str = c.DEFAULT_ANNOTATION_PREFIX,
    implied: bool = False,
) -> PodSetRequest:
    """A PodSet to place: per-pod requests, topology request, tolerations and node constraints.

    Raises ``TopologyRequestError`` for invalid annotations and ``QuantityError`` for
    malformed resource quantities.
    """
    spec: Mapping[str, Any] = template.get("spec") or {}
    selector, affinity = node_constraints(spec)
    return PodSetRequest(
        name=name,
        count=count,
        requests=pod_requests(spec),
        topology=parse_template_topology_request(template, prefix=prefix, count=count),
        implied=implied,
        tolerations=tolerations(spec.get("tolerations")),
        node_selector=selector,
        required_affinity=affinity,
    )
