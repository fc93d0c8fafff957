"""Keyed object stores with secondary indexes, filled by informers.

Keys are ``namespace/name`` (namespaced resources) or ``name`` (cluster-scoped).
An index maps each value an index function returns for an object to the objects
with that value (e.g. pods by node name, pods by ``namespace/workload``).

Stores are mutated only by their informer, on the event loop; readers must not
hold the lists they get across an ``await`` if they need them to stay current
(the lists are copies, so they stay valid, just not current).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, Generic, TypeVar

from kueue_tas.cache.slim import SlimPod

T = TypeVar("T")

IndexFunc = Callable[[T], Iterable[str]]
"""The index values of an object (empty: not indexed)."""


def object_key(namespace: str | None, name: str) -> str:
    return f"{namespace}/{name}" if namespace else name


def raw_key(raw: Mapping[str, Any]) -> str:
    """The store key of a raw object dict."""
    meta = raw.get("metadata") or {}
    return object_key(meta.get("namespace"), meta.get("name") or "")


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
        self._indexers: dict[str, IndexFunc[T]] = {}
        self._indexes: dict[str, dict[str, dict[str, T]]] = {}
        for name, fn in (indexers or {}).items():
            self.add_index(name, fn)

    # --- reads ------------------------------------------------------------------------------

    def get(self, key: str) -> T | None:
        return self._items.get(key)

    def get_by_name(self, namespace: str | None, name: str) -> T | None:
        return self._items.get(object_key(namespace, name))

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

    def items(self) -> list[tuple[str, T]]:
        return list(self._items.items())

    def objects(self, namespace: str | None = None) -> list[T]:
        """Every object, or those of one namespace."""
        if namespace is None:
            return list(self._items.values())
        prefix = namespace + "/"
        return [obj for key, obj in self._items.items() if key.startswith(prefix)]

    def resource_version(self, key: str) -> str | None:
        if self._version_of is not None:
            obj = self._items.get(key)
            return None if obj is None else self._version_of(obj)
        return self._rvs.get(key)

    def index_names(self) -> list[str]:
        return list(self._indexers)

    def by_index(self, index: str, value: str) -> list[T]:
        """Objects whose index function returned ``value`` (KeyError for an unknown index)."""
        bucket = self._indexes[index].get(value)
        return list(bucket.values()) if bucket else []

    def keys_by_index(self, index: str, value: str) -> list[str]:
        bucket = self._indexes[index].get(value)
        return list(bucket) if bucket else []

    def count_by_index(self, index: str, value: str) -> int:
        bucket = self._indexes[index].get(value)
        return len(bucket) if bucket else 0

    def index_values(self, index: str) -> list[str]:
        """The values that currently have at least one object in ``index``."""
        return list(self._indexes[index])

    # --- writes (informer only) -------------------------------------------------------------

    def add_index(self, name: str, fn: IndexFunc[T]) -> None:
        """Add an index and fill it from the current contents."""
        if name in self._indexers:
            raise ValueError(f"index {name!r} already exists")
        self._indexers[name] = fn
        buckets: dict[str, dict[str, T]] = {}
        self._indexes[name] = buckets
        for key, obj in self._items.items():
            for value in fn(obj):
                buckets.setdefault(value, {})[key] = obj

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

    def clear(self) -> None:
        self._items.clear()
        self._rvs.clear()
        for buckets in self._indexes.values():
            buckets.clear()

    @staticmethod
    def _unindex(buckets: dict[str, dict[str, T]], value: str, key: str) -> None:
        bucket = buckets.get(value)
        if bucket is not None:
            bucket.pop(key, None)
            if not bucket:
                del buckets[value]


# --- pod store --------------------------------------------------------------------------------

INDEX_NODE = "node"
INDEX_WORKLOAD = "workload"


def pod_node_index(pod: SlimPod) -> tuple[str, ...]:
    """Pods by bound node name (unbound pods are not indexed)."""
    return (pod.node_name,) if pod.node_name else ()


def pod_workload_index(pod: SlimPod) -> tuple[str, ...]:
    """Pods by ``namespace/workload`` of the ``kueue-tas.io/workload`` label."""
    return (f"{pod.namespace}/{pod.workload}",) if pod.workload is not None else ()


def _pod_version(pod: SlimPod) -> str:
    return pod.resource_version


class PodStore(Store[SlimPod]):
    """The pod store: ``SlimPod`` by ``namespace/name``, indexed by node and by workload."""

    __slots__ = ()

    def __init__(self) -> None:
        super().__init__({INDEX_NODE: pod_node_index, INDEX_WORKLOAD: pod_workload_index}, version_of=_pod_version)

    def on_node(self, node_name: str) -> list[SlimPod]:
        return self.by_index(INDEX_NODE, node_name)

    def of_workload(self, namespace: str, workload: str) -> list[SlimPod]:
        return self.by_index(INDEX_WORKLOAD, f"{namespace}/{workload}")
