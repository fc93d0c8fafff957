"""Kueue's own TAS placement cases, run against our engine.

Source: kubernetes-sigs/kueue ``pkg/cache/scheduler/tas_cache_test.go``,
``TestFindTopologyAssignments`` (stored version at commit
009736297a53a19dee0a1e9186fdbbc3948504e9; at that commit
``pkg/cache/scheduler/tas_flavor_snapshot_test.go`` only holds small helper
tests, and the big FindTopologyAssignments table lives in ``tas_cache_test.go``).
The data is in ``tests/kueue_cases/``; every test id is Kueue's case name.
Kueue's default feature gates are assumed (TASProfileMixed on; balanced
placement and preferred node affinity off).

A second, smaller set comes from the scheduler-level ``TestScheduleForTAS`` in
``pkg/scheduler/scheduler_tas_test.go`` (stored version at commit
03efb7f0df84659c34ff0100286eac6491e72836): only cases decided by the placement
on one TAS flavor with ample quota (``tests/kueue_cases/schedule_for_tas.py``;
its ``SCHEDULE_NOT_TRANSCRIBED`` lists the others with reasons). The preemption
and cohort tests of that file (``TestScheduleForTASPreemption`` and later) were
not transcribed: their outcome depends on preemption, which is not part of the
placement API.

Cases NOT transcribed (TestFindTopologyAssignments)
===================================================

Not supported by our API yet: leader/worker PodSet groups (podSetGroupName)
---------------------------------------------------------------------------
- grouped with leader and sliced workers; hostname level slicing with lower leader requirement
- find topology assignment for two podsets with the same group
- find topology assignment for grouped podsets preserves worker capacity when placing leader
- find topology assignment for sliced grouped podsets preserves worker capacity when placing leader
- find topology assignment for preferred grouped podsets preserves capacity across domains
- find topology assignment for unconstrained grouped podsets spreads leader and worker across domains
  with TASProfileMixed
- find topology assignment for grouped podsets preserves leader below the slice level
- find topology assignment for two podsets with the same group with domains that can tightly fit
  leader and workers
- find topology assignment for grouped podsets skips domain where only workers fit without leader
- find topology assignment for grouped podsets skips domain where mixed-size workers only fit without
  leader
- find topology assignment for grouped podsets keeps tight domain when leader and workers fit together
- find topology assignment for two podsets with the same group - no fit
- find topology assignment for two podsets with the same group - optimizes domain for both leader and
  workers
- BestFit: podset group workers spread across hosts
- find topology assignment for two podsets with the same group - leader does not fit anywhere
- find topology assignment for two podsets with the same group - multiple hosts
- find topology assignment for two podsets with the same group requesting same resources and nodes in
  the same rack
- optimize the last domain for LWS using BestFit
- (also groups, listed below under other reasons: "grouped with leader and sliced workers; multi-layer
  slicing constraints on workers", "grouped with leader and sliced workers; replace unhealthy node with
  sliced workers", "balanced placement; leader worker set", "balanced placement; should not prune
  domain", "balanced placement; leader worker set does not reserve leader space on every node",
  "balanced placement; fallback to BestFit when leader worker set cannot meet threshold", the four
  "elastic workload ... with leader" cases, and "LWS with leader and workers; preferred affinity on
  workers; leader cannot fit on preferred zone")

Not supported by our API yet: multi-layer slice constraints (podsetSliceRequiredTopologyConstraints)
----------------------------------------------------------------------------------------------------
- grouped with leader and sliced workers; multi-layer slicing constraints on workers (also a group)
- multi-layer topology: block required; rack slices of 4; host slices of 2; TASMultiLayerTopology
- multi-layer topology: mimic a real-world GB200 cluster, with NVL36 arch (2GPUs/node); dc required;
  aizone slices of 48; rack slices of 16; TASMultiLayerTopology
- multi-layer topology: host slice rounding makes rack slice impossible
- multi-layer topology: small host kills rack slices despite enough total capacity
- multi-layer topology: enough hostname slices but not enough rack slices
- multi-layer topology: 3-layer negative case with small hosts cascading up
- the multi-layer replacement cases below (also node replacement)

Node replacement (workload admitted with a topologyAssignment plus unhealthyNodes): no API input
-------------------------------------------------------------------------------------------------
- node replacement skipped for single-Pod-owned workload; gate on
- node replaced for Job-owned workload; gate on
- node replaced for pod-group workload with two Pod owners; gate on
- node replaced for size-1 pod-group workload (is-group-workload annotation); gate on
- node replaced for single-Pod-owned workload; gate off
- grouped with leader and sliced workers; replace unhealthy node with sliced workers (also a group)
- multi-layer replacement: replacement does not cross a string-prefix sibling domain
- multi-layer replacement: replace unhealthy node in incomplete rack slice
- multi-layer replacement: replacement fails when no capacity in incomplete slice domain
- multi-layer replacement: 3-layer: innermost broken domain confines replacement to correct switch
- multi-layer replacement: 2-layer: sliceSize=2 prevents scattered single-pod placement across hosts
- multi-layer replacement: sibling-flavor aggregatedDomainUsages on replacement candidate blocks the
  replacement

Elastic workloads (previousAssignment, ElasticJobsViaWorkloadSlices gates): no API input
----------------------------------------------------------------------------------------
- elastic workload scale up: delta-only placement preserves previous assignment
- elastic workload scale up: spread across multiple nodes preserved
- elastic workload scale down: truncates assignment
- elastic workload same count: reuses previous assignment exactly
- elastic workload scale up with leader: places delta workers, preserves leader assignment
- elastic workload scale up with leader: stale leader assignment falls back to fresh placement
- elastic workload scale down with leader: truncates workers, reuses leader
- elastic workload same count with leader: reuses both assignments exactly

Balanced placement (TASBalancedPlacement=true; the gate is off by default)
--------------------------------------------------------------------------
- balanced placement; basic
- balanced placement; select optmial set of domains
- balanced placement; select optmial set of domains; with slices
- balanced placement; select correct block
- balanced placement; cannot chose domains from different blocks
- balanced placement; select correct block; prefer blocks with single rack; with slices
- balanced placement; four level topology; slice two levels below balanced level
- balanced placement; four level topology; slice one level below balanced level
- balanced placement; four level topology; balance on rack level; slice not on the lowest level
- balanced placement; three level topology; balance on the same level as slice
- balanced placement; three level topology; balance on the lowest level
- balanced placement; leader worker set (also a group)
- balanced placement; prioritize (using entropy) balanced domains; second rack wins
- balanced placement; prioritize (using entropy) balanced domains; first rack wins
- balanced placement; two level topology; balance on the highest level
- balanced placement; select correct block taking into account pruning
- balanced placement; should not prune domain (also a group)
- balanced placement; leader worker set does not reserve leader space on every node (also a group)
- balanced placement; fallback to BestFit when leader worker set cannot meet threshold (also a group)
- stable tie break on identical nodes: TASBalancedPlacement enabled
- stable tie break on identical nodes: reversed order, TASBalancedPlacement enabled
  (the two "disabled" twins are transcribed)

Preferred node affinity (TASRespectNodeAffinityPreferred=true; off by default, and our API has no
preferred-affinity input)
------------------------------------------------------------------------------------------------------
- with preferred affinity
- with required and preferred affinity
- with multiple preferred affinities
- affinity takes precedence over best fit
- affinity ordering with required topology level chooses secondary domain if primary is too small
- affinity ordering with preferred inner topology level bubbles up to parent level to avoid splitting
  across parent domains
- flat topology, preferred mode, size 5 pods x 1
- flat topology, unconstrained mode, size 5 pods x 1
- flat topology, preferred mode, size 2 pods x 2
- flat topology, unconstrained mode, size 2 pods x 2
- LWS with leader and workers; preferred affinity on workers; leader cannot fit on preferred zone
  (also a group)
"""

