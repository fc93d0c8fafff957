"""The capacity rules (kueue_tas.capacity.rules), one by one, from plain objects."""

from __future__ import annotations

from functools import partial
from typing import Any

import builders as mk
import pytest
from vocab import ASSIGNMENT, CONTROLLER, GPU, PODSET_LABEL, RACK, UNCONSTRAINED, WORKLOAD_LABEL

from kueue_tas.api.kueue_objects import AdmissionCheck, ClusterQueue, ResourceFlavor, Topology
from kueue_tas.api.workload import Workload
from kueue_tas.capacity.rules import (
    PodClaim,
    UsageEntry,
    UsageError,
    charges_snapshot,
    flavor_specs,
    our_checks,
    pod_charge,
    pod_claim,
    pod_domain,
    workload_usage,
)
from kueue_tas.kube.slim import slim_pod
from kueue_tas.topology.assignment import DomainAssignment, TopologyAssignment
from kueue_tas.topology.codec.codec import encode_assignment_annotation
from kueue_tas.topology.engine.snapshot import TopologySnapshot
from kueue_tas.topology.features import FeatureGates
from kueue_tas.topology.model import HOSTNAME_LABEL, NodeInfo

# --- pods -------------------------------------------------------------------------------------


# A running pod on n1 asking 500m + 1Gi, with 50m of overhead.
n1_pod = partial(
    mk.pod,
    "p",
    node="n1",
    namespace="ns",
    requests={"cpu": "500m", "memory": "1Gi"},
    overhead={"cpu": "50m"},
    annotations={},
)


def test_a_bound_running_or_pending_pod_is_charged_to_its_node() -> None:
    assert pod_charge(slim_pod(n1_pod())) == ("n1", {"cpu": 550, "memory": 1024**3, "pods": 1})
    assert pod_charge(slim_pod(n1_pod(phase="Pending"))) == ("n1", {"cpu": 550, "memory": 1024**3, "pods": 1})


@pytest.mark.parametrize("phase", ["Succeeded", "Failed"])
def test_terminal_pods_are_not_charged(phase: str) -> None:
    assert pod_charge(slim_pod(n1_pod(phase=phase))) is None


def test_unbound_pods_are_not_charged() -> None:
    assert pod_charge(slim_pod(n1_pod(node=None))) is None
    assert pod_charge(slim_pod(n1_pod(node=""))) is None


def test_pods_carrying_our_labels_or_annotations_are_charged_too_the_labels_are_only_a_claim() -> None:
    # Issue 12, defect 2: a label or annotation anyone can write must not make a pod invisible.
    labelled = slim_pod(n1_pod(labels={WORKLOAD_LABEL: "w", PODSET_LABEL: "main"}))
    assert pod_charge(labelled) == ("n1", {"cpu": 550, "memory": 1024**3, "pods": 1})
    assert pod_claim(labelled) == PodClaim("ns", "w", "main", ())
    annotated = slim_pod(n1_pod(annotations={UNCONSTRAINED: "true"}))
    assert pod_charge(annotated) is not None and pod_claim(annotated) is None
    assert pod_charge(slim_pod(n1_pod(annotations={"kueue.x-k8s.io/podset-required-topology": "rack"}))) is not None
    # Terminating pods run until they are gone (Kueue #10076).
    assert pod_charge(slim_pod(n1_pod(deleting=True))) is not None


def test_a_pods_domain_is_the_one_its_node_selector_pins_else_its_nodes_labels() -> None:
    levels = (RACK,)
    assert pod_domain(((RACK, "r1"),), {RACK: "r2"}, levels) == ("r1",)
    assert pod_domain((), {RACK: "r2"}, levels) == ("r2",)
    assert pod_domain((("other", "x"),), {}, levels) is None
    assert pod_domain((), None, levels) is None


# --- workloads --------------------------------------------------------------------------------

ON_H1 = TopologyAssignment((HOSTNAME_LABEL,), (DomainAssignment(("h1",), 2),))


def trusted(**changes: Any) -> Workload:
    """Workload ns/w (PodSet main: 2 one-GPU pods) holding ON_H1, admitted on ``gpu``, check
    ``tas`` Ready; ``changes`` override the ``builders.workload`` arguments."""
    args: dict[str, Any] = {
        "namespace": "ns",
        "queue": None,
        "assignment": ON_H1,
        "admitted_flavor": "gpu",
        "check_state": "Ready",
        "check_time": None,
    }
    return Workload.model_validate(mk.workload("w", 2, **(args | changes)))


