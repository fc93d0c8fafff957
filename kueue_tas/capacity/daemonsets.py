"""DaemonSet reservations: the capacity a DaemonSet's pods will take before they exist.

A node that has just joined, or a DaemonSet just created, will soon run a DaemonSet pod that
no informer has seen yet. Placing a TAS workload on that capacity first leaves its pods (or
the daemon's) Pending. So every node a DaemonSet would run a pod on holds that pod's requests
(a reservation) until the DaemonSet's own pod is charged on the node; from then on the pod's
ordinary charge (``rules.pod_charge``) holds them and the reservation is gone. Each
(DaemonSet, node) pair is therefore charged exactly once while the DaemonSet runs there.

Which nodes a DaemonSet runs on follows the DaemonSet controller of Kubernetes
(``NodeShouldRunDaemonPod`` in pkg/controller/daemon, with the tolerations
``AddOrUpdateDaemonPodTolerations`` adds to every daemon pod), as we read it:

* ``spec.template.spec.nodeName``, when set, names the only node;
* the template's nodeSelector and required node affinity must match the node;
* every NoSchedule and NoExecute taint of the node must be tolerated by the template's
  tolerations plus the controller's defaults (below).

Who may reserve (issue 30: anyone with the built-in ``edit`` role can create a DaemonSet, so a
reservation must not be a way for one tenant to take every node's capacity; Kueue's own TAS
counts only bound pods and has no such exposure). A pair holds a reservation only while all of:

* the DaemonSet is trusted by the ``ReservationPolicy``: in a namespace the admin lists
  (``daemonset_reservation_namespaces``) or with a pod priority class the admin lists
  (``daemonset_reservation_priority_classes``, none by default: Kubernetes lets any namespace use
  its two system classes unless a ResourceQuota forbids it, so a tenant could claim one);
* its pod fits on the empty node (no request above the node's allocatable): a pod that can never
  run there is never about to take anything;
* the pod has been due there for less than ``seconds`` (``daemonset_reservation_seconds``):
  counted from the later of the DaemonSet's and the Node's ``creationTimestamp`` (the race this
  closes is a DaemonSet or a node that has just arrived); a pod still unbound after that is kept
  out by something else, and the reservation lapses. Without either timestamp (a hand-written
  object in a ``plan`` dump) nothing bounds it. The rule is pure: callers pass ``now`` (epoch
  seconds); the live model re-evaluates each pair at the time it lapses.

Assumptions, stated because we work from our reading of Kubernetes rather than its code:
a DaemonSet being deleted (``deletionTimestamp`` set) creates no pods, so it reserves
nothing; a daemon pod that exists but is not yet bound (created with the node-name affinity
the controller sets, waiting for the scheduler) keeps the reservation, because it is not
charged anywhere until it is bound (keeping it is the side that never gives capacity away).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

import pydantic

from kueue_tas.api.object_base import parse_rfc3339
from kueue_tas.api.resources import pod_requests
from kueue_tas.topology.engine import InvalidSelectorError, affinity_matches, first_untolerated_taint, validate_term
from kueue_tas.topology.model import PODS, NodeInfo, NodeSelectorTerm, ResourceMap, Toleration
from kueue_tas.topology.requests import node_constraints, tolerations

Pair = tuple[str, str]
"""(DaemonSet UID, node name)."""

# The tolerations the DaemonSet controller adds to every daemon pod: a daemon keeps running
# through node conditions that would evict or keep out ordinary pods.
DEFAULT_TOLERATIONS: tuple[Toleration, ...] = (
    Toleration("node.kubernetes.io/not-ready", "Exists", "", "NoExecute"),
    Toleration("node.kubernetes.io/unreachable", "Exists", "", "NoExecute"),
    Toleration("node.kubernetes.io/disk-pressure", "Exists", "", "NoSchedule"),
    Toleration("node.kubernetes.io/memory-pressure", "Exists", "", "NoSchedule"),
    Toleration("node.kubernetes.io/pid-pressure", "Exists", "", "NoSchedule"),
    Toleration("node.kubernetes.io/unschedulable", "Exists", "", "NoSchedule"),
)
# Added only for host-network daemons (they need no pod network to start).
HOST_NETWORK_TOLERATION = Toleration("node.kubernetes.io/network-unavailable", "Exists", "", "NoSchedule")

# The settings' defaults (``runtime/config.py`` repeats them; a test keeps the two equal):
# kube-system holds the cluster's own daemons (CNI, kube-proxy, CSI node plugins, the device
# plugins cloud providers install); gpu-operator is where NVIDIA's GPU operator installs its
# driver, toolkit and device-plugin DaemonSets by default. Other system daemons (Calico, Cilium)
# run with a system priority class. 300 s: daemon pods are bound within seconds of a DaemonSet
# or a node arriving; one still unbound minutes later is not about to run.
DEFAULT_NAMESPACES: tuple[str, ...] = ("kube-system", "gpu-operator")
SYSTEM_PRIORITY_CLASSES: tuple[str, ...] = ("system-node-critical", "system-cluster-critical")
DEFAULT_SECONDS = 300.0


class ReservationSettings(Protocol):
    """The settings ``ReservationPolicy.from_settings`` reads (``runtime.config.Settings``)."""

    @property
    def daemonset_reservation_namespaces(self) -> tuple[str, ...]: ...
    @property
    def daemonset_reservation_priority_classes(self) -> tuple[str, ...]: ...
    @property
    def daemonset_reservation_seconds(self) -> float: ...


@dataclass(frozen=True, slots=True)
class ReservationPolicy:
    """Which DaemonSets may reserve, and for how long once their pod is due on a node."""

    namespaces: frozenset[str] = frozenset(DEFAULT_NAMESPACES)
    priority_classes: frozenset[str] = frozenset()
    seconds: float = DEFAULT_SECONDS

    @classmethod
    def from_settings(cls, settings: ReservationSettings) -> ReservationPolicy:
        return cls(
            frozenset(settings.daemonset_reservation_namespaces),
            frozenset(settings.daemonset_reservation_priority_classes),
            settings.daemonset_reservation_seconds,
        )

    def trusts(self, ds: DaemonSetSpec) -> bool:
        return ds.namespace in self.namespaces or (
            bool(ds.priority_class) and ds.priority_class in self.priority_classes
        )


DEFAULT_POLICY = ReservationPolicy()


class DaemonSetError(ValueError):
    """A DaemonSet whose pod template cannot be read: ``field`` names the field, ``problem`` says why."""

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"{field}: {problem}")
        self.field = field
        self.problem = problem


@dataclass(frozen=True, slots=True)
class DaemonSetSpec:
    """What a DaemonSet's pod would be, as far as placing it and charging it go."""

    key: str  # namespace/name, for messages
    uid: str  # what its pods' ownerReferences name; namespace/name for a hand-written one without a UID
    namespace: str
    priority_class: str  # the template's priorityClassName ("" when none)
    created: float | None  # creationTimestamp, epoch seconds; None when the object has none
    node_name: str  # template spec.nodeName; "" for any node
    node_selector: Mapping[str, str]
    required_affinity: tuple[NodeSelectorTerm, ...] | None  # None: no required node affinity
    tolerations: tuple[Toleration, ...]  # the template's plus the controller's defaults
    usage: ResourceMap  # the pod's requests plus ``pods: 1``


