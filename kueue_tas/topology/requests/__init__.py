"""What a PodSet asks for, read and checked: our pod-template annotations and Kueue's
``topologyRequest`` field to a ``TopologyRequest`` (``request``, ``request_field``, multi-layer
slices in ``slice_layers``), a PodSet's full request with its node constraints (``inputs``),
its levels against a Topology (``levels``), PodSet groups (``groups``) and ``plan``'s input
errors (``plan_requests``).

Entry points: ``podset_request``, ``level_problem``, ``group_errors``, ``TopologyRequestError``.
Never: place anything, or read capacity.
"""

from __future__ import annotations

from kueue_tas.topology.requests.groups import GroupMember, group_errors
from kueue_tas.topology.requests.inputs import (
    node_constraints,
    node_info,
    podset_request,
    requests_topology,
    tolerations,
)
from kueue_tas.topology.requests.levels import (
    MAX_LEVEL_LABEL_LENGTH,
    MAX_TOPOLOGY_LEVELS,
    LevelProblem,
    level_problem,
    topology_levels_fault,
    topology_levels_problem,
)
from kueue_tas.topology.requests.plan_requests import (
    PlanInputError,
    check_groups,
    check_jobset_counts,
    check_workload_counts,
    describe,
    levels_problem,
    podset_request_for,
    request_input_error,
    template_path,
    unknown_keys,
)
from kueue_tas.topology.requests.request import (
    TopologyRequestError,
    has_topology_annotation,
    parse_template_topology_request,
    template_annotations,
)
from kueue_tas.topology.requests.request_field import field_is_explicit, uses_field

__all__ = [
    "MAX_LEVEL_LABEL_LENGTH",
    "MAX_TOPOLOGY_LEVELS",
    "GroupMember",
    "LevelProblem",
    "PlanInputError",
    "TopologyRequestError",
    "check_groups",
    "check_jobset_counts",
    "check_workload_counts",
    "describe",
    "field_is_explicit",
    "group_errors",
    "has_topology_annotation",
    "level_problem",
    "levels_problem",
    "node_constraints",
    "node_info",
    "parse_template_topology_request",
    "podset_request",
    "podset_request_for",
    "request_input_error",
    "requests_topology",
    "template_annotations",
    "template_path",
    "tolerations",
    "topology_levels_fault",
    "topology_levels_problem",
    "unknown_keys",
    "uses_field",
]
