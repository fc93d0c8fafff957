"""Kueue ``TestFindTopologyAssignments`` cases that our engine API can express.

Transcribed from kubernetes-sigs/kueue ``pkg/cache/scheduler/tas_cache_test.go``
(stored version, commit ``009736297a53a19dee0a1e9186fdbbc3948504e9``). Names are
Kueue's, so a failure can be traced back to the original case. Cases that need
groups, multi-layer slices, node replacement, elastic slices, a non-default feature
gate or overlapping flavors are in ``tests/kueue_cases/advanced_*.py`` (see
``tests/kueue_cases/test_placement.py``).

Harness facts mirrored here:
* the Topology is always named ``default``;
* a PodSet without a topology request is marked ``Implied`` (unconstrained);
* pods without ``nodeName`` and terminated pods (Succeeded/Failed) do not count,
  so they are simply left out of ``non_tas_pods``;
* ``priorOwnUsage`` / ``priorFlavorUsage`` (usage of admitted TAS workloads of the
  same flavor, or of a sibling flavor sharing hostnames) become ``tas_usage``.
"""

from __future__ import annotations

from kueue_tas.topology.model import Taint, Toleration

from .model import (
    BLOCK,
    GI,
    GPU,
    HOST,
    ONE_LEVEL,
    RACK,
    THREE_LEVELS,
    TWO_LEVELS,
    ZONE,
    KueueCase,
    PodSetCase,
    UsageCase,
    node,
    on_domains,
    on_hosts,
    preferred,
    required,
    slices_only,
    unconstrained,
)

CPU1 = {"cpu": 1000}

#      b1                   b2
#   /      \             /      \
#  r1       r2          r1       r2
#  |      /  |  \       |         |
#  x3    x5  x1  x6     x2       x4
DEFAULT_NODES = (
    node("b1-r1-x3", block="b1", rack="r1", host="x3", cpu=1000, memory=GI, pods=10),
    node("b1-r2-x5", block="b1", rack="r2", host="x5", cpu=1000, memory=GI, pods=10),
    node("b1-r2-x1", block="b1", rack="r2", host="x1", cpu=1000, memory=GI, pods=10),
    node("b1-r2-x6", block="b1", rack="r2", host="x6", cpu=1000, memory=GI, pods=10),
    # Kueue's node name says r2 but its rack label is r1.
    node("b2-r2-x2", block="b2", rack="r1", host="x2", cpu=1000, memory=GI, pods=10),
    node("b2-r2-x4", block="b2", rack="r2", host="x4", cpu=2000, memory=4 * GI, pods=40),
)

#       b1           b2
#       |             |
#       r1           r1
#     /  |  \       /  \
#   x3  x5  x1     x6  x2
SCATTERED_NODES = (
    node("b1-r1-x3", block="b1", rack="r1", host="x3", cpu=4000, memory=GI, pods=10),
    node("b1-r1-x5", block="b1", rack="r1", host="x5", cpu=1000, memory=GI, pods=10),
    node("b1-r1-x1", block="b1", rack="r1", host="x1", cpu=1000, memory=GI, pods=10),
    node("b2-r1-x6", block="b2", rack="r1", host="x6", cpu=2000, memory=GI, pods=10),
    node("b2-r1-x2", block="b2", rack="r1", host="x2", cpu=1000, memory=GI, pods=10),
)

#     b1                b2
#    /     \           /     \
#  r1      r2        r1      r2
#  |    /  |  \      |        |
# x3  x5  x1  x6    x2       x4
MULTIPOD_NODES = (
    node("b1-r1-x3", block="b1", rack="r1", host="x3", cpu=10000, memory=GI, pods=10),
    node("b1-r2-x5", block="b1", rack="r2", host="x5", cpu=10000, memory=GI, pods=10),
    node("b1-r2-x1", block="b1", rack="r2", host="x1", cpu=10000, memory=GI, pods=10),
    node("b1-r2-x6", block="b1", rack="r2", host="x6", cpu=10000, memory=GI, pods=10),
    node("b2-r1-x2", block="b2", rack="r1", host="x2", cpu=10000, memory=GI, pods=10),
    node("b2-r2-x4", block="b2", rack="r2", host="x4", cpu=20000, memory=4 * GI, pods=40),
)

#           b1                    b2
#       /        \             /      \
#      r1         r2          r1       r2
#     /  \      /   \        /   \    /   \
#    x3   x5   x1    x6     x2   x4  x7    x8
BINARY_TREES_NODES = (
    node("b1-r1-x3", block="b1", rack="r1", host="x3", cpu=1000, memory=GI, pods=10),
    node("b1-r1-x5", block="b1", rack="r1", host="x5", cpu=1000, memory=GI, pods=10),
    node("b1-r2-x1", block="b1", rack="r2", host="x1", cpu=1000, memory=GI, pods=10),
    node("b1-r2-x6", block="b1", rack="r2", host="x6", cpu=1000, memory=GI, pods=10),
    node("b2-r1-x2", block="b2", rack="r1", host="x2", cpu=1000, memory=GI, pods=10),
    node("b2-r1-x4", block="b2", rack="r1", host="x4", cpu=1000, memory=GI, pods=10),
    node("b2-r2-x7", block="b2", rack="r2", host="x7", cpu=1000, memory=GI, pods=10),
    node("b2-r2-x8", block="b2", rack="r2", host="x8", cpu=1000, memory=GI, pods=10),
)

# x1 NotReady, x2 Ready; hostname-only topology (the "marked workload" cases).
_NOT_READY_X1_READY_X2 = (
    node("x1", host="x1", cpu=1000, pods=10, ready=False),
    node("x2", host="x2", cpu=1000, pods=10),
)


def _b1_r1(*hosts: tuple[str, int]) -> tuple:
    """Hosts ``(name, cpu cores)`` all in block b1 / rack r1, 10 pods each."""
    return tuple(node(f"b1-r1-{h}", block="b1", rack="r1", host=h, cpu=cores * 1000, pods=10) for h, cores in hosts)


