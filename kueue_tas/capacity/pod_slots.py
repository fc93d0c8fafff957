"""Which bound pods fill which slots of the trusted assignments, kept current by events.

An assignment gives each of its domains a count of slots. A bound pod fills one when the
claim its labels make (``rules.pod_claim``) names a Workload we track (``identify``) whose
slots (``set_entries``) include the pod's PodSet and domain (``rules.pod_domain``); a pod of
a slice that a newer elastic slice replaces fills the newest slice's slots first, and so does
a pod whose Workload is gone when a slice records it kept that Workload's pods (``identify``'s
``kept``: Kueue may delete a replaced slice while its pods run on). When a
domain has more claimants than slots, the first ones by pod key fill them, so the outcome
depends only on the objects, never on the order of their events (``plan``, ``capacity``
and the controller agree).

What this yields (``charges``, and every change through ``apply``): each bound pod on its
node (``PodCharge``: as its workload's TAS usage when it fills a slot, else as non-TAS
usage) and each workload's slots no pod fills, at their domain (``OpenSlots``). A hidden
workload (``LiveCapacity.without``) yields neither its open slots nor the pods filling them.
"""

from __future__ import annotations

from bisect import bisect_left, insort
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import TypeVar

from kueue_tas.capacity.rules import PodClaim, UsageEntry, pod_domain
from kueue_tas.topology.model import ResourceMap

Identity = tuple[str, str]
"""(namespace, workload label value) naming one Workload."""

Bucket = tuple[str, int, tuple[str, ...]]
"""(workload key, index of its usage entry, domain values): the slots of one domain."""

K = TypeVar("K")

# An elastic chain longer than this is not followed (it cannot happen; it must not loop).
_MAX_CHAIN = 64


@dataclass(frozen=True, slots=True)
class PodCharge:
    """A bound pod's requests on its node: TAS usage of ``entry`` when it fills one of its
    slots, non-TAS usage when ``entry`` is None."""

    node: str
    usage: ResourceMap
    entry: UsageEntry | None


@dataclass(frozen=True, slots=True)
class OpenSlots:
    """``count`` slots of ``entry`` at ``domain`` that no bound pod fills. ``opened``: +1 when
    the domain had no open slot before this charge, -1 when it has none after it, else 0 (a
    snapshot seals a leaf per open domain, not per slot: ``TopologySnapshot.add_tas_usage``)."""

    entry: UsageEntry
    domain: tuple[str, ...]
    count: int
    opened: int = 0


SlotCharge = PodCharge | OpenSlots


@dataclass(frozen=True, slots=True)
class _Pod:
    node: str
    usage: ResourceMap
    claim: PodClaim | None


