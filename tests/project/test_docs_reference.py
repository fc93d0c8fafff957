"""The docs site's reference pages against the code, so that they cannot go stale.

Each test reads what the code defines (the settings model, the metrics registry, the Event
reasons the controllers emit, the names in ``kueue_tas/api/constants.py``, the argument parser)
and fails naming what a page is missing or still lists after the code dropped it.
"""

from __future__ import annotations

import ast
import importlib.util
import json
import re
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import yaml
from prometheus_client import CollectorRegistry
from prometheus_client.metrics import MetricWrapperBase

from kueue_tas.api import constants as c
from kueue_tas.cli.main import build_parser
from kueue_tas.runtime.config import Settings
from kueue_tas.runtime.metrics import Metrics
from kueue_tas.topology.level_names import LEVEL_NAMES_ANNOTATION

REPO = Path(__file__).resolve().parents[2]
DOCS = REPO / "docs"
REFERENCE = DOCS / "reference"


def _rows(page: Path) -> Iterator[list[str]]:
    """The cells of every table row of a page (header and separator rows skipped)."""
    for line in page.read_text().splitlines():
        if not line.startswith("|") or set(line) <= set("|-: "):
            continue
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if cells[0] in ("setting", "metric", "reason", "key", "command", "gate"):
            continue
        yield cells


def _code(cell: str) -> str:
    """The first `code span` of a cell (the name a row is about)."""
    found = re.match(r"`([^`]+)`", cell)
    return found.group(1) if found else cell


# ---- settings -------------------------------------------------------------------------------


def _shown_default(value: Any) -> str:
    """How the settings page writes a default (YAML-like, so it can be pasted into a file)."""
    if value is None:
        return "unset"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return f"{value:g}"
    if isinstance(value, tuple | list):
        return json.dumps(list(value))
    if isinstance(value, dict):
        return json.dumps(value)
    return str(value)


def test_every_setting_is_on_the_settings_page_with_its_default() -> None:
    rows = {_code(cells[0]): cells[1] for cells in _rows(REFERENCE / "settings.md")}
    fields = Settings.model_fields
    missing = sorted(set(fields) - set(rows))
    assert not missing, f"docs/reference/settings.md has no row for setting(s) {missing}"
    stale = sorted(set(rows) - set(fields))
    assert not stale, f"docs/reference/settings.md lists setting(s) the model does not have: {stale}"
    for name, field in fields.items():
        expected = _shown_default(field.get_default(call_default_factory=True))
        assert rows[name].strip("`") == expected, f"settings.md: {name} default {rows[name]!r}, code {expected!r}"


# ---- metrics --------------------------------------------------------------------------------


def test_every_metric_is_on_the_metrics_page_with_its_type_and_labels() -> None:
    metrics = Metrics(CollectorRegistry())
    wrappers = {w._name: w for w in vars(metrics).values() if isinstance(w, MetricWrapperBase)}
    families = {f.name: f.type for f in metrics.registry.collect()}
    assert families.keys() == wrappers.keys(), "every registered metric is an attribute of Metrics"
    rows = {_code(cells[0]): cells for cells in _rows(REFERENCE / "metrics.md")}
    exported = {}
    for name, kind in families.items():
        exported[name + "_total" if kind == "counter" else name] = (kind, wrappers[name]._labelnames)
    missing = sorted(set(exported) - set(rows))
    assert not missing, f"docs/reference/metrics.md has no row for metric(s) {missing}"
    stale = sorted(set(rows) - set(exported))
    assert not stale, f"docs/reference/metrics.md lists metric(s) the controller does not register: {stale}"
    for name, (kind, labels) in exported.items():
        cells = rows[name]
        assert cells[1] == kind, f"metrics.md: {name} is a {kind}, the page says {cells[1]!r}"
        shown = set(re.findall(r"`([a-z_]+)`", cells[2]))
        assert shown == set(labels), f"metrics.md: {name} has labels {sorted(labels)}, the page {sorted(shown)}"


# ---- Event reasons and conditions -----------------------------------------------------------


