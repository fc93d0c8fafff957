"""Random cluster histories (Nodes, pods, Workloads, each a sequence of versions) and the three
readers of one set of capacity rules: ``plan``'s dump, the controller's events and ``kueue-tas
capacity``."""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import random
from collections.abc import Callable
from typing import Any
from unittest import mock

import builders as mk
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from vocab import BLOCK, GPU, HOST, RACK, REQUIRED

from kueue_tas.api import constants as c
from kueue_tas.api.kinds import parse_object
from kueue_tas.api.kueue_objects import AdmissionCheck, ClusterQueue, ResourceFlavor, Topology
from kueue_tas.api.workload import Workload
from kueue_tas.capacity.daemonsets import daemonset_spec
from kueue_tas.capacity.feed import feed_pod, feed_workload, remove_pod
from kueue_tas.capacity.live import LiveCapacity
from kueue_tas.capacity.rules import flavor_specs, our_checks
from kueue_tas.cli import capacity as cap
from kueue_tas.cli.cluster_read import ClusterState, KueueConfig
from kueue_tas.cli.planner import Planner
from kueue_tas.controllers.informers import slim_node
from kueue_tas.kube.slim import slim_pod
from kueue_tas.runtime.config import Settings
from kueue_tas.topology.assignment import DomainAssignment, TopologyAssignment
from kueue_tas.topology.codec.codec import decode_assignment_annotation, encode_assignment_annotation
from kueue_tas.topology.engine.snapshot import TopologySnapshot
from kueue_tas.topology.explain.free import level_free

FOO = "example.com/foo"
POOL = "pool"
KUEUE = "kueue.x-k8s.io/v1beta2"
Obj = dict[str, Any]

# Flavors: gpu (pool=a) and gpu-b (pool=b) and shared (every node) on the hostname Topology,
# racks on a Topology without hostname, plain under another controller's check.
FLAVORS = {"gpu": {POOL: "a"}, "gpu-b": {POOL: "b"}, "shared": {}, "racks": {}, "plain": {}}
CHECKS = {"tas": ("topo", c.CONTROLLER_NAME), "tas-racks": ("racks", c.CONTROLLER_NAME), "other": ("topo", "x.io/y")}
ON_FLAVORS = {"tas": ["gpu", "gpu-b", "shared"], "tas-racks": ["racks"], "other": ["plain"]}
TOPOLOGIES = {"topo": (BLOCK, RACK, HOST), "racks": (BLOCK, RACK)}


def config_objects() -> list[Obj]:
    return [
        *(mk.topology(name, levels) for name, levels in TOPOLOGIES.items()),
        *(mk.flavor(name, labels) for name, labels in FLAVORS.items()),
        *(mk.admission_check(name, topo, ctrl) for name, (topo, ctrl) in CHECKS.items()),
        mk.cluster_queue("cq", tuple(FLAVORS), ON_FLAVORS, covered=(GPU, "cpu"), quota=None),
    ]


# --- random objects -----------------------------------------------------------------------------

NODE_NAMES = [f"n{i}" for i in range(6)]


def hostname(node: str) -> str:
    # Some nodes' hostname label differs from their name: pods bind by name, assignments by hostname.
    return node if node in ("n0", "n2", "n4") else f"host-{node}"


@st.composite
def nodes(draw: st.DrawFn, name: str) -> Obj:
    labels: dict[str, str] = {}
    # Mostly eligible nodes (a label missing now and then): usage must land somewhere to count.
    block = draw(st.sampled_from(["b0", "b1", "b0", "b1", None]))
    if block is not None:
        labels[BLOCK] = block
    rack = draw(st.sampled_from(["r0", "r1", "r0", "r1", None]))
    if rack is not None:
        labels[RACK] = f"{block}-{rack}"
    if draw(st.integers(0, 5)):
        labels[HOST] = hostname(name)
    pool = draw(st.sampled_from(["a", "a", "b", None]))
    if pool is not None:
        labels[POOL] = pool
    allocatable = {
        "cpu": str(draw(st.integers(0, 8))),
        GPU: str(draw(st.integers(0, 8))),
        "pods": str(draw(st.integers(0, 12))),
    }
    if draw(st.booleans()):
        allocatable["memory"] = f"{draw(st.integers(1, 64))}Gi"
    spec: Obj = {"unschedulable": draw(st.integers(0, 5)) == 0}
    if draw(st.booleans()):
        spec["taints"] = [{"key": "gpu", "value": "true", "effect": "NoSchedule"}]
    ready = draw(st.sampled_from(["True", "True", "True", "True", "False", "Unknown"]))
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": labels},
        "spec": spec,
        "status": {"allocatable": allocatable, "conditions": [{"type": "Ready", "status": ready}]},
    }


