"""Feature gates: Kueue v0.19.2's names and defaults, parsing, and errors that name the known gates."""

from __future__ import annotations

import pytest

from kueue_tas.topology.features import DEFAULT_GATES, KUEUE_DEFAULTS, FeatureGateError, FeatureGates


def test_defaults_are_kueues() -> None:
    assert DEFAULT_GATES.multi_layer is True
    assert DEFAULT_GATES.balanced is False
    assert DEFAULT_GATES.node_affinity_preferred is False
    assert DEFAULT_GATES.overlapping_flavors is True
    assert DEFAULT_GATES.failed_node_replacement is True
    # Elastic TAS needs both gates; the TAS one is alpha (off) in v0.19.2.
    assert DEFAULT_GATES.elastic_tas is False


def test_parse_overrides_only_the_named_gates() -> None:
    gates = FeatureGates.parse("TASBalancedPlacement=true, TASMultiLayerTopology=false")
    assert gates.balanced is True and gates.multi_layer is False
    assert gates.overlapping_flavors is KUEUE_DEFAULTS["TASHandleOverlappingFlavors"]
    assert FeatureGates.parse("").overrides == {}


def test_elastic_tas_needs_both_gates() -> None:
    assert FeatureGates.parse("ElasticJobsViaWorkloadSlicesWithTAS=true").elastic_tas is True
    both_off = FeatureGates.parse("ElasticJobsViaWorkloadSlicesWithTAS=true,ElasticJobsViaWorkloadSlices=false")
    assert both_off.elastic_tas is False


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("TASBalanced=true", "unknown feature gate 'TASBalanced'; known gates: ElasticJobsViaWorkloadSlices, "),
        ("TASBalancedPlacement", "expected Name=true or Name=false"),
        ("TASBalancedPlacement=maybe", "is not a boolean"),
    ],
)
def test_bad_gates_are_one_line_errors(text: str, needle: str) -> None:
    with pytest.raises(FeatureGateError) as err:
        FeatureGates.parse(text)
    assert needle in str(err.value) and "\n" not in str(err.value)


def test_from_mapping_takes_yaml_booleans_and_rejects_others() -> None:
    assert FeatureGates.from_mapping({"TASBalancedPlacement": True}).balanced is True
    with pytest.raises(FeatureGateError, match="not a boolean"):
        FeatureGates.from_mapping({"TASBalancedPlacement": 3})
    with pytest.raises(FeatureGateError, match="unknown feature gate"):
        FeatureGates({"Nope": True})
    with pytest.raises(FeatureGateError, match="unknown feature gate"):
        DEFAULT_GATES.enabled("Nope")
