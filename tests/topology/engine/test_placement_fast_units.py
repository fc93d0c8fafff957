"""The vectorised helpers of the placement engine against the plain loops they replace.

- ``tightest_fit`` and ``sort_domains`` against sorted() with Kueue's sortedDomains key;
- ``CapacityMatrix.remaining_columns`` (cached ``free - tas`` rows) against ``remaining``,
  after any mix of non-TAS and TAS usage, saturating amounts and columns added later;
- ``CapacityMatrix.add_assumed`` (one scatter-add) against the per-domain loop;
- ``domain_assignments`` against the DomainAssignment constructor.
"""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from kueue_tas.topology.assignment import DomainAssignment, TopologyAssignment, domain_assignments
from kueue_tas.topology.engine.capacity_matrix import AMOUNT_LIMIT, Matrix, usage_of
from kueue_tas.topology.engine.placement import DomainCounts, sort_domains, tightest_fit
from kueue_tas.topology.engine.snapshot import TopologySnapshot
from kueue_tas.topology.model import HOSTNAME_LABEL, PODS, NodeInfo

HOSTS = [f"h{i}" for i in range(6)]
RESOURCES = ["cpu", "gpu", PODS, "zz/new"]
amounts = st.one_of(st.integers(-5, 40), st.sampled_from([AMOUNT_LIMIT - 1, AMOUNT_LIMIT, 2**62, -(2**62)]))


def as_array(values: list[int]) -> np.ndarray:  # type: ignore[type-arg]
    return np.array(values, dtype=np.int64)


@st.composite
def level_counts(draw: st.DrawFn) -> tuple[DomainCounts, bool]:
    """One level's pods and slices; slices either are the pods (one array) or pods // size."""
    pods = draw(st.lists(st.one_of(st.integers(0, 12), st.integers(0, 2**40)), min_size=1, max_size=90))
    size = draw(st.integers(1, 3))
    arr = as_array(pods)
    alias = draw(st.booleans())
    slices = arr if alias else arr // size
    return DomainCounts([arr], [slices]), draw(st.booleans())


def reference_order(counts: DomainCounts, idx: list[int], lfc: bool) -> list[int]:
    s, p = counts.slices[0], counts.pods[0]
    return sorted(idx, key=lambda d: (int(s[d]) if lfc else -int(s[d]), int(p[d]), d))


@settings(max_examples=300, deadline=None)
@given(case=level_counts(), data=st.data())
def test_sort_domains_is_sorted_domains(case: tuple[DomainCounts, bool], data: st.DataObject) -> None:
    counts, lfc = case
    n = counts.pods[0].size
    idx = sorted(data.draw(st.sets(st.integers(0, n - 1), min_size=1)))
    got = sort_domains(counts, 0, as_array(idx), lfc).tolist()
    assert got == reference_order(counts, idx, lfc)


@settings(max_examples=300, deadline=None)
@given(case=level_counts(), needed=st.integers(0, 14))
def test_tightest_fit_is_the_first_fitting_of_the_order(case: tuple[DomainCounts, bool], needed: int) -> None:
    counts, lfc = case
    s = counts.slices[0]
    order = reference_order(counts, list(range(s.size)), lfc)
    fitting = [d for d in order if s[d] >= needed]
    # LeastFreeCapacity: the first that fits; BestFit: the tightest, the first in the order on ties.
    tightest = min(fitting, key=lambda d: int(s[d])) if fitting else None
    want = (fitting[0] if fitting else None) if lfc else tightest
    assert tightest_fit(s, counts.pods[0], needed) == want


def snapshot() -> TopologySnapshot:
    nodes = [NodeInfo(h, {"rack": f"r{i % 2}", HOSTNAME_LABEL: h}, {"cpu": 8, PODS: 10}) for i, h in enumerate(HOSTS)]
    return TopologySnapshot.build(topology_name="t", levels=["rack", HOSTNAME_LABEL], nodes=nodes)


