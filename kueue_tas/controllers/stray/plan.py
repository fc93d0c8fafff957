"""Stray pods of an admitted workload, pure: which of its running pods have no place in its
current assignment.

A pod is stray when it is released (bound, or ungated with a nodeSelector naming its whole
domain), not finished, not already being deleted, fills no slot of any trusted assignment
(``LiveCapacity.slot_filled_by``), and either is in a domain its PodSet's assignment does
not give it, or is one too many in a domain that has more such pods than its count. This
happens after a node repair moved a node's slots away while the node's pods were still
there: a deleted node re-created with its pods, a pod released with the old nodeSelector
just before the repair. Kueue's node controller terminates such "late" pods too
(``podsToTerminate``).

A pod whose domain cannot be read (no full nodeSelector, its node without the levels) is
never stray: we cannot tell where it runs, so it is not ours to judge.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from kueue_tas.capacity.rules import pod_domain
from kueue_tas.kube.slim import SlimPod
from kueue_tas.topology.assignment import TopologyAssignment


@dataclass(frozen=True, slots=True)
class Stray:
    pod: SlimPod
    domain: tuple[str, ...]
    count: int  # the slots the assignment gives the domain (0: none)
    running: int  # the PodSet's released live pods in the domain, this one included


def domain_text(domain: tuple[str, ...]) -> str:
    return "/".join(domain)


def stray_pods(
    assignments: Mapping[str, TopologyAssignment],
    pods: Iterable[SlimPod],
    node_labels: Callable[[str], Mapping[str, str] | None],
    fills_slot: Callable[[str], bool],
) -> list[Stray]:
    """The stray pods among ``pods`` (one workload's), by pod key (invariant I7).

    ``assignments``: PodSet -> its current assignment; ``node_labels(name)``: a node's labels
    (None when it is gone); ``fills_slot(pod_key)``: whether the pod fills a trusted slot."""
    live: dict[tuple[str, tuple[str, ...]], list[SlimPod]] = {}
    for pod in pods:
        podset = pod.podset
        if podset is None or podset not in assignments or pod.gated or pod.is_terminal or pod.terminating:
            continue
        levels = assignments[podset].levels
        labels = node_labels(pod.node_name) if pod.node_name else None
        domain = pod_domain(pod.node_selector, labels, levels)
        if domain is not None:
            live.setdefault((podset, domain), []).append(pod)
    out: list[Stray] = []
    for (podset, domain), members in live.items():
        count = sum(d.count for d in assignments[podset].domains if d.values == domain)
        excess = len(members) - count
        if excess <= 0:
            continue
        # The slots go to the first pods by key (pod_slots): the surplus is at the end.
        candidates = sorted((p for p in members if not fills_slot(p.key)), key=lambda p: p.key, reverse=True)
        out.extend(Stray(p, domain, count, len(members)) for p in candidates[:excess])
    return sorted(out, key=lambda s: s.pod.key)


def also_stray(strays: Iterable[Stray], by_other: Iterable[Stray]) -> list[Stray]:
    """Of ``strays``, as many per PodSet and domain as ``by_other`` (the strays another
    assignment finds there) has: the pods both assignments count as too many (a node repair
    in progress, either of whose assignments may be the one that stands)."""
    too_many = Counter((s.pod.podset, s.domain) for s in by_other)
    out = []
    for s in strays:
        if too_many[(s.pod.podset, s.domain)] > 0:
            too_many[(s.pod.podset, s.domain)] -= 1
            out.append(s)
    return out
