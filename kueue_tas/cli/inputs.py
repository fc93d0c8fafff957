"""Reading Kubernetes manifests from files: YAML or JSON, multi-document, ``kind: List``, ``-`` for stdin."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from typing import Any

import pydantic
import yaml

from kueue_tas.api.kinds import KubeObject, parse_object


class InputError(ValueError):
    pass


def _documents(text: str, source: str) -> Iterator[Any]:
    stripped = text.lstrip()
    if stripped.startswith(("{", "[")):
        try:
            yield json.loads(text)
            return
        except json.JSONDecodeError:
            pass  # not one JSON value: YAML is a superset, try it
    try:
        yield from yaml.safe_load_all(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise InputError(f"{source}:{where}: not valid YAML or JSON: {problem}") from exc


def _flatten(doc: Any) -> Iterator[dict[str, Any]]:
    if doc is None:
        return
    if isinstance(doc, list):
        for item in doc:
            yield from _flatten(item)
        return
    if not isinstance(doc, dict):
        return
    if doc.get("kind") == "List" or (str(doc.get("kind", "")).endswith("List") and "items" in doc):
        for item in doc.get("items") or []:
            yield from _flatten(item)
        return
    yield doc


def read_objects(paths: list[str]) -> tuple[list[KubeObject], list[str]]:
    """Parsed objects in input order, plus warnings about skipped documents."""
    objects: list[KubeObject] = []
    warnings: list[str] = []
    for path in paths:
        if path == "-":
            text, source = sys.stdin.read(), "<stdin>"
        else:
            try:
                with open(path, encoding="utf-8") as fh:
                    text = fh.read()
            except OSError as exc:
                raise InputError(f"{path}: cannot read: {exc.strerror or exc}") from exc
            except UnicodeDecodeError as exc:
                raise InputError(f"{path}: cannot read: not UTF-8 text ({exc.reason} at byte {exc.start})") from exc
            source = path
        for doc in _documents(text, source):
            for raw in _flatten(doc):
                kind = raw.get("kind", "<no kind>")
                metadata = raw.get("metadata")
                if metadata is not None and not isinstance(metadata, dict):
                    raise InputError(f"{source}: {kind}: metadata: must be a mapping")
                name = (metadata or {}).get("name", "<no name>")
                try:
                    obj = parse_object(raw)
                except pydantic.ValidationError as exc:
                    err = exc.errors()[0]
                    loc = ".".join(str(p) for p in err["loc"])
                    raise InputError(f"{source}: {kind}/{name}: {loc}: {err['msg']}") from exc
                if obj is None:
                    warnings.append(f"{source}: skipping {raw.get('apiVersion', '?')} {kind}/{name}: kind not read")
                    continue
                objects.append(obj)
    return objects, warnings
