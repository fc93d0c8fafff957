"""What the benchmark's watches saw, per Job: the moment each stage was first reached.

Pure: the watch handlers hand in small states (``JobState``, ``WorkloadState``, ``PodState``)
with the wall-clock time they arrived; the same clock for both variants, so the watch's own
delay cancels out of every ratio.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# The stages of one Job, in order (a variant may skip one: Kueue's TAS has no check of ours).
STAGES = (
    "created",
    "workload_created",
    "quota_reserved",
    "check_ready",
    "admitted",
    "unsuspended",
    "pods_created",
    "ungated",
    "bound",
)


@dataclass(frozen=True, slots=True)
class JobState:
    name: str
    parallelism: int
    suspended: bool
    finished: bool


@dataclass(frozen=True, slots=True)
class WorkloadState:
    job: str
    quota_reserved: bool
    check_ready: bool
    admitted: bool


@dataclass(frozen=True, slots=True)
class PodState:
    job: str
    uid: str
    gated: bool
    node: str


@dataclass
class JobTimeline:
    parallelism: int = 0
    at: dict[str, float] = field(default_factory=dict)  # stage -> first time reached
    finished: float | None = None
    seen: dict[str, float] = field(default_factory=dict)  # pod uid -> first seen
    ungated: dict[str, float] = field(default_factory=dict)
    bound: dict[str, float] = field(default_factory=dict)
    nodes: dict[str, str] = field(default_factory=dict)  # pod uid -> node

    def reach(self, stage: str, now: float) -> None:
        self.at.setdefault(stage, now)

    def complete(self) -> bool:
        return self.finished is not None


@dataclass
class Timelines:
    jobs: dict[str, JobTimeline] = field(default_factory=dict)

    def of(self, name: str) -> JobTimeline:
        return self.jobs.setdefault(name, JobTimeline())

    def on_job(self, job: JobState, now: float) -> None:
        tl = self.of(job.name)
        tl.parallelism = job.parallelism
        tl.reach("created", now)
        if not job.suspended:
            tl.reach("unsuspended", now)
        if job.finished and tl.finished is None:
            tl.finished = now

    def on_workload(self, wl: WorkloadState, now: float) -> None:
        if not wl.job:
            return
        tl = self.of(wl.job)
        # Kueue's Job reconciler made it: the part of "created -> quota reserved" that is not
        # the scheduler's.
        tl.reach("workload_created", now)
        if wl.quota_reserved:
            tl.reach("quota_reserved", now)
        if wl.check_ready:
            tl.reach("check_ready", now)
        if wl.admitted:
            tl.reach("admitted", now)

    def on_pod(self, pod: PodState, now: float) -> None:
        if not pod.job:
            return
        tl = self.of(pod.job)
        tl.seen.setdefault(pod.uid, now)
        if not pod.gated:
            tl.ungated.setdefault(pod.uid, now)
        if pod.node:
            tl.bound.setdefault(pod.uid, now)
            tl.nodes[pod.uid] = pod.node
        # A stage over pods is reached when the last of the Job's pods reaches it.
        for stage, times in (("pods_created", tl.seen), ("ungated", tl.ungated), ("bound", tl.bound)):
            if tl.parallelism and len(times) >= tl.parallelism and stage not in tl.at:
                tl.at[stage] = max(times.values())

    def finished(self) -> int:
        return sum(1 for tl in self.jobs.values() if tl.complete())


def job_state(raw: dict[str, Any]) -> JobState:
    meta, spec, status = raw.get("metadata") or {}, raw.get("spec") or {}, raw.get("status") or {}
    conditions = status.get("conditions") or []
    finished = any(c.get("type") in ("Complete", "Failed") and c.get("status") == "True" for c in conditions)
    return JobState(str(meta.get("name", "")), int(spec.get("parallelism") or 0), bool(spec.get("suspend")), finished)


def workload_state(raw: dict[str, Any]) -> WorkloadState:
    meta, status = raw.get("metadata") or {}, raw.get("status") or {}
    owner: dict[str, Any] = next((o for o in meta.get("ownerReferences") or [] if o.get("kind") == "Job"), {})
    conditions = {c.get("type"): c.get("status") == "True" for c in status.get("conditions") or []}
    ready = any(e.get("state") == "Ready" for e in status.get("admissionChecks") or [])
    return WorkloadState(
        str(owner.get("name", "")), conditions.get("QuotaReserved", False), ready, conditions.get("Admitted", False)
    )


def pod_state(raw: dict[str, Any]) -> PodState:
    meta, spec = raw.get("metadata") or {}, raw.get("spec") or {}
    labels = meta.get("labels") or {}
    job = labels.get("batch.kubernetes.io/job-name") or labels.get("job-name") or ""
    return PodState(
        str(job), str(meta.get("uid", "")), bool(spec.get("schedulingGates")), str(spec.get("nodeName") or "")
    )
