"""The slim stored form of pods.

A cluster of 100,000 pods cannot keep full pod dicts (tens of KiB each once
decoded). A ``SlimPod`` keeps only what the capacity model, the admission and the
ungater read, in ``__slots__``, with repeated strings interned and identical
node selectors and usage tuples shared between pods. A cached pod costs well
under 1 KiB (see ``benchmarks/informer.py``).

Requests come from ``kueue_tas.api.resources.pod_requests``; the TAS test is the workload
label or any of the topology annotations (``api.constants.TOPOLOGY_ANNOTATION_SUFFIXES``
under the prefix, as ``topology.requests.request.has_topology_annotation``). Both are applied to the
raw dict directly, without building the pydantic ``Pod`` model, which would cost more than
the rest of the event path together. This is the only decoding of a pod for capacity:
``kueue-tas plan`` slims the pods of its dump too, and ``kueue_tas.capacity.rules.pod_charge``
decides what a slim pod holds. (Nodes are kept as the engine's ``NodeInfo``: see
``controllers/informers.py``.)
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from typing import Any, Final

from kueue_tas.api import constants as c
from kueue_tas.api.resources import pod_requests

_intern = sys.intern

POD_COUNT: Final = "pods"
"""The engine's resource counting pods (``topology.model.PODS``)."""

Usage = tuple[tuple[str, int], ...]
"""Per-pod requests plus ``pods: 1``: ``(resource, amount)`` pairs sorted by resource name."""

Selector = tuple[tuple[str, str], ...]
"""A nodeSelector as sorted ``(key, value)`` pairs."""

# Shared-value tables. Pods of one PodSet have the same requests and nodeSelector, so
# these stay small; they are cleared if a pathological cluster makes them grow past the cap.
_TABLE_CAP: Final = 16_384
_usage_by_signature: dict[str, Usage] = {}
_usage_values: dict[Usage, Usage] = {}
_selectors: dict[Selector, Selector] = {}

_EMPTY_SELECTOR: Final[Selector] = ()


def _share(table: dict[Any, Any], value: Any) -> Any:
    shared = table.get(value)
    if shared is not None:
        return shared
    if len(table) >= _TABLE_CAP:
        table.clear()
    table[value] = value
    return value


def _usage(spec: Mapping[str, Any]) -> Usage:
    """Requests + ``pods: 1`` of a PodSpec, memoised on the request-relevant part of the spec."""
    containers = spec.get("containers") or ()
    init_containers = spec.get("initContainers")
    signature = repr(
        (
            [ctr.get("resources") for ctr in containers],
            [(ctr.get("resources"), ctr.get("restartPolicy")) for ctr in init_containers] if init_containers else None,
            spec.get("overhead"),
            spec.get("resources"),
        )
    )
    usage = _usage_by_signature.get(signature)
    if usage is None:
        requests = pod_requests(spec)
        requests[POD_COUNT] = 1
        usage = _share(_usage_values, tuple(sorted((_intern(name), amount) for name, amount in requests.items())))
        if len(_usage_by_signature) >= _TABLE_CAP:
            _usage_by_signature.clear()
        _usage_by_signature[signature] = usage
    return usage


def _selector(raw: Mapping[str, Any] | None) -> Selector:
    if not raw:
        return _EMPTY_SELECTOR
    pairs = tuple(sorted((_intern(str(k)), _intern(str(v))) for k, v in raw.items()))
    shared: Selector = _share(_selectors, pairs)
    return shared


def _index(value: str | None) -> int | None:
    if value is None:
        return None
    try:
        return int(value)
    except ValueError:
        return None


def _requests_topology(annotations: Mapping[str, str] | None, prefix: str) -> bool:
    """Any of the topology annotations under ``prefix`` (``has_topology_annotation``)."""
    if not annotations:
        return False
    return any(prefix + suffix in annotations for suffix in c.TOPOLOGY_ANNOTATION_SUFFIXES)


def _opt_intern(value: str | None) -> str | None:
    return None if value is None else _intern(value)


