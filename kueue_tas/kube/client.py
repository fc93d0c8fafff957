"""The request path: every call kueue-tas makes to the API server goes through here.

- :func:`make_api_client` builds a ``kubernetes_asyncio`` ``ApiClient`` (kubeconfig or in-cluster)
  with a given connection pool, and with loopback excluded from any HTTP(S) proxy (the proxy
  variables are read once, when the client is made).
- :func:`send` issues one raw request (the reflector's LIST and WATCH, applies by URL);
  :func:`call_json` awaits a generated-client call. Both return raw bytes decoded with ``json``
  (never the generated models) and raise the :mod:`kueue_tas.kube.errors` family: an
  ``ApiError`` subclass for a non-2xx response, ``TransportError`` for no response at all.
- :func:`merge_patch_custom`, :func:`apply_status`, :func:`patch_pod` send the content types the
  generated client gets wrong by default (a dict to a CRD would go out as JSON-patch).
"""

from __future__ import annotations

import contextlib
import copy
import json
import os
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Final, Literal

import aiohttp
from aiolimiter import AsyncLimiter
from kubernetes_asyncio import client as k8s
from kubernetes_asyncio import config as k8s_config
from kubernetes_asyncio.client.exceptions import ApiException
from yarl import URL

from kueue_tas.api.constants import FIELD_MANAGER
from kueue_tas.kube.errors import ApiError, NotLeading, TransportError, error_from_response
from kueue_tas.version import version

MERGE_PATCH: Final = "application/merge-patch+json"
STRATEGIC_MERGE_PATCH: Final = "application/strategic-merge-patch+json"
JSON_PATCH: Final = "application/json-patch+json"
APPLY_PATCH: Final = "application/apply-patch+yaml"

DEFAULT_TIMEOUT_SECONDS: Final = 30.0
LOOPBACK_HOSTS: Final = ("127.0.0.1", "localhost", "::1")

Timeout = float | aiohttp.ClientTimeout | None


class ClientConfigError(ValueError):
    """No usable client configuration (kubeconfig missing or invalid, no service account)."""


# ---- the request path ---------------------------------------------------------------------------


def map_api_exception(exc: ApiException) -> ApiError:
    """``ApiException`` (kubernetes_asyncio) -> the matching :class:`ApiError` subclass."""
    headers = exc.headers if isinstance(getattr(exc, "headers", None), Mapping) else None
    return error_from_response(int(exc.status or 0), exc.reason, exc.body, headers=headers)


def _transport(exc: BaseException, request: str = "") -> TransportError:
    return TransportError(str(exc) or type(exc).__name__, request=request)


async def call_json(request: Awaitable[Any]) -> dict[str, Any]:
    """Await a generated-client call made with ``_preload_content=False``; return the JSON body."""
    try:
        resp = await request
        try:
            status: int = resp.status
            data: bytes = await resp.read()
            http_reason: str | None = resp.reason
            headers: Mapping[str, str] | None = resp.headers
        finally:
            resp.release()
    except ApiException as e:
        raise map_api_exception(e) from e
    except (aiohttp.ClientError, OSError, TimeoutError) as e:
        raise _transport(e) from e
    if not 200 <= status <= 299:
        raise error_from_response(status, http_reason, data, headers=headers)
    if not data:
        return {}
    out = json.loads(data)
    return out if isinstance(out, dict) else {"items": out}


async def send(
    api: k8s.ApiClient,
    method: str,
    path: str,
    *,
    query: Sequence[tuple[str, str]] = (),
    body: Any = None,
    content_type: str | None = None,
    timeout: Timeout = DEFAULT_TIMEOUT_SECONDS,
) -> aiohttp.ClientResponse:
    """One raw request; returns the (2xx) response unread, for the caller to read or stream
    and release. Non-2xx responses raise ApiError subclasses, failed connections TransportError."""
    headers = {"Accept": "application/json"}
    if content_type is not None:
        headers["Content-Type"] = content_type
    what = f"{method} {path}"
    try:
        response: aiohttp.ClientResponse = await api.call_api(
            path,
            method,
            query_params=list(query),
            header_params=headers,
            body=body,
            auth_settings=["BearerToken"],
            _preload_content=False,
            _request_timeout=timeout,
        )
        if response.status < 300:
            return response
        try:
            data = await response.read()
        finally:
            response.release()
    except ApiException as e:
        raise map_api_exception(e) from e
    except (aiohttp.ClientError, OSError, TimeoutError) as e:
        raise _transport(e, what) from e
    raise error_from_response(response.status, response.reason, data, request=what, headers=response.headers)


