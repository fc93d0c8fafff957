"""Why a PodSet of ``describe workload`` has no assignment in force, in one line."""

from __future__ import annotations

from kueue_tas.api import constants as c
from kueue_tas.api.object_base import find_condition
from kueue_tas.api.workload import Workload
from kueue_tas.cli.describe_model import CheckStatus


def _evicted_reason(wl: Workload) -> str | None:
    """Why an evicted Workload holds no assignment. Kueue resets our entry to Pending when it
    evicts (a Rejected check deactivates the Workload first) and drops the admission, so the
    reason survives only in the Evicted condition."""
    evicted = find_condition(wl.status.conditions, c.CONDITION_EVICTED)
    if evicted is None or evicted.status != "True" or wl.has_quota_reservation:
        return None
    inactive = " and deactivated (spec.active=false)" if wl.spec.active is False else ""
    why = ": ".join(x for x in (evicted.reason, evicted.message) if x)
    return f"not placed: the Workload was evicted{inactive}: {why}"


def _finished_reason(wl: Workload) -> str:
    """A finished Workload's assignment holds nothing any more, so it is not shown as in force."""
    finished = find_condition(wl.status.conditions, c.CONDITION_FINISHED)
    why = ": ".join(x for x in (finished.reason, finished.message) if x) if finished is not None else ""
    return f"no assignment in force: the Workload is finished{': ' + why if why else ''}"


def _waiting_for_quota(wl: Workload) -> str:
    cond = find_condition(wl.status.conditions, c.CONDITION_QUOTA_RESERVED)
    why = f": {cond.message}" if cond is not None and cond.message else ""
    return f"no assignment yet: waiting for Kueue to reserve quota{why}"


def _no_assignment_reason(wl: Workload, entry: CheckStatus | None, controller_name: str) -> str:
    if entry is None:
        return f"no AdmissionCheck of controller {controller_name} governs this PodSet's flavor in its ClusterQueue"
    said = f": {entry.message}" if entry.message else ""
    if entry.state == c.CHECK_STATE_PENDING:
        if not wl.has_quota_reservation:
            return _waiting_for_quota(wl)
        return f"no assignment yet: check {entry.name} is Pending{said}"
    if entry.state == c.CHECK_STATE_READY:
        return f"check {entry.name} is Ready but records no assignment for this PodSet{said}"
    return f"not placed: check {entry.name} is {entry.state}{said}"


def why_unplaced(
    wl: Workload, flavor: str | None, governed: bool, entry: CheckStatus | None, stale: bool, controller_name: str
) -> str:
    """Why a PodSet has no assignment in force; ``stale``: the annotation still holds an older one."""
    if (evicted := _evicted_reason(wl)) is not None:
        return evicted
    if wl.is_finished:
        return _finished_reason(wl)
    if flavor is None:
        return _waiting_for_quota(wl)
    if not governed:
        return (
            f"not placed by kueue-tas: flavor {flavor} is on no Topology of an AdmissionCheck "
            f"of controller {controller_name}"
        )
    message = _no_assignment_reason(wl, entry, controller_name)
    if stale and entry is not None:
        message += f" (an earlier assignment is recorded but not in force while the check is {entry.state})"
    return message
