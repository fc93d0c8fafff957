"""Which nodes under an admitted workload have failed: the detection rule, pure.

A node named by a PodSet's hostname-level assignment (by its ``kubernetes.io/hostname`` label,
resolved to the Node through ``hostnames.NodeHosts``: the label need not be the Node's name) has
failed for that workload when it is

* deleted (no Node carries the hostname any more);
* one of several Nodes carrying the hostname (``hostnames``: a value two Nodes carry names
  neither, so none of its capacity is offered and no pod is released there); the failure names
  them;
* missing a label the placement relies on: a topology level, or one of the flavor's node labels
  (it has left the domain, or the flavor, it was placed in);
* unschedulable (cordoned: it is being drained, or taken out of service);
* tainted ``NoExecute`` by a taint some PodSet on it does not tolerate (its pods are evicted); the
  node lifecycle controller's own ``not-ready`` / ``unreachable`` taints are the NotReady signal
  and are judged by the grace below, not here (pods tolerate them for 300 s by default);
* NotReady or Unknown for at least ``grace`` seconds (Kueue's NodeFailureDelay, 30 s), or without
  a Ready condition at all (Kueue marks such a node failed at once).

A node that still exists and has a Ready condition is failed for a workload only once none of
the workload's pods bound to it is progressing (running or pending there, not being deleted):
Kueue's ``TASReplaceNodeOnPodTermination`` (on by default since Kueue 0.14). Moving the slots
of pods that still run would give their capacity twice and leave those pods stray; they move
once they go (the taint manager's eviction, a drain, a kubelet that stops them). Kueue's
``TASReplaceNodeDueToNotReadyOverFixedTime`` (off by default since 0.19) brings back the old
rule for NotReady nodes: failed after the grace, whatever its pods do. A deleted node, or one
without a Ready condition, fails at once, as in Kueue.

Only hostname-level assignments are judged: a coarser leaf domain survives the loss of one of its
nodes (the scheduler picks another node of the domain for the recreated pods), and Kueue too
replaces nodes only when the lowest level is the hostname.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Container, Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Final

from kueue_tas.api import constants as c
from kueue_tas.api.workload import Workload
from kueue_tas.capacity.hostnames import NodeHosts
from kueue_tas.capacity.rules import FlavorSpec
from kueue_tas.topology.assignment import TopologyAssignment
from kueue_tas.topology.engine import taint_string, tolerates
from kueue_tas.topology.model import NodeInfo, Toleration
from kueue_tas.topology.requests import tolerations

LIFECYCLE_TAINTS: Final = frozenset({"node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"})
NO_EXECUTE: Final = "NoExecute"


class FailureKind(StrEnum):
    DELETED = "Deleted"
    SHARED = "HostnameShared"
    LABEL_LOST = "LabelLost"
    UNSCHEDULABLE = "Unschedulable"
    TAINTED = "Tainted"
    NOT_READY = "NotReady"


@dataclass(frozen=True, slots=True)
class NodeFailure:
    node: str
    kind: FailureKind
    detail: str  # what a user reads after the node's name: "NotReady for 30s", "deleted", ...

    def __str__(self) -> str:
        return f"node {self.node} {self.detail}"


@dataclass(frozen=True, slots=True)
class PodSetHosts:
    """What the rule needs of one PodSet of an admitted workload."""

    podset: str
    hosts: tuple[str, ...]  # the hostname label values of its hostname-level assignment
    levels: tuple[str, ...]  # its flavor's topology levels
    flavor_labels: Mapping[str, str]
    tolerations: tuple[Toleration, ...]  # the pod template's and the flavor's


def _seconds(value: float) -> str:
    return f"{math.floor(value):d}s"


@dataclass(frozen=True, slots=True)
class PodTermination:
    """Kueue's gates on whether a node with progressing pods of the workload has failed."""

    on_pod_termination: bool = True  # TASReplaceNodeOnPodTermination
    not_ready_over_fixed_time: bool = False  # TASReplaceNodeDueToNotReadyOverFixedTime


def node_failure(
    name: str,
    node: NodeInfo | None,
    podsets: Iterable[PodSetHosts],
    not_ready_for: float | None,
    grace: float,
    *,
    progressing: bool = False,
    gates: PodTermination = PodTermination(),
) -> NodeFailure | None:
    """The failure of node ``name`` for the PodSets placed on it, or None while it serves them.

    ``not_ready_for``: seconds the node has been NotReady (None when Ready); ``progressing``:
    a pod of the workload is bound to it, neither finished nor being deleted."""
    failure = _failure(name, node, list(podsets), not_ready_for, grace)
    if failure is None or node is None or not node.ready_status or not progressing or not gates.on_pod_termination:
        return failure  # deleted, or without a Ready condition: failed at once, as in Kueue
    if gates.not_ready_over_fixed_time:
        return _not_ready(name, node, not_ready_for, grace)  # None: its pods still run there
    return None  # its pods still run there: they move once they go


