"""Plain input types of the placement engine.

Everything here is plain data (no Kubernetes client objects), so that the
controller and ``kueue-tas plan`` feed the very same engine. Resource amounts
are integers in Kueue's units: ``cpu`` in millicores, every other resource in
base units rounded up (bytes, pods, devices).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

# Defined in api.constants; re-exported because engine modules import it from here.
from kueue_tas.api.constants import HOSTNAME_LABEL as HOSTNAME_LABEL

PODS = "pods"

ResourceMap = Mapping[str, int]


@dataclass(frozen=True, slots=True)
class Taint:
    key: str
    value: str = ""
    effect: str = "NoSchedule"


@dataclass(frozen=True, slots=True)
class Toleration:
    key: str = ""
    operator: str = ""  # "" means Equal, as in Kubernetes
    value: str = ""
    effect: str = ""  # "" matches every effect


@dataclass(frozen=True, slots=True)
class NodeSelectorRequirement:
    key: str
    operator: str  # In, NotIn, Exists, DoesNotExist, Gt, Lt
    values: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class NodeSelectorTerm:
    """Requirements are ANDed; an empty term matches no node (as in Kubernetes)."""

    match_expressions: tuple[NodeSelectorRequirement, ...] = ()
    match_fields: tuple[NodeSelectorRequirement, ...] = ()  # only metadata.name is supported by k8s


@dataclass(frozen=True, slots=True)
class NodeInfo:
    name: str
    labels: Mapping[str, str]
    allocatable: ResourceMap
    taints: tuple[Taint, ...] = ()
    ready: bool = True
    unschedulable: bool = False
    # The Ready condition's status ("True", "False", "Unknown"; "" when the node has none) and
    # lastTransitionTime (RFC 3339, "" when unknown): how long a node has been NotReady.
    ready_status: str = "True"
    ready_since: str = ""
    created: str = ""  # metadata.creationTimestamp (RFC 3339; "" when unknown): when a DaemonSet's pod became due


@dataclass(frozen=True, slots=True)
class PreferredSchedulingTerm:
    """A preferred node-affinity term: nodes matching ``preference`` score ``weight``."""

    weight: int
    preference: NodeSelectorTerm


@dataclass(frozen=True, slots=True)
class SliceLayer:
    """One layer of a multi-layer slice constraint: slices of ``size`` pods, each in one
    domain of ``level`` (Kueue's PodsetSliceRequiredTopologyConstraint)."""

    level: str
    size: int


@dataclass(frozen=True, slots=True)
class TopologyRequest:
    """A PodSet's topology request, as Kueue's PodSetTopologyRequest.

    ``unconstrained`` excludes ``required`` and ``preferred`` (the annotation parser
    enforces that). ``required`` with ``preferred`` is kueue-tas's extension: one domain of
    ``required`` holds every pod, and inside it the search starts at ``preferred`` and climbs
    as Kueue's preferred does; ``preferred`` must be at or below ``required``.
    ``slice_level`` with ``slice_size`` cut the PodSet into slices that must each fit one
    domain of ``slice_level``. ``slice_layers`` (coarsest first, at most 3) is Kueue's
    multi-layer form and is mutually exclusive with ``slice_level``/``slice_size``. PodSets
    of one workload with the same ``group`` (Kueue's podSetGroupName) are placed together.
    """

    required: str | None = None
    preferred: str | None = None
    unconstrained: bool | None = None
    slice_level: str | None = None
    slice_size: int | None = None
    group: str | None = None
    slice_layers: tuple[SliceLayer, ...] = ()
    # kueue-tas's patience: seconds to wait for one domain of ``preferred`` (None: Kueue's no wait).
    preferred_wait: float | None = None

    @property
    def preferred_in_required(self) -> bool:
        """Required and preferred together. Under unconstrained (only a Workload's
        topologyRequest can say that too) required alone counts, as in Kueue."""
        return self.required is not None and self.preferred is not None and not self.unconstrained


@dataclass(frozen=True, slots=True)
class PodSetRequest:
    """One PodSet to place.

    ``requests`` are the effective requests of one pod, without ``pods``
    (the engine always adds ``pods: 1``). ``topology`` is None for a PodSet
    with no topology annotation at all; such a PodSet is placed as
    unconstrained when ``implied`` is true (it runs on a flavor our check
    governs), otherwise it is not placed.
    """

    name: str
    count: int
    requests: ResourceMap
    topology: TopologyRequest | None = None
    implied: bool = False
    tolerations: tuple[Toleration, ...] = ()
    node_selector: Mapping[str, str] = field(default_factory=dict)
    required_affinity: tuple[NodeSelectorTerm, ...] | None = None  # None: no required affinity
    preferred_affinity: tuple[PreferredSchedulingTerm, ...] = ()
