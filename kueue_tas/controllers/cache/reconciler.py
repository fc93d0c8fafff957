"""Keeps the live capacity model current from the shared informers (Kueue's scheduler cache).

Nodes and bound pods go to their snapshots; DaemonSets reserve their pods' requests on the
nodes they will run on until those pods are charged (``kueue_tas.capacity.daemonsets``); each
Workload whose assignment is trusted holds its committed usage; the Kueue configuration decides
the TAS flavors and, per check of ours, the flavors it governs. A configuration change
recomputes every Workload's usage (which flavors are TAS flavors may have changed). The
capacity model's rules are in ``kueue_tas.capacity``; this module only routes events to them.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import structlog

from kueue_tas.api.constants import HOSTNAME_LABEL
from kueue_tas.api.workload import Workload
from kueue_tas.capacity.daemonsets import DaemonSetSpec
from kueue_tas.capacity.feed import feed_pod, feed_workload, remove_pod, workload_key
from kueue_tas.capacity.hostnames import hostname_of
from kueue_tas.capacity.live import LiveCapacity
from kueue_tas.capacity.rules import flavor_specs
from kueue_tas.controllers.informers import OurChecks, SharedInformers, SlimNode, on_any_change

log = structlog.get_logger(__name__)

# The longest a lapsed DaemonSet reservation is held past its time: a reservation made after
# the timer was set may lapse before the one it waits for (held longer is the safe side).
LAPSE_POLL_SECONDS = 5.0


class CapacityCache:
    def __init__(self, capacity: LiveCapacity, informers: SharedInformers, checks: OurChecks) -> None:
        self._capacity = capacity
        self._informers = informers
        self._checks = checks
        self._check_flavors: dict[str, set[str]] = {}  # our check -> flavors it governs
        self._unnamed: set[str] = set()  # Nodes logged for their hostname label (none, or shared)
        informers.nodes.add_handler(self._on_node, lambda _o, n: self._on_node(n), self._on_node_deleted)
        informers.pods.add_handler(
            lambda p: feed_pod(capacity, p),
            lambda _o, p: feed_pod(capacity, p),
            lambda p: remove_pod(capacity, p.key),
        )
        informers.daemonsets.add_handler(capacity.upsert_daemonset, self._on_daemonset, self._on_daemonset_deleted)
        for config in informers.configuration():
            on_any_change(config, self.resync, spec_only=True)
        informers.workloads.add_handler(self._on_workload, lambda _o, w: self._on_workload(w), self._on_deleted)

    def _on_node(self, node: SlimNode) -> None:
        self._capacity.upsert_node(node)
        host = hostname_of(node)
        shared = self._informers.hosts.shared(host) if host is not None else ()
        if host is None or shared:
            # Said once per Node: a hostname-level topology cannot count it (no label), or counts
            # none of the Nodes sharing its label (``capacity.hostnames``), and nothing else says why.
            if node.name not in self._unnamed:
                self._unnamed.add(node.name)
                if host is None:
                    log.warning("node_without_hostname_label", node=node.name, label=HOSTNAME_LABEL)
                else:
                    log.warning("hostname_label_shared", node=node.name, hostname=host, nodes=list(shared))
        else:
            self._unnamed.discard(node.name)

    def _on_node_deleted(self, node: SlimNode) -> None:
        self._capacity.delete_node(node.name)
        # Rare, and it changes what every later decision may give: worth one line.
        log.info("node_removed_from_capacity", node=node.name)
        self._unnamed.discard(node.name)

    def flavors_of(self, check: str) -> set[str]:
        """The flavors our check ``check`` governs (empty for a check we do not know)."""
        return set(self._check_flavors.get(check, ()))

    def check_flavors(self) -> dict[str, set[str]]:
        """Every check of ours -> the flavors it governs, as of the last configuration change."""
        return {check: set(flavors) for check, flavors in self._check_flavors.items()}

    def resync(self) -> None:
        """Recompute the TAS flavors from the configuration, then every Workload's usage."""
        checks = self._checks.by_name()
        # A flavor put on two Topologies is left out alone (the admission reconciler names the
        # conflict on the check entries of workloads using it); the others stay governed.
        conflicts: dict[str, str] = {}
        specs, per_check = flavor_specs(
            checks,
            self._informers.queues.store.values(),
            self._informers.topologies.store.get,
            self._informers.flavors.store.get,
            self._checks.controller_name,
            conflicts=conflicts,
        )
        for message in conflicts.values():
            log.error("flavor_mapping_invalid", error=message)
        self._capacity.set_flavors(specs)
        self._check_flavors = per_check
        for wl in self._informers.workloads.store.values():
            feed_workload(self._capacity, wl, checks)

    def _on_workload(self, wl: Workload) -> None:
        feed_workload(self._capacity, wl, self._checks.by_name())

    def _on_daemonset(self, old: DaemonSetSpec, new: DaemonSetSpec) -> None:
        if old.uid != new.uid:  # deleted and created again under the name between two lists
            self._capacity.delete_daemonset(old.uid)
        self._capacity.upsert_daemonset(new)

    def _on_daemonset_deleted(self, ds: DaemonSetSpec) -> None:
        self._capacity.delete_daemonset(ds.uid)

    async def run_lapses(self) -> None:
        """Release each DaemonSet reservation when its time is up, saying which and why (the
        capacity rule is pure: this is its clock)."""
        while True:
            for held in self._capacity.expire_reservations():
                log.warning(
                    "daemonset_reservation_lapsed",
                    daemonset=held.daemonset,
                    node=held.node,
                    requests=dict(held.usage),
                    since=_iso(held.since),
                    until=_iso(held.until),
                    reason="its pod is still not bound to the node; the capacity is offered again",
                )
            due = self._capacity.next_lapse()
            left = LAPSE_POLL_SECONDS if due is None else due - self._capacity.now()
            await asyncio.sleep(min(max(left, 0.0), LAPSE_POLL_SECONDS))

    def _on_deleted(self, wl: Workload) -> None:
        key = workload_key(wl)
        self._capacity.remove_workload_usage(key)
        self._capacity.unidentify(key)
        if self._capacity.decided_for_other(key, wl.metadata.uid):
            return  # an earlier Workload of the name: the decision held is the later one's (DST seed 1003563)
        self._capacity.forget(key)
        self._capacity.unfence(key)


def _iso(at: float | None) -> str | None:
    return None if at is None else datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
