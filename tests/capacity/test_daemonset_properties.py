"""DaemonSet reservations in the one set of capacity rules (``tests/capacity/test_properties.py``
has the rest): on random clusters with DaemonSets and daemon pods,

* ``plan`` (a dump), the controller (events in a random order, snapshots read in between) and
  ``kueue-tas capacity`` end with the same free capacity per domain;
* each node's non-TAS usage is what an independent count says: every bound, non-terminal pod
  that is not ours, plus, for every DaemonSet that runs on the node and has no such pod there,
  its pod's requests (so a daemon is charged once, before and after its pod exists), when the
  reservation policy allows it (issue 30): a listed namespace (no priority class is trusted by
  default: a tenant may name a system one), a pod that fits on the empty node, and not lapsed.

Creation times are drawn far in the past (lapsed whatever the day), far in the future (held) or
absent (no bound), so the three readers, each reading the time of day, agree without a shared clock.
"""

from __future__ import annotations

import random
from typing import Any

import builders as mk
from capacity_histories import (
    NODE_NAMES,
    POOL,
    PROPERTY,
    capacity_command,
    free_by_domain,
    histories,
    hostname,
    nodes,
    planner_of,
    pods,
    workloads,
)
from capacity_histories import final as final_objects
from capacity_histories import live_by_events as live_by_cluster_events
from hypothesis import given
from hypothesis import strategies as st
from vocab import BLOCK, GPU, HOST, RACK

from kueue_tas.capacity.live import LiveCapacity
from kueue_tas.topology.engine.snapshot import TopologySnapshot

Obj = dict[str, Any]
History = list[list[Obj | None]]
DAEMONS = ["ds0", "ds1"]
PAST, FUTURE = "2000-01-01T00:00:00Z", "2100-01-01T00:00:00Z"
TIMES = st.sampled_from([None, PAST, FUTURE])
LISTED = {"kube-system", "gpu-operator"}  # the settings' defaults


@st.composite
def daemonsets(draw: st.DrawFn, name: str) -> Obj:
    ds = mk.daemonset(
        name,
        namespace=draw(st.sampled_from(["kube-system", "kube-system", "gpu-operator", "team-a"])),
        requests={"cpu": f"{draw(st.integers(0, 2000))}m", GPU: str(draw(st.sampled_from([0, 1, 2, 9])))},
        node_selector=draw(st.sampled_from([None, None, {POOL: "a"}, {POOL: "b"}])),
        # The random nodes' only taint is gpu=true:NoSchedule.
        tolerations=draw(st.sampled_from([None, [{"key": "gpu", "operator": "Exists"}], [{"operator": "Exists"}]])),
        deleting=draw(st.integers(0, 6)) == 0,
    )
    priority = draw(st.sampled_from([None, None, "system-node-critical", "batch-low"]))
    if priority is not None:
        ds["spec"]["template"]["spec"]["priorityClassName"] = priority
    if (created := draw(TIMES)) is not None:
        ds["metadata"]["creationTimestamp"] = created
    return ds


@st.composite
def daemon_nodes(draw: st.DrawFn, name: str) -> Obj:
    """Mostly a node every hostname flavor counts (so daemons have somewhere to run), sometimes
    any random node."""
    node = draw(nodes(name))
    if draw(st.integers(0, 3)):
        node["metadata"]["labels"] |= {BLOCK: "b0", RACK: "b0-r0", HOST: hostname(name)}
        node["spec"]["unschedulable"] = False
        node["status"]["conditions"] = [{"type": "Ready", "status": "True"}]
    if (created := draw(TIMES)) is not None:
        node["metadata"]["creationTimestamp"] = created
    return node


@st.composite
def daemon_pods(draw: st.DrawFn, name: str) -> Obj:
    pod = draw(pods(name))
    owner = draw(st.sampled_from([None, *DAEMONS, *DAEMONS]))
    if owner is not None:
        pod["metadata"]["ownerReferences"] = [mk.controller_ref(mk.daemonset(owner, namespace="ns"))]
        if draw(st.integers(0, 3)):  # most daemon pods are plain pods that run
            pod["status"]["phase"] = "Running"
            pod["metadata"]["labels"], pod["metadata"]["annotations"] = {}, {}
    return pod


Cluster = tuple[History, History, History, History, random.Random]


@st.composite
def clusters(draw: st.DrawFn, with_workloads: bool = True) -> Cluster:
    node_names = NODE_NAMES[: draw(st.integers(1, len(NODE_NAMES)))]
    node_h = draw(histories(daemon_nodes, node_names))
    ds_h = draw(histories(daemonsets, DAEMONS[: draw(st.integers(1, len(DAEMONS)))]))
    pod_h = draw(histories(daemon_pods, [f"p{i}" for i in range(draw(st.integers(0, 8)))]))
    wl_count = draw(st.integers(0, 3)) if with_workloads else 0
    wl_h = draw(histories(lambda name: workloads(name, node_names), [f"w{i}" for i in range(wl_count)]))
    return node_h, ds_h, pod_h, wl_h, draw(st.randoms(use_true_random=False))


