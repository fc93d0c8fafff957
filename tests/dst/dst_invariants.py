"""Test-only (deterministic simulation): the invariant monitor, run after every step.

It reads the API server's objects (the ground truth: what Kueue, the scheduler and users see)
and the leader's live capacity model. docs/architecture.md ("Invariants the simulator checks")
states each with where the controller enforces it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from dst_api import SimApiServer
from dst_world import (
    CHECK,
    GPU,
    HOST,
    NODES,
    PODS,
    RACK,
    WORKLOADS,
    condition_true,
    entry_of,
    has_quota,
    pod_gates,
    pod_gpus,
    ready_of,
)

from kueue_tas.api import constants as c
from kueue_tas.capacity.live import LiveCapacity
from kueue_tas.topology.codec.codec import decode_assignment_annotation
from kueue_tas.topology.explain.free import domain_free

Obj = dict[str, Any]

CAPACITY = "capacity"  # no domain's trusted plus assumed usage above its capacity
EXACT_COUNTS = "exact-counts"  # no domain receives more ungated pods than its assignment's count
OUTSIDE = "pod-outside-assignment"  # no pod runs outside its workload's assignment
UNDECIDED_READY = "ready-not-decided"  # no Ready entry of ours on a Workload state we did not decide
HELD = "gated-unexplained"  # every gated pod released or explained within a bound
LEAK = "capacity-leak"  # when every workload has finished, free capacity equals the cluster's
NEEDLESS_MOVE = "moved-off-serving-nodes"  # no repair moves a workload whose nodes all serve
CRASH = "controller-crashed"  # a reconciler failed (the manager stops)


@dataclass(frozen=True)
class Violation:
    invariant: str
    detail: str


@dataclass
class Monitor:
    server: SimApiServer
    gate: str
    held_bound: float = 300.0  # seconds a gated pod of an admitted workload may wait unexplained
    grace: float = 60.0  # seconds pods may sit outside a changed assignment (stray grace, binds)
    healthy_window: float = 180.0  # a node unhealthy this recently may justify a repair
    ignore: frozenset[str] = frozenset()  # invariants not reported (to hunt past a known defect)
    gated_since: dict[str, float] = field(default_factory=dict)  # pod uid -> first seen held
    assignment_seen: dict[str, tuple[str, float, str]] = field(default_factory=dict)  # uid -> (text, since, epoch)
    entry_seen: dict[str, tuple[str, str]] = field(default_factory=dict)  # uid -> (state, message)
    note_at: dict[str, float] = field(default_factory=dict)  # workload uid -> last entry message change
    decided_message: dict[str, str] = field(default_factory=dict)  # workload uid -> message it turned Ready with
    unhealthy_at: dict[str, float] = field(default_factory=dict)  # node name -> last time not serving
    epochs: dict[str, tuple[int, float]] = field(default_factory=dict)  # uid -> (reservation epoch, began)
    outside_since: dict[str, float] = field(default_factory=dict)  # pod uid -> first seen outside
    overfull_since: dict[tuple[str, str, int], float] = field(default_factory=dict)  # (wl uid, podset, domain)

    # --- what the simulation tells the monitor ---------------------------------------------------

    # Speed only: (store rv, Events, time, what the simulation told) of the last check the store passed;
    # the store's checks are a function of these, so the same key passes again.
    told: int = 0
    clean_at: tuple[int, int, float, int] | None = None
    # Speed only: facts per (uid, resourceVersion) of a Workload; the (workloads, nodes) versions
    # the entry and capacity checks last passed at (they read nothing else, not even the time).
    _wl_facts: dict[tuple[str, str], _WorkloadFacts] = field(default_factory=dict)
    _static_clean_at: tuple[int, int] | None = None

    def node_unhealthy(self, name: str, now: float) -> None:
        self.unhealthy_at[name] = now
        self.told += 1

    def reserved(self, uid: str, epoch: int, now: float) -> None:
        self.epochs[uid] = (epoch, now)
        self.told += 1

    def ready_landed(self, uid: str, sent_at: float, now: float, term: int, leader: int) -> Violation | None:
        """A write setting our entry Ready, sent at ``sent_at`` by controller term ``term``,
        landed while term ``leader`` leads."""
        epoch = self.epochs.get(uid)
        if epoch is not None and sent_at < epoch[1]:
            who = f"term {term}, deposed (term {leader} leads)" if term != leader else f"term {term}, the leader"
            return Violation(
                UNDECIDED_READY,
                f"workload uid {uid}: a Ready entry sent at t={sent_at:.1f}s by {who} landed at t={now:.1f}s on "
                f"reservation #{epoch[0]} begun at t={epoch[1]:.1f}s (decided on an older Workload)",
            )
        return None

    # --- the checks --------------------------------------------------------------------------------

    def check(self, now: float, capacity: LiveCapacity | None) -> Violation | None:
        key = (self.server.rv, len(self.server.events), now, self.told)
        if key != self.clean_at:
            found = self._check_store(now)
            if found is not None:
                return found
            self.clean_at = key
        if capacity is not None:
            found = self._model(capacity)
            if found is not None and found.invariant not in self.ignore:
                return found
        return None

    def _check_store(self, now: float) -> Violation | None:
        nodes = {n["metadata"]["name"]: n for n in self.server.items(NODES)}
        for name, node in nodes.items():
            if not ready_of(node) or node["spec"].get("unschedulable"):
                self.unhealthy_at[name] = now
        workloads = self.server.items(WORKLOADS)
        pods = self.server.items(PODS)
        static = (self.server.last_rv(WORKLOADS), self.server.last_rv(NODES))
        checks: list[Callable[[float, dict[str, Obj], list[Obj], list[Obj]], Violation | None]] = [
            self._placement,
            self._held,
            self._moves,
        ]
        if static != self._static_clean_at:
            checks = [self._ready_entries, self._capacity, *checks]
        for check in checks:
            found = check(now, nodes, workloads, pods)
            if found is not None and found.invariant not in self.ignore:
                return found
        self._static_clean_at = static
        return None

    def _ready_entries(self, now: float, nodes: dict[str, Obj], wls: list[Obj], pods: list[Obj]) -> Violation | None:
        for wl in wls:
            uid = wl["metadata"]["uid"]
            entry = entry_of(wl) or {}
            seen = (entry.get("state", ""), entry.get("message", ""))
            if self.entry_seen.get(uid) != seen:
                if seen[0] == "Ready" and (self.entry_seen.get(uid) or ("",))[0] != "Ready":
                    self.decided_message[uid] = seen[1]
                self.entry_seen[uid] = seen
                self.note_at[uid] = now
            if entry.get("state") == "Ready" and not has_quota(wl):
                return Violation(
                    UNDECIDED_READY,
                    f"workload {wl['metadata']['name']}: our entry is Ready on a Workload without quota",
                )
        return None

    def _facts(self, wl: Obj) -> _WorkloadFacts:
        """What the checks read of a Workload, worked out once per version of it (a stored object
        never changes: every write stores a new one with a new resourceVersion)."""
        meta = wl["metadata"]
        key = (meta["uid"], meta.get("resourceVersion", ""))
        facts = self._wl_facts.get(key)
        if facts is None:
            holding = (
                has_quota(wl) and (entry_of(wl) or {}).get("state") == "Ready" and not condition_true(wl, "Finished")
            )
            facts = self._wl_facts[key] = _WorkloadFacts(holding, condition_true(wl, "Admitted"), _decoded(wl))
        return facts

    def _assignments(self, wl: Obj) -> list[tuple[str, Any]]:
        return self._facts(wl).assignments

    def _holding(self, wl: Obj) -> bool:
        """Holds quota and our Ready entry, not finished (a replaced elastic slice is)."""
        return self._facts(wl).holding

    @staticmethod
    def _matches(labels: dict[str, str], levels: tuple[str, ...], values: tuple[str, ...]) -> bool:
        return all(labels.get(k) == v for k, v in zip(levels, values, strict=True))

    def _capacity(self, now: float, nodes: dict[str, Obj], wls: list[Obj], pods: list[Obj]) -> Violation | None:
        """Assignments of the Workloads holding quota and a Ready entry, per host and per rack."""
        host_use: dict[str, int] = {}
        rack_use: dict[str, int] = {}
        # A new elastic slice's assignment holds the pods it keeps: the slice it replaces is
        # counted through it until Kueue finishes that one (never both).
        replaced = {
            (wl["metadata"].get("annotations") or {}).get(c.KUEUE_SLICE_REPLACEMENT_ANNOTATION, "").split("/")[-1]
            for wl in wls
            if self._holding(wl)
        }
        by_values: dict[tuple[str, ...], dict[tuple[str, ...], list[str]]] = {}  # levels -> values -> nodes
        for wl in wls:
            if not self._holding(wl) or wl["metadata"]["name"] in replaced:
                continue
            per_pod = {ps["name"]: _template_gpus(ps) for ps in wl["spec"]["podSets"]}
            for ps_name, ta in self._assignments(wl):
                index = by_values.get(ta.levels)
                if index is None:
                    index = by_values[ta.levels] = {}
                    for n, o in nodes.items():
                        labels = o["metadata"]["labels"]
                        if all(level in labels for level in ta.levels):
                            index.setdefault(tuple(labels[level] for level in ta.levels), []).append(n)
                for d in ta.domains:
                    match = index.get(tuple(d.values), [])
                    if not match:
                        continue
                    gpus = d.count * per_pod.get(ps_name, 1)
                    if HOST in ta.levels and len(match) == 1:
                        host_use[match[0]] = host_use.get(match[0], 0) + gpus
                    rack = nodes[match[0]]["metadata"]["labels"].get(RACK, "")
                    rack_use[rack] = rack_use.get(rack, 0) + gpus
        for name, used in host_use.items():
            cap = int(nodes[name]["status"]["allocatable"].get(GPU, "0"))
            if used > cap:
                return Violation(
                    CAPACITY, f"node {name}: {used} GPUs assigned to admitted workloads, {cap} allocatable"
                )
        for rack, used in rack_use.items():
            cap = sum(
                int(o["status"]["allocatable"].get(GPU, "0"))
                for o in nodes.values()
                if o["metadata"]["labels"].get(RACK) == rack
            )
            if used > cap:
                return Violation(
                    CAPACITY, f"rack {rack}: {used} GPUs assigned to admitted workloads, {cap} allocatable"
                )
        return None

    def _placement(self, now: float, nodes: dict[str, Obj], wls: list[Obj], pods: list[Obj]) -> Violation | None:
        by_job: dict[str, list[Obj]] = {}
        outside: set[str] = set()
        overfull: set[tuple[str, str, int]] = set()
        found = self._placement_of(now, nodes, wls, pods, by_job, outside, overfull)
        for pod_uid in set(self.outside_since) - outside:
            del self.outside_since[pod_uid]
        for key in set(self.overfull_since) - overfull:
            del self.overfull_since[key]
        return found

    def _placement_of(
        self,
        now: float,
        nodes: dict[str, Obj],
        wls: list[Obj],
        pods: list[Obj],
        by_job: dict[str, list[Obj]],
        outside: set[str],
        overfull: set[tuple[str, str, int]],
    ) -> Violation | None:
        for pod in pods:
            by_job.setdefault((pod["metadata"].get("labels") or {}).get("sim/job", ""), []).append(pod)
        for wl in wls:
            uid = wl["metadata"]["uid"]
            text = (wl["metadata"].get("annotations") or {}).get(c.TOPOLOGY_ASSIGNMENT_ANNOTATION, "")
            epoch = str(self.epochs.get(uid, (0, 0.0))[0])
            seen = self.assignment_seen.get(uid)
            if seen is None or seen[0] != text or seen[2] != epoch:
                self.assignment_seen[uid] = (text, now, epoch)
                continue
            if not (self._facts(wl).admitted_holding) or now - seen[1] < self.grace:
                continue
            name = wl["metadata"]["name"]
            for ps_name, ta in self._assignments(wl):
                counts = [0] * len(ta.domains)
                for pod in by_job.get(wl["metadata"]["labels"].get("sim/job", ""), []):
                    labels = pod["metadata"].get("labels") or {}
                    if labels.get(c.PODSET_LABEL, ps_name) != ps_name or self.gate in pod_gates(pod):
                        continue
                    if now - _created(pod) < self.grace:
                        continue
                    node = nodes.get(pod["spec"].get("nodeName") or "")
                    if node is not None:
                        at = [
                            i
                            for i, d in enumerate(ta.domains)
                            if self._matches(node["metadata"]["labels"], ta.levels, d.values)
                        ]
                        if not at:
                            pod_uid = pod["metadata"]["uid"]
                            outside.add(pod_uid)
                            since = self.outside_since.setdefault(pod_uid, now)
                            if now - since < self.grace:
                                continue
                            return Violation(
                                OUTSIDE,
                                f"workload {name}: pod {pod['metadata']['name']} runs on node "
                                f"{node['metadata']['name']}, outside its assignment for {now - since:.0f}s",
                            )
                        counts[at[0]] += 1
                        continue
                    selector = pod["spec"].get("nodeSelector") or {}
                    at = [
                        i
                        for i, d in enumerate(ta.domains)
                        if any(k in selector for k in ta.levels)
                        and all(selector.get(k, v) == v for k, v in zip(ta.levels, d.values, strict=True))
                    ]
                    if at:
                        counts[at[0]] += 1
                for i, (d, n) in enumerate(zip(ta.domains, counts, strict=True)):
                    if n <= d.count:
                        continue
                    key = (uid, ps_name, i)
                    overfull.add(key)
                    since = self.overfull_since.setdefault(key, now)
                    if now - since >= self.grace:
                        return Violation(
                            EXACT_COUNTS,
                            f"workload {name} podset {ps_name}: {n} ungated pods in domain {'/'.join(d.values)}, "
                            f"assigned {d.count}, for {now - since:.0f}s",
                        )
        return None

    def _held(self, now: float, nodes: dict[str, Obj], wls: list[Obj], pods: list[Obj]) -> Violation | None:
        admitted = {wl["metadata"]["labels"].get("sim/job", ""): wl for wl in wls if self._facts(wl).admitted_holding}
        live: set[str] = set()
        for pod in pods:
            job = (pod["metadata"].get("labels") or {}).get("sim/job", "")
            wl = admitted.get(job)
            if wl is None or self.gate not in pod_gates(pod):
                continue
            uid = pod["metadata"]["uid"]
            live.add(uid)
            since = self.gated_since.setdefault(uid, now)
            if now - since < self.held_bound:
                continue
            names = {pod["metadata"]["name"], wl["metadata"]["name"]}
            wl_uid = wl["metadata"]["uid"]
            # Explained: an Event on the pod or its Workload since it was held, or a note of ours
            # standing on the entry (its message is no longer the one it turned Ready with).
            explained = (
                any(
                    (e.get("regarding") or {}).get("name") in names and e.get("sim_time", 0.0) >= since
                    for e in self.server.events
                )
                or self.note_at.get(wl_uid, -1.0) >= since
                or (entry_of(wl) or {}).get("message") != self.decided_message.get(wl_uid)
            )
            if not explained:
                return Violation(
                    HELD,
                    f"pod {pod['metadata']['name']} of admitted workload {wl['metadata']['name']} gated for "
                    f"{now - since:.0f}s with no Event and no note",
                )
            self.gated_since[uid] = now  # explained: the next explanation is due a bound later
        for uid in list(self.gated_since):
            if uid not in live:
                del self.gated_since[uid]
        return None

    def _moves(self, now: float, nodes: dict[str, Obj], wls: list[Obj], pods: list[Obj]) -> Violation | None:
        """A repair (assignment rewritten in one reservation) needs a node that did not serve."""
        for wl in wls:
            uid = wl["metadata"]["uid"]
            text = (wl["metadata"].get("annotations") or {}).get(c.TOPOLOGY_ASSIGNMENT_ANNOTATION, "")
            seen = self.assignment_seen.get(uid)
            epoch = str(self.epochs.get(uid, (0, 0.0))[0])
            if seen is None or seen[2] != epoch or not seen[0] or seen[0] == text or not self._holding(wl):
                continue
            try:
                old = decode_assignment_annotation(seen[0])
            except ValueError:
                continue
            justified = False
            for _, ta in old:
                for d in ta.domains:
                    match = [n for n, o in nodes.items() if self._matches(o["metadata"]["labels"], ta.levels, d.values)]
                    recent = any(now - self.unhealthy_at.get(n, -1e9) < self.healthy_window for n in match)
                    if HOST not in ta.levels or not match or recent:
                        justified = True
            if not justified:
                return Violation(
                    NEEDLESS_MOVE,
                    f"workload {wl['metadata']['name']}: assignment rewritten while every node of it served",
                )
        return None

    def _model(self, capacity: LiveCapacity) -> Violation | None:
        for flavor in capacity.flavors():
            snap = capacity.snapshot(flavor)
            if snap is None:
                continue
            for (level, name, resource), free in domain_free(snap).items():
                if resource == GPU and free < 0:
                    return Violation(
                        CAPACITY, f"flavor {flavor}: domain {level}={name} has {free} GPUs free in the model"
                    )
        return None

    def leaks(self, capacity: LiveCapacity) -> Violation | None:
        """Every workload finished and every node back: the model's free GPUs are the cluster's."""
        total = sum(int(n["status"]["allocatable"].get(GPU, "0")) for n in self.server.items(NODES))
        for flavor in capacity.flavors():
            snap = capacity.snapshot(flavor)
            if snap is None:
                continue
            top = snap.tree.levels[0].key
            free = sum(v for (level, _, res), v in domain_free(snap).items() if level == top and res == GPU)
            if free != total:
                return Violation(
                    LEAK, f"flavor {flavor}: {free} GPUs free after every workload finished, cluster has {total}"
                )
        return None


@dataclass(frozen=True, slots=True)
class _WorkloadFacts:
    holding: bool
    admitted: bool
    assignments: list[tuple[str, Any]]

    @property
    def admitted_holding(self) -> bool:
        return self.holding and self.admitted


def _decoded(wl: Obj) -> list[tuple[str, Any]]:
    text = (wl["metadata"].get("annotations") or {}).get(c.TOPOLOGY_ASSIGNMENT_ANNOTATION)
    if not text:
        return []
    try:
        return decode_assignment_annotation(text)
    except ValueError:
        return []


def _template_gpus(podset: Obj) -> int:
    total = 0
    for ctr in podset["template"]["spec"].get("containers") or []:
        total += int(((ctr.get("resources") or {}).get("requests") or {}).get(GPU, "0"))
    return total or 1


def _created(pod: Obj) -> float:
    return float(pod["metadata"].get("annotations", {}).get("sim/created", 0.0))


__all__ = ["CHECK", "Monitor", "Violation", "pod_gpus"]
