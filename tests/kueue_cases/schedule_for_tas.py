"""Placement-only cases from Kueue's scheduler-level ``TestScheduleForTAS``.

Source: kubernetes-sigs/kueue ``pkg/scheduler/scheduler_tas_test.go`` (stored
version at commit ``03efb7f0df84659c34ff0100286eac6491e72836``). Those cases run
the whole scheduler (queues, quota, admission checks, events). Only the ones
whose outcome is decided by the placement of a single TAS flavor, with ample
quota, are transcribed here:

* the expected assignment is the ``topologyAssignment`` of the new admission;
* an expected failure text is the event message with Kueue's scheduler prefix
  ``couldn't assign flavors to pod set <ps>: `` removed (our engine returns the
  bare FailureReason);
* admitted workloads become ``tas_usage``; bound non-TAS pods become
  ``non_tas_pods``; the flavor's ``nodeLabels`` / ``tolerations`` become
  ``node_labels`` / ``flavor_tolerations``; the Topology keeps its Kueue name
  because it appears in failure texts.

Where Kueue's case does not assert something we assert, the case ``note`` says
so ("derived").
"""

from __future__ import annotations

from kueue_tas.topology.model import (
    NodeSelectorRequirement,
    NodeSelectorTerm,
    Taint,
    Toleration,
)

from .model import (
    GI,
    HOST,
    KueueCase,
    PodSetCase,
    UsageCase,
    node,
    on_domains,
    on_hosts,
    preferred,
    required,
    unconstrained,
)

MI = 1024 * 1024
SCHED_RACK = "cloud.provider.com/rack"  # this test file's rack label differs from tas_cache_test.go
CUSTOM_LEVEL = "cloud.com/custom-level"
TAS_NODE = {"tas-node": "true"}  # nodeLabels of the "tas-default" flavor

SINGLE = "tas-single-level"
TWO = "tas-two-level"
SINGLE_LEVEL = (HOST,)
TWO_LEVEL = (SCHED_RACK, HOST)

CPU1 = {"cpu": 1000}


def _x1(**alloc: int) -> tuple:
    """One node x1 carrying the flavor label."""
    return (node("x1", host="x1", labels=TAS_NODE, **alloc),)


DEFAULT_SINGLE_NODE = _x1(cpu=1000, memory=GI, pods=10)

#    r1
#  /  |  \
# x1  x2  x3      x1 has 0 CPU
NODES_WITH_ZERO_CAPACITY_INSTANCE = (
    node("x1", host="x1", labels={**TAS_NODE, SCHED_RACK: "r1"}, cpu=0, pods=10),
    node("x2", host="x2", labels={**TAS_NODE, SCHED_RACK: "r1"}, cpu=1000, pods=10),
    node("x3", host="x3", labels={**TAS_NODE, SCHED_RACK: "r1"}, cpu=1000, pods=10),
)

_TWO_RACKED_8CPU = (
    node("x1", host="x1", labels={**TAS_NODE, SCHED_RACK: "r1"}, cpu=8000, pods=10),
    node("y1", host="y1", labels={**TAS_NODE, SCHED_RACK: "r1"}, cpu=8000, pods=10),
)

_TWO_FLAVOR_NODES = (
    node("x1", host="x1", labels=TAS_NODE, cpu=1000, pods=10),
    node("y1", host="y1", labels={"tas-node-second": "true"}, cpu=1000, pods=10),
)


def _single(name: str, podsets: tuple[PodSetCase, ...], *, nodes: tuple = DEFAULT_SINGLE_NODE, **kw) -> KueueCase:
    return KueueCase(
        name=name,
        topology_name=SINGLE,
        levels=SINGLE_LEVEL,
        nodes=nodes,
        node_labels=TAS_NODE,
        podsets=podsets,
        **kw,
    )


def _partially_empty(name: str, topology) -> KueueCase:
    return KueueCase(
        name=name,
        topology_name=TWO,
        levels=TWO_LEVEL,
        nodes=NODES_WITH_ZERO_CAPACITY_INSTANCE,
        node_labels=TAS_NODE,
        podsets=(
            PodSetCase(name="one", count=2, requests=CPU1, topology=topology, want=on_hosts(("x2", 1), ("x3", 1))),
        ),
    )


