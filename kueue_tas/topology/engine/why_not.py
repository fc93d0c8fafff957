"""Why a PodSet does not fit, as plain data: the numbers behind Kueue's "does not fit" text.

The engine fills a ``WhyNot`` at the very place it writes ``not_fit_message`` (``placement``
and ``general``), from the same counts, so the two can never disagree: ``WhyNot.message()``
renders the engine's own text again. It adds what the text leaves out: the level searched
last and its best domain (the most slices fitting, name order on ties) with what fits there.

``fit`` is the text's figure: for a request that needs one domain of its level (required)
it is what the best domain holds; for one that may spread (preferred, unconstrained) it is
what the whole level holds together, and ``one_domain`` is False.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from kueue_tas.topology.messages import ExclusionStats, not_fit_message

if TYPE_CHECKING:
    from kueue_tas.topology.engine.tree import IntArray, TopologyTree


@dataclass(frozen=True, slots=True)
class Exclusions:
    """Nodes (leaves) no pod of the PodSet could use, per reason, as the engine counted them."""

    total_nodes: int
    resources: tuple[tuple[str, int], ...] = ()  # (resource, nodes short of it), "pods" included
    taints: tuple[tuple[str, int], ...] = ()  # ("key=value:Effect", nodes)
    node_selector: int = 0
    affinity: int = 0
    topology_domain: int = 0  # outside the one domain a constraint allows

    @classmethod
    def of(cls, stats: ExclusionStats) -> Exclusions:
        return cls(
            stats.total_nodes,
            tuple(stats.resources.items()),
            tuple(stats.taints.items()),
            stats.node_selector,
            stats.affinity,
            stats.topology_domain,
        )

    def stats(self) -> ExclusionStats:
        return ExclusionStats(
            self.total_nodes,
            self.node_selector,
            self.affinity,
            self.topology_domain,
            dict(self.taints),
            dict(self.resources),
        )

    @property
    def excluded(self) -> int:
        return (
            sum(n for _, n in self.resources)
            + sum(n for _, n in self.taints)
            + self.node_selector
            + self.affinity
            + self.topology_domain
        )

    def reasons(self) -> tuple[tuple[str, int], ...]:
        """(reason, nodes) in a fixed order: resources, taints, nodeSelector, affinity, domain."""
        out = [(f"resource {name}", n) for name, n in self.resources]
        out += [(f"taint {taint}", n) for taint, n in self.taints]
        for reason, n in (
            ("nodeSelector", self.node_selector),
            ("affinity", self.affinity),
            ("topologyDomain", self.topology_domain),
        ):
            if n:
                out.append((reason, n))
        return tuple(out)


@dataclass(frozen=True, slots=True)
class WhyNot:
    topology: str
    level: str  # the label key of the level searched last
    domain: tuple[str, ...]  # the best domain there: its values from the top level down; () if none
    domain_fit: int  # slices fitting in that domain
    fit: int  # the failure text's figure
    needed: int  # slices needed
    slice_size: int
    one_domain: bool  # all slices must fit in one domain of ``level``
    exclusions: Exclusions

    @property
    def unit(self) -> str:
        return "pod" if self.slice_size == 1 else "slice"

    def message(self) -> str:
        """Kueue's failure text for these numbers (``messages.not_fit_message``)."""
        return not_fit_message(self.topology, self.fit, self.needed, self.slice_size, self.exclusions.stats())


def best_domain(slices: IntArray) -> int | None:
    """The index of the domain holding the most slices, the first (name order) on ties."""
    return int(np.argmax(slices)) if slices.size else None


def why_not(
    tree: TopologyTree,
    level: int,
    slices: IntArray,
    *,
    topology_name: str,
    fit: int,
    needed: int,
    slice_size: int,
    one_domain: bool,
    stats: ExclusionStats,
) -> WhyNot:
    """The data of a failure at ``level``, whose domains hold ``slices`` each."""
    best = best_domain(slices)
    values = tree.levels[level].values[best] if best is not None else ()
    return WhyNot(
        topology_name,
        tree.level_keys[level],
        values,
        int(slices[best]) if best is not None else 0,
        fit,
        needed,
        slice_size,
        one_domain,
        Exclusions.of(stats),
    )
