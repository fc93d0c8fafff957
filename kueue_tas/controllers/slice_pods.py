"""The pods an elastic slice answers for beyond its own: those of the slices it replaces.

Kueue's elastic slices keep the pods of the slice they replace running where they are, and
the new slice's assignment includes them (``kueue_tas.topology.admitted.slice_replacement``). Those
pods keep the workload label of the slice that started them, and Kueue may delete that slice's
Workload at once. The ungater and the stray-pod rule both need them, by the same rule:

* the slices found by following ``workload-slice-replacement-for`` through the Workloads that
  still exist, and the slices the new one recorded keeping (``KEPT_SLICES_ANNOTATION``),
  which still name them once their Workloads are gone (a recorded label whose Workload exists,
  off that chain and not finished, is no slice it replaced: ignored);
* released pods always (they run in the new slice's domains); gated ones of the recorded
  slices only once their own slice no longer releases pods (finished, evicted or deleted): the
  newest slice then releases them, as Kueue releases a late pod that names the original slice.
"""

from __future__ import annotations

from collections.abc import Callable

from kueue_tas.api.workload import Workload
from kueue_tas.capacity.rules import workload_identity
from kueue_tas.controllers.informers import WORKLOAD_KEPT_INDEX, WORKLOAD_UID_INDEX
from kueue_tas.kube.slim import SlimPod
from kueue_tas.kube.stores import PodStore, Store
from kueue_tas.topology.admitted import MAX_KEPT_SLICES, kept_slices, replaced_slice_ref
from kueue_tas.topology.features import FeatureGates


def workloads_of_pod(pod: SlimPod, workloads: Store[Workload]) -> list[Workload]:
    """The Workloads a pod of ours concerns: the one its workload label names, and the slices
    (in its namespace) that recorded keeping that label's pods."""
    if pod.workload is None:
        return []
    owners = workloads.by_index(WORKLOAD_UID_INDEX, pod.workload)
    keepers = [w for w in workloads.by_index(WORKLOAD_KEPT_INDEX, pod.workload) if (w.namespace or "") == pod.namespace]
    return owners + [w for w in keepers if w not in owners]


def earlier_slice_pods(
    wl: Workload,
    workloads: Store[Workload],
    pods: PodStore,
    gates: FeatureGates,
    releases: Callable[[Workload], bool],
) -> list[SlimPod]:
    """The pods of the slices ``wl`` replaces that ``wl`` answers for (see the module doc);
    ``releases(w)``: whether slice ``w`` still releases its own pods."""
    namespace = wl.namespace or ""
    own = workload_identity(wl)
    owners: dict[str, Workload | None] = {}  # workload label -> its Workload (None: gone)
    current = wl
    for _ in range(MAX_KEPT_SLICES):
        ref = replaced_slice_ref(current, gates)
        if ref is None:
            break
        previous = workloads.get(f"{ref[0] or ''}/{ref[1]}")
        if previous is None:
            break
        label = workload_identity(previous)
        if label == own or label in owners:
            break
        owners[label] = previous
        current = previous
    # Gated pods only of the slices ``wl`` recorded: their pod events reach ``wl`` through the
    # record (``workloads_of_pod``), so its releases of them are observed.
    recorded: set[str] = set()
    for label in kept_slices(wl, own, gates):
        if label not in owners:
            found = [w for w in workloads.by_index(WORKLOAD_UID_INDEX, label) if (w.namespace or "") == namespace]
            if found and not found[0].is_finished:
                # Not a slice ``wl`` replaced (those are on the chain, or finished by Kueue when
                # replaced): the record is a plain annotation anyone editing Workloads can
                # write, and that workload's pods are its own.
                continue
            owners[label] = found[0] if found else None
        recorded.add(label)
    out: list[SlimPod] = []
    for label, owner in owners.items():
        gated_too = label in recorded and (owner is None or not releases(owner))
        out.extend(p for p in pods.of_workload(namespace, label) if gated_too or not p.gated)
    return out
