"""Kueue's balanced-placement TAS cases (``TASBalancedPlacement``).

Sources (kubernetes-sigs/kueue v0.19.2), names are Kueue's:

* ``pkg/cache/scheduler/tas_cache_test.go``, ``TestFindTopologyAssignments``: every case that
  sets ``TASBalancedPlacement: true`` (their "disabled" twins are core cases);
* ``pkg/cache/scheduler/tas_balanced_placement_test.go``: its tests call internal functions
  on hand-built domain states (no nodes, no request); none is a placement, so all are listed
  in ``NOT_TRANSCRIBED`` (keys ``<TestFunction>: <case>``).

Leader/worker cases carry the group in ``TopologyRequest.group`` (Kueue's podSetGroupName).
Kueue's leader PodSets here set ``podSetSliceRequiredTopology`` without a slice size; that is
transcribed as is (``slice_level`` set, ``slice_size`` None), as is a slice size without a
slice level. Node names are Kueue's.
"""

from __future__ import annotations

from kueue_tas.topology.model import NodeInfo, TopologyRequest

from .model import (
    BLOCK,
    GPU,
    HOST,
    RACK,
    SUBBLOCK,
    THREE_LEVELS,
    KueueCase,
    PodSetCase,
    node,
    on_domains,
    on_hosts,
    preferred,
    required,
)

BALANCED = {"TASBalancedPlacement": True}
GPU1 = {GPU: 1}
FOUR_LEVELS = (BLOCK, SUBBLOCK, RACK, HOST)


def _g(name: str, gpus: int, pods: int, *, block: str = "b1", rack: str = "r1", sub: str | None = None) -> NodeInfo:
    """A GPU-only node named like Kueue's (``b1-r1-x1``): hostname is the last part."""
    host = name.rsplit("-", 1)[-1]
    labels = {SUBBLOCK: sub} if sub else {}
    return node(name, block=block, rack=rack, host=host, labels=labels, pods=pods, extra={GPU: gpus})


def _case(
    name: str,
    nodes: tuple[NodeInfo, ...],
    topology: TopologyRequest,
    count: int,
    want: tuple[tuple[str, int], ...],
    levels: tuple[str, ...] = THREE_LEVELS,
    note: str = "",
) -> KueueCase:
    return KueueCase(
        name=name,
        levels=levels,
        nodes=nodes,
        gates=BALANCED,
        podsets=(PodSetCase(count=count, requests=GPU1, topology=topology, want=on_hosts(*want)),),
        note=note,
    )


def _lws(
    name: str,
    nodes: tuple[NodeInfo, ...],
    leader: tuple[TopologyRequest, int, tuple[tuple[str, int], ...]],
    workers: tuple[TopologyRequest, int, tuple[tuple[str, int], ...]],
) -> KueueCase:
    """Leader (1 pod; (request, gpus per pod, want)) and workers ((request, count, want)), group sameGroup."""
    return KueueCase(
        name=name,
        levels=THREE_LEVELS,
        nodes=nodes,
        gates=BALANCED,
        podsets=(
            PodSetCase(
                name="leader", count=1, requests={GPU: leader[1]}, topology=leader[0], want=on_hosts(*leader[2])
            ),
            PodSetCase(
                name="workers", count=workers[1], requests=GPU1, topology=workers[0], want=on_hosts(*workers[2])
            ),
        ),
    )


def _grouped(level: str, *, slice_level: str | None = None, slice_size: int | None = None) -> TopologyRequest:
    return TopologyRequest(preferred=level, slice_level=slice_level, slice_size=slice_size, group="sameGroup")


_FOUR_LEVEL_NODES = (
    _g("b1-sb1-r1-x1", 18, 20, sub="sb1", rack="r1"),
    _g("b1-sb1-r2-x2", 8, 20, sub="sb1", rack="r2"),
    _g("b1-sb1-r3-x3", 15, 20, sub="sb2", rack="r3"),
    _g("b1-sb1-r3-x4", 9, 20, sub="sb2", rack="r4"),
    _g("b1-sb1-r3-x5", 7, 20, sub="sb2", rack="r4"),
)

