"""Example tests for the assignment codec.

Most cases are Kueue's own (pkg/util/tas/tas_assignment_test.go and
tas_assignment_fuzz_test.go), restated as (expanded assignment, exact v1beta2
JSON) pairs.  Kueue's Go tests compare Go structs, where an empty ``Slices``
equals an absent one; here we assert the JSON, in which Go's ``omitempty``
drops ``slices`` when there are none.
"""

from __future__ import annotations

import json
from types import MappingProxyType
from typing import Any

import pytest

from kueue_tas.topology.assignment import DomainAssignment, TopologyAssignment
from kueue_tas.topology.codec import codec
from kueue_tas.topology.codec.codec import (
    AssignmentFormatError,
    decode_assignment_annotation,
    decode_v1beta2,
    encode_assignment_annotation,
    encode_v1beta2,
)

HOST = "kubernetes.io/hostname"


def ta(levels: tuple[str, ...], *domains: tuple[tuple[str, ...], int]) -> TopologyAssignment:
    return TopologyAssignment(levels, tuple(DomainAssignment(v, c) for v, c in domains))


def hosts(names: list[str], counts: list[int]) -> TopologyAssignment:
    return TopologyAssignment((HOST,), tuple(DomainAssignment((h,), c) for h, c in zip(names, counts, strict=True)))


def ind(roots: list[Any], prefix: Any = None, suffix: Any = None) -> dict[str, Any]:
    """An ``individual`` level entry; Any so that malformed ones can be built too."""
    body: dict[str, Any] = {}
    if prefix is not None:
        body["prefix"] = prefix
    if suffix is not None:
        body["suffix"] = suffix
    body["roots"] = roots
    return {"individual": body}


def uni(value: str) -> dict[str, Any]:
    return {"universal": value}


def sl(n: int, values: list[dict[str, Any]], counts: int | list[int]) -> dict[str, Any]:
    pods: dict[str, Any] = {"universal": counts} if isinstance(counts, int) else {"individual": counts}
    return {"domainCount": n, "valuesPerLevel": values, "podCounts": pods}


# ---------------------------------------------------------------------------------------------
# Both directions: Kueue's "bothWaysTestCases" (plus our reference note's examples)
# ---------------------------------------------------------------------------------------------

BOTH_WAYS: list[tuple[str, TopologyAssignment, dict[str, Any]]] = [
    (
        "no domains: slices omitted",
        ta(("a", "b")),
        {"levels": ["a", "b"]},
    ),
    (
        "a single domain is all universal",
        ta(("a", "b"), (("a1", "b1"), 1)),
        {"levels": ["a", "b"], "slices": [sl(1, [uni("a1"), uni("b1")], 1)]},
    ),
    (
        "equal counts, values differing only at the end",
        ta(("a", "b"), (("a1", "b1"), 1), (("a2", "b2"), 1)),
        {"levels": ["a", "b"], "slices": [sl(2, [ind(["1", "2"], "a"), ind(["1", "2"], "b")], 1)]},
    ),
    (
        "different counts, shared prefix and suffix",
        ta(("a", "b"), (("p.a1.s", "p.b1.s"), 1), (("p.a2.s", "p.b2.s"), 2)),
        {
            "levels": ["a", "b"],
            "slices": [sl(2, [ind(["1", "2"], "p.a", ".s"), ind(["1", "2"], "p.b", ".s")], [1, 2])],
        },
    ),
    (
        "one level universal, the other individual without prefix",
        ta(("a", "b"), (("a1", "x"), 1), (("a1", "y"), 2)),
        {"levels": ["a", "b"], "slices": [sl(2, [uni("a1"), ind(["x", "y"])], [1, 2])]},
    ),
    (
        "prefix limited by the shortest value, an empty root",
        ta(("a",), (("a123",), 1), (("a12",), 1), (("a1",), 1), (("a13",), 1)),
        {"levels": ["a"], "slices": [sl(4, [ind(["23", "2", "", "3"], "a1")], 1)]},
    ),
    (
        "suffix limited by the shortest value, an empty root",
        ta(("a",), (("123b",), 1), (("23b",), 1), (("3b",), 1), (("13b",), 1)),
        {"levels": ["a"], "slices": [sl(4, [ind(["12", "2", "", "1"], suffix="3b")], 1)]},
    ),
    (
        "overlapping prefix and suffix: the prefix gives way",
        ta(("a",), (("abacacada",), 1), (("abacada",), 1)),
        {"levels": ["a"], "slices": [sl(2, [ind(["ac", ""], "ab", "acada")], 1)]},
    ),
    (
        "full overlap, longer value first: prefix shrinks to nothing and is omitted",
        ta(("a",), (("ababa",), 1), (("aba",), 1)),
        {"levels": ["a"], "slices": [sl(2, [ind(["ab", ""], suffix="aba")], 1)]},
    ),
    (
        "full overlap, shorter value first",
        ta(("a",), (("aba",), 1), (("ababa",), 1)),
        {"levels": ["a"], "slices": [sl(2, [ind(["", "ab"], suffix="aba")], 1)]},
    ),
    (
        "reference note: block/rack",
        ta(
            ("cloud.provider.com/topology-block", "cloud.provider.com/topology-rack"),
            (("block-1", "rack-1"), 4),
            (("block-1", "rack-2"), 2),
        ),
        {
            "levels": ["cloud.provider.com/topology-block", "cloud.provider.com/topology-rack"],
            "slices": [sl(2, [uni("block-1"), ind(["1", "2"], "rack-")], [4, 2])],
        },
    ),
    (
        "reference note: hostnames without '-' form one slice",
        hosts(["x1", "x2", "x4", "x6"], [1, 1, 1, 1]),
        {"levels": [HOST], "slices": [sl(4, [ind(["1", "2", "4", "6"], "x")], 1)]},
    ),
    (
        "an all-empty level is universal ''",
        ta(("a", "b"), (("", "b1"), 1), (("", "b2"), 1)),
        {"levels": ["a", "b"], "slices": [sl(2, [uni(""), ind(["1", "2"], "b")], 1)]},
    ),
]