async def request_json(
    api: k8s.ApiClient,
    method: str,
    path: str,
    *,
    query: Sequence[tuple[str, str]] = (),
    body: Any = None,
    content_type: str | None = None,
    timeout: Timeout = DEFAULT_TIMEOUT_SECONDS,
) -> dict[str, Any]:
    """:func:`send`, then the JSON body."""
    response = await send(api, method, path, query=query, body=body, content_type=content_type, timeout=timeout)
    try:
        data = await response.read()
    except (aiohttp.ClientError, OSError, TimeoutError) as e:
        raise _transport(e, f"{method} {path}") from e
    finally:
        response.release()
    out = json.loads(data) if data else {}
    return out if isinstance(out, dict) else {"items": out}


def raw_kwargs(timeout: Timeout, **kw: Any) -> dict[str, Any]:
    """Keyword arguments the typing stubs do not declare (``_content_type``), plus raw reads."""
    kw["_preload_content"] = False
    if timeout is not None:
        kw["_request_timeout"] = timeout
    return kw


# ---- client construction ------------------------------------------------------------------------


# The library function is unannotated; give it its real signature once.
_load_incluster_config: Callable[..., None] = k8s_config.load_incluster_config


def ensure_no_proxy(hosts: tuple[str, ...] = LOOPBACK_HOSTS) -> None:
    """Add loopback to NO_PROXY/no_proxy so the proxy lookup never proxies 127.0.0.1."""
    for var in ("NO_PROXY", "no_proxy"):
        current = [x.strip() for x in os.environ.get(var, "").split(",") if x.strip()]
        missing = [h for h in hosts if h not in current]
        if missing or var not in os.environ:
            os.environ[var] = ",".join([*current, *missing])


class RateLimitedApiClient(k8s.ApiClient):
    """An ApiClient that starts at most ``qps`` requests a second after a first ``burst``
    (client-go's QPS and Burst; Kueue ships 300 and 500 for its own), so a burst of decisions
    or pod patches queues here instead of loading the apiserver that Kueue shares with us.
    Watches count when they start, as in client-go."""

    def __init__(self, configuration: k8s.Configuration, *, qps: float, burst: int) -> None:
        super().__init__(configuration)
        # A leaky bucket of ``burst`` tokens refilled at ``qps``: the same budget as a token bucket.
        self._limiter = AsyncLimiter(burst, burst / qps) if qps > 0 else None
        self._may_write: Callable[[], bool] | None = None
        _resolve_environment_once(self.rest_client, configuration)

    def fence_writes(self, may_write: Callable[[], bool]) -> None:
        """Ask ``may_write`` just before sending any write but a Lease's, and refuse it with
        :class:`NotLeading` when it says no. The leader elector's answer: a process paused past
        its renew deadline (a stop signal, a frozen VM, a long pause) resumes with writes it
        decided before the pause still queued, and may send them before its renew loop runs and
        notices that another replica leads (chaos seed 4048's review); each is refused here, in
        the same step of the event loop that would have sent it."""
        self._may_write = may_write

    async def request(self, method: str, url: str, *args: Any, **kwargs: Any) -> Any:
        if self._limiter is not None:
            await self._limiter.acquire()
        if (
            self._may_write is not None
            and method in _WRITES
            and _LEASES not in url  # the elector's own renewals and release
            and not self._may_write()
        ):
            raise NotLeading(request=f"{method} {URL(url).path}")
        return await super().request(method, url, *args, **kwargs)


