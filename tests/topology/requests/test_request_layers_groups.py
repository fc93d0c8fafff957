"""The group-name and multi-layer slice annotations, the topologyRequest field, group and level checks."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest
from vocab import BLOCK, HOST, RACK

from kueue_tas.api.workload import PodSetTopologyRequestModel
from kueue_tas.topology.features import FeatureGates
from kueue_tas.topology.model import (
    NodeSelectorRequirement,
    NodeSelectorTerm,
    PreferredSchedulingTerm,
    SliceLayer,
    TopologyRequest,
)
from kueue_tas.topology.requests.groups import GroupMember, group_errors
from kueue_tas.topology.requests.inputs import PodSpecError, podset_request, preferred_affinity, requests_topology
from kueue_tas.topology.requests.levels import level_problem
from kueue_tas.topology.requests.request import TopologyRequestError, has_topology_annotation, parse_topology_request
from kueue_tas.topology.requests.request_field import TopologyFieldError, topology_request_from_field, uses_field
from kueue_tas.topology.requests.slice_layers import SliceLayersDecodeError, decode_layers

P = "kueue-tas.io/"
REQ = P + "podset-required-topology"
PREF = P + "podset-preferred-topology"
UNC = P + "podset-unconstrained-topology"
SLICE = P + "podset-slice-required-topology"
SIZE = P + "podset-slice-size"
LAYERS = P + "podset-slice-required-topology-constraints"
GROUP = P + "podset-group-name"
LEVELS = (BLOCK, RACK, HOST)
NVL72 = json.dumps([{"topology": RACK, "size": 16}, {"topology": HOST, "size": 4}])
MULTI_LAYER_OFF = FeatureGates({"TASMultiLayerTopology": False})


def errors_of(annotations: dict[str, str], count: int | None = None, gates: FeatureGates | None = None) -> list[str]:
    with pytest.raises(TopologyRequestError) as err:
        if gates is None:
            parse_topology_request(annotations, count=count)
        else:
            parse_topology_request(annotations, count=count, gates=gates)
    return err.value.errors


# --- group name -------------------------------------------------------------------------------


def test_group_kept_beside_required_or_preferred() -> None:
    assert parse_topology_request({REQ: RACK, GROUP: "lws"}) == TopologyRequest(required=RACK, group="lws")
    assert parse_topology_request({PREF: RACK, GROUP: "lws"}) == TopologyRequest(preferred=RACK, group="lws")


def test_group_without_required_or_preferred() -> None:
    [msg] = errors_of({UNC: "true", GROUP: "g"})
    assert msg == (f"annotation {GROUP!r}: forbidden: may not be set when neither '{PREF}' nor '{REQ}' is specified")
    # Kueue's Build() drops it when the webhook was skipped
    assert parse_topology_request({UNC: "true", GROUP: "g"}, strict=False) == TopologyRequest(unconstrained=True)
    assert parse_topology_request({GROUP: "g"}, strict=False) is None


@pytest.mark.parametrize("value", ["0", "12", "18446744073709551615"])
def test_group_must_not_be_a_number(value: str) -> None:
    [msg] = errors_of({REQ: RACK, GROUP: value})
    assert msg == f'annotation {GROUP!r}: invalid value "{value}": must not be a number'


@pytest.mark.parametrize("value", ["-1", "+1", "18446744073709551616", "1a", "１２"])
def test_group_names_go_does_not_parse_as_uint64_are_fine(value: str) -> None:
    assert parse_topology_request({REQ: RACK, GROUP: value}) == TopologyRequest(required=RACK, group=value)


def test_group_name_length_limit() -> None:
    assert parse_topology_request({REQ: RACK, GROUP: "g" * 256}) is not None
    [msg] = errors_of({REQ: RACK, GROUP: "g" * 257})
    assert msg.endswith("must be no more than 256 characters") and GROUP in msg


def test_group_with_slice_pair() -> None:
    errs = errors_of({REQ: BLOCK, GROUP: "g", SLICE: RACK, SIZE: "2"})
    assert errs == [
        f"annotation {GROUP!r}: forbidden: may not be set when '{SIZE}' is specified",
        f"annotation {GROUP!r}: forbidden: may not be set when '{SLICE}' is specified",
    ]


# --- multi-layer constraints ------------------------------------------------------------------


def test_three_layer_nvl72_request() -> None:
    three = json.dumps([{"topology": BLOCK, "size": 64}, {"topology": RACK, "size": 16}, {"topology": HOST, "size": 4}])
    assert parse_topology_request({REQ: BLOCK, LAYERS: three}, count=128) == TopologyRequest(
        required=BLOCK, slice_layers=(SliceLayer(BLOCK, 64), SliceLayer(RACK, 16), SliceLayer(HOST, 4))
    )
    # layers alone are a request too (Kueue's slice-only request)
    assert parse_topology_request({LAYERS: NVL72}) == TopologyRequest(
        slice_layers=(SliceLayer(RACK, 16), SliceLayer(HOST, 4))
    )


def test_layers_need_the_multi_layer_gate() -> None:
    [msg] = errors_of({REQ: BLOCK, LAYERS: NVL72}, gates=MULTI_LAYER_OFF)
    assert msg == (
        f"annotation {LAYERS!r}: forbidden: the TASMultiLayerTopology feature gate must be enabled to use this "
        "annotation"
    )
    # Build() ignores them with the gate off
    lenient = parse_topology_request({REQ: BLOCK, LAYERS: "not json"}, strict=False, gates=MULTI_LAYER_OFF)
    assert lenient == TopologyRequest(required=BLOCK)


def test_layers_exclusive_with_slice_pair_and_group() -> None:
    errs = errors_of({REQ: BLOCK, LAYERS: NVL72, SLICE: RACK, SIZE: "4", GROUP: "g"})
    assert f"annotation {LAYERS!r}: forbidden: may not be set when '{SLICE}' is specified" in errs
    assert f"annotation {LAYERS!r}: forbidden: may not be set when '{SIZE}' is specified" in errs
    assert f"annotation {GROUP!r}: forbidden: may not be set when '{LAYERS}' is specified" in errs


@pytest.mark.parametrize("value", ["[]", "null", json.dumps([{"topology": HOST, "size": 1}] * 4)])
def test_layer_count(value: str) -> None:
    [msg] = errors_of({REQ: BLOCK, LAYERS: value})
    assert msg == f"annotation {LAYERS!r}: invalid value {json.dumps(value)}: " + (
        "topology constraints must contain between 1 and 3 entries"
    )
    with pytest.raises(TopologyRequestError, match=r"between 1 and 3 entries: got \d"):
        parse_topology_request({REQ: BLOCK, LAYERS: value}, strict=False)


@pytest.mark.parametrize(
    ("value", "go_error"),
    [
        ("{", "Expecting"),
        ('{"topology": "x", "size": 1}', "cannot unmarshal object into Go value of type []v1beta2."),
        ('["x"]', "cannot unmarshal string into Go value of type v1beta2.PodsetSliceRequiredTopologyConstraint"),
        ('[{"topology": 1, "size": 1}]', "PodsetSliceRequiredTopologyConstraint.topology of type string"),
        ('[{"topology": "x", "size": 1.0}]', "cannot unmarshal number 1.0 into Go struct field"),
        ('[{"topology": "x", "size": 1e2}]', "cannot unmarshal number 1e2 into"),
        ('[{"topology": "x", "size": 2147483648}]', "number 2147483648 into Go struct field"),
        ('[{"topology": "x", "size": "4"}]', "cannot unmarshal string into Go struct field"),
        ('[{"topology": "x", "size": NaN}]', "invalid character"),
    ],
)
def test_layers_not_decodable(value: str, go_error: str) -> None:
    [msg] = errors_of({REQ: BLOCK, LAYERS: value})
    assert msg.startswith(f"annotation {LAYERS!r}: invalid value {json.dumps(value)}: must be a valid JSON array: ")
    assert go_error in msg
    with pytest.raises(TopologyRequestError, match="failed to parse multi-layer topology constraints annotation"):
        parse_topology_request({REQ: BLOCK, LAYERS: value}, strict=False)


def test_layers_decoded_as_go_does() -> None:
    # keys match case-insensitively, the last one wins, unknown keys and nulls are ignored
    text = '[{"Topology": "a", "SIZE": 2, "topology": "b", "extra": true, "size": null}, null]'
    assert decode_layers(text) == [SliceLayer("b", 2), SliceLayer("", 0)]
    with pytest.raises(SliceLayersDecodeError):
        decode_layers("[true]")


def test_layer_entries_validated() -> None:
    value = json.dumps([{"topology": RACK, "size": 16}, {"size": 0}, {"topology": RACK, "size": 3}])
    errs = errors_of({REQ: BLOCK, LAYERS: value})
    assert f'annotation {LAYERS!r}: [1].topology: invalid value "": name part must be non-empty' in errs
    assert f"annotation {LAYERS!r}: [1].size: invalid value 0: must be greater than or equal to 1" in errs
    assert f'annotation {LAYERS!r}: [2].topology: duplicate value: "{RACK} (also at index 0)"' in errs
    # 0 does not divide: Kueue only checks positive child sizes
    assert not any("[1].size: invalid value 0: must evenly divide" in e for e in errs)


def test_layer_sizes_must_divide() -> None:
    value = json.dumps([{"topology": RACK, "size": 16}, {"topology": HOST, "size": 5}])
    [msg] = errors_of({REQ: BLOCK, LAYERS: value})
    assert msg == f"annotation {LAYERS!r}: [1].size: invalid value 5: must evenly divide the parent layer size 16"


def test_first_layer_not_above_count() -> None:
    [msg] = errors_of({REQ: BLOCK, LAYERS: NVL72}, count=8)
    assert msg == f"annotation {LAYERS!r}: invalid value 16: must not be greater than pod set count 8"
    assert parse_topology_request({REQ: BLOCK, LAYERS: NVL72}, count=16) is not None


def test_new_keys_under_kueue_prefix() -> None:
    k = "kueue.x-k8s.io/"
    ann = {k + "podset-required-topology": BLOCK, k + "podset-slice-required-topology-constraints": NVL72}
    assert parse_topology_request(ann, prefix=k) == TopologyRequest(
        required=BLOCK, slice_layers=(SliceLayer(RACK, 16), SliceLayer(HOST, 4))
    )
    assert parse_topology_request(ann) is None
    assert has_topology_annotation({k + "podset-group-name": "g"}, prefix=k)
    assert has_topology_annotation({LAYERS: NVL72})


# --- preferred node affinity ------------------------------------------------------------------


def test_preferred_affinity_read_from_the_template() -> None:
    spec: dict[str, Any] = {
        "affinity": {
            "nodeAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "weight": 80,
                        "preference": {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]},
                    },
                    {
                        "weight": 20,
                        "preference": {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]},
                    },
                ]
            }
        }
    }
    expected = (
        PreferredSchedulingTerm(
            80, NodeSelectorTerm(match_expressions=(NodeSelectorRequirement("zone", "In", ("a",)),))
        ),
        PreferredSchedulingTerm(
            20, NodeSelectorTerm(match_fields=(NodeSelectorRequirement("metadata.name", "In", ("n1",)),))
        ),
    )
    assert preferred_affinity(spec) == expected
    assert podset_request("main", 2, {"spec": spec}).preferred_affinity == expected
    assert podset_request("main", 2, {"spec": {}}).preferred_affinity == ()


def test_preferred_affinity_malformed_weight() -> None:
    spec = {"affinity": {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": "high"}]}}}
    with pytest.raises(PodSpecError) as err:
        podset_request("main", 1, {"spec": spec})
    assert err.value.errors == [
        "spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].weight: "
        "must be an integer, got 'high'"
    ]


# --- checks against the Topology's levels ---------------------------------------------------


def test_level_problems() -> None:
    assert level_problem(LEVELS, None) is None
    assert level_problem(LEVELS, TopologyRequest(required=BLOCK, slice_layers=(SliceLayer(RACK, 4),))) is None
    p = level_problem(LEVELS, TopologyRequest(required="zone"))
    assert p is not None and (p.suffix, p.field, p.unknown) == ("podset-required-topology", "required", "zone")
    p = level_problem(LEVELS, TopologyRequest(required=BLOCK, slice_layers=(SliceLayer(RACK, 4), SliceLayer("gpu", 1))))
    assert p is not None and p.unknown == "gpu"
    assert p.suffix == "podset-slice-required-topology-constraints[1].topology"
    assert p.field == "podsetSliceRequiredTopologyConstraints[1].topology"


def test_layers_must_go_down() -> None:
    for inner in (RACK, BLOCK):
        p = level_problem(LEVELS, TopologyRequest(slice_layers=(SliceLayer(RACK, 8), SliceLayer(inner, 4))))
        assert p is not None and p.unknown is None
        assert p.message == f"additional slice layer topology {inner} must be at a lower level than {RACK}"
    p = level_problem(LEVELS, TopologyRequest(slice_layers=(SliceLayer(RACK, 8), SliceLayer(HOST, 3))))
    assert p is not None and p.message == "additional slice layer size 3 must evenly divide parent layer size 8"
    assert p.suffix.endswith("[1].size")


# --- groups across PodSets ------------------------------------------------------------------


def member(name: str, count: int, request: TopologyRequest | None) -> GroupMember:
    return GroupMember(name, count, request, f"{name}[{GROUP}]", f"{name}.annotations")


def test_leader_workers_group_is_valid() -> None:
    leader = member("leader", 1, TopologyRequest(required=RACK, group="g"))
    workers = member("workers", 8, TopologyRequest(required=RACK, group="g"))
    assert group_errors([leader, workers, member("other", 3, None)]) == []


def test_group_of_one_or_three() -> None:
    lone = group_errors([member("a", 1, TopologyRequest(required=RACK, group="g"))])
    assert [e.message for e in lone] == [
        f'a[{GROUP}]: invalid value "g": can only define groups of exactly 2 pod sets, got: 1 pod set(s)'
    ]
    three = group_errors([member(n, 1, TopologyRequest(required=RACK, group="g")) for n in "abc"])
    assert [e.podset for e in three] == ["a", "b", "c"]
    assert all("got: 3 pod set(s)" in e.message for e in three)


def test_group_needs_a_single_pod_member() -> None:
    errs = group_errors(
        [
            member("a", 2, TopologyRequest(required=RACK, group="g")),
            member("b", 4, TopologyRequest(required=RACK, group="g")),
        ]
    )
    assert [e.podset for e in errs] == ["a", "b"]
    assert errs[0].message == (
        f'a[{GROUP}]: invalid value "g": can only define groups where at least one pod set has only 1 replica, '
        "got: 2 replica(s) and 4 replica(s) in the group"
    )


def test_group_levels_must_match() -> None:
    errs = group_errors(
        [
            member("a", 1, TopologyRequest(required=RACK, group="g")),
            member("b", 4, TopologyRequest(preferred=RACK, group="g")),
        ]
    )
    assert [e.message for e in errs] == [
        f"must specify '{REQ}' or '{PREF}' topology consistent with 'b.annotations' in group 'g'",
        f"must specify '{REQ}' or '{PREF}' topology consistent with 'a.annotations' in group 'g'",
    ]


def test_group_levels_are_free_in_the_field() -> None:
    # Kueue's Workload webhook does not check groups; its scheduler places an unconstrained pair.
    leader = dataclasses.replace(member("a", 1, TopologyRequest(unconstrained=True, group="g")), from_field=True)
    workers = dataclasses.replace(member("b", 4, TopologyRequest(preferred=RACK, group="g")), from_field=True)
    assert group_errors([leader, workers]) == []
    # the pair shape still holds: the engine places the leader as one pod
    big = dataclasses.replace(leader, count=2)
    assert [e.podset for e in group_errors([big, workers])] == ["a", "b"]
    # the level rule is the job webhooks': it needs both members stated in our annotations
    mixed = member("a", 1, TopologyRequest(unconstrained=True, group="g"))
    assert group_errors([mixed, workers]) == []
    assert len(group_errors([mixed, dataclasses.replace(workers, from_field=False)])) == 2


# --- Kueue's topologyRequest field ----------------------------------------------------------


def field(**values: Any) -> PodSetTopologyRequestModel:
    return PodSetTopologyRequestModel.model_validate(values)


def test_field_honoured_field_for_field() -> None:
    f = field(required=BLOCK, podSetGroupName="g", podIndexLabel="idx", subGroupIndexLabel="s", subGroupCount=2)
    assert topology_request_from_field(f) == TopologyRequest(required=BLOCK, group="g")
    assert topology_request_from_field(field(preferred=RACK)) == TopologyRequest(preferred=RACK)
    assert topology_request_from_field(field(unconstrained=False)) == TopologyRequest(unconstrained=False)
    assert topology_request_from_field(field(podSetSliceRequiredTopology=RACK, podSetSliceSize=4)) == TopologyRequest(
        slice_level=RACK, slice_size=4
    )
    layers = [{"topology": RACK, "size": 16}, {"topology": HOST, "size": 4}]
    both = field(
        required=BLOCK,
        podsetSliceRequiredTopologyConstraints=layers,
        podSetSliceRequiredTopology=RACK,
        podSetSliceSize=8,
    )
    assert topology_request_from_field(both) == TopologyRequest(
        required=BLOCK, slice_layers=(SliceLayer(RACK, 16), SliceLayer(HOST, 4))
    )


def test_field_with_only_index_labels_is_no_request() -> None:
    f = field(podIndexLabel="batch.kubernetes.io/job-completion-index")
    assert topology_request_from_field(f) is None
    assert not uses_field({}, f, P)
    assert not requests_topology({}, f, P)
    # a group name alone groups an implied PodSet
    g = field(podSetGroupName="g")
    assert topology_request_from_field(g) == TopologyRequest(group="g")
    assert uses_field({}, g, P) and not requests_topology({}, g, P)


def test_field_validation_texts() -> None:
    with pytest.raises(TopologyFieldError) as err:
        topology_request_from_field(
            field(
                required="x" * 64,
                podSetSliceRequiredTopology=RACK,
                podsetSliceRequiredTopologyConstraints=[{"topology": "", "size": 0}] * 4,
            )
        )
    errs = err.value.errors
    assert "topologyRequest.required: Too long: may not be more than 63 bytes" in errs
    assert "topologyRequest.podsetSliceRequiredTopologyConstraints: Too many: 4: must have at most 3 items" in errs
    assert (
        'topologyRequest.podsetSliceRequiredTopologyConstraints[0].topology: Invalid value: "": '
        "should be at least 1 chars long" in errs
    )
    assert (
        "topologyRequest.podsetSliceRequiredTopologyConstraints[3].size: Invalid value: 0: "
        "should be greater than or equal to 1" in errs
    )
    assert not any("podSetSliceSize" in e for e in errs)  # the CRD's limits only, not the slice pair


def test_field_slice_pair_reaches_the_engine_as_written() -> None:
    # Kueue's Workload webhook rule (TASValidateWorkloadSliceSize) guards writes only; its
    # scheduler places a stored Workload as it is, and so does kueue-tas.
    assert topology_request_from_field(field(required=BLOCK, podSetSliceRequiredTopology=RACK)) == TopologyRequest(
        required=BLOCK, slice_level=RACK
    )
    assert topology_request_from_field(field(podSetSliceRequiredTopology=RACK, podSetSliceSize=0)) == TopologyRequest(
        slice_level=RACK, slice_size=0
    )
    assert topology_request_from_field(field(preferred=RACK, podSetSliceSize=2)) == TopologyRequest(
        preferred=RACK, slice_size=2
    )


def test_annotations_win_over_the_field() -> None:
    f = field(required=BLOCK)
    with_ann = {"metadata": {"annotations": {PREF: RACK}}}
    assert podset_request("main", 2, with_ann, topology_field=f).topology == TopologyRequest(preferred=RACK)
    assert podset_request("main", 2, {}, topology_field=f).topology == TopologyRequest(required=BLOCK)
    assert requests_topology({}, f, P)
    # other prefixes' annotations are not ours: the field is used
    kueue_ann = {"metadata": {"annotations": {"kueue.x-k8s.io/podset-preferred-topology": RACK}}}
    assert podset_request("main", 2, kueue_ann, topology_field=f).topology == TopologyRequest(required=BLOCK)
