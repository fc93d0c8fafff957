"""Required R with preferred P on random clusters (block > rack > host), what always holds:

- it fits exactly when required R alone fits, and fails with required R's text;
- when it fits, every pod is in one domain of R, and the pods lie in one domain of the lowest
  level from P up to R where a single domain can hold them all (so: in exactly one P domain
  when one P domain can hold them);
- P == R places exactly as R alone; the fast path and Kueue's general algorithm agree.

"As few P domains as required R alone" does NOT always hold once no single P domain fits:
the pair takes the best-fit domain of the level above P, required alone the best-fit R domain,
and the greedy descent inside either may use fewer P domains
(``test_fewer_preferred_domains_is_not_promised_above_the_preferred_level`` shows one).
"""

from __future__ import annotations

from collections import defaultdict

from hypothesis import given, settings
from hypothesis import strategies as st
from random_clusters import BLOCK, HOST, LEVELS, Path, clusters, snapshot

from kueue_tas.topology.engine.find_assignment import PlaceOptions, find_topology_assignment
from kueue_tas.topology.engine.placement import PlacementFailure
from kueue_tas.topology.engine.snapshot import TopologySnapshot
from kueue_tas.topology.features import FeatureGates
from kueue_tas.topology.model import PodSetRequest, TopologyRequest


def place(snap: TopologySnapshot, topo: TopologyRequest, count: int, general: bool = False) -> dict[str, int] | str:
    """Host -> pods, or the failure text."""
    request = PodSetRequest("w", count, {"cpu": 1000}, topology=topo)
    try:
        got = find_topology_assignment(snap, request, None, None, PlaceOptions(FeatureGates()), general_only=general)
    except PlacementFailure as exc:
        return str(exc)
    return {d.values[-1]: d.count for d in got["w"].domains if d.count}


def domains_used(cluster: dict[Path, int], placed: dict[str, int], level: int) -> set[str]:
    return {p[level] for p in cluster if placed.get(p[2], 0) > 0}


def capacity(cluster: dict[Path, int], level: int) -> dict[str, int]:
    out: dict[str, int] = defaultdict(int)
    for p, pods in cluster.items():
        out[p[level]] += pods
    return out


@settings(max_examples=300, deadline=None)
@given(
    cluster=clusters(),
    count=st.integers(1, 14),
    levels=st.sampled_from([(0, 1), (0, 2), (1, 2), (0, 0), (1, 1)]),
)
def test_one_required_domain_and_the_lowest_single_domain_from_preferred(
    cluster: dict[Path, int], count: int, levels: tuple[int, int]
) -> None:
    r, p = levels
    snap = snapshot(cluster)
    pair_request = TopologyRequest(required=LEVELS[r], preferred=LEVELS[p])
    pair = place(snap, pair_request, count)
    alone = place(snap, TopologyRequest(required=LEVELS[r]), count)
    assert place(snap, pair_request, count, general=True) == pair
    if p == r:
        assert pair == alone
    if isinstance(pair, str):
        assert pair == alone, "the pair fails exactly as required alone"
        return
    assert not isinstance(alone, str), "the pair fits exactly when required alone does"
    assert sum(pair.values()) == count
    assert len(domains_used(cluster, pair, r)) == 1
    lowest = next(lvl for lvl in range(p, r - 1, -1) if max(capacity(cluster, lvl).values()) >= count)
    assert len(domains_used(cluster, pair, lowest)) == 1
    if lowest == p:
        assert len(domains_used(cluster, pair, p)) == 1 <= len(domains_used(cluster, alone, p))


def test_fewer_preferred_domains_is_not_promised_above_the_preferred_level() -> None:
    """Block b0 holds 5 + 4: its best-fit rack for 5 pods is r0, hosts 2 + 2 + 1. Block b1 (6, the
    tighter block) has one rack of hosts 4 + 2. No host holds 5, so the pair takes rack b0-r0
    (the tightest rack that fits): three hosts, where required block alone takes b1: two."""
    cluster: dict[Path, int] = {
        ("b0", "b0-r0", "b0-r0-h0"): 2,
        ("b0", "b0-r0", "b0-r0-h1"): 2,
        ("b0", "b0-r0", "b0-r0-h2"): 1,
        ("b0", "b0-r1", "b0-r1-h0"): 4,
        ("b1", "b1-r0", "b1-r0-h0"): 4,
        ("b1", "b1-r0", "b1-r0-h1"): 2,
    }
    snap = snapshot(cluster)
    pair = place(snap, TopologyRequest(required=BLOCK, preferred=HOST), 5)
    alone = place(snap, TopologyRequest(required=BLOCK), 5)
    assert pair == {"b0-r0-h0": 2, "b0-r0-h1": 2, "b0-r0-h2": 1}
    assert alone == {"b1-r0-h0": 4, "b1-r0-h1": 1}
