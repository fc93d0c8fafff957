"""Issue 12, deliverable 5: the ungater's pod patches under every API fault, through the real client.

``KubePodPatcher`` talks to an in-memory API server through the request layer of
``kubernetes_asyncio`` (``tests/faults.py``); one fault hits the first pod's patch. Each row
drives passes until the ungater asks for nothing more (the watch delivering the server's pods,
time jumping by the delay asked for) and checks, at every step, that no domain ever holds more
released pods than its count; at the end every pod is released into its domain, or (a refused
patch) explained by Warning Events and left for the user, with no expectation left behind.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import builders as mk
import pytest
from faults import ALL_FAULTS, FakeApiServer, Fault, faulty_client, until_settled
from ungater_harness import UID, Harness, assignment
from vocab import HOST

from kueue_tas.api import constants as c
from kueue_tas.controllers.ungate.writes import KubePodPatcher
from kueue_tas.runtime.config import Settings

PODS = "/api/v1/namespaces/ns/pods"
COUNTS = {"n1": 2, "n2": 2}
TIMEOUT = Settings().ungate_expectation_timeout_seconds
REFUSED = {403}  # the apiserver will not do it: the pod waits for the user, with Events


class Cluster:
    def __init__(self, server: FakeApiServer, api: Any, session: Any) -> None:
        self.server, self.session = server, session
        self.now = [0.0]
        self.h = Harness(clock=lambda: self.now[0], patcher=KubePodPatcher(api))

    def watch(self) -> None:
        for path, obj in self.server.objects.items():
            if path.startswith(PODS):
                self.h.pods.handle_event("MODIFIED", obj)

    def released(self) -> Counter[str]:
        out: Counter[str] = Counter()
        for path, obj in self.server.objects.items():
            gates = obj["spec"].get("schedulingGates") or []
            if path.startswith(PODS) and not any(g["name"] == c.SCHEDULING_GATE for g in gates):
                out[obj["spec"]["nodeSelector"][HOST]] += 1
        return out

    async def settle(self) -> list[float]:
        async def step() -> float | None:
            self.watch()
            delay = await self.h.run_pass()
            released = self.released()
            assert all(released[d] <= n for d, n in COUNTS.items()), f"a domain overfilled: {released}"
            return delay

        return await until_settled(step, self.now)


@pytest.fixture
async def cluster() -> Cluster:
    server = FakeApiServer()
    for name in ("a", "b", "c", "d"):
        labels = {c.WORKLOAD_LABEL: UID, c.PODSET_LABEL: "main"}
        pod = mk.pod(name, namespace="ns", uid=f"uid-{name}", labels=labels, gates=(c.SCHEDULING_GATE,))
        server.put(f"{PODS}/{name}", pod)
    api, session = await faulty_client(server)
    cluster = Cluster(server, api, session)
    cluster.h.workload(assignment(("n1", 2), ("n2", 2)))
    cluster.watch()
    return cluster


async def test_without_faults_each_pod_is_patched_once(cluster: Cluster) -> None:
    assert await cluster.settle() == [pytest.approx(TIMEOUT, abs=0.01)]  # one look, then observed
    assert cluster.released() == COUNTS
    assert [call.path.rsplit("/", 1)[-1] for call in cluster.session.calls] == ["a", "b", "c", "d"]
    assert len(cluster.h.ungater.expectations) == 0


@pytest.mark.parametrize(
    ("kind", "after_apply", "retry_after"),
    [pytest.param(kind, after, ra, id=fault) for fault, kind, after, ra in ALL_FAULTS],
)
async def test_every_fault_on_a_pod_patch_ends_with_exact_counts_or_an_explanation(
    cluster: Cluster, kind: int | str, after_apply: bool, retry_after: float | None
) -> None:
    h = cluster.h
    cluster.session.inject(Fault("PATCH", r"/pods/a$", kind, after_apply=after_apply, retry_after=retry_after))
    delays = await cluster.settle()
    assert any(call.fault == kind for call in cluster.session.calls), "the fault was hit"
    assert len(h.ungater.expectations) == 0, "no expectation left behind"
    events = {(kind_, reason) for kind_, reason, _ in h.rec.events}
    if kind in REFUSED:
        assert sum(cluster.released().values()) == 3, "the other pods are not held back"
        assert events == {("Pod", "TopologyUngateFailed"), ("Workload", "TopologyUngateFailed")}
        return
    assert cluster.released() == COUNTS, "every pod released, exactly the counts"
    if kind == 429:
        assert retry_after in delays, "Retry-After honoured"
    if after_apply or kind in ("timeout", "reset", 500):
        # The outcome was unknown: the slot was held (never given to another pod) until the pod
        # was seen, or until the timeout let it go again with an Event.
        assert not after_apply or h.rec.events == [], "a patch that landed is seen, not retried"
        assert after_apply or events == {("Pod", "TopologyUngateFailed"), ("Workload", "TopologyUngateFailed")}
