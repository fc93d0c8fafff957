"""``kueue-tas describe workload``: the description and its rendering, from plain objects (no cluster).

Cluster: Topology ``topo`` = block / rack / hostname, flavor ``gpu`` governed by our
AdmissionCheck ``tas``; hosts h11, h12 (rack b1-r1) and h21, h22 (rack b1-r2) in block b1.
Workload ``ns/train``: PodSet ``main`` of 6 pods assigned h11: 2, h12: 2, h21: 2 (hostname
only, as Kueue writes it for a hostname-lowest Topology).
"""

from __future__ import annotations

import json
from dataclasses import replace
from functools import partial
from typing import Any

import builders as mk
import pytest
from vocab import ASSIGNMENT as ASSIGNMENT_ANNOTATION
from vocab import (
    BLOCK,
    CONTROLLER,
    GPU,
    HOST,
    PODSET_LABEL,
    PREFERRED,
    RACK,
    REQUIRED,
    SCHEDULING_GATE,
    SLICE_LEVEL,
    SLICE_SIZE,
    UNCONSTRAINED,
    WORKLOAD_LABEL,
)

from kueue_tas.api import constants as c
from kueue_tas.api.kueue_objects import AdmissionCheck, ClusterQueue, ResourceFlavor, Topology
from kueue_tas.api.object_base import Condition
from kueue_tas.api.workload import Workload
from kueue_tas.capacity.pod_counts import PodCounts
from kueue_tas.cli.cluster_read import KueueConfig, TasConfig, tas_config
from kueue_tas.cli.describe_build import describe_workload
from kueue_tas.cli.describe_model import WorkloadDescription
from kueue_tas.cli.describe_output import describe_json as json_document
from kueue_tas.cli.describe_output import render_text, request_text
from kueue_tas.cli.main import Command, build_parser, main, program_name
from kueue_tas.controllers.informers import slim_node
from kueue_tas.kube.slim import slim_pod
from kueue_tas.topology.assignment import DomainAssignment, TopologyAssignment
from kueue_tas.topology.model import NodeInfo

UID = "0f0e-uid"


def kueue(controller: str = CONTROLLER, levels: tuple[str, ...] = (BLOCK, RACK, HOST)) -> TasConfig:
    cq = mk.cluster_queue("cq", ("gpu", "cpu"), {"tas": ["gpu"]}, covered=(GPU, "cpu"), quota=None)
    cfg = KueueConfig(
        topologies={"topo": Topology.model_validate(mk.topology("topo", levels))},
        flavors={f: ResourceFlavor.model_validate(mk.flavor(f, {})) for f in ("gpu", "cpu")},
        checks={"tas": AdmissionCheck.model_validate(mk.admission_check("tas", "topo", controller))},
        queues=[ClusterQueue.model_validate(cq)],
    )
    return tas_config(cfg, CONTROLLER)


def nodes() -> list[NodeInfo]:
    hosts = (("h11", "b1-r1"), ("h12", "b1-r1"), ("h21", "b1-r2"), ("h22", "b1-r2"))
    return [
        slim_node(mk.node(f"node-{h}", labels={BLOCK: "b1", RACK: r}, hostname=h, allocatable={GPU: "8"}))
        for h, r in hosts
    ]


ASSIGNMENT = TopologyAssignment(
    (HOST,), (DomainAssignment(("h11",), 2), DomainAssignment(("h12",), 2), DomainAssignment(("h21",), 2))
)


