"""The workloads of the topology map: where each one's pods are (or would go), and why not.

* Admitted (our check Ready, assignment trusted): per PodSet its assignment's domains with the
  pods bound there and released there but not bound yet (``capacity.pod_counts``, the counting
  ``describe`` prints), and the nodes under it that have failed by the node-repair rule
  (``capacity.node_health``).
* Holding no assignment: the trial placement ``describe`` shows too
  (``capacity.trial_placement``): where it would go now, or the engine's why-not. A Workload
  none of our checks is on and whose flavor is unknown is not ours to show.
* ``plan``: the planner's own results (``PlannedWorkload``), which replace the above.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from kueue_tas.api import constants as c
from kueue_tas.api.object_base import parse_rfc3339
from kueue_tas.api.workload import Workload
from kueue_tas.capacity.hostnames import NodeHosts
from kueue_tas.capacity.live import LiveCapacity
from kueue_tas.capacity.node_health import PodTermination, failed_nodes, podset_hosts
from kueue_tas.capacity.pod_counts import SlimPod, domain_paths, podset_pod_counts
from kueue_tas.capacity.rules import assignment_trusted, workload_identity
from kueue_tas.capacity.trial_placement import PodSetTrial, trial_placement
from kueue_tas.mapview.model import DomainCount, PodSetView, State, WorkloadView
from kueue_tas.topology.assignment import TopologyAssignment
from kueue_tas.topology.codec import decode_assignment_annotation
from kueue_tas.topology.features import DEFAULT_GATES, FeatureGates
from kueue_tas.topology.model import NodeInfo

DEFAULT_GRACE_SECONDS = 30.0  # the controller's node_failure_grace_seconds default


@dataclass(frozen=True, slots=True)
class PlannedWorkload:
    """A workload ``plan`` placed (or could not place) in its run."""

    kind: str
    namespace: str
    name: str
    trials: tuple[PodSetTrial, ...]
    queue: str | None = None

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass
class WorkloadInputs:
    """What the workload views are read from."""

    capacity: LiveCapacity
    check_flavors: Mapping[str, Collection[str]]  # our check -> the flavors it governs
    now: datetime | None = None  # wall time: how long a node has been NotReady
    grace: float = DEFAULT_GRACE_SECONDS
    prefix: str = c.DEFAULT_ANNOTATION_PREFIX
    gates: FeatureGates = DEFAULT_GATES


class _Nodes:
    """Nodes by name and by hostname label (``NodeHosts``: an assignment's value is never looked
    up as a Node name), and how long each has been NotReady."""

    def __init__(self, nodes: Mapping[str, NodeInfo], now: datetime | None) -> None:
        self.by_name = nodes
        self.hosts = NodeHosts.of(nodes.values())
        self.now = now

    def not_ready_for(self, name: str) -> float | None:
        node = self.by_name.get(name)
        if node is None or node.ready or self.now is None or not node.ready_since:
            return None
        try:
            since = parse_rfc3339(node.ready_since)
        except ValueError:
            return None
        return max((self.now - since).total_seconds(), 0.0)


def workload_views(
    inputs: WorkloadInputs,
    workloads: Iterable[Workload],
    pods: Iterable[SlimPod],
    planned: Sequence[PlannedWorkload] = (),
) -> tuple[list[WorkloadView], dict[str, list[str]]]:
    """(the views: admitted workloads, then the others, each group by key, then ``planned`` in
    its order; node name -> why it has failed, one line per workload it failed for)."""
    nodes = _Nodes(inputs.capacity.nodes(), inputs.now)
    by_workload: dict[tuple[str, str], list[SlimPod]] = {}
    for pod in pods:
        if pod.workload is not None:
            by_workload.setdefault((pod.namespace, pod.workload), []).append(pod)
    skip = {p.key for p in planned}
    failed: dict[str, list[str]] = {}
    admitted: list[WorkloadView] = []
    others: list[WorkloadView] = []
    checks = inputs.check_flavors.keys()
    for wl in workloads:
        key = f"{wl.namespace}/{wl.name}"
        if key in skip or wl.is_finished:
            continue
        own = by_workload.get((wl.namespace or "", workload_identity(wl)), [])
        if assignment_trusted(wl, checks):
            admitted.append(_admitted(inputs, wl, own, nodes, failed))
            continue
        view = _unplaced(inputs, wl, nodes)
        if view is not None:
            others.append(view)
    views = sorted(admitted, key=_order) + sorted(others, key=_order)
    return views + [_planned(p, inputs, nodes) for p in planned], failed


def _order(view: WorkloadView) -> tuple[str, str]:
    return (view.namespace, view.name)


def _queue(wl: Workload) -> tuple[str | None, str | None]:
    admission = wl.status.admission
    return wl.spec.queue_name, admission.cluster_queue if admission is not None and admission.cluster_queue else None


def _decoded(wl: Workload) -> tuple[dict[str, TopologyAssignment], str]:
    try:
        return dict(decode_assignment_annotation(wl.metadata.annotations[c.TOPOLOGY_ASSIGNMENT_ANNOTATION])), ""
    except ValueError as exc:
        return {}, f"annotation {c.TOPOLOGY_ASSIGNMENT_ANNOTATION} is malformed: {exc}"


def _admitted(
    inputs: WorkloadInputs, wl: Workload, pods: list[SlimPod], nodes: _Nodes, failed: dict[str, list[str]]
) -> WorkloadView:
    specs = inputs.capacity.flavors()
    assignments, problem = _decoded(wl)
    by_podset: dict[str, list[SlimPod]] = {}
    for pod in pods:
        by_podset.setdefault(pod.podset or pod.kueue_podset or "", []).append(pod)
    views = []
    for ps in wl.spec.pod_sets:
        psa = wl.pod_set_assignment(ps.name)
        count = psa.count if psa is not None and psa.count is not None else ps.count
        flavor = next((f for f in dict.fromkeys(psa.flavors.values()) if f in specs), None) if psa else None
        spec = specs.get(flavor) if flavor is not None else None
        assignment = assignments.get(ps.name)
        counts, bound, pending = podset_pod_counts(by_podset.get(ps.name, ()), assignment, nodes.by_name)
        domains: tuple[DomainCount, ...] = ()
        if assignment is not None:
            levels = spec.levels if spec is not None else assignment.levels
            paths = domain_paths(assignment, levels, nodes.hosts)
            domains = tuple(
                DomainCount(d.values, path, d.count, bound[i], pending[i])
                for i, (d, path) in enumerate(zip(assignment.domains, paths, strict=True))
            )
        message = problem or ("" if assignment is not None else "no assignment recorded for this PodSet")
        topology = spec.topology if spec is not None else None
        views.append(PodSetView(ps.name, count, flavor, topology, domains, None, message, counts))
    progressing = {p.node_name for p in pods if p.node_name and not p.terminating and not p.is_terminal}
    gates = PodTermination(inputs.gates.replace_on_pod_termination, inputs.gates.replace_not_ready_fixed_time)
    failures, _ = failed_nodes(
        podset_hosts(wl, assignments, specs),
        nodes.hosts,
        nodes.not_ready_for,
        inputs.grace,
        progressing=progressing,
        gates=gates,
    )
    for failure in failures.values():
        # The map marks Nodes (by name): the one the hostname names, or every one sharing it;
        # none for a hostname no Node carries (a Node named like it is another machine).
        for name in (n.name for n in nodes.hosts.carriers(failure.node)):
            failed.setdefault(name, []).append(f"failed for {wl.namespace}/{wl.name}: {failure.detail}")
    queue, cq = _queue(wl)
    return WorkloadView(wl.namespace or "", wl.name, State.ADMITTED, "Workload", queue, cq, tuple(views))


def _unplaced(inputs: WorkloadInputs, wl: Workload, nodes: _Nodes) -> WorkloadView | None:
    ours = any(st.name in inputs.check_flavors for st in wl.status.admission_checks)
    trials = trial_placement(wl, inputs.capacity, inputs.check_flavors, inputs.prefix, inputs.gates)
    if not ours and all(t.flavor is None for t in trials):
        return None
    tried = [t for t in trials if t.flavor is not None]
    state = State.FITS if tried and all(t.fits for t in tried) else State.PENDING
    queue, cq = _queue(wl)
    views = tuple(_trial_view(t, inputs, nodes) for t in trials)
    return WorkloadView(wl.namespace or "", wl.name, state, "Workload", queue, cq, views)


def _planned(p: PlannedWorkload, inputs: WorkloadInputs, nodes: _Nodes) -> WorkloadView:
    tried = [t for t in p.trials if t.flavor is not None]
    state = State.PLANNED if all(t.fits for t in tried) else State.NOT_FIT
    views = tuple(_trial_view(t, inputs, nodes) for t in p.trials)
    return WorkloadView(p.namespace, p.name, state, p.kind, p.queue, None, views)


def _trial_view(trial: PodSetTrial, inputs: WorkloadInputs, nodes: _Nodes) -> PodSetView:
    domains: tuple[DomainCount, ...] = ()
    if trial.assignment is not None:
        spec = inputs.capacity.flavors().get(trial.flavor or "")
        levels = spec.levels if spec is not None else trial.assignment.levels
        paths = domain_paths(trial.assignment, levels, nodes.hosts)
        domains = tuple(
            DomainCount(d.values, path, d.count) for d, path in zip(trial.assignment.domains, paths, strict=True)
        )
    return PodSetView(trial.name, trial.count, trial.flavor, trial.topology, domains, trial.why_not, trial.message)