CASES: tuple[KueueCase, ...] = (
    # --- fresh placement for a workload that only carries unhealthy-node marks ---
    KueueCase(
        name="marked workload without admission gets fresh placement",
        levels=ONE_LEVEL,
        nodes=_NOT_READY_X1_READY_X2,
        podsets=(PodSetCase(count=1, requests=CPU1, topology=required(HOST), want=on_hosts(("x2", 1))),),
        note="Kueue passes a workload with unhealthyNodes=[x1] but no admission: plain placement.",
    ),
    KueueCase(
        name="marked workload without admission fails with a reason when there is no room",
        levels=ONE_LEVEL,
        nodes=_NOT_READY_X1_READY_X2,
        podsets=(
            PodSetCase(
                count=2,
                requests=CPU1,
                topology=required(HOST),
                reason='topology "default" allows to fit only 1 out of 2 pod(s)',
            ),
        ),
    ),
    # --- BestFit basics ---
    KueueCase(
        name="minimize the number of used racks before optimizing the number of nodes; BestFit",
        levels=THREE_LEVELS,
        nodes=(
            node("b1-r1-x3", block="b1", rack="r1", host="x3", cpu=2000, pods=10),
            node("b1-r2-x5", block="b1", rack="r2", host="x5", cpu=2000, pods=20),
            node("b1-r3-x1", block="b1", rack="r3", host="x1", cpu=1000, pods=10),
            node("b1-r3-x6", block="b1", rack="r3", host="x6", cpu=1000, pods=10),
            node("b1-r3-x2", block="b1", rack="r3", host="x2", cpu=1000, pods=10),
            node("b1-r3-x4", block="b1", rack="r3", host="x4", cpu=1000, pods=10),
        ),
        podsets=(
            PodSetCase(
                count=4,
                requests=CPU1,
                topology=required(BLOCK),
                want=on_hosts(("x1", 1), ("x2", 1), ("x4", 1), ("x6", 1)),
            ),
        ),
    ),
    KueueCase(
        name="choose the node that can accommodate all Pods",
        levels=THREE_LEVELS,
        nodes=_b1_r1(("x3", 2), ("x5", 1), ("x1", 1)),
        podsets=(PodSetCase(count=2, requests=CPU1, topology=required(BLOCK), want=on_hosts(("x3", 2))),),
    ),
    KueueCase(
        name=(
            "no annotation; implied default to unconstrained; 6 pods fit into hosts scattered across the "
            "whole datacenter even they could fit into single rack; BestFit"
        ),
        levels=THREE_LEVELS,
        nodes=SCATTERED_NODES,
        podsets=(
            PodSetCase(
                count=6,
                requests=CPU1,
                topology=None,
                want=on_hosts(("x1", 1), ("x3", 1), ("x5", 1), ("x2", 1), ("x6", 2)),
            ),
        ),
    ),
    KueueCase(
        name=(
            "unconstrained; 6 pods fit into hosts scattered across the whole datacenter even they could "
            "fit into single rack; BestFit"
        ),
        levels=THREE_LEVELS,
        nodes=SCATTERED_NODES,
        podsets=(
            PodSetCase(
                count=6,
                requests=CPU1,
                topology=unconstrained(),
                want=on_hosts(("x1", 1), ("x3", 1), ("x5", 1), ("x2", 1), ("x6", 2)),
            ),
        ),
    ),
    KueueCase(
        name="unconstrained; a single pod fits into each host; BestFit",
        levels=THREE_LEVELS,
        nodes=DEFAULT_NODES,
        podsets=(PodSetCase(count=1, requests=CPU1, topology=unconstrained(), want=on_hosts(("x3", 1))),),
    ),
    KueueCase(
        name="unconstrained; a single pod fits into each host; LeastFreeCapacity; TASProfileMixed",
        levels=THREE_LEVELS,
        nodes=DEFAULT_NODES,
        podsets=(PodSetCase(count=1, requests=CPU1, topology=unconstrained(), want=on_hosts(("x3", 1))),),
    ),
    KueueCase(
        name="block required; 4 pods fit into one host each; BestFit",
        levels=THREE_LEVELS,
        nodes=BINARY_TREES_NODES,
        podsets=(
            PodSetCase(
                count=4,
                requests=CPU1,
                topology=required(BLOCK),
                want=on_hosts(("x3", 1), ("x5", 1), ("x1", 1), ("x6", 1)),
            ),
        ),
    ),
    KueueCase(
        name="host required; single Pod fits in the host; BestFit",
        levels=THREE_LEVELS,
        nodes=DEFAULT_NODES,
        podsets=(PodSetCase(count=1, requests=CPU1, topology=required(HOST), want=on_hosts(("x3", 1))),),
    ),
    KueueCase(
        name="host required; single Pod fits in the host; BestFit; TASProfileMixed",
        levels=THREE_LEVELS,
        nodes=DEFAULT_NODES,
        podsets=(PodSetCase(count=1, requests=CPU1, topology=required(HOST), want=on_hosts(("x3", 1))),),
    ),
    KueueCase(
        # Despite its name, Kueue's case uses a *required* hostname request.
        name="host preferred; single Pod fits in the host; BestFit; TASProfileMixed",
        levels=THREE_LEVELS,
        nodes=DEFAULT_NODES,
        podsets=(PodSetCase(count=1, requests=CPU1, topology=required(HOST), want=on_hosts(("x3", 1))),),
    ),
    KueueCase(
        name="rack required; single Pod fits in a rack; BestFit",
        levels=TWO_LEVELS,
        nodes=DEFAULT_NODES,
        podsets=(
            PodSetCase(
                count=1,
                requests=CPU1,
                topology=required(RACK),
                want=on_domains(TWO_LEVELS, (("b1", "r1"), 1)),
            ),
        ),
    ),
    KueueCase(
        name="rack required; multiple Pods fit in a rack; BestFit",
        levels=TWO_LEVELS,
        nodes=DEFAULT_NODES,
        podsets=(
            PodSetCase(
                count=3,
                requests=CPU1,
                topology=required(RACK),
                want=on_domains(TWO_LEVELS, (("b1", "r2"), 3)),
            ),
        ),
    ),
    KueueCase(
        name="block preferred; Pods fit in 2 blocks; BestFit",
        levels=(BLOCK,),
        nodes=(
            node("b1", block="b1", cpu=2000, pods=20),
            node("b2", block="b2", cpu=1000, pods=10),
            node("b3", block="b3", cpu=4000, pods=40),
        ),
        podsets=(
            PodSetCase(
                count=5,
                requests=CPU1,
                topology=preferred(BLOCK),
                want=on_domains((BLOCK,), (("b2",), 1), (("b3",), 4)),
            ),
        ),
    ),
    KueueCase(
        name="rack required; multiple Pods fit in some racks; BestFit",
        levels=TWO_LEVELS,
        nodes=DEFAULT_NODES,
        podsets=(
            PodSetCase(
                count=2,
                requests=CPU1,
                topology=required(RACK),
                want=on_domains(TWO_LEVELS, (("b2", "r2"), 2)),
            ),
        ),
    ),
    KueueCase(
        name="rack required; too many pods to fit in any rack; BestFit",
        levels=TWO_LEVELS,
        nodes=DEFAULT_NODES,
        podsets=(
            PodSetCase(
                count=4,
                requests=CPU1,
                topology=required(RACK),
                reason='topology "default" allows to fit only 3 out of 4 pod(s)',
            ),
        ),
    ),
    KueueCase(
        name="block required; single Pod fits in a block and a single rack; BestFit",
        levels=TWO_LEVELS,
        nodes=DEFAULT_NODES,
        podsets=(
            PodSetCase(
                count=1,
                requests=CPU1,
                topology=required(BLOCK),
                want=on_domains(TWO_LEVELS, (("b2", "r1"), 1)),
            ),
        ),
    ),
    KueueCase(
        name="block required; single Pod fits in a block spread across two racks; BestFit",
        levels=TWO_LEVELS,
        nodes=DEFAULT_NODES,
        podsets=(
            PodSetCase(
                count=4,
                requests=CPU1,
                topology=required(BLOCK),
                want=on_domains(TWO_LEVELS, (("b1", "r1"), 1), (("b1", "r2"), 3)),
            ),
        ),
    ),
    KueueCase(
        name="block required; Pods fit in a block spread across two racks; BestFit",
        levels=TWO_LEVELS,
        nodes=DEFAULT_NODES,
        podsets=(
            PodSetCase(
                count=4,
                requests=CPU1,
                topology=required(BLOCK),
                want=on_domains(TWO_LEVELS, (("b1", "r1"), 1), (("b1", "r2"), 3)),
            ),
        ),
    ),
    KueueCase(
        name="block required; single Pod which cannot be split; BestFit",
        levels=TWO_LEVELS,
        nodes=DEFAULT_NODES,
        podsets=(
            PodSetCase(
                count=1,
                requests={"cpu": 4000},
                topology=required(BLOCK),
                reason=(
                    'topology "default" doesn\'t allow to fit any of 1 pod(s). '
                    'Total nodes: 4; excluded: resource "cpu": 4'
                ),
            ),
        ),
        note="Non-hostname topology: 'Total nodes' counts the 4 rack leaves, not the 6 nodes.",
    ),
    KueueCase(
        name="block required; too many Pods to fit requested; BestFit",
        levels=TWO_LEVELS,
        nodes=DEFAULT_NODES,
        podsets=(
            PodSetCase(
                count=5,
                requests=CPU1,
                topology=required(BLOCK),
                reason='topology "default" allows to fit only 4 out of 5 pod(s)',
            ),
        ),
    ),
    KueueCase(
        name="rack required; single Pod requiring memory; BestFit",
        levels=TWO_LEVELS,
        nodes=DEFAULT_NODES,
        podsets=(
            PodSetCase(
                count=4,
                requests={"memory": 1024},
                topology=required(RACK),
                want=on_domains(TWO_LEVELS, (("b1", "r1"), 4)),
            ),
        ),
    ),
    KueueCase(
        name="rack preferred; but only block can accommodate the workload; BestFit",
        levels=TWO_LEVELS,
        nodes=DEFAULT_NODES,
        podsets=(
            PodSetCase(
                count=4,
                requests=CPU1,
                topology=preferred(RACK),
                want=on_domains(TWO_LEVELS, (("b1", "r1"), 1), (("b1", "r2"), 3)),
            ),
        ),
    ),
    KueueCase(
        name="rack preferred; but only multiple blocks can accommodate the workload; BestFit",
        levels=TWO_LEVELS,
        nodes=DEFAULT_NODES,
        podsets=(
            PodSetCase(
                count=6,
                requests=CPU1,
                topology=preferred(RACK),
                want=on_domains(TWO_LEVELS, (("b1", "r1"), 1), (("b1", "r2"), 3), (("b2", "r2"), 2)),
            ),
        ),
    ),
    KueueCase(
        name="block preferred; but only multiple blocks can accommodate the workload; BestFit",
        levels=TWO_LEVELS,
        nodes=DEFAULT_NODES,
        podsets=(
            PodSetCase(
                count=6,
                requests=CPU1,
                topology=preferred(BLOCK),
                want=on_domains(TWO_LEVELS, (("b1", "r1"), 1), (("b1", "r2"), 3), (("b2", "r2"), 2)),
            ),
        ),
    ),
    KueueCase(
        name="block preferred; but the workload cannot be accommodate in entire topology; BestFit",
        levels=TWO_LEVELS,
        nodes=DEFAULT_NODES,
        podsets=(
            PodSetCase(
                count=10,
                requests=CPU1,
                topology=preferred(BLOCK),
                reason='topology "default" allows to fit only 7 out of 10 pod(s)',
            ),
        ),
    ),
    # --- which nodes count ---
    KueueCase(
        name="only nodes with matching labels are considered; no matching node; BestFit",
        levels=ONE_LEVEL,
        nodes=(node("b1-r1-x3", host="x3", labels={ZONE: "zone-a"}, cpu=1000, memory=GI, pods=10),),
        node_labels={ZONE: "zone-b"},
        podsets=(
            PodSetCase(
                count=1,
                requests=CPU1,
                topology=required(HOST),
                reason="no topology domains at level: kubernetes.io/hostname",
            ),
        ),
        note="Kueue's node has no Ready condition set; the flavor label mismatch excludes it either way.",
    ),
    KueueCase(
        name="only nodes with matching labels are considered; matching node is found; BestFit",
        levels=ONE_LEVEL,
        nodes=(node("b1-r1-x3", host="x3", labels={ZONE: "zone-a"}, cpu=1000, memory=GI, pods=10),),
        node_labels={ZONE: "zone-a"},
        podsets=(PodSetCase(count=1, requests=CPU1, topology=required(HOST), want=on_hosts(("x3", 1))),),
    ),
    KueueCase(
        name="only nodes with matching levels are considered; no host label on node; BestFit",
        levels=THREE_LEVELS,
        nodes=(node("b1-r1-x3", block="b1", rack="r1", cpu=1000, memory=GI, pods=10),),
        podsets=(
            PodSetCase(
                count=1,
                requests=CPU1,
                topology=required(RACK),
                reason="no topology domains at level: cloud.com/topology-rack",
            ),
        ),
        note="The message names the requested level (rack), not the lowest level.",
    ),
    KueueCase(
        name="don't consider unscheduled Pods when computing capacity; BestFit",
        levels=ONE_LEVEL,
        nodes=(node("x3", host="x3", cpu=1000, memory=GI, pods=10),),
        # Kueue's pod (600m) has no nodeName: it does not count, so it is not listed.
        podsets=(PodSetCase(count=1, requests={"cpu": 600}, topology=required(HOST), want=on_hosts(("x3", 1))),),
    ),
    KueueCase(
        name="don't consider terminal pods when computing the capacity; BestFit",
        levels=ONE_LEVEL,
        nodes=(node("x3", host="x3", cpu=1000, memory=GI, pods=10),),
        # Kueue's two pods on x3 (600m each) are Failed / Succeeded: they do not count.
        podsets=(PodSetCase(count=1, requests={"cpu": 600}, topology=required(HOST), want=on_hosts(("x3", 1))),),
    ),
    KueueCase(
        name="include usage from pending scheduled non-TAS pods, blocked assignment; BestFit",
        levels=ONE_LEVEL,
        nodes=(node("x3", host="x3", cpu=1000, memory=GI, pods=10),),
        non_tas_pods=(("x3", {"cpu": 600, "pods": 1}),),
        podsets=(
            PodSetCase(
                count=1,
                requests={"cpu": 600},
                topology=required(HOST),
                reason=(
                    'topology "default" doesn\'t allow to fit any of 1 pod(s). '
                    'Total nodes: 1; excluded: resource "cpu": 1'
                ),
            ),
        ),
    ),
    KueueCase(
        name="include usage from running non-TAS pods, blocked assignment; BestFit",
        levels=ONE_LEVEL,
        nodes=(node("x3", host="x3", cpu=1000, memory=GI, pods=10),),
        non_tas_pods=(("x3", {"cpu": 600, "pods": 1}),),
        podsets=(
            PodSetCase(
                count=1,
                requests={"cpu": 600},
                topology=required(HOST),
                reason=(
                    'topology "default" doesn\'t allow to fit any of 1 pod(s). '
                    'Total nodes: 1; excluded: resource "cpu": 1'
                ),
            ),
        ),
    ),
    KueueCase(
        name="node allocatable capacity completely used by non-TAS pod; empty remainingCapacity",
        levels=ONE_LEVEL,
        nodes=(node("x3", host="x3", cpu=1000, pods=1),),
        non_tas_pods=(("x3", {"cpu": 1000, "pods": 1}),),
        podsets=(
            PodSetCase(
                count=1,
                requests={"cpu": 100},
                topology=required(HOST),
                reason=(
                    'topology "default" doesn\'t allow to fit any of 1 pod(s). '
                    'Total nodes: 1; excluded: resource "cpu": 1'
                ),
            ),
        ),
        note="cpu and pods both fit 0; the tie goes to the alphabetically smaller name (cpu).",
    ),
    KueueCase(
        name="include usage from non-TAS pods; pod usage",
        levels=ONE_LEVEL,
        nodes=(node("x3", host="x3", pods=10),),
        non_tas_pods=(("x3", {"pods": 1}), ("x3", {"pods": 1})),
        podsets=(
            PodSetCase(
                count=9,
                requests={"cpu": 0},
                topology=required(HOST),
                reason='topology "default" allows to fit only 8 out of 9 pod(s)',
            ),
        ),
        note="A zero cpu request is ignored; each non-TAS pod takes one pod slot.",
    ),
    KueueCase(
        name="include usage from running non-TAS pods, found free capacity on another node; BestFit",
        levels=ONE_LEVEL,
        nodes=(
            node("x3", host="x3", cpu=1000, memory=GI, pods=10),
            node("x5", host="x5", cpu=1000, memory=GI, pods=10),
        ),
        non_tas_pods=(("x3", {"cpu": 600, "pods": 1}),),
        podsets=(PodSetCase(count=1, requests={"cpu": 600}, topology=required(HOST), want=on_hosts(("x5", 1))),),
    ),
    KueueCase(
        name="no assignment as node is not ready; BestFit",
        levels=ONE_LEVEL,
        nodes=(node("b1-r1-x3", host="x3", labels={ZONE: "zone-a"}, cpu=1000, memory=GI, pods=10, ready=False),),
        node_labels={ZONE: "zone-a"},
        podsets=(
            PodSetCase(
                count=1,
                requests=CPU1,
                topology=required(HOST),
                reason="no topology domains at level: kubernetes.io/hostname",
            ),
        ),
    ),
    KueueCase(
        name="no assignment as node is unschedulable; BestFit",
        levels=ONE_LEVEL,
        nodes=(node("b1-r1-x3", host="x3", labels={ZONE: "zone-a"}, cpu=1000, memory=GI, pods=10, unschedulable=True),),
        node_labels={ZONE: "zone-a"},
        podsets=(
            PodSetCase(
                count=1,
                requests=CPU1,
                topology=required(HOST),
                reason="no topology domains at level: kubernetes.io/hostname",
            ),
        ),
    ),
    # --- node filters and exclusion statistics ---
    KueueCase(
        name="skip node which has untolerated taint; BestFit",
        levels=ONE_LEVEL,
        nodes=(
            node(
                "x3",
                host="x3",
                labels={ZONE: "zone-a"},
                cpu=1000,
                memory=GI,
                pods=10,
                taints=(Taint(key="example.com/gpu", value="present", effect="NoSchedule"),),
            ),
        ),
        node_labels={ZONE: "zone-a"},
        podsets=(
            PodSetCase(
                count=1,
                requests=CPU1,
                topology=required(HOST),
                reason=(
                    'topology "default" doesn\'t allow to fit any of 1 pod(s). '
                    'Total nodes: 1; excluded: taint "example.com/gpu=present:NoSchedule": 1'
                ),
            ),
        ),
    ),
    KueueCase(
        name="detailed failure message with exclusion stats",
        levels=ONE_LEVEL,
        nodes=(
            node(
                "x1",
                host="x1",
                cpu=1000,
                pods=10,
                taints=(Taint(key="key", value="value", effect="NoSchedule"),),
            ),
            node("x2", host="x2", labels={ZONE: "zone-b"}, cpu=1000, pods=10),
            node("x3", host="x3", labels={ZONE: "zone-b"}, cpu=2000, pods=10),
            node("x4", host="x4", labels={ZONE: "zone-a"}, cpu=100, pods=10),
        ),
        podsets=(
            PodSetCase(
                count=1,
                requests=CPU1,
                topology=required(HOST),
                node_selector={ZONE: "zone-a"},
                reason=(
                    'topology "default" doesn\'t allow to fit any of 1 pod(s). Total nodes: 4; excluded: '
                    'nodeSelector: 2, resource "cpu": 1, taint "key=value:NoSchedule": 1'
                ),
            ),
        ),
    ),
    KueueCase(
        name="resource exclusion picks most restrictive resource",
        levels=ONE_LEVEL,
        nodes=(node("dual-shortage", host="dual-shortage", cpu=500, pods=10, extra={GPU: 0}),),
        podsets=(
            PodSetCase(
                count=1,
                requests={"cpu": 1000, GPU: 1},
                topology=required(HOST),
                reason=(
                    'topology "default" doesn\'t allow to fit any of 1 pod(s). '
                    'Total nodes: 1; excluded: resource "cpu": 1'
                ),
            ),
        ),
    ),
    KueueCase(
        name="allow to schedule on node with tolerated taint; BestFit",
        levels=ONE_LEVEL,
        nodes=(
            node(
                "b1-r1-x3",
                host="x3",
                labels={ZONE: "zone-a"},
                cpu=1000,
                memory=GI,
                pods=10,
                taints=(Taint(key="example.com/gpu", value="present", effect="NoSchedule"),),
            ),
        ),
        node_labels={ZONE: "zone-a"},
        podsets=(
            PodSetCase(
                count=1,
                requests=CPU1,
                topology=required(HOST),
                tolerations=(Toleration(key="example.com/gpu", operator="Equal", value="present"),),
                want=on_hosts(("x3", 1)),
            ),
        ),
    ),
    KueueCase(
        name=("no assignment as node does not have enough allocatable pods (.status.allocatable['pods']); BestFit"),
        levels=ONE_LEVEL,
        nodes=(node("b1-r1-x3", host="x3", labels={ZONE: "zone-a"}, cpu=1000, pods=1),),
        node_labels={ZONE: "zone-a"},
        # The running non-TAS pod is bound by node *name* (b1-r1-x3), not by hostname.
        non_tas_pods=(("b1-r1-x3", {"cpu": 300, "pods": 1}),),
        podsets=(
            PodSetCase(
                count=1,
                requests={"cpu": 300},
                topology=required(HOST),
                reason=(
                    'topology "default" doesn\'t allow to fit any of 1 pod(s). '
                    'Total nodes: 1; excluded: resource "pods": 1'
                ),
            ),
        ),
    ),
    KueueCase(
        name="multiple PodSets account assumed pod usage against allocatable pods; BestFit",
        levels=ONE_LEVEL,
        nodes=(node("x1", host="x1", cpu=2000, pods=1),),
        podsets=(
            PodSetCase(name="one", count=1, requests=CPU1, topology=required(HOST), want=on_hosts(("x1", 1))),
            PodSetCase(
                name="two",
                count=1,
                requests=CPU1,
                topology=required(HOST),
                reason=(
                    'topology "default" doesn\'t allow to fit any of 1 pod(s). '
                    'Total nodes: 1; excluded: resource "pods": 1'
                ),
            ),
        ),
    ),
    KueueCase(
        name="skip node which doesn't match node selector, missing label; BestFit",
        levels=ONE_LEVEL,
        nodes=(node("x3", host="x3", labels={ZONE: "zone-a"}, cpu=1000, memory=GI, pods=10),),
        node_labels={ZONE: "zone-a"},
        podsets=(
            PodSetCase(
                count=1,
                requests={"cpu": 300},
                topology=required(HOST),
                node_selector={"custom-label-1": "custom-value-1"},
                reason=(
                    'topology "default" doesn\'t allow to fit any of 1 pod(s). '
                    "Total nodes: 1; excluded: nodeSelector: 1"
                ),
            ),
        ),
    ),
    KueueCase(
        name="skip node which doesn't match node selector, label exists, value doesn't match; BestFit",
        levels=ONE_LEVEL,
        nodes=(
            node(
                "x3",
                host="x3",
                labels={ZONE: "zone-a", "custom-label-1": "value-1"},
                cpu=1000,
                memory=GI,
                pods=10,
            ),
        ),
        node_labels={ZONE: "zone-a"},
        podsets=(
            PodSetCase(
                count=1,
                requests={"cpu": 300},
                topology=required(HOST),
                node_selector={"custom-label-1": "value-2"},
                reason=(
                    'topology "default" doesn\'t allow to fit any of 1 pod(s). '
                    "Total nodes: 1; excluded: nodeSelector: 1"
                ),
            ),
        ),
    ),
    KueueCase(
        name="allow to schedule on node which matches node; BestFit",
        levels=ONE_LEVEL,
        nodes=(
            node(
                "b1-r1-x3",
                host="x3",
                labels={ZONE: "zone-a", "custom-label-1": "value-1"},
                cpu=1000,
                memory=GI,
                pods=10,
            ),
            node(
                "b1-r1-x5",
                host="x5",
                labels={ZONE: "zone-a", "custom-label-1": "value-2"},
                cpu=1000,
                memory=GI,
                pods=10,
            ),
        ),
        node_labels={ZONE: "zone-a"},
        podsets=(
            PodSetCase(
                count=1,
                requests=CPU1,
                topology=required(HOST),
                node_selector={"custom-label-1": "value-2"},
                want=on_hosts(("x5", 1)),
            ),
        ),
    ),
    # --- two-level slices ---
    KueueCase(
        name="block required for podset; host required for slices; BestFit",
        levels=THREE_LEVELS,
        nodes=_b1_r1(("x3", 3), ("x5", 3), ("x1", 3)),
        podsets=(
            PodSetCase(
                count=6,
                requests=CPU1,
                topology=required(BLOCK, slice_level=HOST, slice_size=2),
                want=on_hosts(("x1", 2), ("x3", 2), ("x5", 2)),
            ),
        ),
    ),
    KueueCase(
        name=(
            "block required for podset; host required for slices; prioritize more free slice capacity "
            "first and then tight fit; BestFit"
        ),
        levels=THREE_LEVELS,
        nodes=_b1_r1(("x3", 6), ("x5", 5), ("x1", 4), ("x6", 2)),
        podsets=(
            PodSetCase(
                count=12,
                requests=CPU1,
                topology=required(BLOCK, slice_level=HOST, slice_size=2),
                want=on_hosts(("x1", 4), ("x3", 6), ("x6", 2)),
            ),
        ),
    ),
    KueueCase(
        name="block required for podset; host required for slices; select domains with tight fit; BestFit",
        levels=THREE_LEVELS,
        nodes=_b1_r1(("x3", 3), ("x5", 2), ("x1", 2)),
        podsets=(
            PodSetCase(
                count=4,
                requests=CPU1,
                topology=required(BLOCK, slice_level=HOST, slice_size=2),
                want=on_hosts(("x1", 2), ("x5", 2)),
            ),
        ),
    ),
    KueueCase(
        name="block required for podset; rack required for slices; BestFit",
        levels=THREE_LEVELS,
        nodes=(
            node("b1-r1-x3", block="b1", rack="r1", host="x3", cpu=1000, pods=10),
            node("b1-r1-x5", block="b1", rack="r1", host="x5", cpu=1000, pods=10),
            node("b1-r2-x1", block="b1", rack="r2", host="x1", cpu=1000, pods=10),
            node("b1-r2-x6", block="b1", rack="r2", host="x6", cpu=1000, pods=10),
            node("b1-r2-x2", block="b1", rack="r2", host="x2", cpu=1000, pods=10),
            node("b2-r1-x4", block="b2", rack="r1", host="x4", cpu=1000, pods=10),
            node("b2-r1-x7", block="b2", rack="r1", host="x7", cpu=1000, pods=10),
        ),
        podsets=(
            PodSetCase(
                count=4,
                requests=CPU1,
                topology=required(BLOCK, slice_level=RACK, slice_size=2),
                want=on_hosts(("x3", 1), ("x5", 1), ("x1", 1), ("x2", 1)),
            ),
        ),
    ),
    KueueCase(
        name="block preferred for podset; rack required for slices; BestFit",
        levels=THREE_LEVELS,
        nodes=DEFAULT_NODES,
        podsets=(
            PodSetCase(
                count=4,
                requests=CPU1,
                topology=preferred(BLOCK, slice_level=RACK, slice_size=2),
                want=on_hosts(("x1", 1), ("x5", 1), ("x4", 2)),
            ),
        ),
    ),
    KueueCase(
        name="block required for podset; host required for slices; optimize last domain; BestFit",
        levels=THREE_LEVELS,
        nodes=_b1_r1(("x3", 4), ("x5", 3), ("x1", 2)),
        podsets=(
            PodSetCase(
                count=6,
                requests=CPU1,
                topology=required(BLOCK, slice_level=HOST, slice_size=2),
                want=on_hosts(("x1", 2), ("x3", 4)),
            ),
        ),
    ),
    KueueCase(
        name=("block preferred for podset; host required for slices; 2 blocks with unbalanced subdomains; BestFit"),
        levels=THREE_LEVELS,
        nodes=(
            *_b1_r1(("x3", 3), ("x5", 3), ("x1", 3)),
            node("b2-r1-x6", block="b2", rack="r1", host="x6", cpu=6000, pods=10),
        ),
        podsets=(
            PodSetCase(
                count=12,
                requests=CPU1,
                topology=preferred(BLOCK, slice_level=HOST, slice_size=3),
                want=on_hosts(("x1", 3), ("x3", 3), ("x6", 6)),
            ),
        ),
    ),
    KueueCase(
        name=(
            "block required for podset; rack required for slices; podset fits in a block, but slices do "
            "not fit in racks"
        ),
        levels=THREE_LEVELS,
        nodes=(
            node("b1-r1-x3", block="b1", rack="r1", host="x3", cpu=2000, pods=10),
            node("b1-r2-x5", block="b1", rack="r2", host="x5", cpu=2000, pods=10),
            node("b1-r3-x1", block="b1", rack="r3", host="x1", cpu=2000, pods=10),
        ),
        podsets=(
            PodSetCase(
                count=6,
                requests=CPU1,
                topology=required(BLOCK, slice_level=RACK, slice_size=3),
                reason='topology "default" doesn\'t allow to fit any of 2 slice(s)',
            ),
        ),
    ),
    KueueCase(
        name="block required for podset; rack required for slices; only 1 out of 2 slices fit the topology",
        levels=THREE_LEVELS,
        nodes=(
            node("b1-r1-x3", block="b1", rack="r1", host="x3", cpu=3000, pods=10),
            node("b1-r2-x5", block="b1", rack="r2", host="x5", cpu=1000, pods=10),
            node("b1-r3-x1", block="b1", rack="r3", host="x1", cpu=1000, pods=10),
            node("b1-r4-x6", block="b1", rack="r4", host="x6", cpu=1000, pods=10),
        ),
        podsets=(
            PodSetCase(
                count=6,
                requests=CPU1,
                topology=required(BLOCK, slice_level=RACK, slice_size=3),
                reason='topology "default" allows to fit only 1 out of 2 slice(s)',
            ),
        ),
    ),
    KueueCase(
        name=(
            "block required for podset; rack required for slices; podset fits in both blocks, but slices "
            "fit in only one block"
        ),
        levels=THREE_LEVELS,
        nodes=(
            node("b1-r1-x3", block="b1", rack="r1", host="x3", cpu=2000, pods=10),
            node("b1-r2-x5", block="b1", rack="r2", host="x5", cpu=2000, pods=10),
            node("b1-r3-x1", block="b1", rack="r3", host="x1", cpu=2000, pods=10),
            node("b2-r4-x6", block="b2", rack="r4", host="x6", cpu=3000, pods=10),
            node("b2-r5-x2", block="b2", rack="r5", host="x2", cpu=3000, pods=10),
        ),
        podsets=(
            PodSetCase(
                count=6,
                requests=CPU1,
                topology=required(BLOCK, slice_level=RACK, slice_size=3),
                # Output order is by full level path (b2/r4/x6 < b2/r5/x2), not by hostname.
                want=on_hosts(("x6", 3), ("x2", 3)),
            ),
        ),
    ),
    # --- request validation ---
    KueueCase(
        name="slice required topology level cannot be above the main required topology level",
        levels=THREE_LEVELS,
        nodes=DEFAULT_NODES,
        podsets=(
            PodSetCase(
                count=1,
                requests=CPU1,
                topology=required(HOST, slice_level=BLOCK, slice_size=1),
                reason=(
                    "podset slice topology cloud.com/topology-block is above the podset topology kubernetes.io/hostname"
                ),
            ),
        ),
    ),
    KueueCase(
        name="slice size is required when slice topology is requested",
        levels=THREE_LEVELS,
        nodes=DEFAULT_NODES,
        podsets=(
            PodSetCase(
                count=1,
                requests=CPU1,
                topology=required(BLOCK, slice_level=HOST, slice_size=None),
                reason="slice topology requested, but slice size not provided",
            ),
        ),
    ),
    KueueCase(
        name="cannot request not existing slice topology",
        levels=THREE_LEVELS,
        nodes=DEFAULT_NODES,
        podsets=(
            PodSetCase(
                count=1,
                requests=CPU1,
                topology=required(BLOCK, slice_level="not-existing-topology-level", slice_size=1),
                reason="no requested topology level for slices: not-existing-topology-level",
            ),
        ),
    ),
    # --- slice-only requests (unconstrained at the top, LeastFreeCapacity) ---
    KueueCase(
        name="no topology for podset; host required for slices; BestFit",
        levels=THREE_LEVELS,
        nodes=_b1_r1(("x3", 3), ("x5", 3), ("x1", 3)),
        podsets=(
            PodSetCase(
                count=6,
                requests=CPU1,
                topology=slices_only(HOST, 2),
                want=on_hosts(("x1", 2), ("x3", 2), ("x5", 2)),
            ),
        ),
    ),
    KueueCase(
        name="no topology for podset; host required for slices; multiple blocks; BestFit",
        levels=THREE_LEVELS,
        nodes=SCATTERED_NODES,
        podsets=(
            PodSetCase(
                count=6,
                requests=CPU1,
                topology=slices_only(HOST, 2),
                want=on_hosts(("x3", 4), ("x6", 2)),
            ),
        ),
    ),
    KueueCase(
        name="no topology for podset; rack required for slices; multiple blocks; BestFit",
        levels=THREE_LEVELS,
        nodes=DEFAULT_NODES,
        podsets=(
            PodSetCase(
                count=4,
                requests=CPU1,
                topology=slices_only(RACK, 2),
                want=on_hosts(("x1", 1), ("x5", 1), ("x4", 2)),
            ),
        ),
    ),
    # --- several PodSets of one workload (no group) ---
    KueueCase(
        name="find topology assignment for two podsets with overlapping domain",
        levels=(BLOCK,),
        nodes=(
            node("b1", block="b1", cpu=2000, pods=10),
            node("b2", block="b2", cpu=2000, pods=10),
            node("b3", block="b3", cpu=2000, pods=10),
        ),
        podsets=(
            PodSetCase(
                name="podset1",
                count=3,
                requests=CPU1,
                topology=preferred(BLOCK),
                want=on_domains((BLOCK,), (("b1",), 2), (("b2",), 1)),
            ),
            PodSetCase(
                name="podset2",
                count=3,
                requests=CPU1,
                topology=preferred(BLOCK),
                want=on_domains((BLOCK,), (("b2",), 1), (("b3",), 2)),
            ),
        ),
    ),
    KueueCase(
        name="multiple podsets: rack required for both, different resource requests; BestFit",
        levels=TWO_LEVELS,
        nodes=MULTIPOD_NODES,
        podsets=(
            PodSetCase(
                name="podset1",
                count=2,
                requests=CPU1,
                topology=required(RACK),
                want=on_domains(TWO_LEVELS, (("b1", "r1"), 2)),
            ),
            PodSetCase(
                name="podset2",
                count=1,
                requests={"memory": 1024},
                topology=required(RACK),
                want=on_domains(TWO_LEVELS, (("b1", "r1"), 1)),
            ),
        ),
    ),
    KueueCase(
        name="multiple podsets: block required for one, unconstrained for another; TASProfileMixed",
        levels=THREE_LEVELS,
        nodes=MULTIPOD_NODES,
        podsets=(
            PodSetCase(
                name="podset1",
                count=8,
                requests=CPU1,
                topology=required(BLOCK),
                want=on_hosts(("x2", 8)),
            ),
            PodSetCase(
                name="podset2",
                count=2,
                requests=CPU1,
                topology=unconstrained(),
                want=on_hosts(("x2", 2)),
            ),
        ),
    ),
    KueueCase(
        name="temporary state cleanup prevents leakage across PodSets",
        levels=ONE_LEVEL,
        nodes=(
            node("n1", host="x1", cpu=4000, memory=4 * GI, pods=10),
            node("n2", host="x2", cpu=4000, memory=4 * GI, pods=10),
        ),
        podsets=(
            PodSetCase(
                name="ps1",
                count=1,
                requests={"cpu": 1000, "memory": 1000},
                topology=None,
                want=on_hosts(("x1", 1)),
            ),
            PodSetCase(
                name="ps2",
                count=1,
                requests={"cpu": 1000, "memory": 1000},
                topology=None,
                node_selector={"never": "match"},
                reason=(
                    'topology "default" doesn\'t allow to fit any of 1 pod(s). '
                    "Total nodes: 2; excluded: nodeSelector: 2"
                ),
            ),
        ),
    ),
    # --- legacy two-level slice with the multi-layer gate off ---
    KueueCase(
        name="multi-layer topology: no feature gate; additional layers ignored",
        levels=THREE_LEVELS,
        nodes=(
            node("b1-r1-x1", block="b1", rack="r1", host="x1", cpu=1000, pods=10),
            node("b1-r1-x2", block="b1", rack="r1", host="x2", cpu=4000, pods=10),
            node("b1-r2-x3", block="b1", rack="r2", host="x3", cpu=3000, pods=10),
            node("b1-r2-x4", block="b1", rack="r2", host="x4", cpu=4000, pods=10),
        ),
        podsets=(
            PodSetCase(
                count=8,
                requests=CPU1,
                topology=required(BLOCK, slice_level=RACK, slice_size=4),
                # Inside each rack the smaller host is filled first: 1+3 and 3+1.
                want=on_hosts(("x1", 1), ("x2", 3), ("x3", 3), ("x4", 1)),
            ),
        ),
    ),
    # --- usage of admitted TAS workloads ---
    KueueCase(
        name="sibling-flavor usage on the shared hostname reduces remaining capacity",
        levels=(BLOCK, HOST),
        nodes=(
            node("b1-x1", block="b1", host="x1", cpu=1000, pods=10),
            node("b1-x2", block="b1", host="x2", cpu=1000, pods=10),
        ),
        node_labels={},
        tas_usage=(UsageCase(assignment=on_hosts(("x1", 1)), per_pod=CPU1),),
        podsets=(PodSetCase(count=1, requests=CPU1, topology=required(HOST), want=on_hosts(("x2", 1))),),
        note="Kueue's priorFlavorUsage (a sibling flavor sharing hostnames) becomes plain TAS usage.",
    ),
    KueueCase(
        name="non-hostname-leaf topology: nil aggregatedDomainUsages preserves per-flavor behavior",
        levels=TWO_LEVELS,
        nodes=DEFAULT_NODES,
        node_labels={},
        podsets=(
            PodSetCase(
                count=1,
                requests=CPU1,
                topology=required(RACK),
                want=on_domains(TWO_LEVELS, (("b1", "r1"), 1)),
            ),
        ),
    ),
    KueueCase(
        name=(
            "non-hostname-leaf topology: prior c.usage must be applied even when aggregatedDomainUsages "
            "is non-nil empty"
        ),
        levels=TWO_LEVELS,
        nodes=(
            node("b1-r1", block="b1", rack="r1", cpu=1000, pods=10),
            node("b1-r2", block="b1", rack="r2", cpu=1000, pods=10),
            node("b2-r1", block="b2", rack="r1", cpu=1000, pods=10),
            node("b2-r2", block="b2", rack="r2", cpu=1000, pods=10),
        ),
        node_labels={},
        tas_usage=(
            UsageCase(assignment=on_domains(TWO_LEVELS, (("b1", "r1"), 1)), per_pod=CPU1),
            UsageCase(assignment=on_domains(TWO_LEVELS, (("b1", "r2"), 1)), per_pod=CPU1),
        ),
        podsets=(
            PodSetCase(
                count=1,
                requests=CPU1,
                topology=required(RACK),
                want=on_domains(TWO_LEVELS, (("b2", "r1"), 1)),
            ),
        ),
    ),
    # --- stable tie break (node input order must not matter) ---
    KueueCase(
        name="stable tie break on identical nodes: TASBalancedPlacement disabled",
        levels=THREE_LEVELS,
        nodes=(
            node("x2", block="b1", rack="r1", host="x2", cpu=1000, pods=10),
            node("x1", block="b1", rack="r1", host="x1", cpu=1000, pods=10),
        ),
        podsets=(PodSetCase(count=1, requests=CPU1, topology=required(HOST), want=on_hosts(("x1", 1))),),
    ),
    KueueCase(
        name="stable tie break on identical nodes: reversed order, TASBalancedPlacement disabled",
        levels=THREE_LEVELS,
        nodes=(
            node("x1", block="b1", rack="r1", host="x1", cpu=1000, pods=10),
            node("x2", block="b1", rack="r1", host="x2", cpu=1000, pods=10),
        ),
        podsets=(PodSetCase(count=1, requests=CPU1, topology=required(HOST), want=on_hosts(("x1", 1))),),
    ),
)
