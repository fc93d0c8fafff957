"""Review of issue 30 (adversarial): a tenant with the built-in ``edit`` role and DaemonSet
reservations. What the reservation policy trusts is the DaemonSet's pod template, which no
admission step checks against the priority classes a namespace may use (the Priority admission
plugin and a PriorityClass-scoped ResourceQuota act on pods; a pod refused there never binds,
so its reservation stays), and the lapse counts from the DaemonSet's creationTimestamp, which a
tenant renews by deleting and re-creating it."""

from __future__ import annotations

import datetime as dt

import pytest
from admission_harness import Harness
from daemonset_scenes import admitted, daemonset, free_gpus


def just_now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


async def test_a_tenants_daemonset_naming_a_system_priority_class_takes_no_capacity(h: Harness) -> None:
    """Any namespace may name a system priority class unless a ResourceQuota forbids it, so by
    default no priority class is trusted (this took every node's GPUs while both were)."""
    h.informers.daemonsets.handle_event(
        "ADDED", daemonset("team-b", 8, priority="system-node-critical", created=just_now())
    )
    assert free_gpus(h) == [8, 8, 8, 8]
    assert await admitted(h) == "Ready"


def test_an_untrusted_daemonsets_events_cost_no_per_node_work(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every event of every DaemonSet (a tenant's too: its status changes with its pods, and any
    annotate is an update) matched it against every node and re-evaluated each pair it runs on,
    on the event loop: 40 ms per event at 10,000 nodes, so a tenant updating its DaemonSets 25
    times a second held the loop the leader elector shares. One the policy does not trust can
    hold nothing, so its events cost nothing per node."""
    import builders as mk

    from kueue_tas.capacity import daemonsets
    from kueue_tas.capacity.daemonsets import DaemonSetReservations, daemonset_spec
    from kueue_tas.topology.model import NodeInfo

    reservations = DaemonSetReservations()
    for i in range(1000):
        reservations.set_node(NodeInfo(f"n{i}", {"zone": f"z{i % 10}"}, {"cpu": 64000, "pods": 110}))
    calls = 0
    real_runs_on = daemonsets.runs_on

    def counted(*args: object) -> bool:
        nonlocal calls
        calls += 1
        return real_runs_on(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(daemonsets, "runs_on", counted)
    tenant = daemonset_spec(mk.daemonset("hog", namespace="team-b", tolerations=[{"operator": "Exists"}]))
    assert tenant is not None
    assert reservations.set_daemonset(tenant) == set()
    reservations.set_node(NodeInfo("n1", {"zone": "z1"}, {"cpu": 64000, "pods": 110}))
    assert calls == 0
    trusted = daemonset_spec(mk.daemonset("agent", namespace="kube-system", tolerations=[{"operator": "Exists"}]))
    assert trusted is not None
    assert len(reservations.set_daemonset(trusted)) == 1000  # a trusted one still runs everywhere
