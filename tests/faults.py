"""Test-only: a fault-injecting API client over a small in-memory API server.

:func:`faulty_client` returns a real ``kubernetes_asyncio`` ``ApiClient`` whose HTTP session is
replaced at the request layer (``rest_client.pool_manager.request``): every product call still
goes through the generated client, its URL building, JSON bodies and content types, and our
``call_json``; only the bytes on the wire are ours. A :class:`FakeApiServer` answers what no
fault intercepts: GET, POST, PUT and PATCH (merge, strategic merge with ``$patch: delete``,
JSON patch with ``test``, server-side apply of map-lists) with resourceVersion preconditions.

A :class:`Fault` matches a request (method, a path fragment, the N-th matching call) and answers
an HTTP status (a ``Status`` body; 429 with ``Retry-After``) or fails the connection (timeout,
reset) either before the server sees the request or after it applied it (the response is lost).
An :class:`Interleave` runs another actor's action (Kueue evicting, a new leader deciding) just
before a matching request reaches the server: what lands between a decision and its write.
"""

from __future__ import annotations

import copy
import errno
import json
import re
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import aiohttp
from kubernetes_asyncio import client as k8s

Obj = dict[str, Any]

STATUS_REASONS = {
    400: "BadRequest",
    403: "Forbidden",
    404: "NotFound",
    409: "Conflict",
    410: "Gone",
    422: "Invalid",
    429: "TooManyRequests",
    500: "InternalError",
    503: "ServiceUnavailable",
    504: "Timeout",
}


class FakeResponse:
    """What ``call_json`` reads of an aiohttp response."""

    def __init__(self, status: int, body: Obj | None, headers: Mapping[str, str] | None = None) -> None:
        self.status = status
        self.reason = STATUS_REASONS.get(status, "OK" if status < 300 else "Error")
        self.headers = dict(headers or {})
        self._data = json.dumps(body).encode() if body is not None else b""

    async def read(self) -> bytes:
        return self._data

    def release(self) -> None:
        pass


def status_body(code: int, message: str, reason: str | None = None, details: Obj | None = None) -> Obj:
    body: Obj = {
        "kind": "Status",
        "apiVersion": "v1",
        "status": "Failure",
        "message": message,
        "reason": reason or STATUS_REASONS.get(code, ""),
        "code": code,
    }
    if details:
        body["details"] = details
    return body


class ApiStatus(Exception):
    def __init__(self, code: int, message: str, reason: str | None = None) -> None:
        super().__init__(message)
        self.code, self.message, self.reason = code, message, reason


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = dict(target) if isinstance(target, dict) else {}
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = merge_patch(out.get(k), v)
    return out


def _merge_keyed(current: list[Any], patch: list[Any], key: str, *, directives: bool) -> list[Any]:
    out = [dict(x) for x in current]
    for item in patch:
        if directives and item.get("$patch") == "delete":
            out = [x for x in out if x.get(key) != item.get(key)]
            continue
        at = next((i for i, x in enumerate(out) if x.get(key) == item.get(key)), None)
        if at is None:
            out.append(dict(item))
        else:
            out[at] = merge_dict(out[at], item, directives=directives)
    return out


def merge_dict(target: Any, patch: Any, *, directives: bool) -> Any:
    """Strategic merge / apply, enough for our writes: lists of objects merge on ``name`` (or
    ``type`` for conditions); ``$patch: delete`` removes an item (strategic merge only)."""
    if not isinstance(patch, dict) or not isinstance(target, dict):
        return copy.deepcopy(patch)
    out = dict(target)
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        elif isinstance(v, list) and v and all(isinstance(x, dict) for x in v):
            key = "name" if all("name" in x for x in v) else "type"
            out[k] = _merge_keyed(list(out.get(k) or []), v, key, directives=directives)
        else:
            out[k] = merge_dict(out.get(k), v, directives=directives)
    return out


