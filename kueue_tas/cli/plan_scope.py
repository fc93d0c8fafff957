"""``plan`` and the workload-wide constraint: where its annotations are read in the input, and
the domain the text view shows (the rules are the controller's, ``capacity/workload_scope``).

A Job or JobSet carries the annotations in its own metadata. A Workload in the input is read as
the controller reads it: its own annotations first, else those of its owner, when the owner is
in the input too.
"""

from __future__ import annotations

from collections.abc import Sequence

from kueue_tas.api.core_objects import Job, JobSet
from kueue_tas.api.kinds import KubeObject
from kueue_tas.api.workload import Workload
from kueue_tas.topology.assignment import TopologyAssignment
from kueue_tas.topology.engine import TopologySnapshot, WorkloadTopology, workload_annotations


class ScopeReader:
    """The workload-wide annotations of each placeable object of one input."""

    def __init__(self, objects: Sequence[KubeObject], prefix: str) -> None:
        self.prefix = prefix
        self._owners = {
            (o.kind, o.metadata.namespace, o.name): o.metadata.annotations
            for o in objects
            if isinstance(o, Job | JobSet)
        }

    def annotations(self, obj: KubeObject) -> dict[str, str]:
        own = workload_annotations(obj.metadata.annotations, self.prefix)
        if own or not isinstance(obj, Workload):
            return own
        owner = obj.metadata.controller_owner()
        if owner is None:
            return {}
        return workload_annotations(self._owners.get((owner.kind, obj.metadata.namespace, owner.name), {}), self.prefix)


def scope_line(scope: WorkloadTopology, snap: TopologySnapshot, assignments: Sequence[TopologyAssignment]) -> str:
    """``  workload in zone z2 (workload-required-topology: zone)``: the one domain that holds
    every placed pod at the constraint's level, or the spread when preferred gave way."""
    level = scope.required or scope.preferred or ""
    domains = snap.domains_at(assignments, level) if level in snap.levels else set()
    asked = ", ".join(
        f"workload-{kind}-topology: {snap.level_names.called(lvl)}"
        for kind, lvl in (("required", scope.required), ("preferred", scope.preferred))
        if lvl is not None
    )
    shown = snap.level_names.called(level)
    if len(domains) == 1:
        return f"  workload in {shown} {next(iter(domains))[-1]} ({asked})"
    return f"  workload spread over {len(domains)} domains of {shown} ({asked}: no single one holds it)"
