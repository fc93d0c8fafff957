"""Topology health: tell the owner of every admitted workload whose placement its Topology no
longer enforces, and tell them again when it does.

A Topology deleted or losing a level, or a required domain of the assignment gone or no longer
whole (``kueue_tas.topology.explain.placement_health``), leaves running pods where they are, but a pod
recreated there is released into a domain nothing enforces any more. Evicting the job for it
would be worse than the problem, so our entry stays ``Ready``: its message gains the problems
and ``placement not enforced`` (``health_note``), with one Warning Event
``TopologyPlacementNotEnforced`` per new set of problems. When they are gone the note goes and
a Normal Event ``TopologyPlacementRestored`` says so.

The entry is rewritten as it stands (state, transition time, podSetUpdates), message aside, by
server-side apply guarded by the Workload's resourceVersion: an entry Kueue has reset since
(an eviction) is never turned back to ``Ready`` by us; a Conflict re-reads the informer's copy.
Nothing here holds capacity, so a failed write is simply retried.
"""

from __future__ import annotations

import contextlib
from typing import Any, Final, Literal, Protocol

import structlog
from kubernetes_asyncio import client as k8s

from kueue_tas.api import constants as c
from kueue_tas.api.workload import Workload
from kueue_tas.capacity.feed import workload_key
from kueue_tas.capacity.rules import assignment_trusted
from kueue_tas.capacity.workload_health import workload_placement_problems
from kueue_tas.controllers.check_entry_writes import apply_entry, entry_with_message
from kueue_tas.controllers.deps import ControllerDeps
from kueue_tas.controllers.health_note import NOT_ENFORCED, note_of, note_text, with_note
from kueue_tas.controllers.informers import SlimNode, on_any_change
from kueue_tas.controllers.timings import WRITE_RETRY_MAX_SECONDS
from kueue_tas.controllers.workload_events import workload_event
from kueue_tas.kube.errors import Conflict, retry_after
from kueue_tas.runtime.workqueue import WorkQueue
from kueue_tas.topology.explain import NodeIndex
from kueue_tas.topology.flavors import FlavorBinding, bind_flavors

log = structlog.get_logger(__name__)

NOT_ENFORCED_REASON: Final = "TopologyPlacementNotEnforced"
RESTORED_REASON: Final = "TopologyPlacementRestored"
# The queue key that means "look at every admitted workload again" (a node or the configuration changed).
ALL: Final = "*"
# Node events come in bursts (a rack losing power, a relabelling script): one pass after the burst.
NODES_SETTLE_SECONDS: Final = 1.0
CONFLICT_RETRY_SECONDS: Final = 0.5
WRITE_RETRY_SECONDS: Final = 5.0


class EntryWriter(Protocol):
    async def write_entry(self, workload: Workload, entry: dict[str, Any]) -> None:
        """Apply ``entry`` on the Workload; ``Conflict`` when it changed since ``workload``."""
        ...


class KubeEntryWriter:
    """:class:`EntryWriter` against the API server (server-side apply, resourceVersion precondition)."""

    def __init__(self, api: k8s.ApiClient) -> None:
        self.api = api

    async def write_entry(self, workload: Workload, entry: dict[str, Any]) -> None:
        await apply_entry(self.api, workload, entry)


