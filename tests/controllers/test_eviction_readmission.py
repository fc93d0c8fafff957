"""Issue 13, deliverable 6: Kueue evicts an admitted workload (preemption, deactivation,
waitForPodsReady timeout) and admits it again later.

Kueue shows an eviction on the Workload as condition ``Evicted=True`` with every check entry
reset to ``Pending`` ("Reset to Pending after eviction. Previously: Ready",
pkg/workload/evict), then withdraws the quota (``QuotaReserved=False``, ``status.admission``
cleared); a re-admission reserves quota again (``Evicted`` back to False) with our entry still
Pending. Between the two, nothing of the old admission may hold capacity or steer pods:

* the capacity its assignment held is released (the entry is no longer Ready), and a
  decision that never showed as Ready lets go of its assumed capacity once its write can no
  longer land (before: held for as long as the workload stayed evicted, e.g. deactivated);
* the ungater drops the expectations of the old admission's releases (before: kept until each
  pod was seen again, counted against the next admission's domains);
* the topology health signal forgets what it said about the old admission;
* the re-admission is decided afresh, on the capacity as it is then.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import builders as mk
import pytest
from admission_harness import ALLOCATABLE, Writes, drain, evicted, harness, hosts_of, readmitted, ready, workload
from vocab import HOST, RACK

from kueue_tas.api import constants as c
from kueue_tas.api.workload import Workload
from kueue_tas.controllers.deps import ControllerDeps
from kueue_tas.controllers.health.reconciler import NOT_ENFORCED_REASON, RESTORED_REASON, TopologyHealth
from kueue_tas.controllers.timings import UNKNOWN_WRITE_SETTLE_SECONDS
from kueue_tas.controllers.ungate.reconciler import Ungater
from kueue_tas.kube.errors import TransportError
from kueue_tas.kube.events import ObjectRef
from kueue_tas.runtime.config import Settings
from kueue_tas.runtime.metrics import Metrics

KEY = "ns/wl"
RACK_OF = {"h1": "r1", "h2": "r1", "h3": "r2", "h4": "r2"}


class UnansweredWrites(Writes):
    """The Ready entry write gets no answer (it may or may not have landed); ``fresh`` is what a
    re-read returns (default: the copy it was asked about)."""

    def __init__(self) -> None:
        super().__init__()
        self.fail_entry = True
        self.fresh: Workload | None = None
        self.reads = 0

    async def write_check(self, workload: Workload, entry: dict[str, Any]) -> None:
        if self.fail_entry:
            self.fail_entry = False
            raise TransportError("read timed out")
        await super().write_check(workload, entry)

    async def read_workload(self, workload: Workload) -> Workload | None:
        self.reads += 1
        return self.fresh or workload


@dataclass
class Patches:
    """The ungater's pod patcher and Event sink: records which pod went to which host."""

    sent: dict[str, str] = field(default_factory=dict)

    async def patch(self, namespace: str, name: str, patch: dict[str, Any], resource_version: str) -> None:
        self.sent[name] = patch["spec"]["nodeSelector"][HOST]

    async def emit_event(self, regarding: ObjectRef, *, reason: str, message: str, type: str = "Normal") -> bool:
        return True

    async def write_entry(self, workload: Workload, entry: dict[str, Any]) -> None:
        """The health signal's entry writes (not played back here)."""


def pod(name: str, *, node: str | None = None, deleting: bool = False, rv: str = "1") -> dict[str, Any]:
    labels = {c.WORKLOAD_LABEL: "u1", c.PODSET_LABEL: "main"}
    gates = () if node else (c.SCHEDULING_GATE,)
    selector = {HOST: node} if node else None
    return mk.pod(
        name,
        node,
        namespace="ns",
        gpus=1,
        uid=f"uid-{name}",
        labels=labels,
        gates=gates,
        selector=selector,
        deleting=deleting,
        resource_version=rv,
        phase="Running" if node else "Pending",
    )


async def test_an_evicted_workload_lets_go_of_capacity_its_unanswered_entry_held() -> None:
    """Fails before this fix: the assumption stayed as long as the workload stayed evicted."""
    writes = UnansweredWrites()
    h = harness(writer=writes)
    h.add_workload(workload())
    assert await h.admission.reconcile(KEY) == UNKNOWN_WRITE_SETTLE_SECONDS
    assert h.capacity.holds(KEY) and h.free_gpus() == 32 - 8

    # Kueue deactivates it: evicted, then its quota withdrawn. Our Ready never showed.
    gone = evicted(workload(), quota=False)
    h.modify_workload(gone)
    assert KEY in await drain(h)
    # The write may still land until the apiserver's own timeout: held meanwhile, no read yet.
    assert await h.admission.reconcile(KEY) == pytest.approx(UNKNOWN_WRITE_SETTLE_SECONDS)
    assert h.capacity.holds(KEY) and writes.reads == 0
    h.now[0] += UNKNOWN_WRITE_SETTLE_SECONDS
    assert await h.admission.reconcile(KEY) is None
    assert writes.reads == 1
    assert not h.capacity.holds(KEY) and h.free_gpus() == 32
    # Admitted again later: decided afresh at once (nothing waits on the old write).
    h.modify_workload(readmitted(gone))
    assert await h.admission.reconcile(KEY) is None
    assert [e["state"] for e in h.writes.checks] == ["Ready"]
    assert h.free_gpus() == 32 - 8


