"""The check message for a workload whose requests are refused (``workload_placement``'s
``RequestProblem``), in the words the admission decision writes on our check entry.

``describe`` and the map show the same words for a pending Workload, so a user meets one
message wherever it is found. ``kueue-tas plan`` words the same problems as input errors
naming the field's path instead (``cli/planner.py``).
"""

from __future__ import annotations

import re

from kueue_tas.api import constants as c
from kueue_tas.capacity.workload_placement import (
    BadGroups,
    BadScope,
    InvalidRequest,
    LevelRefused,
    NoTopology,
    RequestProblem,
)
from kueue_tas.topology.requests import GroupMember, TopologyRequestError, group_errors

_LONG_QUOTED = re.compile(r'"[^"\n]{100,}"')


def shortened(message: str) -> str:
    """``message`` with each long quoted value cut (a 100 kB annotation value is quoted whole by
    the validation texts; the entry and the Event need only enough of it to recognise it)."""
    return _LONG_QUOTED.sub(lambda m: f'{m.group(0)[:41]}..." ({len(m.group(0)) - 2} characters)', message)


def problem_message(problem: RequestProblem, prefix: str) -> str:
    """One line naming the PodSet (or the workload), the setting and what is wrong."""
    if isinstance(problem, InvalidRequest):
        exc = problem.error
        detail = "; ".join(exc.errors) if isinstance(exc, TopologyRequestError) else str(exc)
        return shortened(f'PodSet "{problem.podset.name}": {detail}')
    if isinstance(problem, NoTopology):
        return f'PodSet "{problem.podset.name}": flavor "{problem.podset.flavor}" has no usable Topology yet'
    if isinstance(problem, LevelRefused):
        return _level_message(problem, prefix)
    if isinstance(problem, BadGroups):
        return _group_message(problem, prefix)
    assert isinstance(problem, BadScope)
    return shortened(problem.text)


def _level_message(refused: LevelRefused, prefix: str) -> str:
    problem, snap, name = refused.problem, refused.snapshot, refused.request.name

    def locate(suffix: str, field: str) -> str:
        return f"topologyRequest.{field}" if refused.from_field else f"annotation {prefix}{suffix}"

    where = locate(problem.suffix, problem.field)
    if problem.unknown is None:
        return f'PodSet "{name}": {where}: {problem.text(locate)}'
    return (
        f'PodSet "{name}": {where}: unknown topology level "{problem.unknown}"; '
        f'Topology "{snap.topology_name}" has levels {", ".join(snap.levels)}{snap.level_names.offered()}'
    )


def _group_message(bad: BadGroups, prefix: str) -> str:
    described = [
        GroupMember(
            request.name,
            request.count,
            request.topology,
            f'PodSet "{request.name}": '
            + ("topologyRequest.podSetGroupName" if from_field else f"annotation {prefix}{c.SUFFIX_GROUP_NAME}"),
            f'PodSet "{request.name}"',
            from_field,
        )
        for _, request, from_field in bad.members
    ]
    return "; ".join(e.message for e in group_errors(described, prefix))
