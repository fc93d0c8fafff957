"""Kueue's overlapping-flavor TAS cases (``TASHandleOverlappingFlavors``): usage of TAS
workloads admitted on another flavor whose nodes are also this flavor's nodes.

Sources (kubernetes-sigs/kueue v0.19.2), names are Kueue's:

* ``pkg/cache/scheduler/tas_cache_test.go``, ``TestFindTopologyAssignments``: its
  ``priorFlavorUsage`` (usage a sibling flavor charged on shared hostnames) is
  ``KueueCase.other_flavor_usage``;
* ``pkg/scheduler/scheduler_tas_test.go``, ``TestScheduleForTAS``: the placement part of a
  case whose flavor choice Kueue's flavor assigner made (the case says which).

Cases whose ids start with ``derived from:`` are ours: a Kueue case with one input changed,
the expectation worked out from Kueue's harness (it applies sibling usage only when the gate
is on and the topology's lowest level is the hostname).
"""

from __future__ import annotations

from dataclasses import replace

from kueue_tas.topology.model import Toleration

from .model import (
    BLOCK,
    HOST,
    RACK,
    TWO_LEVELS,
    KueueCase,
    PodSetCase,
    UsageCase,
    node,
    on_domains,
    on_hosts,
    preferred,
    required,
)
from .schedule_for_tas import TAS_NODE

CPU1 = {"cpu": 1000}
MI = 1024 * 1024

SIBLING_ON_X1 = KueueCase(
    name="sibling-flavor usage on the shared hostname reduces remaining capacity",
    levels=(BLOCK, HOST),
    nodes=(
        node("b1-x1", block="b1", host="x1", cpu=1000, pods=10),
        node("b1-x2", block="b1", host="x2", cpu=1000, pods=10),
    ),
    node_labels={},
    other_flavor_usage=(UsageCase(assignment=on_hosts(("x1", 1)), per_pod=CPU1),),
    podsets=(PodSetCase(count=1, requests=CPU1, topology=required(HOST), want=on_hosts(("x2", 1))),),
    note="Also a core case, where the sibling usage is modelled as this flavor's own usage.",
)

_RACK_LEAF_NODES = tuple(
    node(f"{b}-{r}", block=b, rack=r, cpu=1000, pods=10) for b in ("b1", "b2") for r in ("r1", "r2")
)

CASES: list[KueueCase] = [
    SIBLING_ON_X1,
    replace(
        SIBLING_ON_X1,
        name=f"derived from: {SIBLING_ON_X1.name}; TASHandleOverlappingFlavors disabled",
        gates={"TASHandleOverlappingFlavors": False},
        podsets=(PodSetCase(count=1, requests=CPU1, topology=required(HOST), want=on_hosts(("x1", 1))),),
        note="With the gate off Kueue ignores sibling usage: x1 wins the name-order tie again.",
    ),
    KueueCase(
        name=(
            "derived from: non-hostname-leaf topology: prior c.usage must be applied even when "
            "aggregatedDomainUsages is non-nil empty; the prior usage on another flavor"
        ),
        levels=TWO_LEVELS,
        nodes=_RACK_LEAF_NODES,
        node_labels={},
        other_flavor_usage=(
            UsageCase(assignment=on_domains(TWO_LEVELS, (("b1", "r1"), 1)), per_pod=CPU1),
            UsageCase(assignment=on_domains(TWO_LEVELS, (("b1", "r2"), 1)), per_pod=CPU1),
        ),
        podsets=(
            PodSetCase(
                count=1,
                requests=CPU1,
                topology=required(RACK),
                want=on_domains(TWO_LEVELS, (("b1", "r1"), 1)),
            ),
        ),
        note=(
            "Kueue shares usage between flavors only on hostname-leaf topologies; on a rack-leaf topology "
            "another flavor's usage is not seen, so b1/r1 is still first."
        ),
    ),
    KueueCase(
        name=(
            "two ResourceFlavors share nodes: pending workload lands on the fallback flavor when the primary "
            "flavor is full"
        ),
        topology_name="tas-single-level",
        levels=(HOST,),
        nodes=tuple(node(h, host=h, labels=TAS_NODE, cpu=400, memory=400 * MI, pods=10) for h in ("x1", "x2")),
        node_labels=TAS_NODE,
        other_flavor_usage=(
            UsageCase(assignment=on_hosts(("x1", 1)), per_pod={"cpu": 200, "memory": 200 * MI}),
            UsageCase(assignment=on_hosts(("x1", 1)), per_pod={"cpu": 200, "memory": 200 * MI}),
        ),
        podsets=(
            PodSetCase(
                name="one",
                count=1,
                requests={"cpu": 100, "memory": 100 * MI},
                topology=preferred(HOST),
                tolerations=(Toleration(key="tas-class", operator="Equal", value="b", effect="NoSchedule"),),
                want=on_hosts(("x2", 1)),
            ),
        ),
        note=(
            "Placement on tas-flavor-b, the flavor Kueue's flavor assigner chose (tas-flavor-a's quota is used "
            "up); the two admitted workloads of tas-flavor-a fill x1. The flavor's nodeTaint only steers flavor "
            "choice and is not modelled."
        ),
    ),
]

# "non-hostname-leaf topology: nil aggregatedDomainUsages preserves per-flavor behavior" and
# "... prior c.usage must be applied even when aggregatedDomainUsages is non-nil empty" hold no
# other flavor's usage: they are core cases (find_topology_assignments).
NOT_TRANSCRIBED: dict[str, str] = {
    "multi-PodSet workload across sibling flavors must not self-overlap on shared node": (
        "the PodSets of one workload go to two different flavors; a case holds one flavor"
    ),
    "sibling-flavor usage on the shared node forces same-flavor preemption": "decided by preemption",
}