def workload(*, quota: bool = True, admitted: bool = True, **changes: Any) -> Workload:
    """Workload ns/train: PodSet main of 6 four-GPU pods requiring a block, holding ASSIGNMENT,
    with quota (admitted on ``gpu``) unless not ``quota``, admitted unless not ``admitted``, check
    ``tas`` Ready; ``changes`` override the ``builders.workload`` arguments."""
    conditions = [
        mk.condition(
            "QuotaReserved",
            quota,
            reason="QuotaReserved" if quota else "Pending",
            message="Quota reserved in ClusterQueue cq" if quota else "couldn't assign flavors to pod set main",
        ),
        mk.condition(
            "Admitted",
            admitted,
            reason="Admitted" if admitted else "NoReservation",
            message="The workload is admitted" if admitted else "The workload has no reservation",
        ),
    ]
    args: dict[str, Any] = {
        "namespace": "ns",
        "uid": UID,
        "annotations": {REQUIRED: BLOCK},
        "gpus": 4,
        "assignment": ASSIGNMENT,
        "admitted_flavor": "gpu" if quota else None,
        "check_state": "Ready",
        "check_message": "topology assignment: main: 6 pods in 3 domain(s)",
        "check_time": "2026-01-02T03:04:05Z",
        "conditions": conditions,
    }
    return Workload.model_validate(mk.workload("train", 6, **(args | changes)))


# A pod of ns/train (PodSet main), Pending unless a test says otherwise.
train_pod = partial(mk.pod, namespace="ns", phase="Pending", labels={WORKLOAD_LABEL: UID, PODSET_LABEL: "main"})


PODS = [
    slim_pod(p)
    for p in (
        train_pod("p0", "node-h11", phase="Running"),
        train_pod("p1", "node-h11", phase="Running"),
        train_pod("p2", "node-h12", phase="Running"),
        train_pod("p3", selector={HOST: "h12", "pool": "a"}),  # released to h12, not bound yet
        train_pod("p4", gates=(SCHEDULING_GATE,)),
        train_pod("p5", "node-h22", phase="Running"),  # bound outside every assigned domain
        train_pod("p6", "node-h21", phase="Succeeded"),
    )
]

TEXT = """\
Workload ns/train
  Queue:         lq (ClusterQueue cq)
  QuotaReserved: True    QuotaReserved: Quota reserved in ClusterQueue cq
  Admitted:      True    Admitted: The workload is admitted
  Check tas:     Ready   topology assignment: main: 6 pods in 3 domain(s)
  PodSet main: 6 pod(s), flavor gpu, topology topo, required cloud.provider.com/topology-block
    pods: 7 (3 bound, 1 pending, 1 gated, 1 bound outside the assignment, 1 finished)
    cloud.provider.com/topology-block=b1: 6 pod(s)
      cloud.provider.com/topology-rack=b1-r1: 4 pod(s)
        host=h11: 2 pod(s)   [bound 2, pending 0]
        host=h12: 2 pod(s)   [bound 1, pending 1]
      cloud.provider.com/topology-rack=b1-r2: 2 pod(s)
        host=h21: 2 pod(s)   [bound 0, pending 0]
"""


def describe(
    wl: Workload | None = None,
    tas: TasConfig | None = None,
    pods: list[dict[str, Any]] | None = None,
    node_list: list[NodeInfo] | None = None,
) -> WorkloadDescription:
    slim = PODS if pods is None else [slim_pod(p) for p in pods]
    return describe_workload(wl or workload(), tas or kueue(), nodes() if node_list is None else node_list, slim)


def test_admitted_workload_tree_with_bound_pending_and_gated_pods() -> None:
    assert render_text(describe()) == TEXT


def test_counts_per_domain_and_per_podset() -> None:
    (ps,) = describe().podsets
    assert ps.domains is not None
    assert [(dom.values, dom.path, dom.assigned, dom.bound, dom.pending) for dom in ps.domains] == [
        (("h11",), ("b1", "b1-r1", "h11"), 2, 2, 0),
        (("h12",), ("b1", "b1-r1", "h12"), 2, 1, 1),
        (("h21",), ("b1", "b1-r2", "h21"), 2, 0, 0),
    ]
    assert ps.pods == PodCounts(total=7, bound=3, pending=1, gated=1, finished=1, bound_elsewhere=1, unplaced=0)


def test_released_pod_without_an_assigned_domain_is_unplaced() -> None:
    (ps,) = describe(pods=[train_pod("x", selector={HOST: "h22"}), train_pod("y")]).podsets
    assert (ps.pods.unplaced, ps.pods.pending) == (2, 0)
    assert "2 released with no domain" in render_text(
        describe(pods=[train_pod("x", selector={HOST: "h22"}), train_pod("y")])
    )


