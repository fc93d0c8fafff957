"""Kueue's own TAS cases run through ``kueue-tas plan``, the way an outside harness would.

Each case (``tests/kueue_cases/``) is turned into manifests by ``kueue_cases.to_plan`` and
fed on stdin to the real CLI entry point (``kueue_tas.cli.main.main``, ``-o json``); the
PodSets of the Workload ``default/case`` in the output are compared with the case: levels
and domains (Kueue's order) when it fits, the failure message when it does not.

* core cases (``find_topology_assignments.py``, ``schedule_for_tas.py``) run twice: with the
  request as our pod-template annotations and as ``spec.podSets[].topologyRequest``;
* advanced cases (every ``advanced_*.py`` present) run with ``topologyRequest`` (groups and
  multi-layer slices have no annotation form), their gates as ``--feature-gates``.

The ``simulate_empty`` cases are not run: plan has no such option.
"""

from __future__ import annotations

import importlib
import importlib.util
import io
import json
import sys
from collections.abc import Iterable
from types import ModuleType
from typing import Any

import pytest

from kueue_tas.api.kinds import parse_object
from kueue_tas.cli.main import main
from kueue_tas.topology.features import FeatureGates

try:  # tests/ is not a package: pytest puts tests/ itself on sys.path
    from kueue_cases.find_topology_assignments import CASES as FIND_CASES
    from kueue_cases.model import KueueCase
    from kueue_cases.schedule_for_tas import SCHEDULE_CASES
    from kueue_cases.to_plan import PlanInput, RequestVia, to_plan
except ImportError:  # pragma: no cover - if tests/ ever becomes a package
    from tests.kueue_cases.find_topology_assignments import CASES as FIND_CASES
    from tests.kueue_cases.model import KueueCase
    from tests.kueue_cases.schedule_for_tas import SCHEDULE_CASES
    from tests.kueue_cases.to_plan import PlanInput, RequestVia, to_plan

_PACKAGE = KueueCase.__module__.rpartition(".")[0]

ADVANCED_MODULES = (
    "advanced_replacement",
    "advanced_balanced",
    "advanced_affinity",
    "advanced_elastic",
    "advanced_overlap",
    "advanced_groups",  # written by the engine branch
    "advanced_multilayer",  # written by the engine branch
)


def _advanced() -> dict[str, ModuleType]:
    """The advanced case modules present in this tree (import errors propagate)."""
    out = {}
    for name in ADVANCED_MODULES:
        full = f"{_PACKAGE}.{name}"
        if importlib.util.find_spec(full) is not None:
            out[name] = importlib.import_module(full)
    return out


ADVANCED = _advanced()
CORE: list[KueueCase] = [*FIND_CASES, *SCHEDULE_CASES]
ADVANCED_CASES: list[tuple[str, KueueCase]] = [(m, c) for m, mod in ADVANCED.items() for c in mod.CASES]

# Core cases whose request plan rejects as invalid input, by its contract (docs/user-guide/plan.md: exit 1 and one
# line naming object, field and problem), where the engine instead returns Kueue's failure text.
# Our annotations are validated as Kueue's job webhooks validate a Job's (jobframework's
# ValidateTASPodSetRequest: a slice level needs a slice size); a Workload's topologyRequest is
# taken as Kueue's scheduler takes a stored Workload (the Workload webhook's validateTASSliceSize
# guards writes only), so there the engine's text is expected. A level the Topology lacks is
# invalid input in both forms (Kueue's flavor assigner would not give such a Workload the flavor).
# Value: (the request form it applies to, or None for both; a fragment the error line must contain).
PLAN_REJECTS: dict[str, tuple[RequestVia | None, str]] = {
    "cannot request not existing slice topology": (None, 'unknown topology level "not-existing-topology-level"'),
    "slice size is required when slice topology is requested": (RequestVia.ANNOTATIONS, "podset-slice-size"),
}


