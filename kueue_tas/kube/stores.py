"""Keyed object stores filled by informers, with optional secondary indexes.

Keys are ``namespace/name`` (namespaced resources) or ``name`` (cluster-scoped).
An index maps each value an index function returns for an object to the objects
with that value (e.g. pods by ``namespace/workload``).

Stores are mutated only by their informer, on the event loop; the lists readers get
are copies, so they stay valid across an ``await``, just not current.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Generic, TypeVar

from kueue_tas.kube.slim import SlimPod

T = TypeVar("T")

IndexFunc = Callable[[T], Iterable[str]]
"""The index values of an object (empty: not indexed)."""


def object_key(namespace: str | None, name: str) -> str:
    return f"{namespace}/{name}" if namespace else name


class Store(Generic[T]):
    """Objects by key, with their resourceVersions and optional indexes."""

    __slots__ = ("_indexers", "_indexes", "_items", "_rvs", "_version_of")

    def __init__(
        self,
        indexers: Mapping[str, IndexFunc[T]] | None = None,
        *,
        version_of: Callable[[T], str] | None = None,
    ) -> None:
        """``version_of`` reads the resourceVersion from a stored object; without it the
        store keeps resourceVersions in a side table (one dict slot per object)."""
        self._items: dict[str, T] = {}
        self._rvs: dict[str, str] = {}
        self._version_of = version_of
        self._indexers: dict[str, IndexFunc[T]] = dict(indexers or {})
        self._indexes: dict[str, dict[str, dict[str, T]]] = {name: {} for name in self._indexers}

    # --- reads ------------------------------------------------------------------------------

    def get(self, key: str) -> T | None:
        return self._items.get(key)

    def __getitem__(self, key: str) -> T:
        return self._items[key]

    def __contains__(self, key: object) -> bool:
        return key in self._items

    def __len__(self) -> int:
        return len(self._items)

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._items))

    def keys(self) -> list[str]:
        return list(self._items)

    def values(self) -> list[T]:
        return list(self._items.values())

    def resource_version(self, key: str) -> str | None:
        if self._version_of is not None:
            obj = self._items.get(key)
            return None if obj is None else self._version_of(obj)
        return self._rvs.get(key)

    def by_index(self, index: str, value: str) -> list[T]:
        """Objects whose index function returned ``value`` (KeyError for an unknown index)."""
        bucket = self._indexes[index].get(value)
        return list(bucket.values()) if bucket else []

    # --- writes (informer only) -------------------------------------------------------------

    def put(self, key: str, obj: T, resource_version: str = "") -> T | None:
        """Insert or replace; returns the previous object."""
        old = self._items.get(key)
        self._items[key] = obj
        if self._version_of is None:
            self._rvs[key] = resource_version
        for name, fn in self._indexers.items():
            buckets = self._indexes[name]
            new_values = tuple(fn(obj))
            if old is not None:
                for value in fn(old):
                    if value not in new_values:
                        self._unindex(buckets, value, key)
            for value in new_values:
                bucket = buckets.get(value)
                if bucket is None:
                    buckets[value] = {key: obj}
                else:
                    bucket[key] = obj
        return old

    def pop(self, key: str) -> T | None:
        """Remove; returns the removed object (None when absent)."""
        old = self._items.pop(key, None)
        if old is None:
            return None
        self._rvs.pop(key, None)
        for name, fn in self._indexers.items():
            buckets = self._indexes[name]
            for value in fn(old):
                self._unindex(buckets, value, key)
        return old

    @staticmethod
    def _unindex(buckets: dict[str, dict[str, T]], value: str, key: str) -> None:
        bucket = buckets.get(value)
        if bucket is not None:
            bucket.pop(key, None)
            if not bucket:
                del buckets[value]


# --- pod store --------------------------------------------------------------------------------

INDEX_WORKLOAD = "workload"


def pod_workload_index(pod: SlimPod) -> tuple[str, ...]:
    """Pods by ``namespace/workload`` of the ``kueue-tas.io/workload`` label."""
    return (f"{pod.namespace}/{pod.workload}",) if pod.workload is not None else ()


def _pod_version(pod: SlimPod) -> str:
    return pod.resource_version


class PodStore(Store[SlimPod]):
    """The pod store: ``SlimPod`` by ``namespace/name``, indexed by workload."""

    __slots__ = ()

    def __init__(self) -> None:
        super().__init__({INDEX_WORKLOAD: pod_workload_index}, version_of=_pod_version)

    def of_workload(self, namespace: str, workload: str) -> list[SlimPod]:
        return self.by_index(INDEX_WORKLOAD, f"{namespace}/{workload}")