def _module_strings(tree: ast.Module) -> dict[str, set[str]]:
    """Module-level names bound to a string, or to a dict of strings (its values)."""
    out: dict[str, set[str]] = {}
    for node in tree.body:
        target, value = None, None
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target, value = node.targets[0], node.value
        elif isinstance(node, ast.AnnAssign):
            target, value = node.target, node.value
        if not isinstance(target, ast.Name) or value is None:
            continue
        if isinstance(value, ast.Constant) and isinstance(value.value, str):
            out[target.id] = {value.value}
        elif isinstance(value, ast.Dict):
            strings = {v.value for v in value.values if isinstance(v, ast.Constant) and isinstance(v.value, str)}
            if strings:
                out[target.id] = strings
    return out


# Where each event-writing call takes its reason: (positional index, keyword).
_REASON_ARG = {"emit_event": (None, "reason"), "workload_event": (3, None), "_warn": (2, None)}


def emitted_event_reasons() -> set[str]:
    """Every Event reason the package can emit: reasons passed to the event writers as literals or
    module constants, and module constants named ``*REASON*`` (reasons chosen at run time)."""
    reasons: set[str] = set()
    for path in (REPO / "kueue_tas").rglob("*.py"):
        tree = ast.parse(path.read_text())
        strings = _module_strings(tree)
        for name, values in strings.items():
            if "REASON" in name and all(re.fullmatch(r"[A-Z][A-Za-z]+", v) for v in values):
                reasons |= values
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            called = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
            if called not in _REASON_ARG:
                continue
            index, keyword = _REASON_ARG[called]
            arg: ast.expr | None = None
            if keyword is not None:
                arg = next((k.value for k in node.keywords if k.arg == keyword), None)
            elif index is not None and len(node.args) > index:
                arg = node.args[index]
            if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                reasons.add(arg.value)
            elif isinstance(arg, ast.Name) and arg.id in strings:
                reasons |= strings[arg.id]
            elif isinstance(arg, ast.Subscript) and isinstance(arg.value, ast.Name) and arg.value.id in strings:
                reasons |= strings[arg.value.id]
    return reasons


def active_condition_reasons() -> set[str]:
    """The reasons ``active_condition`` returns (the second item of each returned tuple)."""
    tree = ast.parse((REPO / "kueue_tas" / "controllers" / "checkstatus" / "reconciler.py").read_text())
    (func,) = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "active_condition"]
    out = set()
    for node in ast.walk(func):
        if isinstance(node, ast.Return) and isinstance(node.value, ast.Tuple):
            reason = node.value.elts[1]
            assert isinstance(reason, ast.Constant), "active_condition returns literal reasons"
            out.add(reason.value)
    return out


def test_every_event_reason_and_condition_reason_is_on_the_events_page() -> None:
    reasons = emitted_event_reasons()
    # The scan finds the writers at all: these are emitted through a literal, a module constant
    # and a dict of outcomes respectively.
    assert {"TopologyUngateFailed", "TopologyStrayPodTerminated", "TopologyAssigned"} <= reasons
    rows = {_code(cells[0]) for cells in _rows(REFERENCE / "events.md")}
    missing = sorted(reasons - rows)
    assert not missing, f"docs/reference/events.md has no row for Event reason(s) {missing}"
    conditions = active_condition_reasons()
    assert "TopologyNotFound" in conditions
    missing = sorted(conditions - rows)
    assert not missing, f"docs/reference/events.md has no row for Active condition reason(s) {missing}"
    stale = sorted(rows - reasons - conditions)
    assert not stale, f"docs/reference/events.md lists reason(s) the code never uses: {stale}"


# ---- annotations, labels, gates -------------------------------------------------------------


def _used_outside_constants(name: str) -> bool:
    pattern = re.compile(rf"\b{name}\b")
    for path in (REPO / "kueue_tas").rglob("*.py"):
        if path.name != "constants.py" and pattern.search(path.read_text()):
            return True
    return False


