"""Test-only (deterministic simulation): the in-memory API server the controller talks to.

It extends the request-level fake of ``tests/faults.py`` (same merge, strategic-merge, JSON
patch and apply semantics, same ``FakeResponse``) with what a whole cluster needs: objects keyed
by collection, one resourceVersion sequence, LIST, DELETE with preconditions, generateName,
and watches fed from an event log. Nothing here answers on its own: every write the
controller sends waits in :attr:`SimApiServer.pending` and every watch event waits on its
stream until the simulation's seeded scheduler picks it (``dst_sim.Simulation``), so one seed
decides every delivery order, write outcome and fault.
"""

from __future__ import annotations

import asyncio
import json
import ssl
from bisect import bisect_left, bisect_right
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any
from unittest import mock
from urllib.parse import parse_qsl, urlsplit

import aiohttp
import orjson
from faults import ApiStatus, FakeResponse, json_patch, merge_dict, merge_patch, status_body
from kubernetes_asyncio import client as k8s

Obj = dict[str, Any]
Key = tuple[str, str, str]  # (collection "group/version/plural", namespace or "", name)


def _clone(obj: Obj) -> Obj:
    """A deep copy of a JSON-shaped object; a round trip through orjson is several times faster
    than ``copy.deepcopy`` and every stored object is JSON (what an apiserver stores)."""
    copied: Obj = orjson.loads(orjson.dumps(obj))
    return copied


def split_path(path: str) -> tuple[str, str, str | None, str | None]:
    """(collection, namespace, name, subresource) of an API path."""
    parts = path.strip("/").split("/")
    if parts[0] == "api":
        gv, rest = parts[1], parts[2:]
    else:
        gv, rest = f"{parts[1]}/{parts[2]}", parts[3:]
    ns = ""
    if len(rest) >= 3 and rest[0] == "namespaces":
        ns, rest = rest[1], rest[2:]
    plural = rest[0]
    name = rest[1] if len(rest) > 1 else None
    sub = rest[2] if len(rest) > 2 else None
    return f"{gv}/{plural}", ns, name, sub


@dataclass
class LogEntry:
    rv: int
    collection: str
    type: str
    obj: Obj


class WatchStream:
    """One open watch: the lines the scheduler has delivered, read by the reflector."""

    def __init__(self, wid: int, collection: str, namespace: str, since: int) -> None:
        self.wid = wid
        self.collection = collection
        self.namespace = namespace
        self.cursor = since  # the last resourceVersion delivered
        self.queue: asyncio.Queue[bytes | None] = asyncio.Queue()
        self.closed = False
        self.status = 200
        self.reason = "OK"
        self.headers: dict[str, str] = {}
        self.content = self

    async def iter_any(self) -> AsyncIterator[bytes]:
        while True:
            chunk = await self.queue.get()
            if chunk is None:
                return
            yield chunk

    def push(self, event_type: str, obj: Obj) -> None:
        self.queue.put_nowait(json.dumps({"type": event_type, "object": obj}).encode() + b"\n")

    def end(self) -> None:
        self.closed = True
        self.queue.put_nowait(None)

    def release(self) -> None:
        self.closed = True

    def close(self) -> None:
        self.closed = True


@dataclass
class PendingWrite:
    """A write the controller sent; the scheduler decides when and how it completes."""

    rid: int
    method: str
    path: str
    content_type: str
    body: Any
    future: asyncio.Future[Any]
    owner: int  # which controller incarnation (leader term) sent it

    def describe(self) -> str:
        collection, _, name, sub = split_path(self.path)
        coll = collection.rsplit("/", 1)[-1]
        return f"{self.method} {coll}/{name}{'/' + sub if sub else ''} ({self.content_type.rsplit('/', 1)[-1]})"


