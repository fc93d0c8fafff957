"""One-shot reads of a live cluster for ``describe`` and ``capacity``: LIST and GET, never a watch.

Objects are kept in the forms the controller's informers keep them (slim pods and nodes,
pydantic models of the Kueue objects), so that the pure views built from them see what the
controller sees. Every failure becomes a :class:`ClusterReadError` with one line for the user.
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

import pydantic
from kubernetes_asyncio import client as k8s

from kueue_tas.api import constants as c
from kueue_tas.api.kueue_objects import AdmissionCheck, ClusterQueue, ResourceFlavor, Topology
from kueue_tas.api.quantity import QuantityError
from kueue_tas.api.workload import Workload
from kueue_tas.capacity.daemonsets import DaemonSetError, DaemonSetSpec, daemonset_spec
from kueue_tas.capacity.rules import FlavorSpec, flavor_specs, our_checks
from kueue_tas.controllers.informers import slim_node
from kueue_tas.kube.client import call_json, kubeconfig_namespace, raw_kwargs
from kueue_tas.kube.errors import ApiError, Forbidden, NotFound, TransportError, Unauthorized
from kueue_tas.kube.slim import SlimPod, slim_pod
from kueue_tas.runtime.config import ConfigError, Settings
from kueue_tas.runtime.logging import configure_logging
from kueue_tas.runtime.manager import connect
from kueue_tas.topology.flavors import FlavorBinding, FlavorMappingError, bind_flavors
from kueue_tas.topology.model import NodeInfo

T = TypeVar("T")
M = TypeVar("M", bound=pydantic.BaseModel)

PAGE_SIZE = 500
TIMEOUT_SECONDS = 30.0
SERVICE_ACCOUNT_NAMESPACE = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

# Only these pods can be charged to a node (see ``kueue_tas.capacity.rules.pod_charge``); asking the API
# server for just them keeps a 100,000-pod cluster's read small without changing any number.
CHARGEABLE_PODS = "spec.nodeName!=,status.phase!=Succeeded,status.phase!=Failed"
UNBOUND_PODS = "spec.nodeName=,status.phase!=Succeeded,status.phase!=Failed"


class ClusterReadError(Exception):
    """What could not be read and why, in one line."""


@dataclass
class KueueConfig:
    """The cluster-scoped Kueue objects that decide which flavors are ours and on which Topology."""

    topologies: dict[str, Topology] = field(default_factory=dict)
    flavors: dict[str, ResourceFlavor] = field(default_factory=dict)
    checks: dict[str, AdmissionCheck] = field(default_factory=dict)
    queues: list[ClusterQueue] = field(default_factory=list)


@dataclass
class TasConfig:
    """What the controller named ``controller_name`` makes of a ``KueueConfig``."""

    controller_name: str
    checks: dict[str, AdmissionCheck]  # ours, by name
    specs: dict[str, FlavorSpec]  # our flavors
    check_flavors: dict[str, set[str]]  # our check -> flavors it governs
    # Our flavors and their Topology names, kept when that Topology is gone (``specs`` drops them).
    bindings: dict[str, FlavorBinding] = field(default_factory=dict)
    topologies: dict[str, Topology] = field(default_factory=dict)
    flavors: dict[str, ResourceFlavor] = field(default_factory=dict)


def tas_config(config: KueueConfig, controller_name: str) -> TasConfig:
    checks = our_checks(config.checks.values(), controller_name)
    try:
        specs, per_check = flavor_specs(
            checks, config.queues, config.topologies.get, config.flavors.get, controller_name
        )
        bindings = bind_flavors(checks.values(), config.queues, controller_name=controller_name)
    except FlavorMappingError as exc:
        raise ClusterReadError(f"invalid configuration: {exc}") from exc
    return TasConfig(controller_name, checks, specs, per_check, bindings, config.topologies, config.flavors)


@dataclass
class ClusterState:
    config: KueueConfig
    nodes: list[NodeInfo] = field(default_factory=list)
    pods: list[SlimPod] = field(default_factory=list)
    workloads: list[Workload] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    daemonsets: list[DaemonSetSpec] = field(default_factory=list)


# --- reading ----------------------------------------------------------------------------------


async def _pages(what: str, fn: Callable[..., Awaitable[Any]], *args: Any, **kw: Any) -> AsyncIterator[dict[str, Any]]:
    """Items of a paginated LIST; ``what`` names the objects in errors."""
    token = ""
    while True:
        extra: dict[str, Any] = {"limit": PAGE_SIZE}
        if token:
            extra["_continue"] = token
        try:
            page = await call_json(fn(*args, **kw, **extra, **raw_kwargs(TIMEOUT_SECONDS)))
        except NotFound as exc:
            raise ClusterReadError(f"the API server does not serve {what} (is it installed?): {exc.message}") from exc
        except TransportError:
            raise  # run_read names the server
        except ApiError as exc:
            raise ClusterReadError(f"cannot list {what}: {_api_problem(exc)}") from exc
        for item in page.get("items") or ():
            yield item
        token = str((page.get("metadata") or {}).get("continue") or "")
        if not token:
            return


def _api_problem(exc: ApiError) -> str:
    if isinstance(exc, Unauthorized):
        return f"unauthorized (check the kubeconfig's credentials): {exc.message}"
    if isinstance(exc, Forbidden):
        return f"forbidden: {exc.message}"
    return str(exc)


def _model(cls: type[M], raw: Mapping[str, Any], warnings: list[str]) -> M | None:
    try:
        return cls.model_validate(raw)
    except pydantic.ValidationError as exc:
        name = (raw.get("metadata") or {}).get("name", "?")
        warnings.append(f"skipping {cls.__name__} {name}: {exc.errors()[0]['msg']}")
        return None


async def _kueue_list(api: k8s.ApiClient, plural: str) -> AsyncIterator[dict[str, Any]]:
    co = k8s.CustomObjectsApi(api)
    async for item in _pages(
        f"{plural}.{c.KUEUE_GROUP}/{c.KUEUE_VERSION}",
        co.list_cluster_custom_object,
        c.KUEUE_GROUP,
        c.KUEUE_VERSION,
        plural,
    ):
        yield item


async def read_kueue_config(api: k8s.ApiClient, warnings: list[str]) -> KueueConfig:
    cfg = KueueConfig()
    async for raw in _kueue_list(api, "topologies"):
        if (topo := _model(Topology, raw, warnings)) is not None:
            cfg.topologies[topo.name] = topo
    async for raw in _kueue_list(api, "resourceflavors"):
        if (rf := _model(ResourceFlavor, raw, warnings)) is not None:
            cfg.flavors[rf.name] = rf
    async for raw in _kueue_list(api, "admissionchecks"):
        if (ac := _model(AdmissionCheck, raw, warnings)) is not None:
            cfg.checks[ac.name] = ac
    async for raw in _kueue_list(api, "clusterqueues"):
        if (cq := _model(ClusterQueue, raw, warnings)) is not None:
            cfg.queues.append(cq)
    return cfg


async def read_nodes(api: k8s.ApiClient, warnings: list[str]) -> list[NodeInfo]:
    nodes = []
    async for raw in _pages("nodes", k8s.CoreV1Api(api).list_node):
        try:
            nodes.append(slim_node(raw))
        except (QuantityError, ValueError) as exc:
            warnings.append(f"skipping Node {(raw.get('metadata') or {}).get('name', '?')}: {exc}")
    return nodes


async def read_for_capacity(api: k8s.ApiClient, prefix: str, gate: str = c.SCHEDULING_GATE) -> ClusterState:
    """Everything the controller's capacity model is built from (``gate``: the ``scheduling_gate`` setting)."""
    state = ClusterState(KueueConfig())
    state.config = await read_kueue_config(api, state.warnings)
    state.nodes = await read_nodes(api, state.warnings)
    async for raw in _pages("pods", k8s.CoreV1Api(api).list_pod_for_all_namespaces, field_selector=CHARGEABLE_PODS):
        state.pods.append(slim_pod(raw, prefix=prefix, gate=gate))
    async for raw in _kueue_list(api, "workloads"):
        if (wl := _model(Workload, raw, state.warnings)) is not None:
            state.workloads.append(wl)
    state.daemonsets = await read_daemonsets(api, state.warnings)
    return state


