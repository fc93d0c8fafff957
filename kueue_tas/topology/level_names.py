"""Names for the levels of a Topology, so that a request can say ``rack`` instead of
``cloud.provider.com/topology-rack`` (pure).

An admin names the levels with the Topology annotation ``kueue-tas.io/level-names``
(``zone=topology.kubernetes.io/zone,rack=cloud.provider.com/topology-rack``); three
well-known labels are named by default (``host``, ``zone``, ``region``) unless the
annotation gives that name to another level or another name to that label. Platforms that
generate jobs for many clusters (NVIDIA Dynamo's deployment API is the model) can then write
one vocabulary and leave the label keys to each cluster's Topology.

Every annotation that takes a level accepts a name or a label key. A level that is one of
the Topology's label keys is that label, so a name never shadows a label; a name that equals
the label key of another level is refused for that reason.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from kueue_tas.api import constants as c
from kueue_tas.topology.model import PodSetRequest, SliceLayer

LEVEL_NAMES_ANNOTATION: Final = "kueue-tas.io/level-names"
ZONE_LABEL: Final = "topology.kubernetes.io/zone"
REGION_LABEL: Final = "topology.kubernetes.io/region"
DEFAULT_LEVEL_NAMES: Final[Mapping[str, str]] = {c.HOSTNAME_LABEL: "host", ZONE_LABEL: "zone", REGION_LABEL: "region"}

# A DNS-1123 label: what a user can type anywhere, and never mistaken for a prefixed label key.
_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")


@dataclass(frozen=True, slots=True)
class LevelNames:
    """name -> label key, for the levels of one Topology (in the Topology's level order)."""

    labels: Mapping[str, str] = dataclasses.field(default_factory=dict)

    def label_of(self, level: str, levels: Sequence[str]) -> str:
        """The label key ``level`` stands for; ``level`` itself when it is a label or unknown
        (the level check then names it)."""
        if level in levels:
            return level
        return self.labels.get(level, level)

    def name_of(self, label: str) -> str | None:
        return next((n for n, lbl in self.labels.items() if lbl == label), None)

    def called(self, label: str) -> str:
        """The level as a user reads it: its name when it has one, else its label."""
        return self.name_of(label) or label

    def shown(self, label: str) -> str:
        """``rack (cloud.provider.com/topology-rack)`` when the level has a name, else the label."""
        name = self.name_of(label)
        return label if name is None or name == label else f"{name} ({label})"

    def offered(self) -> str:
        """``; level names: zone, rack, host``, what an unknown-level message adds ("" without names)."""
        return f"; level names: {', '.join(self.labels)}" if self.labels else ""


def _quoted(text: str, limit: int = 60) -> str:
    """``text`` quoted, cut to ``limit`` characters (a 100 kB annotation stays one short line)."""
    return repr(text) if len(text) <= limit else f"{text[:limit]!r}... ({len(text)} characters)"


def _entries(raw: str) -> list[tuple[str, str]] | str:
    """The (name, label) pairs of ``raw``, or the first part that is not ``name=label``."""
    out = []
    for part in raw.split(","):
        name, sep, label = part.strip().partition("=")
        if not sep or not name.strip() or not label.strip():
            return part.strip()
        out.append((name.strip(), label.strip()))
    return out


def _checked(raw: str | None, levels: Sequence[str]) -> tuple[list[tuple[str, str]], str | None]:
    """The annotation's (name, label) pairs and what is wrong with them (pairs [] when wrong)."""
    if raw is None:
        return [], None
    entries = _entries(raw)
    if isinstance(entries, str):
        which = "" if entries == raw.strip() else f"{_quoted(entries)} is not name=label; "
        return [], f"invalid value {_quoted(raw)}: {which}expected name=label[,name=label...]"
    seen_names: dict[str, str] = {}
    seen_labels: dict[str, str] = {}
    for name, label in entries:
        if not _NAME.fullmatch(name):
            problem = (
                f"invalid name {_quoted(name)}: must be a lowercase DNS label (a-z, 0-9 and '-', at most 63 characters)"
            )
        elif label not in levels:
            problem = f"name {name!r}: {_quoted(label)} is not a level of this Topology (levels: {', '.join(levels)})"
        elif name in levels and name != label:
            problem = f"name {name!r} is the label key of another level"
        elif name in seen_names:
            problem = f"name {name!r} given twice ({seen_names[name]}, {label})"
        elif label in seen_labels:
            problem = f"label {label!r} named twice ({seen_labels[label]}, {name})"
        else:
            seen_names[name], seen_labels[label] = label, name
            continue
        return [], problem
    return entries, None


def level_names_problem(raw: str | None, levels: Sequence[str]) -> str | None:
    """What is wrong with the annotation value ``raw`` on a Topology with ``levels``, in one line
    (without the object and key: callers name those), or None."""
    return _checked(raw, levels)[1]


def level_names(raw: str | None, levels: Sequence[str]) -> LevelNames:
    """The names of ``levels``: the annotation's (when ``level_names_problem`` finds none; an
    invalid annotation is the caller's to refuse) and the defaults it leaves free."""
    given = dict(_checked(raw, levels)[0])
    taken = set(given.values())
    for label, name in DEFAULT_LEVEL_NAMES.items():
        if label in levels and label not in taken and name not in given and name not in levels:
            given[name] = label
    order = {label: i for i, label in enumerate(levels)}
    return LevelNames(dict(sorted(given.items(), key=lambda item: order[item[1]])))


def names_a_level(request: PodSetRequest, levels: Sequence[str]) -> bool:
    """Whether ``request`` asks for a level that is not one of ``levels``' label keys."""
    t = request.topology
    if t is None:
        return False
    asked = (t.required, t.preferred, t.slice_level, *(x.level for x in t.slice_layers))
    return any(level is not None and level not in levels for level in asked)


def resolve_request(request: PodSetRequest, levels: Sequence[str], names: LevelNames) -> PodSetRequest:
    """``request`` with every level name replaced by its label key."""
    t = request.topology
    if t is None or not names.labels or not names_a_level(request, levels):
        return request

    def label(level: str | None) -> str | None:
        return None if level is None else names.label_of(level, levels)

    resolved = dataclasses.replace(
        t,
        required=label(t.required),
        preferred=label(t.preferred),
        slice_level=label(t.slice_level),
        slice_layers=tuple(SliceLayer(names.label_of(x.level, levels), x.size) for x in t.slice_layers),
    )
    return request if resolved == t else dataclasses.replace(request, topology=resolved)
