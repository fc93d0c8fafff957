"""The admitter's reconcile loop without a cluster: informers fed by hand, writes recorded.

Covers the race the e2e suite found: our annotation write comes back through the informer
before our Ready entry does; the workload still looks Pending, and deciding it again would
count its own assumed capacity against it (and overwrite Ready with Retry).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from kueue_tas.admission import controller as ac
from kueue_tas.api import constants as c
from kueue_tas.runtime.config import Settings
from kueue_tas.runtime.metrics import Metrics

RACK = "example.com/rack"
HOST = c.HOSTNAME_LABEL
CHECK = "tas"


def node(name: str, rack: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "resourceVersion": "1", "labels": {RACK: rack, HOST: name, "pool": "gpu"}},
        "spec": {},
        "status": {
            "allocatable": {"cpu": "16", "pods": "110", "nvidia.com/gpu": "8"},
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


def workload(state: str = "Pending", annotations: dict[str, str] | None = None, rv: str = "5") -> dict[str, Any]:
    return {
        "metadata": {
            "name": "wl",
            "namespace": "ns",
            "uid": "u1",
            "resourceVersion": rv,
            "annotations": annotations or {},
        },
        "spec": {
            "podSets": [
                {
                    "name": "main",
                    "count": 8,
                    "template": {
                        "metadata": {"annotations": {"kueue-tas.io/podset-required-topology": RACK}},
                        "spec": {"containers": [{"name": "c", "resources": {"requests": {"nvidia.com/gpu": "1"}}}]},
                    },
                }
            ]
        },
        "status": {
            "conditions": [
                {
                    "type": "QuotaReserved",
                    "status": "True",
                    "reason": "QuotaReserved",
                    "message": "",
                    "lastTransitionTime": "2026-01-01T00:00:00Z",
                }
            ],
            "admission": {
                "clusterQueue": "cq",
                "podSetAssignments": [{"name": "main", "flavors": {"nvidia.com/gpu": "gpu"}, "count": 8}],
            },
            "admissionChecks": [
                {"name": CHECK, "state": state, "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"}
            ],
        },
    }


class Writes:
    def __init__(self) -> None:
        self.checks: list[dict[str, Any]] = []
        self.annotations: list[str] = []

    async def inject_gates(self, *_: Any) -> None:
        return None

    async def write_annotation(self, api: Any, wl: Any, text: str) -> dict[str, Any]:
        self.annotations.append(text)
        return {}

    async def write_check(self, api: Any, wl: Any, entry: dict[str, Any]) -> dict[str, Any]:
        self.checks.append(entry)
        return {}


@pytest.fixture
async def admitter(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[tuple[ac.Admitter, Writes]]:
    writes = Writes()
    for name in ("inject_gates", "write_annotation", "write_check"):
        monkeypatch.setattr(ac, name, getattr(writes, name))
    a = ac.Admitter(None, Settings(leader_election=False), Metrics())  # type: ignore[arg-type]

    async def no_event(*_: Any, **__: Any) -> None:
        return None

    monkeypatch.setattr(a, "_event", no_event)
    a._wire()
    for n, rack in (("h1", "r1"), ("h2", "r1"), ("h3", "r2"), ("h4", "r2")):
        a.nodes.handle_event("ADDED", node(n, rack))
    a.topologies.handle_event(
        "ADDED",
        {
            "metadata": {"name": "topo", "resourceVersion": "1"},
            "spec": {"levels": [{"nodeLabel": RACK}, {"nodeLabel": HOST}]},
        },
    )
    a.flavors.handle_event(
        "ADDED", {"metadata": {"name": "gpu", "resourceVersion": "1"}, "spec": {"nodeLabels": {"pool": "gpu"}}}
    )
    a.checks.handle_event(
        "ADDED",
        {
            "metadata": {"name": CHECK, "resourceVersion": "1"},
            "spec": {
                "controllerName": c.CONTROLLER_NAME,
                "parameters": {"apiGroup": "kueue.x-k8s.io", "kind": "Topology", "name": "topo"},
            },
        },
    )
    a.queues.handle_event(
        "ADDED",
        {
            "metadata": {"name": "cq", "resourceVersion": "1"},
            "spec": {
                "resourceGroups": [
                    {
                        "coveredResources": ["nvidia.com/gpu"],
                        "flavors": [{"name": "gpu", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": "100"}]}],
                    }
                ],
                "admissionChecksStrategy": {"admissionChecks": [{"name": CHECK, "onFlavors": ["gpu"]}]},
            },
        },
    )
    a._config_changed()
    yield a, writes
    await a.events._events.api_client.close()


async def test_stale_pending_after_our_annotation_write_is_not_decided_again(
    admitter: tuple[ac.Admitter, Writes],
) -> None:
    a, writes = admitter
    a.workloads.handle_event("ADDED", workload())
    assert await a.reconcile("ns/wl") is None
    assert [e["state"] for e in writes.checks] == ["Ready"]
    # The annotation write comes back first: still Pending in the cache.
    a.workloads.handle_event(
        "MODIFIED", workload(annotations={c.TOPOLOGY_ASSIGNMENT_ANNOTATION: writes.annotations[0]}, rv="6")
    )
    delay = await a.reconcile("ns/wl")
    assert delay is not None and delay > 0
    assert [e["state"] for e in writes.checks] == ["Ready"], "decided twice on a stale view"
    # Then our Ready entry: the assumption becomes committed usage, and one rack is full.
    a.workloads.handle_event(
        "MODIFIED", workload("Ready", {c.TOPOLOGY_ASSIGNMENT_ANNOTATION: writes.annotations[0]}, rv="7")
    )
    assert a.awaiting_write == {}
    snap = a.capacity.snapshot("gpu")
    assert snap is not None


async def test_kueue_resetting_the_entry_to_pending_is_decided_again_from_scratch(
    admitter: tuple[ac.Admitter, Writes],
) -> None:
    a, writes = admitter
    a.workloads.handle_event("ADDED", workload())
    await a.reconcile("ns/wl")
    ann = {c.TOPOLOGY_ASSIGNMENT_ANNOTATION: writes.annotations[0]}
    a.workloads.handle_event("MODIFIED", workload("Ready", ann, rv="6"))
    # Evicted and requeued by Kueue: the entry is Pending again; the old assignment is not trusted
    # and this workload's own earlier capacity must not block it.
    a.workloads.handle_event("MODIFIED", workload("Pending", ann, rv="8"))
    assert await a.reconcile("ns/wl") is None
    assert [e["state"] for e in writes.checks] == ["Ready", "Ready"]


async def test_a_write_that_never_comes_back_is_retried_after_the_timeout(
    admitter: tuple[ac.Admitter, Writes],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    a, writes = admitter
    a.workloads.handle_event("ADDED", workload())
    await a.reconcile("ns/wl")
    a.awaiting_write["ns/wl"] = 0.0  # the deadline has passed
    await a.reconcile("ns/wl")
    assert [e["state"] for e in writes.checks] == ["Ready", "Ready"]