def test_a_trusted_workload_holds_its_assignment_on_its_tas_flavor() -> None:
    expected = (UsageEntry("gpu", ON_H1, {GPU: 1}, "main"),)
    assert workload_usage(trusted(), {"tas"}, {"gpu"}) == expected
    assert workload_usage(trusted(), {"tas"}, {"gpu"}, strict=True) == expected
    assert workload_usage(trusted(check_state="Pending"), {"tas"}, {"gpu"}) is None
    # A PodSet on no TAS flavor, or with no admission, holds nothing.
    assert workload_usage(trusted(), {"tas"}, {"other"}) == ()
    assert workload_usage(trusted(admitted_flavor=None), {"tas"}, {"gpu"}, strict=True) == ()


def test_an_undecodable_annotation_holds_nothing_for_the_controller_and_is_an_error_for_plan() -> None:
    wl = trusted(assignment='{"podSets": 7}')
    assert workload_usage(wl, {"tas"}, {"gpu"}) is None
    with pytest.raises(UsageError) as err:
        workload_usage(wl, {"tas"}, {"gpu"}, strict=True)
    assert err.value.field == f"metadata.annotations[{ASSIGNMENT}]"


def test_an_assignment_of_a_podset_the_spec_lacks() -> None:
    wl = trusted(assignment=encode_assignment_annotation([("main", ON_H1), ("ghost", ON_H1)]))
    assert workload_usage(wl, {"tas"}, {"gpu"}) == (UsageEntry("gpu", ON_H1, {GPU: 1}, "main"),)
    with pytest.raises(UsageError) as err:
        workload_usage(wl, {"tas"}, {"gpu"}, strict=True)
    assert err.value.problem == "names PodSet 'ghost', which spec.podSets does not have"


def test_several_tas_flavors_on_one_podset() -> None:
    wl = trusted(admitted_flavor={GPU: "gpu", "cpu": "gpu-b"})
    assert workload_usage(wl, {"tas"}, {"gpu", "gpu-b"}) == (UsageEntry("gpu", ON_H1, {GPU: 1}, "main"),)
    with pytest.raises(UsageError) as err:
        workload_usage(wl, {"tas"}, {"gpu", "gpu-b"}, strict=True)
    assert (err.value.field, err.value.problem) == (
        "status.admission.podSetAssignments[main].flavors",
        "more than one TAS flavor assigned: gpu, gpu-b",
    )


# --- flavors ----------------------------------------------------------------------------------


def test_spec_topology_name_maps_a_flavor_only_when_asked_and_no_check_governs_it() -> None:
    topo = Topology.model_validate(mk.topology("topo", (RACK,)))
    check = AdmissionCheck.model_validate(mk.admission_check("tas", "topo", CONTROLLER))
    cq = ClusterQueue.model_validate(mk.cluster_queue("cq", ("gpu",), {"tas": ["gpu"]}, covered=(GPU,), quota=None))
    flavors = {"kueue-own": ResourceFlavor.model_validate(mk.flavor("kueue-own", {}))}
    ours = our_checks([check], CONTROLLER)
    specs, per_check = flavor_specs(ours, [cq], {"topo": topo}.get, flavors.get)
    assert set(specs) == {"gpu"} and per_check == {"tas": {"gpu"}}
    mapped = {"kueue-own": "topo"}
    specs, per_check = flavor_specs(ours, [cq], {"topo": topo}.get, flavors.get, flavor_topology_names=mapped)
    assert set(specs) == {"gpu", "kueue-own"} and per_check == {"tas": {"gpu"}}
    assert specs["kueue-own"].levels == (RACK,)


# --- flavors sharing nodes ----------------------------------------------------------------------


def test_hostname_usage_of_one_flavor_holds_capacity_in_every_hostname_flavor() -> None:
    node = NodeInfo("n1", {RACK: "r1", HOSTNAME_LABEL: "h1"}, {GPU: 8})
    hosts = TopologySnapshot.build(topology_name="t", levels=(RACK, HOSTNAME_LABEL), nodes=[node])
    racks = TopologySnapshot.build(topology_name="r", levels=(RACK,), nodes=[node])
    on_rack = TopologyAssignment((RACK,), (DomainAssignment(("r1",), 2),))
    assert charges_snapshot("gpu", hosts, "gpu", on_rack)  # its own flavor, whatever the levels
    assert charges_snapshot("other", hosts, "gpu", ON_H1)
    assert not charges_snapshot("other", hosts, "gpu", on_rack)
    assert not charges_snapshot("other", racks, "gpu", ON_H1)  # no hostname leaf there
    # Kueue's TASHandleOverlappingFlavors off: each flavor sees only its own usage
    separate = FeatureGates({"TASHandleOverlappingFlavors": False})
    assert not charges_snapshot("other", hosts, "gpu", ON_H1, separate)
    assert charges_snapshot("gpu", hosts, "gpu", ON_H1, separate)
