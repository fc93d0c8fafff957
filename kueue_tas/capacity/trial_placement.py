"""Where a Workload holding no assignment would be placed now, or why it would not: pure.

``describe workload`` and the topology map (``kueue_tas.mapview``) show this for a pending
Workload, so both give the same numbers. It runs the admitter's own pipeline
(``workload_placement``: the requests, their levels and groups, the workload-wide constraint,
one engine call per flavor) on the live capacity, holding nothing, and a refused request gets
the admitter's words (``problem_text``). A PodSet that does not fit carries the engine's
``WhyNot``. Left out on purpose: patience for preferred (a fit is shown as a fit) and a
workload-wide constraint written only on the Job (the admitter reads the owner; this reads the
Workload).

The flavor of a PodSet: the one Kueue's admission gives it; without one (no quota reserved, or
released after a Retry), the one flavor our checks listed on the Workload govern; else none.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass

from kueue_tas.api import constants as c
from kueue_tas.api.workload import Workload
from kueue_tas.capacity.live import LiveCapacity
from kueue_tas.capacity.problem_text import problem_message
from kueue_tas.capacity.workload_placement import (
    BadGroups,
    BadScope,
    PodSetInput,
    RequestProblem,
    WorkloadRequests,
    place_workload,
    workload_requests,
)
from kueue_tas.topology.assignment import TopologyAssignment
from kueue_tas.topology.engine import WhyNot
from kueue_tas.topology.features import DEFAULT_GATES, FeatureGates

NO_FLAVOR = "no flavor yet: Kueue has not reserved quota for it"
NOT_TRIED = "not tried: an earlier PodSet of this workload does not fit"
NOT_TRIED_REFUSED = "not tried: another PodSet's request is refused"


@dataclass(frozen=True, slots=True)
class PodSetTrial:
    name: str
    count: int
    flavor: str | None
    topology: str | None = None
    assignment: TopologyAssignment | None = None  # where it would go now
    message: str = ""  # why it would not (the engine's text), or why it was not tried
    why_not: WhyNot | None = None

    @property
    def fits(self) -> bool:
        return self.assignment is not None


def trial_flavor(wl: Workload, podset: str, check_flavors: Mapping[str, Collection[str]]) -> str | None:
    """The TAS flavor a PodSet is (or would be) placed on, see the module's note; None: unknown
    or not ours. ``check_flavors``: each of our checks -> the flavors it governs."""
    governed = {f for flavors in check_flavors.values() for f in flavors}
    psa = wl.pod_set_assignment(podset)
    if psa is not None and psa.flavors:
        return next((f for f in dict.fromkeys(psa.flavors.values()) if f in governed), None)
    listed = {f for st in wl.status.admission_checks for f in check_flavors.get(st.name, ())}
    return next(iter(listed)) if len(listed) == 1 else None


def trial_placement(
    wl: Workload,
    capacity: LiveCapacity,
    check_flavors: Mapping[str, Collection[str]],
    prefix: str = c.DEFAULT_ANNOTATION_PREFIX,
    gates: FeatureGates = DEFAULT_GATES,
) -> list[PodSetTrial]:
    """One trial per PodSet of ``wl`` (spec order); PodSets on no flavor of ours get a message."""
    trials: dict[str, PodSetTrial] = {}
    inputs: list[PodSetInput] = []
    for index, ps in enumerate(wl.spec.pod_sets):
        psa = wl.pod_set_assignment(ps.name)
        count = psa.count if psa is not None and psa.count is not None else ps.count
        flavor = trial_flavor(wl, ps.name, check_flavors)
        snap = capacity.snapshot(flavor) if flavor is not None else None
        if flavor is None or snap is None:
            trials[ps.name] = PodSetTrial(ps.name, count, flavor, message=NO_FLAVOR if flavor is None else "")
            continue
        trials[ps.name] = PodSetTrial(ps.name, count, flavor, snap.topology_name)
        inputs.append(PodSetInput(ps.name, count, ps.template, flavor, index, ps.topology_request))
    requests = workload_requests(
        inputs, capacity, prefix=prefix, gates=gates, workload_annotations=wl.metadata.annotations
    )
    if not isinstance(requests, WorkloadRequests):
        # The words of the check message; the PodSet it names says it, the others were not tried.
        message = problem_message(requests, prefix)
        named = _named(requests)
        for item in inputs:
            said = named is None or item.name == named
            trials[item.name] = _with(trials[item.name], message=message if said else NOT_TRIED_REFUSED)
        return [trials[ps.name] for ps in wl.spec.pod_sets]
    placed = place_workload(requests, capacity, gates=gates)
    for item in inputs:
        result = placed.results.get(item.name)
        if result is None or (result.assignment is None and not result.message):
            trials[item.name] = _with(trials[item.name], message=NOT_TRIED)
            continue
        trials[item.name] = _with(
            trials[item.name], assignment=result.assignment, message=result.message, why_not=result.why_not
        )
    return [trials[ps.name] for ps in wl.spec.pod_sets]


def _named(problem: RequestProblem) -> str | None:
    """The PodSet a problem is about; None: the workload's (its groups, its own constraint)."""
    if isinstance(problem, BadGroups | BadScope):
        return None
    return problem.podset.name


def _with(
    trial: PodSetTrial,
    *,
    assignment: TopologyAssignment | None = None,
    message: str = "",
    why_not: WhyNot | None = None,
) -> PodSetTrial:
    return PodSetTrial(trial.name, trial.count, trial.flavor, trial.topology, assignment, message, why_not)
