"""Kueue's preferred-node-affinity TAS cases (``TASRespectNodeAffinityPreferred``).

Source: kubernetes-sigs/kueue v0.19.2 ``pkg/cache/scheduler/tas_cache_test.go``,
``TestFindTopologyAssignments`` (the cases setting ``TASRespectNodeAffinityPreferred``).
Names are Kueue's. A PodSet's ``preferredDuringSchedulingIgnoredDuringExecution`` terms are
``PodSetCase.preferred_affinity``; its required terms stay ``required_affinity``. Node
names equal their hostname label in every case, as in Kueue.
"""

from __future__ import annotations

from collections.abc import Mapping

from kueue_tas.topology.model import (
    NodeInfo,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    PreferredSchedulingTerm,
    TopologyRequest,
)

from .model import BLOCK, GI, HOST, RACK, SWITCH, KueueCase, PodSetCase, node, on_hosts, preferred, required

CPU1 = {"cpu": 1000}
AFFINITY = {"TASRespectNodeAffinityPreferred": True}
AFFINITY_MIXED = {"TASRespectNodeAffinityPreferred": True, "TASProfileMixed": True}
TOPOLOGY_ZONE = "cloud.com/topology-zone"


def _in(key: str, *values: str) -> NodeSelectorTerm:
    return NodeSelectorTerm(match_expressions=(NodeSelectorRequirement(key=key, operator="In", values=values),))


def _prefer(*terms: tuple[int, str, str]) -> tuple[PreferredSchedulingTerm, ...]:
    """``(weight, key, value)`` terms, each ``key In [value]``."""
    return tuple(PreferredSchedulingTerm(weight=w, preference=_in(k, v)) for w, k, v in terms)


def _host(name: str, cores: int, labels: Mapping[str, str] | None = None) -> NodeInfo:
    return node(name, host=name, labels=labels, cpu=cores * 1000, pods=10)


def _flat(
    name: str,
    topology: TopologyRequest,
    count: int,
    nodes: tuple[NodeInfo, ...],
    want: tuple[tuple[str, int], ...],
    gates: Mapping[str, bool],
) -> KueueCase:
    return KueueCase(
        name=name,
        levels=(HOST,),
        nodes=nodes,
        gates=gates,
        podsets=(
            PodSetCase(
                count=count,
                requests=CPU1,
                topology=topology,
                preferred_affinity=_prefer((10, "type", "preferred")),
                want=on_hosts(*want),
            ),
        ),
    )


PREFERRED = {"type": "preferred"}
_FLAT_5_NODES = (
    _host("node-1-pref-2", 2, PREFERRED),
    _host("node-2-pref-1", 1, PREFERRED),
    _host("node-3-nonpref-2", 2),
)
_FLAT_2X2_NODES = (
    _host("node-1-pref-2", 2, PREFERRED),
    _host("node-2-pref-1", 1, PREFERRED),
    _host("node-3-nonpref-2a", 2),
    _host("node-4-nonpref-2b", 2),
    _host("node-5-nonpref-1", 1),
)

