"""What the admission webhook refuses when a Job, JobSet or Workload is created or changed (pure).

The rules and their texts are ``plan``'s and the admitter's (``topology.requests.plan_requests``,
``capacity.workload_scope``); what differs is what is known. At creation no flavor is chosen,
so levels are judged against every Topology the object's queue may place it on: the object
is refused only when none of them accepts it, and its levels are not judged at all when the
queue leads to no Topology of ours (the admitter still judges them once a flavor is chosen).

An update is judged only on what it changes: a change to a constraint annotation of an
admitted workload is refused (the placement was made for the old value), a changed value is
checked as at creation, and any other update passes (Kueue unsuspending a Job, our own
annotation writes), so the webhook never blocks the controllers that keep a workload going.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import pydantic

from kueue_tas.api import constants as c
from kueue_tas.api.core_objects import Job, JobSet
from kueue_tas.api.kinds import KubeObject
from kueue_tas.api.kueue_objects import AdmissionCheck, ClusterQueue, Topology
from kueue_tas.api.podsets import PodSetSpec, podsets_of
from kueue_tas.api.workload import PodSetTopologyRequestModel, Workload
from kueue_tas.capacity.rules import topology_level_names
from kueue_tas.capacity.workload_scope import workload_levels_rejection
from kueue_tas.topology.engine import (
    WorkloadTopology,
    parse_workload_topology,
    resolve_workload_topology,
    workload_annotations,
)
from kueue_tas.topology.features import FeatureGates
from kueue_tas.topology.flavors import check_topology
from kueue_tas.topology.level_names import LevelNames, resolve_request
from kueue_tas.topology.model import PodSetRequest
from kueue_tas.topology.requests import (
    PlanInputError,
    TopologyRequestError,
    check_groups,
    check_jobset_counts,
    check_workload_counts,
    describe,
    field_is_explicit,
    has_topology_annotation,
    levels_problem,
    podset_request_for,
    template_annotations,
    template_path,
    unknown_keys,
)


@dataclass(frozen=True, slots=True)
class TopologyView:
    """What the checks need of one Topology: its name, levels and level names."""

    name: str
    levels: tuple[str, ...]
    names: LevelNames

    @classmethod
    def of(cls, topology: Topology) -> TopologyView:
        return cls(topology.name, topology.levels, topology_level_names(topology))


@dataclass(slots=True)
class Verdict:
    """Problems refuse the request; warnings reach the user (``kubectl`` prints them) either way."""

    problems: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    @property
    def allowed(self) -> bool:
        return not self.problems


@dataclass(frozen=True, slots=True)
class _Governed:
    index: int
    request: PodSetRequest
    field: PodSetTopologyRequestModel | None


def queue_of(obj: KubeObject) -> str | None:
    """The LocalQueue ``obj`` is submitted to (the queue-name label; a Workload's spec.queueName)."""
    if isinstance(obj, Workload):
        return obj.spec.queue_name or None
    return obj.metadata.labels.get(c.KUEUE_QUEUE_NAME_LABEL) or None


def queue_topologies(
    cluster_queue: ClusterQueue | None,
    checks: Mapping[str, AdmissionCheck],
    topology: Callable[[str], Topology | None],
) -> list[TopologyView]:
    """The Topologies of our ``checks`` (by name) that ``cluster_queue`` puts flavors under, in
    its order; none when the queue is unknown or uses no check of ours."""
    if cluster_queue is None:
        return []
    views: dict[str, TopologyView] = {}
    for rule in cluster_queue.check_rules():
        ac = checks.get(rule.name)
        name = check_topology(ac) if ac is not None else None
        topo = topology(name) if name is not None and name not in views else None
        if topo is not None and topo.levels and cluster_queue.flavors_for_check(rule.name):
            views[topo.name] = TopologyView.of(topo)
    return list(views.values())


def admitted(obj: KubeObject) -> bool:
    """Kueue runs the workload: a queued Job or JobSet that is not suspended, a Workload with
    quota reserved (its placement is made from then on)."""
    if isinstance(obj, Job | JobSet):
        return c.KUEUE_QUEUE_NAME_LABEL in obj.metadata.labels and obj.spec.suspend is False
    if isinstance(obj, Workload):
        return obj.status.admission is not None
    return False


def constraint_annotations(obj: KubeObject, prefix: str) -> dict[str, str]:
    """field path -> value of every constraint annotation ``obj`` carries: the workload-wide ones
    in its metadata and the PodSet ones in each pod template (not the annotations kueue-tas
    itself writes, such as the assignment)."""
    out = {
        f"metadata.annotations[{key}]": value
        for key, value in workload_annotations(obj.metadata.annotations, prefix).items()
    }
    suffixes = {prefix + s for s in c.TOPOLOGY_ANNOTATION_SUFFIXES}
    for index, ps in enumerate(_podsets(obj)):
        annotations = (ps.template.get("metadata") or {}).get("annotations") or {}
        if not isinstance(annotations, dict):
            continue
        for key, value in annotations.items():
            if key in suffixes:
                out[f"{template_path(obj, index)}.metadata.annotations[{key}]"] = str(value)
    return out


def review_create(obj: KubeObject, topologies: Sequence[TopologyView], prefix: str, gates: FeatureGates) -> Verdict:
    """``obj`` as it is about to be stored; ``topologies``: those its queue may place it on."""
    verdict = Verdict()
    if isinstance(obj, Workload) and obj.metadata.controller_owner() is not None:
        # Kueue made it from a Job or JobSet that was judged at its own creation; refusing here
        # would only leave that Job suspended with the reason in Kueue's log.
        return verdict
    try:
        if isinstance(obj, Workload):
            check_workload_counts(obj)
        podsets = _podsets(obj)
        if isinstance(obj, JobSet):
            check_jobset_counts(obj, podsets)
    except PlanInputError as exc:
        verdict.problems.append(str(exc))
        return verdict
    governed = _governed(obj, podsets, prefix, gates, verdict)
    if verdict.problems:
        return verdict
    try:
        check_groups(obj, [(g.index, g.request) for g in governed], [g.field for g in governed], prefix)
        scope = parse_workload_topology(workload_annotations(obj.metadata.annotations, prefix), prefix)
    except PlanInputError as exc:
        verdict.problems.append(str(exc))
        return verdict
    except TopologyRequestError as exc:
        verdict.problems.append(f"{describe(obj)}: metadata.annotations: {'; '.join(exc.errors)}")
        return verdict
    if topologies:
        rejections = [_levels_rejection(obj, governed, scope, view, prefix) for view in topologies]
        if all(r is not None for r in rejections):
            verdict.problems.append(str(rejections[0]))
    return verdict


def review_update(
    old: KubeObject, new: KubeObject, topologies: Sequence[TopologyView], prefix: str, gates: FeatureGates
) -> Verdict:
    """A change from ``old`` to ``new`` (see the module note for what is judged)."""
    before, after = constraint_annotations(old, prefix), constraint_annotations(new, prefix)
    changed = sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))
    if not changed:
        return Verdict()
    if admitted(old):
        what = "not suspended" if isinstance(old, Job | JobSet) else "has quota reserved"
        return Verdict(
            problems=[
                f"{describe(new)}: {path}: {_change_text(before.get(path), after.get(path))}: a constraint may not "
                f"change while the workload is admitted (the {old.kind} {what}; its pods were placed for "
                "the old value)"
                for path in changed
            ]
        )
    return review_create(new, topologies, prefix, gates)


