"""The simulated clusters: block > rack > host, GPUs per host, and the capacity model built from them.

The model is the product's own ``LiveCapacity``: one flavor ``gpu`` on a Topology of the three
levels, one ``NodeInfo`` per host. Nothing here decides a placement.
"""

from __future__ import annotations

from dataclasses import dataclass

from kueue_tas.api.constants import HOSTNAME_LABEL
from kueue_tas.capacity.live import LiveCapacity
from kueue_tas.capacity.rules import FlavorSpec
from kueue_tas.topology.model import NodeInfo

# Kueue's default block and rack level keys (the demo cluster and the samples use them too).
BLOCK = "cloud.provider.com/topology-block"
RACK = "cloud.provider.com/topology-rack"
HOST = HOSTNAME_LABEL
LEVELS = (BLOCK, RACK, HOST)
GPU = "nvidia.com/gpu"
FLAVOR = "gpu"
# Room for every pod a host can take (the engine charges ``pods: 1`` per pod).
PODS_PER_HOST = 110


@dataclass(frozen=True, slots=True)
class Shape:
    name: str
    blocks: int
    racks_per_block: int
    hosts_per_rack: int
    gpus_per_host: int
    about: str

    @property
    def hosts(self) -> int:
        return self.blocks * self.racks_per_block * self.hosts_per_rack

    @property
    def gpus(self) -> int:
        return self.hosts * self.gpus_per_host

    @property
    def rack_gpus(self) -> int:
        return self.hosts_per_rack * self.gpus_per_host


SHAPES: dict[str, Shape] = {
    "A": Shape("A", 1, 10, 64, 8, "1 block x 10 racks x 64 hosts x 8 GPUs (5,120 GPUs)"),
    # kueue#10406's NVL72 cluster: 33 NVL72 racks of 18 nodes x 4 GPUs. It has no level above the
    # rack, so all 33 racks sit in one block (multi-rack jobs then need only enough whole hosts).
    "B": Shape("B", 1, 33, 18, 4, "NVL72 (kueue#10406): 1 block x 33 racks x 18 nodes x 4 GPUs (2,376 GPUs)"),
    "C": Shape("C", 16, 16, 8, 8, "16 blocks x 16 racks x 8 hosts x 8 GPUs (16,384 GPUs)"),
}


def host_name(block: int, rack: int, host: int) -> str:
    return f"b{block}-r{rack}-h{host}"


def build_capacity(shape: Shape) -> LiveCapacity:
    """The product's capacity model of ``shape``: empty, every host Ready."""
    capacity = LiveCapacity()
    capacity.set_flavors({FLAVOR: FlavorSpec(FLAVOR, "sim", LEVELS, {})})
    for b in range(shape.blocks):
        for r in range(shape.racks_per_block):
            for h in range(shape.hosts_per_rack):
                name = host_name(b, r, h)
                labels = {BLOCK: f"b{b}", RACK: f"b{b}-r{r}", HOST: name}
                capacity.upsert_node(NodeInfo(name, labels, {GPU: shape.gpus_per_host, "pods": PODS_PER_HOST}))
    return capacity
