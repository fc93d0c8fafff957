"""Issue 30, finding 2: one tenant's DaemonSet must not take every node's capacity. The review's
case, in the controller without a cluster: a DaemonSet asking for 9 GPUs on 8-GPU nodes,
tolerating everything, in a tenant's namespace, took free GPUs 8/8/8/8 to 0/0/0/0 and the next
workload got Retry. A DaemonSet reserves only in a namespace the admin lists (or with a system
priority class), only a pod that fits on the empty node, and only for a bounded time."""

from __future__ import annotations

import pytest
from admission_harness import Harness
from daemonset_scenes import admitted, daemonset, free_gpus


@pytest.mark.parametrize(
    ("namespace", "gpus"),
    [
        ("team-b", 9),  # the review's case: unlisted, and fits on no node
        ("kube-system", 9),  # listed, but no node could ever run it
        ("team-b", 1),  # fits, but a tenant's namespace is not listed
    ],
)
async def test_a_daemonset_that_may_not_or_cannot_run_holds_nothing(h: Harness, namespace: str, gpus: int) -> None:
    h.informers.daemonsets.handle_event("ADDED", daemonset(namespace, gpus))
    assert free_gpus(h) == [8, 8, 8, 8]
    assert await admitted(h) == "Ready"


@pytest.mark.parametrize(
    ("namespace", "priority"),
    [
        ("kube-system", None),
        ("gpu-operator", None),
        ("kube-system", "system-node-critical"),
    ],
)
async def test_a_listed_namespace_still_holds_its_nodes(h: Harness, namespace: str, priority: str | None) -> None:
    h.informers.daemonsets.handle_event("ADDED", daemonset(namespace, 1, priority=priority))
    assert free_gpus(h) == [7, 7, 7, 7]


async def test_a_reservation_whose_pod_stayed_unbound_for_long_has_lapsed(h: Harness) -> None:
    """Created years ago, its pod still bound nowhere: whatever keeps it out, it is not about to
    take the capacity (the harness's capacity model reads the real clock)."""
    h.informers.daemonsets.handle_event("ADDED", daemonset("kube-system", 1, created="2020-01-01T00:00:00Z"))
    assert free_gpus(h) == [8, 8, 8, 8]
    assert await admitted(h) == "Ready"
