"""Whatever limits and wording the installed libyaml has, a too-deep document is refused in our words."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from kueue_tas.cli import documents


class _LibyamlWithItsOwnLimit:
    """Stands for a libyaml release that refuses deep nesting before our composer counts it."""

    def __init__(self, stream: str) -> None:
        raise yaml.parser.ParserError(None, None, "exceeded maximum nesting depth (a future wording)", None)


@pytest.mark.parametrize(
    "text",
    ["a: " + "[" * 5_000 + "]" * 5_000, "".join("  " * i + "a:\n" for i in range(300))],
    ids=["flow", "block"],
)
def test_deep_text_refused_by_the_parser_gets_our_message(monkeypatch: pytest.MonkeyPatch, text: str) -> None:
    if not documents._HAVE_LIBYAML:
        pytest.skip("PyYAML built without libyaml")
    monkeypatch.setattr(documents, "_GuardedLoader", _LibyamlWithItsOwnLimit)
    monkeypatch.setattr(documents, "_FastLoader", _LibyamlWithItsOwnLimit)
    with pytest.raises(documents.DocumentError) as err:
        documents.parse_documents(text)
    assert f"nested deeper than {documents.MAX_DEPTH} levels" in str(err.value)
    assert "future wording" not in str(err.value)


def test_a_shallow_syntax_error_keeps_the_parser_words() -> None:
    with pytest.raises(documents.DocumentError) as err:
        documents.parse_documents("a: [1, 2\nb: }")
    assert "not valid YAML or JSON" in str(err.value)


def test_the_pure_loader_reads_what_libyaml_reads() -> None:
    text = "a:\n  b: [1, {c: d}]\n---\n- x\n"
    pure: list[Any] = list(yaml.load_all(text, Loader=documents._PureGuardedLoader))  # type: ignore[arg-type]
    assert pure == documents.parse_documents(text)