def run_plan(
    inp: PlanInput, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> tuple[int, str, str]:
    """Exit code, stdout and stderr of ``kueue-tas <argv>`` with the objects on stdin."""
    monkeypatch.setattr(sys, "stdin", io.StringIO(inp.stdin))
    try:
        code = main(inp.argv)
    except SystemExit as exc:  # argparse rejects the command line (e.g. an unknown flag)
        code = exc.code if isinstance(exc.code, int) else 2
    out, err = capsys.readouterr()
    return code, out, err


def _expected(case: KueueCase) -> Iterable[tuple[str, dict[str, Any]]]:
    for ps in case.podsets:
        if ps.want is not None:
            yield (
                ps.name,
                {
                    "levels": list(ps.want.levels),
                    "domains": [{"values": list(d.values), "count": d.count} for d in ps.want.domains],
                    "message": "",
                },
            )
        else:
            yield ps.name, {"levels": None, "domains": None, "message": ps.reason}


def differences(case: KueueCase, inp: PlanInput, code: int, out: str, err: str) -> list[str]:
    """Human-readable differences between plan's answer and the case ([] when they agree)."""
    if code != 0:
        return [f"plan exited {code}: {err.strip() or '(no stderr)'}"]
    try:
        report = json.loads(out)
    except json.JSONDecodeError as exc:
        return [f"plan printed no JSON ({exc}): {out[:200]!r}"]
    mine = [w for w in report.get("workloads", []) if (w.get("namespace"), w.get("name")) == (inp.namespace, inp.name)]
    if len(mine) != 1:
        listed = [f"{w.get('namespace')}/{w.get('name')}" for w in report.get("workloads", [])]
        return [f"Workload {inp.namespace}/{inp.name} appears {len(mine)} times in plan's output (listed: {listed})"]
    got_podsets = {p["name"]: p for p in mine[0]["podSets"]}
    diffs = []
    want_fits = all(ps.want is not None for ps in case.podsets)
    if mine[0]["fits"] != want_fits:
        diffs.append(f"fits: want {want_fits}, got {mine[0]['fits']}")
    for name, want in _expected(case):
        got = got_podsets.get(name)
        if got is None:
            diffs.append(f"PodSet {name!r}: missing from plan's output (has {sorted(got_podsets)})")
            continue
        for key in ("levels", "domains", "message"):
            if got.get(key) != want[key]:
                diffs.append(f"PodSet {name!r} {key}: want {want[key]!r}, got {got.get(key)!r}")
    return diffs


def _check(
    case: KueueCase, via: RequestVia, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    inp = to_plan(case, via)
    code, out, err = run_plan(inp, monkeypatch, capsys)
    reject = PLAN_REJECTS.get(case.name)
    if reject is not None and reject[0] in (None, via):
        assert code == 1 and reject[1] in err, f"plan should reject the request ({reject[1]!r}); got {code}: {err}"
        return
    diffs = differences(case, inp, code, out, err)
    if diffs:
        flags = " ".join(inp.argv[5:]) or "(default gates)"
        note = f"\n  note: {case.note}" if case.note else ""
        pytest.fail(f"{case.name} [{via.value}; {flags}]:\n  " + "\n  ".join(diffs) + note, pytrace=False)


@pytest.mark.parametrize("case", CORE, ids=[c.name for c in CORE])
def test_core_case_via_annotations(
    case: KueueCase, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _check(case, RequestVia.ANNOTATIONS, monkeypatch, capsys)


@pytest.mark.parametrize("case", CORE, ids=[c.name for c in CORE])
def test_core_case_via_topology_request(
    case: KueueCase, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _check(case, RequestVia.TOPOLOGY_REQUEST, monkeypatch, capsys)


@pytest.mark.parametrize("module,case", ADVANCED_CASES, ids=[f"{m}: {c.name}" for m, c in ADVANCED_CASES])
def test_advanced_case(
    module: str, case: KueueCase, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _check(case, RequestVia.TOPOLOGY_REQUEST, monkeypatch, capsys)


# --- the case data itself ---------------------------------------------------------------------


@pytest.mark.parametrize("module", sorted(ADVANCED))
def test_advanced_module_is_consistent(module: str) -> None:
    mod = ADVANCED[module]
    names = [c.name for c in mod.CASES]
    assert len(names) == len(set(names)), "duplicate case names"
    assert not set(names) & set(mod.NOT_TRANSCRIBED), "a case is both transcribed and listed as not transcribed"
    assert all(reason.strip() for reason in mod.NOT_TRANSCRIBED.values()), "every omission needs a reason"
    for case in mod.CASES:
        FeatureGates(dict(case.gates))  # every gate is one of Kueue v0.19.2's
        for ps in case.podsets:
            assert (ps.want is None) != (ps.reason == ""), f"{case.name}: one expectation per PodSet"
        if case.unhealthy_nodes or case.elastic:
            assert any(ps.current is not None for ps in case.podsets), f"{case.name}: needs PodSetCase.current"
        assert not (case.unhealthy_nodes and case.elastic), case.name


def test_family_modules_hold_their_feature() -> None:
    by_module = {m: mod.CASES for m, mod in ADVANCED.items()}
    assert all(c.unhealthy_nodes for c in by_module["advanced_replacement"])
    assert all(c.elastic and c.gates.get("ElasticJobsViaWorkloadSlicesWithTAS") for c in by_module["advanced_elastic"])
    assert all(c.gates.get("TASBalancedPlacement") for c in by_module["advanced_balanced"])
    assert all(
        c.gates.get("TASRespectNodeAffinityPreferred") and any(ps.preferred_affinity for ps in c.podsets)
        for c in by_module["advanced_affinity"]
        if "leader" not in {ps.name for ps in c.podsets}
    )
    assert all(c.other_flavor_usage for c in by_module["advanced_overlap"] if "disabled" not in c.name)


@pytest.mark.parametrize(
    "case,via",
    [(c, RequestVia.ANNOTATIONS) for c in CORE] + [(c, RequestVia.TOPOLOGY_REQUEST) for _, c in ADVANCED_CASES],
    ids=[f"annotations: {c.name}" for c in CORE] + [f"topologyRequest: {c.name}" for _, c in ADVANCED_CASES],
)
def test_converter_output_is_read_by_our_models(case: KueueCase, via: RequestVia) -> None:
    """Every manifest the converter writes parses as the kind it claims (no kind is silently skipped)."""
    inp = to_plan(case, via)
    for obj in json.loads(inp.stdin)["items"]:
        assert parse_object(obj) is not None, f"{obj['kind']}/{obj['metadata']['name']} is not read by kueue-tas"
    target = json.loads(inp.stdin)["items"][-1]
    assert (target["metadata"]["namespace"], target["metadata"]["name"]) == (inp.namespace, inp.name)
    assert [p["count"] for p in target["spec"]["podSets"]] == [ps.count for ps in case.podsets]
