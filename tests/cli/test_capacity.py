"""``kueue-tas capacity``: the per-domain view and its rendering, from plain objects (no cluster).

Cluster: Topology ``topo`` = block / rack / hostname, flavor ``gpu`` (nodes labelled
``pool=a``) governed by our AdmissionCheck ``tas``; 1 block x 2 racks x 2 hosts of 8 GPUs,
32 cpu, 110 pods. A DaemonSet-like pod takes 2 GPUs on ``h11``; a Workload our check admitted
holds 4 one-GPU pods on ``h21``.
"""

from __future__ import annotations

import json
from functools import partial
from typing import Any

import builders as mk
import pytest
from vocab import BLOCK, CONTROLLER, GPU, HOST, PODSET_LABEL, RACK, UNCONSTRAINED, WORKLOAD_LABEL

from kueue_tas.api.kueue_objects import AdmissionCheck, ClusterQueue, ResourceFlavor, Topology
from kueue_tas.api.workload import Workload
from kueue_tas.capacity.feed import capacity_from_lists
from kueue_tas.capacity.rules import flavor_specs, our_checks, pod_charge, workload_usage
from kueue_tas.cli import capacity as cap
from kueue_tas.cli.main import main
from kueue_tas.controllers.informers import slim_node
from kueue_tas.kube.slim import slim_pod
from kueue_tas.topology.assignment import DomainAssignment, TopologyAssignment

HOSTS = (("h11", "b1-r1"), ("h12", "b1-r1"), ("h21", "b1-r2"), ("h22", "b1-r2"))


# A pod of another controller (a DaemonSet's, say), asking one cpu.
ns_pod = partial(mk.pod, namespace="ns", requests={"cpu": "1"})


def config(
    controller: str = CONTROLLER,
) -> tuple[dict[str, Topology], dict[str, ResourceFlavor], list[AdmissionCheck], list[ClusterQueue]]:
    topo = Topology.model_validate(mk.topology("topo", (BLOCK, RACK, HOST)))
    rf = ResourceFlavor.model_validate(mk.flavor("gpu", {"pool": "a"}))
    ac = AdmissionCheck.model_validate(mk.admission_check("tas", "topo", controller))
    cq = ClusterQueue.model_validate(mk.cluster_queue("cq", ("gpu",), {"tas": ["gpu"]}, covered=(GPU,), quota=None))
    return {"topo": topo}, {"gpu": rf}, [ac], [cq]


ON_H21 = TopologyAssignment((HOST,), (DomainAssignment(("h21",), 4),))


def admitted(name: str, *, finished: bool = False, **changes: Any) -> Workload:
    """Workload ns/<name> holding 4 one-GPU pods on h21 (ON_H21), admitted on ``gpu``, check ``tas``
    Ready; ``changes`` override the ``builders.workload`` arguments."""
    conditions = [mk.condition("QuotaReserved"), mk.condition("Admitted")]
    args: dict[str, Any] = {
        "namespace": "ns",
        "uid": f"uid-{name}",
        "queue": None,
        "assignment": ON_H21,
        "admitted_flavor": "gpu",
        "check_state": "Ready",
        "check_time": None,
        "conditions": [*conditions, mk.condition("Finished")] if finished else conditions,
    }
    return Workload.model_validate(mk.workload(name, 4, **(args | changes)))


NODES = [mk.node(h, labels={BLOCK: "b1", RACK: r, "pool": "a"}, gpus=8) for h, r in HOSTS]


def flavor_view(
    nodes: list[dict[str, Any]] | None = None,
    pods: list[dict[str, Any]] | None = None,
    workloads: list[Workload] | None = None,
    controller: str = CONTROLLER,
    resource: str | None = None,
) -> cap.FlavorCapacity:
    topologies, flavors, checks, queues = config()
    ours = our_checks(checks, controller)
    specs, _ = flavor_specs(ours, queues, topologies.get, flavors.get, controller)
    model = capacity_from_lists(
        specs,
        ours,
        [slim_node(n) for n in (NODES if nodes is None else nodes)],
        [slim_pod(p) for p in (pods if pods is not None else [ns_pod("ds-1", "h11", gpus=2)])],
        workloads if workloads is not None else [admitted("wl")],
    )
    snap = model.snapshot("gpu")
    assert snap is not None
    return cap.flavor_capacity("gpu", specs["gpu"].node_labels, snap, resource)


def by_values(fc: cap.FlavorCapacity) -> dict[tuple[str, ...], cap.DomainCapacity]:
    return {d.values: d for lvl in fc.levels for d in lvl.domains}


# --- the numbers ------------------------------------------------------------------------------