CASES: list[KueueCase] = [
    _case(
        "balanced placement; basic",
        (_g("b1-r1-x1", 15, 25), _g("b1-r2-x2", 15, 25, rack="r2")),
        preferred(RACK),
        25,
        (("x1", 13), ("x2", 12)),
    ),
    _case(
        "balanced placement; select optmial set of domains",
        (_g("b1-r1-x1", 15, 23), _g("b1-r1-x2", 13, 23), _g("b1-r1-x3", 10, 23)),
        preferred(RACK),
        23,
        (("x1", 12), ("x2", 11)),
    ),
    _case(
        "balanced placement; select optmial set of domains; with slices",
        (_g("b1-r1-x1", 20, 25), _g("b1-r1-x2", 15, 25), _g("b1-r1-x3", 10, 25)),
        preferred(RACK, slice_level=HOST, slice_size=5),
        25,
        (("x2", 15), ("x3", 10)),
    ),
    _case(
        "balanced placement; select correct block",
        (
            _g("b1-r1-x1", 20, 22),
            _g("b1-r1-x2", 10, 22),
            _g("b2-r2-x3", 15, 22, block="b2", rack="r2"),
            _g("b2-r2-x4", 15, 22, block="b2", rack="r2"),
        ),
        TopologyRequest(preferred=RACK, slice_size=1),
        22,
        (("x3", 11), ("x4", 11)),
    ),
    _case(
        "balanced placement; cannot chose domains from different blocks",
        (
            _g("b1-r1-x1", 14, 25),
            _g("b1-r1-x2", 11, 25),
            _g("b2-r2-x3", 15, 25, block="b2", rack="r2"),
            _g("b2-r2-x4", 10, 25, block="b2", rack="r2"),
        ),
        TopologyRequest(preferred=RACK, slice_size=1),
        25,
        (("x1", 14), ("x2", 11)),
    ),
    _case(
        "balanced placement; select correct block; prefer blocks with single rack; with slices",
        (
            _g("b1-r1-x1", 15, 25),
            _g("b1-r2-x2", 15, 25, rack="r2"),
            _g("b1-r3-x3", 15, 25, rack="r3"),
            _g("b1-r3-x4", 15, 25, rack="r3"),
        ),
        preferred(RACK, slice_level=HOST, slice_size=5),
        25,
        (("x3", 15), ("x4", 10)),
        note="All four nodes are in block b1 in Kueue's case, despite its name.",
    ),
    _case(
        "balanced placement; four level topology; slice two levels below balanced level",
        _FOUR_LEVEL_NODES,
        preferred(SUBBLOCK, slice_level=HOST, slice_size=2),
        20,
        (("x3", 10), ("x4", 8), ("x5", 2)),
        levels=FOUR_LEVELS,
    ),
    _case(
        "balanced placement; four level topology; slice one level below balanced level",
        _FOUR_LEVEL_NODES,
        preferred(SUBBLOCK, slice_level=RACK, slice_size=2),
        20,
        (("x3", 10), ("x4", 3), ("x5", 7)),
        levels=FOUR_LEVELS,
    ),
    KueueCase(
        name="balanced placement; four level topology; balance on rack level; slice not on the lowest level",
        levels=(BLOCK, SUBBLOCK, RACK),
        nodes=(
            _g("b1-sb1-r1-x1", 18, 20, sub="sb1", rack="r1"),
            _g("b1-sb1-r2-x2", 8, 20, sub="sb1", rack="r2"),
            _g("b1-sb1-r3-x3", 15, 20, sub="sb2", rack="r3"),
            _g("b1-sb1-r3-x4", 15, 20, sub="sb2", rack="r4"),
        ),
        gates=BALANCED,
        podsets=(
            PodSetCase(
                count=20,
                requests=GPU1,
                topology=preferred(SUBBLOCK, slice_level=RACK, slice_size=2),
                want=on_domains((BLOCK, SUBBLOCK, RACK), (("b1", "sb2", "r3"), 10), (("b1", "sb2", "r4"), 10)),
            ),
        ),
    ),
    _case(
        "balanced placement; three level topology; balance on the same level as slice",
        (
            _g("b1-r1-x1", 15, 22),
            _g("b1-r1-x2", 13, 22),
            _g("b1-r1-x3", 10, 22),
            _g("b1-r2-x4", 20, 22, rack="r2"),
            _g("b1-r2-x5", 8, 22, rack="r2"),
        ),
        preferred(HOST, slice_level=HOST, slice_size=2),
        22,
        (("x2", 12), ("x3", 10)),
    ),
    _case(
        "balanced placement; three level topology; balance on the lowest level",
        (
            _g("b1-r1-x1", 20, 22),
            _g("b1-r1-x2", 8, 22),
            _g("b1-r2-x3", 15, 22, rack="r2"),
            _g("b1-r2-x4", 13, 22, rack="r2"),
            _g("b1-r2-x5", 10, 22, rack="r2"),
        ),
        preferred(HOST),
        22,
        (("x3", 11), ("x4", 11)),
    ),
    _lws(
        "balanced placement; leader worker set",
        (_g("b1-r1-x1", 20, 24), _g("b1-r1-x2", 15, 24), _g("b1-r1-x3", 12, 24)),
        (_grouped(RACK, slice_level=HOST), 1, (("x3", 1),)),
        (_grouped(RACK, slice_level=HOST, slice_size=5), 25, (("x2", 15), ("x3", 10))),
    ),
    _case(
        "balanced placement; prioritize (using entropy) balanced domains; second rack wins",
        (
            _g("b1-r1-x1", 10, 20),
            _g("b1-r1-x2", 5, 20),
            _g("b1-r2-x3", 5, 20, rack="r2"),
            _g("b1-r2-x4", 5, 20, rack="r2"),
            _g("b1-r2-x5", 5, 20, rack="r2"),
        ),
        preferred(RACK),
        15,
        (("x3", 5), ("x4", 5), ("x5", 5)),
    ),
    _case(
        "balanced placement; prioritize (using entropy) balanced domains; first rack wins",
        (
            _g("b1-r1-x1", 8, 24),
            _g("b1-r1-x2", 8, 24),
            _g("b1-r1-x3", 8, 24),
            _g("b1-r2-x4", 16, 24, rack="r2"),
            _g("b1-r2-x5", 8, 24, rack="r2"),
        ),
        preferred(RACK),
        24,
        (("x1", 8), ("x2", 8), ("x3", 8)),
    ),
    KueueCase(
        name="balanced placement; two level topology; balance on the highest level",
        levels=(RACK, HOST),
        nodes=tuple(
            node(f"{rack}-{host}", rack=rack, host=host, pods=22, extra={GPU: gpus})
            for rack, host, gpus in (
                ("r1", "x1", 21),
                ("r1", "x2", 9),
                ("r2", "x3", 11),
                ("r2", "x4", 10),
                ("r2", "x5", 10),
            )
        ),
        gates=BALANCED,
        podsets=(PodSetCase(count=23, requests=GPU1, topology=preferred(RACK), want=on_hosts(("x1", 12), ("x3", 11))),),
    ),
    _case(
        "balanced placement; select correct block taking into account pruning",
        (
            _g("b1-r1-x1", 5, 20),
            _g("b1-r1-x2", 5, 20),
            _g("b1-r2-x3", 5, 20, rack="r2"),
            _g("b1-r2-x4", 5, 20, rack="r2"),
            _g("b2-r3-x5", 10, 20, block="b2", rack="r3"),
            _g("b2-r3-x6", 4, 20, block="b2", rack="r3"),
            _g("b2-r3-x7", 4, 20, block="b2", rack="r3"),
            _g("b2-r3-x8", 4, 20, block="b2", rack="r3"),
            _g("b2-r4-x9", 5, 20, block="b2", rack="r4"),
            _g("b2-r5-x10", 5, 20, block="b2", rack="r5"),
        ),
        preferred(RACK),
        20,
        (("x1", 5), ("x2", 5), ("x3", 5), ("x4", 5)),
    ),
    _lws(
        "balanced placement; should not prune domain",
        (_g("b1-r1-x1", 6, 24), _g("b1-r1-x2", 5, 24)),
        (_grouped(RACK, slice_level=HOST), 1, (("x1", 1),)),
        (_grouped(RACK), 10, (("x1", 5), ("x2", 5))),
    ),
    _lws(
        "balanced placement; leader worker set does not reserve leader space on every node",
        (_g("b1-r1-x1", 7, 12), _g("b1-r1-x2", 5, 12)),
        (_grouped(RACK, slice_level=HOST), 1, (("x1", 1),)),
        (_grouped(RACK), 10, (("x1", 5), ("x2", 5))),
    ),
    _lws(
        "balanced placement; fallback to BestFit when leader worker set cannot meet threshold",
        (
            _g("b1-r1-x1", 3, 12),
            _g("b1-r2-x2", 3, 12, rack="r2"),
            _g("b1-r3-x3", 8, 12, rack="r3"),
            _g("b2-r1-x4", 11, 12, block="b2"),
        ),
        (_grouped(BLOCK, slice_level=HOST), 5, (("x3", 1),)),
        (_grouped(BLOCK), 7, (("x1", 3), ("x2", 1), ("x3", 3))),
    ),
    KueueCase(
        name="stable tie break on identical nodes: TASBalancedPlacement enabled",
        levels=THREE_LEVELS,
        nodes=(
            node("x2", block="b1", rack="r1", host="x2", cpu=1000, pods=10),
            node("x1", block="b1", rack="r1", host="x1", cpu=1000, pods=10),
        ),
        gates=BALANCED,
        podsets=(PodSetCase(count=1, requests={"cpu": 1000}, topology=required(HOST), want=on_hosts(("x1", 1))),),
    ),
    KueueCase(
        name="stable tie break on identical nodes: reversed order, TASBalancedPlacement enabled",
        levels=THREE_LEVELS,
        nodes=(
            node("x1", block="b1", rack="r1", host="x1", cpu=1000, pods=10),
            node("x2", block="b1", rack="r1", host="x2", cpu=1000, pods=10),
        ),
        gates=BALANCED,
        podsets=(PodSetCase(count=1, requests={"cpu": 1000}, topology=required(HOST), want=on_hosts(("x1", 1))),),
    ),
]