def daemonset_spec(raw: Mapping[str, Any]) -> DaemonSetSpec | None:
    """The spec of a raw DaemonSet dict; None for one being deleted (it creates no pods).

    Raises ``DaemonSetError`` naming the template field that is malformed.
    """
    meta = raw.get("metadata") or {}
    if meta.get("deletionTimestamp"):
        return None
    template = _mapping(_mapping(raw, "spec", "spec"), "template", "spec.template")
    pod_spec = _mapping(template, "spec", "spec.template.spec")
    try:
        usage = dict(pod_requests(pod_spec))
    except (ValueError, TypeError, AttributeError) as exc:  # QuantityError is a ValueError
        raise DaemonSetError("spec.template.spec.containers[].resources", str(exc)) from exc
    usage[PODS] = 1
    _mapping(pod_spec, "nodeSelector", "spec.template.spec.nodeSelector")
    try:
        selector, required = node_constraints(pod_spec)
        for term in required or ():
            validate_term(term)
    except (InvalidSelectorError, AttributeError, TypeError) as exc:
        raise DaemonSetError("spec.template.spec.affinity.nodeAffinity", str(exc)) from exc
    try:
        own = tolerations(pod_spec.get("tolerations"))
    except pydantic.ValidationError as exc:
        raise DaemonSetError("spec.template.spec.tolerations", exc.errors()[0]["msg"]) from exc
    defaults = DEFAULT_TOLERATIONS + ((HOST_NETWORK_TOLERATION,) if pod_spec.get("hostNetwork") is True else ())
    key = f"{meta.get('namespace') or ''}/{meta.get('name') or ''}"
    created = meta.get("creationTimestamp")
    if created is not None and parse_time(created) is None:
        raise DaemonSetError("metadata.creationTimestamp", f"not an RFC 3339 time: {created!r}")
    return DaemonSetSpec(
        key=key,
        uid=str(meta.get("uid") or key),
        namespace=str(meta.get("namespace") or ""),
        priority_class=str(pod_spec.get("priorityClassName") or ""),
        created=None if created is None else parse_time(created),
        node_name=str(pod_spec.get("nodeName") or ""),
        node_selector=selector,
        required_affinity=required,
        tolerations=own + defaults,
        usage=usage,
    )


