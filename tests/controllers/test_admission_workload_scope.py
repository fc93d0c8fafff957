"""The workload-wide constraint through the admission reconciler: read from the owning Job (one
GET, remembered), or from the Workload itself; refused with one line when it cannot hold.

The harness cluster: racks r1 (h1, h2) and r2 (h3, h4), 8 GPUs per host. h2 runs a 4-GPU pod
that is not ours, so rack r1 has 12 free GPUs and r2 16.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import builders as mk
import pytest
from admission_harness import Harness, harness, workload
from vocab import GPU, HOST, RACK, REQUIRED, WORKLOAD_PREFERRED, WORKLOAD_REQUIRED

from kueue_tas.api import constants as c
from kueue_tas.kube.errors import TransportError
from kueue_tas.topology.codec.codec import decode_assignment_annotation

JOB = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "train", "uid": "job-uid"}}


class Owners:
    """The owner reader: the Job's annotations, and how often they were read."""

    def __init__(self, annotations: Mapping[str, str] | None = None, error: Exception | None = None) -> None:
        self.given = dict(annotations or {})
        self.error = error
        self.reads: list[tuple[str, str, str]] = []

    async def annotations(self, namespace: str, kind: str, name: str) -> Mapping[str, str] | None:
        self.reads.append((namespace, kind, name))
        if self.error is not None:
            raise self.error
        return self.given


def two_podsets(a_level: str = HOST, rv: str = "5", **kw: Any) -> dict[str, Any]:
    """ns/wl: PodSets a and b of 8 one-GPU pods, each required in one ``a_level`` domain."""
    sets = [mk.podset(n, 8, {REQUIRED: a_level}, gpus=1) for n in ("a", "b")]
    return workload(podsets=sets, resource_version=rv, owner=JOB, **kw)


def with_busy_h2(h: Harness) -> Harness:
    h.informers.pods.handle_event("ADDED", mk.pod("other", "h2", namespace="x", gpus=4, uid="other"))
    return h


def hosts_of(h: Harness) -> dict[str, set[str]]:
    decoded = decode_assignment_annotation(h.writes.annotations[-1])
    return {name: {d.values[-1] for d in ta.domains} for name, ta in decoded}


async def decide(h: Harness, obj: dict[str, Any]) -> dict[str, Any]:
    h.add_workload(obj)
    await h.admission.reconcile("ns/wl")
    return h.writes.checks[-1] if h.writes.checks else {}


async def test_without_the_constraint_the_podsets_take_hosts_in_both_racks() -> None:
    h = with_busy_h2(harness(owners=Owners()))
    entry = await decide(h, two_podsets())
    assert entry["state"] == "Ready"
    assert hosts_of(h) == {"a": {"h1"}, "b": {"h3"}}


async def test_the_jobs_required_rack_puts_every_podset_in_one_rack() -> None:
    owners = Owners({WORKLOAD_REQUIRED: RACK, "unrelated": "x"})
    h = with_busy_h2(harness(owners=owners))
    entry = await decide(h, two_podsets())
    assert entry["state"] == "Ready", entry["message"]
    assert hosts_of(h) == {"a": {"h3"}, "b": {"h4"}}, "rack r2: r1 has 12 free GPUs, the pair needs 16"
    assert owners.reads == [("ns", "Job", "train")]
    # Decided again (e.g. after an eviction): the Job is not read again.
    h.add_workload(two_podsets(rv="6"))
    await h.admission.reconcile("ns/wl")
    assert len(owners.reads) == 1


async def test_the_workloads_own_annotation_is_read_without_asking_the_owner() -> None:
    owners = Owners({WORKLOAD_REQUIRED: "nonsense level"})
    h = with_busy_h2(harness(owners=owners))
    entry = await decide(h, two_podsets(workload_annotations={WORKLOAD_REQUIRED: RACK}))
    assert entry["state"] == "Ready" and hosts_of(h) == {"a": {"h3"}, "b": {"h4"}}
    assert owners.reads == []


async def test_nothing_fits_in_one_rack_is_a_retry_naming_the_roomiest_rack() -> None:
    h = with_busy_h2(harness(owners=Owners({WORKLOAD_REQUIRED: RACK})))
    h.informers.pods.handle_event("ADDED", mk.pod("other2", "h4", namespace="x", gpus=1, uid="other2"))
    entry = await decide(h, two_podsets())
    assert entry["state"] == "Retry"
    assert entry["message"].startswith(
        f'PodSet "a": no domain of level "{RACK}" has room for every PodSet of the workload together'
    )


@pytest.mark.parametrize(
    ("owner_annotations", "podset_level", "expected"),
    [
        (
            {WORKLOAD_REQUIRED: HOST},
            RACK,
            f'PodSet "a": its required level "{RACK}" is broader than the workload\'s level "host" '
            f"(annotation {WORKLOAD_REQUIRED}); a PodSet's levels must be the workload's level or below it",
        ),
        (
            {WORKLOAD_REQUIRED: "Rack!"},
            HOST,
            f"workload: annotation '{WORKLOAD_REQUIRED}': invalid value \"Rack!\": ",
        ),
        (
            {WORKLOAD_REQUIRED: "zone"},
            HOST,
            f'workload: annotation {WORKLOAD_REQUIRED}: unknown topology level "zone"; Topology "topo" has levels '
            f"{RACK}, {HOST}; level names: host",
        ),
        (
            {WORKLOAD_REQUIRED: RACK, WORKLOAD_PREFERRED: RACK},
            HOST,
            None,
        ),
        (
            {WORKLOAD_REQUIRED: HOST, WORKLOAD_PREFERRED: RACK},
            HOST,
            f'workload: annotation {WORKLOAD_PREFERRED}: level "{RACK}" is above the required level "{HOST}" '
            f"(annotation {WORKLOAD_REQUIRED}); the preferred level must be the required level or a level below it",
        ),
    ],
)
async def test_a_constraint_that_cannot_hold_is_rejected_in_one_line(
    owner_annotations: dict[str, str], podset_level: str, expected: str | None
) -> None:
    h = harness(owners=Owners(owner_annotations))
    entry = await decide(h, two_podsets(podset_level))
    if expected is None:
        assert entry["state"] == "Ready"
        return
    assert entry["state"] == "Rejected"
    assert entry["message"].startswith(expected), entry["message"]
    assert "\n" not in entry["message"]


async def test_an_owner_that_cannot_be_read_holds_the_decision_with_a_warning() -> None:
    owners = Owners(error=TransportError("connection refused"))
    h = harness(owners=owners)
    h.add_workload(two_podsets())
    delay = await h.admission.reconcile("ns/wl")
    assert delay is not None and delay > 0
    assert h.writes.checks == [] and not h.capacity.assumes("ns/wl")
    [(obj, kind, reason, message)] = h.events.seen
    assert (obj, kind, reason) == ("Workload/wl", "Warning", "TopologyAssignmentFailed")
    assert message.startswith("reading Job train for its workload-wide topology annotations failed: ")
    owners.error = None
    assert await h.admission.reconcile("ns/wl") is None
    assert h.writes.checks[-1]["state"] == "Ready"


def test_the_annotation_keys_are_ours() -> None:
    assert tuple("kueue-tas.io/" + s for s in c.WORKLOAD_ANNOTATION_SUFFIXES) == (WORKLOAD_REQUIRED, WORKLOAD_PREFERRED)
    assert GPU == GPU