@dataclass
class SimApiServer:
    objects: dict[Key, Obj] = field(default_factory=dict)
    rv: int = 1000
    log: list[LogEntry] = field(default_factory=list)
    compacted: int = 0  # watches from before this resourceVersion get 410 Gone
    watches: list[WatchStream] = field(default_factory=list)
    pending: list[PendingWrite] = field(default_factory=list)
    events: list[Obj] = field(default_factory=list)  # Events created (kept out of the store)
    uid_seq: int = 0
    next_id: int = 0
    term: int = 0  # the current controller incarnation, stamped on its writes
    clock: Callable[[], float] = lambda: 0.0  # virtual seconds, set by the simulation
    # Speed only (every step asks for both): collection -> (rv, its objects in key order), and
    # collection -> the resourceVersions of its log entries, ascending.
    _items: dict[str, tuple[int, list[Obj]]] = field(default_factory=dict)
    _log_rvs: dict[str, list[int]] = field(default_factory=dict)

    # --- the store ---------------------------------------------------------------------------

    def _bump(self, collection: str, kind: str, obj: Obj) -> Obj:
        self.rv += 1
        obj.setdefault("metadata", {})["resourceVersion"] = str(self.rv)
        self.log.append(LogEntry(self.rv, collection, kind, _clone(obj)))
        self._log_rvs.setdefault(collection, []).append(self.rv)
        return obj

    def create(self, collection: str, obj: Obj) -> Obj:
        meta = obj.setdefault("metadata", {})
        if not meta.get("name") and meta.get("generateName"):
            self.next_id += 1
            meta["name"] = f"{meta['generateName']}{self.next_id:05d}"
        key = (collection, meta.get("namespace") or "", meta["name"])
        if key in self.objects:
            raise ApiStatus(409, f'"{meta["name"]}" already exists', "AlreadyExists")
        self.uid_seq += 1
        meta.setdefault("uid", f"uid-{self.uid_seq:05d}")
        meta.setdefault("creationTimestamp", "2030-01-01T00:00:00Z")
        stored = self._bump(collection, "ADDED", _clone(obj))
        self.objects[key] = stored
        return _clone(stored)

    def replace(self, collection: str, obj: Obj) -> Obj:
        meta = obj["metadata"]
        key = (collection, meta.get("namespace") or "", meta["name"])
        if key not in self.objects:
            raise ApiStatus(404, f'"{meta["name"]}" not found')
        stored = self._bump(collection, "MODIFIED", _clone(obj))
        self.objects[key] = stored
        return _clone(stored)

    def delete(self, collection: str, namespace: str, name: str) -> Obj | None:
        gone = self.objects.pop((collection, namespace, name), None)
        if gone is not None:
            self._bump(collection, "DELETED", gone)
        return gone

    def get(self, collection: str, namespace: str, name: str) -> Obj | None:
        obj = self.objects.get((collection, namespace, name))
        return _clone(obj) if obj is not None else None

    def last_rv(self, collection: str) -> int:
        """The resourceVersion of the last change to ``collection`` (0: none yet)."""
        rvs = self._log_rvs.get(collection)
        return rvs[-1] if rvs else 0

    def items(self, collection: str) -> list[Obj]:
        """The objects of ``collection`` in key order (live references: read, do not change).
        Every change of the store bumps ``rv``, so a list made at the current rv is still true."""
        cached = self._items.get(collection)
        if cached is None or cached[0] != self.rv:
            found = sorted((k, o) for k, o in self.objects.items() if k[0] == collection)
            cached = (self.rv, [o for _, o in found])
            self._items[collection] = cached
        return list(cached[1])

    # --- watches -------------------------------------------------------------------------------

    def backlog(self, w: WatchStream) -> LogEntry | None:
        """The next event ``w`` has not been sent yet."""
        rvs = self._log_rvs.get(w.collection)
        if not rvs:
            return None
        i = bisect_right(rvs, w.cursor)
        if i == len(rvs):
            return None
        # The log holds one entry per rv, from the first rv bumped, in order.
        return self.log[self._log_index(rvs[i])]

    def _log_index(self, rv: int) -> int:
        return bisect_left(self.log, rv, key=lambda entry: entry.rv)

    def log_after(self, rv: int) -> list[LogEntry]:
        # The log is ordered by rv; a bisect would be faster, the log is small.
        lo, hi = 0, len(self.log)
        while lo < hi:
            mid = (lo + hi) // 2
            if self.log[mid].rv <= rv:
                lo = mid + 1
            else:
                hi = mid
        return self.log[lo:]

    def deliver(self, w: WatchStream) -> LogEntry | None:
        entry = self.backlog(w)
        if entry is None:
            return None
        w.cursor = entry.rv
        w.push(entry.type, entry.obj)
        return entry

    def expire(self, w: WatchStream) -> None:
        """410 Gone on an open watch: the reflector re-lists."""
        self.compacted = max(self.compacted, w.cursor)
        w.push("ERROR", status_body(410, "too old resource version", "Expired"))
        w.end()

    def open_watches(self) -> list[WatchStream]:
        self.watches = [w for w in self.watches if not w.closed]
        return self.watches

    # --- requests --------------------------------------------------------------------------------

    def serve_read(self, method: str, path: str, query: Mapping[str, str]) -> Any:
        collection, ns, name, _ = split_path(path)
        if name is None and query.get("watch") in ("1", "true"):
            since = int(query.get("resourceVersion") or "0")
            w = WatchStream(len(self.log), collection, ns, since)
            if since < self.compacted:
                w.push("ERROR", status_body(410, "too old resource version", "Expired"))
                w.end()
            self.watches.append(w)
            return w
        if name is None:
            items = [_clone(o) for o in self.items(collection) if not ns or o["metadata"].get("namespace") == ns]
            return FakeResponse(200, {"kind": "List", "metadata": {"resourceVersion": str(self.rv)}, "items": items})
        obj = self.get(collection, ns, name)
        if obj is None:
            return FakeResponse(404, status_body(404, f'"{name}" not found'))
        return FakeResponse(200, obj)

    def apply_write(self, method: str, path: str, content_type: str, body: Any) -> tuple[int, Obj]:
        try:
            return self._write(method, path, content_type, body)
        except ApiStatus as e:
            return e.code, status_body(e.code, e.message, e.reason)

    def _write(self, method: str, path: str, content_type: str, body: Any) -> tuple[int, Obj]:
        collection, ns, name, sub = split_path(path)
        if method == "POST":
            obj = _clone(body)
            if ns:
                obj.setdefault("metadata", {})["namespace"] = ns
            return 201, self.create(collection, obj)
        assert name is not None, path
        current = self.objects.get((collection, ns, name))
        if current is None:
            raise ApiStatus(404, f'"{name}" not found')
        if method == "DELETE":
            uid = ((body or {}).get("preconditions") or {}).get("uid")
            if uid is not None and uid != current["metadata"].get("uid"):
                raise ApiStatus(409, "Precondition failed: UID in precondition does not match the object")
            self.delete(collection, ns, name)
            return 200, _clone(current)
        meta = (body.get("metadata") or {}) if isinstance(body, dict) else {}
        precondition = meta.get("resourceVersion")
        if precondition is not None and precondition != current["metadata"]["resourceVersion"]:
            raise ApiStatus(409, "the object has been modified; please apply your changes to the latest version")
        uid = meta.get("uid")
        if uid is not None and uid != current["metadata"].get("uid"):
            raise ApiStatus(409, "Precondition failed: UID in precondition does not match the object")
        if method == "PUT":
            updated = _clone(body)
        elif "json-patch" in content_type:
            updated = json_patch(current, body)
        elif "strategic-merge-patch" in content_type:
            updated = merge_dict(current, body, directives=True)
        elif "merge-patch" in content_type:
            updated = merge_patch(current, body)
        elif "apply-patch" in content_type:
            part = (
                {"status": body.get("status")} if sub == "status" else {k: v for k, v in body.items() if k != "status"}
            )
            part.pop("metadata", None)
            part.pop("apiVersion", None)
            part.pop("kind", None)
            updated = merge_dict(current, part, directives=False)
        else:
            raise ApiStatus(415, f"unsupported content type {content_type}")
        if sub == "status":
            updated = {**current, "status": updated.get("status")}
        updated["metadata"] = {**updated.get("metadata", {}), "uid": current["metadata"].get("uid")}
        return 200, self.replace(collection, updated)