@pytest.mark.parametrize(("name", "expanded", "wire"), BOTH_WAYS, ids=[c[0] for c in BOTH_WAYS])
def test_encode_matches_kueue(name: str, expanded: TopologyAssignment, wire: dict[str, Any]) -> None:
    got = encode_v1beta2(expanded)
    assert got == wire
    # Key order is Go's field order, so even the JSON text is Kueue's.
    assert json.dumps(got) == json.dumps(wire)


@pytest.mark.parametrize(("name", "expanded", "wire"), BOTH_WAYS, ids=[c[0] for c in BOTH_WAYS])
def test_decode_matches_kueue(name: str, expanded: TopologyAssignment, wire: dict[str, Any]) -> None:
    assert decode_v1beta2(wire) == expanded


def test_decode_empty_slices_list() -> None:
    assert decode_v1beta2({"levels": ["a"], "slices": []}) == ta(("a",))


# ---------------------------------------------------------------------------------------------
# Decode only: Kueue's "oneWayTestCases" (forms its encoder does not produce)
# ---------------------------------------------------------------------------------------------


def test_decode_several_plain_slices() -> None:
    wire = {
        "levels": ["a", "b"],
        "slices": [
            sl(1, [ind(["a"]), ind(["b"])], [1]),
            sl(2, [ind(["c", "e"]), ind(["d", "f"])], [2, 3]),
        ],
    }
    assert decode_v1beta2(wire) == ta(("a", "b"), (("a", "b"), 1), (("c", "d"), 2), (("e", "f"), 3))


def test_decode_several_slices_with_prefixes_suffixes_and_universals() -> None:
    wire = {
        "levels": ["a", "b"],
        "slices": [
            sl(2, [uni("a1"), ind(["1", "2"], "b", "-s")], [2, 3]),
            sl(3, [ind(["2", "3", "4"], "a"), ind(["x", "y", "z"], suffix="-t")], 5),
            sl(2, [uni("a10"), uni("b10")], 10),
        ],
    }
    assert decode_v1beta2(wire) == ta(
        ("a", "b"),
        (("a1", "b1-s"), 2),
        (("a1", "b2-s"), 3),
        (("a2", "x-t"), 5),
        (("a3", "y-t"), 5),
        (("a4", "z-t"), 5),
        (("a10", "b10"), 10),
        (("a10", "b10"), 10),
    )