async def read_daemonsets(api: k8s.ApiClient, warnings: list[str]) -> list[DaemonSetSpec]:
    """The DaemonSets' pods to reserve (``kueue_tas.capacity.daemonsets``). A user who may not list
    DaemonSets still gets the rest, with a warning: the numbers then miss only daemon pods not
    created yet."""
    out = []
    try:
        async for raw in _pages("daemonsets", k8s.AppsV1Api(api).list_daemon_set_for_all_namespaces):
            try:
                ds = daemonset_spec(raw)
            except DaemonSetError as exc:
                meta = raw.get("metadata") or {}
                warnings.append(f"skipping DaemonSet {meta.get('namespace')}/{meta.get('name')}: {exc}")
                continue
            if ds is not None:
                out.append(ds)
    except ClusterReadError as exc:
        warnings.append(f"{exc} (DaemonSet pods not created yet are not held back)")
    return out


async def read_workload(api: k8s.ApiClient, namespace: str, name: str | None, for_job: str | None) -> Workload:
    """The Workload by name, or the one owned by the Job or JobSet named ``for_job``."""
    co = k8s.CustomObjectsApi(api)
    what = f"workloads.{c.KUEUE_GROUP} in namespace {namespace}"
    if name is not None:
        try:
            raw = await call_json(
                co.get_namespaced_custom_object(
                    c.KUEUE_GROUP, c.KUEUE_VERSION, namespace, "workloads", name, **raw_kwargs(TIMEOUT_SECONDS)
                )
            )
        except NotFound as exc:
            raise ClusterReadError(f'Workload "{name}" not found in namespace "{namespace}"') from exc
        except TransportError:
            raise
        except ApiError as exc:
            raise ClusterReadError(f"cannot read Workload {namespace}/{name}: {_api_problem(exc)}") from exc
        return Workload.model_validate(raw)
    owned = []
    async for raw in _pages(
        what, co.list_namespaced_custom_object, c.KUEUE_GROUP, c.KUEUE_VERSION, namespace, "workloads"
    ):
        refs = (raw.get("metadata") or {}).get("ownerReferences") or ()
        if any(r.get("name") == for_job and r.get("kind") in (c.KIND_JOB, c.KIND_JOBSET) for r in refs):
            owned.append(Workload.model_validate(raw))
    if not owned:
        raise ClusterReadError(f'no Workload in namespace "{namespace}" belongs to a Job or JobSet named "{for_job}"')
    if len(owned) > 1:
        names = ", ".join(sorted(w.name for w in owned))
        raise ClusterReadError(f'several Workloads belong to "{for_job}" ({names}); name one')
    return owned[0]


