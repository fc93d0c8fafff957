"""Issue 27, defect 5: with a non-default ``scheduling_gate`` setting every comparison with our
gate name uses the setting (the slim pod's ``gated``, hence the ungater, the stray-pod rule and
the pod counts), so pods held by the configured gate are released."""

from __future__ import annotations

import builders as mk
from ungater_harness import CHECK, UID, FixedChecks, Recorder, assignment, workload

from kueue_tas.api import constants as c
from kueue_tas.capacity.pod_counts import podset_pod_counts
from kueue_tas.controllers.deps import ControllerDeps
from kueue_tas.controllers.informers import SharedInformers
from kueue_tas.controllers.setup import setup_controllers
from kueue_tas.controllers.ungate import reconciler as uc
from kueue_tas.kube.slim import slim_pod
from kueue_tas.runtime.config import Settings
from kueue_tas.runtime.manager import Manager
from kueue_tas.runtime.metrics import Metrics

GATE = "example.com/placement"
LABELS = {c.WORKLOAD_LABEL: UID, c.PODSET_LABEL: "main"}


def test_slim_pod_is_gated_by_the_configured_gate_only() -> None:
    ours = mk.pod("a", namespace="ns", gates=[GATE])
    default = mk.pod("b", namespace="ns", gates=[c.SCHEDULING_GATE])
    assert slim_pod(ours, gate=GATE).gated and not slim_pod(default, gate=GATE).gated
    assert slim_pod(default).gated and not slim_pod(ours).gated  # the default setting


async def test_run_wires_the_setting_into_the_pod_informer() -> None:
    settings = Settings(leader_election=False, scheduling_gate=GATE)
    live = setup_controllers(Manager(None, settings, Metrics()), settings)
    live.informers.pods.handle_event("ADDED", mk.pod("a", namespace="ns", uid="a", resource_version="1", gates=[GATE]))
    pod = live.informers.pod_store.get("ns/a")
    assert pod is not None and pod.gated


async def test_the_ungater_releases_pods_held_by_a_configured_gate() -> None:
    settings = Settings(leader_election=False, ungate_batch_period_seconds=0, scheduling_gate=GATE)
    metrics = Metrics()
    informers = SharedInformers.register(Manager(None, settings, metrics), settings.annotation_prefix, GATE)
    rec = Recorder()
    checks = FixedChecks()
    assert checks.names() == {CHECK}
    ungater = uc.Ungater(
        ControllerDeps(informers=informers, checks=checks, events=rec, metrics=metrics, settings=settings), patcher=rec
    )
    informers.workloads.handle_event("ADDED", workload(assignment=assignment(("n1", 2))))
    for name in ("p0", "p1"):
        pod = mk.pod(name, namespace="ns", uid=name, resource_version="1", labels=LABELS, gates=[GATE])
        informers.pods.handle_event("ADDED", pod)
    await ungater.reconcile("ns/wl")
    assert sorted(p["name"] for p in rec.patches) == ["p0", "p1"]
    assert all(p["patch"]["spec"]["schedulingGates"] == [{"$patch": "delete", "name": GATE}] for p in rec.patches)


def test_pod_counts_count_pods_held_by_the_configured_gate_as_gated() -> None:
    pods = [
        slim_pod(mk.pod(f"p{i}", namespace="ns", labels=LABELS, gates=[GATE], phase="Pending"), gate=GATE)
        for i in range(3)
    ]
    counts, _, _ = podset_pod_counts(pods, assignment(("n1", 3)), {})
    assert counts.gated == 3
