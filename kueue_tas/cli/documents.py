"""Text -> YAML/JSON documents, within limits that keep hostile files from crashing or hanging ``plan``.

Three limits, each refused with one line before anything recurses over the data:

* nesting deeper than ``MAX_DEPTH`` levels (Python's recursion, and libyaml's C recursion, which
  ends in a segmentation fault rather than an exception);
* YAML aliases that expand the document by more than ``MAX_ALIAS_EXPANSION`` nodes (a
  "billion laughs" file is a few hundred bytes that every later walk would expand);
* numbers and dates PyYAML or ``json`` cannot build (a 5000-digit integer, month 13).

Speed: libyaml's C loader builds a 50,000-node dump about 6x faster than the pure-Python one,
but composes recursively in C. It is used when the text provably nests shallowly and has no
anchors (so no aliases); anything else goes through the guarded loader, libyaml's parser under
a Python composer that counts depth and alias expansion as it builds.
"""

from __future__ import annotations

import contextlib
import gc
import json
import re
from collections.abc import Iterator
from typing import Any, cast

import yaml
from yaml.composer import Composer
from yaml.constructor import SafeConstructor
from yaml.events import AliasEvent
from yaml.nodes import CollectionNode, Node, SequenceNode
from yaml.parser import Parser
from yaml.reader import Reader
from yaml.resolver import Resolver
from yaml.scanner import Scanner

MAX_DEPTH = 100
MAX_ALIAS_EXPANSION = 100_000
# libyaml composes at least this deep without exhausting an 8 MiB C stack (5,000 measured).
_C_SAFE_DEPTH = 1000
# YAML's other line breaks, as "\n" for the regular expressions' "^".
_BREAKS = str.maketrans({"\r": "\n", "\x85": "\n", "\u2028": "\n", "\u2029": "\n"})
_BLOCK_PREFIX = re.compile(r"^[ \t?:\-]+", re.MULTILINE)
_BRACKET = re.compile(r"[\[{]\s*[\]}]?")  # an opener, with its closer when closed right away
_BEFORE_OPENER = frozenset(" \t\n\x0b\x0c\ufeff:?,[{-")
_DOCUMENT_START = re.compile(r"^---(?=\s|\Z)", re.MULTILINE)

try:
    from yaml import CSafeLoader as _FastLoader
    from yaml._yaml import CParser as _EventParser

    _HAVE_LIBYAML = True
except ImportError:  # PyYAML built without libyaml: the pure-Python loader, guarded
    from yaml import SafeLoader as _FastLoader  # type: ignore[assignment]

    _HAVE_LIBYAML = False


class DocumentError(ValueError):
    """The text is not valid YAML or JSON, or breaks a limit; one line, without the file name."""


class _Refused(yaml.YAMLError):
    def __init__(self, problem: str, node_mark: Any) -> None:
        super().__init__(problem)
        self.problem = problem
        self.problem_mark = node_mark


class _GuardedComposer(Composer):
    """PyYAML's composer, counting nesting depth and the nodes aliases add.

    An alias is the very node of its anchor, so a collection's size and height are computed
    once, when it closes, and an alias adds its target's; an alias to a collection still open
    (a cycle) is refused.
    """

    def compose_document(self) -> Node | None:
        self._depth = 0
        self._added = 0
        self._shape: dict[int, tuple[int, int]] = {}  # id(closed collection) -> (nodes, height)
        return super().compose_document()

    def compose_node(self, parent: Node | None, index: Any) -> Node | None:
        event = self.peek_event()  # type: ignore[attr-defined]  # the parser's, mixed in beside
        if isinstance(event, AliasEvent) and event.anchor in self.anchors:
            target = self.anchors[event.anchor]
            if isinstance(target, CollectionNode):
                if id(target) not in self._shape:
                    raise _Refused(f"alias *{event.anchor} refers to a collection that contains it", event.start_mark)
                size, height = self._shape[id(target)]
                self._added += size
                if self._added > MAX_ALIAS_EXPANSION:
                    raise _Refused(
                        f"YAML aliases expand the document by more than {MAX_ALIAS_EXPANSION} nodes", event.start_mark
                    )
                if self._depth + height > MAX_DEPTH:
                    raise _Refused(
                        f"nested deeper than {MAX_DEPTH} levels (through alias *{event.anchor})", event.start_mark
                    )
            return super().compose_node(parent, index)
        self._depth += 1
        if self._depth > MAX_DEPTH:
            raise _Refused(f"nested deeper than {MAX_DEPTH} levels", event.start_mark)
        node = super().compose_node(parent, index)
        self._depth -= 1
        if isinstance(node, CollectionNode):
            children = node.value if isinstance(node, SequenceNode) else [n for pair in node.value for n in pair]
            shapes = [self._shape.get(id(child), (1, 1)) for child in children]
            self._shape[id(node)] = (1 + sum(s for s, _ in shapes), 1 + max((h for _, h in shapes), default=0))
        return node


class _PureGuardedLoader(Reader, Scanner, Parser, _GuardedComposer, SafeConstructor, Resolver):
    """PyYAML's own parser (a state machine, no recursion and no depth limit of its own) under the
    guarded composer: the limits met are ours, so their words are too."""

    def __init__(self, stream: str) -> None:
        Reader.__init__(self, stream)
        Scanner.__init__(self)
        Parser.__init__(self)
        _GuardedComposer.__init__(self)
        SafeConstructor.__init__(self)
        Resolver.__init__(self)


