"""The vectorised fast path against a plain-loop reference of Kueue's algorithm.

The engine computes leaf counts resource by resource from cached rows, finds a single fitting
domain without sorting, sorts with radix keys, and builds the assignment in bulk. Here the
same placements are computed the slow, obvious way (dicts and sorted() over Python ints,
straight from the nodes and usage given), on random clusters with several resources, taints,
non-TAS and TAS usage, slices, two PodSets (the second sees the first's usage) and the
simulate-empty and allocatable-only probes: assignments and failure texts must be identical.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from hypothesis import given, settings
from hypothesis import strategies as st

from kueue_tas.topology.assignment import DomainAssignment, TopologyAssignment
from kueue_tas.topology.engine.results import PodSetResult
from kueue_tas.topology.engine.snapshot import TopologySnapshot
from kueue_tas.topology.messages import ExclusionStats, not_fit_message
from kueue_tas.topology.model import HOSTNAME_LABEL, PODS, NodeInfo, PodSetRequest, Taint, TopologyRequest

BLOCK, RACK = "block", "rack"
GPU = "example.com/gpu"
INT32_MAX = 2**31 - 1
Path = tuple[str, ...]
Placed = tuple[list[tuple[Path, int]] | None, str]  # (leaf path, pods) in order, or the failure text


@dataclass
class Cluster:
    levels: tuple[str, ...]
    nodes: list[NodeInfo]
    non_tas: list[tuple[str, dict[str, int]]]  # (node, usage incl. pods)
    tas: list[tuple[TopologyAssignment, dict[str, int]]]  # (admitted assignment, per pod)


@st.composite
def clusters(draw: st.DrawFn) -> Cluster:
    by_host = draw(st.booleans())  # hostname leaves (node filters apply) or rack leaves of several nodes
    levels = (BLOCK, RACK, HOSTNAME_LABEL) if by_host else (BLOCK, RACK)
    nodes: list[NodeInfo] = []
    non_tas: list[tuple[str, dict[str, int]]] = []
    for b in range(draw(st.integers(1, 3))):
        for r in range(draw(st.integers(1, 3))):
            for h in range(draw(st.integers(1, 4))):
                name = f"b{b}-r{r}-h{h}"
                labels = {BLOCK: f"b{b}", RACK: f"b{b}-r{r}", HOSTNAME_LABEL: name}
                alloc = {
                    "cpu": draw(st.integers(0, 8)) * 1000,
                    GPU: draw(st.integers(0, 4)),
                    PODS: draw(st.integers(1, 9)),
                }
                taints = (Taint(draw(st.sampled_from(["a", "b"])), draw(st.sampled_from(["", "x"]))),)
                nodes.append(NodeInfo(name, labels, alloc, taints if draw(st.integers(0, 5)) == 0 else ()))
                if draw(st.booleans()):
                    non_tas.append(
                        (name, {"cpu": draw(st.integers(0, 3)) * 1000, GPU: draw(st.integers(0, 2)), PODS: 1})
                    )
    tas: list[tuple[TopologyAssignment, dict[str, int]]] = []
    for _ in range(draw(st.integers(0, 3))):
        node = draw(st.sampled_from(nodes))
        values = tuple(node.labels[level] for level in levels)
        shown = (values[-1],) if by_host else values
        count = draw(st.integers(1, 3))
        tas.append(
            (TopologyAssignment(levels[-1:] if by_host else levels, (DomainAssignment(shown, count),)), {"cpu": 1000})
        )
    return Cluster(levels, nodes, non_tas, tas)


@st.composite
def podsets(draw: st.DrawFn, levels: tuple[str, ...], name: str) -> PodSetRequest:
    mode = draw(st.sampled_from(["required", "preferred", "unconstrained"]))
    level = draw(st.integers(0, len(levels) - 1))
    size, slice_level = 1, None
    if mode != "unconstrained" and draw(st.booleans()):
        size, slice_level = draw(st.integers(1, 3)), levels[draw(st.integers(level, len(levels) - 1))]
    topo = TopologyRequest(
        required=levels[level] if mode == "required" else None,
        preferred=levels[level] if mode == "preferred" else None,
        unconstrained=True if mode == "unconstrained" else None,
        slice_level=slice_level,
        slice_size=size if slice_level else None,
    )
    per_pod = {"cpu": draw(st.integers(0, 3)) * 500, GPU: draw(st.integers(0, 2))}
    count = size * draw(st.integers(1, 12))
    return PodSetRequest(name, count, {k: v for k, v in per_pod.items() if v}, topology=topo)


# ---- the reference: Kueue's algorithm over plain Python values ----


class Reference:
    def __init__(self, c: Cluster, simulate_empty: bool, allocatable_only: bool) -> None:
        self.levels = c.levels
        by_host = c.levels[-1] == HOSTNAME_LABEL
        path_of = {n.name: tuple(n.labels[level] for level in c.levels) for n in c.nodes}
        self.leaves: list[Path] = sorted(set(path_of.values()))
        index = {p: i for i, p in enumerate(self.leaves)}
        self.free: list[dict[str, int]] = [{} for _ in self.leaves]
        self.first: dict[int, NodeInfo] = {}
        for n in c.nodes:
            leaf = index[path_of[n.name]]
            self.first.setdefault(leaf, n)
            for r, v in n.allocatable.items():
                self.free[leaf][r] = self.free[leaf].get(r, 0) + v
        usage: list[tuple[int, dict[str, int]]] = []  # what is taken from the leaves' allocatable
        if not allocatable_only:
            usage += [(index[path_of[node]], u) for node, u in c.non_tas]
            if not simulate_empty:
                for ta, per_pod in c.tas:
                    for d in ta.domains:
                        leaf = next(i for i, p in enumerate(self.leaves) if p[-len(d.values) :] == d.values)
                        usage.append((leaf, {**{r: v * d.count for r, v in per_pod.items()}, PODS: d.count}))
        for leaf, amounts in usage:
            for r, v in amounts.items():
                self.free[leaf][r] = self.free[leaf].get(r, 0) - v
        self.by_host = by_host

    def domains(self, lvl: int) -> list[Path]:
        return sorted({leaf[: lvl + 1] for leaf in self.leaves})

    def place(self, ps: PodSetRequest) -> Placed:
        topo = ps.topology
        assert topo is not None
        request = {**ps.requests, PODS: 1}
        stats = ExclusionStats(total_nodes=len(self.leaves))
        fit: dict[Path, int] = {}
        for i, leaf in enumerate(self.leaves):
            node = self.first[i]
            if self.by_host and node.taints:
                t = node.taints[0]
                key = f"{t.key}={t.value}:{t.effect}" if t.value else f"{t.key}:{t.effect}"
                stats.taints[key] = stats.taints.get(key, 0) + 1
                fit[leaf] = 0
                continue
            per = {r: min(max(self.free[i].get(r, 0) // v, 0), INT32_MAX) for r, v in sorted(request.items()) if v}
            fit[leaf] = min(per.values())
            if fit[leaf] == 0:
                limiting = next(r for r, n in per.items() if n == 0)
                stats.resources[limiting] = stats.resources.get(limiting, 0) + 1
        depth = len(self.levels)
        size = topo.slice_size or 1
        slice_lvl = self.levels.index(topo.slice_level) if topo.slice_level else depth - 1
        pods = {
            d: sum(v for leaf, v in fit.items() if leaf[: len(d)] == d)
            for lvl in range(depth)
            for d in self.domains(lvl)
        }
        slices: dict[Path, int] = {}
        for lvl in range(depth - 1, -1, -1):
            for d in self.domains(lvl):
                if lvl == slice_lvl:
                    slices[d] = pods[d] // size
                elif lvl < slice_lvl:
                    slices[d] = sum(slices[k] for k in self.domains(lvl + 1) if k[:-1] == d)
                else:
                    slices[d] = 0
        lfc = bool(topo.unconstrained)
        best_fit = not lfc

        def ordered(doms: Sequence[Path]) -> list[Path]:
            return sorted(doms, key=lambda d: (slices[d] if lfc else -slices[d], pods[d], d))

        def tightest(doms: list[Path], caps: dict[Path, int], need: int) -> Path:
            return min((d for d in doms if caps[d] >= need), key=lambda d: caps[d])  # first on ties

        def walk(doms: list[Path], caps: dict[Path, int], need: int) -> list[tuple[Path, int]] | None:
            out, rem = [], need
            for i, d in enumerate(doms):
                if caps[d] >= rem:
                    return [*out, (tightest(doms[i:], caps, rem) if best_fit else d, rem)]
                out.append((d, caps[d]))
                rem -= caps[d]
            return None

        need = ps.count // size
        level = depth - 1 if lfc else self.levels.index(topo.required or topo.preferred or "")
        top = level if topo.required else 0
        while True:
            doms = ordered(self.domains(level))
            fitting = [d for d in doms if slices[d] >= need]
            if fitting:
                chosen = [fitting[0] if lfc else tightest(doms, slices, need)]
                break
            if level > top and not lfc:
                level -= 1
                continue
            if topo.required:
                return None, not_fit_message("t", slices[doms[0]], need, size, stats)
            taken = walk(doms, slices, need)
            if taken is None:
                return None, not_fit_message("t", sum(slices[d] for d in doms), need, size, stats)
            chosen = [d for d, _ in taken]
            break
        taken = walk(chosen, slices, need)
        assert taken is not None
        current = [(d, n * size) for d, n in taken]
        while level < min(depth - 1, slice_lvl):
            pool = ordered([k for k in self.domains(level + 1) if k[:-1] in {d for d, _ in current}])
            taken = walk(pool, slices, need)
            assert taken is not None
            current = [(d, n * size) for d, n in taken]
            level += 1
        while level < depth - 1:
            nxt: list[tuple[Path, int]] = []
            for d, share in current:
                kids = ordered([k for k in self.domains(level + 1) if k[:-1] == d])
                part = walk(kids, pods, share)
                assert part is not None
                nxt += part
            current = nxt
            level += 1
        return [(d, n) for d, n in sorted(current) if n > 0], ""

    def charge(self, placed: list[tuple[Path, int]], per_pod: dict[str, int]) -> None:
        for leaf, count in placed:
            i = self.leaves.index(leaf)
            for r, v in {**per_pod, PODS: 1}.items():
                self.free[i][r] = self.free[i].get(r, 0) - v * count


def engine_view(result: PodSetResult, ref: Reference) -> Placed:
    if result.assignment is None:
        return None, result.message
    return [
        (next(p for p in ref.leaves if p[-len(d.values) :] == d.values), d.count) for d in result.assignment.domains
    ], ""


@settings(max_examples=400, deadline=None)
@given(data=st.data(), cluster=clusters(), probe=st.sampled_from(["", "simulate_empty", "allocatable_only"]))
def test_fast_path_places_as_the_plain_loop_reference(data: st.DataObject, cluster: Cluster, probe: str) -> None:
    first = data.draw(podsets(cluster.levels, "first"))
    second = data.draw(podsets(cluster.levels, "second"))
    snap = TopologySnapshot.build(topology_name="t", levels=cluster.levels, nodes=cluster.nodes)
    for node, usage in cluster.non_tas:
        snap.add_non_tas_usage(node, usage)
    for ta, per_pod in cluster.tas:
        snap.add_tas_usage(ta, per_pod)
    results = snap.place(
        [first, second], simulate_empty=probe == "simulate_empty", allocatable_only=probe == "allocatable_only"
    )
    ref = Reference(cluster, probe == "simulate_empty", probe == "allocatable_only")
    want_first = ref.place(first)
    assert engine_view(results[0], ref) == want_first
    if want_first[0] is None:
        assert len(results) == 1  # nothing is placed after a failure
        return
    ref.charge(want_first[0], dict(first.requests))
    assert engine_view(results[1], ref) == ref.place(second)
