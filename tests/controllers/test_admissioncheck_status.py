"""The AdmissionCheck status reconciler: the Active condition of our checks, written only when
it changes, re-evaluated when a Topology changes."""

from __future__ import annotations

from functools import partial
from typing import Any

import builders as mk
import pytest

from kueue_tas.controllers.checkstatus.reconciler import AdmissionCheckStatus
from kueue_tas.controllers.informers import OurChecks, SharedInformers
from kueue_tas.runtime.config import Settings
from kueue_tas.runtime.manager import Manager
from kueue_tas.runtime.metrics import Metrics

NOW = "2030-01-01T00:00:00Z"


class Writer:
    def __init__(self) -> None:
        self.written: list[tuple[str, dict[str, Any]]] = []

    async def write_active(self, check: str, condition: dict[str, Any]) -> None:
        self.written.append((check, condition))


# An AdmissionCheck at generation 3 (the observedGeneration written back).
check = partial(mk.admission_check, resource_version="1", generation=3)
TOPO = mk.topology("topo", ("rack",), resource_version="1")


@pytest.fixture
def parts() -> tuple[SharedInformers, AdmissionCheckStatus, Writer]:
    s = Settings(leader_election=False)
    informers = SharedInformers.register(Manager(None, s, Metrics()), s.annotation_prefix)
    writer = Writer()
    status = AdmissionCheckStatus(
        informers=informers,
        checks=OurChecks(informers.checks.store, s.controller_name),
        writer=writer,
        now=lambda: NOW,
    )
    return informers, status, writer


async def test_active_when_the_topology_exists_and_written_only_on_change(
    parts: tuple[SharedInformers, AdmissionCheckStatus, Writer],
) -> None:
    informers, status, writer = parts
    informers.topologies.handle_event("ADDED", TOPO)
    informers.checks.handle_event("ADDED", check("tas"))
    informers.checks.handle_event("ADDED", check("other", controller="example.com/else"))
    assert len(status.queue) == 1  # only ours
    await status.reconcile("tas")
    assert writer.written == [
        (
            "tas",
            {
                "type": "Active",
                "status": "True",
                "reason": "Active",
                "message": 'The admission check is active (Topology "topo")',
                "lastTransitionTime": NOW,
                "observedGeneration": 3,
            },
        )
    ]
    informers.checks.handle_event("MODIFIED", check("tas", conditions=[writer.written[0][1]]))
    await status.reconcile("tas")
    assert len(writer.written) == 1  # unchanged: nothing written
    await status.reconcile("other")
    assert len(writer.written) == 1  # not ours


async def test_missing_topology_and_bad_parameters(parts: tuple[SharedInformers, AdmissionCheckStatus, Writer]) -> None:
    informers, status, writer = parts
    informers.topologies.handle_event("ADDED", TOPO)
    informers.checks.handle_event("ADDED", check("tas"))
    informers.checks.handle_event("ADDED", check("bare", topology_name=None))
    await status.reconcile("bare")
    assert writer.written[-1][1]["reason"] == "BadParametersRef"
    informers.topologies.handle_event("DELETED", TOPO)
    assert len(status.queue) == 2  # a Topology change looks at every check of ours again
    await status.reconcile("tas")
    assert writer.written[-1][1]["status"] == "False"
    assert writer.written[-1][1]["message"] == 'Topology "topo" does not exist'


async def test_a_flavor_put_on_two_topologies_makes_both_checks_inactive(
    parts: tuple[SharedInformers, AdmissionCheckStatus, Writer],
) -> None:
    informers, status, writer = parts
    informers.topologies.handle_event("ADDED", TOPO)
    informers.topologies.handle_event("ADDED", mk.topology("other", ("rack",), resource_version="1"))
    informers.checks.handle_event("ADDED", check("tas"))
    informers.checks.handle_event("ADDED", check("tas2", topology_name="other"))
    informers.queues.handle_event("ADDED", mk.cluster_queue("cq", ("gpu",), {"tas": []}, resource_version="1"))
    await status.reconcile("tas")
    assert writer.written[-1][1]["status"] == "True"
    # A second ClusterQueue puts the same flavor under the other check.
    informers.queues.handle_event("ADDED", mk.cluster_queue("cq2", ("gpu",), {"tas2": []}, resource_version="1"))
    message = (
        "ResourceFlavor 'gpu': put on Topology 'topo' by AdmissionCheck 'tas' and on Topology 'other' by "
        "AdmissionCheck 'tas2'"
    )
    for name in ("tas", "tas2"):
        await status.reconcile(name)
        assert writer.written[-1][1] | {"lastTransitionTime": None} == {
            "type": "Active",
            "status": "False",
            "reason": "FlavorConflict",
            "message": message,
            "lastTransitionTime": None,
            "observedGeneration": 3,
        }
