"""Kueue's TAS placement over one flavor: the tree of domains (``tree``), the capacity
matrix over its leaves (``capacity_matrix``), and ``TopologySnapshot.place`` (``snapshot``),
which runs Kueue's algorithms (``find_assignment``: the fast path in ``placement``, the general
leader-aware one in ``general`` with ``balanced``, ``affinity``, ``filters``, ``layers``,
``domain_state``), node replacement (``replacement``), elastic slices (``elastic``), PodSet
groups (``podset_groups``) and the workload-wide constraint (``workload_domain``). The
algorithms take a ``FlavorView`` (``flavor_view``), never the snapshot that calls them.

Entry points: ``TopologySnapshot`` (build, place), ``PodSetResult``, ``WhyNot``.
Never: read Kubernetes objects (``requests`` turns them into plain inputs) or do I/O.
"""

from __future__ import annotations

from kueue_tas.topology.engine.capacity_matrix import saturating_total
from kueue_tas.topology.engine.filters import (
    SCHEDULING_EFFECTS,
    InvalidSelectorError,
    affinity_matches,
    first_untolerated_taint,
    taint_string,
    tolerates,
    validate_term,
)
from kueue_tas.topology.engine.results import PodSetResult
from kueue_tas.topology.engine.snapshot import TopologySnapshot
from kueue_tas.topology.engine.why_not import WhyNot
from kueue_tas.topology.engine.workload_domain import (
    WorkloadTopology,
    parse_workload_topology,
    podset_level_problem,
    resolve_workload_topology,
    workload_annotations,
    workload_keys,
    workload_level_problem,
)

__all__ = [
    "SCHEDULING_EFFECTS",
    "InvalidSelectorError",
    "PodSetResult",
    "TopologySnapshot",
    "WhyNot",
    "WorkloadTopology",
    "affinity_matches",
    "first_untolerated_taint",
    "parse_workload_topology",
    "podset_level_problem",
    "resolve_workload_topology",
    "saturating_total",
    "taint_string",
    "tolerates",
    "validate_term",
    "workload_annotations",
    "workload_keys",
    "workload_level_problem",
]