SCHEDULE_CASES: tuple[KueueCase, ...] = (
    _single(
        "initial scheduling; one-byte memory request fits on a 2Gi node with vectorized requests disabled",
        (PodSetCase(name="one", count=1, requests={"memory": 1}, topology=required(HOST), want=on_hosts(("x1", 1))),),
        nodes=_x1(memory=2 * GI, pods=10),
    ),
    _single(
        "initial scheduling; TAS uses podspec memory for placement",
        (
            PodSetCase(
                name="one",
                count=2,
                requests={"cpu": 1000, "memory": 1536 * MI},
                topology=preferred(HOST),
                want=on_hosts(("x1", 1), ("x2", 1)),
            ),
        ),
        nodes=(
            node("x1", host="x1", labels=TAS_NODE, cpu=4000, memory=2 * GI, pods=10),
            node("x2", host="x2", labels=TAS_NODE, cpu=4000, memory=2 * GI, pods=10),
        ),
    ),
    _single(
        "workload in CQ with ProvisioningRequest; second pass; baseline scenario",
        (PodSetCase(name="one", count=1, requests=CPU1, topology=required(HOST), want=on_hosts(("x1", 1))),),
        note="Delayed topology request placed in the second pass, after the ProvisioningRequest is Ready.",
    ),
    _single(
        "workload in CQ with ProvisioningRequest; second pass; multi-resource workload fully consumes quota",
        (
            PodSetCase(
                name="one",
                count=1,
                requests={"cpu": 1000, "memory": GI},
                topology=required(HOST),
                want=on_hosts(("x1", 1)),
            ),
        ),
    ),
    _single(
        "large workload in CQ with ProvisioningRequest; second pass",
        (PodSetCase(name="one", count=26, requests=CPU1, topology=preferred(HOST), want=on_hosts(("x1", 26))),),
        nodes=_x1(cpu=50000, memory=50 * GI, pods=50),
    ),
    KueueCase(
        name="workload in CQ with ProvisioningRequest when two TAS flavors; second pass",
        topology_name=SINGLE,
        levels=SINGLE_LEVEL,
        nodes=_TWO_FLAVOR_NODES,
        node_labels={"tas-node-second": "true"},  # the quota was reserved on flavor "tas-second"
        podsets=(PodSetCase(name="one", count=1, requests=CPU1, topology=required(HOST), want=on_hosts(("y1", 1))),),
    ),
    KueueCase(
        name="workload in CQ with ProvisioningRequest when two TAS flavors; second pass; implicit defaulting",
        topology_name=SINGLE,
        levels=SINGLE_LEVEL,
        nodes=_TWO_FLAVOR_NODES,
        node_labels={"tas-node-second": "true"},
        podsets=(PodSetCase(name="one", count=1, requests=CPU1, topology=None, want=on_hosts(("y1", 1))),),
    ),
    _single(
        "workload with a custom AdmissionCheck gets TAS assigned",
        (PodSetCase(name="one", count=1, requests=CPU1, topology=required(HOST), want=on_hosts(("x1", 1))),),
    ),
    _single(
        "workload which does not specify TAS annotation uses the only TAS flavor",
        (PodSetCase(name="one", count=1, requests=CPU1, topology=None, want=on_hosts(("x1", 1))),),
    ),
    _single(
        "workload requiring TAS skips the non-TAS flavor",
        (PodSetCase(name="one", count=1, requests=CPU1, topology=required(HOST), want=on_hosts(("x1", 1))),),
    ),
    _single(
        "workload required TAS gets scheduled",
        (PodSetCase(name="one", count=1, requests=CPU1, topology=required(HOST), want=on_hosts(("x1", 1))),),
    ),
    KueueCase(
        name="workload requests topology level which is only present in second flavor",
        topology_name="tas-custom-topology",
        levels=(CUSTOM_LEVEL,),
        nodes=(node("x1", labels={**TAS_NODE, CUSTOM_LEVEL: "x1"}, cpu=1000, pods=10),),
        node_labels=TAS_NODE,
        podsets=(
            PodSetCase(
                name="one",
                count=1,
                requests=CPU1,
                topology=required(CUSTOM_LEVEL),
                want=on_domains((CUSTOM_LEVEL,), (("x1",), 1)),
            ),
        ),
        note="Placement on the second flavor (tas-custom-flavor), whose single level is not the hostname.",
    ),
    _single(
        "workload does not get scheduled as it does not fit within the node capacity",
        (
            PodSetCase(
                name="one",
                count=2,
                requests=CPU1,
                topology=required(HOST),
                reason='topology "tas-single-level" allows to fit only 1 out of 2 pod(s)',
            ),
        ),
    ),
    _single(
        "workload does not get scheduled as the node capacity is already used by another TAS workload",
        (
            PodSetCase(
                name="one",
                count=1,
                requests=CPU1,
                topology=required(HOST),
                reason=(
                    'topology "tas-single-level" doesn\'t allow to fit any of 1 pod(s). '
                    'Total nodes: 1; excluded: resource "cpu": 1'
                ),
            ),
        ),
        tas_usage=(UsageCase(assignment=on_hosts(("x1", 1)), per_pod=CPU1),),
    ),
    _single(
        "workload gets scheduled when another admitted workload has a completed podset that released its "
        "topology domain",
        (PodSetCase(name="one", count=1, requests=CPU1, topology=required(HOST), want=on_hosts(("x2", 1))),),
        nodes=(
            node("x1", host="x1", labels=TAS_NODE, cpu=1000, memory=GI, pods=10),
            node("x2", host="x2", labels=TAS_NODE, cpu=1000, memory=GI, pods=10),
        ),
        # bar-admitted: driver on x1 and workers on x2; the workers PodSet is fully
        # reclaimable (ReclaimablePods), so only the driver's usage remains.
        tas_usage=(UsageCase(assignment=on_hosts(("x1", 1)), per_pod=CPU1),),
        note="The reclaimed PodSet (workers on x2) releases its usage; only the driver on x1 counts.",
    ),
    _single(
        "workload does not get scheduled as the node capacity is already used by a non-TAS pod",
        (
            PodSetCase(
                name="one",
                count=1,
                requests=CPU1,
                topology=required(HOST),
                reason=(
                    'topology "tas-single-level" doesn\'t allow to fit any of 1 pod(s). '
                    'Total nodes: 1; excluded: resource "cpu": 1'
                ),
            ),
        ),
        non_tas_pods=(("x1", {"cpu": 600, "pods": 1}),),
    ),
    _single(
        "workload does not get scheduled as node capacity is completely used by non-TAS pod",
        (
            PodSetCase(
                name="one",
                count=1,
                requests=CPU1,
                topology=required(HOST),
                reason=(
                    'topology "tas-single-level" doesn\'t allow to fit any of 1 pod(s). '
                    'Total nodes: 1; excluded: resource "cpu": 1'
                ),
            ),
        ),
        nodes=_x1(cpu=1000, memory=GI, pods=1),
        non_tas_pods=(("x1", {"cpu": 1000, "memory": GI, "pods": 1}),),
    ),
    _single(
        "workload gets admitted next to already admitted workload, multiple resources used",
        (
            PodSetCase(
                name="one",
                count=1,
                requests={"cpu": 500, "memory": 500 * MI},
                topology=required(HOST),
                want=on_hosts(("x1", 1)),
            ),
        ),
        tas_usage=(UsageCase(assignment=on_hosts(("x1", 1)), per_pod={"cpu": 500, "memory": 500 * MI}),),
    ),
    KueueCase(
        name="workload with multiple PodSets requesting the same TAS flavor; multiple levels",
        topology_name=TWO,
        levels=TWO_LEVEL,
        nodes=(
            node("x1", host="x1", labels={**TAS_NODE, SCHED_RACK: "r1"}, cpu=3000, pods=10),
            node("y1", host="y1", labels={**TAS_NODE, SCHED_RACK: "r1"}, cpu=3000, pods=10),
        ),
        node_labels=TAS_NODE,
        podsets=(
            PodSetCase(name="launcher", count=1, requests=CPU1, topology=preferred(HOST), want=on_hosts(("x1", 1))),
            PodSetCase(
                name="worker",
                count=1,
                requests={"cpu": 7000},
                topology=preferred(HOST),
                reason=(
                    'topology "tas-two-level" doesn\'t allow to fit any of 1 pod(s). '
                    'Total nodes: 2; excluded: resource "cpu": 2'
                ),
            ),
        ),
        note="derived: Kueue only asserts the worker's message; the launcher's x1 follows BestFit's name order.",
    ),
    KueueCase(
        name="scheduling workload with multiple PodSets requesting TAS flavor and will succeed",
        topology_name=TWO,
        levels=TWO_LEVEL,
        nodes=_TWO_RACKED_8CPU,
        node_labels=TAS_NODE,
        podsets=(
            PodSetCase(name="launcher", count=1, requests=CPU1, topology=required(HOST), want=on_hosts(("x1", 1))),
            PodSetCase(
                name="worker",
                count=15,
                requests=CPU1,
                topology=preferred(HOST),
                want=on_hosts(("x1", 7), ("y1", 8)),
            ),
        ),
    ),
    KueueCase(
        name="scheduling workload with multiple PodSets requesting higher level topology",
        topology_name=TWO,
        levels=TWO_LEVEL,
        nodes=_TWO_RACKED_8CPU,
        node_labels=TAS_NODE,
        podsets=(
            PodSetCase(
                name="launcher", count=1, requests=CPU1, topology=required(SCHED_RACK), want=on_hosts(("x1", 1))
            ),
            PodSetCase(
                name="worker",
                count=15,
                requests=CPU1,
                topology=required(SCHED_RACK),
                want=on_hosts(("x1", 7), ("y1", 8)),
            ),
        ),
    ),
    _single(
        "scheduling workload when the node for another admitted workload is deleted",
        (PodSetCase(name="one", count=1, requests=CPU1, topology=preferred(HOST), want=on_hosts(("y1", 1))),),
        nodes=(node("y1", host="y1", labels=TAS_NODE, cpu=1000, pods=10),),
        # Usage on a domain that is not a leaf of the snapshot (node x1 deleted) is ignored.
        tas_usage=(UsageCase(assignment=on_hosts(("x1", 1)), per_pod=CPU1),),
    ),
    _single(
        "scheduling workload on a tainted node when the toleration is on ResourceFlavor",
        (PodSetCase(name="one", count=1, requests=CPU1, topology=preferred(HOST), want=on_hosts(("x1", 1))),),
        nodes=(
            node(
                "x1",
                host="x1",
                labels=TAS_NODE,
                cpu=1000,
                pods=10,
                taints=(Taint(key="example.com/gpu", value="present", effect="NoSchedule"),),
            ),
        ),
        flavor_tolerations=(Toleration(key="example.com/gpu", operator="Exists"),),
    ),
    _single(
        "workload does not get scheduled as the node capacity (.status.allocatable['pods']) is already used "
        "by non-TAS and TAS workloads",
        (
            PodSetCase(
                name="one",
                count=1,
                requests={"cpu": 300},
                topology=required(HOST),
                reason=(
                    'topology "tas-single-level" doesn\'t allow to fit any of 1 pod(s). '
                    'Total nodes: 1; excluded: resource "pods": 1'
                ),
            ),
        ),
        nodes=_x1(cpu=1000, pods=3),
        non_tas_pods=(("x1", {"cpu": 300, "pods": 1}),),
        tas_usage=(UsageCase(assignment=on_hosts(("x1", 2)), per_pod={"cpu": 150}),),
    ),
    _single(
        "workload with zero value request gets scheduled",
        (
            PodSetCase(
                name="one",
                count=1,
                requests={"cpu": 0, "memory": 10 * MI},
                topology=None,
                want=on_hosts(("x1", 1)),
            ),
        ),
    ),
    _single(
        "does not admit workload when node does not match required affinity",
        (
            PodSetCase(
                name="one",
                count=1,
                requests=CPU1,
                topology=preferred(HOST),
                required_affinity=(
                    NodeSelectorTerm(
                        match_expressions=(NodeSelectorRequirement(key="unused-key", operator="In", values=("value",)),)
                    ),
                ),
                reason=(
                    'topology "tas-single-level" doesn\'t allow to fit any of 1 pod(s). '
                    "Total nodes: 1; excluded: affinity: 1"
                ),
            ),
        ),
        note="derived: Kueue ignores the event message here; the text follows Kueue's failure-message format.",
    ),
    _single(
        "admits workload when node matches required affinity",
        (
            PodSetCase(
                name="one",
                count=1,
                requests=CPU1,
                topology=preferred(HOST),
                required_affinity=(
                    NodeSelectorTerm(
                        match_expressions=(
                            NodeSelectorRequirement(key="expected-label", operator="In", values=("expected-value",)),
                        )
                    ),
                ),
                want=on_hosts(("x1", 1)),
            ),
        ),
        nodes=(
            node(
                "x1",
                host="x1",
                labels={**TAS_NODE, "expected-label": "expected-value"},
                cpu=1000,
                memory=GI,
                pods=10,
            ),
        ),
    ),
    _partially_empty("admits workload when nodes are partially empty; unconstrained", unconstrained()),
    _partially_empty("admits workload when nodes are partially empty; preferred", preferred(SCHED_RACK)),
    _partially_empty("admits workload when nodes are partially empty; required", required(SCHED_RACK)),
    _single(
        "admits workload with zero-quantity request for resource not in ClusterQueue with TAS",
        (
            PodSetCase(
                name="one",
                count=1,
                requests={"cpu": 1000, "example.com/gpu": 0},
                topology=preferred(HOST),
                want=on_hosts(("x1", 1)),
            ),
        ),
    ),
    _single(
        "workload with Resource Transformation (Retain CPU → cpu_credits)",
        (PodSetCase(name="one", count=1, requests=CPU1, topology=required(HOST), want=on_hosts(("x1", 1))),),
        note="Resource transformations only change quota; placement uses the PodSpec's 1 CPU.",
    ),
)

