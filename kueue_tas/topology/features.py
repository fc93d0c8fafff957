"""Kueue's TAS feature gates, with Kueue v0.19.2's names and defaults.

``plan --feature-gates`` and the controller's ``featureGates`` setting both build a
``FeatureGates`` here, so a gate means the same thing offline and live. Gates that
only tune Kueue's own caches (node-match caching, remaining-capacity caching) are
accepted for compatibility: they never change a placement, here or in Kueue.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

# Name -> default in Kueue v0.19.2 (pkg/features/kube_features.go, the newest entry of each gate).
KUEUE_DEFAULTS: Mapping[str, bool] = MappingProxyType(
    {
        "TopologyAwareScheduling": True,
        "TASProfileMixed": True,
        "TASMultiLayerTopology": True,
        "TASBalancedPlacement": False,
        "TASRespectNodeAffinityPreferred": False,
        "TASHandleOverlappingFlavors": True,
        "TASFailedNodeReplacement": True,
        "TASFailedNodeReplacementFailFast": True,
        "TASReplaceNodeOnPodTermination": True,
        "TASReplaceNodeOnNodeTaints": True,
        "TASReplaceNodeDueToNotReadyOverFixedTime": False,
        "TASRecomputeAssignmentWithinSchedulingCycle": True,
        "TASAssignmentsEncodingByHostnamePrefix": True,
        "TASValidateWorkloadSliceSize": True,
        "TASCacheNodeMatchResults": True,
        "TASCachingRemainingResources": True,
        "TASCacheTopologyTree": False,
        "ElasticJobsViaWorkloadSlices": True,
        "ElasticJobsViaWorkloadSlicesWithTAS": False,
    }
)

# The gates whose names the engine reads.
MULTI_LAYER = "TASMultiLayerTopology"
BALANCED = "TASBalancedPlacement"
NODE_AFFINITY_PREFERRED = "TASRespectNodeAffinityPreferred"
OVERLAPPING_FLAVORS = "TASHandleOverlappingFlavors"
FAILED_NODE_REPLACEMENT = "TASFailedNodeReplacement"
REPLACE_ON_POD_TERMINATION = "TASReplaceNodeOnPodTermination"
REPLACE_NOT_READY_FIXED_TIME = "TASReplaceNodeDueToNotReadyOverFixedTime"
ELASTIC = "ElasticJobsViaWorkloadSlices"
ELASTIC_TAS = "ElasticJobsViaWorkloadSlicesWithTAS"

_TRUE = frozenset({"true", "1", "t", "yes"})
_FALSE = frozenset({"false", "0", "f", "no"})


class FeatureGateError(ValueError):
    """An unknown gate name or a value that is not a boolean; the message names the known gates."""


def _unknown(name: str) -> FeatureGateError:
    return FeatureGateError(f"unknown feature gate {name!r}; known gates: {', '.join(sorted(KUEUE_DEFAULTS))}")


@dataclass(frozen=True, slots=True)
class FeatureGates:
    """Gate values that differ from Kueue's defaults; every other gate has its default."""

    overrides: Mapping[str, bool] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for name in self.overrides:
            if name not in KUEUE_DEFAULTS:
                raise _unknown(name)

    def enabled(self, name: str) -> bool:
        if name not in KUEUE_DEFAULTS:
            raise _unknown(name)
        return self.overrides.get(name, KUEUE_DEFAULTS[name])

    @property
    def multi_layer(self) -> bool:
        return self.enabled(MULTI_LAYER)

    @property
    def balanced(self) -> bool:
        return self.enabled(BALANCED)

    @property
    def node_affinity_preferred(self) -> bool:
        return self.enabled(NODE_AFFINITY_PREFERRED)

    @property
    def overlapping_flavors(self) -> bool:
        return self.enabled(OVERLAPPING_FLAVORS)

    @property
    def failed_node_replacement(self) -> bool:
        return self.enabled(FAILED_NODE_REPLACEMENT)

    @property
    def replace_on_pod_termination(self) -> bool:
        return self.enabled(REPLACE_ON_POD_TERMINATION)

    @property
    def replace_not_ready_fixed_time(self) -> bool:
        return self.enabled(REPLACE_NOT_READY_FIXED_TIME)

    @property
    def elastic_tas(self) -> bool:
        return self.enabled(ELASTIC) and self.enabled(ELASTIC_TAS)

    @classmethod
    def from_mapping(cls, values: Mapping[str, object]) -> FeatureGates:
        """From a config mapping (``featureGates: {Name: true}``); values must be booleans."""
        out: dict[str, bool] = {}
        for name, value in values.items():
            if name not in KUEUE_DEFAULTS:
                raise _unknown(name)
            if isinstance(value, bool):
                out[name] = value
            elif isinstance(value, str) and value.strip().lower() in _TRUE | _FALSE:
                out[name] = value.strip().lower() in _TRUE
            else:
                raise FeatureGateError(f"feature gate {name}: value {value!r} is not a boolean")
        return cls(out)

    @classmethod
    def parse(cls, text: str) -> FeatureGates:
        """``Name=bool[,Name=bool...]``, as Kueue's ``--feature-gates`` flag."""
        values: dict[str, object] = {}
        for part in text.split(","):
            part = part.strip()
            if not part:
                continue
            name, sep, value = part.partition("=")
            if not sep:
                raise FeatureGateError(f"feature gate {part!r}: expected Name=true or Name=false")
            values[name.strip()] = value.strip()
        return cls.from_mapping(values)


DEFAULT_GATES = FeatureGates()
