"""Conversions from Kubernetes objects (models or plain dicts) to the engine's plain types."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from kueue_tas.api import constants as c
from kueue_tas.api.core_objects import Node
from kueue_tas.api.object_base import TaintModel, TolerationModel, find_condition
from kueue_tas.api.quantity import offered_list_to_ints
from kueue_tas.api.resources import pod_requests
from kueue_tas.api.workload import PodSetTopologyRequestModel
from kueue_tas.topology.features import DEFAULT_GATES, FeatureGates
from kueue_tas.topology.model import (
    NodeInfo,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    PodSetRequest,
    PreferredSchedulingTerm,
    Taint,
    Toleration,
)
from kueue_tas.topology.requests.request import (
    TopologyRequestError,
    has_topology_annotation,
    parse_topology_request,
    template_annotations,
)
from kueue_tas.topology.requests.request_field import field_is_explicit, topology_request_from_field, uses_field


class PodSpecError(TopologyRequestError):
    """A pod-template spec field the engine reads is malformed; ``path`` is under the template."""

    def __init__(self, path: str, problem: str) -> None:
        self.path = path
        super().__init__([f"{path}: {problem}"])


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
    """A Node as the engine sees it; allocatable converted to Kueue units, an amount beyond what
    Kubernetes counts capped at it (``offered_list_to_ints``; QuantityError if malformed)."""
    m = _as_node(node)
    cond = find_condition(m.status.conditions, c.NODE_READY_CONDITION)
    return NodeInfo(
        name=m.metadata.name,
        labels=dict(m.metadata.labels),
        allocatable=offered_list_to_ints(m.status.allocatable),
        taints=tuple(taint(t) for t in m.spec.taints),
        ready=m.ready,
        unschedulable=m.spec.unschedulable,
        ready_status="" if cond is None else cond.status,
        ready_since="" if cond is None else cond.last_transition_time or "",
        created=m.metadata.creation_timestamp or "",
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


def preferred_affinity(pod_spec: Mapping[str, Any]) -> tuple[PreferredSchedulingTerm, ...]:
    """A PodSpec's ``preferredDuringSchedulingIgnoredDuringExecution`` node-affinity terms, in order.

    Used by the engine only with TASRespectNodeAffinityPreferred; read always, so the gate
    alone decides.
    """
    node_affinity = (pod_spec.get("affinity") or {}).get("nodeAffinity") or {}
    out = []
    for i, item in enumerate(node_affinity.get("preferredDuringSchedulingIgnoredDuringExecution") or ()):
        path = f"spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[{i}]"
        if not isinstance(item, Mapping):
            raise PodSpecError(path, f"must be a mapping, got {type(item).__name__}")
        weight = item.get("weight", 0)
        if isinstance(weight, bool) or not isinstance(weight, int):
            raise PodSpecError(path + ".weight", f"must be an integer, got {weight!r}")
        out.append(PreferredSchedulingTerm(weight=weight, preference=_term(item.get("preference") or {})))
    return tuple(out)


def podset_request(
    name: str,
    count: int,
    template: Mapping[str, Any],
    prefix: str = c.DEFAULT_ANNOTATION_PREFIX,
    implied: bool = False,
    gates: FeatureGates = DEFAULT_GATES,
    topology_field: PodSetTopologyRequestModel | None = None,
) -> PodSetRequest:
    """A PodSet to place: per-pod requests, topology request, tolerations and node constraints
    (node selector, required and preferred node affinity).

    The topology request comes from the template's annotations, or from ``topology_field``
    (a Workload's ``spec.podSets[].topologyRequest``) when the template has none of ours.
    Raises ``TopologyRequestError`` for an invalid request (subclasses: ``TopologyFieldError``
    for the field, ``PodSpecError`` for a malformed spec field) and ``QuantityError`` for
    malformed resource quantities.
    """
    spec: Mapping[str, Any] = template.get("spec") or {}
    selector, affinity = node_constraints(spec)
    annotations = template_annotations(template)
    if topology_field is not None and uses_field(annotations, topology_field, prefix):
        topology = topology_request_from_field(topology_field, count)
    else:
        topology = parse_topology_request(annotations, prefix=prefix, count=count, gates=gates)
    return PodSetRequest(
        name=name,
        count=count,
        requests=pod_requests(spec),
        topology=topology,
        implied=implied,
        tolerations=tolerations(spec.get("tolerations")),
        node_selector=selector,
        required_affinity=affinity,
        preferred_affinity=preferred_affinity(spec),
    )


def requests_topology(
    template: Mapping[str, Any], topology_field: PodSetTopologyRequestModel | None, prefix: str
) -> bool:
    """Whether the PodSet asks for TAS itself (an annotation of ours, or an explicit field);
    otherwise, on a governed flavor, it is placed as implied."""
    return has_topology_annotation(template_annotations(template), prefix=prefix) or field_is_explicit(topology_field)
