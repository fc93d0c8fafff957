"""mkdocs hook: the command-line reference page is generated from ``kueue-tas``'s own parser.

A page that holds the marker line ``<!-- cli-reference -->`` gets, in its place, every command
and subcommand of :func:`kueue_tas.cli.main.build_parser` with its ``--help`` text, so the page
cannot drift from the code (``tests/project/test_docs_reference.py`` checks that every subcommand and
option comes out).
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Iterator
from typing import Any

MARKER = "<!-- cli-reference -->"


def _subcommands(parser: argparse.ArgumentParser) -> Iterator[tuple[str, argparse.ArgumentParser]]:
    """(name, parser) of each direct subcommand, aliases skipped, in the parser's order."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            seen: set[int] = set()
            for name, sub in action.choices.items():
                if id(sub) not in seen:
                    seen.add(id(sub))
                    yield name, sub


def _walk(parser: argparse.ArgumentParser, path: tuple[str, ...]) -> Iterator[tuple[tuple[str, ...], str]]:
    subs = list(_subcommands(parser))
    if path:
        yield path, parser.format_help()
    for name, sub in subs:
        yield from _walk(sub, (*path, name))


def cli_reference_markdown(prog: str = "kueue-tas") -> str:
    """Markdown for every command: a heading and its ``--help`` as a code block."""
    from kueue_tas.cli.main import build_parser  # imported here: the hook must load without it for other pages

    # argparse wraps help to the terminal's width: a fixed width makes the page the same everywhere.
    columns = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = "100"
    try:
        parser = build_parser(prog)
        parts = [f"## `{prog}`", "", "```text", parser.format_help().rstrip(), "```", ""]
        for path, help_text in _walk(parser, ()):
            parts += [f"## `{prog} {' '.join(path)}`", "", "```text", help_text.rstrip(), "```", ""]
    finally:
        if columns is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = columns
    return "\n".join(parts)


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    if MARKER not in markdown:
        return markdown
    return markdown.replace(MARKER, cli_reference_markdown())
