"""Random block > rack > host clusters of one-CPU pods and their topology snapshot."""

from __future__ import annotations

from hypothesis import strategies as st

from kueue_tas.topology.engine.snapshot import TopologySnapshot
from kueue_tas.topology.model import HOSTNAME_LABEL, NodeInfo

BLOCK, RACK, HOST = "block", "rack", HOSTNAME_LABEL
LEVELS = (BLOCK, RACK, HOST)
Path = tuple[str, str, str]  # (block, rack, host)


@st.composite
def clusters(draw: st.DrawFn) -> dict[Path, int]:
    """Host path -> how many one-CPU pods the host holds."""
    out: dict[Path, int] = {}
    for b in range(draw(st.integers(1, 3))):
        for r in range(draw(st.integers(1, 3))):
            for h in range(draw(st.integers(1, 3))):
                out[(f"b{b}", f"b{b}-r{r}", f"b{b}-r{r}-h{h}")] = draw(st.integers(0, 5))
    return out


def snapshot(cluster: dict[Path, int]) -> TopologySnapshot:
    nodes = [
        NodeInfo(p[2], dict(zip(LEVELS, p, strict=True)), {"cpu": pods * 1000, "pods": 110})
        for p, pods in cluster.items()
    ]
    return TopologySnapshot.build(topology_name="t", levels=LEVELS, nodes=nodes)