_WRITES: Final = frozenset({"POST", "PUT", "PATCH", "DELETE"})
_LEASES: Final = "/apis/coordination.k8s.io/"


def _resolve_environment_once(rest: Any, configuration: k8s.Configuration) -> None:
    """Read the proxy settings of the environment once, here, instead of on every request.

    kubernetes_asyncio opens its session with ``trust_env=True``, which makes aiohttp look up
    ``~/.netrc`` and the proxy variables in a worker thread twice per request: about a tenth of
    the controller's CPU under a burst of admissions (issue 15, py-spy). The apiserver never
    takes netrc credentials, and a proxy the variables name for this host is found here and set
    on the client, as a kubeconfig's ``proxy-url`` would be."""
    session = rest.pool_manager
    if not isinstance(session, aiohttp.ClientSession) or not session.trust_env:
        return
    if not rest.proxy:
        with contextlib.suppress(LookupError, ValueError):
            proxy, auth = aiohttp.helpers.get_env_proxy_for_url(URL(configuration.host or ""))
            rest.proxy = str(proxy)
            if auth is not None:
                rest.proxy_headers = {**(rest.proxy_headers or {}), "Proxy-Authorization": auth.encode()}
    # The session object is the library's; only this switch changes (aiohttp reads it per request).
    session._trust_env = False


async def make_api_client(
    kubeconfig: str | Path | None, *, pool: int, qps: float = 0.0, burst: int = 1
) -> tuple[k8s.ApiClient, str]:
    """(client, where its configuration came from): ``kubeconfig``, else in-cluster (service
    account), else ``$KUBECONFIG`` / ``~/.kube/config``; ``qps`` > 0 limits the requests it
    starts (``burst`` at once). Close it with ``await api.close()``."""
    ensure_no_proxy()
    cfg = k8s.Configuration()
    try:
        if kubeconfig is not None:
            await k8s_config.load_kube_config(config_file=str(kubeconfig), client_configuration=cfg)
            source = str(kubeconfig)
        elif os.environ.get("KUBERNETES_SERVICE_HOST"):
            _load_incluster_config(client_configuration=cfg)
            source = "in-cluster"
        else:
            path = os.environ.get("KUBECONFIG") or os.path.expanduser("~/.kube/config")
            await k8s_config.load_kube_config(config_file=path, client_configuration=cfg)
            source = path
    except (k8s_config.ConfigException, OSError) as e:
        raise ClientConfigError(f"cannot load Kubernetes client configuration: {e}") from e
    cfg.connection_pool_maxsize = pool
    api = RateLimitedApiClient(cfg, qps=qps, burst=burst)
    api.user_agent = f"kueue-tas/{version()}"
    return api, source


def kubeconfig_namespace(path: str) -> str | None:
    """The namespace of the kubeconfig's current context, if it names one."""
    try:
        _, active = k8s_config.list_kube_config_contexts(config_file=path)
    except (k8s_config.ConfigException, OSError, ValueError, TypeError):
        return None
    context = (active or {}).get("context") or {}
    namespace = context.get("namespace")
    return str(namespace) if namespace else None


# ---- writes -------------------------------------------------------------------------------------


def _with_resource_version(patch: Mapping[str, Any], resource_version: str | None) -> dict[str, Any]:
    body = copy.deepcopy(dict(patch))
    if resource_version is not None:
        meta = dict(body.get("metadata") or {})
        meta["resourceVersion"] = resource_version
        body["metadata"] = meta
    return body