def final(cluster: Cluster) -> list[Obj]:
    node_h, ds_h, pod_h, wl_h, _rnd = cluster
    return [o for history in (node_h, ds_h, pod_h, wl_h) for o in final_objects(history)]


def live_by_events(cluster: Cluster) -> LiveCapacity:
    node_h, ds_h, pod_h, wl_h, rnd = cluster
    return live_by_cluster_events(node_h, pod_h, wl_h, rnd, ds_h)


@PROPERTY
@given(clusters())
def test_plan_the_controller_and_the_capacity_command_hold_the_same_daemon_pods(cluster: Cluster) -> None:
    live = live_by_events(cluster)
    objs = final(cluster)
    planner = planner_of(objs)
    shown = capacity_command(objs)
    for flavor in live.flavors():
        live_snap = live.snapshot(flavor)
        assert live_snap is not None
        expected = free_by_domain(live_snap)
        assert free_by_domain(planner.snapshot(flavor, "test")) == expected, flavor
        assert shown[flavor] == expected, flavor


# --- an independent count -----------------------------------------------------------------------


def _cpu_gpu(requests: dict[str, str]) -> dict[str, int]:
    cpu = requests.get("cpu", "0m")
    return {"cpu": int(cpu.removesuffix("m")) if cpu.endswith("m") else int(cpu) * 1000, GPU: int(requests.get(GPU, 0))}


def _charged(pod: Obj) -> bool:
    # Bound and not finished. This property has no Workloads, so no pod fills a slot of ours:
    # our label or annotation on a pod hides nothing (issue 12, defect 2).
    return bool(pod["spec"].get("nodeName")) and pod["status"]["phase"] not in ("Succeeded", "Failed")


def _daemon_runs_on(ds: Obj, node: Obj) -> bool:
    pod_spec = ds["spec"]["template"]["spec"]
    labels = node["metadata"]["labels"]
    if any(labels.get(k) != v for k, v in (pod_spec.get("nodeSelector") or {}).items()):
        return False
    tainted = bool(node["spec"].get("taints"))
    return not tainted or bool(pod_spec.get("tolerations"))


def expected_non_tas(objs: list[Obj], node: Obj) -> dict[str, int]:
    name = node["metadata"]["name"]
    used = {"cpu": 0, GPU: 0}
    charged = [p for p in objs if p["kind"] == "Pod" and _charged(p) and p["spec"]["nodeName"] == name]
    for pod in charged:
        for r, v in _cpu_gpu(pod["spec"]["containers"][0]["resources"]["requests"]).items():
            used[r] += v
    owners = {ref["uid"] for p in charged for ref in p["metadata"].get("ownerReferences", ())}
    for ds in (o for o in objs if o["kind"] == "DaemonSet"):
        meta = ds["metadata"]
        if "deletionTimestamp" in meta or meta["uid"] in owners or not _daemon_runs_on(ds, node):
            continue
        requests = _cpu_gpu(ds["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"])
        if not (_trusted(ds) and _fits(requests, node) and not _lapsed(ds, node)):
            continue
        for r, v in requests.items():
            used[r] += v
    return used


def _trusted(ds: Obj) -> bool:
    return ds["metadata"]["namespace"] in LISTED


def _fits(requests: dict[str, int], node: Obj) -> bool:
    alloc = node["status"]["allocatable"]
    have = {"cpu": int(alloc["cpu"]) * 1000, GPU: int(alloc[GPU]), "pods": int(alloc["pods"])}
    return all(v <= have[r] for r, v in {**requests, "pods": 1}.items())


def _lapsed(ds: Obj, node: Obj) -> bool:
    """Due since the later of the two creation times; only a past one is over."""
    known = [t for t in (ds["metadata"].get("creationTimestamp"), node["metadata"].get("creationTimestamp")) if t]
    return bool(known) and max(known) == PAST


def non_tas_usage(snap: TopologySnapshot, node: str) -> dict[str, int]:
    leaf = snap.tree.leaf_by_node_name[node]
    cols = snap.capacity.columns
    return {
        r: int(snap.capacity.alloc[leaf, cols[r]] - snap.capacity.free[leaf, cols[r]]) if r in cols else 0
        for r in ("cpu", GPU)
    }


@PROPERTY
@given(clusters(with_workloads=False))
def test_a_daemon_is_charged_once_on_each_node_it_runs_on(cluster: Cluster) -> None:
    live = live_by_events(cluster)
    objs = final(cluster)
    snap = live.snapshot("shared")  # every eligible node, whatever its pool
    assert snap is not None
    for node in (o for o in objs if o["kind"] == "Node"):
        if node["metadata"]["name"] in snap.tree.leaf_by_node_name:
            assert non_tas_usage(snap, node["metadata"]["name"]) == expected_non_tas(objs, node), node
