"""Kueue's multi-layer slice placement cases (TASMultiLayerTopology).

Transcribed from kubernetes-sigs/kueue ``pkg/cache/scheduler/tas_cache_test.go`` at
tag v0.19.2, ``TestFindTopologyAssignments``; names are Kueue's. Harness facts as in
``find_topology_assignments``: the Topology is named ``default``, a PodSet without a
topology request is implied, bound non-terminated pods become ``non_tas_pods``.
A PodSet's ``podSetGroupName`` is ``TopologyRequest.group``; Kueue's
``PodsetSliceRequiredTopologyConstraints`` are ``TopologyRequest.slice_layers``.
"""

from __future__ import annotations

from kueue_tas.topology.model import SliceLayer, TopologyRequest

from .model import AIZONE, BLOCK, DATACENTER, HOST, RACK, KueueCase, PodSetCase, node, on_domains, on_hosts

NVIDIA_GPU = "nvidia.com/gpu"
_GB200_RACKS = (
    ("aizone0", "block0", "r0"),
    ("aizone0", "block0", "r1"),
    ("aizone0", "block1", "r2"),
    ("aizone0", "block1", "r3"),
    ("aizone1", "block2", "r4"),
    ("aizone1", "block2", "r5"),
    ("aizone1", "block3", "r6"),
    ("aizone1", "block3", "r7"),
)

