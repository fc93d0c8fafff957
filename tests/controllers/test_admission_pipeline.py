"""The admitter decides one workload at a time but writes several at once (issue 15).

Four 8-GPU hosts in two racks; each workload asks for 16 one-GPU pods in one rack, so exactly
two fit. The writes of the first decision are held open by the test while the others are
decided: the later decisions must see the first one's capacity (never give a rack twice), must
not wait for its writes (the lock covers the decision only), and a write that then fails must
give the capacity back so the next decision can use it.
"""

from __future__ import annotations

import asyncio
from typing import Any

import builders as mk
import pytest
from admission_harness import Harness, Writes, harness, workload
from vocab import RACK, REQUIRED

from kueue_tas.api.workload import Workload
from kueue_tas.kube.errors import ServerError
from kueue_tas.topology.codec.codec import decode_assignment_annotation


class HeldWrites(Writes):
    """Annotation writes of the workloads in ``hold`` wait until the test releases them (and
    then raise ``fail`` if set); everything else is recorded at once."""

    def __init__(self) -> None:
        super().__init__()
        self.hold: dict[str, asyncio.Event] = {}
        self.fail: dict[str, Exception] = {}
        self.entered: dict[str, asyncio.Event] = {}

    async def write_annotation(self, workload: Workload, text: str) -> Workload:
        name = workload.name
        if name in self.hold:
            self.entered.setdefault(name, asyncio.Event()).set()
            await self.hold[name].wait()
            if name in self.fail:
                raise self.fail.pop(name)
        return await super().write_annotation(workload, text)


def wl(name: str, uid: str, count: int = 16) -> dict[str, Any]:
    """``admission_harness.workload`` under another name: ``count`` pods requiring a rack."""
    keywords = {**workload.keywords, "uid": uid}
    return mk.workload(name, count, {REQUIRED: RACK}, **keywords)


def racks_of(writes: Writes) -> list[str]:
    """The rack each recorded annotation's single PodSet went to (hosts h1, h2: r1; h3, h4: r2)."""
    out = []
    for text in writes.annotations:
        [(_, ta)] = decode_assignment_annotation(text)
        hosts = {d.values[-1] for d in ta.domains}
        out.append("r1" if hosts <= {"h1", "h2"} else "r2" if hosts <= {"h3", "h4"} else f"split {sorted(hosts)}")
    return out


@pytest.fixture
def h() -> Harness:
    return harness(writer=HeldWrites())


def held(h: Harness) -> HeldWrites:
    assert isinstance(h.writes, HeldWrites)
    return h.writes


async def test_a_decision_does_not_wait_for_the_writes_of_the_one_before(h: Harness) -> None:
    held(h).hold["a"] = asyncio.Event()
    h.add_workload(wl("a", "ua"))
    h.add_workload(wl("b", "ub"))
    h.add_workload(wl("c", "uc"))
    first = asyncio.create_task(h.admission.reconcile("ns/a"))
    held(h).entered.setdefault("a", asyncio.Event())
    await asyncio.wait_for(held(h).entered["a"].wait(), 5)
    assert h.capacity.assumes("ns/a"), "a's capacity is held while its writes are in flight"
    # b is decided and written while a's annotation write still hangs: the lock is free.
    assert await asyncio.wait_for(h.admission.reconcile("ns/b"), 5) is None
    # c finds both racks taken (a's assumed, b's assumed): Retry, not a rack given twice.
    assert await asyncio.wait_for(h.admission.reconcile("ns/c"), 5) is None
    assert [e["state"] for e in h.writes.checks] == ["Ready", "Retry"]
    held(h).hold["a"].set()
    assert await first is None
    assert [e["state"] for e in h.writes.checks] == ["Ready", "Retry", "Ready"]
    assert sorted(racks_of(h.writes)) == ["r1", "r2"], "each rack given once"
    assert h.free_gpus() == 0


async def test_a_failed_write_gives_its_capacity_to_the_next_decision(h: Harness) -> None:
    held(h).hold["a"] = asyncio.Event()
    held(h).fail["a"] = ServerError(500, "InternalError", "etcd leader changed")
    for name in ("a", "b", "c"):
        h.add_workload(wl(name, f"u{name}"))
    first = asyncio.create_task(h.admission.reconcile("ns/a"))
    held(h).entered.setdefault("a", asyncio.Event())
    await asyncio.wait_for(held(h).entered["a"].wait(), 5)
    await h.admission.reconcile("ns/b")
    held(h).hold["a"].set()
    delay = await first
    assert delay is not None and delay > 0, "a is tried again later"
    assert not h.capacity.assumes("ns/a") and h.free_gpus() == 16, "a's rack is free again"
    assert ("Workload/a", "Warning", "TopologyAssignmentFailed") in h.events.reasons()
    # c now gets the rack a gave back.
    assert await h.admission.reconcile("ns/c") is None
    assert [e["state"] for e in h.writes.checks] == ["Ready", "Ready"]
    assert sorted(racks_of(h.writes)) == ["r1", "r2"]


async def test_many_workloads_through_concurrent_workers_never_overbook() -> None:
    """The queue's workers run decisions and writes interleaved (every write yields to the
    loop); whatever the interleaving, no host takes more than its 8 GPUs and exactly the
    capacity that exists is handed out."""

    class Yielding(Writes):
        async def write_annotation(self, workload: Workload, text: str) -> Workload:
            for _ in range(3):
                await asyncio.sleep(0)
            return await super().write_annotation(workload, text)

    h = harness(writer=Yielding())
    for i in range(12):
        h.add_workload(wl(f"w{i}", f"u{i}", count=4))
    runner = asyncio.create_task(h.admission.queue.run(8, h.admission.reconcile))
    for _ in range(200):
        await asyncio.sleep(0)
        if len(h.writes.checks) == 12:
            break
    runner.cancel()
    states = [e["state"] for e in h.writes.checks]
    assert states.count("Ready") == 8 and states.count("Retry") == 4, states
    per_host: dict[str, int] = {}
    for text in h.writes.annotations:
        [(_, ta)] = decode_assignment_annotation(text)
        for d in ta.domains:
            per_host[d.values[-1]] = per_host.get(d.values[-1], 0) + d.count
    assert per_host == {"h1": 8, "h2": 8, "h3": 8, "h4": 8}
