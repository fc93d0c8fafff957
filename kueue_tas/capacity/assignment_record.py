"""Our own record of the assignments we wrote, and the check that the annotation still holds them.

The assignment annotation lives in ``metadata``, which anyone allowed to edit the Workload can
change. Our check entry lives in ``status`` (the ``workloads/status`` subresource, which
ordinary users are not granted), and we write it in the same decision: its message ends with
``[record <PodSet>=<digest>, ...]``, one digest per PodSet we assigned, over the Workload's UID,
the PodSet name and the assignment's content (levels and domains, in any order and any
encoding, so that re-encoding or another check of ours merging its PodSets in changes nothing).

``assignment_tampering`` compares the annotation with that record. A Ready entry without a
record (written by a version before records existed) trusts the annotation as written.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Container, Iterable
from typing import Final

from kueue_tas.api import constants as c
from kueue_tas.api.workload import Workload
from kueue_tas.topology.assignment import TopologyAssignment
from kueue_tas.topology.codec import decode_assignment_annotation

ANNOTATION_FIELD: Final = f"metadata.annotations[{c.TOPOLOGY_ASSIGNMENT_ANNOTATION}]"
_DIGEST_HEX: Final = 16  # 64 bits: detects edits; the record's protection is where it is kept
_RECORD = re.compile(r" \[record ([^\[\]=\s,]+=[0-9a-f]{16}(?:, [^\[\]=\s,]+=[0-9a-f]{16})*)\]$")


def podset_digest(uid: str, podset: str, assignment: TopologyAssignment) -> str:
    domains = sorted((list(d.values), d.count) for d in assignment.domains)
    canonical = json.dumps([uid, podset, list(assignment.levels), domains], separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()[:_DIGEST_HEX]


def record_suffix(uid: str, assignments: Iterable[tuple[str, TopologyAssignment]]) -> str:
    """The text a Ready entry's message ends with ("" when nothing was assigned)."""
    parts = [f"{name}={podset_digest(uid, name, a)}" for name, a in assignments]
    return f" [record {', '.join(parts)}]" if parts else ""


def recorded(message: str) -> dict[str, str]:
    """PodSet -> digest, from a message ``record_suffix`` ended ({} when it has no record)."""
    match = _RECORD.search(message)
    if match is None:
        return {}
    return dict(part.split("=", 1) for part in match.group(1).split(", "))


def records_of(wl: Workload, checks: Container[str]) -> dict[str, str]:
    """PodSet -> digest, over the Ready entries of ``checks`` (ours) on ``wl``."""
    out: dict[str, str] = {}
    for st in wl.status.admission_checks:
        if st.name in checks and st.state == c.CHECK_STATE_READY:
            out.update(recorded(st.message))
    return out


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
    for name, digest in records.items():
        if name not in found:
            return f'{ANNOTATION_FIELD}: PodSet "{name}" was removed'
        if podset_digest(uid, name, found[name]) != digest:
            return f'{ANNOTATION_FIELD}: PodSet "{name}" differs from the assignment kueue-tas recorded'
    # PodSets beyond the record are not judged: another check of ours writes its own between
    # its annotation write and its Ready entry, and our gate is on no pod of a PodSet we did
    # not place, so such an entry moves no pod (it can only make capacity more conservative).
    return None
