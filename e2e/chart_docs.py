"""What charts/kueue-tas documents, made from its sources so that it cannot go stale.

- README.md's values table, from the ``# --`` comments of values.yaml (helm-docs' convention:
  the comment documents the key right below it, and a documented map is one row).
- values.schema.json's ``config``, from the controller's own settings model
  (``kueue_tas.runtime.config.Settings``): names in camelCase, types, bounds and choices, the
  feature-gate names of ``kueue_tas.topology.features``.

``python -m e2e.chart_docs`` rewrites both; tests/project/test_chart.py fails while either is stale.
"""

from __future__ import annotations

import json
import re
from typing import Any, Final

import yaml

from e2e.helm import CHART_DIR
from kueue_tas.runtime.config import Settings
from kueue_tas.topology import features

VALUES: Final = CHART_DIR / "values.yaml"
README: Final = CHART_DIR / "README.md"
SCHEMA: Final = CHART_DIR / "values.schema.json"
TABLE_START: Final = "<!-- values table: made by `python -m e2e.chart_docs`, do not edit -->"
TABLE_END: Final = "<!-- end of values table -->"

# Settings the chart sets itself from the release (names, namespaces, ports, the certificate's
# source); everything else in Settings is a value under `config`.
DERIVED_SETTINGS: Final = frozenset(
    {
        "lease_name",
        "lease_namespace",
        "health_bind",
        "metrics_bind",
        "webhook_bind",
        "webhook_cert_dir",
        "webhook_namespace",
        "webhook_secret",
        "webhook_configuration",
        "webhook_service",
        "kubeconfig",
    }
)
_KEY = re.compile(r"^(?P<indent> *)(?P<key>[A-Za-z0-9_.-]+):(?:\s|$)")
_DOC = re.compile(r"^\s*# -- ?(?P<text>.*)$")


def camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


def documented_keys(text: str) -> list[tuple[str, str]]:
    """(dotted key, description) of every key that a ``# --`` comment documents, in file order."""
    out: list[tuple[str, str]] = []
    stack: list[tuple[int, str]] = []
    pending: str | None = None
    for line in text.splitlines():
        doc = _DOC.match(line)
        if doc:
            pending = doc.group("text").strip()
            continue
        match = _KEY.match(line)
        if not match:
            if line.strip() and not line.lstrip().startswith("#"):
                pending = None
            continue
        indent = len(match.group("indent"))
        while stack and stack[-1][0] >= indent:
            stack.pop()
        stack.append((indent, match.group("key")))
        if pending is not None:
            out.append((".".join(k for _, k in stack), pending))
            pending = None
    return out


def _lookup(values: dict[str, Any], dotted: str) -> Any:
    node: Any = values
    for part in dotted.split("."):
        node = node[part]
    return node


def _type_name(value: Any) -> str:
    for kind, name in ((bool, "bool"), (int, "int"), (float, "float"), (str, "string"), (list, "list")):
        if isinstance(value, kind):
            return name
    return "object"


def _schema_type(spec: dict[str, Any]) -> str:
    """A setting's type as the table shows it: ``list`` or ``list/null``, ``number``, ..."""
    names = {"array": "list", "boolean": "bool", "integer": "int", "null": "null"}
    options = spec.get("anyOf") or [spec]
    return "/".join(names.get(str(o.get("type")), str(o.get("type", "object"))) for o in options)


def values_table(text: str) -> str:
    values = yaml.safe_load(text)
    settings = config_schema()["properties"]
    rows = ["| Key | Type | Default | Description |", "|-----|------|---------|-------------|"]
    for key, description in sorted(documented_keys(text)):
        value = _lookup(values, key)
        section, _, name = key.partition(".")
        kind = _schema_type(settings[name]) if section == "config" and name in settings else _type_name(value)
        default = json.dumps(value, separators=(",", ":"))
        text = description.replace("|", "\\|")
        rows.append(f"| {key} | {kind} | `{default}` | {text} |")
    return "\n".join(rows)


def readme_with_table(readme: str, table: str) -> str:
    start, end = readme.index(TABLE_START), readme.index(TABLE_END)
    return readme[: start + len(TABLE_START)] + "\n" + table + "\n" + readme[end:]


def config_schema() -> dict[str, Any]:
    """JSON schema of the `config` values: Settings' own, camelCase, less what the chart derives."""
    model = Settings.model_json_schema()
    descriptions = dict(documented_keys(VALUES.read_text(encoding="utf-8")))
    properties: dict[str, Any] = {}
    for name, spec in model["properties"].items():
        if name in DERIVED_SETTINGS:
            continue
        prop = {k: v for k, v in spec.items() if k not in ("title", "default")}
        if name == "feature_gates":
            prop["propertyNames"] = {"enum": sorted(features.KUEUE_DEFAULTS)}
        key = camel(name)
        if f"config.{key}" in descriptions:
            prop = {"description": descriptions[f"config.{key}"], **prop}
        properties[key] = prop
    return {
        "type": "object",
        "description": "kueue-tas's settings (kueue_tas/runtime/config.py), camelCase",
        "additionalProperties": False,
        "properties": properties,
    }


def schema_with_config(schema: dict[str, Any]) -> dict[str, Any]:
    return {**schema, "properties": {**schema["properties"], "config": config_schema()}}


def dump_schema(schema: dict[str, Any]) -> str:
    return json.dumps(schema, indent=2) + "\n"


def main() -> int:
    text = VALUES.read_text(encoding="utf-8")
    README.write_text(readme_with_table(README.read_text(encoding="utf-8"), values_table(text)), encoding="utf-8")
    SCHEMA.write_text(dump_schema(schema_with_config(json.loads(SCHEMA.read_text(encoding="utf-8")))), encoding="utf-8")
    print(f"wrote {README} and {SCHEMA}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
