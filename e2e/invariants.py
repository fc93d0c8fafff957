"""The invariants kueue-tas promises, checked over a history of cluster objects (pure: no I/O).

``InvariantChecker`` is fed what a watch sees (nodes, pods, Workloads as plain JSON dicts, each
with the caller's clock) and records a ``Violation`` when:

(a) ``domain-overfill``: a domain at any level of a trusted assignment holds more live,
    ungated pods of that PodSet than the assignment gives it (a pod bound, or pinned by its
    nodeSelector, to a deleted node counts nowhere: it runs nowhere and its node's capacity is
    gone with it, which is why the repair, as Kueue's, moves its slot at once; when that node
    is re-created with such pods still bound or pinned to it, they are the stray-pod reaper's to
    delete within its grace, and count only once ``resurrection_window_s`` has passed);
(b) ``node-overcommit``: the bound, non-terminal pods of a node request more than its
    allocatable (``pods`` included);
(c) ``double-booking``: when an assignment becomes trusted, the trusted assignments inside one
    of its domains together need more than that domain's nodes have (a node deleted less than
    ``decision_lag_s`` before the assignment's annotation first appeared, or after, still counts:
    the controller decided on its informers' view, which may not have shown the deletion yet;
    giving a node that then goes away is a node failure for the repair, not capacity given twice);
(d) ``bad-ungate``: a pod loses our gate twice, or into a domain its Workload's assignment does
    not list;
(e) ``silent-pending``: our check entry stays Pending or Retry with no message for longer than
    ``pending_bound_s``.

Watches of different resources are separate streams, so (a) and (b) are re-evaluated on
``tick`` and recorded only when still true ``confirm_s`` later; (d) waits up to ``confirm_s``
for the Workload's assignment to arrive. ``checks`` counts each comparison made, per invariant.

While the watcher cannot reach the apiserver (``blinded`` until ``sighted``), its view is frozen
and so is every controller's: nothing is recorded from that view, and the windows that give the
controller time to act (the confirmation, the reaper's window for pods a repair or a re-created
node left behind, the bound on a silent entry) count only the time the apiserver could be seen
(chaos seed 4016: an apiserver restart of 35 s began just as the reaper deleted the pods a node
repair had left on a cordoned host, and the window ran out while nobody could delete anything).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field

from e2e.observed import Obj, PodView, WorkloadView, object_labels, object_uid, pod_view, workload_view
from kueue_tas.api import constants as kc
from kueue_tas.api.quantity import QuantityError, offered_list_to_ints
from kueue_tas.runtime.config import Settings
from kueue_tas.topology.assignment import TopologyAssignment

Domain = tuple[str, ...]
KINDS = ("domain-overfill", "node-overcommit", "double-booking", "bad-ungate", "silent-pending")


@dataclass(frozen=True)
class Violation:
    kind: str
    at: float
    subject: str
    detail: str

    def line(self) -> str:
        return f"{self.kind} at t={self.at:.1f}s on {self.subject}: {self.detail}"


@dataclass
class _Candidate:
    first: float
    detail: str


@dataclass
class _PendingUngate:
    pod: PodView
    at: float


@dataclass
class InvariantChecker:
    check_names: Collection[str]
    pending_bound_s: float = 60.0
    confirm_s: float = 2.0
    scheduling_gate: str = kc.SCHEDULING_GATE  # the controller's setting: a run may use another
    nodes: dict[str, Mapping[str, str]] = field(default_factory=dict)  # name -> labels (kept after deletion)
    # A node re-created (deleted, then added again) at this time: the pods still bound to it from
    # before are the stray-pod reaper's to delete, within its grace (``resurrection_window_s``).
    recreated_at: dict[str, float] = field(default_factory=dict)
    resurrection_window_s: float = Settings().stray_pod_grace_seconds + 5.0
    _released_at: dict[str, float] = field(default_factory=dict)  # pod key -> when first seen ungated
    allocatable: dict[str, Mapping[str, int]] = field(default_factory=dict)  # existing nodes only
    # How far behind the server a controller's node informer may be when it decides, and what a
    # deleted node offered and when its deletion was seen (chaos seed 4048: a host deleted while
    # a new leader, 0.6 s or more behind on a loaded machine, filled its rack with it).
    decision_lag_s: float = 3.0
    gone_allocatable: dict[str, Mapping[str, int]] = field(default_factory=dict)
    deleted_at: dict[str, float] = field(default_factory=dict)  # deleted nodes -> when first seen deleted
    annotated_at: dict[str, tuple[str, float]] = field(default_factory=dict)  # uid -> (annotation, first seen)
    distrusted_at: dict[str, float] = field(default_factory=dict)  # uid -> when it last stopped being trusted
    pods: dict[str, PodView] = field(default_factory=dict)  # by uid
    workloads: dict[str, WorkloadView] = field(default_factory=dict)  # by uid
    last_assignment: dict[str, Mapping[str, TopologyAssignment]] = field(default_factory=dict)
    # (workload uid, PodSet, leaf domain) -> when a new assignment of the workload took slots
    # from that domain (a node repair): the pods left there are the stray-pod reaper's to delete,
    # within its grace (chaos seed 111: pods pinned to a host, bound just as it was cordoned and
    # the repair moved their slots).
    moved_from: dict[tuple[str, str, Domain], float] = field(default_factory=dict)
    checks: Counter[str] = field(default_factory=Counter)
    violations: list[Violation] = field(default_factory=list)
    _candidates: dict[tuple[str, str], _Candidate] = field(default_factory=dict)
    _recorded: set[tuple[str, str]] = field(default_factory=set)
    _ungates: Counter[str] = field(default_factory=Counter)
    _pending_ungates: list[_PendingUngate] = field(default_factory=list)
    _silent_since: dict[str, float] = field(default_factory=dict)
    _dirty: bool = False
    _relisting: list[str] | None = None  # during a Workload relist: the newly trusted, judged after it
    _blind_since: float | None = None  # the apiserver out of sight since then
    _blind: list[tuple[float, float]] = field(default_factory=list)  # past spans out of sight

    # ------------------------------------------------------------------ sight

    def blinded(self, now: float) -> None:
        """The watcher lost the apiserver: its view (and the controllers') is frozen from now."""
        if self._blind_since is None:
            self._blind_since = now

    def sighted(self, now: float) -> None:
        """The watcher sees the apiserver again (a fresh list is in)."""
        if self._blind_since is not None:
            self._blind.append((self._blind_since, now))
            self._blind_since = None

    def _seen_for(self, since: float, now: float) -> float:
        """Seconds of ``[since, now]`` during which the apiserver could be seen."""
        spans: list[tuple[float, float]] = list(self._blind)
        if self._blind_since is not None:
            spans.append((self._blind_since, now))
        hidden = 0.0
        for start, end in spans:
            hidden += max(0.0, min(end, now) - max(start, since))
        return now - since - hidden

    # ------------------------------------------------------------------ feeding

    def node_event(self, kind: str, obj: Obj, now: float) -> None:
        name = str((obj.get("metadata") or {}).get("name"))
        self.nodes[name] = dict(object_labels(obj))
        if kind == "DELETED":
            gone = self.allocatable.pop(name, None)
            if gone is not None:
                self.gone_allocatable[name] = gone
            self.deleted_at.setdefault(name, now)
        else:
            if name in self.deleted_at:
                self.recreated_at[name] = now
            self.deleted_at.pop(name, None)
            self.gone_allocatable.pop(name, None)
            try:
                # Capped as the controller caps it (``10Ei`` of a resource is still a node).
                self.allocatable[name] = offered_list_to_ints((obj.get("status") or {}).get("allocatable"))
            except QuantityError:
                self.allocatable[name] = {}
        self._dirty = True

    def pod_event(self, kind: str, obj: Obj, now: float) -> None:
        uid = object_uid(obj)
        if kind == "DELETED":
            gone = self.pods.pop(uid, None)
            if gone is not None:
                self._released_at.pop(gone.key, None)
            self._dirty = True
            return
        new = pod_view(obj, self.scheduling_gate)
        old = self.pods.get(uid)
        self.pods[uid] = new
        if not new.gated:
            self._released_at.setdefault(new.key, now)
        self._dirty = True
        if old is not None and old.gated and not new.gated:
            self._ungates[uid] += 1
            if self._ungates[uid] > 1:
                self._record("bad-ungate", now, f"pod {new.key}", f"ungated {self._ungates[uid]} times")
            self._pending_ungates.append(_PendingUngate(new, now))
            self._resolve_ungates(now)

    def workload_event(self, kind: str, obj: Obj, now: float) -> None:
        uid = object_uid(obj)
        old = self.workloads.get(uid)
        if kind == "DELETED":
            self.workloads.pop(uid, None)
            self._silent_since.pop(uid, None)
            self.annotated_at.pop(uid, None)
            self.distrusted_at.pop(uid, None)
            self._dirty = True
            return
        new = workload_view(obj, self.check_names)
        self.workloads[uid] = new
        if old is not None and old.trusted and not new.trusted:
            self.distrusted_at[uid] = now
        if new.annotation and (uid not in self.annotated_at or self.annotated_at[uid][0] != new.annotation):
            self.annotated_at[uid] = (new.annotation, now)
        if new.assignments:
            self._note_moved(uid, self.last_assignment.get(uid) or {}, new.assignments, now)
            self.last_assignment[uid] = new.assignments
        self._dirty = True
        if new.trusted and (old is None or not old.trusted or old.annotation != new.annotation):
            if self._relisting is not None:
                self._relisting.append(uid)
            else:
                self._check_booking(uid, new, now)
        self._resolve_ungates(now)

    def resync(self, resource: str, objs: Iterable[Obj], now: float) -> None:
        """A fresh list replaces what a broken watch may have missed (deletions included)."""
        items = list(objs)
        handler = {"nodes": self.node_event, "pods": self.pod_event, "workloads": self.workload_event}[resource]
        if resource == "nodes":
            seen = {str((o.get("metadata") or {}).get("name")) for o in items}
            for name in [n for n in self.allocatable if n not in seen]:
                self.node_event("DELETED", {"metadata": {"name": name, "labels": self.nodes.get(name, {})}}, now)
        else:
            store: Mapping[str, object] = self.pods if resource == "pods" else self.workloads
            seen = {object_uid(o) for o in items}
            for uid in [u for u in store if u not in seen]:
                handler("DELETED", {"metadata": {"uid": uid}}, now)
        # A list is one moment of the cluster: an assignment it shows newly trusted is judged
        # against the whole list, not against the items before it and the stale rest (chaos
        # seed 1038: a Workload listed before two that had finished meanwhile was counted
        # beside their assignments).
        self._relisting = [] if resource == "workloads" else None
        try:
            for o in items:
                handler("MODIFIED", o, now)
            for uid in self._relisting or ():
                if (wl := self.workloads.get(uid)) is not None and wl.trusted:
                    self._check_booking(uid, wl, now)
        finally:
            self._relisting = None

    # ------------------------------------------------------------------ evaluation

    def tick(self, now: float) -> None:
        """Re-evaluate the state-based invariants; call it every fraction of a second."""
        # A resurrection window that just closed changes the verdict with no event to say so.
        closing = any(
            self._seen_for(at, now) < self.resurrection_window_s + self.confirm_s + 1
            for at in (*self.recreated_at.values(), *self.moved_from.values())
        )
        if self._blind_since is not None:
            return  # a frozen view proves nothing; its windows wait too (``_seen_for``)
        if self._dirty or self._candidates or closing:
            found = {**self._overfills(now), **self._overcommits()}
            self._dirty = False
            for k in [k for k in self._candidates if k not in found]:
                del self._candidates[k]
            for k, detail in found.items():
                cand = self._candidates.setdefault(k, _Candidate(now, detail))
                if self._seen_for(cand.first, now) >= self.confirm_s:
                    self._record(k[0], now, k[1], detail)
        self._resolve_ungates(now, final=False)
        self._silent_pending(now)

    def _record(self, kind: str, now: float, subject: str, detail: str) -> None:
        if (kind, subject) in self._recorded:
            return
        self._recorded.add((kind, subject))
        self.violations.append(Violation(kind, now, subject, detail))

    def _pod_domain(self, pod: PodView, levels: tuple[str, ...]) -> Domain | None:
        """Where a pod is (its node's labels) or is pinned (its nodeSelector)."""
        labels = self.nodes.get(pod.node) if pod.node else None
        source = labels if labels is not None else pod.selector
        if all(k in source for k in levels):
            return tuple(source[k] for k in levels)
        return None

    def _released_node(self, pod: PodView) -> str:
        """The Node a released pod is bound to, or pinned to by its hostname nodeSelector: the
        hostname is a label value, not a Node name (EKS-like pools), so it is looked up by label
        among the nodes seen, deleted ones included; "" when none (or several) carry it."""
        if pod.node:
            return pod.node
        host = pod.selector.get(kc.HOSTNAME_LABEL)
        if host is None:
            return ""
        names = [name for name, labels in self.nodes.items() if labels.get(kc.HOSTNAME_LABEL) == host]
        return names[0] if len(names) == 1 else ""

    def _resurrected(self, pod: PodView, now: float) -> bool:
        """Released to a node (bound, or pinned by its nodeSelector) before that node was deleted
        and re-created, and still within the reaper's window: a leftover the infrastructure
        brought back, not a placement of ours. (Chaos seed 1188: pinned just before the delete,
        bound just after the node returned.)"""
        at = self.recreated_at.get(self._released_node(pod))
        released = self._released_at.get(pod.key)
        return (
            at is not None
            and released is not None
            and released < at
            and self._seen_for(at, now) < self.resurrection_window_s
        )

    def _note_moved(
        self,
        uid: str,
        old: Mapping[str, TopologyAssignment],
        new: Mapping[str, TopologyAssignment],
        now: float,
    ) -> None:
        for podset, before in old.items():
            after = new.get(podset)
            if after is None or after.levels != before.levels:
                continue
            counts = {d.values: d.count for d in after.domains}
            for d in before.domains:
                if counts.get(d.values, 0) < d.count:
                    self.moved_from[(uid, podset, d.values)] = now

    def _left_behind(self, pod: PodView, levels: tuple[str, ...], now: float) -> bool:
        """In a domain a newer assignment of its workload took slots from, within the reaper's window."""
        dom = self._pod_domain(pod, levels)
        at = self.moved_from.get((pod.workload or "", pod.podset or "", dom)) if dom is not None else None
        return at is not None and self._seen_for(at, now) < self.resurrection_window_s

    def _overfills(self, now: float) -> dict[tuple[str, str], str]:
        by_podset: dict[tuple[str, str], list[PodView]] = {}
        for pod in self.pods.values():
            if pod.live and not pod.gated and pod.workload and pod.podset:
                by_podset.setdefault((pod.workload, pod.podset), []).append(pod)
        out: dict[tuple[str, str], str] = {}
        for (wuid, podset), pods in by_podset.items():
            wl = self.workloads.get(wuid)
            if wl is None or not wl.trusted or podset not in wl.assignments:
                continue
            a = wl.assignments[podset]
            allowed: Counter[Domain] = Counter()
            for d in a.domains:
                for k in range(len(a.levels) + 1):
                    allowed[d.values[:k]] += d.count
            have: Counter[Domain] = Counter()
            for pod in pods:
                if (
                    self._released_node(pod) in self.deleted_at
                    or self._resurrected(pod, now)
                    or self._left_behind(pod, a.levels, now)
                ):
                    continue
                dom = self._pod_domain(pod, a.levels)
                for k in range(len(a.levels) + 1) if dom is not None else (0,):
                    have[dom[:k] if dom is not None else ()] += 1
            for dom, n in have.items():
                self.checks["domain-overfill"] += 1
                if n > allowed[dom]:
                    where = "/".join(dom) or "(whole topology)"
                    out[("domain-overfill", f"{wl.key}[{podset}] {where}")] = (
                        f"{n} live pods in domain {where}, the assignment gives it {allowed[dom]}"
                    )
        return out

    def _overcommits(self) -> dict[tuple[str, str], str]:
        used: dict[str, Counter[str]] = {}
        for pod in self.pods.values():
            if pod.node and not pod.terminal and pod.node in self.allocatable:
                used.setdefault(pod.node, Counter()).update(pod.requests)
        out: dict[tuple[str, str], str] = {}
        for node, use in used.items():
            self.checks["node-overcommit"] += 1
            alloc = self.allocatable[node]
            over = {r: (v, alloc.get(r, 0)) for r, v in use.items() if v > alloc.get(r, 0)}
            if over:
                text = ", ".join(f"{r} {v} > {cap}" for r, (v, cap) in sorted(over.items()))
                out[("node-overcommit", f"node {node}")] = f"bound pods request more than allocatable: {text}"
        return out

    def _nodes_in(self, levels: tuple[str, ...], values: Domain, live: Collection[str]) -> frozenset[str]:
        return frozenset(
            n for n in live if all(self.nodes.get(n, {}).get(lv) == v for lv, v in zip(levels, values, strict=True))
        )

    def _live_when_decided(self, uid: str, wl: WorkloadView, now: float) -> dict[str, Mapping[str, int]]:
        """The nodes the controller may still have seen when it decided ``wl``'s assignment: those
        that exist, and those deleted less than ``decision_lag_s`` before its annotation appeared
        (before now, for an assignment trusted again with the text it had before: re-admitted on
        the same placement, the annotation write changed nothing to see)."""
        seen = self.annotated_at.get(uid)
        fresh = seen is not None and seen[0] == wl.annotation and seen[1] >= self.distrusted_at.get(uid, -math.inf)
        decided = seen[1] if fresh and seen is not None else now
        live = dict(self.allocatable)
        for name, at in self.deleted_at.items():
            gone = self.gone_allocatable.get(name)
            if gone is not None and at > decided - self.decision_lag_s:
                live[name] = gone
        return live

    def _check_booking(self, uid: str, wl: WorkloadView, now: float) -> None:
        """(c): every domain of the newly trusted assignment against all trusted assignments in it."""
        memo: dict[tuple[tuple[str, ...], Domain], frozenset[str]] = {}
        live = self._live_when_decided(uid, wl, now)

        def nodes_in(levels: tuple[str, ...], values: Domain) -> frozenset[str]:
            if (levels, values) not in memo:
                memo[levels, values] = self._nodes_in(levels, values, live)
            return memo[levels, values]

        held: list[tuple[frozenset[str], int, Mapping[str, int], str]] = []
        for other in self.workloads.values():
            if not other.trusted:
                continue
            for podset, a in other.assignments.items():
                per_pod = other.per_pod.get(podset, {"pods": 1})
                held += [
                    (nodes_in(a.levels, d.values), d.count, per_pod, f"{other.key}[{podset}]@{'/'.join(d.values)}")
                    for d in a.domains
                ]
        for podset, a in wl.assignments.items():
            for d in a.domains:
                nodes = nodes_in(a.levels, d.values)
                if not nodes:
                    continue  # its nodes are gone (deleted since the decision): nothing to compare with
                self.checks["double-booking"] += 1
                need: Counter[str] = Counter()
                holders: list[str] = []
                for inner, count, per_pod, holder in held:
                    if inner and inner <= nodes:
                        holders.append(f"{holder}x{count}")
                        for r, v in per_pod.items():
                            need[r] += v * count
                cap: Counter[str] = Counter()
                for n in nodes:
                    cap.update(live[n])
                over = {r: (v, cap[r]) for r, v in need.items() if v > cap[r]}
                if over:
                    where = "/".join(d.values)
                    text = ", ".join(f"{r} {v} > {c}" for r, (v, c) in sorted(over.items()))
                    self._record(
                        "double-booking",
                        now,
                        f"{wl.key}[{podset}] {where}",
                        f"trusted assignments in domain {where} need more than its nodes have: {text}"
                        f" (nodes {', '.join(sorted(nodes))}; held by {', '.join(sorted(holders))})",
                    )

    def _resolve_ungates(self, now: float, final: bool = False) -> None:
        keep: list[_PendingUngate] = []
        for p in self._pending_ungates:
            assignments = self.last_assignment.get(p.pod.workload or "") or {}
            a = assignments.get(p.pod.podset or "")
            subject = f"pod {p.pod.key}"
            if a is None:
                if final or now - p.at >= self.confirm_s:
                    self.checks["bad-ungate"] += 1
                    self._record("bad-ungate", now, subject, "ungated, but its Workload has no assignment of ours")
                else:
                    keep.append(p)
                continue
            self.checks["bad-ungate"] += 1
            dom = tuple(p.pod.selector.get(k, "") for k in a.levels)
            if dom not in {d.values for d in a.domains if d.count > 0}:
                where = "/".join(dom)
                self._record("bad-ungate", now, subject, f"ungated into {where}, not a domain of its assignment")
        self._pending_ungates = keep

    def _silent_pending(self, now: float) -> None:
        for uid, wl in self.workloads.items():
            silent = (
                wl.entry_state in (kc.CHECK_STATE_PENDING, kc.CHECK_STATE_RETRY)
                and not wl.entry_message
                and not wl.finished
                and not wl.admitted
            )
            if not silent:
                self._silent_since.pop(uid, None)
                continue
            since = self._silent_since.setdefault(uid, now)
            self.checks["silent-pending"] += 1
            if self._seen_for(since, now) > self.pending_bound_s:
                self._record(
                    "silent-pending",
                    now,
                    f"workload {wl.key}",
                    f"check entry {wl.entry_state} with no message for {now - since:.0f}s",
                )

    def finish(self, now: float) -> None:
        """Settle what is still open at the end of a history."""
        self.tick(now)
        self._resolve_ungates(now, final=True)
