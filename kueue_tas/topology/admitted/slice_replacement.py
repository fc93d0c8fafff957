"""Elastic workload slices: which admitted slice a new Workload replaces, and what it keeps.

One rule for ``kueue-tas plan`` (``plan_replacements``) and the controller's admission
decision (``kueue_tas.controllers``), so both place a new slice the same way:

* A Workload annotated ``kueue.x-k8s.io/workload-slice-replacement-for: <namespace>/<name>``
  replaces the slice it names only when both ElasticJobsViaWorkloadSlices and
  ElasticJobsViaWorkloadSlicesWithTAS are on. With either off the annotation is ignored
  here: the new slice is placed afresh and the old one keeps holding its capacity.
* As in Kueue (workloadslicing.ReplacedWorkloadSlice), the named slice must be in the new
  slice's namespace; an empty namespace in the annotation means that namespace.
* Only a slice whose assignment our check holds (Ready, not finished: the caller's
  ``trusted``) is replaced, and only by a new slice our check has not admitted yet (once
  it has, its assignment is its own usage).
* The new slice is placed with the old slice's assignments (PodSet name -> assignment) as
  the engine's ``current`` and ``elastic=True``; the caller does not charge the old slice
  during that decision (the engine charges what the new slice keeps).
* As in Kueue, the new slice's assignment includes the old slice's pods that keep running,
  whether or not the old Workload still exists: Kueue finishes it and may delete it at once
  (``objectRetentionPolicies``). Those pods carry the old slice's workload label, so the
  new slice records the labels of every slice whose pods it keeps (``kept_slices_value``,
  in ``KEPT_SLICES_ANNOTATION``, written with its assignment while the old one still
  exists); the capacity model, the ungater and the stray-pod rule read them back
  (``kept_slices``) once the old Workload is gone, and after a restart that never saw it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from kueue_tas.api import constants as c
from kueue_tas.api.workload import Workload
from kueue_tas.topology.assignment import TopologyAssignment
from kueue_tas.topology.codec.codec import decode_assignment_annotation
from kueue_tas.topology.features import FeatureGates

SliceRef = tuple[str | None, str]
"""(namespace, name) of a Workload."""

# Earlier slices named in a new slice's record of kept pods: a chain longer than this cannot
# happen in practice (one per scale-up), and the record must stay small.
MAX_KEPT_SLICES = 16


def replaced_slice_ref(wl: Workload, gates: FeatureGates) -> SliceRef | None:
    """The slice ``wl``'s annotation says it replaces, when the elastic gates apply; None otherwise."""
    if not gates.elastic_tas:
        return None
    target = wl.metadata.annotations.get(c.KUEUE_SLICE_REPLACEMENT_ANNOTATION)
    if target is None:
        return None
    prefix, _, name = target.rpartition("/")
    namespace = prefix or wl.metadata.namespace
    if not name or namespace != wl.metadata.namespace:
        return None
    return (namespace, name)


def replaced_slice(
    wl: Workload,
    find: Callable[[SliceRef], Workload | None],
    trusted: Callable[[Workload], bool],
    gates: FeatureGates,
) -> Workload | None:
    """The admitted slice that ``wl`` (not admitted yet) replaces; None for an ordinary placement.

    ``find`` looks a Workload up by (namespace, name); ``trusted`` says whether our check
    holds a Workload's assignment (``kueue_tas.capacity.rules.assignment_trusted``).
    """
    ref = replaced_slice_ref(wl, gates)
    if ref is None or trusted(wl):
        return None
    old = find(ref)
    if old is None or old is wl or not trusted(old):
        return None
    return old


def kept_slice_labels(wl: Workload) -> tuple[str, ...]:
    """The workload labels ``KEPT_SLICES_ANNOTATION`` names on ``wl`` (newest first), as written."""
    raw = wl.metadata.annotations.get(c.KEPT_SLICES_ANNOTATION) or ""
    labels = [part.strip() for part in raw.split(",")]
    return tuple(dict.fromkeys(label for label in labels if label))[:MAX_KEPT_SLICES]


def kept_slices(wl: Workload, identity: str, gates: FeatureGates) -> tuple[str, ...]:
    """The workload labels of the earlier slices whose running pods ``wl``'s assignment includes:
    only for a Workload that replaces a slice under the elastic gates (the record means nothing
    otherwise), never ``wl``'s own label ``identity``."""
    if replaced_slice_ref(wl, gates) is None:
        return ()
    return tuple(label for label in kept_slice_labels(wl) if label != identity)


def kept_slices_value(old: Workload, old_identity: str, gates: FeatureGates) -> str:
    """What the slice replacing ``old`` (whose workload label is ``old_identity``) records: ``old``
    first, then the slices ``old`` itself kept pods of."""
    labels = dict.fromkeys((old_identity, *kept_slices(old, old_identity, gates)))
    return ",".join(list(labels)[:MAX_KEPT_SLICES])


def slice_current(old: Workload) -> dict[str, TopologyAssignment]:
    """The replaced slice's assignments by PodSet name: the engine's ``current``.

    Raises ``AssignmentFormatError`` when its assignment annotation does not decode."""
    return dict(decode_assignment_annotation(old.metadata.annotations[c.TOPOLOGY_ASSIGNMENT_ANNOTATION]))


def place_options(
    current: Mapping[str, TopologyAssignment],
    podsets: Iterable[str],
    *,
    unhealthy_nodes: tuple[str, ...] = (),
    elastic: bool = False,
) -> dict[str, Any]:
    """The ``current`` / ``unhealthy_nodes`` / ``elastic`` arguments of ``TopologySnapshot.place``
    for one engine call placing ``podsets``: ``current`` narrowed to those PodSets."""
    names = set(podsets)
    return {
        "current": {name: a for name, a in current.items() if name in names},
        "unhealthy_nodes": unhealthy_nodes,
        "elastic": elastic,
    }