def test_decode_accepts_empty_prefix_and_suffix_strings() -> None:
    # Kueue never writes them, but its schema does not forbid them.
    wire = {"levels": ["a"], "slices": [sl(2, [ind(["x", "y"], "", "")], 1)]}
    assert decode_v1beta2(wire) == ta(("a",), (("x",), 1), (("y",), 1))


def test_decode_v1beta1_form() -> None:
    wire = {
        "levels": ["cloud.provider.com/topology-block", "cloud.provider.com/topology-rack"],
        "domains": [{"values": ["block-1", "rack-1"], "count": 4}, {"values": ["block-1", "rack-2"], "count": 2}],
    }
    assert decode_v1beta2(wire) == ta(
        ("cloud.provider.com/topology-block", "cloud.provider.com/topology-rack"),
        (("block-1", "rack-1"), 4),
        (("block-1", "rack-2"), 2),
    )


def test_decode_ignores_unknown_fields_and_nulls_like_go() -> None:
    wire = {
        "levels": ["a"],
        "extra": {"anything": [1, 2]},
        "domains": None,
        "slices": [
            {
                "domainCount": 2,
                "valuesPerLevel": [{"universal": None, "individual": {"prefix": None, "roots": ["x", "y"]}}],
                "podCounts": {"universal": 3, "individual": None, "other": True},
                "note": "ignored",
            }
        ],
    }
    assert decode_v1beta2(wire) == ta(("a",), (("x",), 3), (("y",), 3))


# ---------------------------------------------------------------------------------------------
# Hostname-prefix runs (Kueue: TestCompactTopologyAssignmentEncodingWithHostnamePrefixRuns)
# ---------------------------------------------------------------------------------------------

GKE = ["gke-c-pool-a-hash1-aa", "gke-c-pool-a-hash1-bb", "gke-c-pool-b-hash2-cc", "gke-c-pool-b-hash2-dd"]
EKS = [
    "ip-10-24-34-0.us-west-2.compute.internal",
    "ip-10-24-34-1.us-west-2.compute.internal",
    "ip-10-24-35-0.us-west-2.compute.internal",
    "ip-10-24-35-1.us-west-2.compute.internal",
]
AKS = [
    "aks-nodepool1-12345678-vmss000000",
    "aks-nodepool1-12345678-vmss000001",
    "aks-nodepool2-87654321-vmss000000",
    "aks-nodepool2-87654321-vmss000001",
]
UUIDS = [
    "550e8400-e29b-41d4-a716-446655440000",
    "6ba7b810-9dad-11d1-80b4-00c04fd430c8",
    "f47ac10b-58cc-4372-a567-0e02b2c3d479",
]

# (name, assignment, slices of the run encoder, slices finally chosen by the size comparison)
RUN_CASES: list[tuple[str, TopologyAssignment, list[dict[str, Any]], list[dict[str, Any]]]] = [
    (
        "GKE node pools",
        hosts(GKE, [3, 3, 4, 5]),
        [
            sl(2, [ind(["aa", "bb"], "gke-c-pool-a-hash1-")], 3),
            sl(2, [ind(["cc", "dd"], "gke-c-pool-b-hash2-")], [4, 5]),
        ],
        [sl(4, [ind(["a-hash1-aa", "a-hash1-bb", "b-hash2-cc", "b-hash2-dd"], "gke-c-pool-")], [3, 3, 4, 5])],
    ),
    (
        "AWS EKS private DNS names",
        hosts(EKS, [2, 2, 3, 4]),
        [
            sl(2, [ind(["0", "1"], "ip-10-24-34-", ".us-west-2.compute.internal")], 2),
            sl(2, [ind(["0", "1"], "ip-10-24-35-", ".us-west-2.compute.internal")], [3, 4]),
        ],
        [sl(4, [ind(["4-0", "4-1", "5-0", "5-1"], "ip-10-24-3", ".us-west-2.compute.internal")], [2, 2, 3, 4])],
    ),
    (
        "Azure AKS VMSS node pools",
        hosts(AKS, [1, 1, 2, 3]),
        [
            sl(2, [ind(["0", "1"], "aks-nodepool1-12345678-vmss00000")], 1),
            sl(2, [ind(["0", "1"], "aks-nodepool2-87654321-vmss00000")], [2, 3]),
        ],
        [
            sl(
                4,
                [
                    ind(
                        [
                            "1-12345678-vmss000000",
                            "1-12345678-vmss000001",
                            "2-87654321-vmss000000",
                            "2-87654321-vmss000001",
                        ],
                        "aks-nodepool",
                    )
                ],
                [1, 1, 2, 3],
            )
        ],
    ),
    (
        "UUID node names share no reusable prefix",
        hosts(UUIDS, [1, 2, 3]),
        [sl(3, [ind(UUIDS)], [1, 2, 3])],
        [sl(3, [ind(UUIDS)], [1, 2, 3])],
    ),
    (
        "Kueue API doc examples 3 and 4 (block-1-rack-R-node-N)",
        hosts([f"block-1-rack-{r}-node-{n}" for r, k in ((1, 4), (2, 2)) for n in range(1, k + 1)], [1] * 6),
        [
            sl(4, [ind(["1", "2", "3", "4"], "block-1-rack-1-node-")], 1),
            sl(2, [ind(["1", "2"], "block-1-rack-2-node-")], 1),
        ],
        [
            sl(
                6,
                [ind(["1-node-1", "1-node-2", "1-node-3", "1-node-4", "2-node-1", "2-node-2"], "block-1-rack-")],
                1,
            )
        ],
    ),
]


