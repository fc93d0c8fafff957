"""One set of capacity rules: a dump through ``plan``, the controller's events and ``kueue-tas
capacity`` all end with the same free capacity per domain per resource.

Random clusters: nodes with random level labels (some missing), allocatable, Ready,
unschedulable and taints; flavors selecting nodes by label (three on a Topology whose lowest
level is the hostname, so they see each other's hostname usage, one on a Topology without a
hostname level); pods bound or not, terminal or not,
ours (workload label, topology annotation) or not; Workloads with assignments on random
flavors, trusted or not (other checks, Pending, Finished, no annotation). The same final
objects are

* (a) read as a dump by the planner behind ``kueue-tas plan``;
* (b) fed to a live model event by event as the controller's informers deliver them, in a
  random interleaving, with earlier versions of objects (updates) and objects that are
  deleted again, and snapshots read in between (so later events take the incremental path);
* (c) read by ``kueue-tas capacity`` (its cluster read replaced by the same objects, pods
  filtered as its field selector filters them on the API server).
"""

from __future__ import annotations

import random

from capacity_histories import (
    PROPERTY,
    Obj,
    capacity_command,
    clusters,
    final,
    free_by_domain,
    kueue_config,
    live_by_events,
    planner_of,
)
from hypothesis import given, settings

from kueue_tas.api import constants as c
from kueue_tas.api.workload import Workload
from kueue_tas.capacity.rules import our_checks, workload_usage
from kueue_tas.kube.slim import slim_pod


@PROPERTY
@given(clusters())
def test_plan_and_the_controller_see_the_same_free_capacity(
    cluster: tuple[list[list[Obj | None]], list[list[Obj | None]], list[list[Obj | None]], random.Random],
) -> None:
    node_h, pod_h, wl_h, rnd = cluster
    live = live_by_events(node_h, pod_h, wl_h, rnd)
    planner = planner_of([*final(node_h), *final(pod_h), *final(wl_h)])
    assert planner.specs == live.flavors()
    assert set(live.flavors()) == {"gpu", "gpu-b", "shared", "racks"}
    for flavor in live.flavors():
        live_snap = live.snapshot(flavor)
        assert live_snap is not None
        assert free_by_domain(planner.snapshot(flavor, "test")) == free_by_domain(live_snap), flavor


@PROPERTY
@given(clusters())
def test_the_capacity_command_shows_the_controllers_numbers(
    cluster: tuple[list[list[Obj | None]], list[list[Obj | None]], list[list[Obj | None]], random.Random],
) -> None:
    node_h, pod_h, wl_h, rnd = cluster
    live = live_by_events(node_h, pod_h, wl_h, rnd)
    shown = capacity_command([*final(node_h), *final(pod_h), *final(wl_h)])
    assert set(shown) == set(live.flavors())
    for flavor, domains in shown.items():
        live_snap = live.snapshot(flavor)
        assert live_snap is not None
        assert domains == free_by_domain(live_snap), flavor


def test_the_random_clusters_exercise_every_rule() -> None:
    """Guard against a generator that never produces the cases the properties are about."""
    seen: set[str] = set()

    # Hypothesis also draws constants found in the project modules already imported, so the
    # examples depend on what the session imported first: 400 keep every case covered either way.
    @settings(max_examples=400, deadline=None, database=None, derandomize=True)
    @given(clusters())
    def collect(
        cluster: tuple[list[list[Obj | None]], list[list[Obj | None]], list[list[Obj | None]], random.Random],
    ) -> None:
        node_h, pod_h, wl_h, rnd = cluster
        live = live_by_events(node_h, pod_h, wl_h, rnd)
        snaps = {f: snap for f in live.flavors() if (snap := live.snapshot(f)) is not None}
        for versions in pod_h:
            if versions[-1] is None:
                seen.add("deleted-pod")
                continue
            pod = slim_pod(versions[-1])
            if pod.counts_on_node and any(pod.node_name in snap.tree.leaf_by_node_name for snap in snaps.values()):
                seen.add("ours-on-a-leaf" if pod.is_tas else "charged-on-a-leaf")
                if pod.workload is not None:
                    seen.add("fills-a-slot" if live.slot_filled_by(pod.key) else "claims-no-slot")
        checks = our_checks(kueue_config().checks.values(), c.CONTROLLER_NAME)
        for versions in wl_h:
            if versions[-1] is None:
                seen.add("deleted-workload")
                continue
            wl = Workload.model_validate(versions[-1])
            usage = workload_usage(wl, checks, live.flavors())
            if usage is None and c.TOPOLOGY_ASSIGNMENT_ANNOTATION in wl.metadata.annotations:
                seen.add("untrusted-assignment")
            for entry in usage or ():
                for flavor, snap in snaps.items():
                    if any(snap.tree.leaf_index_of(d.values) is not None for d in entry.assignment.domains):
                        seen.add("held-on-a-leaf" if flavor == entry.flavor else "held-across-flavors")

    collect()
    assert seen >= {
        "deleted-pod",
        "deleted-workload",
        "charged-on-a-leaf",
        "ours-on-a-leaf",
        "fills-a-slot",
        "claims-no-slot",
        "untrusted-assignment",
        "held-on-a-leaf",
        "held-across-flavors",
    }
