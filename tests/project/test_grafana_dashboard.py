"""manifests/grafana/kueue-tas-dashboard.json: every query names metrics, labels and variables that
exist, every panel has a query, and the layout and datasource let Grafana import it as is.

PromQL is parsed with promql-parser (the Rust crate's Python binding), not with patterns: a
function, a ``by (...)`` clause or a range is then never mistaken for a metric name.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import promql_parser
import yaml
from prometheus_client.metrics import MetricWrapperBase

from kueue_tas.runtime.metrics import Metrics

REPO = Path(__file__).resolve().parents[2]
DASHBOARD = REPO / "manifests" / "grafana" / "kueue-tas-dashboard.json"
DATASOURCE = {"type": "prometheus", "uid": "${DS_PROMETHEUS}"}
# Grafana's own interval macros; any stand-in duration parses the same.
_MACRO = re.compile(r"\$\{?__(?:rate_interval|interval|range)(?:_ms|_s)?\}?")
_VARIABLE = re.compile(r"\$\{?(\w+)")
_LABEL_VALUES = re.compile(r"^\s*label_values\((?P<selector>.+),\s*(?P<label>\w+)\s*\)\s*$")
_LEGEND_LABEL = re.compile(r"\{\{\s*(\w+)\s*\}\}")
# Series names each metric type exposes (prometheus_client's counter families drop ``_total``).
_SUFFIXES = {
    "counter": ("_total",),
    "gauge": ("",),
    "histogram": ("_bucket", "_sum", "_count"),
    "summary": ("", "_sum", "_count"),
}

Catalogue = dict[str, tuple[str, frozenset[str]]]  # series name -> (family, label names)


def catalogue(metrics: Metrics) -> Catalogue:
    """What the controller's registry exposes: every series name, with its family and labels."""
    labels = {
        family.name: frozenset(wrapper._labelnames)  # prometheus_client keeps label names only here
        for wrapper in vars(metrics).values()
        if isinstance(wrapper, MetricWrapperBase)
        for family in wrapper.describe()
    }
    out: Catalogue = {}
    for family in metrics.registry.collect():
        assert family.name in labels, f"{family.name} is registered but is no attribute of Metrics"
        for suffix in _SUFFIXES[family.type]:
            out[family.name + suffix] = (family.name, labels[family.name] | ({"le"} if suffix == "_bucket" else set()))
    return out


def load() -> dict[str, Any]:
    data = json.loads(DASHBOARD.read_text())
    assert isinstance(data, dict)
    return data


def query_panels(dashboard: dict[str, Any]) -> Iterator[dict[str, Any]]:
    for panel in dashboard["panels"]:
        if panel["type"] == "row":
            yield from panel.get("panels", [])
        else:
            yield panel


def selectors(expr: promql_parser.Expr) -> list[promql_parser.VectorSelector]:
    found: list[promql_parser.VectorSelector] = []

    def visit(node: promql_parser.Expr) -> bool:
        if isinstance(node, promql_parser.VectorSelector):
            found.append(node)
        return True

    promql_parser.walk(expr, visit)
    return found


def metric_name(selector: promql_parser.VectorSelector) -> str | None:
    if selector.name:
        return str(selector.name)
    eq = [m.value for m in selector.matchers.matchers if m.name == "__name__" and m.op == promql_parser.MatchOp.Equal]
    return str(eq[0]) if eq else None


def expr_problems(where: str, text: str, known: Catalogue, legend: str = "") -> tuple[list[str], set[str], set[str]]:
    """Problems of one PromQL expression, the families it names and the labels they have."""
    try:
        expr = promql_parser.parse(_MACRO.sub("5m", text))
    except ValueError as exc:
        return [f"{where}: not PromQL ({exc}): {text}"], set(), set()
    problems: list[str] = []
    families: set[str] = set()
    labels_in_reach: set[str] = set()
    for sel in selectors(expr):
        name = metric_name(sel)
        if name is None or name not in known:
            problems.append(
                f"{where}: {name or 'a selector without a metric name'} is no series the controller exports"
            )
            continue
        family, labels = known[name]
        families.add(family)
        labels_in_reach |= labels
        for matcher in sel.matchers.matchers:
            if matcher.name != "__name__" and matcher.name not in labels:
                problems.append(f"{where}: {name} has no label {matcher.name!r}")

    def visit(node: promql_parser.Expr) -> bool:
        if isinstance(node, promql_parser.AggregateExpr) and node.modifier is not None:
            inside: set[str] = set()
            for sel in selectors(node.expr):
                inside |= known.get(metric_name(sel) or "", ("", frozenset()))[1]
            problems.extend(
                f"{where}: {node.op} by {label!r}, a label none of its metrics has"
                for label in node.modifier.labels
                if label not in inside
            )
        return True

    promql_parser.walk(expr, visit)
    problems.extend(
        f"{where}: legend {{{{{label}}}}} names no label of its metrics"
        for label in _LEGEND_LABEL.findall(legend)
        if label not in labels_in_reach
    )
    return problems, families, labels_in_reach


