"""Topology annotations -> TopologyRequest, with Kueue's priority and webhook validation."""

from __future__ import annotations

import pytest
from vocab import BLOCK, HOST, PREFERRED_WAIT, RACK

from kueue_tas.topology.model import TopologyRequest
from kueue_tas.topology.requests.request import (
    TopologyRequestError,
    annotation_keys,
    has_topology_annotation,
    label_name_errors,
    parse_go_bool,
    parse_go_int32,
    parse_template_topology_request,
    parse_topology_request,
    validate_topology_annotations,
)

P = "kueue-tas.io/"
REQ = P + "podset-required-topology"
PREF = P + "podset-preferred-topology"
UNC = P + "podset-unconstrained-topology"
SLICE = P + "podset-slice-required-topology"
SIZE = P + "podset-slice-size"
LAYERS = P + "podset-slice-required-topology-constraints"
GROUP = P + "podset-group-name"


def errors_of(annotations: dict[str, str], count: int | None = None, prefix: str = P) -> list[str]:
    with pytest.raises(TopologyRequestError) as err:
        parse_topology_request(annotations, prefix=prefix, count=count)
    assert isinstance(err.value, ValueError)
    assert str(err.value) == "; ".join(err.value.errors)
    return err.value.errors


def test_keys() -> None:
    keys = annotation_keys()
    assert keys.all == (REQ, PREF, UNC, SLICE, SIZE, LAYERS, GROUP, PREFERRED_WAIT)
    assert annotation_keys("kueue.x-k8s.io/").required == "kueue.x-k8s.io/podset-required-topology"
    with pytest.raises(ValueError, match="must end with '/'"):
        annotation_keys("kueue-tas.io")


def test_no_annotations_is_none() -> None:
    assert parse_topology_request(None) is None
    assert parse_topology_request({}) is None
    assert parse_topology_request({"unrelated": "x", "kueue.x-k8s.io/podset-required-topology": RACK}) is None


def test_required() -> None:
    assert parse_topology_request({REQ: RACK}) == TopologyRequest(required=RACK)


def test_preferred() -> None:
    assert parse_topology_request({PREF: BLOCK}) == TopologyRequest(preferred=BLOCK)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("true", True),
        ("True", True),
        ("TRUE", True),
        ("t", True),
        ("T", True),
        ("1", True),
        ("false", False),
        ("False", False),
        ("FALSE", False),
        ("f", False),
        ("F", False),
        ("0", False),
    ],
)
def test_unconstrained_parsed_like_go_parse_bool(value: str, expected: bool) -> None:
    assert parse_go_bool(value) is expected
    assert parse_topology_request({UNC: value}) == TopologyRequest(unconstrained=expected)


@pytest.mark.parametrize("value", ["yes", "no", "", "tRUE", " true", "2", "on"])
def test_unconstrained_not_boolean(value: str) -> None:
    assert parse_go_bool(value) is None
    [msg] = errors_of({UNC: value})
    assert UNC in msg and f'"{value}"' in msg and "must be a boolean value" in msg


def test_slice_pair() -> None:
    assert parse_topology_request({REQ: BLOCK, SLICE: RACK, SIZE: "4"}) == TopologyRequest(
        required=BLOCK, slice_level=RACK, slice_size=4
    )


def test_slice_pair_without_mode() -> None:
    assert parse_topology_request({SLICE: RACK, SIZE: "+8"}) == TopologyRequest(slice_level=RACK, slice_size=8)


def test_more_than_one_mode() -> None:
    # Required with preferred is allowed (test_required_preferred.py); unconstrained beside either is not.
    [msg] = errors_of({REQ: RACK, UNC: "true"})
    assert msg.endswith(f'must not contain more than one topology annotation: ["{REQ}", "{PREF}", "{UNC}"]')
    assert msg.startswith(f'annotations {REQ}="{RACK}", {UNC}="true": ')
    [msg3] = errors_of({REQ: RACK, PREF: BLOCK, UNC: "true"})
    assert "must not contain more than one topology annotation" in msg3
    [msg2] = errors_of({PREF: BLOCK, UNC: "true"})
    assert "must not contain more than one topology annotation" in msg2


@pytest.mark.parametrize("key", [REQ, PREF, SLICE])
@pytest.mark.parametrize("value", ["", "-rack", "rack-", "a/b/c", "/rack", "UPPER.Domain/rack", "x" * 64, "ra ck"])
def test_invalid_label_names(key: str, value: str) -> None:
    annotations = {key: value}
    if key == SLICE:
        annotations[SIZE] = "1"
    errs = errors_of(annotations)
    assert errs
    for msg in errs:
        assert key in msg
        assert repr(value)[1:-1] in msg or value == ""
    assert any(f'"{value}"' in m for m in errs)


@pytest.mark.parametrize("value", [RACK, "rack", HOST, "a.b-c_d", "x" * 63, "R1"])
def test_valid_label_names(value: str) -> None:
    assert label_name_errors(value) == []
    assert parse_topology_request({REQ: value}) == TopologyRequest(required=value)


def test_label_name_messages_follow_kubernetes() -> None:
    assert label_name_errors("a/") == ["name part must be non-empty", label_name_errors("-")[0]]
    assert label_name_errors("/a") == ["prefix part must be non-empty"]
    assert label_name_errors("x" * 64) == ["name part must be no more than 63 bytes"]
    assert label_name_errors("-")[0].startswith(
        "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
        "alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is"
    )
    assert label_name_errors("Example.com/a")[0].startswith("prefix part a lowercase RFC 1123 subdomain")
    assert label_name_errors("a/b/c")[0].startswith("a valid label key must consist of")


