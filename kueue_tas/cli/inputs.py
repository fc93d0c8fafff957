"""Reading Kubernetes manifests from files: YAML or JSON, multi-document, ``kind: List``, ``-`` for stdin.

Every problem is one ``InputError`` line naming the file, the object and the field. An object
given twice (the same dump passed twice, a Node in two files) is read once when the copies are
identical (with one warning per pair of files) and refused when they differ: counting it twice
would add its capacity up.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pydantic

from kueue_tas.api.kinds import KubeObject, parse_object
from kueue_tas.api.shapes import error_line, json_kind
from kueue_tas.cli.documents import DocumentError, collector_paused, parse_documents


class InputError(ValueError):
    pass


@dataclass(frozen=True, slots=True)
class Origin:
    source: str
    document: int  # 1-based
    item: int | None = None  # index in a List's items / a top-level array

    def __str__(self) -> str:
        where = f"{self.source} (document {self.document}"
        return where + (f", item {self.item})" if self.item is not None else ")")


def _is_list(doc: dict[str, Any]) -> bool:
    kind = doc.get("kind")
    return kind == "List" or (isinstance(kind, str) and kind.endswith("List") and "items" in doc)


def _objects_of(
    value: Any, source: str, number: int, where: str, item: int | None = None
) -> Iterator[tuple[Origin, dict[str, Any]]]:
    """The objects of one document: itself, or the items of a top-level array or of a ``List``."""
    if isinstance(value, dict) and not _is_list(value):
        yield Origin(source, number, item), value
        return
    if isinstance(value, dict):
        items = value.get("items")
        if items is None:
            return
        where = f"{where}: {value.get('kind')}: items"
        if not isinstance(items, list):
            raise InputError(f"{where}: expected an array, got {json_kind(items)}")
    elif isinstance(value, list):
        items = value
    else:
        raise InputError(f"{where}: expected a Kubernetes object (a mapping), got {json_kind(value)}")
    for i, entry in enumerate(items):
        if entry is None or not isinstance(entry, dict | list):
            raise InputError(f"{where}[{i}]: expected a Kubernetes object (a mapping), got {json_kind(entry)}")
        yield from _objects_of(entry, source, number, f"{where}[{i}]", i)


def _identity(obj: KubeObject) -> tuple[str, str, str]:
    return obj.kind, obj.metadata.namespace or "", obj.metadata.name


def _label(obj: KubeObject) -> str:
    ns = obj.metadata.namespace
    return f"{obj.kind}/{ns + '/' if ns else ''}{obj.metadata.name}"


def _read_text(path: str) -> tuple[str, str]:
    if path == "-":
        return sys.stdin.read(), "<stdin>"
    try:
        with open(path, encoding="utf-8") as fh:
            return fh.read(), path
    except OSError as exc:
        raise InputError(f"{path}: cannot read: {exc.strerror or exc}") from exc
    except UnicodeDecodeError as exc:
        raise InputError(f"{path}: cannot read: not UTF-8 text ({exc.reason} at byte {exc.start})") from exc


def _parse(origin: Origin, raw: dict[str, Any]) -> KubeObject | None:
    kind = raw.get("kind", "<no kind>")
    metadata = raw.get("metadata")
    if metadata is not None and not isinstance(metadata, dict):
        raise InputError(f"{origin.source}: {kind}: metadata: must be a mapping")
    name = (metadata or {}).get("name") or "<no name>"
    try:
        obj = parse_object(raw)
    except pydantic.ValidationError as exc:
        raise InputError(f"{origin.source}: {kind}/{name}: {error_line(exc)}") from exc
    if obj is not None and not obj.metadata.name:
        raise InputError(f"{origin.source}: {kind}/<no name>: metadata.name: is required")
    return obj


def read_objects(paths: list[str]) -> tuple[list[KubeObject], list[str]]:
    """Parsed objects in input order, plus warnings about skipped documents and identical copies."""
    with collector_paused():
        return _read_objects(paths)


def _read_objects(paths: list[str]) -> tuple[list[KubeObject], list[str]]:
    objects: list[KubeObject] = []
    warnings: list[str] = []
    seen: dict[tuple[str, str, str], tuple[Origin, dict[str, Any]]] = {}
    copies: dict[tuple[str, str], list[str]] = {}  # (first file, second file) -> objects read once
    for path in paths:
        text, source = _read_text(path)
        try:
            docs = parse_documents(text)
        except DocumentError as exc:
            raise InputError(f"{source}: {exc}") from exc
        for number, doc in enumerate(docs, start=1):
            if doc is None:
                continue
            for origin, raw in _objects_of(doc, source, number, f"{source}: document {number}"):
                obj = _parse(origin, raw)
                if obj is None:
                    kind, name = raw.get("kind", "<no kind>"), (raw.get("metadata") or {}).get("name", "<no name>")
                    warnings.append(f"{source}: skipping {raw.get('apiVersion', '?')} {kind}/{name}: kind not read")
                    continue
                key = _identity(obj)
                if key in seen:
                    first, first_raw = seen[key]
                    if first_raw != raw:
                        raise InputError(f"{_label(obj)}: given twice, differently: in {first} and in {origin}")
                    copies.setdefault((first.source, origin.source), []).append(_label(obj))
                    continue
                seen[key] = (origin, raw)
                objects.append(obj)
    for (earlier, later), labels in copies.items():
        where = f"{later} repeats {earlier}" if earlier != later else f"{earlier}: objects given more than once"
        warnings.append(f"{where}: {len(labels)} identical copies read once (e.g. {labels[0]})")
    return objects, warnings