class SimSession:
    """Stands in for the aiohttp session of ``kubernetes_asyncio``'s REST client: reads are
    answered at once, watches open a :class:`WatchStream`, writes wait in the pending pool."""

    def __init__(self, server: SimApiServer, owner: int) -> None:
        self.server = server
        self.owner = owner

    async def request(self, method: str, url: str, headers: Mapping[str, str], data: Any = None, **_: Any) -> Any:
        parts = urlsplit(url)
        path, query = parts.path, dict(parse_qsl(parts.query))
        body = json.loads(data) if isinstance(data, str | bytes) and data else None
        collection = split_path(path)[0]
        if method == "GET":
            return self.server.serve_read(method, path, query)
        if collection.endswith("/events"):
            # Events are recorded at once (never faulted): they are what the monitor reads as
            # "explained", and the recorder already drops them on errors by design.
            code, obj = self.server.apply_write(method, path, headers.get("Content-Type", ""), body)
            if code < 300:
                self.server.events.append({**obj, "sim_time": self.server.clock()})
            return FakeResponse(code, obj)
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Any] = loop.create_future()
        self.server.next_id += 1
        self.server.pending.append(
            PendingWrite(self.server.next_id, method, path, headers.get("Content-Type", ""), body, future, self.owner)
        )
        return await future

    async def close(self) -> None:
        pass


def complete(server: SimApiServer, write: PendingWrite, outcome: str) -> str:
    """Finish ``write``: ``land`` (the server applies it and answers), ``refuse`` (500, not
    applied), ``lost`` (timeout, not applied) or ``landed-lost`` (applied, the answer lost).
    A write whose caller has gone (cancelled: a deposed leader) still lands when told to."""
    server.pending.remove(write)
    applied = outcome in ("land", "landed-lost")
    code: int = 0
    answer: Obj = {}
    if applied:
        code, answer = server.apply_write(write.method, write.path, write.content_type, write.body)
    if write.future.done():
        return f"{code}" if applied else "dropped"
    if outcome in ("lost", "landed-lost"):
        write.future.set_exception(aiohttp.ServerTimeoutError("Timeout on reading data from socket"))
        return f"{code}+timeout" if applied else "timeout"
    if outcome == "refuse":
        write.future.set_result(FakeResponse(500, status_body(500, "injected 500")))
        return "500"
    write.future.set_result(FakeResponse(code, answer))
    return str(code)


_UNUSED_TLS = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)


async def sim_client(server: SimApiServer, owner: int) -> k8s.ApiClient:
    """A real ``kubernetes_asyncio`` ApiClient whose HTTP layer is ``server``."""
    # The client builds a TLS context it will never use here (the session is replaced below);
    # loading the system's CA store for it took a tenth of a schedule's time.
    with mock.patch.object(ssl, "create_default_context", lambda **_: _UNUSED_TLS):
        api = k8s.ApiClient(k8s.Configuration(host="http://apiserver.invalid"))
    await api.rest_client.pool_manager.close()
    api.rest_client.pool_manager = SimSession(server, owner)  # type: ignore[assignment]
    return api