async def test_an_unanswered_entry_that_did_land_keeps_its_capacity() -> None:
    writes = UnansweredWrites()
    h = harness(writer=writes)
    h.add_workload(workload())
    await h.admission.reconcile(KEY)
    h.modify_workload(evicted(workload()))
    h.now[0] += UNKNOWN_WRITE_SETTLE_SECONDS
    # The re-read shows our Ready landed after Kueue's reset: the capacity model will trust it.
    writes.fresh = Workload.model_validate(workload(check_state="Ready", resource_version="9"))
    assert await h.admission.reconcile(KEY) is None
    assert h.capacity.holds(KEY) and h.free_gpus() == 32 - 8


async def test_readmission_is_placed_afresh_and_nothing_of_the_old_admission_lingers() -> None:
    h = harness()
    patches = Patches()
    settings = Settings(leader_election=False, ungate_batch_period_seconds=0)
    checks = h.checks
    ungater = Ungater(
        ControllerDeps(informers=h.informers, checks=checks, events=patches, metrics=h.metrics, settings=settings),
        patcher=patches,
    )
    health = TopologyHealth(
        ControllerDeps(informers=h.informers, checks=checks, events=h.events, metrics=Metrics(), settings=settings),
        writer=patches,
    )
    h.add_workload(workload())
    assert await h.admission.reconcile(KEY) is None
    first = ready(h, workload())
    h.modify_workload(first)
    old_hosts = hosts_of(first)
    old_host = next(iter(old_hosts))

    # Eight gated pods; the ungater sends them to the old assignment's hosts (not seen back yet).
    for i in range(8):
        h.informers.pods.handle_event("ADDED", pod(f"a{i}"))
    await ungater.reconcile(KEY)
    assert sorted(patches.sent.values()) == sorted(h for h, n in old_hosts.items() for _ in range(n))
    assert len(ungater.expectations) == 8
    # The old host goes NotReady: the health signal names the old admission's rack.
    labels = {RACK: RACK_OF[old_host], "pool": "gpu"}
    h.informers.nodes.handle_event("MODIFIED", mk.node(old_host, labels=labels, allocatable=ALLOCATABLE, ready=False))
    await health.reconcile(KEY)
    assert [e[2] for e in h.events.seen if e[2] == NOT_ENFORCED_REASON] == [NOT_ENFORCED_REASON]
    h.informers.nodes.handle_event("MODIFIED", mk.node(old_host, labels=labels, allocatable=ALLOCATABLE))

    # Kueue preempts it. Two of its pods had started on the old host and are terminating; five
    # are gone; the release of a7 has not been seen yet when the eviction is.
    for i in (0, 1):
        h.informers.pods.handle_event("MODIFIED", pod(f"a{i}", node=old_host, deleting=True, rv="2"))
    for i in range(2, 7):
        h.informers.pods.handle_event("DELETED", pod(f"a{i}"))
    out = evicted(first)
    h.modify_workload(out)
    assert not h.capacity.holds(KEY), "an evicted workload's assignment holds nothing"
    assert len(ungater.expectations) == 0, "the old admission's releases are forgotten"
    h.informers.pods.handle_event("DELETED", pod("a7"))
    assert h.free_gpus() == 32 - 2, "only the terminating pods still hold their GPUs, where they run"
    assert await health.reconcile(KEY) is None

    # A workload of the other queue takes the old assignment's rack meanwhile.
    other = workload(uid="u2", resource_version="20")
    other["metadata"]["name"] = "other"
    h.add_workload(other)
    assert await h.admission.reconcile("ns/other") is None
    other_hosts = hosts_of(ready(h, other))
    h.modify_workload(ready(h, other))

    # Re-admitted: a fresh decision on the capacity as it is now.
    back = readmitted(out)
    h.modify_workload(back)
    assert KEY in await drain(h)
    assert await h.admission.reconcile(KEY) is None
    second = ready(h, back)
    new_hosts = hosts_of(second)
    assert not set(new_hosts) & set(other_hosts), "never on capacity another workload holds"
    assert sum(new_hosts.values()) == 8
    h.modify_workload(second)
    assert h.free_gpus() == 32 - 8 - 8 - 2
    h.informers.pods.handle_event("DELETED", pod("a0", node=old_host, deleting=True, rv="2"))
    h.informers.pods.handle_event("DELETED", pod("a1", node=old_host, deleting=True, rv="2"))
    assert h.free_gpus() == 32 - 8 - 8

    # The new pods go exactly to the new assignment: the old releases count for nothing.
    patches.sent.clear()
    for i in range(8):
        h.informers.pods.handle_event("ADDED", pod(f"b{i}"))
    await ungater.reconcile(KEY)
    assert sorted(patches.sent.values()) == sorted(h for h, n in new_hosts.items() for _ in range(n))
    # The health signal starts over: no "restored" for a problem of the old admission.
    assert await health.reconcile(KEY) is None
    assert [e for e in h.events.seen if e[2] == RESTORED_REASON] == []
