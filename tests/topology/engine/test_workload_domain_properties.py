"""The workload-wide constraint on random clusters (block > rack > host), what always holds:

- required W: when it fits, every pod of every PodSet is in one domain of W, and each PodSet's
  own constraint holds (required rack: one rack); it fits whenever some domain of W holds every
  PodSet placed alone inside it (the search tries every domain with aggregate room);
- preferred W: every PodSet is placed whenever the same PodSets fit without the constraint;
- no workload constraint: the results are the plain ones (the same call path as before).
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from random_clusters import LEVELS, Path, clusters, snapshot

from kueue_tas.topology.engine.results import PodSetResult
from kueue_tas.topology.engine.workload_domain import WorkloadTopology
from kueue_tas.topology.model import PodSetRequest, TopologyRequest

PODSET_LEVELS = (None, 1, 2)  # implied, required rack, required host


def podsets(spec: list[tuple[int, int | None]]) -> list[PodSetRequest]:
    out = []
    for i, (count, lvl) in enumerate(spec):
        if lvl is None:
            out.append(PodSetRequest(f"p{i}", count, {"cpu": 1000}, implied=True))
        else:
            out.append(PodSetRequest(f"p{i}", count, {"cpu": 1000}, topology=TopologyRequest(required=LEVELS[lvl])))
    return out


def paths_used(cluster: dict[Path, int], result: PodSetResult) -> list[Path]:
    assert result.assignment is not None
    hosts = {d.values[-1] for d in result.assignment.domains if d.count}
    return [p for p in cluster if p[2] in hosts]


def placed(results: list[PodSetResult], n: int) -> bool:
    return len(results) == n and all(r.assignment is not None for r in results)


specs = st.lists(st.tuples(st.integers(1, 6), st.sampled_from(PODSET_LEVELS)), min_size=1, max_size=3)


@settings(max_examples=200, deadline=None)
@given(cluster=clusters(), spec=specs, level=st.sampled_from([0, 1]))
def test_required_keeps_every_pod_in_one_domain_and_each_podsets_own_constraint(
    cluster: dict[Path, int], spec: list[tuple[int, int | None]], level: int
) -> None:
    snap = snapshot(cluster)
    requests = podsets(spec)
    results = snap.place(requests, workload=WorkloadTopology(required=LEVELS[level]))
    if not placed(results, len(requests)):
        # Then no single domain of the level holds them all, each placed in turn inside it.
        for d in sorted({p[level] for p in cluster}):
            only = {p: n if p[level] == d else 0 for p, n in cluster.items()}
            assert not placed(snapshot(only).place(requests), len(requests)), f"domain {d} holds them all"
        return
    domains = {p[level] for r in results for p in paths_used(cluster, r)}
    assert len(domains) == 1
    for (_, lvl), r in zip(spec, results, strict=True):
        assert r.assignment is not None and sum(d.count for d in r.assignment.domains) == r.assignment.total
        if lvl is not None:
            assert len({p[lvl] for p in paths_used(cluster, r)}) == 1


@settings(max_examples=200, deadline=None)
@given(cluster=clusters(), spec=specs, level=st.sampled_from([0, 1, 2]))
def test_preferred_places_whenever_the_plain_placement_does(
    cluster: dict[Path, int], spec: list[tuple[int, int | None]], level: int
) -> None:
    snap = snapshot(cluster)
    requests = podsets(spec)
    plain = snap.place(requests)
    results = snap.place(requests, workload=WorkloadTopology(preferred=LEVELS[level]))
    assert placed(results, len(requests)) == placed(plain, len(requests))
    assert snap.place(requests, workload=None) == plain
