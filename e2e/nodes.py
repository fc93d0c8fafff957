"""Simulated kwok nodes from a small declarative description (blocks x racks x hosts)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from e2e.components import KWOK_NODE_ANNOTATION, KWOK_NODE_ANNOTATION_VALUE
from kueue_tas.api.constants import HOSTNAME_LABEL

BLOCK_LABEL = "cloud.provider.com/topology-block"
RACK_LABEL = "cloud.provider.com/topology-rack"
GPU = "nvidia.com/gpu"
# Every node made here carries this label, so tests and flavors can select "our" nodes.
POOL_LABEL = "e2e.kueue-tas.io/pool"


def default_allocatable() -> dict[str, str]:
    return {"cpu": "32", "memory": "256Gi", "pods": "110", GPU: "8"}


@dataclass(frozen=True)
class NodePool:
    """A regular block/rack/host layout of identical nodes.

    Hostnames are ``<name>-b<i>-r<j>-h<k>`` (1-based); the block label value is ``b<i>``, the rack
    label value ``b<i>-r<j>`` (unique across blocks). The ``kubernetes.io/hostname`` label is the
    hostname and the Node's name is the hostname followed by ``name_suffix``: "" (the label equals
    the name, as kwok and kind make them) or, as eksctl makes them, ``.ec2.internal`` (Node
    ``ip-10-0-0-1.ec2.internal`` labelled ``ip-10-0-0-1``; kops and ``--hostname-override`` differ
    the same way), so that nothing can look an assignment's hostname up as a Node name unseen.
    """

    name: str = "kwok"
    blocks: int = 1
    racks_per_block: int = 1
    hosts_per_rack: int = 1
    allocatable: dict[str, str] = field(default_factory=default_allocatable)
    labels: dict[str, str] = field(default_factory=dict)
    taints: tuple[dict[str, str], ...] = ()
    block_label: str = BLOCK_LABEL
    rack_label: str = RACK_LABEL
    name_suffix: str = ""

    @property
    def selector_value(self) -> str:
        """The value of the pool label on its nodes (``labels`` may put several pools under one)."""
        return self.labels.get(POOL_LABEL, self.name)

    @property
    def size(self) -> int:
        return self.blocks * self.racks_per_block * self.hosts_per_rack

    def level_labels(self) -> list[str]:
        """Topology levels, top-down, as node label keys."""
        return [self.block_label, self.rack_label, HOSTNAME_LABEL]

    def node_names(self) -> Iterator[str]:
        for obj in self.node_objects():
            yield obj["metadata"]["name"]

    def node_objects(self) -> list[dict[str, Any]]:
        out = []
        for b in range(1, self.blocks + 1):
            for r in range(1, self.racks_per_block + 1):
                for h in range(1, self.hosts_per_rack + 1):
                    out.append(self._node(b, r, h))
        return out

    def _node(self, b: int, r: int, h: int) -> dict[str, Any]:
        host = f"{self.name}-b{b}-r{r}-h{h}"
        name = host + self.name_suffix
        labels = {
            "type": "kwok",
            "kubernetes.io/os": "linux",
            "kubernetes.io/arch": "amd64",
            POOL_LABEL: self.name,
            self.block_label: f"b{b}",
            self.rack_label: f"b{b}-r{r}",
            HOSTNAME_LABEL: host,
            **self.labels,
        }
        return node_object(name, labels, self.allocatable, list(self.taints))


EKS_NAME_SUFFIX = ".ec2.internal"


def eks_pool(name: str, **layout: Any) -> NodePool:
    """A pool whose Node names differ from their hostname label, as on EKS (``NodePool.name_suffix``)."""
    return NodePool(name=name, name_suffix=EKS_NAME_SUFFIX, **layout)


def node_object(
    name: str, labels: dict[str, str], allocatable: dict[str, str], taints: list[dict[str, str]] | None = None
) -> dict[str, Any]:
    """A Node managed by kwok (annotation selector), with allocatable == capacity and no taints by default."""
    spec: dict[str, Any] = {}
    if taints:
        spec["taints"] = taints
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": dict(labels),
            "annotations": {KWOK_NODE_ANNOTATION: KWOK_NODE_ANNOTATION_VALUE, "node.alpha.kubernetes.io/ttl": "0"},
        },
        "spec": spec,
        "status": {"allocatable": dict(allocatable), "capacity": dict(allocatable)},
    }


def is_ready(node: dict[str, Any]) -> bool:
    for c in node.get("status", {}).get("conditions") or []:
        if c.get("type") == "Ready":
            return bool(c.get("status") == "True")
    return False
