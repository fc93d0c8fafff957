"""mkdocs hook: the architecture page's package sections and layer figure, from the code itself.

``<!-- packages -->`` becomes one section per package of ``kueue_tas`` (and one per topology
wing and reconciler folder), each the package's own ``__init__`` docstring (what it is for, its
entry points, what it never does), so the page cannot say something the package does not.
``<!-- layers -->`` becomes the import contracts of ``pyproject.toml`` (import-linter), drawn
top to bottom, the same contracts ``make lint`` enforces. ``tests/project/test_architecture_doc.py``
checks that every package has its section and every contract its figure.
"""

from __future__ import annotations

import ast
import re
import tomllib
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
PACKAGES_MARKER = "<!-- packages -->"
LAYERS_MARKER = "<!-- layers -->"
# Top-level packages in the order of their layers, bottom first; then those that stand apart.
ORDER = ("api", "topology", "capacity", "controllers", "webhook", "mapview", "cli", "kube", "runtime")


def docstring(init: Path) -> str:
    return ast.get_docstring(ast.parse(init.read_text())) or ""


def _markdown(text: str) -> str:
    """reST-ish docstring text as Markdown: ``x`` and :role:`x` become `x`; "* " lines are list
    items; "Entry points:" and "Never:" lines start bold-led paragraphs of their own."""
    text = re.sub(r":\w+:`([^`]+)`", r"`\1`", text).replace("``", "`")
    blocks: list[list[str]] = []
    for line in text.splitlines():
        line = line.strip()
        lead = re.match(r"(Entry points?|Never|Wings|Layers|Ground modules)\b[^:]*:", line)
        if not line:
            blocks.append([])
        elif line.startswith("* ") or lead or not blocks or not blocks[-1]:
            blocks.append([f"**{lead[0]}**{line[len(lead[0]) :]}" if lead else line])
        else:
            blocks[-1].append(line)
    paragraphs = [" ".join(b) for b in blocks if b]
    out: list[str] = []
    for p in paragraphs:
        joiner = "\n" if out and p.startswith("* ") and out[-1].lstrip().startswith("* ") else "\n\n"
        out.append(joiner + p if out else p)
    return "".join(out)


def subpackages(package: str) -> list[str]:
    base = ROOT / "kueue_tas" / package
    return sorted(p.parent.name for p in base.glob("*/__init__.py"))


def packages_markdown() -> str:
    sections = []
    for package in ORDER:
        init = ROOT / "kueue_tas" / package / "__init__.py"
        sections.append(f"### `kueue_tas/{package}`\n\n{_markdown(docstring(init))}")
        for sub in subpackages(package):
            text = _markdown(docstring(ROOT / "kueue_tas" / package / sub / "__init__.py"))
            sections.append(f"#### `kueue_tas/{package}/{sub}`\n\n{text}")
    return "\n\n".join(sections)


def contracts() -> list[dict[str, Any]]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    found: list[dict[str, Any]] = config["tool"]["importlinter"]["contracts"]
    return found


def layers_markdown() -> str:
    """Each layers contract as a figure, higher layers above (``a | b``: independent siblings,
    ``a : b``: siblings that may import each other); each forbidden contract as a line."""
    out = []
    every = contracts()
    for contract in every:
        if contract["type"] == "layers":
            within = ", ".join(contract.get("containers", [])) or "kueue_tas"
            rows = [f"  {layer}" for layer in contract["layers"]]
            figure = "\n    |\n".join(rows)
            title = f"**{contract['name']}** (within `{within}`; each layer may import only those below it)"
            out.append(f"{title}:\n\n```text\n{figure}\n```")
    forbidden = [c for c in every if c["type"] == "forbidden"]
    if forbidden:
        lines = [
            f"- **{c['name']}**: {', '.join(f'`{m}`' for m in c['source_modules'])} never import "
            f"{', '.join(f'`{m}`' for m in c['forbidden_modules'])}"
            + (" directly" if c.get("allow_indirect_imports") else "")
            for c in forbidden
        ]
        out.append("Forbidden imports:\n\n" + "\n".join(lines))
    return "\n\n".join(out)


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    if PACKAGES_MARKER in markdown:
        markdown = markdown.replace(PACKAGES_MARKER, packages_markdown())
    if LAYERS_MARKER in markdown:
        markdown = markdown.replace(LAYERS_MARKER, layers_markdown())
    return markdown