def _change_text(old: str | None, new: str | None) -> str:
    if old is None:
        return f"added {new!r}"
    if new is None:
        return f"removed (was {old!r})"
    return f"changed from {old!r} to {new!r}"


def _podsets(obj: KubeObject) -> list[PodSetSpec]:
    try:
        return podsets_of(obj) if isinstance(obj, Job | JobSet | Workload) else []
    except (ValueError, pydantic.ValidationError) as exc:
        raise PlanInputError(f"{describe(obj)}: {exc}") from exc


def _governed(
    obj: KubeObject, podsets: Sequence[PodSetSpec], prefix: str, gates: FeatureGates, verdict: Verdict
) -> list[_Governed]:
    """The PodSets that ask for a topology, each request parsed (levels as written); a
    malformed one is a problem in ``verdict``."""
    out = []
    for index, ps in enumerate(podsets):
        try:
            annotations = template_annotations(ps.template)
        except TopologyRequestError as exc:
            verdict.problems.append(f"{describe(obj)}: {template_path(obj, index)}: {'; '.join(exc.errors)}")
            continue
        verdict.warnings.extend(unknown_keys(obj, index, annotations, prefix))
        topology_field = _topology_field(obj, ps.name)
        if not (has_topology_annotation(annotations, prefix=prefix) or field_is_explicit(topology_field)):
            continue
        try:
            request = podset_request_for(obj, ps, index, topology_field, prefix, gates, implied=False)
        except PlanInputError as exc:
            verdict.problems.append(str(exc))
            continue
        out.append(_Governed(index, request, topology_field))
    return out


def _topology_field(obj: KubeObject, name: str) -> PodSetTopologyRequestModel | None:
    if isinstance(obj, Workload):
        ps = obj.pod_set(name)
        return ps.topology_request if ps is not None else None
    return None


def _levels_rejection(
    obj: KubeObject, governed: Sequence[_Governed], scope: WorkloadTopology | None, view: TopologyView, prefix: str
) -> str | None:
    """The first level problem of ``obj`` on ``view``'s Topology, or None when it accepts them all."""
    resolved = []
    for g in governed:
        request = resolve_request(g.request, view.levels, view.names)
        problem = levels_problem(obj, g.index, request, view.levels, view.name, view.names, g.field, prefix)
        if problem is not None:
            return problem
        resolved.append(request)
    if scope is None:
        return None
    scope = resolve_workload_topology(scope, view.levels, view.names)
    problem = workload_levels_rejection(scope, resolved, view.levels, view.names, view.name, prefix)
    return None if problem is None else f"{describe(obj)}: metadata.annotations: {problem}"
