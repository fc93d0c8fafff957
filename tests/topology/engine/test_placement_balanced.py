"""Balanced placement building blocks, against Kueue's own unit tests.

Source: kubernetes-sigs/kueue v0.19.2 ``pkg/cache/scheduler/tas_balanced_placement_test.go``
(``TestSelectOptimalDomainSetToFit``, ``TestPlaceSlicesOnDomainsBalanced``): the same
domain states and expectations, on a one-level tree whose domains are d1..d5. Kueue's
end-to-end balanced cases run in ``tests/kueue_cases/test_placement_advanced.py``.
"""

from __future__ import annotations

import numpy as np
import pytest

from kueue_tas.topology.engine.balanced import BalancedParams, place_balanced, select_optimal
from kueue_tas.topology.engine.domain_state import DomainState, Ordering
from kueue_tas.topology.engine.tree import TopologyTree
from kueue_tas.topology.model import NodeInfo

LEVEL = "zone"
# name -> (podCount, sliceCount, leaderCount, podCountWithLeader, sliceCountWithLeader)
Spec = tuple[int, int, int, int, int]
SELECT: dict[str, Spec] = {"d1": (9, 9, 1, 8, 8), "d2": (6, 6, 0, 6, 6), "d3": (4, 4, 1, 3, 3), "d4": (2, 2, 0, 2, 2)}
PLACE: dict[str, Spec] = {
    "d1": (18, 18, 0, 18, 18),
    "d2": (18, 18, 0, 18, 18),
    "d3": (18, 18, 0, 18, 18),
    "d4": (10, 10, 0, 10, 10),
    "d5": (2, 2, 0, 2, 2),
}


def _setup(specs: dict[str, Spec]) -> tuple[TopologyTree, DomainState, list[str]]:
    names = sorted(specs)
    tree = TopologyTree.build((LEVEL,), [NodeInfo(n, {LEVEL: n}, {"cpu": 1}) for n in names])
    col = {f: np.array([specs[n][i] for n in names], dtype=np.int64) for i, f in enumerate(("p", "s", "l", "pl", "sl"))}
    st = DomainState([col["p"]], [col["s"]], [col["pl"]], [col["sl"]], [col["l"]], [np.zeros(len(names), np.int64)])
    return tree, st, names


def _params(count: int, leaders: int) -> BalancedParams:
    return BalancedParams(count, leaders, 0, 0, 1, Ordering(lfc=False, affinity=False))


@pytest.mark.parametrize(
    ("workers", "leaders", "want"),
    [
        (22, 0, []),  # no fit
        (5, 1, ["d1"]),  # simple fit one domain
        (9, 1, ["d2", "d3"]),  # perfect fit with two domains
        (10, 1, ["d1", "d4"]),  # perfect fit with two domains 2
        (5, 0, ["d2"]),  # best fit, single domain
    ],
)
def test_select_optimal_domain_set_to_fit(workers: int, leaders: int, want: list[str]) -> None:
    tree, st, names = _setup(SELECT)
    got = select_optimal(tree, st, 0, list(range(len(names))), _params(workers, leaders), workers, entropy=True)
    assert sorted(names[d] for d in got or []) == want


@pytest.mark.parametrize(
    ("domains", "slices", "threshold", "want"),
    [
        (["d1", "d2", "d3"], 20, 10, {"d1": 10, "d2": 10}),
        (["d1", "d2", "d3"], 40, 13, {"d1": 14, "d2": 13, "d3": 13}),
        (["d1", "d2", "d3", "d4", "d5"], 2, 2, {"d5": 2}),
        (["d1", "d2", "d3", "d4", "d5"], 25, 10, {"d1": 15, "d4": 10}),
    ],
)
def test_place_slices_on_domains_balanced(
    domains: list[str], slices: int, threshold: int, want: dict[str, int]
) -> None:
    tree, st, names = _setup({n: PLACE[n] for n in domains})
    got = place_balanced(tree, st, 0, list(range(len(names))), _params(slices, 0), threshold)
    assert got is not None
    states = {
        names[d]: (int(st.slices[0][d]), int(st.pods[0][d]), int(st.pods_l[0][d]), int(st.slices_l[0][d])) for d in got
    }
    assert states == {n: (c, c, c, c) for n, c in want.items()}
    assert all(st.leader[0][d] == 0 for d in got)
