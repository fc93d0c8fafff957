"""Patience for preferred (issue 14, item 4): ``kueue-tas.io/podset-preferred-topology-wait``.

A PodSet with a preferred level and a wait is held (our entry Retry, saying what it waits for
and until when) while it would spread over several domains of its preferred level, for at most
the wait from the first decision that held it (recorded on the Workload, so a restart or an
eviction does not start it again); then Kueue's preferred fall-back places it. Without the
annotation nothing waits (Kueue's behaviour).

The harness cluster: racks r1 (h1, h2) and r2 (h3, h4) of 8-GPU hosts; h2 and h4 run 4-GPU pods
that are not ours, so each rack has 12 free GPUs and 14 pods fit in no single rack.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import builders as mk
import pytest
from admission_harness import Harness, harness, workload
from vocab import PREFERRED, PREFERRED_WAIT, RACK, REQUIRED

from kueue_tas.api import constants as c
from kueue_tas.topology.requests.request import parse_topology_request, validate_topology_annotations

START = datetime(2026, 11, 23, 10, 0, 0, tzinfo=UTC)


def wl(count: int, annotations: dict[str, str], rv: str = "5", started: str | None = None) -> dict[str, Any]:
    extra = {c.PREFERRED_WAIT_STARTED_ANNOTATION: started} if started else None
    sets = [mk.podset("main", count, annotations, gpus=1)]
    return workload(podsets=sets, resource_version=rv, workload_annotations=extra)


def busy(h: Harness) -> Harness:
    for host in ("h2", "h4"):
        h.informers.pods.handle_event("ADDED", mk.pod(f"other-{host}", host, namespace="x", gpus=4, uid=host))
    return h


def racks_used(h: Harness) -> set[str]:
    from kueue_tas.topology.codec.codec import decode_assignment_annotation

    [(_, ta)] = decode_assignment_annotation(h.writes.annotations[-1])
    return {"r1" if d.values[-1] in ("h1", "h2") else "r2" for d in ta.domains}


async def decide(h: Harness, obj: dict[str, Any]) -> dict[str, Any]:
    """Decide ``obj``; an earlier Retry of ours is taken as seen (Kueue reset it to Pending)."""
    h.add_workload(obj)
    h.now[0] += 60
    await h.admission.reconcile("ns/wl")
    return h.writes.checks[-1]


# --- the annotation ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("annotations", "problem"),
    [
        ({PREFERRED: RACK, PREFERRED_WAIT: "10m"}, None),
        ({REQUIRED: "zone", PREFERRED: RACK, PREFERRED_WAIT: "1h30m"}, None),
        ({REQUIRED: RACK, PREFERRED_WAIT: "10m"}, f"forbidden: may not be set when '{PREFERRED}' is not specified"),
        ({PREFERRED: RACK, PREFERRED_WAIT: "ten minutes"}, "must be a duration such as 90s, 10m or 1h30m"),
        ({PREFERRED: RACK, PREFERRED_WAIT: "0s"}, "must be more than 0s and at most 24h"),
        ({PREFERRED: RACK, PREFERRED_WAIT: "25h"}, "must be more than 0s and at most 24h"),
    ],
)
def test_the_wait_is_checked(annotations: dict[str, str], problem: str | None) -> None:
    errors = validate_topology_annotations(annotations)
    if problem is None:
        assert errors == []
        request = parse_topology_request(annotations)
        assert (
            request is not None and request.preferred_wait == {"10m": 600, "1h30m": 5400}[annotations[PREFERRED_WAIT]]
        )
    else:
        assert len(errors) == 1 and problem in errors[0] and PREFERRED_WAIT in errors[0], errors


# --- through the admission reconciler -------------------------------------------------------------


async def test_without_a_wait_preferred_spreads_at_once() -> None:
    h = busy(harness(wall=lambda: START))
    entry = await decide(h, wl(14, {PREFERRED: RACK}))
    assert entry["state"] == "Ready" and racks_used(h) == {"r1", "r2"}
    assert h.writes.wait_starts == []


async def test_held_then_placed_in_one_rack_once_one_frees_within_the_wait() -> None:
    now = [START]
    h = busy(harness(wall=lambda: now[0]))
    entry = await decide(h, wl(14, {PREFERRED: RACK, PREFERRED_WAIT: "10m"}))
    assert entry["state"] == "Retry"
    assert entry["message"] == (
        f'PodSet "main": waiting until 2026-11-23T10:10:00Z for one domain of level "{RACK}" to hold all 14 '
        "pods (podset-preferred-topology-wait 10m); then it is placed over several domains as Kueue's "
        "preferred does"
    )
    assert h.writes.wait_starts == ["2026-11-23T10:00:00Z"], "the start is recorded on the Workload"
    assert 0 < entry["requeueAfterSeconds"] <= 600
    assert not h.capacity.assumes("ns/wl"), "a held workload holds no capacity"
    # Kueue evicts and requeues it; 3 minutes later the pod on h4 has ended: rack r2 holds 14.
    now[0] = START + timedelta(minutes=3)
    h.informers.pods.handle_event("DELETED", mk.pod("other-h4", "h4", namespace="x", gpus=4, uid="h4"))
    entry = await decide(h, wl(14, {PREFERRED: RACK, PREFERRED_WAIT: "10m"}, rv="6", started="2026-11-23T10:00:00Z"))
    assert entry["state"] == "Ready" and racks_used(h) == {"r2"}
    assert h.writes.wait_starts == ["2026-11-23T10:00:00Z"], "never written twice"


async def test_placed_over_several_racks_once_the_wait_is_over() -> None:
    now = [START + timedelta(minutes=4)]
    h = busy(harness(wall=lambda: now[0]))
    # Held before (by this replica or another): the wait counts from the recorded start.
    obj = wl(14, {PREFERRED: RACK, PREFERRED_WAIT: "5m"}, started="2026-11-23T10:00:00Z")
    entry = await decide(h, obj)
    assert entry["state"] == "Retry" and "waiting until 2026-11-23T10:05:00Z" in entry["message"]
    assert entry["requeueAfterSeconds"] <= 60, "decided again by the time the wait ends"
    assert h.writes.wait_starts == []
    now[0] = START + timedelta(minutes=5, seconds=1)
    entry = await decide(h, wl(14, {PREFERRED: RACK, PREFERRED_WAIT: "5m"}, rv="6", started="2026-11-23T10:00:00Z"))
    assert entry["state"] == "Ready" and racks_used(h) == {"r1", "r2"}


async def test_a_podset_that_fits_one_rack_never_waits() -> None:
    h = busy(harness(wall=lambda: START))
    entry = await decide(h, wl(10, {PREFERRED: RACK, PREFERRED_WAIT: "10m"}))
    assert entry["state"] == "Ready" and len(racks_used(h)) == 1
    assert h.writes.wait_starts == []


def test_plan_says_the_controller_would_hold_it_first(tmp_path: Any, capsys: pytest.CaptureFixture[str]) -> None:
    from plan_harness import plan

    # The builders' cluster: racks of 2 hosts x 4 GPUs; 12 pods fit in no rack.
    res = plan(tmp_path, capsys, [*mk.cluster(), mk.job("w", 12, {PREFERRED: mk.RACK, PREFERRED_WAIT: "10m"})])
    assert res.code == 0, res.err
    [ps] = res.json["workloads"][0]["podSets"]
    assert ps["message"] == (
        "held first for up to 10m (podset-preferred-topology-wait) until one domain of level "
        f'"{mk.RACK}" holds all 12 pods; placed as shown once the wait is over'
    )
    fits = plan(tmp_path, capsys, [*mk.cluster(), mk.job("w", 8, {PREFERRED: mk.RACK, PREFERRED_WAIT: "10m"})])
    assert fits.json["workloads"][0]["podSets"][0]["message"] == ""