@pytest.mark.parametrize(("name", "a", "runs", "chosen"), RUN_CASES, ids=[c[0] for c in RUN_CASES])
def test_hostname_prefix_runs(
    name: str, a: TopologyAssignment, runs: list[dict[str, Any]], chosen: list[dict[str, Any]]
) -> None:
    assert codec._hostname_run_slices(a) == runs
    assert encode_v1beta2(a) == {"levels": [HOST], "slices": chosen}
    assert decode_v1beta2({"levels": [HOST], "slices": runs}) == a
    assert decode_v1beta2(encode_v1beta2(a)) == a


def test_runs_need_a_hostname_level() -> None:
    a = ta(("cloud.example.com/rack",), (("rack-a",), 1), (("rack-b",), 2))
    assert codec._hostname_run_slices(a) == [sl(2, [ind(["a", "b"], "rack-")], [1, 2])]
    assert decode_v1beta2(encode_v1beta2(a)) == a


def test_runs_keep_domain_order() -> None:
    # Interleaved pools: four runs of one domain each; nothing is regrouped.
    names = [GKE[0], GKE[2], GKE[1], GKE[3]]
    a = hosts(names, [1, 2, 3, 4])
    runs = codec._hostname_run_slices(a)
    assert [s["domainCount"] for s in runs] == [1, 1, 1, 1]
    assert decode_v1beta2({"levels": [HOST], "slices": runs}) == a
    assert encode_v1beta2(a) == {
        "levels": [HOST],
        "slices": [sl(4, [ind(["a-hash1-aa", "b-hash2-cc", "a-hash1-bb", "b-hash2-dd"], "gke-c-pool-")], [1, 2, 3, 4])],
    }


def _two_pools(domain_count: int) -> TopologyAssignment:
    """Kueue's hostnamePrefixAssignment: first half pool-a-node-NNNNN, second half pool-b-."""
    half = domain_count // 2
    names = [f"pool-a-node-{i:05d}" if i < half else f"pool-b-node-{i - half:05d}" for i in range(domain_count)]
    return hosts(names, [1] * domain_count)


def test_single_domain_is_one_slice() -> None:
    assert encode_v1beta2(_two_pools(1)) == {"levels": [HOST], "slices": [sl(1, [uni("pool-b-node-00000")], 1)]}


def test_small_assignment_prefers_the_single_slice() -> None:
    a = _two_pools(4)
    assert len(codec._hostname_run_slices(a)) == 2
    assert encode_v1beta2(a) == {
        "levels": [HOST],
        "slices": [sl(4, [ind(["a-node-00000", "a-node-00001", "b-node-00000", "b-node-00001"], "pool-")], 1)],
    }


def test_larger_assignment_prefers_the_runs() -> None:
    a = _two_pools(20)
    digits = [str(i) for i in range(10)]
    assert encode_v1beta2(a) == {
        "levels": [HOST],
        "slices": [sl(10, [ind(digits, "pool-a-node-0000")], 1), sl(10, [ind(digits, "pool-b-node-0000")], 1)],
    }