@st.composite
def pods(draw: st.DrawFn, name: str) -> Obj:
    labels: dict[str, str] = {}
    annotations: dict[str, str] = {}
    spec: Obj = {}
    node = draw(st.sampled_from([*NODE_NAMES, "", "ghost"]))
    kind = draw(st.sampled_from(["plain", "plain", "labelled", "labelled", "annotated", "kueue-annotated"]))
    if kind == "labelled":
        # A claim on a Workload slot (Workloads here have no UID: the label names them), honoured
        # or not: a Workload that may not exist or hold the PodSet, the domain pinned by a
        # nodeSelector of some shape or left to the node's labels.
        labels[c.WORKLOAD_LABEL] = draw(st.sampled_from(["w0", "w1", "w2", "some-uid"]))
        if draw(st.integers(0, 5)):
            labels[c.PODSET_LABEL] = draw(st.sampled_from(["main", "aux"]))
        shape = draw(st.sampled_from(["none", "host", "full", "racks"]))
        b, r = draw(st.sampled_from(["b0", "b1"])), draw(st.sampled_from(["r0", "r1"]))
        h = node if node and draw(st.booleans()) else draw(st.sampled_from(NODE_NAMES))
        if shape == "host":
            spec["nodeSelector"] = {HOST: hostname(h)}
        elif shape == "full":
            spec["nodeSelector"] = {BLOCK: b, RACK: f"{b}-{r}", HOST: hostname(h)}
        elif shape == "racks":
            spec["nodeSelector"] = {BLOCK: b, RACK: f"{b}-{r}"}
    elif kind == "annotated":
        annotations[REQUIRED] = RACK
    elif kind == "kueue-annotated":  # Kueue's prefix, not ours: a non-TAS pod for us
        annotations["kueue.x-k8s.io/podset-required-topology"] = RACK
    requests = {"cpu": f"{draw(st.integers(0, 3000))}m", GPU: str(draw(st.integers(0, 3)))}
    if draw(st.integers(0, 9)) == 0:
        requests[FOO] = "1"  # a resource no node has
    spec["containers"] = [{"name": "c", "resources": {"requests": requests}}]
    if node:
        spec["nodeName"] = node
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "ns", "labels": labels, "annotations": annotations},
        "spec": spec,
        "status": {"phase": draw(st.sampled_from(["Running", "Running", "Pending", "Succeeded", "Failed"]))},
    }


@st.composite
def assignments(draw: st.DrawFn, node_names: list[str]) -> TopologyAssignment:
    shape = draw(st.sampled_from(["hostname", "full", "racks"]))
    if shape == "hostname":
        levels: tuple[str, ...] = (HOST,)
        pool = [(hostname(n),) for n in node_names] + [("gone",)]
    elif shape == "full":
        levels = (BLOCK, RACK, HOST)
        pool = [(b, f"{b}-{r}", hostname(n)) for b in ("b0", "b1") for r in ("r0", "r1") for n in node_names]
    else:
        levels = (BLOCK, RACK)
        pool = [(b, f"{b}-{r}") for b in ("b0", "b1") for r in ("r0", "r1")]
    values = draw(st.lists(st.sampled_from(pool), min_size=1, max_size=3, unique=True))
    return TopologyAssignment(levels, tuple(DomainAssignment(v, draw(st.integers(1, 3))) for v in values))


@st.composite
def workloads(draw: st.DrawFn, name: str, node_names: list[str]) -> Obj:
    podsets = ["main", "aux"][: draw(st.integers(1, 2))]
    spec_podsets = [
        {
            "name": ps,
            "count": 3,
            "template": {
                "spec": {
                    "containers": [
                        {
                            "name": "c",
                            "resources": {
                                "requests": {"cpu": f"{draw(st.integers(0, 1500))}m", GPU: str(draw(st.integers(0, 2)))}
                            },
                        }
                    ]
                }
            },
        }
        for ps in podsets
    ]
    status: Obj = {
        "admissionChecks": [
            {"name": check, "state": draw(st.sampled_from(["Ready", "Ready", "Ready", "Pending", "Retry"]))}
            for check in draw(st.lists(st.sampled_from(list(CHECKS)), min_size=1, max_size=2, unique=True))
        ],
        "conditions": [{"type": "Finished", "status": "True"}] if draw(st.integers(0, 5)) == 0 else [],
    }
    admitted = [ps for ps in podsets if draw(st.integers(0, 5))]
    if admitted:
        status["admission"] = {
            "clusterQueue": "cq",
            "podSetAssignments": [
                {"name": ps, "flavors": {GPU: draw(st.sampled_from([*FLAVORS, "shared", "racks"]))}} for ps in admitted
            ],
        }
    metadata: Obj = {"name": name, "namespace": "ns"}
    if draw(st.integers(0, 4)):
        chosen = draw(st.lists(st.sampled_from(podsets), min_size=1, unique=True))
        metadata["annotations"] = {
            c.TOPOLOGY_ASSIGNMENT_ANNOTATION: encode_assignment_annotation(
                [(ps, draw(assignments(node_names))) for ps in chosen]
            )
        }
    return {
        "apiVersion": KUEUE,
        "kind": "Workload",
        "metadata": metadata,
        "spec": {"podSets": spec_podsets},
        "status": status,
    }