from __future__ import annotations

import pytest

from kueue_tas.topology.model import PodSetRequest
from kueue_tas.topology.snapshot import TopologySnapshot

try:  # tests/ is not a package: pytest puts tests/ itself on sys.path
    from kueue_cases.find_topology_assignments import CASES
    from kueue_cases.model import KueueCase
    from kueue_cases.schedule_for_tas import SCHEDULE_CASES, SCHEDULE_NOT_TRANSCRIBED
    from kueue_cases.simulate_empty import SIMULATE_EMPTY_CASES
except ImportError:  # pragma: no cover - if tests/ ever becomes a package
    from tests.kueue_cases.find_topology_assignments import CASES
    from tests.kueue_cases.model import KueueCase
    from tests.kueue_cases.schedule_for_tas import SCHEDULE_CASES, SCHEDULE_NOT_TRANSCRIBED
    from tests.kueue_cases.simulate_empty import SIMULATE_EMPTY_CASES

# Kueue case names deliberately left out (see the module docstring for the reasons).
NOT_TRANSCRIBED: frozenset[str] = frozenset(
    {
        # leader/worker groups
        "grouped with leader and sliced workers; hostname level slicing with lower leader requirement",
        "find topology assignment for two podsets with the same group",
        "find topology assignment for grouped podsets preserves worker capacity when placing leader",
        "find topology assignment for sliced grouped podsets preserves worker capacity when placing leader",
        "find topology assignment for preferred grouped podsets preserves capacity across domains",
        "find topology assignment for unconstrained grouped podsets spreads leader and worker across "
        "domains with TASProfileMixed",
        "find topology assignment for grouped podsets preserves leader below the slice level",
        "find topology assignment for two podsets with the same group with domains that can tightly fit "
        "leader and workers",
        "find topology assignment for grouped podsets skips domain where only workers fit without leader",
        "find topology assignment for grouped podsets skips domain where mixed-size workers only fit without leader",
        "find topology assignment for grouped podsets keeps tight domain when leader and workers fit together",
        "find topology assignment for two podsets with the same group - no fit",
        "find topology assignment for two podsets with the same group - optimizes domain for both leader and workers",
        "BestFit: podset group workers spread across hosts",
        "find topology assignment for two podsets with the same group - leader does not fit anywhere",
        "find topology assignment for two podsets with the same group - multiple hosts",
        "find topology assignment for two podsets with the same group requesting same resources and nodes "
        "in the same rack",
        "optimize the last domain for LWS using BestFit",
        # multi-layer slice constraints
        "grouped with leader and sliced workers; multi-layer slicing constraints on workers",
        "multi-layer topology: block required; rack slices of 4; host slices of 2; TASMultiLayerTopology",
        "multi-layer topology: mimic a real-world GB200 cluster, with NVL36 arch (2GPUs/node); dc "
        "required; aizone slices of 48; rack slices of 16; TASMultiLayerTopology",
        "multi-layer topology: host slice rounding makes rack slice impossible",
        "multi-layer topology: small host kills rack slices despite enough total capacity",
        "multi-layer topology: enough hostname slices but not enough rack slices",
        "multi-layer topology: 3-layer negative case with small hosts cascading up",
        # node replacement
        "node replacement skipped for single-Pod-owned workload; gate on",
        "node replaced for Job-owned workload; gate on",
        "node replaced for pod-group workload with two Pod owners; gate on",
        "node replaced for size-1 pod-group workload (is-group-workload annotation); gate on",
        "node replaced for single-Pod-owned workload; gate off",
        "grouped with leader and sliced workers; replace unhealthy node with sliced workers",
        "multi-layer replacement: replacement does not cross a string-prefix sibling domain",
        "multi-layer replacement: replace unhealthy node in incomplete rack slice",
        "multi-layer replacement: replacement fails when no capacity in incomplete slice domain",
        "multi-layer replacement: 3-layer: innermost broken domain confines replacement to correct switch",
        "multi-layer replacement: 2-layer: sliceSize=2 prevents scattered single-pod placement across hosts",
        "multi-layer replacement: sibling-flavor aggregatedDomainUsages on replacement candidate blocks "
        "the replacement",
        # elastic workloads
        "elastic workload scale up: delta-only placement preserves previous assignment",
        "elastic workload scale up: spread across multiple nodes preserved",
        "elastic workload scale down: truncates assignment",
        "elastic workload same count: reuses previous assignment exactly",
        "elastic workload scale up with leader: places delta workers, preserves leader assignment",
        "elastic workload scale up with leader: stale leader assignment falls back to fresh placement",
        "elastic workload scale down with leader: truncates workers, reuses leader",
        "elastic workload same count with leader: reuses both assignments exactly",
        # balanced placement (non-default gate)
        "balanced placement; basic",
        "balanced placement; select optmial set of domains",
        "balanced placement; select optmial set of domains; with slices",
        "balanced placement; select correct block",
        "balanced placement; cannot chose domains from different blocks",
        "balanced placement; select correct block; prefer blocks with single rack; with slices",
        "balanced placement; four level topology; slice two levels below balanced level",
        "balanced placement; four level topology; slice one level below balanced level",
        "balanced placement; four level topology; balance on rack level; slice not on the lowest level",
        "balanced placement; three level topology; balance on the same level as slice",
        "balanced placement; three level topology; balance on the lowest level",
        "balanced placement; leader worker set",
        "balanced placement; prioritize (using entropy) balanced domains; second rack wins",
        "balanced placement; prioritize (using entropy) balanced domains; first rack wins",
        "balanced placement; two level topology; balance on the highest level",
        "balanced placement; select correct block taking into account pruning",
        "balanced placement; should not prune domain",
        "balanced placement; leader worker set does not reserve leader space on every node",
        "balanced placement; fallback to BestFit when leader worker set cannot meet threshold",
        "stable tie break on identical nodes: TASBalancedPlacement enabled",
        "stable tie break on identical nodes: reversed order, TASBalancedPlacement enabled",
        # preferred node affinity (non-default gate)
        "with preferred affinity",
        "with required and preferred affinity",
        "with multiple preferred affinities",
        "affinity takes precedence over best fit",
        "affinity ordering with required topology level chooses secondary domain if primary is too small",
        "affinity ordering with preferred inner topology level bubbles up to parent level to avoid "
        "splitting across parent domains",
        "flat topology, preferred mode, size 5 pods x 1",
        "flat topology, unconstrained mode, size 5 pods x 1",
        "flat topology, preferred mode, size 2 pods x 2",
        "flat topology, unconstrained mode, size 2 pods x 2",
        "LWS with leader and workers; preferred affinity on workers; leader cannot fit on preferred zone",
    }
)