def test_size_tie_keeps_the_runs() -> None:
    """The single slice must be strictly smaller; on a tie (321 bytes each here) the runs stay."""
    a = hosts([f"a-node{i}" for i in range(5)] + [f"pool-b-node{i}" for i in range(7)], [1] * 5 + [2] * 7)
    runs = [
        sl(5, [ind([str(i) for i in range(5)], "a-node")], 1),
        sl(7, [ind([str(i) for i in range(7)], "pool-b-node")], 2),
    ]
    single = [sl(12, [ind([d.values[0] for d in a.domains])], [1] * 5 + [2] * 7)]
    assert codec._go_json_size({"levels": [HOST], "slices": runs}) == 321
    assert codec._go_json_size({"levels": [HOST], "slices": single}) == 321
    assert encode_v1beta2(a) == {"levels": [HOST], "slices": runs}


def test_many_pools_back_off_to_a_short_prefix_and_chunk() -> None:
    """Kueue: 2000 pools x 100 nodes -> 2 slices of 100 000 (the pool prefixes would need 2000)."""
    a = TopologyAssignment(
        (HOST,),
        tuple(
            DomainAssignment((f"gke-cluster-pool-{p:04d}-{p:08x}-{n:04x}",), 1) for p in range(2000) for n in range(100)
        ),
    )
    got = encode_v1beta2(a)
    assert [s["domainCount"] for s in got["slices"]] == [100_000, 100_000]
    assert got["slices"][0]["valuesPerLevel"] == [
        {
            "individual": {
                "prefix": "gke-cluster-pool-0",
                "roots": [f"{p:03d}-{p:08x}-{n:04x}" for p in range(1000) for n in range(100)],
            }
        }
    ]
    assert decode_v1beta2(got) == a


def test_more_than_one_slice_worth_of_domains_round_trips() -> None:
    """Kueue: 120 000 alternating pool-0/pool-1 hosts -> one run of "pool-", chunked 100 000 + 20 000."""
    a = hosts([f"pool-{i % 2}-node-{i:06d}" for i in range(120_000)], [1] * 120_000)
    got = encode_v1beta2(a)
    assert [s["domainCount"] for s in got["slices"]] == [100_000, 20_000]
    assert got["slices"][1]["valuesPerLevel"][0]["individual"]["prefix"] == "pool-"
    assert decode_v1beta2(json.loads(json.dumps(got))) == a


def test_non_hostname_assignments_are_chunked_too() -> None:
    n = 100_001
    a = TopologyAssignment(("rack",), tuple(DomainAssignment((f"r{i}",), 1 + i % 2) for i in range(n)))
    got = encode_v1beta2(a)
    assert [s["domainCount"] for s in got["slices"]] == [100_000, 1]
    assert got["slices"][1] == sl(1, [uni("r100000")], 1)
    assert decode_v1beta2(got) == a


# Kueue: TestReusableHostnamePrefixKeys and the back-off / fallback tests.


@pytest.mark.parametrize(
    ("names", "keys"),
    [
        (GKE, ["gke-c-pool-a-hash1-"] * 2 + ["gke-c-pool-b-hash2-"] * 2),
        (["node-a", "host-b"], ["", ""]),
        (["nodea", "hostb"], None),
        # a trailing '-' does not start a prefix
        (["a-", "a-"], None),
        # identical hostnames share all their prefixes
        (["n-1", "n-1"], ["n-", "n-"]),
    ],
)
def test_prefix_keys(names: list[str], keys: list[str] | None) -> None:
    assert codec._hostname_prefix_keys(names) == keys


def test_prefix_keys_back_off_to_fit_the_slice_limit() -> None:
    names = [f"a-{'y' if i % 2 else 'x'}-{i:04d}" for i in range(codec.MAX_SLICES + 1)]
    assert codec._hostname_prefix_keys(names) == ["a-"] * len(names)


def test_prefix_keys_give_up_when_no_depth_fits() -> None:
    names = [f"{'b-y' if i % 2 else 'a-x'}-{i:04d}" for i in range(codec.MAX_SLICES + 1)]
    assert codec._hostname_prefix_keys(names) is None
    a = hosts(names, [1] * len(names))
    got = encode_v1beta2(a)
    assert len(got["slices"]) == 1
    assert decode_v1beta2(got) == a


