"""Kueue's elastic-workload-slice TAS cases (``ElasticJobsViaWorkloadSlicesWithTAS``).

Source: kubernetes-sigs/kueue v0.19.2 ``pkg/cache/scheduler/tas_cache_test.go``,
``TestFindTopologyAssignments`` (the ``elastic workload ...`` cases). Names are Kueue's.

Mapping: Kueue's ``previousAssignment`` of a PodSet becomes ``PodSetCase.current`` and the
case sets ``KueueCase.elastic``. Kueue's harness does not charge the previous slice's usage
to the flavor cache; ``handleElasticWorkload`` charges the previous pods itself (as assumed
usage), which is exactly our engine's contract (the caller does not charge the old slice),
so nodes and expectations are Kueue's unchanged. Both gates the cases set are listed in
``gates`` (ElasticJobsViaWorkloadSlices is already on by default).
"""

from __future__ import annotations

from kueue_tas.topology.assignment import TopologyAssignment
from kueue_tas.topology.model import TopologyRequest

from .model import ONE_LEVEL, KueueCase, PodSetCase, node, on_hosts, unconstrained

CPU1 = {"cpu": 1000}
ELASTIC_GATES = {"ElasticJobsViaWorkloadSlices": True, "ElasticJobsViaWorkloadSlicesWithTAS": True}
GROUP = TopologyRequest(unconstrained=True, group="elastic-group")


def _hosts(*cores: int) -> tuple:
    """Hostname-only nodes x1, x2, ... with the given cpu cores and 10 pods each."""
    return tuple(node(f"x{i}", host=f"x{i}", cpu=c * 1000, pods=10) for i, c in enumerate(cores, start=1))


def _single(name: str, nodes: tuple, count: int, current: TopologyAssignment, want: TopologyAssignment) -> KueueCase:
    return KueueCase(
        name=name,
        levels=ONE_LEVEL,
        nodes=nodes,
        gates=ELASTIC_GATES,
        elastic=True,
        podsets=(PodSetCase(count=count, requests=CPU1, topology=unconstrained(), current=current, want=want),),
    )


def _with_leader(
    name: str,
    nodes: tuple,
    leader: tuple[TopologyAssignment, TopologyAssignment],
    workers: tuple[int, TopologyAssignment, TopologyAssignment],
    note: str = "",
) -> KueueCase:
    """Leader (1 pod) and workers in one PodSet group; each tuple is (current, want) / (count, current, want)."""
    return KueueCase(
        name=name,
        levels=ONE_LEVEL,
        nodes=nodes,
        gates=ELASTIC_GATES,
        elastic=True,
        podsets=(
            PodSetCase(name="leader", count=1, requests=CPU1, topology=GROUP, current=leader[0], want=leader[1]),
            PodSetCase(
                name="workers", count=workers[0], requests=CPU1, topology=GROUP, current=workers[1], want=workers[2]
            ),
        ),
        note=note,
    )


CASES: list[KueueCase] = [
    _single(
        "elastic workload scale up: delta-only placement preserves previous assignment",
        _hosts(2, 2, 2),
        4,
        on_hosts(("x1", 2)),
        on_hosts(("x1", 2), ("x2", 2)),
    ),
    _single(
        "elastic workload scale up: spread across multiple nodes preserved",
        _hosts(2, 2, 2),
        4,
        on_hosts(("x1", 1), ("x2", 1)),
        on_hosts(("x1", 1), ("x2", 1), ("x3", 2)),
    ),
    _single(
        "elastic workload scale down: truncates assignment",
        _hosts(4, 4),
        3,
        on_hosts(("x1", 3), ("x2", 2)),
        on_hosts(("x1", 3)),
    ),
    _single(
        "elastic workload same count: reuses previous assignment exactly",
        _hosts(4, 4),
        3,
        on_hosts(("x1", 2), ("x2", 1)),
        on_hosts(("x1", 2), ("x2", 1)),
    ),
    _with_leader(
        "elastic workload scale down with leader: truncates workers, reuses leader",
        _hosts(4, 2),
        (on_hosts(("x2", 1)), on_hosts(("x2", 1))),
        (3, on_hosts(("x1", 3), ("x2", 2)), on_hosts(("x1", 3))),
    ),
    _with_leader(
        "elastic workload same count with leader: reuses both assignments exactly",
        _hosts(4, 4),
        (on_hosts(("x2", 1)), on_hosts(("x2", 1))),
        (3, on_hosts(("x1", 2), ("x2", 1)), on_hosts(("x1", 2), ("x2", 1))),
    ),
    _with_leader(
        "elastic workload scale up with leader: places delta workers, preserves leader assignment",
        _hosts(2, 1, 2),
        (on_hosts(("x2", 1)), on_hosts(("x2", 1))),
        (4, on_hosts(("x1", 2)), on_hosts(("x1", 2), ("x3", 2))),
    ),
    _with_leader(
        "elastic workload scale up with leader: stale leader assignment falls back to fresh placement",
        _hosts(2, 3, 3),
        (on_hosts(("deleted-node", 1)), on_hosts(("x1", 1))),
        (4, on_hosts(("x1", 2)), on_hosts(("x1", 1), ("x2", 3))),
        note="The leader's previous node is not in the snapshot: the whole group is placed afresh.",
    ),
]

NOT_TRANSCRIBED: dict[str, str] = {}