def test_free_is_allocatable_minus_other_pods_minus_admitted_assignments() -> None:
    fc = flavor_view()
    d = by_values(fc)
    assert fc.resource == GPU and fc.nodes == 4
    assert [lvl.key for lvl in fc.levels] == [BLOCK, RACK, HOST]
    assert {v: (x.free[GPU], x.allocatable[GPU]) for v, x in d.items()} == {
        ("b1",): (26, 32),
        ("b1", "b1-r1"): (14, 16),
        ("b1", "b1-r1", "h11"): (6, 8),
        ("b1", "b1-r1", "h12"): (8, 8),
        ("b1", "b1-r2"): (12, 16),
        ("b1", "b1-r2", "h21"): (4, 8),
        ("b1", "b1-r2", "h22"): (8, 8),
    }
    # One pod on h11 and four assigned on h21, each a "pods" slot too.
    assert d[("b1", "b1-r1", "h11")].free["pods"] == 109
    assert d[("b1", "b1-r2", "h21")].free["pods"] == 106
    assert d[("b1",)].free["cpu"] == 4 * 32_000 - 1000  # millicores; the assignment asked no cpu
    assert {v: x.nodes for v, x in d.items() if len(v) < 3} == {("b1",): 4, ("b1", "b1-r1"): 2, ("b1", "b1-r2"): 2}


def test_largest_free_domain_is_marked_once_per_level_first_in_name_order_on_ties() -> None:
    fc = flavor_view()
    marked = [(lvl.key, [d.values for d in lvl.domains if d.largest]) for lvl in fc.levels]
    assert marked == [(BLOCK, [("b1",)]), (RACK, [("b1", "b1-r1")]), (HOST, [("b1", "b1-r1", "h12")])]


def test_pods_that_hold_nothing_outside_assignments_are_not_charged() -> None:
    pods = [
        ns_pod("done", "h11", gpus=8, phase="Succeeded"),
        ns_pod("failed", "h11", gpus=8, phase="Failed"),
        ns_pod("unbound", "", gpus=8),
    ]
    d = by_values(flavor_view(pods=pods, workloads=[]))
    assert all(x.free[GPU] == x.allocatable[GPU] for x in d.values())
    assert pod_charge(slim_pod(ns_pod("ds", "h11", gpus=2))) == ("h11", {"cpu": 1000, GPU: 2, "pods": 1})


OURS = {WORKLOAD_LABEL: "uid-wl", PODSET_LABEL: "main"}
ON_H21_SELECTOR = {HOST: "h21"}


def test_user_pod_with_our_labels_but_no_admitted_workload_is_charged() -> None:
    # Issue 12, defect 2: labels and annotations anyone can write never make a pod invisible.
    pods = [
        ns_pod("labelled", "h12", gpus=3, labels=OURS),
        ns_pod("annotated", "h22", gpus=2, annotations={UNCONSTRAINED: "true"}),
    ]
    d = by_values(flavor_view(pods=pods, workloads=[]))
    assert d[("b1", "b1-r1", "h12")].free[GPU] == 5
    assert d[("b1", "b1-r2", "h22")].free[GPU] == 6


def test_pod_of_our_admitted_workload_is_charged_exactly_once() -> None:
    # ns/wl holds 4 slots on h21; two of its pods run there: 4 GPUs used, not 6.
    pods = [ns_pod(f"wl-{i}", "h21", gpus=1, labels=OURS, selector=ON_H21_SELECTOR) for i in range(2)]
    d = by_values(flavor_view(pods=pods))
    assert d[("b1", "b1-r2", "h21")].free[GPU] == 4
    assert d[("b1", "b1-r2", "h21")].free["pods"] == 106
    # More pods than slots: the ones beyond the count are charged as well.
    pods = [ns_pod(f"wl-{i}", "h21", gpus=1, labels=OURS, selector=ON_H21_SELECTOR) for i in range(6)]
    assert by_values(flavor_view(pods=pods))[("b1", "b1-r2", "h21")].free[GPU] == 2


@pytest.mark.parametrize(
    ("pod", "why"),
    [
        (ns_pod("out", "h12", gpus=3, labels=OURS), "bound outside the workload's domains"),
        (ns_pod("x", "h21", gpus=3, labels=OURS | {WORKLOAD_LABEL: "uid-other"}), "another workload"),
        (ns_pod("x", "h21", gpus=3, labels=OURS | {PODSET_LABEL: "ghost"}), "a PodSet it lacks"),
        (ns_pod("x", "h21", gpus=3, labels=OURS, namespace="elsewhere"), "another namespace"),
    ],
)
def test_pod_claiming_our_workload_without_filling_its_slot_is_charged(pod: dict[str, Any], why: str) -> None:
    d = by_values(flavor_view(pods=[pod]))
    node = pod["spec"]["nodeName"]
    used = 3 + (4 if node == "h21" else 0)  # the workload's 4 slots on h21 stay held
    assert d[("b1", "b1-r1" if node == "h12" else "b1-r2", node)].free[GPU] == 8 - used, why
    assert d[("b1", "b1-r2", "h21")].free[GPU] == 8 - 4 - (3 if node == "h21" else 0), why


