"""The discrete-event simulator: jobs arrive, wait in Kueue's BestEffortFIFO queue, are placed by
the product's pipeline, run, and leave.

Every placement is ``workload_requests`` (once per distinct request, from a pod template
carrying our annotation) then ``place_workload`` on the product's ``LiveCapacity``; a job that
fits is charged into that model as the controller charges an admitted workload
(``set_workload_usage`` with the engine's assignment) and removed when it finishes or is
evicted. The simulator keeps its own count of GPUs in use only to skip jobs larger than what
is free in total (they cannot fit), and the tests check that count against the model.

The queue: waiting jobs in order of priority (higher first), then arrival; each pass tries them
in that order (``Policy.place``: the product's placement, as the policy calls it), and one that
does not fit is skipped, so smaller jobs behind it may start (what starves big jobs). A pass
runs after every event time (arrivals, finishes). A placement is not asked again while its
answer cannot have changed: a request that did not fit is remembered as not fitting until
capacity is freed (a finish, an eviction) or the policy says what it hides changed
(``invalidate``); capacity only shrinks in between, so the engine would answer no again. What
counts as "the same request" is the policy's to say (``Policy.memo_key``). A job larger than
what any domain of its level has free (``bounds``) is not asked about at all.

Times are hours. The measured window is ``[start, end)``: time-averaged figures integrate over it,
job figures cover the jobs that arrive in it.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Hashable, Iterable, Iterator
from dataclasses import dataclass, field

from kueue_tas.api.constants import (
    DEFAULT_ANNOTATION_PREFIX,
    SUFFIX_REQUIRED_TOPOLOGY,
    SUFFIX_UNCONSTRAINED_TOPOLOGY,
)
from kueue_tas.capacity.rules import UsageEntry
from kueue_tas.capacity.workload_placement import (
    PodSetInput,
    WorkloadRequests,
    place_workload,
    workload_requests,
)

from .bounds import FitBound
from .policies import Policy
from .shapes import FLAVOR, GPU, Shape, build_capacity
from .trace import Job

Signature = tuple[int, int, str | None]  # pods, GPUs per pod, required level

_FINISH, _ARRIVAL = 0, 1  # at one instant, finishes free capacity before arrivals are tried


def pod_template(job: Job) -> dict[str, object]:
    """The job's pod template as a user writes it: our annotation and one container's GPUs."""
    if job.level is None:
        annotations = {DEFAULT_ANNOTATION_PREFIX + SUFFIX_UNCONSTRAINED_TOPOLOGY: "true"}
    else:
        annotations = {DEFAULT_ANNOTATION_PREFIX + SUFFIX_REQUIRED_TOPOLOGY: job.level}
    container = {"name": "main", "image": "sim", "resources": {"requests": {GPU: str(job.gpus_per_pod)}}}
    return {"metadata": {"annotations": annotations}, "spec": {"containers": [container]}}


@dataclass(eq=False)
class JobRecord:
    """One job's life in the simulation."""

    job: Job
    requests: WorkloadRequests
    queued_since: float | None = None  # while waiting: since when (arrival or eviction)
    waited: float = 0.0  # hours spent waiting before the current run (or up to now)
    started: float | None = None  # while running: the current run's start
    runs: list[tuple[float, float]] = field(default_factory=list)  # (start, end) of every run that ended
    finished: float | None = None
    evictions: int = 0
    saw_room: bool = False  # waited once while enough GPUs were free in total
    run_id: int = 0  # finish events of an evicted run carry an older id

    @property
    def key(self) -> str:
        return f"sim/job-{self.job.id}"

    @property
    def signature(self) -> Signature:
        return (self.job.pods, self.job.gpus_per_pod, self.job.level)


@dataclass
class Totals:
    """What the window accumulated: GPU-hours busy, free while a job waited, reserved but idle,
    lost to preemption; the victims of each preemption."""

    busy: float = 0.0
    stranded: float = 0.0
    reserved_idle: float = 0.0
    lost: float = 0.0
    victims: list[int] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class Sample:
    """The state after one event time's pass (``Sim(record=True)``): the simulator's GPUs in use,
    the model's TAS usage of GPUs, jobs waiting."""

    time: float
    used: int
    model_used: int
    waiting: int


def _order(rec: JobRecord) -> tuple[int, float, int]:
    """The queue's order: priority (higher first), then arrival."""
    return (-rec.job.priority, rec.job.arrival, rec.job.id)