def _failure(
    name: str, node: NodeInfo | None, podsets: list[PodSetHosts], not_ready_for: float | None, grace: float
) -> NodeFailure | None:
    """The failure, whatever the workload's pods on the node do."""
    if node is None:
        return NodeFailure(name, FailureKind.DELETED, "deleted")
    if not node.ready and not node.ready_status:
        return NodeFailure(name, FailureKind.NOT_READY, "has no Ready condition")
    for ps in podsets:
        for key in (*ps.levels, *ps.flavor_labels):
            want = ps.flavor_labels.get(key)
            if key not in node.labels or (want is not None and node.labels[key] != want):
                return NodeFailure(name, FailureKind.LABEL_LOST, f"lost label {key}")
    if node.unschedulable:
        return NodeFailure(name, FailureKind.UNSCHEDULABLE, "unschedulable")
    for taint in node.taints:
        if taint.effect != NO_EXECUTE or taint.key in LIFECYCLE_TAINTS:
            continue
        if any(not any(tolerates(t, taint) for t in ps.tolerations) for ps in podsets):
            return NodeFailure(name, FailureKind.TAINTED, f"tainted {taint_string(taint)}")
    return _not_ready(name, node, not_ready_for, grace)


def _not_ready(name: str, node: NodeInfo, not_ready_for: float | None, grace: float) -> NodeFailure | None:
    waited = not_ready_for or 0.0
    if node.ready or waited < grace:
        return None
    state = "Unknown" if node.ready_status == "Unknown" else "NotReady"
    return NodeFailure(name, FailureKind.NOT_READY, f"{state} for {_seconds(waited)}")


def grace_left(node: NodeInfo | None, not_ready_for: float | None, grace: float) -> float | None:
    """Seconds until a NotReady node's grace runs out (None: nothing to wait for)."""
    if node is None or node.ready or not node.ready_status:
        return None
    left = grace - (not_ready_for or 0.0)
    return left if left > 0 else None


def hostname_hosts(levels: tuple[str, ...], domains: Iterable[tuple[str, ...]]) -> tuple[str, ...]:
    """The hostname values of an assignment whose lowest level is the hostname (() otherwise)."""
    if not levels or levels[-1] != c.HOSTNAME_LABEL:
        return ()
    return tuple(dict.fromkeys(values[-1] for values in domains))


def failed_nodes(
    podsets: Iterable[PodSetHosts],
    hosts: NodeHosts,
    not_ready_for: Callable[[str], float | None],
    grace: float,
    *,
    progressing: Container[str] = (),
    gates: PodTermination = PodTermination(),
    spared: set[str] | None = None,
) -> tuple[dict[str, NodeFailure], float | None]:
    """(hostname -> failure, seconds until the next NotReady grace runs out) for one workload:
    every host of its PodSets at once. ``hosts`` turns a hostname into its Node;
    ``not_ready_for(node name)``; ``progressing``: the Node names with a progressing pod of it;
    ``spared`` receives the Node names that failed but for those pods (when they go, look again)."""
    by_host: dict[str, list[PodSetHosts]] = {}
    for ps in podsets:
        for host in ps.hosts:
            by_host.setdefault(host, []).append(ps)
    failures: dict[str, NodeFailure] = {}
    wait: float | None = None
    for host, on_it in by_host.items():
        shared = hosts.shared(host)
        if shared:
            busy = [name for name in shared if name in progressing]
            if busy and gates.on_pod_termination:
                if spared is not None:
                    spared.update(busy)
                continue  # its pods still run there: they move once they go
            nodes = ", ".join(shared)
            failures[host] = NodeFailure(host, FailureKind.SHARED, f"is the {c.HOSTNAME_LABEL} of Nodes {nodes}")
            continue
        info = hosts.node(host)
        name = info.name if info is not None else host
        since = not_ready_for(name) if info is not None else None
        busy_here = info is not None and info.name in progressing
        failure = node_failure(host, info, on_it, since, grace, progressing=busy_here, gates=gates)
        if failure is not None:
            failures[host] = failure
            continue
        if spared is not None and busy_here and _failure(host, info, on_it, since, grace) is not None:
            spared.add(name)
        left = grace_left(info, since, grace)
        if left is not None:
            wait = left if wait is None else min(wait, left)
    return failures, wait


def describe_failures(failures: Iterable[NodeFailure]) -> str:
    """``node x3 NotReady for 30s`` or ``nodes x3 NotReady for 30s, x5 deleted``."""
    items = sorted(failures, key=lambda f: f.node)
    if len(items) == 1:
        return str(items[0])
    return "nodes " + ", ".join(f"{f.node} {f.detail}" for f in items)


def podset_hosts(
    wl: Workload, current: Mapping[str, TopologyAssignment], specs: Mapping[str, FlavorSpec]
) -> list[PodSetHosts]:
    """The hostname-level PodSets of ``current`` on a flavor of ``specs`` (their first such flavor)."""
    out = []
    for name, assignment in current.items():
        ps, psa = wl.pod_set(name), wl.pod_set_assignment(name)
        if ps is None or psa is None:
            continue
        spec = next((specs[f] for f in dict.fromkeys(psa.flavors.values()) if f in specs), None)
        hosts = hostname_hosts(assignment.levels, (d.values for d in assignment.domains))
        if spec is None or not hosts:
            continue
        template_spec = ps.template.get("spec") or {}
        try:
            own = tolerations(template_spec.get("tolerations"))
        except ValueError:
            own = ()  # a malformed toleration tolerates nothing
        out.append(PodSetHosts(name, hosts, spec.levels, spec.node_labels, (*own, *spec.tolerations)))
    return out