def test_exactly_max_slices_runs_are_kept() -> None:
    names = [f"p{i}-n-{j}" for i in range(codec.MAX_SLICES) for j in range(2)]
    keys = codec._hostname_prefix_keys(names)
    assert keys is not None and keys[:4] == ["p0-n-", "p0-n-", "p1-n-", "p1-n-"]
    assert len(codec._hostname_run_slices(hosts(names, [1] * len(names)))) == codec.MAX_SLICES


# ---------------------------------------------------------------------------------------------
# Size measure used for the comparison
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("obj", "size"),
    [
        ({"a": "x"}, len('{"a":"x"}')),
        ({"a": "<&>"}, len('{"a":"\\u003c\\u0026\\u003e"}')),
        ({"a": "é"}, len('{"a":"é"}'.encode())),
        ({"a": "\u2028"}, len('{"a":"\\u2028"}')),
        ({"a": "\n\x01"}, len('{"a":"\\n\\u0001"}')),
    ],
)
def test_go_json_size(obj: dict[str, Any], size: int) -> None:
    assert codec._go_json_size(obj) == size


# ---------------------------------------------------------------------------------------------
# Encode rejects what cannot go on the wire
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("a", "message"),
    [
        (TopologyAssignment((), ()), "levels: has 0 entries, needs 1 to 16"),
        (TopologyAssignment(tuple(f"l{i}" for i in range(17)), ()), "levels: has 17 entries, needs 1 to 16"),
        (ta(("a", "b"), (("x",), 1)), "domains[0].values: has 1 entries, levels has 2"),
        (ta(("a",), (("x",), 1), (("y",), 0)), "domains[1].count: must be at least 1, got 0"),
        (ta(("a",), (("x",), 2**31)), "domains[0].count: must be at most 2147483647, got 2147483648"),
        (ta(("a",), (("x" * 64,), 1)), "domains[0].values[0]: is 64 characters long, at most 63 allowed"),
        (ta(("a",), (("\ud800",), 1)), "domains[0].values[0]: is not valid Unicode text (lone surrogate)"),
        (TopologyAssignment(("a",), (DomainAssignment(("x",), True),)), "domains[0].count: expected an integer"),
    ],
)
def test_encode_rejects(a: TopologyAssignment, message: str) -> None:
    with pytest.raises(AssignmentFormatError) as e:
        encode_v1beta2(a)
    assert str(e.value).startswith(message)


# ---------------------------------------------------------------------------------------------
# Decode rejects malformed input, naming the field
# ---------------------------------------------------------------------------------------------

GOOD_SLICE = sl(2, [uni("a"), ind(["1", "2"], "r")], [1, 2])


def _with(**changes: Any) -> dict[str, Any]:
    s = json.loads(json.dumps(GOOD_SLICE))
    s.update(changes)
    return {"levels": ["a", "b"], "slices": [GOOD_SLICE, s]}


