"""AdmissionCheck status: the ``Active`` condition of each check of ours, which says whether its
``spec.parameters`` name an existing Topology with levels and whether every flavor it governs is
put on that Topology alone (what Kueue shows the user; an inactive check stops its
ClusterQueues from admitting)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol

import structlog
from kubernetes_asyncio import client as k8s

from kueue_tas.api import constants as c
from kueue_tas.api.kueue_objects import AdmissionCheck, Topology
from kueue_tas.controllers.check_entry_writes import now_rfc3339
from kueue_tas.controllers.check_flavors import meant_flavors, topology_problem
from kueue_tas.controllers.informers import OurChecks, SharedInformers, on_any_change
from kueue_tas.controllers.timings import WRITE_RETRY_MAX_SECONDS
from kueue_tas.kube.client import apply_status
from kueue_tas.kube.errors import ApiError, retry_after
from kueue_tas.kube.stores import Store
from kueue_tas.runtime.workqueue import WorkQueue
from kueue_tas.topology.flavors import bind_flavors, check_topology

log = structlog.get_logger(__name__)


class CheckStatusWriter(Protocol):
    async def write_active(self, check: str, condition: dict[str, Any]) -> None: ...


class KubeCheckStatusWriter:
    """:class:`CheckStatusWriter` against the API server (server-side apply, our field manager)."""

    def __init__(self, api: k8s.ApiClient) -> None:
        self.api = api

    async def write_active(self, check: str, condition: dict[str, Any]) -> None:
        await apply_status(
            self.api,
            group=c.KUEUE_GROUP,
            version=c.KUEUE_VERSION,
            plural="admissionchecks",
            kind=c.KIND_ADMISSION_CHECK,
            name=check,
            status={"conditions": [condition]},
        )


def active_condition(
    ac: AdmissionCheck, topologies: Store[Topology], conflicts: Mapping[str, str] | None = None
) -> tuple[str, str, str]:
    """(status, reason, message) of the check's ``Active`` condition. ``conflicts``: flavor ->
    problem, for the flavors this check governs that another check of ours puts on another Topology."""
    topo_name = check_topology(ac)
    if topo_name is None:
        return (
            "False",
            "BadParametersRef",
            "spec.parameters must reference a kueue.x-k8s.io Topology (apiGroup kueue.x-k8s.io, kind Topology)",
        )
    topo = topologies.get(topo_name)
    if topo is None:
        return "False", "TopologyNotFound", f'Topology "{topo_name}" does not exist'
    problem = topology_problem(topo)
    if problem is not None:
        return "False", "TopologyInvalid", f'Topology "{topo_name}": {problem}'
    if conflicts:
        return "False", "FlavorConflict", "; ".join(conflicts.values())
    return "True", "Active", f'The admission check is active (Topology "{topo_name}")'


class AdmissionCheckStatus:
    def __init__(
        self,
        *,
        informers: SharedInformers,
        checks: OurChecks,
        writer: CheckStatusWriter,
        now: Callable[[], str] = now_rfc3339,
    ) -> None:
        self._topologies = informers.topologies.store
        self._queues = informers.queues.store
        self._checks = checks
        self._writer = writer
        self._now = now
        self.queue: WorkQueue[str] = WorkQueue("admissionchecks")
        self._failures: dict[str, int] = {}  # check -> failed writes in a row
        informers.checks.add_handler(self._on_check, lambda _o, ac: self._on_check(ac))
        on_any_change(informers.topologies, self.enqueue_all)
        on_any_change(informers.queues, self.enqueue_all, spec_only=True)

    def enqueue_all(self) -> None:
        for name in self._checks.names():
            self.queue.add(name)

    def _on_check(self, ac: AdmissionCheck) -> None:
        if ac.spec.controller_name == self._checks.controller_name:
            self.queue.add(ac.name)

    async def reconcile(self, name: str) -> float | None:
        ac = self._checks.by_name().get(name)
        if ac is None:
            return None
        status, reason, message = active_condition(ac, self._topologies, self._conflicts(name))
        current = next((cond for cond in ac.status.conditions if cond.type == c.CONDITION_ACTIVE), None)
        if current is not None and (current.status, current.reason, current.message) == (status, reason, message):
            return None
        condition = {
            "type": c.CONDITION_ACTIVE,
            "status": status,
            "reason": reason,
            "message": message,
            "lastTransitionTime": self._now(),
            "observedGeneration": ac.metadata.generation or 0,
        }
        try:
            await self._writer.write_active(name, condition)
        except Exception as exc:
            # Nothing is held by a stale condition: write it again later (the server-side apply
            # is idempotent, so a write that did land is harmless to repeat).
            n = self._failures.get(name, 0)
            self._failures[name] = n + 1
            delay = retry_after(exc, min(2.0**n, WRITE_RETRY_MAX_SECONDS), WRITE_RETRY_MAX_SECONDS)
            error = str(exc) if isinstance(exc, ApiError) else f"{type(exc).__name__}: {exc}"
            log.warning("admission_check_status_failed", check=name, error=error, retry_seconds=delay)
            return delay
        self._failures.pop(name, None)
        log.info("admission_check_status", check=name, status=status, reason=reason)
        return None

    def _conflicts(self, name: str) -> dict[str, str]:
        conflicts: dict[str, str] = {}
        queues = list(self._queues.values())
        bind_flavors(
            self._checks.by_name().values(), queues, controller_name=self._checks.controller_name, conflicts=conflicts
        )
        mine = set(meant_flavors(name, queues))
        return {f: problem for f, problem in conflicts.items() if f in mine}

    async def run(self) -> None:
        self.enqueue_all()
        await self.queue.run(1, self.reconcile)