def json_patch(target: Obj, ops: list[Obj]) -> Obj:
    out = copy.deepcopy(target)
    for op in ops:
        parts = [p.replace("~1", "/").replace("~0", "~") for p in op["path"].lstrip("/").split("/")]
        parent: Any = out
        for p in parts[:-1]:
            parent = parent[int(p)] if isinstance(parent, list) else parent[p]
        last = parts[-1]
        if op["op"] == "test":
            actual = parent[int(last)] if isinstance(parent, list) else parent.get(last)
            if actual != op["value"]:
                raise ApiStatus(422, f"the test operation at {op['path']} failed", "Invalid")
        elif op["op"] == "add":
            if isinstance(parent, list):
                parent.insert(len(parent) if last == "-" else int(last), op["value"])
            else:
                parent[last] = op["value"]
        else:
            raise ApiStatus(422, f"unsupported op {op['op']}", "Invalid")
    return out


@dataclass
class FakeApiServer:
    """Objects by path (``/api/v1/namespaces/ns/pods/a``); every write bumps resourceVersion."""

    objects: dict[str, Obj] = field(default_factory=dict)
    rv: int = 100

    def put(self, path: str, obj: Obj) -> Obj:
        """Store ``obj`` as is (with a new resourceVersion): the test's own setup."""
        self.rv += 1
        stored = copy.deepcopy(obj)
        stored.setdefault("metadata", {})["resourceVersion"] = str(self.rv)
        self.objects[path] = stored
        return stored

    def get(self, path: str) -> Obj | None:
        return copy.deepcopy(self.objects.get(path))

    def handle(self, method: str, path: str, content_type: str, body: Any) -> tuple[int, Obj]:
        try:
            return self._handle(method, path, content_type, body)
        except ApiStatus as e:
            return e.code, status_body(e.code, e.message, e.reason)

    def _handle(self, method: str, path: str, content_type: str, body: Any) -> tuple[int, Obj]:
        subresource = path.endswith("/status")
        path = path.removesuffix("/status")
        if method == "POST":
            name = body["metadata"]["name"]
            full = f"{path}/{name}"
            if full in self.objects:
                raise ApiStatus(409, f'"{name}" already exists', "AlreadyExists")
            return 201, self.put(full, body)
        current = self.objects.get(path)
        if current is None:
            raise ApiStatus(404, f'"{path.rsplit("/", 1)[-1]}" not found')
        if method == "GET":
            return 200, copy.deepcopy(current)
        precondition = (body.get("metadata") or {}).get("resourceVersion") if isinstance(body, dict) else None
        if precondition is not None and precondition != current["metadata"]["resourceVersion"]:
            raise ApiStatus(409, "the object has been modified; please apply your changes to the latest version")
        uid = (body.get("metadata") or {}).get("uid") if isinstance(body, dict) else None
        if uid is not None and uid != current["metadata"].get("uid"):
            raise ApiStatus(422, f'metadata.uid: Invalid value: "{uid}": field is immutable', "Invalid")
        if method == "PUT":
            updated = copy.deepcopy(body)
        elif "json-patch" in content_type:
            updated = json_patch(current, body)
        elif "strategic-merge-patch" in content_type:
            updated = merge_dict(current, body, directives=True)
        elif "merge-patch" in content_type:
            updated = merge_patch(current, body)
        elif "apply-patch" in content_type:
            part = {"status": body.get("status")} if subresource else {k: v for k, v in body.items() if k != "status"}
            updated = merge_dict(current, part, directives=False)
        else:
            raise ApiStatus(415, f"unsupported content type {content_type}")
        updated.setdefault("metadata", {})["resourceVersion"] = current["metadata"]["resourceVersion"]
        return 200, self.put(path, updated)


@dataclass
class Fault:
    """Fail the ``nth`` (1-based) request matching ``method`` and ``path`` (a regex searched in
    the URL path), ``times`` times in a row. ``kind``: an HTTP status, ``"timeout"`` or
    ``"reset"``; ``after_apply``: the server applies the request and the answer is lost."""

    method: str
    path: str
    kind: int | str
    nth: int = 1
    times: int = 1
    after_apply: bool = False
    retry_after: float | None = None
    seen: int = 0

    def matches(self, method: str, path: str) -> bool:
        if method != self.method or not re.search(self.path, path):
            return False
        self.seen += 1
        return self.nth <= self.seen < self.nth + self.times


