"""Issue 27, DST base seed 166: copies of a Workload older than the one a Ready decision was made
on, delivered late by a lagging watch, must not take that decision's capacity away.

The admission reconciler decides from a re-read when its informer lags (our last write not seen
back): the decision, its assumed capacity and its Ready entry are about a newer Workload than the
informer holds. The informer then catches up through the older versions: a Ready entry of an
earlier admission (same record), Kueue's eviction of it, the re-reservation. Each is superseded by
the decision already written, yet before the fix the first replaced the assumption with the old
admission's usage, the eviction removed it, and the re-reservation was decided again: the
Workload's Ready assignment stood on the API server while the model held nothing for it, and the
next decision was given the same hosts (the simulator's ``capacity`` violation: a host with 6
GPUs assigned to admitted workloads, 4 allocatable).
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
from typing import Any

from admission_harness import Harness, Writes, drain, evicted, harness, hosts_of, readmitted, ready, workload

from kueue_tas.api import constants as c
from kueue_tas.api.workload import Workload
from kueue_tas.controllers.admission.reconciler import WRITE_OBSERVE_TIMEOUT_SECONDS

KEY = "ns/wl"


class RereadWrites(Writes):
    """A re-read returns ``fresh`` (the API server ahead of the informer) when set."""

    def __init__(self) -> None:
        super().__init__()
        self.fresh: dict[str, Any] | None = None

    async def read_workload(self, workload: Workload) -> Workload | None:
        return workload if self.fresh is None else Workload.model_validate(self.fresh)


def _other(h: Harness) -> dict[str, Any]:
    obj = workload(uid="u2", resource_version="50")
    obj["metadata"]["name"] = "other"
    return obj


async def test_late_older_copies_keep_a_written_decisions_capacity() -> None:
    writes = RereadWrites()
    h = harness(writer=writes)
    first_seen = workload(resource_version="2")
    h.add_workload(first_seen)
    assert await h.admission.reconcile(KEY) is None
    first_ready = ready(h, first_seen)  # rv 3: our first Ready, not yet seen by the informer
    out = evicted(first_ready)  # rv 4: Kueue evicts (entry reset, quota kept)
    back = readmitted(out)  # rv 5: quota reserved again, our entry Pending

    # Our write is not seen back within the timeout: the reconciler re-reads and decides again
    # from the API server's copy (rv 5), the informer still at rv 2.
    writes.fresh = back
    h.now[0] += WRITE_OBSERVE_TIMEOUT_SECONDS + 1
    assert await h.admission.reconcile(KEY) is None
    assert [e["state"] for e in writes.checks] == ["Ready", "Ready"]
    assert h.free_gpus() == 32 - 8
    decided = ready(h, back)

    # The informer catches up through the versions before the one decided on.
    for stale in (first_ready, out, back):
        h.modify_workload(copy.deepcopy(stale))
        assert h.capacity.holds(KEY), f"rv {stale['metadata']['resourceVersion']} dropped the decision's capacity"
        assert h.free_gpus() == 32 - 8
    assert KEY in await drain(h)
    await h.admission.reconcile(KEY)
    assert len(writes.checks) == 2, "a copy older than the decision is never decided again"
    # Still not seen back: the re-read shows our Ready stands; nothing is decided again.
    writes.fresh = decided
    h.now[0] += WRITE_OBSERVE_TIMEOUT_SECONDS + 1
    await h.admission.reconcile(KEY)
    h.modify_workload(copy.deepcopy(back))  # and once more, late, the re-reserved copy
    await drain(h)
    await h.admission.reconcile(KEY)
    assert len(writes.checks) == 2 and h.free_gpus() == 32 - 8

    # Meanwhile another workload is decided: never onto the hosts the written decision holds.
    writes.fresh = None
    other = _other(h)
    h.add_workload(other)
    assert await h.admission.reconcile("ns/other") is None
    assert not set(hosts_of(ready(h, other))) & set(hosts_of(decided))
    assert h.free_gpus() == 32 - 16

    # Our own writes come back: the decision is trusted, held once.
    h.modify_workload(decided)
    assert h.capacity.holds(KEY) and not h.capacity.assumes(KEY)
    assert h.free_gpus() == 32 - 16


# --- a deposed leader's decision still in flight (simulator handover seed 1131) ------------------


async def test_a_new_leader_holds_an_earlier_leaders_annotated_decision_until_its_version_changes() -> None:
    """The earlier leader annotated ``wl`` and sent its Ready entry (guarded by the version the
    annotation left) just before it was deposed; that write may land after this leader decided
    ``other``. Fails before the fix: ``other`` was given the same hosts."""
    earlier = harness()
    earlier.add_workload(workload())
    assert await earlier.admission.reconcile(KEY) is None
    text = earlier.writes.annotations[-1]
    annotated = workload(resource_version="6", workload_annotations={c.TOPOLOGY_ASSIGNMENT_ANNOTATION: text})
    old_hosts = hosts_of(annotated)

    h = harness()
    other = _other(h)
    h.add_workload(other)  # listed first: decided first
    h.add_workload(annotated)
    runner = asyncio.create_task(h.admission.run())
    for _ in range(50):
        await asyncio.sleep(0)
        if len(h.writes.annotations) == 2:
            break
    runner.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await runner
    decided = dict(zip(("other", "wl"), h.writes.annotations, strict=True))
    other_hosts = hosts_of({"metadata": {"annotations": {c.TOPOLOGY_ASSIGNMENT_ANNOTATION: decided["other"]}}})
    assert not set(other_hosts) & set(old_hosts), "never onto hosts an earlier leader's Ready may still take"

    # The earlier leader's entry lands: trusted from then on, the fence released (held once).
    landed = copy.deepcopy(annotated)
    landed["status"]["admissionChecks"] = [earlier.writes.checks[-1]]
    landed["metadata"]["resourceVersion"] = "7"
    h.modify_workload(landed)
    assert h.capacity.fenced() == {}
    assert h.capacity.holds(KEY)


async def test_fences_end_when_an_earlier_leaders_write_can_no_longer_land() -> None:
    earlier = harness()
    earlier.add_workload(workload())
    assert await earlier.admission.reconcile(KEY) is None
    text = earlier.writes.annotations[-1]
    h = harness()
    h.add_workload(workload(resource_version="6", workload_annotations={c.TOPOLOGY_ASSIGNMENT_ANNOTATION: text}))
    h.admission.fence_earlier_decisions()
    assert h.free_gpus() == 32 - 8
    h.admission.release_fences()
    assert h.free_gpus() == 32 and h.capacity.fenced() == {}
    # A newer version (Kueue evicted it, or anyone wrote) refuses the guarded write: released too.
    h.admission.fence_earlier_decisions()
    assert h.free_gpus() == 32 - 8
    h.modify_workload(workload(resource_version="8", workload_annotations={c.TOPOLOGY_ASSIGNMENT_ANNOTATION: text}))
    assert h.free_gpus() == 32 and h.capacity.fenced() == {}