def dashboard_problems(dashboard: dict[str, Any], known: Catalogue) -> tuple[list[str], set[str]]:
    """Every problem found, and the metric families the panels use."""
    problems: list[str] = []
    used: set[str] = set()
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    for panel in query_panels(dashboard):
        where = f"panel {panel.get('id')} {panel.get('title')!r}"
        targets = [t for t in panel.get("targets", []) if t.get("expr", "").strip()]
        if not targets:
            problems.append(f"{where}: no query")
        if panel.get("datasource") != DATASOURCE:
            problems.append(f"{where}: datasource is not the DS_PROMETHEUS variable")
        for target in targets:
            if target.get("datasource") != DATASOURCE:
                problems.append(f"{where} {target['refId']}: datasource is not the DS_PROMETHEUS variable")
            legend = target.get("legendFormat", "")
            found, families, _ = expr_problems(f"{where} {target['refId']}", target["expr"], known, legend)
            problems += found
            used |= families
        texts = [panel.get("title", ""), *(t["expr"] for t in targets)]
        problems.extend(
            f"{where}: ${name} is not a variable of the dashboard"
            for text in texts
            for name in _VARIABLE.findall(text)
            if not name.startswith("__") and name not in variables
        )
    for name, var in variables.items():
        if var["type"] != "query":
            continue
        where = f"variable {name}"
        query = var["query"]["query"] if isinstance(var["query"], dict) else var["query"]
        if var.get("definition", query) != query:
            problems.append(f"{where}: definition and query differ")
        if var.get("datasource") != DATASOURCE:
            problems.append(f"{where}: datasource is not the DS_PROMETHEUS variable")
        match = _LABEL_VALUES.match(query)
        if match is None:
            problems.append(f"{where}: expected label_values(<selector>, <label>), got {query!r}")
            continue
        found, _, labels = expr_problems(where, match["selector"], known)
        problems += found
        if not found and match["label"] not in labels:
            problems.append(f"{where}: its metric has no label {match['label']!r}")
    return problems, used


# ---- the dashboard -------------------------------------------------------------------------------


def test_every_query_names_only_what_the_controller_exports() -> None:
    problems, _ = dashboard_problems(load(), catalogue(Metrics()))
    assert problems == []


def test_every_metric_of_the_controller_is_on_the_dashboard() -> None:
    _, used = dashboard_problems(load(), catalogue(Metrics()))
    exported = {family for family, _ in catalogue(Metrics()).values()}
    assert exported - used == set(), "add a panel for each new metric"


def test_the_required_panels_are_there() -> None:
    exprs = " ".join(t["expr"] for p in query_panels(load()) for t in p["targets"])
    for metric in (
        "kueue_tas_admissions_total",
        "kueue_tas_decision_seconds_bucket",
        "kueue_tas_ungated_pods_total",
        "kueue_tas_domain_free",
        "kueue_tas_domain_free_slots",
        "kueue_tas_free_domains",
        "kueue_tas_failed_nodes_seen_total",
        "kueue_tas_node_repairs_total",
    ):
        assert re.search(rf"\b{metric}\b", exprs), metric
    names = {v["name"] for v in load()["templating"]["list"]}
    assert {"DS_PROMETHEUS", "topology", "flavor", "level", "shape"} <= names