@pytest.mark.parametrize("value", ["abc", "1.5", "", " 3", "3 ", "1_0", "0x10", "2147483648", "99999999999"])
def test_slice_size_not_numeric(value: str) -> None:
    assert parse_go_int32(value) is None
    [msg] = errors_of({SLICE: RACK, SIZE: value})
    assert SIZE in msg and f'"{value}"' in msg and msg.endswith("must be a numeric value")


@pytest.mark.parametrize("value", ["0", "-1", "-2147483648"])
def test_slice_size_below_one(value: str) -> None:
    [msg] = errors_of({SLICE: RACK, SIZE: value})
    assert SIZE in msg and f'"{value}"' in msg and msg.endswith("must be greater than or equal to 1")


def test_slice_size_above_count() -> None:
    [msg] = errors_of({SLICE: RACK, SIZE: "9"}, count=8)
    assert SIZE in msg and '"9"' in msg and msg.endswith("must not be greater than pod set count 8")
    assert parse_topology_request({SLICE: RACK, SIZE: "8"}, count=8) == TopologyRequest(slice_level=RACK, slice_size=8)
    # without a count the upper bound is not checked
    assert parse_topology_request({SLICE: RACK, SIZE: "9"}) == TopologyRequest(slice_level=RACK, slice_size=9)


def test_slice_topology_without_size() -> None:
    [msg] = errors_of({REQ: BLOCK, SLICE: RACK})
    assert SIZE in msg and msg.endswith(f"must be set when '{SLICE}' is specified")


def test_slice_size_without_topology() -> None:
    [msg] = errors_of({REQ: BLOCK, SIZE: "2"})
    assert SIZE in msg and msg.endswith(f"may not be set when '{SLICE}' is not specified")


def test_all_problems_reported_together() -> None:
    errs = errors_of({REQ: "-bad", UNC: "maybe", SIZE: "0"})
    joined = " | ".join(errs)
    assert "more than one topology annotation" in joined
    assert "must be a boolean value" in joined
    assert "must be greater than or equal to 1" in joined
    assert f"may not be set when '{SLICE}' is not specified" in joined
    assert any(REQ in e and '"-bad"' in e for e in errs)
    assert validate_topology_annotations({REQ: RACK}) == []


def test_configurable_prefix() -> None:
    kueue_req = "kueue.x-k8s.io/podset-required-topology"
    assert parse_topology_request({kueue_req: RACK}, prefix="kueue.x-k8s.io/") == TopologyRequest(required=RACK)
    assert parse_topology_request({REQ: RACK}, prefix="kueue.x-k8s.io/") is None
    [msg] = errors_of(
        {kueue_req: RACK, "kueue.x-k8s.io/podset-unconstrained-topology": "true"}, prefix="kueue.x-k8s.io/"
    )
    assert '["kueue.x-k8s.io/podset-required-topology", "kueue.x-k8s.io/podset-preferred-topology"' in msg


def test_has_topology_annotation() -> None:
    assert not has_topology_annotation(None)
    assert not has_topology_annotation({"other": "1"})
    for key in (REQ, PREF, UNC, SLICE, SIZE):
        assert has_topology_annotation({key: "x"})
    assert has_topology_annotation({UNC: "false"})  # explicit even when false
    assert not has_topology_annotation({REQ: RACK}, prefix="kueue.x-k8s.io/")


def test_template_parsing() -> None:
    template = {"metadata": {"annotations": {PREF: RACK}}, "spec": {}}
    assert parse_template_topology_request(template) == TopologyRequest(preferred=RACK)
    assert parse_template_topology_request({}) is None
    assert parse_template_topology_request({"metadata": {"annotations": None}}) is None
    with pytest.raises(TopologyRequestError, match="mapping"):
        parse_template_topology_request({"metadata": {"annotations": ["x"]}})
    with pytest.raises(TopologyRequestError, match="pod set count 2"):
        parse_template_topology_request({"metadata": {"annotations": {SLICE: RACK, SIZE: "3"}}}, count=2)


def test_lenient_priority_required_over_preferred_over_unconstrained() -> None:
    both = {REQ: RACK, PREF: BLOCK, UNC: "true"}
    # required and preferred are kept together (kueue-tas's extension), unconstrained is dropped
    assert parse_topology_request(both, strict=False) == TopologyRequest(required=RACK, preferred=BLOCK)
    assert parse_topology_request({REQ: RACK, UNC: "true"}, strict=False) == TopologyRequest(required=RACK)
    assert parse_topology_request({PREF: BLOCK, UNC: "true"}, strict=False) == TopologyRequest(preferred=BLOCK)
    # an unparsable unconstrained value is not read when a higher-priority mode is present
    assert parse_topology_request({PREF: BLOCK, UNC: "maybe"}, strict=False) == TopologyRequest(preferred=BLOCK)
    assert parse_topology_request({UNC: "false"}, strict=False) == TopologyRequest(unconstrained=False)


def test_lenient_slice_pair_needs_both() -> None:
    assert parse_topology_request({SLICE: RACK}, strict=False) is None
    assert parse_topology_request({SIZE: "4"}, strict=False) is None
    assert parse_topology_request({REQ: BLOCK, SLICE: RACK}, strict=False) == TopologyRequest(required=BLOCK)
    # the upper bound and label syntax are webhook checks, skipped here
    assert parse_topology_request({SLICE: "-x", SIZE: "9"}, strict=False, count=2) == TopologyRequest(
        slice_level="-x", slice_size=9
    )


def test_lenient_still_rejects_unparsable_values() -> None:
    with pytest.raises(TopologyRequestError, match="must be a boolean value"):
        parse_topology_request({UNC: "maybe"}, strict=False)
    with pytest.raises(TopologyRequestError, match="must be a numeric value"):
        parse_topology_request({SLICE: RACK, SIZE: "four"}, strict=False)