BAD: list[tuple[Any, str]] = [
    ([], "expected an object, got array"),
    ({}, "levels: is required"),
    ({"levels": "a"}, "levels: expected an array, got string"),
    ({"levels": []}, "levels: has 0 entries, needs 1 to 16"),
    ({"levels": [1]}, "levels[0]: expected a string, got integer"),
    ({"levels": ["a"], "slices": [], "domains": []}, "has both slices (v1beta2) and domains (v1beta1)"),
    ({"levels": ["a"], "slices": {}}, "slices: expected an array, got object"),
    ({"levels": ["a"], "slices": [sl(1, [uni("x")], 1)] * 1001}, "slices: has 1001 entries, at most 1000 allowed"),
    ({"levels": ["a"], "slices": [7]}, "slices[0]: expected an object, got integer"),
    (_with(domainCount=0), "slices[1].domainCount: must be at least 1, got 0"),
    (_with(domainCount=2.0), "slices[1].domainCount: expected an integer, got number"),
    (_with(domainCount=True), "slices[1].domainCount: expected an integer, got boolean"),
    (_with(domainCount="2"), "slices[1].domainCount: expected an integer, got string"),
    (_with(domainCount=None), "slices[1].domainCount: is required"),
    (_with(domainCount=100_001), "slices[1].domainCount: is 100001, a slice holds at most 100000 domains"),
    (_with(valuesPerLevel=[uni("a")]), "slices[1].valuesPerLevel: has 1 entries, levels has 2"),
    (_with(valuesPerLevel=[uni("a"), {}]), "slices[1].valuesPerLevel[1]: exactly one of universal and individual"),
    (
        _with(valuesPerLevel=[uni("a"), {"universal": "x", "individual": {"roots": ["1", "2"]}}]),
        "slices[1].valuesPerLevel[1]: exactly one of universal and individual must be set, both are set",
    ),
    (_with(valuesPerLevel=[uni("a"), ind(["1", "2", "3"])]), "slices[1].valuesPerLevel[1].individual.roots: has 3"),
    (_with(valuesPerLevel=[uni("a"), ind(["1", 2])]), "slices[1].valuesPerLevel[1].individual.roots[1]: expected"),
    (_with(valuesPerLevel=[uni("a"), {"individual": {}}]), "slices[1].valuesPerLevel[1].individual.roots: is required"),
    (_with(valuesPerLevel=[uni("a"), ind(["1", "2"], 5)]), "slices[1].valuesPerLevel[1].individual.prefix: expected"),
    (_with(valuesPerLevel=[uni("a" * 64), ind(["1", "2"])]), "slices[1].valuesPerLevel[0].universal: is 64 characters"),
    (_with(podCounts=None), "slices[1].podCounts: is required"),
    (_with(podCounts={"individual": [1, 2, 3]}), "slices[1].podCounts.individual: has 3 entries, domainCount is 2"),
    (_with(podCounts={"individual": [1, 0]}), "slices[1].podCounts.individual[1]: must be at least 1, got 0"),
    (_with(podCounts={"universal": 0}), "slices[1].podCounts.universal: must be at least 1, got 0"),
    (_with(podCounts={"universal": 2**31}), "slices[1].podCounts.universal: must be at most 2147483647"),
    (_with(podCounts={}), "slices[1].podCounts: exactly one of universal and individual must be set, neither is set"),
    (_with(podCounts={"universal": 1, "individual": [1, 1]}), "slices[1].podCounts: exactly one of universal and"),
    (
        {"levels": ["a"], "domains": [{"values": ["x", "y"], "count": 1}]},
        "domains[0].values: has 2 entries, levels has 1",
    ),
    ({"levels": ["a"], "domains": [{"values": ["x"], "count": 0}]}, "domains[0].count: must be at least 1, got 0"),
    ({"levels": ["a"], "domains": [{"count": 1}]}, "domains[0].values: is required"),
]


@pytest.mark.parametrize(("wire", "message"), BAD, ids=[m for _, m in BAD])
def test_decode_rejects(wire: Any, message: str) -> None:
    with pytest.raises(AssignmentFormatError) as e:
        decode_v1beta2(wire)
    assert str(e.value).startswith(message)


def test_decode_takes_python_containers() -> None:
    """Python callers may pass tuples for arrays and any Mapping for objects, as before the wire models."""
    wire = MappingProxyType(
        {
            "levels": ("a",),
            "slices": ({"domainCount": 2, "valuesPerLevel": (ind(["1", "2"]),), "podCounts": {"individual": (1, 2)}},),
        }
    )
    assert decode_v1beta2(wire) == ta(("a",), (("1",), 1), (("2",), 2))


def test_encode_rejects_values_that_are_not_a_sequence() -> None:
    a = TopologyAssignment(("a",), (DomainAssignment("x", 1),))  # type: ignore[arg-type]
    with pytest.raises(AssignmentFormatError, match=r"^domains\[0\]\.values: expected an array, got string$"):
        encode_v1beta2(a)


def test_error_message_example_from_the_brief() -> None:
    wire = {"levels": ["a"], "slices": [sl(1, [uni("x")], 1), sl(4, [uni("x")], [1, 2, 3])]}
    with pytest.raises(
        AssignmentFormatError, match=r"^slices\[1\]\.podCounts\.individual: has 3 entries, domainCount is 4$"
    ):
        decode_v1beta2(wire)


def test_error_is_a_value_error() -> None:
    assert issubclass(AssignmentFormatError, ValueError)


# ---------------------------------------------------------------------------------------------
# Workload annotation
# ---------------------------------------------------------------------------------------------