class Sim:
    def __init__(
        self,
        shape: Shape,
        policy: Policy,
        jobs: Iterable[Job],
        *,
        window: tuple[float, float] = (0.0, float("inf")),
        stop_when_measured: bool = True,
        record: bool = False,
        check_skips: bool = False,
    ) -> None:
        """``jobs`` in arrival order (read lazily); ``stop_when_measured``: end once the window has
        passed and every job that arrived in it has started (else when nothing is left to do);
        ``record``: keep a ``Sample`` per event time; ``check_skips``: ask the engine about every
        job the cuts skip too, and fail if it would have fitted (tests)."""
        self.shape = shape
        self.policy = policy
        self.capacity = build_capacity(shape)
        self.window = window
        self.now = 0.0
        self.used = 0
        self.queue: list[JobRecord] = []  # in queue order
        self.running: dict[int, JobRecord] = {}
        self.records: list[JobRecord] = []  # every job that arrived, in arrival order
        self.totals = Totals()
        self.placements = 0  # placements asked of the policy (kueue-exact: one engine call each)
        self.starts = 0  # runs started (an evicted job starts again)
        self.version = 0  # counts starts and ends: an answer found at one version holds until the next
        self.samples: list[Sample] | None = [] if record else None
        self._jobs: Iterator[Job] = iter(jobs)
        self._events: list[tuple[float, int, int, int, JobRecord | Job]] = []
        self._seq = itertools.count()
        self._requests: dict[Signature, WorkloadRequests] = {}
        self._failed: set[Hashable] = set()
        self._measured_waiting = 0
        self._stop_when_measured = stop_when_measured
        self._evicted: list[JobRecord] = []
        self._bound = FitBound(self.capacity)
        self._check_skips = check_skips
        self._next_arrival()

    # --- what policies use --------------------------------------------------------------------

    @property
    def free_gpus(self) -> int:
        return self.shape.gpus - self.used

    def invalidate(self) -> None:
        """Forget which requests did not fit: the policy changed what some placement sees."""
        self._failed.clear()

    def evict(self, victims: Iterable[JobRecord]) -> None:
        """One preemption: ``victims`` (running) stop, lose their work, and wait again."""
        count = 0
        for rec in victims:
            assert rec.started is not None, f"{rec.key} is not running"
            self._end_run(rec)
            self.totals.lost += self._in_window_gpu_hours(rec, rec.started, self.now)
            rec.started = None
            rec.evictions += 1
            rec.run_id += 1
            self._evicted.append(rec)
            count += 1
        if count and self._in_window(self.now):
            self.totals.victims.append(count)

    # --- the loop -------------------------------------------------------------------------------

    def run(self, until: float = float("inf")) -> None:
        """Process events up to ``until`` hours (or until done, see ``__init__``)."""
        while self._events:
            t = self._events[0][0]
            if t > until:
                break
            if self._stop_when_measured and t >= self.window[1] and self._measured_waiting == 0:
                break
            self._advance(t)
            while self._events and self._events[0][0] == t:
                _, _, kind, run_id, item = heapq.heappop(self._events)
                if kind == _ARRIVAL:
                    assert isinstance(item, Job)
                    self._arrive(item)
                else:
                    assert isinstance(item, JobRecord)
                    if item.run_id == run_id and item.started is not None:
                        self._finish(item)
            self._pass()
            if self.samples is not None:
                self.samples.append(Sample(t, self.used, self.model_gpus_in_use(), len(self.queue)))
        end = min(until, self.window[1])
        if end != float("inf"):
            self._advance(end)  # the last state holds until the window's end (or ``until``)

    def model_gpus_in_use(self) -> int:
        """GPUs the capacity model holds for admitted workloads (the simulator's ``used`` must equal it)."""
        snap = self.capacity.snapshot(FLAVOR)
        assert snap is not None
        column = snap.capacity.columns[GPU]
        return int(snap.capacity.tas[:, column].sum())

    def _next_arrival(self) -> None:
        job = next(self._jobs, None)
        if job is not None:
            heapq.heappush(self._events, (job.arrival, next(self._seq), _ARRIVAL, 0, job))

    def _in_window(self, t: float) -> bool:
        return self.window[0] <= t < self.window[1]

    def _in_window_gpu_hours(self, rec: JobRecord, start: float, end: float) -> float:
        return rec.job.gpus * max(0.0, min(end, self.window[1]) - max(start, self.window[0]))

    def _advance(self, t: float) -> None:
        """Integrate the state held since ``self.now`` up to ``t`` over the window."""
        low, high = max(self.now, self.window[0]), min(t, self.window[1])
        if high > low:
            dt = high - low
            self.totals.busy += self.used * dt
            if self.queue:
                self.totals.stranded += self.free_gpus * dt
            self.totals.reserved_idle += self.policy.reserved_idle_gpus(self) * dt
        self.now = max(self.now, t)

    def _requests_of(self, job: Job) -> WorkloadRequests:
        signature = (job.pods, job.gpus_per_pod, job.level)
        requests = self._requests.get(signature)
        if requests is None:
            podset = PodSetInput("main", job.pods, pod_template(job), FLAVOR)
            got = workload_requests([podset], self.capacity, prefix=DEFAULT_ANNOTATION_PREFIX)
            if not isinstance(got, WorkloadRequests):
                raise ValueError(f"job {job.id}: the pipeline refuses its request: {got}")
            requests = self._requests[signature] = got
        return requests

    def _arrive(self, job: Job) -> None:
        rec = JobRecord(job, self._requests_of(job))
        self.records.append(rec)
        self._enqueue(rec)
        self._next_arrival()

    def _enqueue(self, rec: JobRecord) -> None:
        rec.queued_since = self.now
        if self._in_window(rec.job.arrival):
            self._measured_waiting += 1
        i = len(self.queue)
        # Arrivals come in order, so a new one nearly always goes last: walk back from the end.
        while i > 0 and _order(self.queue[i - 1]) > _order(rec):
            i -= 1
        self.queue.insert(i, rec)

    def _dequeue_time(self, rec: JobRecord) -> None:
        assert rec.queued_since is not None
        rec.waited += self.now - rec.queued_since
        rec.queued_since = None
        if self._in_window(rec.job.arrival):
            self._measured_waiting -= 1

    def _pass(self) -> None:
        """Try the waiting jobs in queue order; evicted jobs wait again and the pass is repeated."""
        while True:
            self.policy.begin_pass(self)
            kept: list[JobRecord] = []
            for rec in self.queue:
                if rec.job.gpus > self.free_gpus:
                    self._check_skip(rec)
                    kept.append(rec)
                    continue
                if self._try(rec):
                    continue
                rec.saw_room = True
                if self.policy.blocked(rec, self) and self._try(rec):
                    continue
                kept.append(rec)
            self.queue = kept
            if not self._evicted:
                return
            evicted, self._evicted = self._evicted, []
            for rec in evicted:
                self._enqueue(rec)

    def _try(self, rec: JobRecord) -> bool:
        """Place ``rec`` through the policy (the pipeline); start it when it fits."""
        if not self._bound.may_fit(*rec.signature):
            self._check_skip(rec)
            return False
        memo = self.policy.memo_key(rec)
        if memo is not None and memo in self._failed:
            self._check_skip(rec, by_policy=True)
            return False
        self.placements += 1
        placed = self.policy.place(rec, self)
        if not placed.fits:
            if memo is not None:
                self._failed.add(memo)
            return False
        self._charge(rec, placed.usage(rec.requests))
        self._dequeue_time(rec)
        rec.started = self.now
        self.starts += 1
        self.version += 1
        self.used += rec.job.gpus
        self.running[rec.job.id] = rec
        heapq.heappush(self._events, (self._run_ends_at(rec), next(self._seq), _FINISH, rec.run_id, rec))
        self.policy.started(rec, placed, self)
        return True

    # The seams below are methods so that the tests can break one in a subclass and see their
    # bookkeeping checks fail.

    def _charge(self, rec: JobRecord, entries: tuple[UsageEntry, ...]) -> None:
        """Hold the decided assignment in the model, as for a workload observed admitted."""
        self.capacity.set_workload_usage(rec.key, entries)

    def _release(self, rec: JobRecord) -> None:
        self.capacity.remove_workload_usage(rec.key)

    def _run_ends_at(self, rec: JobRecord) -> float:
        return self.now + rec.job.runtime

    def _freed(self) -> None:
        """Capacity was freed: the bounds and every remembered "does not fit" may be wrong now."""
        self._bound.stale()
        self._failed.clear()

    def _check_skip(self, rec: JobRecord, by_policy: bool = False) -> None:
        """A cut by free capacity must hold for the engine itself, a remembered answer for the policy."""
        if not self._check_skips:
            return
        if (self.policy.place(rec, self) if by_policy else place_workload(rec.requests, self.capacity)).fits:
            raise AssertionError(f"{rec.key} was skipped at {self.now:.3f} h but the engine places it")

    def _end_run(self, rec: JobRecord) -> None:
        """End ``rec``'s current run now: out of the model, its GPUs free again."""
        assert rec.started is not None
        self._release(rec)
        self.used -= rec.job.gpus
        del self.running[rec.job.id]
        rec.runs.append((rec.started, self.now))
        self.version += 1
        self._freed()
        self.policy.ended(rec, self)

    def _finish(self, rec: JobRecord) -> None:
        self._end_run(rec)
        rec.started = None
        rec.finished = self.now