@st.composite
def histories(
    draw: st.DrawFn, make: Callable[[str], st.SearchStrategy[Obj]], names: list[str]
) -> list[list[Obj | None]]:
    """Per object: its versions in order; the last is its final state, or None when deleted."""
    out: list[list[Obj | None]] = []
    for name in names:
        versions: list[Obj | None] = [draw(make(name)) for _ in range(draw(st.integers(1, 3)))]
        if draw(st.integers(0, 4)) == 0:
            versions.append(None)
        out.append(versions)
    return out


@st.composite
def clusters(
    draw: st.DrawFn,
) -> tuple[list[list[Obj | None]], list[list[Obj | None]], list[list[Obj | None]], random.Random]:
    node_names = NODE_NAMES[: draw(st.integers(1, len(NODE_NAMES)))]
    node_h = draw(histories(nodes, node_names))
    pod_h = draw(histories(pods, [f"p{i}" for i in range(draw(st.integers(0, 8)))]))
    wl_h = draw(histories(lambda name: workloads(name, node_names), [f"w{i}" for i in range(draw(st.integers(0, 5)))]))
    pod_h += [[draw(member_pods(f"m{i}", final(wl_h), node_names))] for i in range(draw(st.integers(0, 4)))]
    return node_h, pod_h, wl_h, draw(st.randoms(use_true_random=False))


@st.composite
def member_pods(draw: st.DrawFn, name: str, wls: list[Obj], node_names: list[str]) -> Obj:
    """A pod as our ungater releases it: a Workload's labels and one of its domains' nodeSelector,
    bound to a node (often one of that domain's)."""
    pod = draw(pods(name))
    pod["spec"]["nodeName"] = draw(st.sampled_from(node_names))
    pod["status"]["phase"] = "Running"
    annotated = [w for w in wls if c.TOPOLOGY_ASSIGNMENT_ANNOTATION in w["metadata"].get("annotations", {})]
    if not annotated:
        return pod
    wl = draw(st.sampled_from(annotated))
    decoded = dict(decode_assignment_annotation(wl["metadata"]["annotations"][c.TOPOLOGY_ASSIGNMENT_ANNOTATION]))
    podset = draw(st.sampled_from(sorted(decoded)))
    assignment = decoded[podset]
    domain = draw(st.sampled_from(assignment.domains))
    pod["metadata"]["labels"] = {c.WORKLOAD_LABEL: wl["metadata"]["name"], c.PODSET_LABEL: podset}
    pod["spec"]["nodeSelector"] = dict(zip(assignment.levels, domain.values, strict=True))
    host = domain.values[-1] if assignment.levels[-1] == HOST else None
    on_host = [n for n in node_names if hostname(n) == host]
    if on_host and draw(st.booleans()):
        pod["spec"]["nodeName"] = on_host[0]
    return pod


def final(history: list[list[Obj | None]]) -> list[Obj]:
    return [versions[-1] for versions in history if versions[-1] is not None]


# --- the three readers --------------------------------------------------------------------------


def kueue_config() -> KueueConfig:
    objs = config_objects()
    return KueueConfig(
        topologies={o["metadata"]["name"]: Topology.model_validate(o) for o in objs if o["kind"] == "Topology"},
        flavors={
            o["metadata"]["name"]: ResourceFlavor.model_validate(o) for o in objs if o["kind"] == "ResourceFlavor"
        },
        checks={o["metadata"]["name"]: AdmissionCheck.model_validate(o) for o in objs if o["kind"] == "AdmissionCheck"},
        queues=[ClusterQueue.model_validate(o) for o in objs if o["kind"] == "ClusterQueue"],
    )