class TopologyHealth:
    def __init__(
        self,
        deps: ControllerDeps,
        *,
        writer: EntryWriter,
    ) -> None:
        informers = deps.informers
        self._informers = informers
        self._workloads = informers.workloads.store
        self._checks = deps.checks
        self._writer = writer
        self._events = deps.events
        self._settings = deps.settings
        self._gates = deps.gates
        self._indexes: dict[str, NodeIndex] = {}  # flavor -> its nodes; rebuilt after node changes
        self._nodes_changed = False
        self._bindings: dict[str, FlavorBinding] | None = None  # dropped on any configuration change
        self._announced: dict[str, str] = {}  # workload -> the problems its last Event named ("": none)
        self._failures: dict[str, int] = {}
        self.queue: WorkQueue[str] = WorkQueue("topology-health")
        informers.workloads.add_handler(lambda w: self._on_workload(None, w), self._on_workload, self._on_deleted)
        informers.nodes.add_handler(self._node_changed, self._node_updated, self._node_changed)
        for config in informers.configuration():
            on_any_change(config, self._configuration_changed, spec_only=True)

    # --- events -------------------------------------------------------------------------------

    def _watched(self, wl: Workload) -> bool:
        return not wl.is_evicted and assignment_trusted(wl, self._checks.names())

    def _on_workload(self, old: Workload | None, new: Workload) -> None:
        if not self._watched(new):
            self._announced.pop(workload_key(new), None)
            return
        if (
            old is None
            or old.metadata.annotations != new.metadata.annotations
            or old.status.admission_checks != new.status.admission_checks
            or old.status.admission != new.status.admission
            or old.spec.pod_sets != new.spec.pod_sets
        ):
            self.queue.add(workload_key(new))

    def _on_deleted(self, wl: Workload) -> None:
        key = workload_key(wl)
        self._announced.pop(key, None)
        self._failures.pop(key, None)

    def _node_changed(self, _node: SlimNode) -> None:
        self._nodes_changed = True
        # Without an event loop yet (the initial list), ``run`` looks at everything anyway.
        with contextlib.suppress(RuntimeError):
            self.queue.add_after(ALL, NODES_SETTLE_SECONDS)

    def _node_updated(self, old: SlimNode, new: SlimNode) -> None:
        if old != new:  # heartbeats change nothing we read
            self._node_changed(new)

    def _configuration_changed(self) -> None:
        self._bindings = None
        self._indexes.clear()
        self.queue.add(ALL)

    def enqueue_all(self) -> None:
        for wl in self._workloads.values():
            if self._watched(wl):
                self.queue.add(workload_key(wl))

    # --- reconcile ----------------------------------------------------------------------------

    def problems(self, wl: Workload) -> list[str] | None:
        """Why ``wl``'s placement is no longer enforced ([] when it is; None: nothing to judge)."""
        return workload_placement_problems(
            wl,
            self._checks.names(),
            self._flavor_bindings(),
            self._informers.topologies.store.get,
            self._nodes_of,
            self._settings.annotation_prefix,
            self._gates,
        )

    def _flavor_bindings(self) -> dict[str, FlavorBinding]:
        if self._bindings is None:
            # A flavor bound to two Topologies is left out: the admission side names that conflict.
            self._bindings = bind_flavors(
                self._checks.by_name().values(),
                self._informers.queues.store.values(),
                controller_name=self._checks.controller_name,
                conflicts={},
            )
        return self._bindings

    def _nodes_of(self, flavor: str) -> NodeIndex:
        index = self._indexes.get(flavor)
        if index is None:
            rf = self._informers.flavors.store.get(flavor)
            labels = dict(rf.spec.node_labels) if rf is not None else {}
            index = NodeIndex(self._informers.nodes.store.values(), labels)
            self._indexes[flavor] = index
        return index

    async def reconcile(self, key: str) -> float | None:
        if key == ALL:
            if self._nodes_changed:
                # Rebuilt once per burst; until then a workload's own update is judged on the
                # nodes as they were, at most NODES_SETTLE_SECONDS ago.
                self._nodes_changed = False
                self._indexes.clear()
            self.enqueue_all()
            return None
        wl = self._workloads.get(key)
        if wl is None or not self._watched(wl):
            return None
        ours = self._checks.names()
        entries = [st for st in wl.status.admission_checks if st.name in ours and st.state == c.CHECK_STATE_READY]
        problems = self.problems(wl)
        if problems is None:
            return None  # an edited assignment: the assignment guard ends that first
        note = note_text(problems)
        for st in entries:
            desired = with_note(st.message, problems)
            if desired == st.message:
                continue
            try:
                await self._writer.write_entry(wl, entry_with_message(st, desired))
            except Conflict:
                return CONFLICT_RETRY_SECONDS  # decided again from the informer's newer copy
            except Exception as exc:
                n = self._failures.get(key, 0)
                self._failures[key] = n + 1
                log.warning("topology_health_write_failed", workload=key, error=f"{type(exc).__name__}: {exc}")
                return retry_after(
                    exc, min(WRITE_RETRY_SECONDS * 2**n, WRITE_RETRY_MAX_SECONDS), WRITE_RETRY_MAX_SECONDS
                )
        self._failures.pop(key, None)
        before = self._announced.get(key, note_of(entries[0].message) if entries else "")
        if note != before:
            self._announced[key] = note
            await self._announce(wl, note, before)
        return None

    async def _announce(self, wl: Workload, note: str, before: str) -> None:
        kind: Literal["Normal", "Warning"]
        if note:
            kind, reason, message = "Warning", NOT_ENFORCED_REASON, f"{note}; {NOT_ENFORCED}"
        else:
            kind, reason = "Normal", RESTORED_REASON
            message = f"placement enforced again by the topology (was: {before})"
        log.info("topology_health_changed", workload=workload_key(wl), enforced=not note, problems=note or before)
        await workload_event(self._events, wl, kind, reason, message)

    # --- running ------------------------------------------------------------------------------

    async def run(self) -> None:
        """Look at every admitted workload once (the caches have synced), then work."""
        self._nodes_changed = False
        self._indexes.clear()
        self.enqueue_all()
        log.info("topology_health_started")
        await self.queue.run(1, self.reconcile)
