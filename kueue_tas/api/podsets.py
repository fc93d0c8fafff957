"""PodSets of a Job, a JobSet or a Workload, built the way Kueue builds them.

* ``batch/v1`` Job (Kueue ``pkg/controller/jobs/job/job_controller.go``): one PodSet
  named ``main``; count = min(parallelism, completions), parallelism defaulting to 1
  and an unset completions meaning "parallelism"; template = ``spec.template``
  without the labels the Job controller manages.
* JobSet (Kueue ``pkg/controller/jobs/jobset/jobset_controller.go``): one PodSet per
  ``spec.replicatedJobs[i]``, in order, named by the lower-cased replicatedJob name
  (``kueue.NewPodSetReference``); count = replicas x min(parallelism, completions);
  template = ``replicatedJobs[i].template.spec.template``.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kueue_tas.api import constants as c
from kueue_tas.api.core_objects import Job, JobSet, JobSpec
from kueue_tas.api.workload import Workload

# Labels the Job controller adds to the pod template; Kueue drops them from the PodSet.
JOB_MANAGED_LABELS = (
    c.LEGACY_JOB_NAME_LABEL,
    c.LEGACY_CONTROLLER_UID_LABEL,
    c.JOB_NAME_LABEL,
    c.JOB_CONTROLLER_UID_LABEL,
)


@dataclass(frozen=True, slots=True)
class PodSetSpec:
    name: str
    count: int
    template: dict[str, Any]  # a PodTemplateSpec: {"metadata": {...}, "spec": {...}}


def job_pods_count(spec: JobSpec) -> int:
    """min(parallelism, completions); parallelism defaults to 1, unset completions to parallelism."""
    parallelism = 1 if spec.parallelism is None else spec.parallelism
    if spec.completions is not None and spec.completions < parallelism:
        return spec.completions
    return parallelism


def _as_job(job: Job | Mapping[str, Any]) -> Job:
    return job if isinstance(job, Job) else Job.model_validate(job)


def _as_jobset(jobset: JobSet | Mapping[str, Any]) -> JobSet:
    return jobset if isinstance(jobset, JobSet) else JobSet.model_validate(jobset)


def _as_workload(workload: Workload | Mapping[str, Any]) -> Workload:
    return workload if isinstance(workload, Workload) else Workload.model_validate(workload)


def podsets_of_job(job: Job | Mapping[str, Any]) -> list[PodSetSpec]:
    model = _as_job(job)
    template = copy.deepcopy(model.spec.template)
    # Templates are raw dicts (written back unchanged), so any level may be of the wrong type
    # here; the caller reports that with its path (``api.shapes.template_shape_error``).
    meta = template.get("metadata")
    labels = meta.get("labels") if isinstance(meta, dict) else None
    if isinstance(labels, dict):
        for key in JOB_MANAGED_LABELS:
            labels.pop(key, None)
    return [PodSetSpec(name=c.KUEUE_DEFAULT_PODSET_NAME, count=job_pods_count(model.spec), template=template)]


def podsets_of_jobset(jobset: JobSet | Mapping[str, Any]) -> list[PodSetSpec]:
    model = _as_jobset(jobset)
    return [
        PodSetSpec(
            name=rj.name.lower(),
            count=rj.replicas * job_pods_count(rj.template.spec),
            template=copy.deepcopy(rj.template.spec.template),
        )
        for rj in model.spec.replicated_jobs
    ]


def podsets_of_workload(workload: Workload | Mapping[str, Any]) -> list[PodSetSpec]:
    """The Workload's own ``spec.podSets`` (what Kueue recorded), templates copied."""
    model = _as_workload(workload)
    return [PodSetSpec(name=ps.name, count=ps.count, template=copy.deepcopy(ps.template)) for ps in model.spec.pod_sets]


def podsets_of(obj: Job | JobSet | Workload | Mapping[str, Any]) -> list[PodSetSpec]:
    """Dispatch on the model type, or on ``kind`` for a raw manifest."""
    if isinstance(obj, Job):
        return podsets_of_job(obj)
    if isinstance(obj, JobSet):
        return podsets_of_jobset(obj)
    if isinstance(obj, Workload):
        return podsets_of_workload(obj)
    kind = obj.get("kind")
    if kind == c.KIND_JOB:
        return podsets_of_job(obj)
    if kind == c.KIND_JOBSET:
        return podsets_of_jobset(obj)
    if kind == c.KIND_WORKLOAD:
        return podsets_of_workload(obj)
    raise ValueError(f"cannot build PodSets from kind {kind!r}: expected Job, JobSet or Workload")
