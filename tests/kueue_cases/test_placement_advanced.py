"""Kueue's advanced TAS placement cases (every ``tests/kueue_cases/advanced_*.py``), run through ``place``.

Each module exports ``CASES: list[KueueCase]`` and ``NOT_TRANSCRIBED: dict[str, str]``.
The snapshot is fed as Kueue's harness (``TestFindTopologyAssignments`` and
``TestFindTopologyAssignmentsMultiLayerReplacement`` in ``tas_cache_test.go``) feeds it:

* ``tas_usage`` (``priorOwnUsage``) is admitted TAS usage of the flavor;
* ``other_flavor_usage`` (``priorFlavorUsage``) becomes Kueue's aggregated domain usage,
  i.e. assumed usage that even ``simulate_empty`` keeps: it is charged like non-TAS usage,
  and only when TASHandleOverlappingFlavors is on and the lowest level is the hostname;
* node replacement: ``place`` charges the whole admitted ``current`` itself (Kueue's cache
  holds the admitted Workload's usage); where Kueue's harness charges none, the case data
  raise the nodes' allocatable by those pods (``advanced_replacement._room_for_admitted``),
  so the runner feeds the snapshot as it is;
* elastic: the old slice is not charged (Kueue's harness does not either).
"""

from __future__ import annotations

import importlib
import pkgutil
from pathlib import Path
from types import ModuleType

import pytest

from kueue_tas.topology.engine.results import PodSetResult

try:  # tests/ is not a package: pytest puts tests/ itself on sys.path
    from kueue_cases.model import KueueCase
    from kueue_cases.run import run_case
except ImportError:  # pragma: no cover
    from tests.kueue_cases.model import KueueCase
    from tests.kueue_cases.run import run_case

_CASES_DIR = Path(__file__).parent


def _modules() -> list[ModuleType]:
    names = sorted(m.name for m in pkgutil.iter_modules([str(_CASES_DIR)]) if m.name.startswith("advanced_"))
    return [importlib.import_module(f"kueue_cases.{name}") for name in names]


MODULES = _modules()
ALL_CASES: list[KueueCase] = [case for mod in MODULES for case in mod.CASES]

# Features whose engine part is not built yet: their cases are strict xfails, so they turn
# into failures ("XPASS") as soon as the feature lands and this entry must go.
PENDING: dict[str, str] = {}


def _pending(case: KueueCase) -> str | None:
    if case.unhealthy_nodes and "replacement" in PENDING:
        return PENDING["replacement"]
    if case.elastic and "elastic" in PENDING:
        return PENDING["elastic"]
    if case.gates.get("TASBalancedPlacement") and "balanced" in PENDING:
        return PENDING["balanced"]
    return None


def _params() -> list[object]:
    out: list[object] = []
    for case in ALL_CASES:
        reason = _pending(case)
        marks = [pytest.mark.xfail(reason=reason, strict=True)] if reason else []
        out.append(pytest.param(case, id=case.name, marks=marks))
    return out


@pytest.mark.parametrize("case", _params())
def test_kueue_advanced_case(case: KueueCase) -> None:
    by_name = {r.name: r for r in run_case(case)}
    for ps in case.podsets:
        got = by_name.get(ps.name, PodSetResult(ps.name, None))
        assert (got.assignment, got.message) == (ps.want, ps.reason), f"PodSet {ps.name!r}; note: {case.note or '-'}"


def test_advanced_modules_are_well_formed() -> None:
    assert MODULES, "no tests/kueue_cases/advanced_*.py module found"
    names = [c.name for c in ALL_CASES]
    assert len(names) == len(set(names)), "case names must be unique across the advanced modules"
    skipped = {name for mod in MODULES for name in mod.NOT_TRANSCRIBED}
    assert not set(names) & skipped
    for case in ALL_CASES:
        for ps in case.podsets:
            assert (ps.want is None) != (ps.reason == ""), case.name
