"""The node repair of one admitted workload, pure: what is on the failed nodes, whether it may
move, what moved where, and the check entry that records it.

The decision itself is the admission decision with the workload's assignments as ``current``
and the failed nodes as ``unhealthy_nodes`` (``decide`` -> ``TopologySnapshot.place`` ->
``topology.engine.replacement``: the same replacement ``kueue-tas plan`` runs for Kueue's
``status.unhealthyNodes``). Only the pods of the failed nodes move; every failed node of the
workload is handled in that one decision.

A PodSet pinned to its one domain by the nodeSelector of our entry's ``podSetUpdates`` (admitted
with repairs off, or by an earlier kueue-tas) cannot move: Kueue refuses any change of
``podSetUpdates`` while the entry stays Ready, so it is never repaired in place (the policy
decides: wait for the node, or requeue). With repairs on, admission gates single-host PodSets
instead (``PodSetPlacement.gated``), so they move like any other.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

from kueue_tas.api.workload import AdmissionCheckState, Workload
from kueue_tas.capacity.assignment_record import record_suffix, record_text, repairing_suffix
from kueue_tas.capacity.node_health import NodeFailure, describe_failures
from kueue_tas.controllers.check_entry_writes import entry_with_message
from kueue_tas.controllers.decide import CHECK_MESSAGE_LIMIT, PodSetPlacement
from kueue_tas.controllers.health_note import note_of, with_note
from kueue_tas.topology.assignment import DomainAssignment, TopologyAssignment


def our_entry(wl: Workload, checks: Iterable[str]) -> AdmissionCheckState | None:
    """Our Ready entry on ``wl`` (the first one, when several checks of ours are Ready)."""
    ours = set(checks)
    return next((st for st in wl.status.admission_checks if st.name in ours and st.state == "Ready"), None)


def pinned(entry: AdmissionCheckState, current: Mapping[str, TopologyAssignment], failed: Iterable[str]) -> list[str]:
    """PodSets on a failed node that our entry pins by nodeSelector (placed in one domain)."""
    nodes = set(failed)
    selectors = {u.name: bool(u.node_selector) for u in entry.pod_set_updates}
    return [
        name for name, a in current.items() if selectors.get(name) and any(d.values[-1] in nodes for d in a.domains)
    ]


def _level_name(key: str) -> str:
    return key.rsplit("/", 1)[-1].removeprefix("topology-")


def _added(old: TopologyAssignment, new: TopologyAssignment) -> Counter[tuple[str, ...]]:
    before = Counter({d.values: d.count for d in old.domains})
    return Counter({d.values: d.count - before[d.values] for d in new.domains if d.count > before[d.values]})


def moved_summary(
    failures: Mapping[str, NodeFailure],
    current: Mapping[str, TopologyAssignment],
    placements: Iterable[PodSetPlacement],
    node_levels: Mapping[str, Mapping[str, str]],
    parent_level: str | None,
) -> str:
    """``node x3 NotReady for 30s: 2 pod(s) of PodSet workers moved from x3 to x7 in rack r1``.

    ``node_levels``: hostname -> the labels of its Node (to name the domain the new hosts share);
    ``parent_level``: the level named after "in" (the PodSet's required level, else the one
    above the hostname)."""
    parts = []
    for p in placements:
        old = current.get(p.name)
        if old is None or old == p.assignment:
            continue
        moved_from = [d for d in old.domains if d.values[-1] in failures]
        count = sum(d.count for d in moved_from)
        if not count:
            continue
        to = sorted(v[-1] for v in _added(old, p.assignment))
        text = (
            f"{count} pod(s) of PodSet {p.name} moved from "
            f"{', '.join(dict.fromkeys(d.values[-1] for d in moved_from))} to {', '.join(to)}"
        )
        if parent_level is not None:
            where = sorted({node_levels.get(n, {}).get(parent_level, "?") for n in to})
            name = _level_name(parent_level)
            text += f" in {name} {where[0]}" if len(where) == 1 else f" in {name}s {', '.join(where)}"
        parts.append(text)
    return f"{describe_failures(failures.values())}: {'; '.join(parts) or 'nothing to move'}"


def added_assignment(old: TopologyAssignment, new: TopologyAssignment) -> TopologyAssignment:
    """The pods ``new`` puts where ``old`` did not: the slots a repair adds."""
    added = _added(old, new)
    return TopologyAssignment(new.levels, tuple(DomainAssignment(v, added[v]) for v in sorted(added)))


def ready_entry(
    entry: AdmissionCheckState,
    wl: Workload,
    message: str,
    record_from: Iterable[PodSetPlacement],
    *,
    announce: bool = False,
) -> dict[str, Any]:
    """Our Ready entry with a new message and record; ``podSetUpdates`` and the transition time
    exactly as they are (Kueue refuses any change of ``podSetUpdates`` from Ready to Ready, and
    a server-side apply that left them out would remove them). ``announce``: the repair's
    first write, which keeps the record as it is and tags it with ``record_from``
    (``capacity.assignment_record``: a restart between the repair's writes loses nothing)."""
    uid, assignments = wl.metadata.uid or "", ((p.name, p.assignment) for p in record_from)
    record = repairing_suffix(uid, assignments, entry.message) if announce else record_suffix(uid, assignments)
    room = CHECK_MESSAGE_LIMIT - len(record)
    text = message if len(message) <= room else message[: room - 3] + "..."
    # The topology-health note stays in front: dropping it would have that controller write it
    # back between our writes, and each such write turns our next guarded write into a conflict.
    note = note_of(entry.message)
    return entry_with_message(entry, with_note(text + record, [note] if note else []))


def with_old_record(entry: AdmissionCheckState, message: str) -> str:
    """``message`` followed by the record our entry holds now (a note that moves no pod)."""
    record = record_text(entry.message)
    room = CHECK_MESSAGE_LIMIT - len(record)
    return (message if len(message) <= room else message[: room - 3] + "...") + record
