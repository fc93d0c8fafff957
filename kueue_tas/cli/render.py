"""Human-readable views: a placement as a tree of domains with pod counts and free capacity."""

from __future__ import annotations

from collections.abc import Sequence

from kueue_tas.cli.plan_scope import scope_line
from kueue_tas.cli.planner import Planner, PodSetPlan, PreemptionPlan, WorkloadPlan
from kueue_tas.topology.engine import TopologySnapshot

SHOWN_RESOURCES = ("nvidia.com/gpu", "cpu", "memory", "pods")


def format_amount(name: str, value: int) -> str:
    if name == "cpu":
        return f"{value / 1000:g}" if value % 1000 else str(value // 1000)
    if name == "memory" or name.startswith("hugepages-") or name == "ephemeral-storage":
        for unit, size in (("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10)):
            if abs(value) >= size:
                return f"{value / size:.3g}{unit}"
        return str(value)
    return str(value)


def format_free(free: dict[str, int]) -> str:
    names = [n for n in SHOWN_RESOURCES if n in free] + sorted(n for n in free if n not in SHOWN_RESOURCES)
    return ", ".join(f"{n}={format_amount(n, free[n])}" for n in names)


def domain_tree_lines(level_keys: Sequence[str], leaves: Sequence[tuple[tuple[str, ...], int, str]]) -> list[str]:
    """Leaf domains as an indented tree, in the order given: ``(full level values, pod count,
    text after the count)``. Each ancestor is printed once, before its first leaf, with the
    pods of all its leaves; ``plan`` and ``describe`` print assignments this way."""
    lines: list[str] = []
    printed: set[tuple[str, ...]] = set()
    for full, count, suffix in leaves:
        for depth in range(len(full) - 1):
            prefix = full[: depth + 1]
            if prefix in printed:
                continue
            printed.add(prefix)
            assigned = sum(n for values, n, _ in leaves if values[: depth + 1] == prefix)
            lines.append(f"{'  ' * (depth + 2)}{level_keys[depth]}={prefix[-1]}: {assigned} pod(s)")
        lines.append(f"{'  ' * (len(full) + 1)}{level_keys[-1]}={full[-1]}: {count} pod(s){suffix}")
    return lines


def _domain_tree(ps: PodSetPlan, snap: TopologySnapshot) -> list[str]:
    assert ps.assignment is not None
    tree = snap.tree
    leaves: list[tuple[tuple[str, ...], int, str]] = []
    for dom in ps.assignment.domains:
        leaf = tree.leaf_index_of(dom.values)
        full = tree.leaves.values[leaf] if leaf is not None else tuple(dom.values)
        free = snap.capacity.leaf_free(leaf) if leaf is not None else {}
        leaves.append((full, dom.count, f"   [free after plan: {format_free(free)}]"))
    return domain_tree_lines([snap.level_names.called(k) for k in tree.level_keys], leaves)


def preemption_line(p: PreemptionPlan) -> str:
    """One line: what topology-driven preemption would evict for the workload, and from where."""
    victims = ", ".join(f"{ns}/{name} (priority {prio})" for ns, name, prio in p.victims)
    where = f'{p.levels[-1]} "{p.values[-1]}"' if p.values else "the cluster"
    verb = "would evict" if p.mode == "Enabled" else "would evict (DryRun: reported only)"
    return f"  topology preemption {verb} {len(p.victims)} workload(s) of lower priority from {where}: {victims}"


def render_text(plans: list[WorkloadPlan], planner: Planner) -> str:
    out: list[str] = []
    for p in plans:
        ns = f"{p.namespace}/" if p.namespace else ""
        out.append(f"{p.kind} {ns}{p.name}: {'fits' if p.fits else 'DOES NOT FIT'}")
        if p.preemption is not None:
            out.append(preemption_line(p.preemption))
        placed = [ps for ps in p.podsets if ps.assignment is not None and ps.flavor is not None]
        if p.scope is not None and placed and p.fits:
            snap = planner.snapshot(placed[0].flavor or "", p.name)
            out.append(scope_line(p.scope, snap, [ps.assignment for ps in placed if ps.assignment is not None]))
        for ps in p.podsets:
            where = f"flavor={ps.flavor} topology={ps.topology}" if ps.governed else "not governed"
            if ps.required_preferred is not None:
                required, preferred = ps.required_preferred
                where += f" required={required} preferred={preferred}"
            out.append(f"  PodSet {ps.name} ({ps.count} pods, {where})")
            if ps.assignment is not None and ps.flavor is not None:
                snap = planner.snapshot(ps.flavor, ps.name)
                out.extend(_domain_tree(ps, snap))
            if ps.message:
                out.append(f"    {ps.message}")
    return "\n".join(out) + "\n"
