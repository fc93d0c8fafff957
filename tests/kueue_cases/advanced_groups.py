"""Kueue's PodSet-group (leader + workers) placement cases.

Transcribed from kubernetes-sigs/kueue ``pkg/cache/scheduler/tas_cache_test.go`` at
tag v0.19.2, ``TestFindTopologyAssignments``; names are Kueue's. Harness facts as in
``find_topology_assignments``: the Topology is named ``default``, a PodSet without a
topology request is implied, bound non-terminated pods become ``non_tas_pods``.
A PodSet's ``podSetGroupName`` is ``TopologyRequest.group``; Kueue's
``PodsetSliceRequiredTopologyConstraints`` are ``TopologyRequest.slice_layers``.
"""

from __future__ import annotations

from kueue_tas.topology.model import TopologyRequest

from .model import BLOCK, GI, GPU, HOST, RACK, KueueCase, PodSetCase, node, on_domains, on_hosts

CASES: list[KueueCase] = [
    KueueCase(
        name="find topology assignment for two podsets with the same group",
        levels=(BLOCK,),
        nodes=(
            node("b1", block="b1", cpu=2000, memory=2 * GI, pods=10, extra={GPU: 2}),
            node("b2", block="b2", cpu=5000, pods=10, extra={GPU: 4}),
            node("b3", block="b3", cpu=2000, pods=10, extra={GPU: 2}),
        ),
        podsets=(
            PodSetCase(
                name="leader",
                count=1,
                requests={"cpu": 1000},
                topology=TopologyRequest(required=BLOCK, group="sameGroup"),
                want=on_domains((BLOCK,), (("b2",), 1)),
            ),
            PodSetCase(
                name="workers",
                count=4,
                requests={"cpu": 1000, GPU: 1},
                topology=TopologyRequest(required=BLOCK, group="sameGroup"),
                want=on_domains((BLOCK,), (("b2",), 4)),
            ),
        ),
    ),
    KueueCase(
        name="find topology assignment for grouped podsets preserves worker capacity when placing leader",
        levels=(RACK, HOST),
        nodes=(
            node("h1", rack="r1", host="h1", cpu=2000, pods=10),
            node("h2", rack="r1", host="h2", cpu=4000, pods=10),
            node("h3", rack="r1", host="h3", cpu=3000, pods=10),
        ),
        podsets=(
            PodSetCase(
                name="leader",
                count=1,
                requests={"cpu": 1000},
                topology=TopologyRequest(required=RACK, group="sameGroup"),
                want=on_hosts(("h3", 1)),
            ),
            PodSetCase(
                name="workers",
                count=4,
                requests={"cpu": 2000},
                topology=TopologyRequest(required=RACK, group="sameGroup"),
                want=on_hosts(("h1", 1), ("h2", 2), ("h3", 1)),
            ),
        ),
    ),
    KueueCase(
        name="find topology assignment for sliced grouped podsets preserves worker capacity when placing leader",
        levels=(RACK, HOST),
        nodes=(
            node("h1", rack="r1", host="h1", cpu=2000, pods=10),
            node("h2", rack="r1", host="h2", cpu=4000, pods=10),
            node("h3", rack="r1", host="h3", cpu=3000, pods=10),
        ),
        podsets=(
            PodSetCase(
                name="leader",
                count=1,
                requests={"cpu": 1000},
                topology=TopologyRequest(required=RACK, group="sameGroup"),
                want=on_hosts(("h3", 1)),
            ),
            PodSetCase(
                name="workers",
                count=8,
                requests={"cpu": 1000},
                topology=TopologyRequest(required=RACK, slice_level=HOST, slice_size=2, group="sameGroup"),
                want=on_hosts(("h1", 2), ("h2", 4), ("h3", 2)),
            ),
        ),
    ),
    KueueCase(
        name="find topology assignment for preferred grouped podsets preserves capacity across domains",
        levels=(HOST,),
        nodes=(
            node("h1", host="h1", cpu=8000, pods=10),
            node("h2", host="h2", cpu=3000, pods=10),
        ),
        podsets=(
            PodSetCase(
                name="leader",
                count=1,
                requests={"cpu": 1000},
                topology=TopologyRequest(preferred=HOST, group="sameGroup"),
                want=on_hosts(("h2", 1)),
            ),
            PodSetCase(
                name="workers",
                count=5,
                requests={"cpu": 2000},
                topology=TopologyRequest(preferred=HOST, group="sameGroup"),
                want=on_hosts(("h1", 4), ("h2", 1)),
            ),
        ),
    ),
    KueueCase(
        name=(
            "find topology assignment for unconstrained grouped podsets spreads leader and worker "
            "across domains with TASProfileMixed"
        ),
        levels=(HOST,),
        nodes=(
            node("h1", host="h1", cpu=1000, pods=10),
            node("h2", host="h2", pods=10, extra={GPU: 1}),
        ),
        podsets=(
            PodSetCase(
                name="leader",
                count=1,
                requests={"cpu": 1000},
                topology=TopologyRequest(unconstrained=True, group="sameGroup"),
                want=on_hosts(("h1", 1)),
            ),
            PodSetCase(
                name="workers",
                count=1,
                requests={GPU: 1},
                topology=TopologyRequest(unconstrained=True, group="sameGroup"),
                want=on_hosts(("h2", 1)),
            ),
        ),
        gates={"TASProfileMixed": True},
    ),
    KueueCase(
        name="find topology assignment for grouped podsets preserves leader below the slice level",
        levels=(RACK, HOST),
        nodes=(
            node("leader-host", rack="r1", host="leader-host", cpu=1000, pods=10),
            node("worker-host", rack="r1", host="worker-host", pods=10, extra={GPU: 1}),
        ),
        podsets=(
            PodSetCase(
                name="leader",
                count=1,
                requests={"cpu": 1000},
                topology=TopologyRequest(required=RACK, slice_level=RACK, slice_size=1, group="sameGroup"),
                want=on_hosts(("leader-host", 1)),
            ),
            PodSetCase(
                name="workers",
                count=1,
                requests={GPU: 1},
                topology=TopologyRequest(required=RACK, slice_level=RACK, slice_size=1, group="sameGroup"),
                want=on_hosts(("worker-host", 1)),
            ),
        ),
    ),
    KueueCase(
        name=(
            "find topology assignment for two podsets with the same group with domains that can tightly "
            "fit leader and workers"
        ),
        levels=(BLOCK,),
        nodes=(
            node("b1", block="b1", cpu=2000, pods=10, extra={GPU: 2}),
            node("b2", block="b2", cpu=8000, pods=10, extra={GPU: 8}),
            node("b3", block="b3", cpu=2000, pods=10, extra={GPU: 2}),
        ),
        podsets=(
            PodSetCase(
                name="leader",
                count=1,
                requests={"cpu": 1000},
                topology=TopologyRequest(required=BLOCK, group="sameGroup"),
                want=on_domains((BLOCK,), (("b2",), 1)),
            ),
            PodSetCase(
                name="workers",
                count=4,
                requests={"cpu": 1000, GPU: 2},
                topology=TopologyRequest(required=BLOCK, group="sameGroup"),
                want=on_domains((BLOCK,), (("b2",), 4)),
            ),
        ),
    ),
    KueueCase(
        name="find topology assignment for grouped podsets skips domain where only workers fit without leader",
        levels=(BLOCK, RACK, HOST),
        nodes=(
            node("small-used", block="b1", rack="small", host="small-used", cpu=2800, pods=10),
            node("small-free", block="b1", rack="small", host="small-free", cpu=2800, pods=10),
            node("large-free", block="b1", rack="large", host="large-free", cpu=6000, pods=10),
        ),
        podsets=(
            PodSetCase(
                name="leader",
                count=1,
                requests={"cpu": 2500},
                topology=TopologyRequest(required=RACK, group="sameGroup"),
                want=on_hosts(("large-free", 1)),
            ),
            PodSetCase(
                name="workers",
                count=1,
                requests={"cpu": 2500},
                topology=TopologyRequest(required=RACK, group="sameGroup"),
                want=on_hosts(("large-free", 1)),
            ),
        ),
        non_tas_pods=(("small-used", {"cpu": 2500, "pods": 1}),),
    ),
    KueueCase(
        name=(
            "find topology assignment for grouped podsets skips domain where mixed-size workers only fit without leader"
        ),
        levels=(BLOCK, RACK, HOST),
        nodes=(
            node("small-used", block="b1", rack="small", host="small-used", cpu=2800, pods=10),
            node("small-free", block="b1", rack="small", host="small-free", cpu=2800, pods=10),
            node("large-free", block="b1", rack="large", host="large-free", cpu=6000, pods=10),
        ),
        podsets=(
            PodSetCase(
                name="leader",
                count=1,
                requests={"cpu": 2500},
                topology=TopologyRequest(required=RACK, group="sameGroup"),
                want=on_hosts(("large-free", 1)),
            ),
            PodSetCase(
                name="workers",
                count=2,
                requests={"cpu": 500},
                topology=TopologyRequest(required=RACK, group="sameGroup"),
                want=on_hosts(("large-free", 2)),
            ),
        ),
        non_tas_pods=(("small-used", {"cpu": 2500, "pods": 1}),),
    ),
    KueueCase(
        name="find topology assignment for grouped podsets keeps tight domain when leader and workers fit together",
        levels=(BLOCK, RACK, HOST),
        nodes=(
            node("small-used", block="b1", rack="small", host="small-used", cpu=2800, pods=10),
            node("small-free", block="b1", rack="small", host="small-free", cpu=2800, pods=10),
            node("large-free", block="b1", rack="large", host="large-free", cpu=6000, pods=10),
        ),
        podsets=(
            PodSetCase(
                name="leader",
                count=1,
                requests={"cpu": 1000},
                topology=TopologyRequest(required=RACK, group="sameGroup"),
                want=on_hosts(("small-free", 1)),
            ),
            PodSetCase(
                name="workers",
                count=1,
                requests={"cpu": 1000},
                topology=TopologyRequest(required=RACK, group="sameGroup"),
                want=on_hosts(("small-free", 1)),
            ),
        ),
        non_tas_pods=(("small-used", {"cpu": 2500, "pods": 1}),),
    ),
    KueueCase(
        name="find topology assignment for two podsets with the same group - no fit",
        levels=(BLOCK,),
        nodes=(
            node("b1", block="b1", cpu=1000, pods=10, extra={GPU: 0}),
            node("b2", block="b2", cpu=4000, pods=10, extra={GPU: 4}),
        ),
        podsets=(
            PodSetCase(
                name="leader",
                count=1,
                requests={"cpu": 1000},
                topology=TopologyRequest(required=BLOCK, group="sameGroup"),
                reason=(
                    'topology "default" allows to fit only 4 out of 4 pod(s). Total nodes: 2; excluded: '
                    'resource "example.com/gpu": 1'
                ),
            ),
            PodSetCase(
                name="workers",
                count=4,
                requests={"cpu": 1000, GPU: 1},
                topology=TopologyRequest(required=BLOCK, group="sameGroup"),
                reason=(
                    'topology "default" allows to fit only 4 out of 4 pod(s). Total nodes: 2; excluded: '
                    'resource "example.com/gpu": 1'
                ),
            ),
        ),
    ),
    KueueCase(
        name=(
            "find topology assignment for two podsets with the same group - optimizes domain for both "
            "leader and workers"
        ),
        levels=(BLOCK,),
        nodes=(
            node("b1", block="b1", cpu=11000, pods=10, extra={GPU: 8}),
            node("b2", block="b2", cpu=4000, pods=10, extra={GPU: 4}),
        ),
        podsets=(
            PodSetCase(
                name="leader",
                count=1,
                requests={"cpu": 1000},
                topology=TopologyRequest(required=BLOCK, group="sameGroup"),
                want=on_domains((BLOCK,), (("b1",), 1)),
            ),
            PodSetCase(
                name="workers",
                count=4,
                requests={"cpu": 1000, GPU: 1},
                topology=TopologyRequest(required=BLOCK, group="sameGroup"),
                want=on_domains((BLOCK,), (("b1",), 4)),
            ),
        ),
    ),
    KueueCase(
        name="BestFit: podset group workers spread across hosts",
        levels=(BLOCK, RACK, HOST),
        nodes=(
            node("b1-r1-x1", block="b1", rack="r1", host="x1", cpu=20000, pods=10, extra={GPU: 4}),
            node("b1-r1-x2", block="b1", rack="r1", host="x2", cpu=20000, pods=10, extra={GPU: 2}),
            node("b1-r1-x3", block="b1", rack="r1", host="x3", cpu=20000, pods=10, extra={GPU: 2}),
            node("b1-r1-x4", block="b1", rack="r1", host="x4", cpu=20000, pods=10, extra={GPU: 2}),
        ),
        podsets=(
            PodSetCase(
                name="leader",
                count=1,
                requests={"cpu": 1000},
                topology=TopologyRequest(preferred=BLOCK, group="sameGroup"),
                want=on_hosts(("x1", 1)),
            ),
            PodSetCase(
                name="workers",
                count=6,
                requests={"cpu": 1000, GPU: 1},
                topology=TopologyRequest(preferred=BLOCK, slice_size=2, slice_level=HOST, group="sameGroup"),
                want=on_hosts(("x1", 4), ("x2", 2)),
            ),
        ),
    ),
    KueueCase(
        name="find topology assignment for two podsets with the same group - leader does not fit anywhere",
        levels=(BLOCK,),
        nodes=(
            node("b1", block="b1", cpu=4000, pods=10, extra={GPU: 4}),
            node("b2", block="b2", cpu=4000, pods=10, extra={GPU: 4}),
        ),
        podsets=(
            PodSetCase(
                name="leader",
                count=1,
                requests={"cpu": 10000},
                topology=TopologyRequest(required=BLOCK, group="sameGroup"),
                reason='topology "default" allows to fit only 4 out of 4 pod(s)',
            ),
            PodSetCase(
                name="workers",
                count=4,
                requests={"cpu": 1000, GPU: 1},
                topology=TopologyRequest(required=BLOCK, group="sameGroup"),
                reason='topology "default" allows to fit only 4 out of 4 pod(s)',
            ),
        ),
    ),
    KueueCase(
        name="find topology assignment for two podsets with the same group - multiple hosts",
        levels=(BLOCK, RACK, HOST),
        nodes=(
            node("b1-r1-x3", block="b1", rack="r1", host="x3", cpu=2000, pods=10, extra={GPU: 1}),
            node("b1-r1-x5", block="b1", rack="r1", host="x5", cpu=2000, pods=10, extra={GPU: 1}),
            node("b1-r1-x1", block="b1", rack="r1", host="x1", cpu=2000, pods=10, extra={GPU: 1}),
            node("b2-r4-x6", block="b2", rack="r4", host="x6", cpu=1000, pods=10, extra={GPU: 1}),
            node("b2-r5-x2", block="b2", rack="r5", host="x2", cpu=2000, pods=10, extra={GPU: 1}),
            node("b2-r6-x4", block="b2", rack="r6", host="x4", cpu=2000, pods=10, extra={GPU: 1}),
        ),
        podsets=(
            PodSetCase(
                name="leader",
                count=1,
                requests={"cpu": 2000},
                topology=TopologyRequest(required=BLOCK, group="sameGroup"),
                want=on_hosts(("x1", 1)),
            ),
            PodSetCase(
                name="workers",
                count=2,
                requests={"cpu": 1000, GPU: 1},
                topology=TopologyRequest(required=BLOCK, group="sameGroup"),
                want=on_hosts(("x3", 1), ("x5", 1)),
            ),
        ),
    ),
    KueueCase(
        name=(
            "find topology assignment for two podsets with the same group requesting same resources and "
            "nodes in the same rack"
        ),
        levels=(BLOCK, RACK, HOST),
        nodes=(
            node("b1-r1-x3", block="b1", rack="r1", host="x3", cpu=1000, pods=10, extra={GPU: 1}),
            node("b1-r1-x5", block="b1", rack="r1", host="x5", cpu=1000, pods=10, extra={GPU: 1}),
            node("b1-r2-x1", block="b1", rack="r2", host="x1", cpu=1000, pods=10, extra={GPU: 1}),
            node("b1-r2-x6", block="b1", rack="r2", host="x6", cpu=1000, pods=10, extra={GPU: 1}),
            node("b2-r3-x2", block="b2", rack="r3", host="x2", cpu=1000, pods=10, extra={GPU: 1}),
            node("b2-r3-x4", block="b2", rack="r3", host="x4", cpu=1000, pods=10, extra={GPU: 1}),
            node("b2-r4-x7", block="b2", rack="r4", host="x7", cpu=1000, pods=10, extra={GPU: 1}),
            node("b2-r4-x8", block="b2", rack="r4", host="x8", cpu=1000, pods=10, extra={GPU: 1}),
        ),
        podsets=(
            PodSetCase(
                name="leader",
                count=1,
                requests={"cpu": 1000, GPU: 1},
                topology=TopologyRequest(required=BLOCK, group="sameGroup"),
                want=on_hosts(("x3", 1)),
            ),
            PodSetCase(
                name="workers",
                count=2,
                requests={"cpu": 1000, GPU: 1},
                topology=TopologyRequest(required=BLOCK, group="sameGroup"),
                want=on_hosts(("x5", 1), ("x1", 1)),
            ),
        ),
    ),
    KueueCase(
        name="optimize the last domain for LWS using BestFit",
        levels=("cloud.com/topology-zone", RACK, HOST),
        nodes=(
            node(
                "dom1-node",
                rack="rack1",
                host="dom1-node",
                labels={"cloud.com/topology-zone": "dom1"},
                cpu=10000,
                memory=10 * GI,
                pods=10,
            ),
            node(
                "dom2-node",
                rack="rack2",
                host="dom2-node",
                labels={"cloud.com/topology-zone": "dom2"},
                cpu=6000,
                memory=10 * GI,
                pods=10,
            ),
        ),
        podsets=(
            PodSetCase(
                name="leader",
                count=1,
                requests={"cpu": 1000, "memory": GI},
                topology=TopologyRequest(
                    required="cloud.com/topology-zone", slice_level=RACK, slice_size=1, group="lws"
                ),
                want=on_hosts(("dom2-node", 1)),
            ),
            PodSetCase(
                name="workers",
                count=5,
                requests={"cpu": 1000, "memory": GI},
                topology=TopologyRequest(
                    required="cloud.com/topology-zone", slice_level=RACK, slice_size=1, group="lws"
                ),
                want=on_hosts(("dom2-node", 5)),
            ),
        ),
    ),
]

# Group cases of that table that belong to other families (transcribed there).
# Every group case of the table is transcribed; the balanced, elastic and preferred-affinity
# ones with a leader live in advanced_balanced, advanced_elastic and advanced_affinity.
NOT_TRANSCRIBED: dict[str, str] = {}