CASES: list[KueueCase] = [
    KueueCase(
        name="with preferred affinity",
        levels=(RACK, HOST),
        gates=AFFINITY,
        nodes=(
            _host("node-preferred", 1, {RACK: "rack-preferred", "region": "us-west"}),
            _host("node-other", 1, {RACK: "rack-other", "region": "us-east"}),
        ),
        podsets=(
            PodSetCase(
                count=1,
                requests=CPU1,
                topology=preferred(RACK),
                preferred_affinity=_prefer((10, "region", "us-west")),
                want=on_hosts(("node-preferred", 1)),
            ),
        ),
    ),
    KueueCase(
        name="with required and preferred affinity",
        levels=(RACK, HOST),
        gates=AFFINITY,
        nodes=(
            _host("node-preferred", 1, {RACK: "rack-preferred", "region": "us-west", "zone": "us"}),
            _host("node-other", 1, {RACK: "rack-other", "region": "us-east", "zone": "us"}),
            _host("node-excluded", 1, {RACK: "rack-excluded", "region": "us-west", "zone": "eu"}),
        ),
        podsets=(
            PodSetCase(
                count=1,
                requests=CPU1,
                topology=preferred(RACK),
                required_affinity=(_in("zone", "us"),),
                preferred_affinity=_prefer((10, "region", "us-west")),
                want=on_hosts(("node-preferred", 1)),
            ),
        ),
    ),
    KueueCase(
        name="with multiple preferred affinities",
        levels=(BLOCK, RACK, HOST),
        gates=AFFINITY,
        nodes=(
            _host("node-a", 1, {BLOCK: "b1", RACK: "r1"}),
            _host("node-b", 1, {BLOCK: "b1", RACK: "r2"}),
            _host("node-c", 1, {BLOCK: "b2", RACK: "r1"}),
        ),
        podsets=(
            PodSetCase(
                count=1,
                requests=CPU1,
                topology=preferred(RACK),
                preferred_affinity=_prefer((10, BLOCK, "b1"), (100, RACK, "r1")),
                want=on_hosts(("node-a", 1)),
            ),
        ),
    ),
    KueueCase(
        name="affinity takes precedence over best fit",
        levels=(HOST,),
        gates=AFFINITY,
        nodes=(
            _host("node-better-fit", 8, {"region": "us-east"}),
            _host("node-has-affinity", 2, {"region": "us-west"}),
        ),
        podsets=(
            PodSetCase(
                count=1,
                requests=CPU1,
                topology=preferred(HOST),
                preferred_affinity=_prefer((10, "region", "us-west")),
                want=on_hosts(("node-has-affinity", 1)),
            ),
        ),
        note="Kueue's node names: the better BestFit node is the one without the preferred label.",
    ),
    KueueCase(
        name="affinity ordering with required topology level chooses secondary domain if primary is too small",
        levels=(RACK, HOST),
        gates=AFFINITY,
        nodes=(
            _host("node-preferred-small", 2, {RACK: "rack-preferred", "region": "us-west"}),
            _host("node-secondary-large-1", 4, {RACK: "rack-secondary", "region": "us-east"}),
            _host("node-secondary-large-2", 4, {RACK: "rack-secondary", "region": "us-east"}),
        ),
        podsets=(
            PodSetCase(
                count=4,
                requests=CPU1,
                topology=required(RACK),
                preferred_affinity=_prefer((10, "region", "us-west")),
                want=on_hosts(("node-secondary-large-1", 4)),
            ),
        ),
    ),
    KueueCase(
        name=(
            "affinity ordering with preferred inner topology level bubbles up to parent level to avoid splitting "
            "across parent domains"
        ),
        levels=(RACK, SWITCH, HOST),
        gates=AFFINITY,
        nodes=(
            _host("node-preferred-small", 2, {RACK: "r1", SWITCH: "s1", "region": "us-west"}),
            _host("node-secondary-large", 4, {RACK: "r1", SWITCH: "s2", "region": "us-east"}),
        ),
        podsets=(
            PodSetCase(
                count=4,
                requests=CPU1,
                topology=preferred(SWITCH),
                preferred_affinity=_prefer((10, "region", "us-west")),
                want=on_hosts(("node-preferred-small", 2), ("node-secondary-large", 2)),
            ),
        ),
    ),
    _flat(
        "flat topology, preferred mode, size 5 pods x 1",
        preferred(HOST),
        5,
        (*_FLAT_5_NODES, _host("node-4-nonpref-1", 1)),
        (("node-1-pref-2", 2), ("node-2-pref-1", 1), ("node-3-nonpref-2", 2)),
        AFFINITY,
    ),
    _flat(
        "flat topology, unconstrained mode, size 5 pods x 1",
        TopologyRequest(unconstrained=True),
        5,
        (*_FLAT_5_NODES, _host("node-4-nonpref-1a", 1), _host("node-5-nonpref-1b", 1)),
        (("node-1-pref-2", 2), ("node-2-pref-1", 1), ("node-4-nonpref-1a", 1), ("node-5-nonpref-1b", 1)),
        AFFINITY_MIXED,
    ),
    _flat(
        "flat topology, preferred mode, size 2 pods x 2",
        TopologyRequest(preferred=HOST, slice_level=HOST, slice_size=2),
        4,
        _FLAT_2X2_NODES,
        (("node-1-pref-2", 2), ("node-3-nonpref-2a", 2)),
        AFFINITY,
    ),
    _flat(
        "flat topology, unconstrained mode, size 2 pods x 2",
        TopologyRequest(unconstrained=True, slice_level=HOST, slice_size=2),
        4,
        _FLAT_2X2_NODES,
        (("node-1-pref-2", 2), ("node-3-nonpref-2a", 2)),
        AFFINITY_MIXED,
    ),
    KueueCase(
        name="LWS with leader and workers; preferred affinity on workers; leader cannot fit on preferred zone",
        levels=(TOPOLOGY_ZONE, HOST),
        gates=AFFINITY,
        nodes=(
            node(
                "us-west-1",
                host="us-west-1",
                labels={TOPOLOGY_ZONE: "us-west"},
                cpu=8000,
                memory=32 * GI,
                pods=10,
                extra={"nvidia.com/gpu": 8},
            ),
            node(
                "us-west-2",
                host="us-west-2",
                labels={TOPOLOGY_ZONE: "us-west"},
                cpu=8000,
                memory=32 * GI,
                pods=10,
                extra={"nvidia.com/gpu": 8},
            ),
            node("us-east-1", host="us-east-1", labels={TOPOLOGY_ZONE: "us-east"}, cpu=32000, memory=128 * GI, pods=10),
        ),
        podsets=(
            PodSetCase(
                name="leader",
                count=1,
                requests={"cpu": 16000, "memory": 64 * GI},
                topology=TopologyRequest(preferred=TOPOLOGY_ZONE, slice_level=HOST, slice_size=1, group="llm-group"),
                want=on_hosts(("us-east-1", 1)),
            ),
            PodSetCase(
                name="workers",
                count=2,
                requests={"cpu": 4000, "memory": 32 * GI, "nvidia.com/gpu": 8},
                topology=TopologyRequest(preferred=TOPOLOGY_ZONE, slice_level=HOST, slice_size=1, group="llm-group"),
                preferred_affinity=_prefer((10, TOPOLOGY_ZONE, "us-west")),
                want=on_hosts(("us-west-1", 1), ("us-west-2", 1)),
            ),
        ),
    ),
]

NOT_TRANSCRIBED: dict[str, str] = {}