def test_annotation_exact_text() -> None:
    a = ta(("a", "b"), (("a1", "b1"), 1), (("a1", "b2"), 2))
    text = encode_assignment_annotation([("main", a)])
    assert text == (
        '{"podSets":[{"name":"main","topologyAssignment":{"levels":["a","b"],"slices":[{"domainCount":2,'
        '"valuesPerLevel":[{"universal":"a1"},{"individual":{"prefix":"b","roots":["1","2"]}}],'
        '"podCounts":{"individual":[1,2]}}]}}]}'
    )
    assert decode_assignment_annotation(text) == [("main", a)]


def test_annotation_round_trip_keeps_podset_order() -> None:
    pairs = [
        ("workers", hosts(GKE, [3, 3, 4, 5])),
        ("leader", hosts(["gke-c-pool-a-hash1-aa"], [1])),
        ("empty", ta(("a",))),
    ]
    assert decode_assignment_annotation(encode_assignment_annotation(pairs)) == pairs
    assert decode_assignment_annotation(encode_assignment_annotation([])) == []


def test_annotation_accepts_v1beta1_entries() -> None:
    text = '{"podSets":[{"name":"main","topologyAssignment":{"levels":["h"],"domains":[{"values":["n1"],"count":2}]}}]}'
    assert decode_assignment_annotation(text) == [("main", ta(("h",), (("n1",), 2)))]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "not valid JSON"),
        ("{", "not valid JSON"),
        ('{"podSets": NaN}', "not valid JSON: NaN is not allowed"),
        ("[" * 100_000, "not valid JSON"),
        ("1" * 5000, "not valid JSON"),
        ("[]", "expected an object, got array"),
        ("{}", "podSets: is required"),
        ('{"podSets": {}}', "podSets: expected an array, got object"),
        ('{"podSets": [1]}', "podSets[0]: expected an object, got integer"),
        ('{"podSets": [{"topologyAssignment": {"levels": ["a"]}}]}', "podSets[0].name: is required"),
        ('{"podSets": [{"name": "Main", "topologyAssignment": {"levels": ["a"]}}]}', "podSets[0].name: 'Main' is not"),
        ('{"podSets": [{"name": "main"}]}', "podSets[0].topologyAssignment: is required"),
        (
            '{"podSets": [{"name": "a", "topologyAssignment": {"levels": ["x"]}},'
            ' {"name": "a", "topologyAssignment": {"levels": ["x"]}}]}',
            "podSets[1].name: duplicate podSet name 'a'",
        ),
        (
            '{"podSets": [{"name": "main", "topologyAssignment": {"levels": ["x"], "slices": [{"domainCount": 1,'
            ' "valuesPerLevel": [{"universal": "n"}], "podCounts": {"individual": [1, 1]}}]}}]}',
            "podSets[0].topologyAssignment.slices[0].podCounts.individual: has 2 entries, domainCount is 1",
        ),
    ],
)
def test_annotation_decode_rejects(text: str, message: str) -> None:
    with pytest.raises(AssignmentFormatError) as e:
        decode_assignment_annotation(text)
    assert str(e.value).startswith(message)


def test_annotation_decode_rejects_non_text() -> None:
    with pytest.raises(AssignmentFormatError, match="must be a string"):
        decode_assignment_annotation(b"{}")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("podsets", "message"),
    [
        ([("", ta(("a",)))], "podSets[0].name: '' is not a valid podSet name"),
        ([("a", ta(("a",))), ("a", ta(("a",)))], "podSets[1].name: duplicate podSet name 'a'"),
        ([("main", ta(("a", "b"), (("x",), 1)))], "podSets[0].topologyAssignment.domains[0].values: has 1"),
        ([("main", "nope")], "podSets[0].topologyAssignment: expected a TopologyAssignment, got str"),
        ([("main",)], "podSets[0]: expected a (name, assignment) pair"),
    ],
)
def test_annotation_encode_rejects(podsets: Any, message: str) -> None:
    with pytest.raises(AssignmentFormatError) as e:
        encode_assignment_annotation(podsets)
    assert str(e.value).startswith(message)


def test_decoding_the_same_text_again_hands_each_caller_its_own_list() -> None:
    """Decoded texts are kept (every reconciler reads every annotation); one caller changing its
    list must not change what the next one gets."""
    text = encode_assignment_annotation([("main", ta((HOST,), (("h1",), 2)))])
    first = decode_assignment_annotation(text)
    first.append(("extra", first[0][1]))
    again = decode_assignment_annotation(text)
    assert [name for name, _ in again] == ["main"] and again[0][1] == first[0][1]
