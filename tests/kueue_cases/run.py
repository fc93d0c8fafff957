"""Run one KueueCase through the engine as Kueue's own test harness drives its snapshot.

Shared by the core runner, the advanced runner and the fast-vs-general property test, so the three
feed the engine the same way.
"""

from __future__ import annotations

from kueue_cases.model import KueueCase
from kueue_tas.topology.engine.results import PodSetResult
from kueue_tas.topology.engine.snapshot import TopologySnapshot
from kueue_tas.topology.features import FeatureGates
from kueue_tas.topology.model import PodSetRequest


def build_snapshot(case: KueueCase) -> TopologySnapshot:
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
    gates = FeatureGates(dict(case.gates))
    if gates.overlapping_flavors and snap.tree.lowest_is_hostname:
        for usage_case in case.other_flavor_usage:
            for dom in usage_case.assignment.domains:
                leaf = snap.tree.leaf_index_of(dom.values)
                if leaf is None:
                    continue
                usage = {k: v * dom.count for k, v in usage_case.per_pod.items()}
                usage["pods"] = usage.get("pods", 0) + dom.count
                snap.add_non_tas_usage(snap.tree.leaf_nodes[leaf][0].name, usage)
    return snap


def run_case(case: KueueCase) -> list[PodSetResult]:
    snap = build_snapshot(case)
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
            preferred_affinity=ps.preferred_affinity,
        )
        for ps in case.podsets
    ]
    current = {ps.name: ps.current for ps in case.podsets if ps.current is not None}
    return snap.place(
        requests,
        gates=FeatureGates(dict(case.gates)),
        simulate_empty=case.simulate_empty,
        current=current or None,
        unhealthy_nodes=case.unhealthy_nodes,
        elastic=case.elastic,
    )