def test_pods_of_other_podsets_are_not_counted() -> None:
    (ps,) = describe(pods=[train_pod("w", "node-h11", labels={WORKLOAD_LABEL: UID, PODSET_LABEL: "workers"})]).podsets
    assert ps.pods.total == 0


def test_full_path_assignment_needs_no_node_lookup() -> None:
    full = TopologyAssignment((BLOCK, RACK), (DomainAssignment(("b1", "b1-r2"), 6),))
    tas = kueue(levels=(BLOCK, RACK))
    desc = describe(
        workload(assignment=full),
        tas,
        pods=[train_pod("a", "node-h21", phase="Running"), train_pod("b", selector={BLOCK: "b1", RACK: "b1-r2"})],
    )
    lines = render_text(desc).splitlines()
    assert lines[-3:] == [
        "    pods: 2 (1 bound, 1 pending, 0 gated)",
        "    cloud.provider.com/topology-block=b1: 6 pod(s)",
        "      cloud.provider.com/topology-rack=b1-r2: 6 pod(s)   [bound 1, pending 1]",
    ]


def test_hostname_of_a_vanished_node_falls_back_to_the_assignment_levels() -> None:
    desc = describe(node_list=[n for n in nodes() if n.labels[HOST] != "h21"], pods=[])
    (ps,) = desc.podsets
    assert ps.domains is not None and ps.domains[2].path is None
    assert render_text(desc).splitlines()[-3:] == [
        "    host=h11: 2 pod(s)   [bound 0, pending 0]",
        "    host=h12: 2 pod(s)   [bound 0, pending 0]",
        "    host=h21: 2 pod(s)   [bound 0, pending 0]",
    ]


def test_retry_shows_the_check_message_instead_of_a_tree() -> None:
    msg = 'PodSet "main": topology "topo" allows to fit only 4 out of 6 pod(s)'
    desc = describe(workload(check_state="Retry", check_message=msg, assignment=None, admitted=False), pods=[])
    lines = render_text(desc).splitlines()
    assert lines[4] == f"  Check tas:     Retry   {msg}"
    assert lines[-2:] == ["    pods: 0 (0 bound, 0 pending, 0 gated)", f"    not placed: check tas is Retry: {msg}"]
    assert describe_json(desc)["podSets"][0]["domains"] is None


def test_pending_check_and_a_stale_assignment_from_an_earlier_admission() -> None:
    (ps,) = describe(workload(check_state="Pending", check_message="", admitted=False)).podsets
    assert ps.domains is None
    assert ps.message == (
        "no assignment yet: check tas is Pending (an earlier assignment is recorded but not "
        "in force while the check is Pending)"
    )


def test_a_finished_workload_holds_no_assignment_in_force() -> None:
    # The controller's trust rule (capacity.rules.assignment_trusted): a finished Workload's
    # assignment no longer holds capacity, so describe does not show it as in force either.
    wl = workload()
    wl.status.conditions.append(
        Condition.model_validate(
            {"type": "Finished", "status": "True", "reason": "Succeeded", "message": "Job finished successfully"}
        )
    )
    (ps,) = describe(wl).podsets
    assert ps.domains is None
    assert ps.message == "no assignment in force: the Workload is finished: Succeeded: Job finished successfully"


def test_eviction_after_a_rejection_is_explained_from_the_evicted_condition() -> None:
    # What Kueue leaves after our check said Rejected: deactivated, evicted, our entry reset.
    why = (
        'The workload is deactivated due to AdmissionCheck in Rejected state: "tas" (PodSet "main" can never '
        'fit, even on an empty cluster: topology "topo" allows to fit only 16 out of 20 pod(s))'
    )
    wl = workload(
        check_state="Pending",
        check_message="Reset to Pending after eviction. Previously: Rejected",
        assignment=None,
        admitted=False,
        quota=False,
    )
    wl.spec.active = False
    wl.status.conditions.append(
        Condition(type="Evicted", status="True", reason="DeactivatedDueToAdmissionCheck", message=why)
    )
    desc = describe(wl, pods=[])
    assert desc.podsets[0].message == (
        f"not placed: the Workload was evicted and deactivated (spec.active=false): DeactivatedDueToAdmissionCheck: "
        f"{why}"
    )
    assert f"  Evicted:       True    DeactivatedDueToAdmissionCheck: {why}" in render_text(desc).splitlines()