CASES: list[KueueCase] = [
    KueueCase(
        name="multi-layer topology: block required; rack slices of 4; host slices of 2; TASMultiLayerTopology",
        levels=(BLOCK, RACK, HOST),
        nodes=(
            node("b1-r1-x1", block="b1", rack="r1", host="x1", cpu=1000, pods=10),
            node("b1-r1-x2", block="b1", rack="r1", host="x2", cpu=4000, pods=10),
            node("b1-r2-x3", block="b1", rack="r2", host="x3", cpu=3000, pods=10),
            node("b1-r2-x4", block="b1", rack="r2", host="x4", cpu=4000, pods=10),
        ),
        podsets=(
            PodSetCase(
                count=8,
                requests={"cpu": 1000},
                topology=TopologyRequest(required=BLOCK, slice_layers=(SliceLayer(RACK, 4), SliceLayer(HOST, 2))),
                want=on_hosts(("x2", 4), ("x3", 2), ("x4", 2)),
            ),
        ),
        gates={"TASMultiLayerTopology": True},
    ),
    KueueCase(
        name="multi-layer topology: no feature gate; additional layers ignored",
        levels=(BLOCK, RACK, HOST),
        nodes=(
            node("b1-r1-x1", block="b1", rack="r1", host="x1", cpu=1000, pods=10),
            node("b1-r1-x2", block="b1", rack="r1", host="x2", cpu=4000, pods=10),
            node("b1-r2-x3", block="b1", rack="r2", host="x3", cpu=3000, pods=10),
            node("b1-r2-x4", block="b1", rack="r2", host="x4", cpu=4000, pods=10),
        ),
        podsets=(
            PodSetCase(
                count=8,
                requests={"cpu": 1000},
                topology=TopologyRequest(required=BLOCK, slice_level=RACK, slice_size=4),
                want=on_hosts(("x1", 1), ("x2", 3), ("x3", 3), ("x4", 1)),
            ),
        ),
    ),
    KueueCase(
        name=(
            "multi-layer topology: mimic a real-world GB200 cluster, with NVL36 arch (2GPUs/node); dc required; "
            "aizone slices of 48; rack slices of 16; TASMultiLayerTopology"
        ),
        levels=(DATACENTER, AIZONE, BLOCK, RACK),
        # 1 dc x 2 aizones x 2 blocks x 2 racks, 18 nodes of 2 GPUs per rack (built by a loop in Kueue).
        nodes=tuple(
            node(
                f"{block}-{rack}-{az}-n{i}",
                block=block,
                rack=rack,
                labels={DATACENTER: "dc0", AIZONE: az},
                pods=110,
                extra={NVIDIA_GPU: 2},
            )
            for az, block, rack in _GB200_RACKS
            for i in range(18)
        ),
        podsets=(
            PodSetCase(
                count=96,
                requests={NVIDIA_GPU: 2},
                topology=TopologyRequest(
                    required=DATACENTER, slice_layers=(SliceLayer(AIZONE, 48), SliceLayer(RACK, 16))
                ),
                want=on_domains(
                    (DATACENTER, AIZONE, BLOCK, RACK),
                    (("dc0", "aizone0", "block0", "r0"), 16),
                    (("dc0", "aizone0", "block0", "r1"), 16),
                    (("dc0", "aizone0", "block1", "r2"), 16),
                    (("dc0", "aizone1", "block2", "r4"), 16),
                    (("dc0", "aizone1", "block2", "r5"), 16),
                    (("dc0", "aizone1", "block3", "r6"), 16),
                ),
            ),
        ),
        gates={"TASMultiLayerTopology": True},
    ),
    KueueCase(
        name="multi-layer topology: host slice rounding makes rack slice impossible",
        levels=(BLOCK, RACK, HOST),
        nodes=(
            node("b1-r1-x1", block="b1", rack="r1", host="x1", cpu=3000, pods=10),
            node("b1-r1-x2", block="b1", rack="r1", host="x2", cpu=3000, pods=10),
            node("b1-r1-x3", block="b1", rack="r1", host="x3", cpu=0, pods=10),
        ),
        podsets=(
            PodSetCase(
                count=6,
                requests={"cpu": 1000},
                topology=TopologyRequest(required=BLOCK, slice_layers=(SliceLayer(RACK, 6), SliceLayer(HOST, 2))),
                reason=(
                    'topology "default" doesn\'t allow to fit; 0/1 slice(s) fit on level '
                    "cloud.com/topology-rack; 2/3 slice(s) fit on level kubernetes.io/hostname. Total nodes: 3; "
                    'excluded: resource "cpu": 1'
                ),
            ),
        ),
        gates={"TASMultiLayerTopology": True},
    ),
    KueueCase(
        name="multi-layer topology: small host kills rack slices despite enough total capacity",
        levels=(BLOCK, RACK, HOST),
        nodes=(
            node("b1-r1-x1", block="b1", rack="r1", host="x1", cpu=7000, pods=10),
            node("b1-r1-x2", block="b1", rack="r1", host="x2", cpu=4000, pods=10),
            node("b1-r2-x3", block="b1", rack="r2", host="x3", cpu=7000, pods=10),
            node("b1-r2-x4", block="b1", rack="r2", host="x4", cpu=3000, pods=10),
        ),
        podsets=(
            PodSetCase(
                count=16,
                requests={"cpu": 1000},
                topology=TopologyRequest(required=BLOCK, slice_layers=(SliceLayer(RACK, 8), SliceLayer(HOST, 4))),
                reason=(
                    'topology "default" doesn\'t allow to fit; 1/2 slice(s) fit on level '
                    "cloud.com/topology-rack; 3/4 slice(s) fit on level kubernetes.io/hostname"
                ),
            ),
        ),
        gates={"TASMultiLayerTopology": True},
    ),
    KueueCase(
        name="multi-layer topology: enough hostname slices but not enough rack slices",
        levels=(BLOCK, RACK, HOST),
        nodes=(
            node("b1-r1-x1", block="b1", rack="r1", host="x1", cpu=4000, pods=10),
            node("b1-r2-x2", block="b1", rack="r2", host="x2", cpu=4000, pods=10),
            node("b1-r3-x3", block="b1", rack="r3", host="x3", cpu=4000, pods=10),
        ),
        podsets=(
            PodSetCase(
                count=12,
                requests={"cpu": 1000},
                topology=TopologyRequest(required=BLOCK, slice_layers=(SliceLayer(RACK, 6), SliceLayer(HOST, 2))),
                reason=(
                    'topology "default" doesn\'t allow to fit; 0/2 slice(s) fit on level '
                    "cloud.com/topology-rack; 6/6 slice(s) fit on level kubernetes.io/hostname"
                ),
            ),
        ),
        gates={"TASMultiLayerTopology": True},
    ),
    KueueCase(
        name="multi-layer topology: 3-layer negative case with small hosts cascading up",
        levels=(DATACENTER, BLOCK, RACK, HOST),
        nodes=(
            node("dc1-b1-r1-x1", block="b1", rack="r1", host="x1", labels={DATACENTER: "dc1"}, cpu=4000, pods=10),
            node("dc1-b1-r1-x2", block="b1", rack="r1", host="x2", labels={DATACENTER: "dc1"}, cpu=4000, pods=10),
            node("dc1-b1-r2-x3", block="b1", rack="r2", host="x3", labels={DATACENTER: "dc1"}, cpu=4000, pods=10),
            node("dc1-b1-r2-x4", block="b1", rack="r2", host="x4", labels={DATACENTER: "dc1"}, cpu=4000, pods=10),
            node("dc1-b2-r3-x5", block="b2", rack="r3", host="x5", labels={DATACENTER: "dc1"}, cpu=4000, pods=10),
            node("dc1-b2-r3-x6", block="b2", rack="r3", host="x6", labels={DATACENTER: "dc1"}, cpu=4000, pods=10),
            node("dc1-b2-r4-x7", block="b2", rack="r4", host="x7", labels={DATACENTER: "dc1"}, cpu=1000, pods=10),
            node("dc1-b2-r4-x8", block="b2", rack="r4", host="x8", labels={DATACENTER: "dc1"}, cpu=1000, pods=10),
        ),
        podsets=(
            PodSetCase(
                count=24,
                requests={"cpu": 1000},
                topology=TopologyRequest(
                    required=DATACENTER, slice_layers=(SliceLayer(BLOCK, 12), SliceLayer(RACK, 6), SliceLayer(HOST, 3))
                ),
                reason=(
                    'topology "default" doesn\'t allow to fit; 1/2 slice(s) fit on level '
                    "cloud.com/topology-block; 3/4 slice(s) fit on level cloud.com/topology-rack; 6/8 slice(s) "
                    "fit on level kubernetes.io/hostname"
                ),
            ),
        ),
        gates={"TASMultiLayerTopology": True},
    ),
]

# Multi-layer cases of Kueue's tables that belong to other families.
# TestFindTopologyAssignmentsMultiLayerReplacement is transcribed in advanced_replacement
# (ids prefixed "multi-layer replacement: ").
NOT_TRANSCRIBED: dict[str, str] = {}