class SlimPod:
    """What the caches keep of a Pod.

    ``node_name`` is ``""`` while unbound. ``usage`` is requests plus ``pods: 1``
    whether or not the pod is bound; ``counts_on_node`` says whether it occupies
    its node now (bound and not terminal).
    Equality ignores ``resource_version`` (an update that changed nothing we keep
    compares equal).
    """

    __slots__ = (
        "completion_index",
        "daemonset",
        "gated",
        "is_tas",
        "job_index",
        "kueue_podset",
        "name",
        "namespace",
        "node_name",
        "node_selector",
        "phase",
        "podset",
        "resource_version",
        "sub_groups",
        "terminating",
        "uid",
        "usage",
        "workload",
    )

    namespace: str
    name: str
    uid: str
    resource_version: str
    node_name: str
    phase: str
    workload: str | None
    podset: str | None
    kueue_podset: str | None
    gated: bool
    terminating: bool
    node_selector: Selector
    completion_index: int | None
    job_index: int | None
    sub_groups: int | None
    is_tas: bool
    usage: Usage
    daemonset: str | None

    def __init__(
        self,
        *,
        namespace: str,
        name: str,
        uid: str = "",
        resource_version: str = "",
        node_name: str = "",
        phase: str = "",
        workload: str | None = None,
        podset: str | None = None,
        kueue_podset: str | None = None,
        gated: bool = False,
        terminating: bool = False,
        node_selector: Selector = _EMPTY_SELECTOR,
        completion_index: int | None = None,
        job_index: int | None = None,
        sub_groups: int | None = None,
        is_tas: bool = False,
        usage: Usage = (),
        daemonset: str | None = None,
    ) -> None:
        self.namespace = namespace
        self.name = name
        self.uid = uid
        self.resource_version = resource_version
        self.node_name = node_name
        self.phase = phase
        self.workload = workload
        self.podset = podset
        self.kueue_podset = kueue_podset
        self.gated = gated
        self.terminating = terminating
        self.node_selector = node_selector
        self.completion_index = completion_index
        self.job_index = job_index
        self.sub_groups = sub_groups
        self.is_tas = is_tas
        self.usage = usage
        self.daemonset = daemonset

    # --- derived views ----------------------------------------------------------------------

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def workload_key(self) -> str | None:
        """``namespace/workload`` from the ``kueue-tas.io/workload`` label, if any."""
        return None if self.workload is None else f"{self.namespace}/{self.workload}"

    @property
    def is_terminal(self) -> bool:
        return self.phase in c.TERMINAL_POD_PHASES

    @property
    def counts_on_node(self) -> bool:
        """Bound and not terminal: the pod holds its requests on ``node_name``."""
        return bool(self.node_name) and self.phase not in c.TERMINAL_POD_PHASES

    def usage_map(self) -> dict[str, int]:
        """``usage`` as a fresh dict (requests + ``pods: 1``)."""
        return dict(self.usage)

    def node_selector_map(self) -> dict[str, str]:
        return dict(self.node_selector)

    # --- value semantics --------------------------------------------------------------------

    def _fields(self) -> tuple[Any, ...]:
        return tuple(getattr(self, s) for s in self.__slots__ if s != "resource_version")

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, SlimPod):
            return NotImplemented
        return self._fields() == other._fields()

    __hash__ = None  # type: ignore[assignment]  # mutable-looking value object; not hashable

    def __repr__(self) -> str:
        fields = ", ".join(f"{s}={getattr(self, s)!r}" for s in self.__slots__)
        return f"SlimPod({fields})"


def make_pod_transform(
    prefix: str = c.DEFAULT_ANNOTATION_PREFIX, gate: str = c.SCHEDULING_GATE
) -> Callable[[Mapping[str, Any]], SlimPod]:
    """A transform for the pod informer; ``prefix`` is the topology annotation prefix and ``gate``
    our scheduling gate's name (the settings'; see ``slim_pod``)."""

    def transform(raw: Mapping[str, Any]) -> SlimPod:
        return slim_pod(raw, prefix=prefix, gate=gate)

    return transform


def _daemonset_owner(meta: Mapping[str, Any]) -> str | None:
    """The UID of the DaemonSet controlling a pod (Kubernetes allows one controller reference)."""
    for ref in meta.get("ownerReferences") or ():
        if isinstance(ref, Mapping) and ref.get("controller") is True:
            if ref.get("kind") == c.KIND_DAEMONSET and str(ref.get("apiVersion", "")) == c.APPS_API_VERSION:
                uid = ref.get("uid")
                return _intern(uid) if isinstance(uid, str) and uid else None
            return None
    return None


def slim_pod(
    raw: Mapping[str, Any], prefix: str = c.DEFAULT_ANNOTATION_PREFIX, gate: str = c.SCHEDULING_GATE
) -> SlimPod:
    """The slim form of a raw Pod dict (as decoded from the API). ``gated``: held by ``gate``, our
    scheduling gate as the ``scheduling_gate`` setting names it (another name is not ours)."""
    meta: Mapping[str, Any] = raw.get("metadata") or {}
    spec: Mapping[str, Any] = raw.get("spec") or {}
    status: Mapping[str, Any] = raw.get("status") or {}
    labels: Mapping[str, str] = meta.get("labels") or {}
    workload = labels.get(c.WORKLOAD_LABEL)
    gates = spec.get("schedulingGates") or ()
    return SlimPod(
        namespace=_intern(meta.get("namespace") or ""),
        name=meta.get("name") or "",
        uid=meta.get("uid") or "",
        resource_version=meta.get("resourceVersion") or "",
        node_name=_intern(spec.get("nodeName") or ""),
        phase=_intern(status.get("phase") or ""),
        workload=_opt_intern(workload),
        podset=_opt_intern(labels.get(c.PODSET_LABEL)),
        kueue_podset=_opt_intern(labels.get(c.KUEUE_PODSET_LABEL)),
        gated=any(g.get("name") == gate for g in gates),
        terminating=meta.get("deletionTimestamp") is not None,
        node_selector=_selector(spec.get("nodeSelector")),
        completion_index=_index(labels.get(c.JOB_COMPLETION_INDEX_LABEL)),
        job_index=_index(labels.get(c.JOBSET_JOB_INDEX_LABEL)),
        # JobSet: how many Jobs the replicated job has (the PodSet's sub-groups, for rank order).
        sub_groups=_index(labels.get(c.JOBSET_REPLICATED_JOB_REPLICAS_LABEL)),
        # A kueue-tas pod (its Workload's assignment holds it): our workload label or a topology annotation.
        is_tas=workload is not None or _requests_topology(meta.get("annotations"), prefix),
        usage=_usage(spec),
        daemonset=_daemonset_owner(meta),
    )