async def read_workload_pods(
    api: k8s.ApiClient, wl: Workload, prefix: str, gate: str = c.SCHEDULING_GATE
) -> list[SlimPod]:
    """The pods our check labelled as this Workload's (the label holds the Workload's UID)."""
    selector = f"{c.WORKLOAD_LABEL}={wl.metadata.uid or wl.name}"
    namespace = wl.namespace or "default"
    return [
        slim_pod(raw, prefix=prefix, gate=gate)
        async for raw in _pages(
            f"pods in namespace {namespace}", k8s.CoreV1Api(api).list_namespaced_pod, namespace, label_selector=selector
        )
    ]


async def read_released_pods(api: k8s.ApiClient, prefix: str, gate: str = c.SCHEDULING_GATE) -> list[SlimPod]:
    """Our workloads' pods not bound yet and not finished (gated, or released and pending): what
    the map counts as pending per domain, besides the bound pods ``read_for_capacity`` reads."""
    return [
        slim_pod(raw, prefix=prefix, gate=gate)
        async for raw in _pages(
            "pods",
            k8s.CoreV1Api(api).list_pod_for_all_namespaces,
            label_selector=c.WORKLOAD_LABEL,
            field_selector=UNBOUND_PODS,
        )
    ]


async def read_events(api: k8s.ApiClient, wl: Workload) -> list[dict[str, Any]]:
    """The Events regarding a Workload (core/v1 view: the API serves events.k8s.io/v1 ones there too)."""
    namespace = wl.namespace or "default"
    selector = f"involvedObject.uid={wl.metadata.uid}" if wl.metadata.uid else f"involvedObject.name={wl.name}"
    return [
        raw
        async for raw in _pages(
            f"events in namespace {namespace}",
            k8s.CoreV1Api(api).list_namespaced_event,
            namespace,
            field_selector=selector,
        )
    ]


# --- running one read ----------------------------------------------------------------------------


def load_settings(config: str | None, kubeconfig: str | None) -> Settings:
    """Settings as ``run`` loads them; logs go to stderr, warnings and worse only, so that
    stdout holds nothing but the command's output."""
    try:
        settings = Settings.load(config, **({"kubeconfig": kubeconfig} if kubeconfig else {}))
    except ConfigError as exc:
        raise ClusterReadError(str(exc)) from exc
    configure_logging("warning", "console", stream=sys.stderr)
    return settings


def run_read(settings: Settings, read: Callable[[k8s.ApiClient], Awaitable[T]]) -> T:
    """Run one read with a fresh client; connection and credential failures become ClusterReadError."""

    async def go() -> T:
        try:
            api = await connect(settings, watches=0, margin=4)
        except ConfigError as exc:
            raise ClusterReadError(str(exc)) from exc
        try:
            return await read(api)
        except TransportError as exc:
            host = api.configuration.host
            detail = exc.message
            raise ClusterReadError(f"cannot reach the Kubernetes API server at {host}: {detail}") from exc
        finally:
            await api.close()

    return asyncio.run(go())


def default_namespace(settings: Settings) -> str:
    """The namespace of the kubeconfig's current context (as kubectl picks it), else "default"."""
    path = settings.kubeconfig
    if path is None:
        if os.environ.get("KUBERNETES_SERVICE_HOST"):
            try:
                with open(SERVICE_ACCOUNT_NAMESPACE, encoding="utf-8") as fh:
                    return fh.read().strip() or "default"
            except OSError:
                return "default"
        path_text = os.environ.get("KUBECONFIG") or os.path.expanduser("~/.kube/config")
    else:
        path_text = str(path)
    return kubeconfig_namespace(path_text.split(os.pathsep)[0]) or "default"