def documented_keys() -> set[str]:
    """Every key the annotations page must name: our constraint keys (default prefix), every
    string of ours in constants.py, the level-names annotation, and each other ``*_ANNOTATION``
    the code actually reads."""
    keys = {LEVEL_NAMES_ANNOTATION}
    for name, value in vars(c).items():
        if not isinstance(value, str):
            continue
        if name.startswith("SUFFIX_"):
            keys.add(c.DEFAULT_ANNOTATION_PREFIX + value)
        elif value.startswith(c.DEFAULT_ANNOTATION_PREFIX) or (
            name.endswith("_ANNOTATION") and _used_outside_constants(name)
        ):
            keys.add(value)
    return keys


def test_every_annotation_label_and_gate_is_on_the_annotations_page() -> None:
    page = (REFERENCE / "annotations.md").read_text()
    shown = set(re.findall(r"`([^`\s]+)`", page))
    keys = documented_keys()
    assert f"{c.DEFAULT_ANNOTATION_PREFIX}{c.SUFFIX_REQUIRED_TOPOLOGY}" in keys
    assert c.KUEUE_SLICE_REPLACEMENT_ANNOTATION in keys
    missing = sorted(keys - shown)
    assert not missing, f"docs/reference/annotations.md does not name {missing}"
    ours = {k for k in shown if k.startswith(c.DEFAULT_ANNOTATION_PREFIX)}
    stale = sorted(ours - keys)
    assert not stale, f"docs/reference/annotations.md names key(s) the code does not define: {stale}"


# ---- command line ---------------------------------------------------------------------------


def _load_hook() -> ModuleType:
    spec = importlib.util.spec_from_file_location("cli_reference", DOCS / "hooks" / "cli_reference.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _commands(parser: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], Any]]:
    yield path, parser
    for action in parser._actions:
        if action.__class__.__name__ == "_SubParsersAction":
            for name, sub in action.choices.items():
                if name in action._name_parser_map and sub.prog.endswith(name):
                    yield from _commands(sub, (*path, name))


def test_the_cli_page_is_generated_with_every_command_and_option() -> None:
    config = yaml.safe_load((REPO / "mkdocs.yml").read_text())
    assert "docs/hooks/cli_reference.py" in config["hooks"]
    hook = _load_hook()
    assert hook.MARKER in (REFERENCE / "cli.md").read_text()
    text = hook.on_page_markdown((REFERENCE / "cli.md").read_text(), None, None, None)
    assert hook.MARKER not in text
    commands = list(_commands(build_parser()))
    assert {p for p, _ in commands} >= {("plan",), ("run",), ("describe",), ("describe", "workload"), ("capacity",)}
    for path, parser in commands:
        heading = f"## `kueue-tas{''.join(' ' + p for p in path)}`"
        assert heading in text, f"the CLI page has no section {heading}"
        section = text.split(heading, 1)[1].split("\n## ", 1)[0]
        for action in parser._actions:
            for option in action.option_strings:
                assert option in section, f"the CLI page's {heading} does not show {option}"


# ---- the site as a whole --------------------------------------------------------------------


def _nav_pages(nav: Any) -> Iterator[str]:
    if isinstance(nav, str):
        yield nav
    elif isinstance(nav, list):
        for item in nav:
            yield from _nav_pages(item)
    elif isinstance(nav, dict):
        for value in nav.values():
            yield from _nav_pages(value)


def test_every_page_of_the_site_is_in_its_navigation() -> None:
    config = yaml.safe_load((REPO / "mkdocs.yml").read_text())
    in_nav = set(_nav_pages(config["nav"]))
    pages = {str(p.relative_to(DOCS)) for p in DOCS.rglob("*.md")}
    assert pages - in_nav == set(), f"pages not reachable from the nav: {sorted(pages - in_nav)}"
    assert in_nav - pages == set(), f"nav entries without a page: {sorted(in_nav - pages)}"


def test_the_readme_is_a_front_page_that_states_the_two_commands() -> None:
    readme = (REPO / "README.md").read_text()
    assert len(readme.splitlines()) <= 200, "README.md is the front page: the rest belongs on the docs site"
    assert "make demo" in readme and "make test" in readme
    assert "make test" in (REPO / ".ci" / "run").read_text().splitlines()[-1]
