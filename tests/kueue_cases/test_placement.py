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

The other cases of TestFindTopologyAssignments (v0.19.2)
========================================================

Every other case of v0.19.2's table needs an input beyond a plain request: a PodSet group
(leader + workers), multi-layer slices, node replacement (an admitted assignment plus
unhealthy nodes), an elastic slice (the replaced slice's assignment), or a non-default gate
(balanced placement, preferred node affinity) or overlapping flavors. They are transcribed,
with ``TestFindTopologyAssignmentsMultiLayerReplacement`` and the second-pass replacement
cases of ``TestScheduleForTAS``, in ``tests/kueue_cases/advanced_*.py``:

- ``advanced_groups``: leader/worker PodSet groups (``podSetGroupName``);
- ``advanced_multilayer``: multi-layer slice constraints (``podsetSliceRequiredTopologyConstraints``);
- ``advanced_replacement``: node replacement, incl. the whole multi-layer replacement table;
- ``advanced_elastic``: elastic workload slices, with and without a leader;
- ``advanced_balanced``: TASBalancedPlacement, incl. the leader-worker-set ones;
- ``advanced_affinity``: TASRespectNodeAffinityPreferred, incl. the LWS one;
- ``advanced_overlap``: usage of sibling flavors sharing the nodes (TASHandleOverlappingFlavors).

They run through the engine in ``tests/kueue_cases/test_placement_advanced.py`` and through
``kueue-tas plan`` in ``tests/kueue_cases/test_plan.py``. Each module's ``NOT_TRANSCRIBED``
names the cases it leaves out, with the reason (from this table only "node replacement
skipped for single-Pod-owned workload; gate on": it depends on the Workload's owner kind).
"""

from __future__ import annotations

import importlib
import pkgutil
from pathlib import Path
from types import ModuleType

import pytest

from kueue_tas.topology.engine.results import PodSetResult

try:  # tests/ is not a package: pytest puts tests/ itself on sys.path
    from kueue_cases.find_topology_assignments import CASES
    from kueue_cases.model import KueueCase
    from kueue_cases.run import run_case
    from kueue_cases.schedule_for_tas import SCHEDULE_CASES, SCHEDULE_NOT_TRANSCRIBED
    from kueue_cases.simulate_empty import SIMULATE_EMPTY_CASES
except ImportError:  # pragma: no cover - if tests/ ever becomes a package
    from tests.kueue_cases.find_topology_assignments import CASES
    from tests.kueue_cases.model import KueueCase
    from tests.kueue_cases.run import run_case
    from tests.kueue_cases.schedule_for_tas import SCHEDULE_CASES, SCHEDULE_NOT_TRANSCRIBED
    from tests.kueue_cases.simulate_empty import SIMULATE_EMPTY_CASES

_CASES_DIR = Path(__file__).parent


def _advanced_modules() -> list[ModuleType]:
    names = sorted(m.name for m in pkgutil.iter_modules([str(_CASES_DIR)]) if m.name.startswith("advanced_"))
    return [importlib.import_module(f"{KueueCase.__module__.rpartition('.')[0]}.{name}") for name in names]


# Kueue case names the advanced modules leave out (see the module docstring); a core case may
# also be run there with the feature's own input (e.g. sibling-flavor usage as such).
NOT_TRANSCRIBED: frozenset[str] = frozenset(name for mod in _advanced_modules() for name in mod.NOT_TRANSCRIBED)


def _run(case: KueueCase) -> list[PodSetResult]:
    return run_case(case)


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
