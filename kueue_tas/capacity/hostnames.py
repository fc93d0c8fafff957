"""The one way from an assignment's hostname value to a Node: nodes by ``kubernetes.io/hostname``.

A hostname-level assignment (Kueue's and ours) names each domain by the value of its node's
``kubernetes.io/hostname`` label, and the ungater pins pods with a nodeSelector on that label.
That value need not be the Node's name: eksctl names a Node ``ip-10-0-0-1.ec2.internal`` and
labels it ``ip-10-0-0-1``, and so do kops and any kubelet started with ``--hostname-override``
(Kueue had the same defect: kubernetes-sigs/kueue#14304). ``pod.spec.nodeName`` and the node
informer's keys are Node names. So everything that turns an assignment value (or a pinned
pod's hostname nodeSelector) into a Node asks :class:`NodeHosts`, and nothing looks a hostname
value up as a Node name.

The rules, for a hostname value:

* carried by exactly one Node: it names that Node;
* carried by no Node: it names none (the node is gone, as far as placement is concerned);
* carried by several Nodes (a replaced machine whose old Node object lingers, a mistyped
  ``--hostname-override``): it names none of them, and :meth:`NodeHosts.shared` lists them.
  The scheduler may bind a pod pinned to that value on any of them, so no count we keep per
  hostname could say which Node holds what: no pod is released onto it, the live capacity model
  offers none of its capacity to new placements (``LiveCapacity``), and node repair reports it
  as failed, naming the Nodes, in the entry message and Event of each workload placed there
  (``node_health``). Capacity is never given twice; what the label's Nodes run stays charged
  on them.

A Node without the label is in no hostname domain: a hostname-level topology never counts it
(``topology.engine.tree.node_is_eligible`` wants a label for every level) and no assignment can name it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Final

from kueue_tas.api.constants import HOSTNAME_LABEL
from kueue_tas.topology.model import NodeInfo

HOSTNAME_INDEX: Final = "hostname"
"""The name of the node store's index by hostname label (``hostname_values``)."""


def hostname_values(node: NodeInfo) -> tuple[str, ...]:
    """The index function: the node's hostname label value (none when it has no label)."""
    value = node.labels.get(HOSTNAME_LABEL)
    return (value,) if value is not None else ()


def hostname_of(node: NodeInfo) -> str | None:
    """The value an assignment names ``node`` by (None: the node has no hostname label)."""
    return node.labels.get(HOSTNAME_LABEL)


def node_serves(node: NodeInfo | None) -> bool:
    """The node exists, is Ready and takes new pods: the ungater may release onto it and a
    repair may place onto it."""
    return node_serving_problem(node) is None


def node_serving_problem(node: NodeInfo | None) -> str | None:
    """Why the node takes no new pods now, in words that follow "node <name>" (None: it does)."""
    if node is None:
        return "does not exist"
    if node.unschedulable:
        return "is cordoned (spec.unschedulable)"
    if not node.ready:
        return "is NotReady"
    return None


class NodeHosts:
    """Nodes by hostname label value, read from ``carriers`` (the node store's index, or a
    table built by :meth:`of` from a list of nodes)."""

    def __init__(self, carriers: Callable[[str], Sequence[NodeInfo]]) -> None:
        self._carriers = carriers

    @classmethod
    def of(cls, nodes: Iterable[NodeInfo]) -> NodeHosts:
        """The index of a fixed set of nodes (``describe``, ``capacity``, the map)."""
        table: dict[str, list[NodeInfo]] = {}
        for node in nodes:
            for value in hostname_values(node):
                table.setdefault(value, []).append(node)
        return cls(lambda host: table.get(host, ()))

    def carriers(self, host: str) -> list[NodeInfo]:
        """Every Node whose hostname label is ``host``, by name."""
        return sorted(self._carriers(host), key=lambda n: n.name)

    def node(self, host: str) -> NodeInfo | None:
        """The Node ``host`` names: the only one carrying it (None when none or several do)."""
        found = self._carriers(host)
        return found[0] if len(found) == 1 else None

    def shared(self, host: str) -> tuple[str, ...]:
        """The names of the Nodes that carry ``host`` when more than one does (else ())."""
        found = self._carriers(host)
        return tuple(sorted(n.name for n in found)) if len(found) > 1 else ()

    def serves(self, host: str) -> bool:
        """A pod pinned to ``host`` can be released now: one Node carries it and serves."""
        return self.problem(host) is None

    def problem(self, host: str) -> str | None:
        """Why no pod pinned to ``host`` can be released now, in words that follow "node <host>"
        (None: one Node carries it and serves)."""
        shared = self.shared(host)
        if shared:
            return f"is the {HOSTNAME_LABEL} of several Nodes ({', '.join(shared)})"
        return node_serving_problem(self.node(host))


def unambiguous(nodes: Iterable[NodeInfo]) -> list[NodeInfo]:
    """``nodes`` without those whose hostname label another of them carries too: what a
    hostname-level topology may place onto (see the module doc)."""
    listed = list(nodes)
    seen: dict[str, int] = {}
    for node in listed:
        for value in hostname_values(node):
            seen[value] = seen.get(value, 0) + 1
    return [n for n in listed if all(seen[v] == 1 for v in hostname_values(n))]