def test_a_renamed_metric_or_label_is_caught() -> None:
    text = DASHBOARD.read_text()
    known = catalogue(Metrics())
    renamed = json.loads(text.replace("kueue_tas_domain_free_slots", "kueue_tas_domain_slots"))
    problems, _ = dashboard_problems(renamed, known)
    assert any("kueue_tas_domain_slots is no series the controller exports" in p for p in problems)
    # The controller renaming its metric: the same dashboard against a registry without it.
    fewer = {k: v for k, v in known.items() if v[0] != "kueue_tas_free_domains"}
    problems, _ = dashboard_problems(load(), fewer)
    assert any("kueue_tas_free_domains is no series" in p for p in problems)
    assert any(p.startswith("variable level:") for p in problems)  # the variables' queries too
    relabelled = json.loads(text.replace('resource=\\"$resource\\"', 'res=\\"$resource\\"'))
    problems, _ = dashboard_problems(relabelled, known)
    assert any("kueue_tas_domain_free has no label 'res'" in p for p in problems)


def test_the_checker_reads_promql_not_text() -> None:
    known = catalogue(Metrics())
    ok = 'histogram_quantile(0.9, sum by (le) (rate(kueue_tas_decision_seconds_bucket{job="x"}[$__rate_interval])))'
    assert expr_problems("q", ok.replace('{job="x"}', ""), known)[0] == []
    assert expr_problems("q", ok, known)[0] == ["q: kueue_tas_decision_seconds_bucket has no label 'job'"]
    # a bare histogram name is no series; sum without by (...) over a labelled counter is fine
    assert expr_problems("q", "rate(kueue_tas_decision_seconds[5m])", known)[0]
    assert expr_problems("q", "sum(rate(kueue_tas_admissions_total[5m]))", known)[0] == []
    assert expr_problems("q", "sum by (reason) (kueue_tas_admissions_total)", known)[0] == [
        "q: sum by 'reason', a label none of its metrics has"
    ]
    assert expr_problems("q", '{__name__="kueue_tas_free_domains"}', known)[:2] == ([], {"kueue_tas_free_domains"})
    assert expr_problems("q", "kueue_tas_free_domains", known, "{{domain}}")[0] == [
        "q: legend {{domain}} names no label of its metrics"
    ]
    assert "not PromQL" in expr_problems("q", "sum(", known)[0][0]


def test_grafana_can_import_it_as_is() -> None:
    dash = load()
    assert dash["schemaVersion"] >= 39  # Grafana 10.4 and 11 (newer versions migrate it up)
    assert dash["uid"] == "kueue-tas" and dash["title"] and dash["id"] is None
    assert "__inputs" not in dash  # the datasource is a variable: no import prompt, provisioning works too
    (ds,) = [v for v in dash["templating"]["list"] if v["type"] == "datasource"]
    assert (ds["name"], ds["query"]) == ("DS_PROMETHEUS", "prometheus")
    panels = list(query_panels(dash))
    ids = [p["id"] for p in dash["panels"]]
    assert len(ids) == len(set(ids))
    boxes = []
    for p in dash["panels"]:
        g = p["gridPos"]
        assert g["x"] >= 0 and g["w"] > 0 and g["x"] + g["w"] <= 24 and g["h"] > 0, p["title"]
        boxes.append((g["x"], g["y"], g["x"] + g["w"], g["y"] + g["h"], p["title"]))
    for i, a in enumerate(boxes):
        for b in boxes[i + 1 :]:
            assert a[2] <= b[0] or b[2] <= a[0] or a[3] <= b[1] or b[3] <= a[1], f"{a[4]} overlaps {b[4]}"
    for p in panels:
        assert p["type"] in {"timeseries", "stat", "bargauge"}, p["title"]
        refs = [t["refId"] for t in p["targets"]]
        assert len(refs) == len(set(refs)), p["title"]
        assert p.get("description"), p["title"]


def test_the_docs_say_how_to_load_it() -> None:
    page = (REPO / "docs" / "operator-guide" / "metrics.md").read_text()
    assert "manifests/grafana/kueue-tas-dashboard.json" in page
    assert "kubectl apply -k manifests/grafana" in page


def test_the_kustomization_ships_it_to_grafanas_sidecar() -> None:
    kustomization = yaml.safe_load((DASHBOARD.parent / "kustomization.yaml").read_text())
    (generator,) = kustomization["configMapGenerator"]
    assert generator["files"] == [DASHBOARD.name]
    assert kustomization["generatorOptions"]["labels"]["grafana_dashboard"] == "1"