@st.composite
def assignments(draw: st.DrawFn) -> TopologyAssignment:
    hosts = draw(st.lists(st.sampled_from([*HOSTS, "gone"]), max_size=5))
    counts = st.one_of(st.integers(0, 9), st.sampled_from([2**40, 2**62]))
    return TopologyAssignment((HOSTNAME_LABEL,), tuple(DomainAssignment((h,), draw(counts)) for h in hosts))


@settings(max_examples=300, deadline=None)
@given(data=st.data(), assumed=st.booleans())
def test_remaining_columns_are_the_columns_of_remaining(data: st.DataObject, assumed: bool) -> None:
    snap = snapshot()
    cap = snap.capacity
    for _ in range(data.draw(st.integers(0, 12))):
        usage = data.draw(st.dictionaries(st.sampled_from(RESOURCES), amounts, max_size=3))
        if data.draw(st.booleans()):
            cap.add_non_tas_usage(data.draw(st.sampled_from(HOSTS)), usage, data.draw(st.sampled_from([1, -1])))
        else:
            leaf = data.draw(st.integers(0, len(HOSTS) - 1))
            cap.add_tas_usage(leaf, usage, data.draw(st.sampled_from([1, -1])))
    extra: Matrix | None = None
    if assumed:  # narrower than the capacity when a column came later
        width = data.draw(st.integers(0, len(cap.columns)))
        extra = as_array(
            data.draw(st.lists(st.integers(-50, 50), min_size=len(HOSTS) * width, max_size=len(HOSTS) * width))
        )
        extra = extra.reshape(len(HOSTS), width)
    cols = list(range(len(cap.columns)))
    for simulate_empty, allocatable_only in [(False, False), (True, False), (False, True)]:
        flags = {"simulate_empty": simulate_empty, "assumed": extra, "allocatable_only": allocatable_only}
        whole = cap.remaining(**flags)  # type: ignore[arg-type]
        rows = cap.remaining_columns(cols, **flags)  # type: ignore[arg-type]
        for col, row in zip(cols, rows, strict=True):
            assert row.tolist() == whole[:, col].tolist()
            assert not row.flags.writeable


def add_assumed_by_loop(
    snap: TopologySnapshot, assumed: Matrix | None, ta: TopologyAssignment, per_pod: dict[str, int]
) -> Matrix:
    """The per-domain loop ``add_assumed`` was before it was vectorised."""
    snap.capacity.vector({**per_pod, PODS: 1})
    ncols = len(snap.capacity.columns)
    grown = np.zeros((len(snap.tree.leaves), ncols), dtype=np.int64)
    if assumed is not None:
        grown[:, : assumed.shape[1]] = assumed
    for values, usage in usage_of(ta, per_pod):
        leaf = snap.tree.leaf_index_of(values)
        if leaf is not None:
            grown[leaf] += snap.capacity.vector(usage)[:ncols]
    return grown


@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_add_assumed_adds_as_the_loop(data: st.DataObject) -> None:
    snap, ref = snapshot(), snapshot()
    got: Matrix | None = None
    want: Matrix | None = None
    for _ in range(data.draw(st.integers(1, 3))):
        ta = data.draw(assignments())
        per_pod = data.draw(st.dictionaries(st.sampled_from(RESOURCES), amounts, max_size=3))
        got = snap.capacity.add_assumed(got, ta, per_pod)
        want = add_assumed_by_loop(ref, want, ta, per_pod)
        assert got.tolist() == want.tolist()


@given(pairs=st.lists(st.tuples(st.lists(st.text(max_size=3), max_size=3).map(tuple), st.integers())))
def test_domain_assignments_equal_the_constructed_ones(pairs: list[tuple[tuple[str, ...], int]]) -> None:
    built = domain_assignments([v for v, _ in pairs], [c for _, c in pairs])
    assert built == tuple(DomainAssignment(v, c) for v, c in pairs)
    assert [hash(d) for d in built] == [hash(DomainAssignment(v, c)) for v, c in pairs]
    assert [repr(d) for d in built] == [repr(DomainAssignment(v, c)) for v, c in pairs]