@dataclass
class Interleave:
    """Run ``action`` once, just before the ``nth`` request matching ``method`` and ``path``
    reaches the server: another client's writes that land between our decision and our write."""

    method: str
    path: str
    action: Callable[[], Awaitable[None] | None]
    nth: int = 1
    seen: int = 0

    def matches(self, method: str, path: str) -> bool:
        if method != self.method or not re.search(self.path, path):
            return False
        self.seen += 1
        return self.seen == self.nth


@dataclass
class Call:
    method: str
    path: str
    fault: int | str | None
    applied: bool
    status: int = 0  # the server's answer (0: it never answered)


class FaultySession:
    """Stands in for the aiohttp session of ``kubernetes_asyncio``'s REST client."""

    def __init__(self, server: FakeApiServer) -> None:
        self.server = server
        self.faults: list[Fault] = []
        self.interleaved: list[Interleave] = []
        self.calls: list[Call] = []

    def inject(self, *faults: Fault) -> None:
        self.faults.extend(faults)

    def interleave(self, *hooks: Interleave) -> None:
        self.interleaved.extend(hooks)

    async def request(self, method: str, url: str, headers: Mapping[str, str], data: Any = None, **_: Any) -> Any:
        parts = urlsplit(url)
        path, _query = parts.path, dict(parse_qsl(parts.query))
        body = json.loads(data) if isinstance(data, str | bytes) and data else None
        for hook in [h for h in self.interleaved if h.matches(method, path)]:
            done = hook.action()
            if done is not None:
                await done
        fault = next((f for f in self.faults if f.matches(method, path)), None)
        if fault is not None and not fault.after_apply:
            self.calls.append(Call(method, path, fault.kind, applied=False))
            return self._fail(fault)
        status, answer = self.server.handle(method, path, headers.get("Content-Type", ""), body)
        applied = method != "GET" and status < 300
        if fault is not None:
            self.calls.append(Call(method, path, fault.kind, applied=applied))
            return self._fail(fault)
        self.calls.append(Call(method, path, None, applied=applied, status=status))
        return FakeResponse(status, answer)

    @staticmethod
    def _fail(fault: Fault) -> FakeResponse:
        if fault.kind == "timeout":
            raise aiohttp.ServerTimeoutError("Timeout on reading data from socket")
        if fault.kind == "reset":
            raise aiohttp.ClientOSError(errno.ECONNRESET, "Connection reset by peer")
        assert isinstance(fault.kind, int), fault.kind
        headers = {"Retry-After": f"{fault.retry_after:g}"} if fault.retry_after is not None else {}
        details = {"retryAfterSeconds": int(fault.retry_after)} if fault.retry_after is not None else None
        return FakeResponse(fault.kind, status_body(fault.kind, f"injected {fault.kind}", details=details), headers)

    async def close(self) -> None:
        pass


async def faulty_client(server: FakeApiServer) -> tuple[k8s.ApiClient, FaultySession]:
    """An ApiClient whose requests go to ``server`` through a :class:`FaultySession`."""
    cfg = k8s.Configuration(host="http://apiserver.invalid")
    api = k8s.ApiClient(cfg)
    await api.rest_client.pool_manager.close()
    session = FaultySession(server)
    api.rest_client.pool_manager = session
    return api, session


async def until_settled(step: Callable[[], Awaitable[float | None]], now: list[float], steps: int = 20) -> list[float]:
    """Run ``step`` (the watch catching up, one pass of the controller, the invariants checked)
    until the controller asks for nothing more, moving ``now`` by each delay it asks for; the
    delays. A controller that never settles fails the test."""
    delays: list[float] = []
    for _ in range(steps):
        delay = await step()
        if delay is None:
            return delays
        delays.append(delay)
        now[0] += delay
    raise AssertionError(f"never settled: delays {delays}")


# The faults every write path is tried against (ids name them in test output).
ALL_FAULTS: list[tuple[str, int | str, bool, float | None]] = [
    ("409", 409, False, None),
    ("403", 403, False, None),
    ("404", 404, False, None),
    ("410", 410, False, None),
    ("429", 429, False, 3.0),
    ("500", 500, False, None),
    ("500-applied", 500, True, None),
    ("timeout", "timeout", False, None),
    ("timeout-applied", "timeout", True, None),
    ("reset", "reset", False, None),
    ("reset-applied", "reset", True, None),
]
