"""The faults a chaos run injects, each undone by itself (a killed replica restarts, a paused
one resumes, a deleted node comes back), so a run ends with the cluster whole again.

``Rig`` holds what a fault acts on: the cluster's processes, the controller group behind its
TCP relay, the run's node pool and namespace. Faults on cluster processes (apiserver, Kueue)
take ``proc_lock``: one restart at a time.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import signal
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import aiohttp
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from e2e import components, pki, procs
from e2e.chaos.relay import Relay
from e2e.cluster_health import health_urls, http_ok
from e2e.cluster_state import State, child_env, rest_client
from e2e.components import KWOK_NODE_ANNOTATION, KWOK_NODE_ANNOTATION_VALUE
from e2e.controller import LEASE_NAMESPACE, ControllerGroup, ControllerProcess
from e2e.kube import KUEUE_GROUP, KUEUE_VERSION, Kube, as_body, content_type
from e2e.nodes import NodePool
from e2e.pods import pods_raw

STRATEGIC = "application/strategic-merge-patch+json"
MERGE = "application/merge-patch+json"
NOT_READY_TAINT = {"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}
# A restarted component must be healthy again within this long. Generous: on a loaded machine
# (two campaigns at once) the apiserver took over 90 s to pass /readyz (chaos seed 4015), and
# what the campaign judges is the controller, not how fast the apiserver starts.
T_COMPONENT = 240.0
# The API may be down while a fault is undone (an apiserver restart running beside it).
API_ERRORS = (ApiException, aiohttp.ClientError, OSError, TimeoutError)


@dataclass
class Rig:
    state: State
    kube: Kube
    group: ControllerGroup
    relay: Relay
    pool: NodePool
    namespace: str
    rng: random.Random
    proc_lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    paused: set[int] = field(default_factory=set)  # pids under SIGSTOP
    hold_until: dict[str, float] = field(default_factory=dict)  # replica -> no restart before (monotonic)
    restarts: Counter[str] = field(default_factory=Counter)  # replica restarts by why
    topology: str = ""  # the run's Topology, which ``topology_recreate`` replaces for a while
    # One re-levelling at a time: two overlapping ones would each re-create what the other
    # deleted (chaos seed 102: a restore left the other waiting on AlreadyExists for good).
    topology_lock: asyncio.Lock = field(default_factory=asyncio.Lock)


async def supervise(rig: Rig, backoff_s: float = 1.0) -> None:
    """Play the kubelet for the controller replicas: restart one that exited (a replica exits
    when it loses its Lease, as the manager is designed to) or was killed, after ``backoff_s``
    (or the hold a fault set). Runs until cancelled."""
    dead_since: dict[str, float] = {}
    while True:
        now = time.monotonic()
        for p in rig.group.processes:
            if p.alive:
                dead_since.pop(p.identity_prefix, None)
                continue
            since = dead_since.setdefault(p.identity_prefix, now)
            if now - since >= backoff_s and now >= rig.hold_until.get(p.identity_prefix, 0.0):
                why = (
                    "after a kill"
                    if p.identity_prefix in rig.hold_until
                    else f"exited with code {p.proc.poll() if p.proc else None}"
                )
                rig.hold_until.pop(p.identity_prefix, None)
                rig.restarts[why] += 1
                p.start()
                dead_since.pop(p.identity_prefix, None)
        await asyncio.sleep(0.25)


async def _retry(what: str, fn: Callable[[], Awaitable[Any]], timeout_s: float = 60) -> Any:
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            return await fn()
        except API_ERRORS as e:
            if isinstance(e, ApiException) and e.status == 404:
                raise
            if time.monotonic() > deadline:
                raise TimeoutError(f"{what}: {e}") from e
            await asyncio.sleep(0.5)


async def leader(rig: Rig) -> ControllerProcess | None:
    """The live replica holding the Lease now (None while nobody does)."""
    coord = client.CoordinationV1Api(rig.kube.api)
    try:
        lease = await _retry("read lease", lambda: coord.read_namespaced_lease(rig.group.lease_name, LEASE_NAMESPACE))
    except ApiException:
        return None
    holder = str(lease.spec.holder_identity or "")
    for p in rig.group.processes:
        if p.alive and holder.startswith(p.identity_prefix + "_"):
            return p
    return None


async def leader_kill(rig: Rig, args: dict[str, Any]) -> str:
    p = await leader(rig)
    if p is None:
        return "no live leader"
    rig.hold_until[p.identity_prefix] = time.monotonic() + float(args.get("restart_after", 2))
    p.kill()  # ``supervise`` restarts it once the hold is over
    return f"killed {p.identity_prefix}"


async def leader_pause(rig: Rig, args: dict[str, Any]) -> str:
    p = await leader(rig)
    if p is None or p.proc is None:
        return "no live leader"
    pid = p.proc.pid
    os.kill(pid, signal.SIGSTOP)
    rig.paused.add(pid)
    try:
        await asyncio.sleep(float(args.get("seconds", 8)))
    finally:
        rig.paused.discard(pid)
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGCONT)
    return f"paused {p.identity_prefix} for {args.get('seconds')}s"


def resume_all(rig: Rig) -> None:
    for pid in list(rig.paused):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGCONT)
    rig.paused.clear()


async def _restart_component(
    rig: Rig, name: str, argv: list[str], healthy: Callable[[], bool], grace_s: float = 3.0
) -> str:
    async with rig.proc_lock:
        state, layout = rig.state, rig.state.layout
        info = state.proc(name)
        t0 = time.monotonic()
        if info is not None:
            await asyncio.to_thread(procs.stop, info, grace_s)
        new = procs.start(name, argv, layout.logs, env=child_env(state, layout), cwd=layout.run)
        state.procs = [p for p in state.procs if p.name != name] + [new]
        state.save()
        deadline = time.monotonic() + T_COMPONENT
        while not await asyncio.to_thread(healthy):
            if not procs.is_alive(new) or time.monotonic() > deadline:
                raise RuntimeError(f"{name} did not come back; log tail:\n{procs.tail(new.log)}")
            await asyncio.sleep(0.3)
        return f"{name} restarted in {time.monotonic() - t0:.1f}s"


async def apiserver_restart(rig: Rig, args: dict[str, Any]) -> str:
    p = pki.Pki(rig.state.layout.pki_dir)
    rest = rest_client(rig.state)
    return await _restart_component(
        rig,
        "kube-apiserver",
        components.apiserver_argv(p, rig.state.ports),
        lambda: rest.raw_status("/readyz")[0] == 200,
    )


async def kueue_restart(rig: Rig, args: dict[str, Any]) -> str:
    p = pki.Pki(rig.state.layout.pki_dir)
    url = health_urls(rig.state.ports)["kueue"]
    argv = components.kueue_argv(rig.state.layout, p, rig.state.ports)
    return await _restart_component(rig, "kueue", argv, lambda: http_ok(url))


async def watch_cut(rig: Rig, args: dict[str, Any]) -> str:
    n = rig.relay.sever(float(args.get("block_s", 0.0)))
    return f"severed {n} connection(s) ({rig.relay.connections} accepted so far)"


async def pod_delete(rig: Rig, args: dict[str, Any]) -> str:
    pods = await _retry("list pods", lambda: pods_raw(rig.kube, rig.namespace))
    running = sorted(
        p["metadata"]["name"]
        for p in pods
        if p["spec"].get("nodeName")
        and not p["metadata"].get("deletionTimestamp")
        and (p.get("status") or {}).get("phase") in ("Pending", "Running")
    )
    pick = random.Random(int(args.get("pick", 0)))
    victims = pick.sample(running, min(len(running), int(args.get("count", 1))))
    for name in victims:
        with contextlib.suppress(ApiException):
            await rig.kube.core.delete_namespaced_pod(name, rig.namespace)
    return f"deleted {victims}"


def _node(rig: Rig, index: int) -> dict[str, Any]:
    nodes = rig.pool.node_objects()
    return nodes[index % len(nodes)]


async def node_flap(rig: Rig, args: dict[str, Any]) -> str:
    """NotReady (as the node lifecycle controller shows it: condition + not-ready taint) and back.

    kwok marks every node it manages Ready again at once, so the node leaves kwok's hands for
    the flap (its selector annotation changed) and returns to be initialised afresh."""
    name = str(_node(rig, int(args.get("node", 0)))["metadata"]["name"])
    core = rig.kube.core
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    try:
        await _retry(
            "unmanage node",
            lambda: core.patch_node(
                name,
                as_body({"metadata": {"annotations": {KWOK_NODE_ANNOTATION: "chaos-not-ready"}}}),
                **content_type(MERGE),
            ),
        )
        cond = {"type": "Ready", "status": "False", "reason": "KubeletNotReady", "message": "chaos: node flap"}
        cond.update(lastHeartbeatTime=now, lastTransitionTime=now)
        await _retry(
            "node NotReady",
            lambda: core.patch_node_status(
                name, as_body({"status": {"conditions": [cond]}}), **content_type(STRATEGIC)
            ),
        )
        await _retry("taint node", lambda: _set_taint(rig, name, present=True))
    except ApiException as e:
        if e.status == 404:
            return f"node {name} is gone"
        raise
    await asyncio.sleep(float(args.get("seconds", 5)))
    with contextlib.suppress(ApiException):  # deleted meanwhile: nothing to restore
        await _retry("untaint node", lambda: _set_taint(rig, name, present=False))
        await _retry(
            "manage node",
            lambda: core.patch_node(
                name,
                as_body({"metadata": {"annotations": {KWOK_NODE_ANNOTATION: KWOK_NODE_ANNOTATION_VALUE}}}),
                **content_type(MERGE),
            ),
        )
    return f"node {name} NotReady for {args.get('seconds')}s"


async def _set_taint(rig: Rig, name: str, *, present: bool) -> None:
    node = rig.kube.api.sanitize_for_serialization(await rig.kube.core.read_node(name))
    taints = [t for t in (node.get("spec") or {}).get("taints") or [] if t.get("key") != NOT_READY_TAINT["key"]]
    if present:
        taints.append(NOT_READY_TAINT)
    body = {"metadata": {"resourceVersion": node["metadata"]["resourceVersion"]}, "spec": {"taints": taints}}
    await rig.kube.core.patch_node(name, as_body(body), **content_type(MERGE))


async def node_delete(rig: Rig, args: dict[str, Any]) -> str:
    body = _node(rig, int(args.get("node", 0)))
    name = str(body["metadata"]["name"])
    try:
        await _retry("delete node", lambda: rig.kube.core.delete_node(name))
    except ApiException as e:
        if e.status != 404:
            raise
        return f"node {name} already gone"
    await asyncio.sleep(float(args.get("recreate_after", 5)))

    async def recreate() -> None:
        try:
            await rig.kube.core.create_node(as_body(body))
        except ApiException as e:
            if e.status != 409:
                raise

    await _retry("recreate node", recreate)
    return f"node {name} deleted, back after {args.get('recreate_after')}s"


async def _workloads(rig: Rig) -> list[dict[str, Any]]:
    res = await _retry(
        "list workloads",
        lambda: rig.kube.custom.list_namespaced_custom_object(KUEUE_GROUP, KUEUE_VERSION, rig.namespace, "workloads"),
    )
    return list(res.get("items") or [])


def _finished(wl: dict[str, Any]) -> bool:
    conds = (wl.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Finished" and c.get("status") == "True" for c in conds)


def _deciding(wl: dict[str, Any]) -> bool:
    """Quota reserved and a check entry still Pending: our decision or its writes are in flight."""
    status = wl.get("status") or {}
    reserved = any(
        c.get("type") == "QuotaReserved" and c.get("status") == "True" for c in status.get("conditions") or []
    )
    return reserved and any(c.get("state") == "Pending" for c in status.get("admissionChecks") or [])


async def workload_deactivate(rig: Rig, args: dict[str, Any]) -> str:
    """Kueue evicts a Workload (``spec.active=false``: reason Deactivated) and, ``seconds`` later,
    takes it back: the eviction lands while our decision and its Ready write may be in flight.
    A Workload whose check is still Pending is preferred, since that is where the race is."""
    items = [w for w in await _workloads(rig) if not _finished(w)]
    if not items:
        return "no unfinished workload"
    deciding = sorted((w for w in items if _deciding(w)), key=lambda w: str(w["metadata"]["name"]))
    pool = deciding or sorted(items, key=lambda w: str(w["metadata"]["name"]))
    name = str(random.Random(int(args.get("pick", 0))).choice(pool)["metadata"]["name"])

    async def set_active(active: bool) -> None:
        await rig.kube.custom.patch_namespaced_custom_object(
            KUEUE_GROUP,
            KUEUE_VERSION,
            rig.namespace,
            "workloads",
            name,
            as_body({"spec": {"active": active}}),
            **content_type(MERGE),
        )

    if not await _for_a_while("deactivate workload", set_active, on=False, seconds=float(args.get("seconds", 1))):
        return f"workload {name} is gone"
    return f"workload {name} deactivated{' while deciding' if deciding else ''} for {args.get('seconds')}s"


async def _for_a_while(what: str, set_state: Callable[[bool], Awaitable[None]], *, on: bool, seconds: float) -> bool:
    """``set_state(on)``, ``seconds`` later ``set_state(not on)``, each retried through API faults;
    False when the object is gone (404)."""
    try:
        await _retry(what, lambda: set_state(on))
        await asyncio.sleep(seconds)
        await _retry(f"undo {what}", lambda: set_state(not on))
    except ApiException as e:
        if e.status == 404:
            return False
        raise
    return True


async def _bound_nodes(rig: Rig) -> list[str]:
    pods = await _retry("list pods", lambda: pods_raw(rig.kube, rig.namespace))
    return sorted(
        {
            str(p["spec"]["nodeName"])
            for p in pods
            if p["spec"].get("nodeName") and (p.get("status") or {}).get("phase") in ("Pending", "Running")
        }
    )


async def host_cordon(rig: Rig, args: dict[str, Any]) -> str:
    """``kubectl cordon`` on a host that runs pods of the run (any pool node when none does),
    and ``uncordon`` after ``seconds``: a replacement pod for that host must wait, explained."""
    pool_names = [str(n["metadata"]["name"]) for n in rig.pool.node_objects()]
    busy = [n for n in await _bound_nodes(rig) if n in set(pool_names)]
    pick = random.Random(int(args.get("pick", 0)))
    name = pick.choice(busy or pool_names)

    async def set_unschedulable(value: bool) -> None:
        await rig.kube.core.patch_node(name, as_body({"spec": {"unschedulable": value}}), **content_type(MERGE))

    if not await _for_a_while("cordon node", set_unschedulable, on=True, seconds=float(args.get("seconds", 5))):
        return f"node {name} is gone"
    return f"node {name} cordoned{' under running pods' if busy else ''} for {args.get('seconds')}s"


async def topology_recreate(rig: Rig, args: dict[str, Any]) -> str:
    """The admin deletes the run's Topology and creates it again with other levels (the
    hostname level dropped, so the lowest level is a rack), then, ``seconds`` later, restores
    the original. Admitted workloads' open slots must stay charged throughout."""
    if not rig.topology:
        return "no topology in this run"
    api = rig.kube.custom
    plural = "topologies"

    async def replace(with_levels: list[dict[str, Any]]) -> None:
        body = {
            "apiVersion": f"{KUEUE_GROUP}/{KUEUE_VERSION}",
            "kind": "Topology",
            "metadata": {"name": rig.topology},
            "spec": {"levels": with_levels},
        }
        deadline = time.monotonic() + T_COMPONENT
        while True:  # delete (again) until the create finds the name free: finalizers take a while
            with contextlib.suppress(ApiException):
                await api.delete_cluster_custom_object(KUEUE_GROUP, KUEUE_VERSION, plural, rig.topology)
            try:
                await api.create_cluster_custom_object(KUEUE_GROUP, KUEUE_VERSION, plural, as_body(body))
                return
            except ApiException as e:
                if e.status != 409 or time.monotonic() > deadline:
                    raise
                await asyncio.sleep(0.3)

    # The read is under the lock too: an overlapping re-create holds the name deleted (404)
    # or with its own levels, which this one would then "restore" (seed 3005).
    async with rig.topology_lock:
        original = await _retry(
            "read topology", lambda: api.get_cluster_custom_object(KUEUE_GROUP, KUEUE_VERSION, plural, rig.topology)
        )
        levels = [dict(lv) for lv in original["spec"]["levels"]]
        other = levels[:-1] if len(levels) > 1 else levels
        await _retry("re-create topology with other levels", lambda: replace(other))
        await asyncio.sleep(float(args.get("seconds", 5)))
        await _retry("restore topology", lambda: replace(levels))
    return f"topology {rig.topology} re-created with {len(other)} levels for {args.get('seconds')}s, restored"


FaultFn = Callable[[Rig, dict[str, Any]], Awaitable[str]]
INJECTORS: dict[str, FaultFn] = {
    "leader_kill": leader_kill,
    "leader_pause": leader_pause,
    "apiserver_restart": apiserver_restart,
    "watch_cut": watch_cut,
    "pod_delete": pod_delete,
    "node_flap": node_flap,
    "node_delete": node_delete,
    "kueue_restart": kueue_restart,
    "workload_deactivate": workload_deactivate,
    "host_cordon": host_cordon,
    "topology_recreate": topology_recreate,
}