EVENTS: list[dict[str, Any]] = [
    {
        "type": "Warning",
        "reason": "TopologyRequestRejected",
        "message": "can never fit",
        "reportingComponent": CONTROLLER,
        "eventTime": "2026-11-21T04:39:19.958535Z",
    },
    {
        "type": "Normal",
        "reason": "QuotaReserved",
        "message": "Quota reserved in ClusterQueue cq",
        "reportingComponent": "kueue-admission",
        "eventTime": "2026-11-21T04:39:19.935981Z",
    },
    {
        "type": "Warning",
        "reason": "TopologyNotFitting",
        "message": "only 4 out of 6",
        "source": {"component": "old-style"},
        "lastTimestamp": "2026-11-21T04:41:00Z",
        "count": 3,
    },
]


def test_events_oldest_first_in_text_and_json() -> None:
    desc = describe_workload(workload(), kueue(), nodes(), PODS, events=EVENTS)
    assert [e.reason for e in desc.events] == ["QuotaReserved", "TopologyRequestRejected", "TopologyNotFitting"]
    assert render_text(desc).splitlines()[-4:] == [
        "  Events:",
        "    2026-11-21T04:39:19Z  Normal  QuotaReserved from kueue-admission: Quota reserved in ClusterQueue cq",
        "    2026-11-21T04:39:19Z  Warning TopologyRequestRejected from kueue-tas.io/topology: can never fit",
        "    2026-11-21T04:41:00Z  Warning TopologyNotFitting from old-style (x3): only 4 out of 6",
    ]
    assert describe_json(desc)["events"][2] == {
        "time": "2026-11-21T04:41:00Z",
        "type": "Warning",
        "reason": "TopologyNotFitting",
        "from": "old-style",
        "message": "only 4 out of 6",
        "count": 3,
    }
    many = [dict(EVENTS[0], eventTime=f"2026-11-21T05:00:{i:02d}.000001Z") for i in range(15)]
    assert [e.time for e in describe_workload(workload(), kueue(), nodes(), [], events=many).events] == [
        f"2026-11-21T05:00:{i:02d}Z" for i in range(5, 15)
    ]


def test_no_quota_yet() -> None:
    desc = describe(
        workload(check_state="Pending", check_message="", assignment=None, quota=False, admitted=False), pods=[]
    )
    (ps,) = desc.podsets
    assert (ps.flavor, ps.message) == (
        None,
        "no assignment yet: waiting for Kueue to reserve quota: couldn't assign flavors to pod set main",
    )
    lines = render_text(desc).splitlines()
    assert lines[1] == "  Queue:         lq"
    assert lines[2] == "  QuotaReserved: False   Pending: couldn't assign flavors to pod set main"


def test_flavor_not_governed_by_our_check() -> None:
    (ps,) = describe(workload(admitted_flavor="cpu", check_state="Ready", assignment=None)).podsets
    assert ps.topology is None and ps.domains is None
    assert ps.message.startswith("not placed by kueue-tas: flavor cpu is on no Topology")


def test_checks_of_another_controller_are_not_ours() -> None:
    desc = describe(tas=kueue(controller="someone/else"))
    assert desc.checks == []
    assert desc.notes == ["no AdmissionCheck of controller kueue-tas.io/topology is on this Workload"]
    assert desc.podsets[0].domains is None


def test_implied_and_invalid_topology_requests() -> None:
    (ps,) = describe(workload(annotations={})).podsets
    assert ps.request == {"implied": True}
    assert "no topology annotation (placed as unconstrained)" in render_text(describe(workload(annotations={})))
    bad = {REQUIRED: BLOCK, UNCONSTRAINED: "true"}
    (ps,) = describe(workload(annotations=bad)).podsets
    assert ps.request is None and ps.message.startswith("invalid topology annotations: ")
    pair = {REQUIRED: BLOCK, PREFERRED: RACK}
    (ps,) = describe(workload(annotations=pair)).podsets
    assert ps.request == {"required": BLOCK, "preferred": RACK}
    assert request_text(ps.request) == f"required {BLOCK}, preferred {RACK}"


