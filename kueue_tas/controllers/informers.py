"""The shared informers the reconcilers read, registered once on the manager, and the
AdmissionChecks that are ours (by ``controllerName``)."""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any, Protocol, TypeVar

from kueue_tas.api.constants import SCHEDULING_GATE
from kueue_tas.api.kueue_objects import AdmissionCheck, ClusterQueue, ResourceFlavor, Topology
from kueue_tas.api.workload import Workload
from kueue_tas.capacity.daemonsets import DaemonSetSpec, daemonset_spec
from kueue_tas.capacity.hostnames import HOSTNAME_INDEX, NodeHosts, hostname_values
from kueue_tas.capacity.rules import our_checks
from kueue_tas.kube import catalogue as cat
from kueue_tas.kube.decoding import RawObject, model_transform
from kueue_tas.kube.informer import Informer
from kueue_tas.kube.slim import SlimPod, make_pod_transform
from kueue_tas.kube.stores import PodStore, Store
from kueue_tas.topology.admitted import kept_slice_labels
from kueue_tas.topology.level_names import LEVEL_NAMES_ANNOTATION
from kueue_tas.topology.model import NodeInfo
from kueue_tas.topology.requests import node_info

T = TypeVar("T")

SlimNode = NodeInfo
"""Nodes are cached as the engine's ``NodeInfo`` (interned strings)."""


def slim_node(raw: Mapping[str, Any]) -> SlimNode:
    """``node_info`` of a raw Node dict, with label and resource names interned."""
    info = node_info(raw)
    return replace(
        info,
        name=sys.intern(info.name),
        labels={sys.intern(k): sys.intern(v) for k, v in info.labels.items()},
        allocatable={sys.intern(k): v for k, v in info.allocatable.items()},
    )


class InformerSource(Protocol):
    """What hands out shared informers (the runtime Manager)."""

    def informer(
        self,
        resource: cat.Resource,
        transform: Callable[[RawObject], T | None],
        *,
        store: Store[T] | None = None,
        name: str | None = None,
    ) -> Informer[T]: ...


@dataclass(frozen=True, slots=True)
class SharedInformers:
    nodes: Informer[SlimNode]
    pods: Informer[SlimPod]
    pod_store: PodStore  # the pods informer's store, typed: pods by workload
    topologies: Informer[Topology]
    flavors: Informer[ResourceFlavor]
    checks: Informer[AdmissionCheck]
    queues: Informer[ClusterQueue]
    workloads: Informer[Workload]
    daemonsets: Informer[DaemonSetSpec]  # kept as the pod each would create (None: being deleted)
    # The node store's index by hostname label: the one way from an assignment's value to a Node.
    hosts: NodeHosts

    @classmethod
    def register(
        cls, source: InformerSource, annotation_prefix: str, scheduling_gate: str = SCHEDULING_GATE
    ) -> SharedInformers:
        """``scheduling_gate``: the gate name a pod counts as gated by (the ``scheduling_gate`` setting)."""
        pod_store = PodStore()
        node_store: Store[SlimNode] = Store({HOSTNAME_INDEX: hostname_values})
        return cls(
            nodes=source.informer(cat.NODES, slim_node, store=node_store, name="nodes"),
            pods=source.informer(
                cat.PODS, make_pod_transform(annotation_prefix, scheduling_gate), store=pod_store, name="pods"
            ),
            pod_store=pod_store,
            topologies=source.informer(cat.TOPOLOGIES, model_transform(Topology)),
            flavors=source.informer(cat.RESOURCE_FLAVORS, model_transform(ResourceFlavor)),
            checks=source.informer(cat.ADMISSION_CHECKS, model_transform(AdmissionCheck)),
            queues=source.informer(cat.CLUSTER_QUEUES, model_transform(ClusterQueue)),
            workloads=source.informer(
                cat.WORKLOADS,
                model_transform(Workload),
                store=Store({WORKLOAD_UID_INDEX: _workload_uid, WORKLOAD_KEPT_INDEX: kept_slice_labels}),
            ),
            daemonsets=source.informer(cat.DAEMONSETS, daemonset_spec, name="daemonsets"),
            hosts=NodeHosts(lambda host: node_store.by_index(HOSTNAME_INDEX, host)),
        )

    def configuration(self) -> tuple[Informer[Any], ...]:
        """The Kueue objects that decide which flavors are ours and on which Topology."""
        return (self.topologies, self.flavors, self.checks, self.queues)


WORKLOAD_UID_INDEX = "uid"
# The workload labels of the earlier elastic slices whose pods a slice keeps: a pod of a slice
# whose Workload is gone still reaches the slice that kept it (``slice_replacement``).
WORKLOAD_KEPT_INDEX = "kept-slices"


def _workload_uid(wl: Workload) -> tuple[str, ...]:
    # Pods name their workload by UID (our label): the ungater maps them back through this index.
    return (wl.metadata.uid,) if wl.metadata.uid else ()


def _level_names(obj: Any) -> str | None:
    return obj.metadata.annotations.get(LEVEL_NAMES_ANNOTATION) if isinstance(obj, Topology) else None


def on_any_change(informer: Informer[Any], handler: Callable[[], None], *, spec_only: bool = False) -> None:
    """Call ``handler()`` on every add, update and delete of ``informer``; with ``spec_only``,
    updates that leave ``spec`` (and a Topology's level names) as they were are skipped."""

    def updated(old: Any, new: Any) -> None:
        # Kueue rewrites ClusterQueue status on nearly every admission: a handler that reads only
        # spec (which flavors, checks and Topologies are ours) need not run again for it.
        if not (spec_only and old.spec == new.spec and _level_names(old) == _level_names(new)):
            handler()

    informer.add_handler(lambda _x: handler(), updated, lambda _x: handler())


class OurChecks:
    """The AdmissionChecks handled by the controller named ``controller_name``, read from the
    shared store at each call (so never stale)."""

    def __init__(self, store: Store[AdmissionCheck], controller_name: str) -> None:
        self._store = store
        self.controller_name = controller_name

    def by_name(self) -> dict[str, AdmissionCheck]:
        return our_checks(self._store.values(), self.controller_name)

    def names(self) -> set[str]:
        return set(self.by_name())
