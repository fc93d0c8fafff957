"""Which gated pods go to which domain: the ungater's rules, pure.

Inputs are one PodSet's assignment and its live (non-terminal) pods; the
output is the gated pods to release now, each with the nodeSelector of its
domain. Two modes, as in Kueue's TopologyUngater:

* rank mode, when every pod carries a usable rank (Job completion index, and
  for JobSet also the job index): domains are expanded in assignment order into
  rank -> domain, so consecutive ranks land in the same or neighbouring domains
  and a replacement pod returns to the slot of the pod it replaces;
* greedy mode otherwise: already-released pods are counted per domain from
  their nodeSelector, and each domain receives gated pods up to its count.

Never more than a domain's count: pods still awaiting an earlier release
(``in_flight``, kept by :class:`Expectations`) are counted as already placed in the
domain they were sent to, and so are pods still leaving their domain (``holding``:
bound, Terminating, not finished: they run until they are gone, so a replacement is
released only once its slot is really free).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from kueue_tas.topology.assignment import TopologyAssignment


@dataclass(frozen=True, slots=True)
class PodView:
    uid: str
    name: str
    gated: bool
    node_selector: Mapping[str, str] = field(default_factory=dict)
    completion_index: int | None = None
    job_index: int | None = None
    created: str = ""  # creationTimestamp, for a stable greedy order
    resource_version: str = ""  # the version the plan saw: a release is guarded by it


@dataclass(frozen=True, slots=True)
class Release:
    pod: PodView
    node_selector: dict[str, str]


@dataclass(frozen=True, slots=True)
class Expected:
    """A release not yet observed: where the pod was sent, the resourceVersion our patch was
    guarded by, when we stop waiting, and the error if the patch's outcome is unknown."""

    selector: tuple[tuple[str, str], ...]  # the domain's nodeSelector, level by level
    resource_version: str
    deadline: float
    error: str = ""

    @property
    def domain(self) -> tuple[str, ...]:
        return tuple(v for _, v in self.selector)


@dataclass
class Expectations:
    """Pods released but not yet observed ungated, per Workload key: pod UID -> :class:`Expected`."""

    pending: dict[str, dict[str, Expected]] = field(default_factory=dict)

    def expect(self, workload: str, uid: str, expected: Expected) -> None:
        self.pending.setdefault(workload, {})[uid] = expected

    def get(self, workload: str, uid: str) -> Expected | None:
        return self.pending.get(workload, {}).get(uid)

    def observe(self, workload: str, uid: str) -> bool:
        """The pod was seen ungated or gone (or the release failed); True if we were waiting for it."""
        waiting = self.pending.get(workload)
        if waiting is None or waiting.pop(uid, None) is None:
            return False
        if not waiting:
            del self.pending[workload]
        return True

    def due(self, workload: str, now: float) -> dict[str, Expected]:
        """The expectations of ``workload`` whose deadline has passed (still held)."""
        return {uid: e for uid, e in self.pending.get(workload, {}).items() if e.deadline <= now}

    def of(self, workload: str) -> dict[str, tuple[str, ...]]:
        return {uid: e.domain for uid, e in self.pending.get(workload, {}).items()}

    def next_deadline(self, workload: str) -> float | None:
        waiting = self.pending.get(workload)
        return min(e.deadline for e in waiting.values()) if waiting else None

    def forget(self, workload: str) -> None:
        self.pending.pop(workload, None)

    def __len__(self) -> int:
        return sum(len(v) for v in self.pending.values())


def _domain_of(pod: PodView, levels: Sequence[str]) -> tuple[str, ...] | None:
    if not all(k in pod.node_selector for k in levels):
        return None
    return tuple(pod.node_selector[k] for k in levels)


def ranks(pods: Sequence[PodView], count: int, sub_groups: int | None) -> dict[int, PodView] | None:
    """rank -> pod when every pod has a distinct in-range rank; None means use greedy mode."""
    out: dict[int, PodView] = {}
    job_size = count // sub_groups if sub_groups else count
    for pod in pods:
        if pod.completion_index is None or pod.completion_index < 0:
            return None
        rank = pod.completion_index
        if sub_groups:
            if pod.job_index is None or not 0 <= pod.job_index < sub_groups or pod.completion_index >= job_size:
                return None
            rank = pod.completion_index + pod.job_index * job_size
        if rank >= count or rank in out:
            return None
        out[rank] = pod
    return out


def plan_releases(
    assignment: TopologyAssignment,
    pods: Sequence[PodView],
    *,
    count: int,
    sub_groups: int | None = None,
    in_flight: Mapping[str, tuple[str, ...]] | None = None,
    holding: Sequence[PodView] = (),
) -> list[Release]:
    """The gated pods to release now, each with its domain's nodeSelector.

    ``pods`` are the PodSet's live pods (terminal and Terminating pods left out).
    ``in_flight`` maps pod UIDs already released but not yet observed without the gate
    to the domain they were sent to. ``holding``: the PodSet's Terminating pods that
    still run (bound, not finished): each keeps its domain's slot until it is gone.
    """
    levels = assignment.levels
    in_flight = in_flight or {}
    selectors = [dict(zip(levels, d.values, strict=True)) for d in assignment.domains]
    index = {d.values: i for i, d in enumerate(assignment.domains)}
    placed = [0] * len(assignment.domains)
    gated: list[PodView] = []
    for pod in pods:
        values = in_flight.get(pod.uid) if pod.uid in in_flight else (None if pod.gated else _domain_of(pod, levels))
        if values is not None and values in index:
            placed[index[values]] += 1
        elif pod.gated and pod.uid not in in_flight:
            gated.append(pod)
    for pod in holding:
        values = _domain_of(pod, levels)
        if values is not None and values in index:
            placed[index[values]] += 1
    rank_to_domain = [i for i, d in enumerate(assignment.domains) for _ in range(d.count)]
    by_rank = ranks(pods, min(count, len(rank_to_domain)), sub_groups)
    if by_rank is not None:
        consistent = all(
            _domain_of(p, levels) == assignment.domains[rank_to_domain[r]].values
            for r, p in by_rank.items()
            if not p.gated and p.uid not in in_flight
        )
        if consistent:
            # A rank's domain may still hold a leaving pod: that rank waits for it to go.
            room = [max(d.count - placed[i], 0) for i, d in enumerate(assignment.domains)]
            out = []
            for r, p in sorted(by_rank.items()):
                if p.gated and p.uid not in in_flight and room[rank_to_domain[r]] > 0:
                    room[rank_to_domain[r]] -= 1
                    out.append(Release(p, selectors[rank_to_domain[r]]))
            return out
    gated.sort(key=lambda p: (p.created, p.name))
    releases: list[Release] = []
    for i, dom in enumerate(assignment.domains):
        free = max(dom.count - placed[i], 0)
        while free > 0 and len(releases) < len(gated):
            releases.append(Release(gated[len(releases)], selectors[i]))
            free -= 1
    return releases


def offers(ta: TopologyAssignment | None, selector: Mapping[str, str]) -> bool:
    """Whether the domain ``selector`` names is one of ``ta``'s, with pods to place."""
    if ta is None or any(k not in selector for k in ta.levels):
        return False
    values = tuple(selector[k] for k in ta.levels)
    return any(d.values == values and d.count > 0 for d in ta.domains)