@pytest.mark.parametrize(
    "wl",
    [
        admitted("retry", check_state="Retry"),
        admitted("pending", check_state="Pending"),
        admitted("other-check", check="someone-elses"),
        admitted("finished", finished=True),
    ],
)
def test_assignments_count_only_while_our_check_is_ready(wl: Workload) -> None:
    d = by_values(flavor_view(pods=[], workloads=[wl]))
    assert d[("b1", "b1-r2", "h21")].free[GPU] == 8
    assert workload_usage(wl, {"tas"}, {"gpu"}) is None


def test_checks_of_another_controller_name_put_no_flavor_on_a_topology() -> None:
    topologies, flavors, checks, queues = config(controller="kueue-tas.io/e2e-abc")
    assert flavor_specs(our_checks(checks, CONTROLLER), queues, topologies.get, flavors.get, CONTROLLER)[0] == {}
    ours = our_checks(checks, "kueue-tas.io/e2e-abc")
    specs, per_check = flavor_specs(ours, queues, topologies.get, flavors.get, "kueue-tas.io/e2e-abc")
    assert list(specs) == ["gpu"] and per_check == {"tas": {"gpu"}}


def test_not_ready_nodes_and_nodes_of_other_pools_are_not_in_the_tree() -> None:
    nodes = [
        *NODES,
        mk.node("h23", labels={BLOCK: "b1", RACK: "b1-r2", "pool": "a"}, gpus=8, ready=False),
        mk.node("x1", labels={BLOCK: "b9", RACK: "b9-r1", "pool": "b"}, gpus=8),
    ]
    fc = flavor_view(nodes=nodes)
    assert fc.nodes == 4
    assert [d.values for d in fc.levels[0].domains] == [("b1",)]


def test_cpu_is_the_bar_resource_without_gpus_and_resource_can_be_forced() -> None:
    cpu_nodes = [mk.node(h, labels={BLOCK: "b1", RACK: "b1-r1", "pool": "a"}, gpus=None) for h in ("h11", "h12")]
    assert flavor_view(nodes=cpu_nodes, pods=[], workloads=[]).resource == "cpu"
    fc = flavor_view(resource="pods")
    assert fc.resource == "pods"
    # h11 and h12 tie at first glance, but h11 lost a pod slot to the DaemonSet pod.
    assert [d.values[-1] for d in fc.levels[2].domains if d.largest] == ["h12"]


# --- rendering --------------------------------------------------------------------------------


def test_bar_shows_the_free_share_and_never_rounds_away_the_extremes() -> None:
    assert cap.bar(8, 8, width=10) == "[##########]"
    assert cap.bar(0, 8, width=10) == "[..........]"
    assert cap.bar(4, 8, width=10) == "[#####.....]"
    assert cap.bar(1, 1000, width=10) == "[#.........]"  # some free: at least one mark
    assert cap.bar(999, 1000, width=10) == "[#########.]"  # not all free: never a full bar
    assert cap.bar(-3, 8, width=10) == "[..........]"  # overcommitted
    assert cap.bar(0, 0, width=4) == "[    ]"  # nothing to show


TEXT = """\
Topology topo: cloud.provider.com/topology-block > cloud.provider.com/topology-rack > kubernetes.io/hostname
  Flavor gpu: 4 node(s), node labels pool=a; bars: free/allocatable nvidia.com/gpu, * = most free nvidia.com/gpu on its level
    cloud.provider.com/topology-block=b1      [################....]  nvidia.com/gpu 26/32  pods 435/440  *
      cloud.provider.com/topology-rack=b1-r1  [##################..]  nvidia.com/gpu 14/16  pods 219/220  *
        host=h11                              [###############.....]  nvidia.com/gpu 6/8    pods 109/110
        host=h12                              [####################]  nvidia.com/gpu 8/8    pods 110/110  *
      cloud.provider.com/topology-rack=b1-r2  [###############.....]  nvidia.com/gpu 12/16  pods 216/220
        host=h21                              [##########..........]  nvidia.com/gpu 4/8    pods 106/110
        host=h22                              [####################]  nvidia.com/gpu 8/8    pods 110/110
"""  # noqa: E501


