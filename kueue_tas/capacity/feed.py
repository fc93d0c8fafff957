"""Applying the capacity rules to a ``LiveCapacity``, one object at a time or from lists.

The controller calls ``feed_pod``, ``remove_pod`` and ``feed_workload`` from its informer handlers;
``capacity_from_lists`` builds the same model from one read of the cluster (``kueue-tas
capacity``) or a dump (``kueue-tas plan``), so every reader ends with the numbers the
controller would hold once its informers had synced the same objects.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Container, Iterable, Mapping

from kueue_tas.api.workload import Workload
from kueue_tas.capacity.assignment_record import assignment_tampering
from kueue_tas.capacity.daemonsets import DEFAULT_POLICY, DaemonSetSpec, ReservationPolicy
from kueue_tas.capacity.live import LiveCapacity
from kueue_tas.capacity.rules import FlavorSpec, pod_charge, pod_claim, workload_identity, workload_usage
from kueue_tas.kube.slim import SlimPod
from kueue_tas.topology.admitted import kept_slices, replaced_slice_ref
from kueue_tas.topology.features import DEFAULT_GATES, FeatureGates
from kueue_tas.topology.model import NodeInfo


def workload_key(wl: Workload) -> str:
    return f"{wl.namespace}/{wl.name}"


def feed_pod(capacity: LiveCapacity, pod: SlimPod) -> None:
    """A pod was added or changed: charge it, or release what it held (see ``pod_charge``);
    its labels' claim on a workload slot goes along, for the model to verify (``pod_claim``)."""
    charge = pod_charge(pod)
    if charge is None:
        capacity.delete_pod(pod.key)
    else:
        capacity.upsert_pod(pod.key, *charge, claim=pod_claim(pod))
    # A DaemonSet's pod charged on its node replaces that node's reservation (capacity.daemonsets).
    capacity.daemon_pod(pod.key, pod.daemonset, None if charge is None else charge[0])


def remove_pod(capacity: LiveCapacity, key: str) -> None:
    """The pod ``key`` was deleted: release what it held; its DaemonSet's reservation may return."""
    capacity.delete_pod(key)
    capacity.forget_daemon_pod(key)


def feed_workload(capacity: LiveCapacity, wl: Workload, checks: Container[str], *, strict: bool = False) -> None:
    """A Workload was added or changed: its trusted usage replaces what it held (and any
    assumption for it); an untrusted one holds nothing committed (see ``workload_usage``).
    A new elastic slice is held with the slice it replaces (``replaced_slice_ref``): until
    Kueue finishes that one, the pair holds the union of their assignments; the pods it
    keeps fill its slots whether or not the replaced Workload still exists (``kept_slices``).

    An annotation that departs from our record (``assignment_tampering``) never lowers what is
    held: what the model already holds for the workload (our decision) stays; with nothing
    held (a restart), the edited assignment is charged as far as it decodes."""
    if capacity.behind(workload_key(wl), wl.metadata.resource_version):
        return  # a late copy older than the decision the model holds for it
    fenced = capacity.fenced()
    if workload_key(wl) in fenced and fenced[workload_key(wl)] != wl.metadata.resource_version:
        capacity.unfence(workload_key(wl))  # changed since: the guarded write can no longer land
    identity = workload_identity(wl)
    capacity.identify(workload_key(wl), wl.namespace or "", identity, kept_slices(wl, identity, capacity.gates))
    if capacity.holds(workload_key(wl)) and assignment_tampering(wl, checks) is not None:
        return
    usage = workload_usage(wl, checks, capacity.flavors(), strict=strict)
    if usage is not None:
        ref = replaced_slice_ref(wl, capacity.gates)
        capacity.set_workload_usage(workload_key(wl), usage, replaces=None if ref is None else f"{ref[0]}/{ref[1]}")
    else:
        capacity.remove_workload_usage(workload_key(wl))


def capacity_from_lists(
    specs: Mapping[str, FlavorSpec],
    checks: Container[str],
    nodes: Iterable[NodeInfo],
    pods: Iterable[SlimPod],
    workloads: Iterable[Workload],
    daemonsets: Iterable[DaemonSetSpec] = (),
    gates: FeatureGates = DEFAULT_GATES,
    *,
    daemonset_policy: ReservationPolicy = DEFAULT_POLICY,
    now: float | None = None,
) -> LiveCapacity:
    """The model the controller would hold once its informers had synced these objects, at
    ``now`` (epoch seconds; None: the time of day), which bounds the DaemonSet reservations."""
    clock: Callable[[], float] = time.time
    if now is not None:
        at = now
        clock = lambda: at  # noqa: E731
    capacity = LiveCapacity(gates, daemonset_policy=daemonset_policy, clock=clock)
    capacity.set_flavors(specs)
    for node in nodes:
        capacity.upsert_node(node)
    for ds in daemonsets:
        capacity.upsert_daemonset(ds)
    for pod in pods:
        feed_pod(capacity, pod)
    for wl in workloads:
        feed_workload(capacity, wl, checks)
    return capacity