_INTERNAL = (
    "unit test of an internal balanced-placement function on hand-set domain states (no nodes, no "
    "PodSet); its result ({}) is not a placement"
)
_DOMAIN_SET = _INTERNAL.format("the chosen domain set")

NOT_TRANSCRIBED: dict[str, str] = {
    **{
        f"TestSelectOptimalDomainSetToFit: {n}": _DOMAIN_SET
        for n in (
            "no fit",
            "simple fit one domain",
            "perfect fit with two domains",
            "perfect fit with two domains 2",
            "best fit, single domain",
        )
    },
    **{
        f"TestSelectOptimalDomainSetToFitStableTieBreak: {n}": _DOMAIN_SET
        for n in ("balanced selection", "entropy-prioritized selection")
    },
    **{
        f"TestCompareDomainCapacityAndEntropy: {n}": _INTERNAL.format("a comparison of two domains")
        for n in (
            "tie-breaking on level values when capacity and entropy are equal",
            "capacity overrides entropy, and higher entropy overrides level values",
        )
    },
    **{
        f"TestPlaceSlicesOnDomainsBalanced: {n}": _INTERNAL.format("slices per pre-selected domain")
        for n in (
            "simple balanced placement on two domains",
            "simple placement on three domains",
            "find smallest domain that fits",
            "correctly select domains",
        )
    },
    "TestPlaceSlicesOnDomainsBalancedStableTieBreak": _INTERNAL.format("slices per pre-selected domain"),
    "TestPruneDomainsBelowThreshold: keeps worker only domain": _INTERNAL.format("the pruned domain list"),
    "TestPruneDomainsBelowThresholdPreservesAffinityScore": _INTERNAL.format("an affinity score kept by pruning"),
    **{
        f"TestFindBestDomainsForBalancedPlacement: {n}": _INTERNAL.format("a threshold and a domain count")
        for n in ("falls back after pruning", "rejects after fallback")
    },
}