async def merge_patch_custom(
    api: k8s.ApiClient,
    *,
    group: str,
    version: str,
    plural: str,
    name: str,
    patch: Mapping[str, Any],
    namespace: str | None = None,
    subresource: Literal["status"] | None = None,
    resource_version: str | None = None,
    field_manager: str = FIELD_MANAGER,
    timeout: Timeout = DEFAULT_TIMEOUT_SECONDS,
) -> dict[str, Any]:
    """JSON merge patch (RFC 7386) of a custom object or its status; with ``resource_version``
    the write fails with ``Conflict`` if the object changed. Returns the updated object."""
    co = k8s.CustomObjectsApi(api)
    body = _with_resource_version(patch, resource_version)
    kw = raw_kwargs(timeout, _content_type=MERGE_PATCH, field_manager=field_manager)
    if namespace is None:
        fn = co.patch_cluster_custom_object_status if subresource == "status" else co.patch_cluster_custom_object
        return await call_json(fn(group, version, plural, name, body, **kw))
    nfn = co.patch_namespaced_custom_object_status if subresource == "status" else co.patch_namespaced_custom_object
    return await call_json(nfn(group, version, namespace, plural, name, body, **kw))


async def apply_status(
    api: k8s.ApiClient,
    *,
    group: str,
    version: str,
    plural: str,
    kind: str,
    name: str,
    status: Mapping[str, Any],
    namespace: str | None = None,
    field_manager: str = FIELD_MANAGER,
    force: bool = True,
    timeout: Timeout = DEFAULT_TIMEOUT_SECONDS,
    resource_version: str | None = None,
) -> dict[str, Any]:
    """Server-side apply of ``status`` on the status subresource, as ``field_manager``.

    Only the fields in ``status`` become ours (e.g. one ``admissionChecks`` entry, a map-list
    keyed by name); ``force`` takes them over from another manager (Kueue created the entry).
    With ``resource_version`` the apply fails with ``Conflict`` if the object changed."""
    metadata: dict[str, Any] = {"name": name}
    if namespace is not None:
        metadata["namespace"] = namespace
    if resource_version is not None:
        metadata["resourceVersion"] = resource_version
    body = {"apiVersion": f"{group}/{version}", "kind": kind, "metadata": metadata, "status": dict(status)}
    co = k8s.CustomObjectsApi(api)
    # "true"/"false", not Python's "True" (the generated client urlencodes the bool as is).
    kw = raw_kwargs(timeout, _content_type=APPLY_PATCH, field_manager=field_manager, force="true" if force else "false")
    if namespace is None:
        return await call_json(co.patch_cluster_custom_object_status(group, version, plural, name, body, **kw))
    return await call_json(
        co.patch_namespaced_custom_object_status(group, version, namespace, plural, name, body, **kw)
    )


async def patch_pod(
    api: k8s.ApiClient,
    *,
    namespace: str,
    name: str,
    patch: Mapping[str, Any],
    resource_version: str | None = None,
    strategy: Literal["merge", "strategic"] = "merge",
    field_manager: str = FIELD_MANAGER,
    timeout: Timeout = DEFAULT_TIMEOUT_SECONDS,
) -> dict[str, Any]:
    """Patch a pod. ``strategy="merge"``: RFC 7386 (lists replaced whole, e.g. the remaining
    ``schedulingGates`` or null); ``"strategic"``: SMP (``{"$patch": "delete", "name": g}``
    removes one gate). With ``resource_version`` a changed pod gives ``Conflict``.
    Returns the patched pod as a dict."""
    body = _with_resource_version(patch, resource_version)
    content_type = MERGE_PATCH if strategy == "merge" else STRATEGIC_MERGE_PATCH
    core = k8s.CoreV1Api(api)
    kw = raw_kwargs(timeout, _content_type=content_type, field_manager=field_manager)
    return await call_json(core.patch_namespaced_pod(name, namespace, body, **kw))


async def delete_pod(
    api: k8s.ApiClient,
    *,
    namespace: str,
    name: str,
    uid: str,
    timeout: Timeout = DEFAULT_TIMEOUT_SECONDS,
) -> dict[str, Any]:
    """Delete a pod gracefully (its own grace period), only the incarnation ``uid``: a pod
    re-created under the same name gives ``Conflict`` and is left alone."""
    options = k8s.V1DeleteOptions(preconditions=k8s.V1Preconditions(uid=uid))
    core = k8s.CoreV1Api(api)
    return await call_json(core.delete_namespaced_pod(name, namespace, body=options, **raw_kwargs(timeout)))