def _mapping(parent: Mapping[str, Any], key: str, field: str) -> Mapping[str, Any]:
    value = parent.get(key) or {}
    if not isinstance(value, Mapping):
        raise DaemonSetError(field, f"must be a mapping, got {type(value).__name__}")
    return value


def parse_time(value: object) -> float | None:
    """An RFC 3339 time (``2026-01-01T00:00:00Z``) in epoch seconds; None if it is not one."""
    if isinstance(value, datetime):
        return value.timestamp()
    if not isinstance(value, str):
        return None
    try:
        return parse_rfc3339(value).timestamp()
    except ValueError:
        return None


def too_big(usage: ResourceMap, node: NodeInfo) -> str | None:
    """The first resource (by name) the pod requests beyond the empty node's allocatable; None
    when it fits."""
    for name in sorted(usage):
        if usage[name] > node.allocatable.get(name, 0):
            return name
    return None


@dataclass(frozen=True, slots=True)
class Reservation:
    """What one DaemonSet holds on one node, and from when until when (epoch seconds; None:
    unknown since / no end)."""

    uid: str
    daemonset: str  # namespace/name
    node: str
    usage: ResourceMap
    since: float | None
    until: float | None


def runs_on(ds: DaemonSetSpec, node: NodeInfo) -> bool:
    """Whether the DaemonSet controller would run ``ds``'s pod on ``node``."""
    if ds.node_name and ds.node_name != node.name:
        return False
    if any(node.labels.get(k) != v for k, v in ds.node_selector.items()):
        return False
    if ds.required_affinity is not None and not affinity_matches(ds.required_affinity, node):
        return False
    return first_untolerated_taint(node.taints, ds.tolerations) is None