# TestScheduleForTAS cases not transcribed, with the reason.
SCHEDULE_NOT_TRANSCRIBED: dict[str, str] = {
    "workload with a PodSet of size zero": "zero-count PodSet gets no topology assignment; our API has no "
    "defined result for count 0",
    "workload in CQ with ProvisioningRequest; second pass; reports reservation wait time": "same placement "
    "input as the baseline scenario; asserts event text only",
    "workload in CQ with ProvisioningRequest; second pass; preempts under a pods quota": "quota preemption",
    "workload in CQ with two TAS flavors, only the second is using Provisioning Admission Check": "flavor "
    "selection across two TAS flavors",
    "workload in CQ with two TAS flavors - one with ProvisioningRequest, one regular; second pass": "PodSets "
    "on two different TAS flavors",
    "second pass replacement must not take a domain claimed by another workload in the same cycle": "node replacement",
    "workload with unhealthyNode annotation; second pass; *": "node replacement (all unhealthyNode cases)",
    "workload with unhealthyNode; second pass; slices; *": "node replacement (all slice replacement cases)",
    "workload with eight unhealthy nodes; second pass; no fit; FailFast disabled": "node replacement",
    "workload in CQ with ProvisioningRequest gets QuotaReserved only; implicit defaulting": "no placement "
    "(delayed until the ProvisioningRequest is ready)",
    "workload in CQ with ProvisioningRequest gets QuotaReserved only": "no placement (delayed)",
    "workload which does not need TAS skips the TAS flavor": "non-TAS PodSet",
    "workload with mixed PodSets (requiring TAS and not)": "one PodSet on a non-TAS flavor",
    "workload requests topology level which is not present in topology": "flavor-level check with the "
    "flavor assigner's message, not a placement failure",
    "workload does not get scheduled when ReclaimablePods is disabled even if another admitted workload has "
    "a completed podset": "ReclaimablePods=false (non-default gate); message not asserted",
    "two ResourceFlavors share nodes: pending workload lands on the fallback flavor when the primary flavor "
    "is full": "two TAS flavors, flavor-level node taints",
    "multi-PodSet workload across sibling flavors must not self-overlap on shared node": "two TAS flavors "
    "sharing nodes",
    "TAS workload gets scheduled as trimmed by partial admission": "partial admission (count reduced by the scheduler)",
    "workload with Resource Transformation (Retain CPU → cpu_credits, not enough credits)": "quota failure",
    "multi-layer topology: block required with rack and host slices; workload fits": "multi-layer slice "
    "constraints (not supported by our API yet)",
    "multi-layer topology: host slice rounding makes rack slice impossible; NoFit": "multi-layer slice "
    "constraints (not supported by our API yet)",
}
