"""The topology map page (``kueue_tas.mapview``) from ``plan``'s dump or ``capacity``'s cluster read.

Both build the one model from the capacity model they already hold: ``plan`` after its run
(so the free capacity is what is left once every planned workload is placed, and each
workload shows the planner's own result, with the why-not of one that does not fit);
``capacity`` from the cluster as the controller would see it, pending workloads shown with
their trial placement (``capacity.trial_placement``).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import replace
from datetime import UTC, datetime

from kueue_tas.api import constants as c
from kueue_tas.api.core_objects import Job, JobSet
from kueue_tas.api.pod_shape import PodShape, PodShapeError, parse_pod_shape
from kueue_tas.api.quantity import QuantityError
from kueue_tas.api.workload import Workload
from kueue_tas.capacity.live import LiveCapacity
from kueue_tas.capacity.trial_placement import PodSetTrial
from kueue_tas.cli.planner import Planner, WorkloadPlan
from kueue_tas.kube.slim import SlimPod, slim_pod
from kueue_tas.mapview.build import MapOptions, build_map
from kueue_tas.mapview.model import MapModel
from kueue_tas.mapview.render import render_map
from kueue_tas.mapview.workloads import DEFAULT_GRACE_SECONDS, PlannedWorkload, WorkloadInputs
from kueue_tas.topology.features import FeatureGates


class MapOptionError(ValueError):
    """A map option that cannot be read; the message names the option."""


def map_options(resource: str | None, shape: str | None) -> MapOptions:
    try:
        parsed: PodShape | None = parse_pod_shape(shape) if shape is not None else None
    except PodShapeError as exc:
        raise MapOptionError(f"--shape: {exc}") from exc
    return MapOptions(resource=resource, shape=parsed)


def _model(
    capacity: LiveCapacity,
    workloads: Iterable[Workload],
    pods: Iterable[SlimPod],
    check_flavors: Mapping[str, Collection[str]],
    options: MapOptions,
    *,
    prefix: str,
    gates: FeatureGates,
    planned: list[PlannedWorkload] | None = None,
    grace: float = DEFAULT_GRACE_SECONDS,
) -> MapModel:
    inputs = WorkloadInputs(capacity, check_flavors, now=datetime.now(UTC), grace=grace, prefix=prefix, gates=gates)
    return build_map(capacity, workloads, pods, inputs, options, planned or [])


# --- plan ---------------------------------------------------------------------------------------


def plan_page(planner: Planner, plans: list[WorkloadPlan], options: MapOptions, title: str) -> str:
    return render_map(plan_model(planner, plans, options), title=title)


def plan_model(planner: Planner, plans: list[WorkloadPlan], options: MapOptions) -> MapModel:
    """The map after ``planner``'s run (``plans``: its results)."""
    check_flavors: dict[str, set[str]] = {}
    for flavor, binding in planner.bindings.items():
        if binding.check is not None:
            check_flavors.setdefault(binding.check, set()).add(flavor)
    queues = {(o.kind, o.metadata.namespace or "", o.name): _queue(o) for o in planner.order}
    planned = [
        PlannedWorkload(
            p.kind,
            p.namespace or "",
            p.name,
            tuple(
                PodSetTrial(
                    ps.name,
                    ps.count,
                    ps.flavor if ps.governed else None,
                    ps.topology,
                    ps.assignment,
                    ps.message,
                    ps.why_not,
                )
                for ps in p.podsets
            ),
            queues.get((p.kind, p.namespace or "", p.name)),
        )
        for p in plans
    ]
    return _model(
        planner.capacity,
        planner.workloads,
        _slim_pods(planner),
        check_flavors,
        options,
        prefix=planner.prefix,
        gates=planner.gates,
        planned=planned,
    )


def _queue(obj: Workload | Job | JobSet) -> str | None:
    if isinstance(obj, Workload):
        return obj.spec.queue_name
    return obj.metadata.labels.get(c.KUEUE_QUEUE_NAME_LABEL)


def _slim_pods(planner: Planner) -> list[SlimPod]:
    """The dump's pods of our workloads as the controller keeps them. The planner's run has
    refused every pod it charges whose requests are malformed, so the ones skipped here are
    never charged."""
    out = []
    for pod in planner.pods:
        if c.WORKLOAD_LABEL not in pod.metadata.labels:
            continue  # the map counts only our workloads' pods
        try:
            out.append(slim_pod(pod.model_dump(by_alias=True, exclude_none=True), prefix=planner.prefix))
        except (QuantityError, ValueError):
            continue
    return out


# --- capacity -----------------------------------------------------------------------------------


def capacity_model(
    capacity: LiveCapacity,
    workloads: Iterable[Workload],
    pods: Iterable[SlimPod],
    check_flavors: Mapping[str, Collection[str]],
    options: MapOptions,
    *,
    topology: str | None = None,
    prefix: str = c.DEFAULT_ANNOTATION_PREFIX,
    gates: FeatureGates | None = None,
    grace: float = DEFAULT_GRACE_SECONDS,
) -> MapModel:
    """The map of a capacity model as the controller holds it (``capacity --html`` reads one from
    the cluster, the controller serves its own); ``topology``: only that Topology's flavors;
    ``grace``: how long a node is NotReady before it counts as failed."""
    model = _model(
        capacity, workloads, pods, check_flavors, options, prefix=prefix, gates=gates or capacity.gates, grace=grace
    )
    if topology is not None:
        model = replace(model, flavors=tuple(f for f in model.flavors if f.topology == topology))
    return model


def capacity_page(
    capacity: LiveCapacity,
    workloads: Iterable[Workload],
    pods: Iterable[SlimPod],
    check_flavors: Mapping[str, Collection[str]],
    options: MapOptions,
    *,
    title: str,
    topology: str | None = None,
    prefix: str = c.DEFAULT_ANNOTATION_PREFIX,
    gates: FeatureGates | None = None,
) -> tuple[str, MapModel]:
    """(the page, its model); ``topology``: draw only that Topology's flavors."""
    model = capacity_model(
        capacity, workloads, pods, check_flavors, options, topology=topology, prefix=prefix, gates=gates
    )
    return render_map(model, title=title), model
