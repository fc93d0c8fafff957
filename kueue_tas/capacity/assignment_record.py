"""Our own record of the assignments we wrote, and the check that the annotation still holds them.

The assignment annotation lives in ``metadata``, which anyone allowed to edit the Workload can
change. Our check entry lives in ``status`` (the ``workloads/status`` subresource, which
ordinary users are not granted), and we write it in the same decision: its message ends with
``[record <PodSet>=<digest>, ...]``, one digest per PodSet we assigned, over the Workload's UID,
the PodSet name and the assignment's content (levels and domains, in any order and any
encoding, so that re-encoding or another check of ours merging its PodSets in changes nothing).

``assignment_tampering`` compares the annotation with that record. A Ready entry without a
record (written by a version before records existed) trusts the annotation as written.

A node repair rewrites an admitted workload's annotation and then its record: two writes, and a
restart between them would leave an annotation that departs from the record. So the repair
first announces itself on the entry, ``... [repairing <PodSet>=<digest>, ...] [record ...]``:
while that tag stands, the annotation may hold either assignment (both are decisions of ours,
and the old one's slots stay charged until the new record is written). Whoever finds a tag no
repair of ours is writing settles it to what the annotation holds (``settled_message``).
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
from collections.abc import Callable, Container, Iterable
from typing import Final

from kueue_tas.api import constants as c
from kueue_tas.api.workload import Workload
from kueue_tas.topology.assignment import TopologyAssignment
from kueue_tas.topology.codec import decode_assignment_annotation

ANNOTATION_FIELD: Final = f"metadata.annotations[{c.TOPOLOGY_ASSIGNMENT_ANNOTATION}]"
_DIGEST_HEX: Final = 16  # 64 bits: detects edits; the record's protection is where it is kept
_PARTS: Final = r"[^\[\]=\s,]+=[0-9a-f]{16}(?:, [^\[\]=\s,]+=[0-9a-f]{16})*"
_RECORD = re.compile(rf"(?: \[repairing ({_PARTS})\])? \[record ({_PARTS})\]$")


@functools.lru_cache(maxsize=1024)
def podset_digest(uid: str, podset: str, assignment: TopologyAssignment) -> str:
    # Cached: the stray-pod and guard reconcilers check the record on every pod event of a
    # workload, with the same (frozen, hashable) assignment each time.
    domains = sorted((list(d.values), d.count) for d in assignment.domains)
    canonical = json.dumps([uid, podset, list(assignment.levels), domains], separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()[:_DIGEST_HEX]


def _parts(uid: str, assignments: Iterable[tuple[str, TopologyAssignment]]) -> str:
    return ", ".join(f"{name}={podset_digest(uid, name, a)}" for name, a in assignments)


def record_suffix(uid: str, assignments: Iterable[tuple[str, TopologyAssignment]]) -> str:
    """The text a Ready entry's message ends with ("" when nothing was assigned)."""
    parts = _parts(uid, assignments)
    return f" [record {parts}]" if parts else ""


def repairing_suffix(uid: str, new: Iterable[tuple[str, TopologyAssignment]], old_message: str) -> str:
    """The end of the message a repair announces itself with: its new assignments, then the
    record ``old_message`` holds (the assignments they replace)."""
    parts = _parts(uid, new)
    return (f" [repairing {parts}]" if parts else "") + _record_of(recorded(old_message))


def _record_of(digests: dict[str, str]) -> str:
    return f" [record {', '.join(f'{n}={d}' for n, d in digests.items())}]" if digests else ""


def _split(parts: str | None) -> dict[str, str]:
    return dict(part.split("=", 1) for part in parts.split(", ")) if parts else {}


def recorded(message: str) -> dict[str, str]:
    """PodSet -> digest, from a message ``record_suffix`` ended ({} when it has no record)."""
    match = _RECORD.search(message)
    return {} if match is None else _split(match.group(2))


def repairing(message: str) -> dict[str, str]:
    """PodSet -> digest of a repair announced on the message ({} when none is)."""
    match = _RECORD.search(message)
    return {} if match is None else _split(match.group(1))


def record_text(message: str) -> str:
    """The record a message ends with, as written, a repair's tag included ("" when it has none)."""
    match = _RECORD.search(message)
    return "" if match is None else match.group(0)


def without_record(message: str) -> str:
    """The message before its record (and a repair's tag)."""
    match = _RECORD.search(message)
    return message if match is None else message[: match.start()]


def records_of(wl: Workload, checks: Container[str]) -> dict[str, str]:
    """PodSet -> digest, over the Ready entries of ``checks`` (ours) on ``wl``."""
    return _over_ready_entries(wl, checks, recorded)


def repairs_of(wl: Workload, checks: Container[str]) -> dict[str, str]:
    """PodSet -> digest of a repair announced on the Ready entries of ``checks`` on ``wl``."""
    return _over_ready_entries(wl, checks, repairing)


def _over_ready_entries(wl: Workload, checks: Container[str], read: Callable[[str], dict[str, str]]) -> dict[str, str]:
    out: dict[str, str] = {}
    for st in wl.status.admission_checks:
        if st.name in checks and st.state == c.CHECK_STATE_READY:
            out.update(read(st.message))
    return out


NOT_APPLIED: Final = "; not applied (kueue-tas stopped while writing it)"


def settled_message(message: str, uid: str, annotation: Iterable[tuple[str, TopologyAssignment]]) -> tuple[str, bool]:
    """``message`` with a repair's tag settled by what the (untampered) annotation holds, and
    whether the repair landed: then the repaired record, else the old one and a word that it
    did not."""
    tag, record = repairing(message), recorded(message)
    if not tag:
        return message, False
    held = {name: podset_digest(uid, name, a) for name, a in annotation}
    landed = all(held.get(name) == digest for name, digest in tag.items())
    body = without_record(message)
    if landed:
        record = {**record, **tag}
    else:
        body = body.removesuffix(NOT_APPLIED) + NOT_APPLIED
    return body + _record_of(record), landed


def assignment_tampering(wl: Workload, checks: Container[str]) -> str | None:
    """One line naming how the annotation departs from our record, or None when it holds what
    we recorded (or there is no record to compare with)."""
    records = records_of(wl, checks)
    if not records:
        return None
    text = wl.metadata.annotations.get(c.TOPOLOGY_ASSIGNMENT_ANNOTATION)
    if text is None:
        return f"{ANNOTATION_FIELD}: removed"
    try:
        decoded = decode_assignment_annotation(text)
    except ValueError as exc:
        first = (str(exc).splitlines() or [""])[0][:300]
        return f"{ANNOTATION_FIELD}: no longer decodes: {first}"
    found: dict[str, TopologyAssignment] = {}
    for name, assignment in decoded:
        if name in found:
            return f'{ANNOTATION_FIELD}: PodSet "{name}" appears twice'
        found[name] = assignment
    uid = wl.metadata.uid or ""
    repairs = repairs_of(wl, checks)
    for name, digest in records.items():
        if name not in found:
            return f'{ANNOTATION_FIELD}: PodSet "{name}" was removed'
        if podset_digest(uid, name, found[name]) not in (digest, repairs.get(name)):
            return f'{ANNOTATION_FIELD}: PodSet "{name}" differs from the assignment kueue-tas recorded'
    # PodSets beyond the record are not judged: another check of ours writes its own between
    # its annotation write and its Ready entry, and our gate is on no pod of a PodSet we did
    # not place, so such an entry moves no pod (it can only make capacity more conservative).
    return None