class PodSlots:
    def __init__(
        self,
        node_labels: Callable[[str], Mapping[str, str] | None],
        apply: Callable[[SlotCharge, int], None],
    ) -> None:
        self._node_labels = node_labels
        self._apply = apply
        self._pods: dict[str, _Pod] = {}  # bound, not finished pods
        self._charged: dict[str, PodCharge] = {}  # what each pod holds now
        self._claimants: dict[Identity, set[str]] = {}
        self._claimed_on: dict[str, set[str]] = {}  # node -> pods with a claim bound there
        self._identity: dict[str, Identity] = {}
        self._owner: dict[Identity, str] = {}
        self._kept: dict[str, tuple[Identity, ...]] = {}  # workload -> earlier slices whose pods it keeps
        self._kept_by: dict[Identity, set[str]] = {}
        self._entries: dict[str, tuple[UsageEntry, ...]] = {}
        self._counts: dict[str, dict[tuple[int, tuple[str, ...]], int]] = {}
        self._members: dict[Bucket, list[str]] = {}  # sorted pod keys
        self._bucket_of: dict[str, Bucket] = {}
        self._open: dict[Bucket, int] = {}  # open slots charged now
        self._replaces: dict[str, str] = {}
        self._replaced_by: dict[str, set[str]] = {}
        self._hidden: set[str] = set()

    # --- pods ---------------------------------------------------------------------------------

    def upsert_pod(self, key: str, node: str, usage: ResourceMap, claim: PodClaim | None) -> None:
        pod = _Pod(node, usage, claim)
        if self._pods.get(key) == pod:
            return  # a status update that changes nothing we charge
        self.delete_pod(key)
        self._pods[key] = pod
        if claim is not None:
            self._claimants.setdefault((claim.namespace, claim.workload), set()).add(key)
            self._claimed_on.setdefault(node, set()).add(key)
        self._place(key)

    def delete_pod(self, key: str) -> None:
        if key not in self._pods:
            return
        self._unplace(key)
        pod = self._pods.pop(key)
        if pod.claim is not None:
            _discard(self._claimants, (pod.claim.namespace, pod.claim.workload), key)
            _discard(self._claimed_on, pod.node, key)

    def node_relabelled(self, node: str) -> None:
        """A node's labels changed (or it came or went): its pods' domains may have."""
        self._replay(self._claimed_on.get(node, ()))

    # --- workloads ----------------------------------------------------------------------------

    def identify(self, key: str, identity: Identity | None, kept: tuple[Identity, ...] = ()) -> None:
        """Workload ``key`` is the one ``identity`` names (None: forget it); ``kept``: the earlier
        slices whose pods it keeps, claimed for it while no tracked Workload is theirs."""
        old, old_kept = self._identity.get(key), self._kept.get(key, ())
        if identity is None:
            kept = ()
        if old == identity and old_kept == kept:
            return
        affected: set[str] = set()
        for ident in {old, identity, *old_kept, *kept} - {None}:
            assert ident is not None
            affected |= self._claimants.get(ident, set())
        if old is not None:
            del self._identity[key]
            if self._owner.get(old) == key:
                del self._owner[old]
        for ident in old_kept:
            _discard(self._kept_by, ident, key)
        self._kept.pop(key, None)
        if identity is not None:
            self._identity[key] = identity
            self._owner[identity] = key
        if kept:
            self._kept[key] = kept
            for ident in kept:
                self._kept_by.setdefault(ident, set()).add(key)
        self._replay(affected)

    def set_replaces(self, key: str, replaced: str | None) -> None:
        current = self._replaces.get(key)
        if current == replaced:
            return
        affected = self._chain_claimants(key)
        if current is not None:
            del self._replaces[key]
            _discard(self._replaced_by, current, key)
        if replaced is not None:
            self._replaces[key] = replaced
            self._replaced_by.setdefault(replaced, set()).add(key)
        self._replay(affected | self._chain_claimants(key))

    def set_entries(self, key: str, entries: tuple[UsageEntry, ...]) -> None:
        """The slots workload ``key`` holds (empty: none)."""
        if self._entries.get(key, ()) == entries:
            return
        affected = self._chain_claimants(key)
        for bucket in self._buckets(key):
            for pod in self._members.pop(bucket):
                del self._bucket_of[pod]
                affected.add(pod)
                self._set_charge(pod, None)
            self._charge_open(bucket, 0)
        self._entries.pop(key, None)
        self._counts.pop(key, None)
        if entries:
            self._entries[key] = entries
            counts: dict[tuple[int, tuple[str, ...]], int] = {}
            for i, entry in enumerate(entries):
                for d in entry.assignment.domains:
                    counts[(i, d.values)] = counts.get((i, d.values), 0) + d.count
            self._counts[key] = counts
            for bucket in self._buckets(key):
                self._members[bucket] = []
                self._refresh(bucket)
        self._replay(affected)

    def set_hidden(self, key: str, hidden: bool) -> None:
        if hidden:
            self._hidden.add(key)
        else:
            self._hidden.discard(key)
        for bucket in self._buckets(key):
            members = self._members[bucket]
            for idx in range(min(self._count(bucket), len(members))):
                self._set_charge(members[idx], self._desired(bucket, idx))
            self._refresh(bucket)

    # --- reading ------------------------------------------------------------------------------

    def slot_filled_by(self, pod_key: str) -> str | None:
        bucket = self._bucket_of.get(pod_key)
        if bucket is None or self._members[bucket].index(pod_key) >= self._count(bucket):
            return None
        return bucket[0]

    def charges(self) -> Iterator[SlotCharge]:
        yield from self._charged.values()
        for (key, i, domain), count in self._open.items():
            yield OpenSlots(self._entries[key][i], domain, count, opened=1)

    # --- the rules ----------------------------------------------------------------------------

    def _resolve(self, pod: _Pod) -> Bucket | None:
        """The domain slots a pod may fill; None if its claim names none (see the module doc)."""
        claim = pod.claim
        if claim is None:
            return None
        identity = (claim.namespace, claim.workload)
        owner = self._owner.get(identity)
        if owner is None:
            # Its Workload is gone (or not seen yet): the slice that kept its pods takes them.
            keepers = self._kept_by.get(identity)
            if not keepers:
                return None
            owner = min(keepers)
        chain = [owner]
        while len(chain) < _MAX_CHAIN:
            newer = sorted(self._replaced_by.get(chain[-1], set()) - set(chain))
            if not newer:
                break
            chain.append(newer[0])
        labels = self._node_labels(pod.node)
        for key in reversed(chain):
            counts = self._counts.get(key)
            if counts is None:
                continue
            for i, entry in enumerate(self._entries[key]):
                if entry.pod_set != claim.pod_set:
                    continue
                domain = pod_domain(claim.node_selector, labels, entry.assignment.levels)
                if domain is not None and (i, domain) in counts:
                    return (key, i, domain)
        return None

    def _desired(self, bucket: Bucket, idx: int) -> PodCharge | None:
        key, i, _ = bucket
        pod = self._pods[self._members[bucket][idx]]
        if idx >= self._count(bucket):
            return PodCharge(pod.node, pod.usage, None)
        if key in self._hidden:
            return None
        return PodCharge(pod.node, pod.usage, self._entries[key][i])

    # --- bookkeeping --------------------------------------------------------------------------

    def _place(self, pod_key: str) -> None:
        pod = self._pods[pod_key]
        bucket = self._resolve(pod)
        if bucket is None:
            self._set_charge(pod_key, PodCharge(pod.node, pod.usage, None))
            return
        members = self._members[bucket]
        insort(members, pod_key)
        self._bucket_of[pod_key] = bucket
        self._set_charge(pod_key, self._desired(bucket, bisect_left(members, pod_key)))
        self._refresh(bucket)

    def _unplace(self, pod_key: str) -> None:
        self._set_charge(pod_key, None)
        bucket = self._bucket_of.pop(pod_key, None)
        if bucket is not None:
            members = self._members[bucket]
            del members[bisect_left(members, pod_key)]
            self._refresh(bucket)

    def _replay(self, pods: Iterable[str]) -> None:
        """Decide these pods' slots afresh (the tables they depend on changed)."""
        ordered = sorted(p for p in pods if p in self._pods)
        for pod in ordered:
            self._unplace(pod)
        for pod in ordered:
            self._place(pod)

    def _refresh(self, bucket: Bucket) -> None:
        """After one pod joined or left the bucket: the pods at the fill boundary and the open slots."""
        count, members = self._count(bucket), self._members[bucket]
        for idx in (count - 1, count):
            if 0 <= idx < len(members):
                self._set_charge(members[idx], self._desired(bucket, idx))
        self._charge_open(bucket, 0 if bucket[0] in self._hidden else max(count - len(members), 0))

    def _charge_open(self, bucket: Bucket, count: int) -> None:
        before = self._open.pop(bucket, 0)
        if count:
            self._open[bucket] = count
        if count != before:
            key, i, domain = bucket
            opened = 1 if not before else -1 if not count else 0
            slots = OpenSlots(self._entries[key][i], domain, abs(count - before), opened)
            self._apply(slots, 1 if count > before else -1)

    def _set_charge(self, pod_key: str, charge: PodCharge | None) -> None:
        before = self._charged.get(pod_key)
        if before == charge:
            return
        if before is not None:
            del self._charged[pod_key]
            self._apply(before, -1)
        if charge is not None:
            self._charged[pod_key] = charge
            self._apply(charge, 1)

    def _count(self, bucket: Bucket) -> int:
        key, i, domain = bucket
        return self._counts[key][(i, domain)]

    def _buckets(self, key: str) -> list[Bucket]:
        return [(key, i, domain) for i, domain in self._counts.get(key, {})]

    def _chain_claimants(self, key: str) -> set[str]:
        """Pods whose slots depend on ``key``'s: in its buckets, or claiming it or a slice it replaces."""
        out = {pod for bucket in self._buckets(key) for pod in self._members[bucket]}
        seen: set[str] = set()
        current: str | None = key
        while current is not None and current not in seen and len(seen) < _MAX_CHAIN:
            seen.add(current)
            for identity in (self._identity.get(current), *self._kept.get(current, ())):
                if identity is not None:
                    out |= self._claimants.get(identity, set())
            current = self._replaces.get(current)
        return out


def _discard(index: dict[K, set[str]], key: K, value: str) -> None:
    members = index.get(key)
    if members is not None:
        members.discard(value)
        if not members:
            del index[key]
