"""Topology-driven preemption's question: which admitted workloads, gone, would let this one fit?

Kueue preempts for quota only; a workload that holds quota but finds no domain waits while
lower-priority workloads keep the racks it needs. ``find_preemption`` answers, as data, which
victims would clear a domain for it, through the one placement pipeline ("as if these
workloads were gone", ``place_workload(without=...)``), so the answer is the engine's.

The domain is looked for at the workload's required level (the workload-wide one first, else
the coarsest a PodSet requires); with only a preferred level, at that level and then each
level above it; with neither, at the top level. Victims come only from ``candidates`` (the
caller has applied the ClusterQueue's policy and kept strictly lower priorities), and only
those holding usage in the domain can help it.

The cost order, cheapest first (issue 31; the prototype lost ten times more GPU-hours with
victim count alone):

1. the highest priority among the victims (a set of priority-0 workloads beats any set
   touching priority 5);
2. the work lost: the sum of the victims' ``work`` (their GPUs times how long they have run);
3. the number of victims.

For each domain the search is exact: by increasing priority threshold, the cheapest subset
(branch and bound over the candidates in the domain, each branch checked by a placement) that
lets the workload fit with at most ``max_victims`` victims. A search that would need more than
``budget`` placements keeps the best set found so far (``exact`` False): the first set the
search reaches is the greedy one (the costliest left out while room remains), found within a
placement per candidate. So one workload cannot make the event loop spin. Fitting is monotone in what is
removed (removing usage never takes capacity away), which is what makes the bounds sound.

Never: evict, write, or read a clock (``work`` comes computed); a workload whose PodSets span
several flavors gets no answer (``None``) rather than a partial one.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass

from kueue_tas.capacity.domain_usage import keys_by_domain
from kueue_tas.capacity.live import LiveCapacity
from kueue_tas.capacity.workload_placement import Domain, WorkloadPlacement, WorkloadRequests, place_workload
from kueue_tas.topology.engine import TopologySnapshot
from kueue_tas.topology.features import DEFAULT_GATES, FeatureGates

__all__ = ["Candidate", "Preemption", "find_preemption", "search_levels"]

DEFAULT_BUDGET = 512  # placements per search (a millisecond or a few each on a large cluster)


@dataclass(frozen=True, slots=True)
class Candidate:
    """An admitted workload that may be evicted for the preemptor: ``key`` as the capacity model
    holds it, its ``priority`` (Kueue's ``spec.priority``) and the ``work`` its eviction loses."""

    key: str
    priority: int
    work: float


@dataclass(frozen=True, slots=True)
class Preemption:
    """Evicting ``victims`` lets the workload fit, with ``placement``, in ``domain``.
    ``exact``: the search finished within its budget (the set is the cheapest there is)."""

    domain: Domain
    victims: tuple[Candidate, ...]
    placement: WorkloadPlacement
    exact: bool = True

    @property
    def cost(self) -> tuple[int, float, int]:
        return cost_of(self.victims)


def cost_of(victims: Iterable[Candidate]) -> tuple[int, float, int]:
    """The cost order's key: (highest victim priority, work lost, victim count)."""
    chosen = list(victims)
    return (max((c.priority for c in chosen), default=-(2**31)), sum(c.work for c in chosen), len(chosen))


def search_levels(requests: WorkloadRequests, levels: Sequence[str]) -> list[str]:
    """The levels a domain is looked for at, in order (see the module's note)."""
    order = {level: i for i, level in enumerate(levels)}
    scope = requests.scope
    if scope is not None and scope.required is not None:
        return [scope.required]
    required = [r.topology.required for _, r in requests.podsets if r.topology and r.topology.required]
    if required:
        return [min(required, key=lambda lv: order.get(lv, len(levels)))]
    preferred = [r.topology.preferred for _, r in requests.podsets if r.topology and r.topology.preferred]
    if scope is not None and scope.preferred is not None:
        preferred.append(scope.preferred)
    if preferred:
        start = min(order.get(lv, len(levels) - 1) for lv in preferred)
        return [levels[i] for i in range(min(start, len(levels) - 1), -1, -1)]
    return [levels[0]] if levels else []


def find_preemption(
    requests: WorkloadRequests,
    capacity: LiveCapacity,
    candidates: Iterable[Candidate],
    *,
    max_victims: int = 8,
    gates: FeatureGates = DEFAULT_GATES,
    budget: int = DEFAULT_BUDGET,
    closed: Collection[Domain] = (),
) -> Preemption | None:
    """The cheapest victims whose eviction lets ``requests`` fit, or None (nothing to gain: not
    even evicting every candidate of a domain, at most ``max_victims`` of them, makes room).
    ``closed``: domains held for others, which no placement here may use."""
    flavors = list(requests.by_flavor())
    if len(flavors) != 1 or max_victims < 1:
        return None
    flavor = flavors[0]
    snap = capacity.snapshot(flavor)
    if snap is None:
        return None
    held = [c for c in candidates if capacity.holds(c.key)]
    search = _Search(requests, capacity, gates, max_victims, budget, closed)
    for level in search_levels(requests, snap.levels):
        depth = snap.tree.level_index(level)
        if depth is None:
            continue
        by_domain = _candidates_by_domain(snap, capacity, held, flavor, depth)
        best: Preemption | None = None
        # Domains whose candidates are cheapest first: an early cheap answer bounds the rest.
        for values in sorted(by_domain, key=lambda v: (*_floor(by_domain[v]), v)):
            found = search.cheapest(by_domain[values], best.cost if best is not None else None)
            if found is None:
                continue
            victims, placement = found
            domain = _landed(snap, placement, depth, Domain(flavor, level, values))
            if best is None or cost_of(victims) < best.cost:
                best = Preemption(domain, victims, placement, exact=not search.cut)
        if best is not None:
            return Preemption(best.domain, best.victims, best.placement, exact=not search.cut)
    return None


class _Search:
    """Branch and bound over one domain's candidates, sharing one placement budget."""

    def __init__(
        self,
        requests: WorkloadRequests,
        capacity: LiveCapacity,
        gates: FeatureGates,
        max_victims: int,
        budget: int,
        closed: Collection[Domain],
    ) -> None:
        self.requests = requests
        self.closed = tuple(closed)
        self.capacity = capacity
        self.gates = gates
        self.max_victims = max_victims
        self.budget = budget
        self.cut = False  # a search ran out of budget
        self._fits: dict[frozenset[str], WorkloadPlacement | None] = {}

    def _placed(self, keys: frozenset[str]) -> WorkloadPlacement | None:
        if keys in self._fits:
            return self._fits[keys]
        if self.budget <= 0:
            self.cut = True
            return None
        self.budget -= 1
        placement = place_workload(
            self.requests, self.capacity, gates=self.gates, without=sorted(keys), closed=self.closed
        )
        self._fits[keys] = placement if placement.fits else None
        return self._fits[keys]

    def cheapest(
        self, pool: Sequence[Candidate], bound: tuple[int, float, int] | None
    ) -> tuple[tuple[Candidate, ...], WorkloadPlacement] | None:
        """The cheapest subset of ``pool`` that makes room (cheaper than ``bound``, when given)."""
        for threshold in sorted({c.priority for c in pool}):
            if bound is not None and threshold > bound[0]:
                return None
            eligible = [c for c in pool if c.priority <= threshold]
            if self._placed(frozenset(c.key for c in eligible)) is None:
                continue  # even all of them make no room at this priority: try the next one
            found = self._cheapest_within(eligible, bound if bound is not None and bound[0] == threshold else None)
            if found is not None:
                return found
            if bound is not None and bound[0] == threshold:
                return None  # nothing cheaper than the bound at its own priority
        return None

    def _cheapest_within(
        self, eligible: list[Candidate], bound: tuple[int, float, int] | None
    ) -> tuple[tuple[Candidate, ...], WorkloadPlacement] | None:
        # Costliest first: leaving one out early prunes the most work.
        order = sorted(eligible, key=lambda c: (-c.work, c.key))
        best: list[tuple[tuple[float, int], tuple[Candidate, ...]]] = []
        limit = (bound[1], bound[2]) if bound is not None else None

        def better(work: float, count: int) -> bool:
            top = best[0][0] if best else limit
            return top is None or (work, count) < top

        def visit(i: int, chosen: tuple[Candidate, ...], work: float) -> None:
            if not better(work, len(chosen)) or len(chosen) > self.max_victims:
                return
            # At the victim limit only what is chosen can go: it makes room or nothing does.
            rest = frozenset(c.key for c in (chosen if len(chosen) == self.max_victims else (*chosen, *order[i:])))
            if self._placed(rest) is None:
                return  # even everything still open makes no room (or the budget ran out)
            if i == len(order) or len(chosen) == self.max_victims:
                best[:] = [((work, len(chosen)), chosen)]
                return
            visit(i + 1, chosen, work)  # leave order[i] be
            c = order[i]
            visit(i + 1, (*chosen, c), work + c.work)

        visit(0, (), 0.0)
        if not best:
            return None
        victims = tuple(sorted(best[0][1], key=lambda c: (c.priority, c.work, c.key)))
        placement = self._fits[frozenset(c.key for c in victims)]
        assert placement is not None
        return victims, placement


def _floor(pool: Sequence[Candidate]) -> tuple[int, float]:
    return (min(c.priority for c in pool), sum(c.work for c in pool))


def _candidates_by_domain(
    snap: TopologySnapshot, capacity: LiveCapacity, held: Sequence[Candidate], flavor: str, depth: int
) -> dict[tuple[str, ...], list[Candidate]]:
    """Domain values at ``depth`` -> the candidates holding usage of ``flavor`` in it."""
    by_key = {c.key: c for c in held}
    return {v: [by_key[k] for k in keys] for v, keys in keys_by_domain(snap, capacity, by_key, flavor, depth).items()}


def _landed(snap: TopologySnapshot, placement: WorkloadPlacement, depth: int, searched: Domain) -> Domain:
    """The domain at ``depth`` holding most of the placement's pods (where it landed: evicting a
    candidate that spans two domains can open the other one)."""
    tree = snap.tree
    pods: dict[tuple[str, ...], int] = {}
    for assignment in placement.assignments().values():
        for d in assignment.domains:
            for leaf in tree.leaves_of(assignment.levels, d.values)[:1]:
                values = tree.leaves.values[leaf][: depth + 1]
                pods[values] = pods.get(values, 0) + d.count
    if not pods:
        return searched
    values = max(sorted(pods), key=lambda v: pods[v])
    return Domain(searched.flavor, searched.level, values)