if _HAVE_LIBYAML:

    class _GuardedLoader(_EventParser, _GuardedComposer, SafeConstructor, Resolver):
        """libyaml's event parser; composing, constructing and resolving in Python."""

        def __init__(self, stream: str) -> None:
            _EventParser.__init__(self, stream)
            _GuardedComposer.__init__(self)
            SafeConstructor.__init__(self)
            Resolver.__init__(self)

    # CParser defines its own (C) composer; the guarded one must win.
    for _name in ("check_node", "get_node", "get_single_node"):
        setattr(_GuardedLoader, _name, getattr(Composer, _name))
else:
    _GuardedLoader = _PureGuardedLoader  # type: ignore[misc,assignment]


def _depth_bound(text: str) -> int:
    """An upper bound on the nesting depth of YAML ``text``, cheap enough to run on every file.

    Block collections: each starts at a deeper column than its parent (a sequence under a
    mapping key may share its column, hence x2), at the latest right after its line's run of
    indentation and ``-``/``?``/``:`` indicators. Flow collections: a real ``[`` or ``{`` follows
    whitespace, an indicator or another opener (``a[`` is text), and one closed right away
    (``{}``) nests nothing; every other such opener is counted as if never closed. A
    ``---`` line ends every collection, so the flow count restarts there.
    """
    if any(ch in text for ch in "\r\x85\u2028\u2029"):
        text = text.translate(_BREAKS)
    prefix = max(map(len, _BLOCK_PREFIX.findall(text)), default=0)
    return 2 * (prefix + 1) + max(map(_open_brackets, _DOCUMENT_START.split(text))) + 1


def _open_brackets(part: str) -> int:
    """Flow openers in ``part`` that may nest: not text (``a[0]``), not closed right away (``{}``)."""
    count = 0
    for m in _BRACKET.finditer(part):
        start = m.start()
        if start and part[start - 1] not in _BEFORE_OPENER:
            continue
        if len(m.group()) > 1 and m.group()[-1] in "]}":
            continue
        count += 1
    return count


def _check_depth(root: Any) -> None:
    """Refuses a built document nested deeper than ``MAX_DEPTH`` (iteratively: no recursion)."""
    stack: list[tuple[Any, int]] = [(root, 1)]
    while stack:
        value, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise DocumentError(f"nested deeper than {MAX_DEPTH} levels")
        children = value.values() if isinstance(value, dict) else value
        stack.extend((child, depth + 1) for child in children if isinstance(child, dict | list))


def _yaml_error(exc: yaml.YAMLError) -> DocumentError:
    mark = getattr(exc, "problem_mark", None)
    where = f"line {mark.line + 1}: " if mark is not None else ""
    problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
    return DocumentError(f"{where}not valid YAML or JSON: {problem}")


def _slow_error(text: str) -> DocumentError:
    """The error the pure-Python guarded loader finds in ``text``, which libyaml refused."""
    try:
        with contextlib.suppress(ValueError, OverflowError):
            for _ in yaml.load_all(text, Loader=cast(Any, _PureGuardedLoader)):
                pass
    except yaml.YAMLError as exc:
        return _yaml_error(exc)
    return DocumentError("not valid YAML")


def _load_json(text: str) -> list[Any] | None:
    """The one JSON value of ``text``; None when it is not JSON (YAML is then tried)."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        return None
    except RecursionError:
        raise DocumentError(f"nested deeper than {MAX_DEPTH} levels") from None
    except ValueError as exc:  # e.g. an integer of more digits than Python converts
        raise DocumentError(f"not valid JSON: {exc}") from None
    if isinstance(value, dict | list):
        _check_depth(value)
    return [value]


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """Builds millions of objects, none of them garbage: the cyclic collector would scan the
    growing heap again and again (a 50,000-node ``kind: List`` document: 4x the time)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def parse_documents(text: str) -> list[Any]:
    """The documents of a YAML or JSON text (JSON first when it looks like JSON)."""
    with collector_paused():
        return _parse(text)


def _parse(text: str) -> list[Any]:
    if text.lstrip().startswith(("{", "[")):
        docs = _load_json(text)
        if docs is not None:
            return docs
    bound = _depth_bound(text)
    fast = _HAVE_LIBYAML and "&" not in text and bound <= _C_SAFE_DEPTH
    try:
        if not fast:
            return list(yaml.load_all(text, Loader=cast(Any, _GuardedLoader)))
        docs = list(yaml.load_all(text, Loader=_FastLoader))
    except _Refused as exc:
        raise _yaml_error(exc) from None
    except yaml.YAMLError as exc:
        if _HAVE_LIBYAML and bound > MAX_DEPTH:
            # libyaml has limits of its own (a nesting limit since PyYAML 6.0.3, worded its way):
            # a text that may nest past ours is read again by the pure parser, whose only
            # limits are ours, so the answer does not depend on the libyaml release installed.
            raise _slow_error(text) from None
        raise _yaml_error(exc) from None
    except (ValueError, OverflowError) as exc:  # a scalar PyYAML resolves but cannot build
        raise DocumentError(f"not valid YAML: {exc}") from None
    for doc in docs:
        if isinstance(doc, dict | list):
            _check_depth(doc)
    return docs