def test_text_is_a_tree_level_by_level_with_bars_and_the_largest_marked() -> None:
    topo = cap.TopologyCapacity("topo", (BLOCK, RACK, HOST), (flavor_view(),))
    assert cap.render_text([topo]) == TEXT


def test_color_makes_the_largest_lines_bold() -> None:
    topo = cap.TopologyCapacity("topo", (BLOCK, RACK, HOST), (flavor_view(),))
    lines = cap.render_text([topo], color=True).splitlines()
    bold = [ln for ln in lines if ln.startswith(cap.BOLD)]
    assert len(bold) == 3 and all(ln.endswith("*" + cap.RESET) for ln in bold)
    assert "h12" in bold[2]


def test_topology_without_flavor_and_flavor_without_nodes_say_so() -> None:
    empty = flavor_view(nodes=[], pods=[], workloads=[])
    text = cap.render_text(
        [
            cap.TopologyCapacity("lonely", (RACK,), (), "no flavor: no ClusterQueue lists ..."),
            cap.TopologyCapacity("topo", (BLOCK, RACK, HOST), (empty,)),
        ]
    )
    assert text.splitlines() == [
        "Topology lonely: cloud.provider.com/topology-rack",
        "  no flavor: no ClusterQueue lists ...",
        "Topology topo: cloud.provider.com/topology-block > cloud.provider.com/topology-rack > kubernetes.io/hostname",
        "  Flavor gpu: 0 node(s), node labels pool=a; bars: free/allocatable cpu, * = most free cpu on its level",
        "    no eligible node (Ready, schedulable, with the flavor's node labels and every level label)",
    ]


def test_json_keys_and_values() -> None:
    topo = cap.TopologyCapacity("topo", (BLOCK, RACK, HOST), (flavor_view(),))
    out = json.loads(json.dumps(cap.capacity_json([topo])))
    (t,) = out["topologies"]
    assert set(t) == {"name", "levels", "message", "flavors"}
    (f,) = t["flavors"]
    assert set(f) == {"name", "nodeLabels", "nodes", "resource", "levels"}
    assert (f["name"], f["nodeLabels"], f["nodes"], f["resource"]) == ("gpu", {"pool": "a"}, 4, GPU)
    assert [lvl["key"] for lvl in f["levels"]] == [BLOCK, RACK, HOST]
    rack = f["levels"][1]["domains"][0]
    assert set(rack) == {"values", "nodes", "allocatable", "free", "largest"}
    assert rack["values"] == ["b1", "b1-r1"] and rack["largest"] is True and rack["nodes"] == 2
    assert rack["free"][GPU] == 14 and rack["allocatable"]["memory"] == 2 * 256 * 2**30


# --- the command's error path -----------------------------------------------------------------


def test_unreachable_cluster_is_one_line_and_exit_1(tmp_path: Any, capsys: pytest.CaptureFixture[str]) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        "clusters: [{name: c, cluster: {server: 'https://127.0.0.1:1'}}]\n"
        "users: [{name: u, user: {token: t}}]\n"
        "contexts: [{name: c, context: {cluster: c, user: u}}]\n"
    )
    assert main(["capacity", "--kubeconfig", str(kubeconfig)]) == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert err.startswith("error: cannot reach the Kubernetes API server at https://127.0.0.1:1: ")
    assert "Traceback" not in err


def test_bad_config_file_is_an_error_not_a_traceback(tmp_path: Any, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = tmp_path / "c.yaml"
    cfg.write_text("no_such_setting: 1\n")
    assert main(["capacity", "--config", str(cfg)]) == 1
    assert "unknown setting(s) no_such_setting" in capsys.readouterr().err


def test_an_overcommitted_host_shows_zero_and_takes_nothing_from_its_siblings() -> None:
    d = by_values(flavor_view(pods=[ns_pod("big", "h11", gpus=10)], workloads=[]))
    assert d[("b1", "b1-r1", "h11")].free[GPU] == 0
    assert d[("b1", "b1-r1")].free[GPU] == 8
    assert d[("b1",)].free[GPU] == 24


def test_depth_shows_only_the_top_levels() -> None:
    topo = cap.TopologyCapacity("topo", (BLOCK, RACK, HOST), (flavor_view(),))
    lines = cap.render_text([topo], depth=2).splitlines()
    assert [ln.split()[0] for ln in lines[2:]] == [
        "cloud.provider.com/topology-block=b1",
        "cloud.provider.com/topology-rack=b1-r1",
        "cloud.provider.com/topology-rack=b1-r2",
    ]
    (f,) = cap.capacity_json([topo], depth=1)["topologies"][0]["flavors"]
    assert [lvl["key"] for lvl in f["levels"]] == [BLOCK]
    with pytest.raises(SystemExit):
        main(["capacity", "--depth", "0"])