def test_slices_request_text() -> None:
    ann = {
        REQUIRED: BLOCK,
        SLICE_LEVEL: RACK,
        SLICE_SIZE: "2",
    }
    (ps,) = describe(workload(annotations=ann)).podsets
    assert ps.request == {"required": BLOCK, "sliceLevel": RACK, "sliceSize": 2}
    assert request_text(ps.request) == f"required {BLOCK}, slices of 2 in one {RACK}"


def test_malformed_annotation_is_a_note() -> None:
    desc = describe(workload(assignment=None, workload_annotations={ASSIGNMENT_ANNOTATION: "{nope"}))
    assert desc.notes[0].startswith("annotation kueue-tas.io/topology-assignment is malformed: ")


def describe_json(desc: WorkloadDescription) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(json.dumps(json_document(desc)))
    return data


def test_json_keys_and_values() -> None:
    out = describe_json(describe())
    assert set(out) == {
        "namespace",
        "name",
        "uid",
        "queue",
        "clusterQueue",
        "conditions",
        "checks",
        "podSets",
        "events",
        "placementNotEnforced",
        "daemonSetReservations",
    }
    assert out["events"] == []
    assert out["daemonSetReservations"] == []
    assert out["placementNotEnforced"] == []
    assert (out["namespace"], out["name"], out["uid"], out["queue"], out["clusterQueue"]) == (
        "ns",
        "train",
        UID,
        "lq",
        "cq",
    )
    assert out["conditions"] == {
        "QuotaReserved": {"status": "True", "reason": "QuotaReserved", "message": "Quota reserved in ClusterQueue cq"},
        "Admitted": {"status": "True", "reason": "Admitted", "message": "The workload is admitted"},
    }
    assert out["checks"] == [
        {
            "name": "tas",
            "state": "Ready",
            "lastTransitionTime": "2026-01-02T03:04:05Z",
            "message": "topology assignment: main: 6 pods in 3 domain(s)",
        }
    ]
    (ps,) = out["podSets"]
    assert set(ps) == {
        "name",
        "count",
        "flavor",
        "topology",
        "request",
        "topologyLevels",
        "levels",
        "levelNames",
        "domains",
        "pods",
        "message",
    }
    assert (ps["name"], ps["count"], ps["flavor"], ps["topology"], ps["request"]) == (
        "main",
        6,
        "gpu",
        "topo",
        {"required": BLOCK},
    )
    assert ps["topologyLevels"] == [BLOCK, RACK, HOST] and ps["levels"] == [HOST]
    assert ps["levelNames"] == {HOST: "host"}  # the default name of the hostname level
    assert ps["domains"][1] == {
        "values": ["h12"],
        "path": ["b1", "b1-r1", "h12"],
        "assigned": 2,
        "bound": 1,
        "pending": 1,
    }
    assert ps["pods"] == {
        "total": 7,
        "bound": 3,
        "pending": 1,
        "gated": 1,
        "finished": 1,
        "boundElsewhere": 1,
        "unplaced": 0,
    }
    assert ps["message"] == ""


# --- command line -----------------------------------------------------------------------------


def test_name_or_for_job_is_required(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["describe", "workload"]) == 1
    assert main(["describe", "workload", "a", "--for-job", "b"]) == 1
    assert capsys.readouterr().err.count("error: give either a Workload NAME or --for-job JOB") == 2


def test_arguments_and_aliases() -> None:
    args = build_parser().parse_args(["describe", "wl", "x", "-n", "team", "-o", "json", "--kubeconfig", "k"])
    assert (args.name, args.namespace, args.output, args.kubeconfig, args.func) == (
        "x",
        "team",
        "json",
        "k",
        Command("describe"),
    )