def _run(case: KueueCase):
    snap = TopologySnapshot.build(
        topology_name=case.topology_name,
        levels=case.levels,
        nodes=case.nodes,
        flavor_node_labels=case.node_labels,
        flavor_tolerations=case.flavor_tolerations,
    )
    for node_name, usage in case.non_tas_pods:
        snap.add_non_tas_usage(node_name, usage)
    for usage_case in case.tas_usage:
        snap.add_tas_usage(usage_case.assignment, per_pod=usage_case.per_pod)
    requests = [
        PodSetRequest(
            name=ps.name,
            count=ps.count,
            requests=ps.requests,
            topology=ps.topology,
            implied=ps.implied,
            tolerations=ps.tolerations,
            node_selector=ps.node_selector,
            required_affinity=ps.required_affinity,
        )
        for ps in case.podsets
    ]
    return snap.place(requests, simulate_empty=case.simulate_empty)


def _check(case: KueueCase) -> None:
    results = _run(case)
    assert len(results) == len(case.podsets), f"one result per PodSet expected ({case.note})"
    for ps, got in zip(case.podsets, results, strict=True):
        assert got.name == ps.name
        want = (ps.want, ps.reason)
        assert (got.assignment, got.message) == want, f"PodSet {ps.name!r}; note: {case.note or '-'}"


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_kueue_find_topology_assignments(case: KueueCase) -> None:
    _check(case)


@pytest.mark.parametrize("case", SCHEDULE_CASES, ids=[c.name for c in SCHEDULE_CASES])
def test_kueue_schedule_for_tas(case: KueueCase) -> None:
    _check(case)


@pytest.mark.parametrize("case", SIMULATE_EMPTY_CASES, ids=[c.name for c in SIMULATE_EMPTY_CASES])
def test_simulate_empty_derived(case: KueueCase) -> None:
    _check(case)


def test_case_names_are_unique_and_not_also_skipped() -> None:
    names = [c.name for c in CASES]
    assert len(names) == len(set(names))
    assert not set(names) & NOT_TRANSCRIBED
    sched_names = [c.name for c in SCHEDULE_CASES]
    assert len(sched_names) == len(set(sched_names))
    assert not set(sched_names) & set(SCHEDULE_NOT_TRANSCRIBED)
    for case in (*CASES, *SCHEDULE_CASES, *SIMULATE_EMPTY_CASES):
        for ps in case.podsets:
            # Exactly one expectation per PodSet: an assignment or a failure reason.
            assert (ps.want is None) != (ps.reason == ""), case.name
