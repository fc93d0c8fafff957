"""docs/architecture.md says what the code says (issue 29): its package sections are the
packages' own docstrings, its layer figures the import contracts, and its invariants are
numbered so that code and tests can cite them."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]
PAGE = (ROOT / "docs" / "architecture.md").read_text()


def hook() -> ModuleType:
    spec = importlib.util.spec_from_file_location("packages_hook", ROOT / "docs" / "hooks" / "packages.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_package_and_subpackage_has_a_docstring_section() -> None:
    packages = hook()
    rendered = packages.packages_markdown()
    found = sorted(p.parent.relative_to(ROOT).as_posix() for p in (ROOT / "kueue_tas").glob("*/__init__.py"))
    found += sorted(p.parent.relative_to(ROOT).as_posix() for p in (ROOT / "kueue_tas").glob("*/*/__init__.py"))
    for package in found:
        assert f"`{package}`" in rendered, f"{package} has no section (docs/hooks/packages.py ORDER?)"
        doc = packages.docstring(ROOT / package / "__init__.py")
        assert doc.strip(), f"{package}/__init__.py says nothing about what the package is for"
    assert packages.PACKAGES_MARKER in PAGE and packages.LAYERS_MARKER in PAGE


def test_every_layers_contract_is_drawn() -> None:
    packages = hook()
    figure = packages.layers_markdown()
    for contract in packages.contracts():
        assert contract["name"] in figure


def test_invariants_are_numbered_in_order_and_every_citation_exists() -> None:
    numbers = [int(n) for n in re.findall(r"^### I(\d+)\. ", PAGE, re.M)]
    assert numbers == list(range(1, len(numbers) + 1)) and len(numbers) >= 10
    cited: dict[int, list[str]] = {}
    for path in [*(ROOT / "kueue_tas").rglob("*.py"), *(ROOT / "tests").rglob("*.py")]:
        for n in re.findall(r"\b(?:invariant )?I(\d{1,2})\b(?=[:)\s,.])", path.read_text()):
            cited.setdefault(int(n), []).append(path.relative_to(ROOT).as_posix())
    unknown = {n: paths for n, paths in cited.items() if n not in numbers}
    assert not unknown, f"cited invariants that docs/architecture.md does not number: {unknown}"
    assert {1, 7, 11} <= set(cited), "the code cites its invariants (I1, I7, I11 at least)"
