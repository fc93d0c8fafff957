"""Where the controller's topology map comes from: the leader's live model, or a cluster read.

* ``LiveSource``: the leader (or the one replica when election is off) once its informers have
  synced. The model is built from the ``LiveCapacity`` the admitter decides on, the informers'
  Workloads and pods, and our checks' flavors as the capacity cache last computed them: no API
  call. The event handlers keep changing those tables, so the loop takes copies first, between
  two events (``LiveCapacity.copy_for_reading``: milliseconds at 10,000 nodes), and the model
  and its HTML are built from the copies in a worker thread (``benchmarks/map_serve.py``).
* ``ReadSource``: any other replica (a standby: its informers run only while leading; or a
  leader still syncing). One read of the cluster, as ``kueue-tas capacity --html`` makes it
  (``cli.cluster_read``), then the capacity model and the map, all in a worker thread (the
  objects are this build's own). ``map_server`` keeps each build a few seconds, so a refreshing
  browser costs the API server one read per ``READ_MAX_AGE`` seconds at most.

Both end in ``map_page.capacity_model``, so the two pages differ only in when they were read.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Collection, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from kueue_tas.api.constants import SCHEDULING_GATE
from kueue_tas.api.workload import Workload
from kueue_tas.capacity.daemonsets import ReservationPolicy
from kueue_tas.capacity.feed import capacity_from_lists
from kueue_tas.capacity.live import LiveCapacity
from kueue_tas.cli.cluster_read import (
    ClusterReadError,
    ClusterState,
    read_for_capacity,
    read_released_pods,
    tas_config,
)
from kueue_tas.cli.map_page import capacity_model
from kueue_tas.kube.errors import TransportError
from kueue_tas.kube.slim import SlimPod
from kueue_tas.mapview.build import MapOptions
from kueue_tas.mapview.model import MapModel
from kueue_tas.runtime.config import Settings
from kueue_tas.topology.features import DEFAULT_GATES, FeatureGates

LIVE_MAX_AGE = 2.0  # seconds a live build is served again: bounds the event loop's share
READ_MAX_AGE = 10.0  # seconds a cluster read is served again: bounds the API server's load


def _stamp(at: datetime) -> str:
    return at.strftime("%Y-%m-%d %H:%M:%S UTC")


class MapSource(Protocol):
    kind: str  # "live" or "read": the X-Kueue-Tas-Map-Source header, the JSON's source.kind
    max_age: float

    def usable(self) -> bool: ...

    async def build(self) -> MapModel: ...

    def describe(self, replica: str, at: datetime) -> str:
        """The line under the page's title: where the numbers come from, and when."""
        ...


@dataclass
class LiveSource:
    capacity: LiveCapacity
    workloads: Callable[[], Iterable[Workload]]
    pods: Callable[[], Iterable[SlimPod]]
    check_flavors: Callable[[], Mapping[str, Collection[str]]]
    leading: Callable[[], bool]
    settings: Settings
    synced: bool = False  # set by ``mark_synced``, a manager hook run after the capacity's resync
    kind: str = "live"
    max_age: float = LIVE_MAX_AGE

    def mark_synced(self) -> None:
        self.synced = True

    def usable(self) -> bool:
        return self.synced and self.leading()

    async def build(self) -> MapModel:
        # On the loop, between two events: copies of what the map reads (a few milliseconds at
        # 10,000 nodes; the objects in the informers' stores are replaced, never changed).
        capacity = self.capacity.copy_for_reading()
        workloads, pods = list(self.workloads()), list(self.pods())
        flavors = {check: set(f) for check, f in self.check_flavors().items()}
        return await asyncio.to_thread(
            capacity_model,
            capacity,
            workloads,
            pods,
            flavors,
            MapOptions(),
            prefix=self.settings.annotation_prefix,
            grace=self.settings.node_failure_grace_seconds,
        )

    def describe(self, replica: str, at: datetime) -> str:
        return f"Live model of the leader {replica}, {_stamp(at)}"


ClusterReader = Callable[[], Awaitable[ClusterState]]


def cluster_reader(api: Any, prefix: str, gate: str = SCHEDULING_GATE) -> ClusterReader:
    """What ``kueue-tas capacity --html`` reads: the capacity model's objects and our workloads'
    pods that are not bound yet (the map counts them per domain)."""

    async def read() -> ClusterState:
        try:
            state = await read_for_capacity(api, prefix, gate)
            state.pods.extend(await read_released_pods(api, prefix, gate))
        except TransportError as exc:
            raise ClusterReadError(f"cannot reach the Kubernetes API server: {exc.message}") from exc
        return state

    return read


@dataclass
class ReadSource:
    read: ClusterReader
    settings: Settings
    gates: FeatureGates = DEFAULT_GATES
    kind: str = "read"
    max_age: float = READ_MAX_AGE

    def usable(self) -> bool:
        return True

    async def build(self) -> MapModel:
        state = await self.read()
        return await asyncio.to_thread(self._model, state)

    def _model(self, state: ClusterState) -> MapModel:
        tas = tas_config(state.config, self.settings.controller_name)
        capacity = capacity_from_lists(
            tas.specs,
            tas.checks,
            state.nodes,
            state.pods,
            state.workloads,
            state.daemonsets,
            self.gates,
            daemonset_policy=ReservationPolicy.from_settings(self.settings),
        )
        return capacity_model(
            capacity,
            state.workloads,
            state.pods,
            tas.check_flavors,
            MapOptions(notes=list(state.warnings)),
            prefix=self.settings.annotation_prefix,
            grace=self.settings.node_failure_grace_seconds,
        )

    def describe(self, replica: str, at: datetime) -> str:
        kept = f"no live model on this replica; kept up to {self.max_age:g} s"
        return f"Read from the API server by {replica}, {_stamp(at)} ({kept})"
