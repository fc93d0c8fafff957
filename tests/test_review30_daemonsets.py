"""Review of issue 30 (adversarial): a tenant with the built-in ``edit`` role and DaemonSet
reservations. What the reservation policy trusts is the DaemonSet's pod template, which no
admission step checks against the priority classes a namespace may use (the Priority admission
plugin and a PriorityClass-scoped ResourceQuota act on pods; a pod refused there never binds,
so its reservation stays), and the lapse counts from the DaemonSet's creationTimestamp, which a
tenant renews by deleting and re-creating it."""

from __future__ import annotations

import datetime as dt

import pytest
from admission_harness import Harness, harness
from test_daemonset_tenant_limits import admitted, daemonset, free_gpus


@pytest.fixture
def h() -> Harness:
    return harness()


def just_now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@pytest.mark.xfail(
    strict=True,
    reason="issue 30 review, not fixed: a tenant's DaemonSet naming system-node-critical in its own "
    "namespace is trusted (test_daemonset_tenant_limits asserts it is) and, re-created every "
    "daemonset_reservation_seconds, takes every node's GPUs for good; fix: trust a priority class "
    "only for DaemonSets in the listed namespaces (or make daemonset_reservation_priority_classes "
    "empty by default and say an admin who lists one must also keep tenants from naming it, e.g. "
    "with a ValidatingAdmissionPolicy on DaemonSets)",
)
async def test_a_tenants_daemonset_naming_a_system_priority_class_takes_no_capacity(h: Harness) -> None:
    h.informers.daemonsets.handle_event(
        "ADDED", daemonset("team-b", 8, priority="system-node-critical", created=just_now())
    )
    assert free_gpus(h) == [8, 8, 8, 8]
    assert await admitted(h) == "Ready"