def live_by_events(
    node_h: list[list[Obj | None]],
    pod_h: list[list[Obj | None]],
    wl_h: list[list[Obj | None]],
    rnd: random.Random,
    ds_h: list[list[Obj | None]] | None = None,
) -> LiveCapacity:
    """What the controller's informer handlers do (``CapacityCache``), event by event, in a
    random order across objects."""
    cfg = kueue_config()
    checks = our_checks(cfg.checks.values(), c.CONTROLLER_NAME)
    live = LiveCapacity()
    live.set_flavors(flavor_specs(checks, cfg.queues, cfg.topologies.get, cfg.flavors.get)[0])

    def node_event(name: str, obj: Obj | None) -> None:
        if obj is None:
            live.delete_node(name)
        else:
            live.upsert_node(slim_node(obj))

    def daemonset_event(name: str, obj: Obj | None) -> None:
        # The informer keeps nothing for a DaemonSet being deleted: as a delete.
        spec = None if obj is None else daemonset_spec(obj)
        if spec is None:
            live.delete_daemonset(f"uid-{name}")
        else:
            live.upsert_daemonset(spec)

    def pod_event(name: str, obj: Obj | None) -> None:
        if obj is None:
            remove_pod(live, f"ns/{name}")
        else:
            feed_pod(live, slim_pod(obj))

    def workload_event(name: str, obj: Obj | None) -> None:
        if obj is None:
            live.remove_workload_usage(f"ns/{name}")
            live.forget(f"ns/{name}")
            live.unidentify(f"ns/{name}")
        else:
            feed_workload(live, Workload.model_validate(obj), checks)

    queues: list[tuple[Callable[[str, Obj | None], None], str, list[Obj | None]]] = []
    events = ((node_event, node_h), (daemonset_event, ds_h or []), (pod_event, pod_h), (workload_event, wl_h))
    for apply, history in events:
        for versions in history:
            name = next(v for v in versions if v is not None)["metadata"]["name"]
            queues.append((apply, name, list(versions)))
    while queues:
        i = rnd.randrange(len(queues))
        apply, name, versions = queues[i]
        apply(name, versions.pop(0))
        if not versions:
            queues.pop(i)
        if rnd.random() < 0.3:  # a decision reads a snapshot: later events adjust it in place
            live.snapshot(rnd.choice(sorted(live.flavors())))
    return live


def planner_of(objs: list[Obj]) -> Planner:
    parsed = [parse_object(o) for o in [*config_objects(), *objs]]
    return Planner([p for p in parsed if p is not None])


def free_by_domain(snap: TopologySnapshot) -> dict[tuple[str, tuple[str, ...]], dict[str, int]]:
    """(level, domain values) -> nonzero free amounts per resource (a resource column the model
    once saw but no object holds now reads 0 everywhere, so zeros carry no information)."""
    columns = sorted(snap.capacity.columns.items(), key=lambda kv: kv[1])
    out = {}
    for lvl, matrix in enumerate(level_free(snap)):
        level = snap.tree.levels[lvl]
        for values, row in zip(level.values, matrix, strict=True):
            out[(level.key, values)] = {r: int(row[i]) for r, i in columns if i < len(row) and row[i]}
    return out


def capacity_command(objs: list[Obj]) -> dict[str, dict[tuple[str, tuple[str, ...]], dict[str, int]]]:
    """flavor -> what ``kueue-tas capacity -o json`` prints, from these objects (pods filtered as
    its field selector filters them on the API server)."""
    chargeable = [
        o
        for o in objs
        if o["kind"] == "Pod" and o["spec"].get("nodeName") and o["status"]["phase"] not in ("Succeeded", "Failed")
    ]
    state = ClusterState(
        kueue_config(),
        nodes=[slim_node(o) for o in objs if o["kind"] == "Node"],
        pods=[slim_pod(o) for o in chargeable],
        workloads=[Workload.model_validate(o) for o in objs if o["kind"] == "Workload"],
        daemonsets=[s for o in objs if o["kind"] == "DaemonSet" and (s := daemonset_spec(o)) is not None],
    )
    # The settings' own defaults (the live model and plan use DEFAULT_POLICY, which is them): a
    # copy of an older default here trusted the system priority classes, so the command reserved
    # for a tenant's DaemonSet naming one while the controller did not (issue 30's new default).
    defaults = Settings(leader_election=False)
    fake_settings = argparse.Namespace(
        annotation_prefix=c.DEFAULT_ANNOTATION_PREFIX,
        controller_name=c.CONTROLLER_NAME,
        daemonset_reservation_namespaces=defaults.daemonset_reservation_namespaces,
        daemonset_reservation_priority_classes=defaults.daemonset_reservation_priority_classes,
        daemonset_reservation_seconds=defaults.daemonset_reservation_seconds,
    )
    args = argparse.Namespace(config=None, kubeconfig=None, topology=None, resource=None, output="json", depth=None)
    out = io.StringIO()
    with (
        mock.patch.object(cap, "load_settings", return_value=fake_settings),
        mock.patch.object(cap, "run_read", return_value=state),
        contextlib.redirect_stdout(out),
    ):
        assert cap.run(args) == 0
    return {
        f["name"]: {
            (lvl["key"], tuple(d["values"])): {r: v for r, v in d["free"].items() if v}
            for lvl in f["levels"]
            for d in lvl["domains"]
        }
        for t in json.loads(out.getvalue())["topologies"]
        for f in t["flavors"]
    }


# --- the properties -----------------------------------------------------------------------------

PROPERTY = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
