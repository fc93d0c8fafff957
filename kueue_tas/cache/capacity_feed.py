"""What the live capacity model is fed from the cluster's objects.

One set of rules, used by the controller (object by object, from its informers) and by
``kueue-tas capacity`` (from one list of everything): which flavors are TAS flavors and on
which Topology, which pods are charged to their node, and what an admitted Workload holds.
Sharing them is what makes the command's numbers the admitter's numbers.
"""

from __future__ import annotations

from collections.abc import Callable, Container, Iterable, Mapping

import structlog

from kueue_tas.api import constants as c
from kueue_tas.api.models import AdmissionCheck, ClusterQueue, ResourceFlavor, Topology, Workload
from kueue_tas.api.resources import pod_requests
from kueue_tas.cache.live_capacity import FlavorSpec, LiveCapacity, UsageEntry
from kueue_tas.kube.slim import SlimPod
from kueue_tas.topology.codec import decode_assignment_annotation
from kueue_tas.topology.flavors import bind_flavors
from kueue_tas.topology.inputs import tolerations
from kueue_tas.topology.model import NodeInfo

log = structlog.get_logger(__name__)


def our_checks(checks: Iterable[AdmissionCheck], controller_name: str) -> dict[str, AdmissionCheck]:
    """The AdmissionChecks handled by the controller named ``controller_name``, by name."""
    return {ac.name: ac for ac in checks if ac.spec.controller_name == controller_name}


def flavor_specs(
    checks: Mapping[str, AdmissionCheck],
    queues: Iterable[ClusterQueue],
    topology: Callable[[str], Topology | None],
    flavor: Callable[[str], ResourceFlavor | None],
    controller_name: str = c.CONTROLLER_NAME,
) -> tuple[dict[str, FlavorSpec], dict[str, set[str]]]:
    """(flavor -> spec, our check -> flavors it governs) for ``checks`` (ours, see ``our_checks``).

    A flavor whose Topology is missing or has no levels is left out: nothing can be placed
    on it, and the check says so through its ``Active`` condition. Raises
    ``FlavorMappingError`` when two checks put one flavor on different Topologies.
    """
    bindings = bind_flavors(checks.values(), queues, controller_name=controller_name)
    specs: dict[str, FlavorSpec] = {}
    per_check: dict[str, set[str]] = {name: set() for name in checks}
    for name, b in bindings.items():
        topo = topology(b.topology)
        if topo is None or not topo.levels or b.check is None:
            continue
        rf = flavor(name)
        specs[name] = FlavorSpec(
            name,
            topo.name,
            topo.levels,
            dict(rf.spec.node_labels) if rf else {},
            tolerations(rf.spec.tolerations) if rf else (),
        )
        per_check[b.check].add(name)
    return specs, per_check


def pod_charge(pod: SlimPod) -> tuple[str, dict[str, int]] | None:
    """(node, requests + ``pods: 1``) of a pod that holds capacity outside our assignments;
    None for our own pods (their assignment holds it) and for unbound or finished pods."""
    if pod.is_tas or not pod.counts_on_node:
        return None
    return pod.node_name, pod.usage_map()


def feed_pod(capacity: LiveCapacity, pod: SlimPod) -> None:
    charge = pod_charge(pod)
    if charge is None:
        capacity.delete_pod(pod.key)
    else:
        capacity.upsert_pod(pod.key, *charge)


def assignment_trusted(wl: Workload, checks: Container[str]) -> bool:
    """Our assignment annotation counts: the Workload runs and one of ``checks`` (ours) is Ready
    on it. Kueue resets the entry on eviction, so an assignment left from an earlier admission
    is never trusted."""
    return (
        not wl.is_finished
        and c.TOPOLOGY_ASSIGNMENT_ANNOTATION in wl.metadata.annotations
        and any(st.name in checks and st.state == c.CHECK_STATE_READY for st in wl.status.admission_checks)
    )


def workload_usage(wl: Workload, checks: Container[str], tas_flavors: Container[str]) -> tuple[UsageEntry, ...] | None:
    """What an admitted Workload holds; None unless its assignment is trusted (``assignment_trusted``)."""
    if not assignment_trusted(wl, checks):
        return None
    text = wl.metadata.annotations[c.TOPOLOGY_ASSIGNMENT_ANNOTATION]
    try:
        decoded = decode_assignment_annotation(text)
    except ValueError as exc:
        log.warning("assignment_annotation_invalid", workload=f"{wl.namespace}/{wl.name}", error=str(exc))
        return None
    entries = []
    for name, assignment in decoded:
        ps, psa = wl.pod_set(name), wl.pod_set_assignment(name)
        if ps is None or psa is None:
            continue
        flavor = next((f for f in psa.flavors.values() if f in tas_flavors), None)
        if flavor is None:
            continue
        entries.append(UsageEntry(flavor, assignment, pod_requests(ps.template.get("spec") or {})))
    return tuple(entries)


def capacity_from_lists(
    specs: Mapping[str, FlavorSpec],
    checks: Container[str],
    nodes: Iterable[NodeInfo],
    pods: Iterable[SlimPod],
    workloads: Iterable[Workload],
) -> LiveCapacity:
    """The model the controller would hold once its informers had synced these objects."""
    capacity = LiveCapacity()
    capacity.set_flavors(specs)
    for node in nodes:
        capacity.upsert_node(node)
    for pod in pods:
        feed_pod(capacity, pod)
    for wl in workloads:
        usage = workload_usage(wl, checks, capacity.flavors())
        if usage is not None:
            capacity.set_workload_usage(f"{wl.namespace}/{wl.name}", usage)
    return capacity
