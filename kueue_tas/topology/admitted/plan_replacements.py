"""``kueue-tas plan``: Workloads that are placed again from an existing assignment.

Two kinds, as Kueue handles them:

* Node replacement (TASFailedNodeReplacement): a Workload admitted by our check whose
  ``status.unhealthyNodes`` names a node of its assignment. It is placed again with its
  assignment as ``current`` and those nodes as ``unhealthy_nodes``; the engine charges that
  assignment during the decision (as Kueue's cache does) and keeps its healthy part. It does
  not count as usage otherwise (the re-placed one does, once found; when none is found Kueue
  evicts it, so it holds nothing).
* Elastic slices (ElasticJobsViaWorkloadSlices + ...WithTAS): a Workload that replaces a
  slice admitted by our check, by the rule the controller follows too
  (``kueue_tas.topology.admitted.slice_replacement``). It is placed with that slice's assignment as
  ``current`` and ``elastic=True``; the named slice does not count as usage, since the new
  slice replaces it (Kueue finishes it once the new one is admitted).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from kueue_tas.api import constants as c
from kueue_tas.api.workload import Workload
from kueue_tas.topology.admitted.slice_replacement import place_options, replaced_slice, slice_current
from kueue_tas.topology.assignment import TopologyAssignment
from kueue_tas.topology.codec.codec import AssignmentFormatError
from kueue_tas.topology.features import FeatureGates
from kueue_tas.topology.model import HOSTNAME_LABEL
from kueue_tas.topology.requests.plan_requests import PlanInputError, describe


@dataclass(frozen=True, slots=True)
class Replacement:
    """How to place a Workload from an existing assignment (podset name -> assignment)."""

    current: dict[str, TopologyAssignment]
    unhealthy_nodes: tuple[str, ...] = ()
    elastic: bool = False


@dataclass
class ReplacementIndex:
    """Which Workloads of the input are re-placed, replace a slice, or are replaced."""

    by_workload: dict[tuple[str | None, str], Replacement] = field(default_factory=dict)
    excluded: set[tuple[str | None, str]] = field(default_factory=set)  # usage not counted

    @classmethod
    def build(
        cls, workloads: Sequence[Workload], admitted: Callable[[Workload], bool], gates: FeatureGates
    ) -> ReplacementIndex:
        index = cls()
        ready = {_key(wl): wl for wl in workloads if admitted(wl)}
        for wl in workloads:
            old = replaced_slice(wl, ready.get, admitted, gates)
            if old is not None:
                index.by_workload[_key(wl)] = Replacement(_assignments(old), elastic=True)
                index.excluded.add(_key(old))
        if gates.failed_node_replacement:
            for key, wl in ready.items():
                if key in index.excluded or not wl.status.unhealthy_nodes:
                    continue  # nothing to re-place: its annotation is decoded once, as usage
                current = _assignments(wl)
                unhealthy = _unhealthy_in(wl.status.unhealthy_nodes, current.values())
                if unhealthy:
                    index.by_workload[key] = Replacement(current, unhealthy_nodes=unhealthy)
                    index.excluded.add(key)
        return index

    def counts_as_usage(self, wl: Workload) -> bool:
        return _key(wl) not in self.excluded

    def replaced_in_place(self, wl: Workload) -> bool:
        """An admitted Workload placed again (node replacement)."""
        r = self.by_workload.get(_key(wl))
        return r is not None and bool(r.unhealthy_nodes)

    def replacement_of(self, obj: Any) -> Replacement | None:
        """How ``obj`` is placed from an existing assignment (None: an ordinary placement)."""
        return self.by_workload.get(_key(obj)) if isinstance(obj, Workload) else None

    def place_options(self, obj: Any, podsets: Iterable[str]) -> dict[str, Any]:
        """The ``current`` / ``unhealthy_nodes`` / ``elastic`` arguments of ``place`` for these
        PodSets of ``obj`` ({} for an ordinary placement)."""
        if not isinstance(obj, Workload):
            return {}
        r = self.by_workload.get(_key(obj))
        if r is None:
            return {}
        return place_options(r.current, podsets, unhealthy_nodes=r.unhealthy_nodes, elastic=r.elastic)


def _key(wl: Workload) -> tuple[str | None, str]:
    return (wl.metadata.namespace, wl.metadata.name)


def _assignments(wl: Workload) -> dict[str, TopologyAssignment]:
    try:
        return slice_current(wl)  # the whole admitted assignment, for either kind
    except AssignmentFormatError as exc:
        raise PlanInputError(
            f"{describe(wl)}: metadata.annotations[{c.TOPOLOGY_ASSIGNMENT_ANNOTATION}]: {exc}"
        ) from exc


def _unhealthy_in(nodes: Iterable[Any], assignments: Iterable[TopologyAssignment]) -> tuple[str, ...]:
    """The unhealthy node names that are hosts of the assignments, in status order."""
    hosts = {d.values[-1] for a in assignments if a.levels and a.levels[-1] == HOSTNAME_LABEL for d in a.domains}
    return tuple(dict.fromkeys(n.name for n in nodes if n.name in hosts))
