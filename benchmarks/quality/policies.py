"""What a placement policy may change in the simulated queue, and the policies the simulator knows.

A policy is one class. The simulator runs Kueue's BestEffortFIFO queue itself (waiting jobs
tried in order of priority, then arrival; one that does not fit is skipped) and asks the policy
at three points, so a policy never places anything by itself:

* ``begin_pass``: before each pass over the queue (a reservation policy updates its
  reservations here);
* ``place``: the job's placement, through the product's pipeline (a reservation hides the
  reserved domain from everyone the reservation does not let in); ``memo_key``: jobs with
  equal keys get the same answer from ``place`` until capacity is freed or the policy calls
  ``Sim.invalidate`` (the simulator then skips asking again; None: never the same);
  ``started`` / ``ended``: the job was placed / finished or was evicted;
* ``blocked``: the job did not fit; a preemption policy may evict running jobs
  (``Sim.evict``) and answer True to have the job tried again at once.

``reserved_idle_gpus`` is the GPUs the policy holds free for a reservation at this moment, for
the figure of that name.

``kueue-exact`` is Kueue's placement as it is: nothing closed, no eviction. Reservation and
topology-driven preemption (``topology_policies``) call the product's policy modules
(``kueue_tas.capacity.reservation`` and ``kueue_tas.capacity.preemption``); ``registry`` names them.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import TYPE_CHECKING, Protocol

from kueue_tas.capacity.workload_placement import WorkloadPlacement, place_workload

if TYPE_CHECKING:
    from .sim import JobRecord, Sim


class Policy(Protocol):
    name: str

    def begin_pass(self, sim: Sim) -> None: ...

    def place(self, job: JobRecord, sim: Sim) -> WorkloadPlacement: ...

    def memo_key(self, job: JobRecord) -> Hashable: ...

    def started(self, job: JobRecord, placement: WorkloadPlacement, sim: Sim) -> None: ...

    def ended(self, job: JobRecord, sim: Sim) -> None: ...

    def blocked(self, job: JobRecord, sim: Sim) -> bool: ...

    def reserved_idle_gpus(self, sim: Sim) -> int: ...


class KueueExact:
    """Kueue's own placement: every job sees every domain, nothing is evicted for topology."""

    name = "kueue-exact"

    def begin_pass(self, sim: Sim) -> None:
        return None

    def place(self, job: JobRecord, sim: Sim) -> WorkloadPlacement:
        return place_workload(job.requests, sim.capacity)

    def memo_key(self, job: JobRecord) -> Hashable:
        return job.signature

    def started(self, job: JobRecord, placement: WorkloadPlacement, sim: Sim) -> None:
        return None

    def ended(self, job: JobRecord, sim: Sim) -> None:
        return None

    def blocked(self, job: JobRecord, sim: Sim) -> bool:
        return False

    def reserved_idle_gpus(self, sim: Sim) -> int:
        return 0


BASELINE = KueueExact.name