def test_kubectl_plugin_name() -> None:
    assert program_name("/usr/local/bin/kubectl-kueue_tas") == "kubectl kueue_tas"
    assert program_name("/venv/bin/kueue-tas") == "kueue-tas"
    assert build_parser("kubectl kueue_tas").format_usage().startswith("usage: kubectl kueue_tas ")


def test_unreachable_cluster_is_one_line_and_exit_1(tmp_path: Any, capsys: pytest.CaptureFixture[str]) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        "clusters: [{name: c, cluster: {server: 'https://127.0.0.1:1'}}]\n"
        "users: [{name: u, user: {token: t}}]\n"
        "contexts: [{name: c, context: {cluster: c, user: u, namespace: team-a}}]\n"
    )
    assert main(["describe", "workload", "x", "--kubeconfig", str(kubeconfig)]) == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert err.startswith("error: cannot reach the Kubernetes API server at https://127.0.0.1:1: ")


def test_namespace_defaults_to_the_kubeconfig_context(tmp_path: Any) -> None:
    from kueue_tas.cli.cluster_read import default_namespace
    from kueue_tas.runtime.config import Settings

    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        "clusters: [{name: c, cluster: {server: 'https://127.0.0.1:1'}}]\n"
        "users: [{name: u, user: {token: t}}]\n"
        "contexts: [{name: c, context: {cluster: c, user: u, namespace: team-a}}]\n"
    )
    assert default_namespace(Settings(kubeconfig=kubeconfig)) == "team-a"
    assert default_namespace(Settings(kubeconfig=tmp_path / "missing")) == "default"


def test_placement_no_longer_enforced_is_shown() -> None:
    """Issue 13, deliverable 5: the Topology lost its block level (the PodSet's required one)
    and a node of the assignment went NotReady: describe says so, by the controller's rule."""
    lost_level = describe(tas=kueue(levels=(RACK, HOST)))
    problem = f"topology level {BLOCK} is no longer available"
    assert lost_level.placement_not_enforced == [problem]
    assert f"  Placement:     NOT ENFORCED: {problem}\n" in render_text(lost_level)
    assert describe_json(lost_level)["placementNotEnforced"] == [problem]

    down = [n if n.name != "node-h12" else replace(n, ready=False) for n in nodes()]
    (whole,) = describe(node_list=down).placement_not_enforced
    assert whole == (
        f'PodSet "main": required domain {BLOCK}=b1 is no longer whole: the Ready nodes its pods were '
        "assigned to hold 4 of 6"
    )
    # Nothing placed (the assignment is not trusted): nothing to judge.
    assert describe(wl=workload(check_state="Pending"), node_list=down).placement_not_enforced == []


def test_a_hold_and_a_reservation_recorded_on_the_workload_are_described() -> None:
    """While it waits, what a preemption holds and what a reservation keeps for it are recorded on
    the Workload; describe says both (the controller removes them once it is placed)."""
    hold = '{"flavor":"gpu","level":"rack","values":["b1","r2"],"until":"2026-01-01T02:05:00Z","victims":["ns/low"]}'
    reserved = '{"flavor":"gpu","level":"rack","values":["b1","r3"],"since":"2026-01-01T01:00:00Z"}'
    wl = workload(admitted=False)
    wl.metadata.annotations[c.PREEMPTION_HOLD_ANNOTATION] = hold
    wl.metadata.annotations[c.RESERVATION_ANNOTATION] = reserved
    notes = describe(wl).notes
    assert 'topology preemption: rack "r2" is held for it until 2026-01-01T02:05:00Z (told to leave: ns/low)' in notes
    assert (
        'reservation: rack "r3" is reserved for it since 2026-01-01T01:00:00Z; expected to fit once its occupants '
        "end (not all declare a runtime)" in notes
    )
    # Unreadable records are not described (and hold nothing in the controller either).
    wl.metadata.annotations[c.PREEMPTION_HOLD_ANNOTATION] = "{"
    del wl.metadata.annotations[c.RESERVATION_ANNOTATION]
    assert not [n for n in describe(wl).notes if n.startswith(("topology preemption", "reservation"))]