class DaemonSetReservations:
    """Which (DaemonSet, node) pairs hold a reservation, kept current object by object.

    Fed DaemonSets, nodes and, for every pod, the node its DaemonSet's pod is charged on
    (``set_pod``). Each change returns the pairs whose reservation may have changed; the
    caller reads them back with ``reservation``. Any order of events gives the same result as
    feeding the final objects (the order the informers sync in does not matter).
    """

    def __init__(self, policy: ReservationPolicy = DEFAULT_POLICY) -> None:
        self.policy = policy
        self._sets: dict[str, DaemonSetSpec] = {}  # uid -> spec
        self._nodes: dict[str, NodeInfo] = {}
        self._runs: dict[str, set[str]] = {}  # uid -> nodes it runs on
        self._pods: dict[str, Pair] = {}  # pod key -> the pair its charge covers
        self._covered: Counter[Pair] = Counter()  # pair -> pods of that DaemonSet charged on that node

    def set_daemonset(self, ds: DaemonSetSpec) -> set[Pair]:
        before = self._runs.get(ds.uid, set())
        self._sets[ds.uid] = ds
        # One the policy does not trust holds nothing anywhere, so where it runs is not worked
        # out: matching every node on each event of a tenant's DaemonSet cost the loop 40 ms at
        # 10,000 nodes (issue 30 review).
        trusted = self.policy.trusts(ds)
        now = {name for name, node in self._nodes.items() if runs_on(ds, node)} if trusted else set()
        self._runs[ds.uid] = now
        return {(ds.uid, name) for name in before | now}

    def delete_daemonset(self, uid: str) -> set[Pair]:
        self._sets.pop(uid, None)
        return {(uid, name) for name in self._runs.pop(uid, set())}

    def set_node(self, node: NodeInfo) -> set[Pair]:
        self._nodes[node.name] = node
        changed = set()
        for uid, ds in self._sets.items():
            if not self.policy.trusts(ds):
                continue  # runs nowhere as far as reservations go (set_daemonset)
            runs = self._runs[uid]
            ran = node.name in runs
            if runs_on(ds, node) != ran:
                runs.symmetric_difference_update((node.name,))
            # Where it runs, the node's allocatable and creation time decide too (fits, bound).
            if ran or node.name in runs:
                changed.add((uid, node.name))
        return changed

    def delete_node(self, name: str) -> set[Pair]:
        self._nodes.pop(name, None)
        changed = set()
        for uid, runs in self._runs.items():
            if name in runs:
                runs.discard(name)
                changed.add((uid, name))
        return changed

    def set_pod(self, key: str, daemonset: str | None, charged_on: str | None) -> set[Pair]:
        """A pod changed: ``daemonset`` is the UID of the DaemonSet controlling it (None for other
        pods), ``charged_on`` the node its ordinary charge holds (None when it holds none)."""
        pair = None if daemonset is None or charged_on is None else (daemonset, charged_on)
        old = self._pods.get(key)
        if old == pair:
            return set()
        changed = self.delete_pod(key)
        if pair is not None:
            self._pods[key] = pair
            self._covered[pair] += 1
            changed.add(pair)
        return changed

    def delete_pod(self, key: str) -> set[Pair]:
        old = self._pods.pop(key, None)
        if old is None:
            return set()
        self._covered[old] -= 1
        if self._covered[old] <= 0:
            del self._covered[old]
        return {old}

    def held(self, pair: Pair, now: float) -> Reservation | None:
        """The reservation ``pair`` holds at ``now``: its DaemonSet's pod, while the DaemonSet runs
        on the node, none of its pods is charged there, and the policy lets it (trusted, fits on
        the empty node, not lapsed); None otherwise."""
        uid, name = pair
        ds = self._sets.get(uid)
        if ds is None or name not in self._runs[uid] or self._covered[pair] > 0 or not self.policy.trusts(ds):
            return None
        if self.policy.seconds <= 0:
            return None  # reservations turned off
        node = self._nodes[name]
        if too_big(ds.usage, node) is not None:
            return None
        known = [t for t in (ds.created, parse_time(node.created)) if t is not None]
        since = max(known) if known else None
        until = None if since is None else since + self.policy.seconds
        if until is not None and now >= until:
            return None
        return Reservation(uid, ds.key, name, ds.usage, since, until)

    def reservation(self, pair: Pair, now: float) -> ResourceMap | None:
        """The usage ``pair`` reserves at ``now`` (``held``); None when it holds none."""
        held = self.held(pair, now)
        return None if held is None else held.usage

    def reservations(self, now: float) -> dict[Pair, ResourceMap]:
        """Every pair that holds a reservation at ``now``."""
        out = {}
        for uid, nodes in self._runs.items():
            for node in nodes:
                usage = self.reservation((uid, node), now)
                if usage is not None:
                    out[(uid, node)] = usage
        return out
