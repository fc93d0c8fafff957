"""Issue 14 on the real local cluster: constraints the way AI platforms write them, on a 2-zone,
NVL72-like Topology (zone > block > gpu-clique > host; the levels are named by the Topology's
``kueue-tas.io/level-names``, so requests say ``zone`` and ``gpu-clique``).

Each test has its own fleet: zone z1 has one gpu-clique, zone z2 two; a clique is 2 hosts of 4
GPUs (8 GPUs, one model instance of 4 pods x 2 GPUs). So zone z1 holds one instance, z2 two.

- OSMO: one instance in one clique; two instances in two cliques; two instances in cliques of one
  zone (``workload-required-topology: zone`` on the JobSet: only z2 holds both, while each
  instance's own best fit would take z1's clique first); the preferred variant spreading over
  both zones when no zone holds all three instances.
- Dynamo: the deployment constraint alone (every service in one zone), the service constraint
  alone (the worker in one block), both; a service constraint broader than the deployment's is
  refused, naming both levels.
- KAI: required zone with preferred gpu-clique on one PodSet.
"""

from __future__ import annotations

from typing import Any

from e2e import jobs, workloads
from e2e import stack as st
from e2e.controller import ControllerGroup
from e2e.kube import KUEUE_GROUP, KUEUE_VERSION, Kube, content_type
from e2e.nodes import BLOCK_LABEL, GPU, POOL_LABEL, RACK_LABEL, NodePool, default_allocatable
from e2e.tests.admission_helpers import DECIDED, entry_of, hosts
from kueue_tas.api.constants import HOSTNAME_LABEL
from kueue_tas.topology.level_names import LEVEL_NAMES_ANNOTATION, ZONE_LABEL

WORKLOAD_REQUIRED = "kueue-tas.io/workload-required-topology"
WORKLOAD_PREFERRED = "kueue-tas.io/workload-preferred-topology"
WAIT = "kueue-tas.io/podset-preferred-topology-wait"
NAMES = f"zone={ZONE_LABEL},block={BLOCK_LABEL},gpu-clique={RACK_LABEL}"
JOBSET = "JobSet"


async def nvl_fleet(kube: Kube, namespace: str, unique: str, tas: ControllerGroup, tag: str) -> st.TasStack:
    """Zones z1 (1 clique) and z2 (2 cliques) under one flavor, levels named."""
    fleet = f"{tag}1{unique}"
    allocatable = {**default_allocatable(), GPU: "4"}
    z1 = NodePool(name=fleet, racks_per_block=1, hosts_per_rack=2, allocatable=allocatable, labels={ZONE_LABEL: "z1"})
    z2 = NodePool(
        name=f"{tag}2{unique}",
        racks_per_block=2,
        hosts_per_rack=2,
        allocatable=allocatable,
        labels={ZONE_LABEL: "z2", POOL_LABEL: fleet},  # the flavor selects the first pool's label
    )
    await kube.create_nodes(z2)
    levels = [ZONE_LABEL, BLOCK_LABEL, RACK_LABEL, HOSTNAME_LABEL]
    s = await st.tas_stack(kube, namespace, tas.controller_name, z1, levels=levels)
    body = {"metadata": {"annotations": {LEVEL_NAMES_ANNOTATION: NAMES}}}
    await kube.custom.patch_cluster_custom_object(
        KUEUE_GROUP, KUEUE_VERSION, "topologies", s.topology, body, **content_type("application/merge-patch+json")
    )
    return s


def zone(host: str, s: st.TasStack) -> str:
    return "z1" if host.startswith(s.pool.name) else "z2"


def clique(host: str, s: st.TasStack) -> tuple[str, str]:
    return zone(host, s), host.rsplit("-h", 1)[0]


def model(annotations: dict[str, str] | None = None, gpu: int = 2) -> dict[str, Any]:
    return jobs.pod_template(gpu=gpu, annotations=annotations)


def jobset(name: str, replicated: list[tuple[str, int, dict[str, Any]]], **annotations: str) -> dict[str, Any]:
    body = jobs.jobset(name, [(rj, 1, par, tmpl) for rj, par, tmpl in replicated])
    if annotations:
        body["metadata"]["annotations"] = dict(annotations)
    return body


async def ready(kube: Kube, s: st.TasStack, name: str, kind: str = JOBSET) -> dict[str, Any]:
    wl = await workloads.wait_check(kube, s, name, DECIDED, owner_kind=kind)
    entry = entry_of(wl, s)
    assert entry["state"] == "Ready", entry
    return wl


async def test_osmo_one_instance_per_clique_and_the_whole_workflow_in_one_zone(
    kube: Kube, namespace: str, unique: str, tas: ControllerGroup
) -> None:
    s = await nvl_fleet(kube, namespace, unique, tas, "os")
    clique_only = {jobs.REQUIRED: "gpu-clique"}
    # Two instances, one zone: each instance's own best fit would take z1's clique for model1.
    wide = jobset("zoned", [("model1", 4, model(clique_only)), ("model2", 4, model(clique_only))])
    wide["metadata"]["annotations"] = {WORKLOAD_REQUIRED: "zone"}
    await jobs.create_jobset(kube, namespace, wide)
    wl = await ready(kube, s, "zoned")
    placed = {ps: hosts(wl, ps) for ps in ("model1", "model2")}
    assert {zone(h, s) for p in placed.values() for h in p} == {"z2"}, placed
    assert all(len({clique(h, s) for h in p}) == 1 and sum(p.values()) == 4 for p in placed.values()), placed
    assert {clique(h, s) for h in placed["model1"]} != {clique(h, s) for h in placed["model2"]}
    await workloads.wait_admitted(kube, s, "zoned", owner_kind=JOBSET)

    # One instance in one clique: only z1's clique is left.
    await jobs.create_job(kube, namespace, jobs.job("single", 4, gpu=2, required="gpu-clique"))
    single = hosts(await ready(kube, s, "single", "Job"))
    assert {clique(h, s) for h in single} == {("z1", f"{s.pool.name}-b1-r1")}, single


async def test_osmo_two_instances_in_two_cliques_and_the_preferred_zone_spreading_when_it_must(
    kube: Kube, namespace: str, unique: str, tas: ControllerGroup
) -> None:
    s = await nvl_fleet(kube, namespace, unique, tas, "op")
    pref = {jobs.PREFERRED: "gpu-clique"}
    # Three instances (24 GPUs) fit in no zone (z2 has 16): the preferred zone gives way.
    body = jobset("three", [(f"model{i}", 4, model(pref)) for i in (1, 2, 3)])
    body["metadata"]["annotations"] = {WORKLOAD_PREFERRED: "zone"}
    await jobs.create_jobset(kube, namespace, body)
    wl = await ready(kube, s, "three")
    placed = {ps: hosts(wl, ps) for ps in ("model1", "model2", "model3")}
    assert all(len({clique(h, s) for h in p}) == 1 for p in placed.values()), "each instance in one clique"
    assert len({clique(h, s) for p in placed.values() for h in p}) == 3, "two instances never share a clique"
    assert {zone(h, s) for p in placed.values() for h in p} == {"z1", "z2"}, placed


async def test_dynamo_deployment_and_service_constraints(
    kube: Kube, namespace: str, unique: str, tas: ControllerGroup
) -> None:
    s = await nvl_fleet(kube, namespace, unique, tas, "dy")
    one_gpu = model(gpu=1)
    block_worker = model({jobs.REQUIRED: "block"}, gpu=1)

    # Deployment only: the frontend and the worker in one zone.
    await jobs.create_jobset(
        kube,
        namespace,
        jobset("deploy", [("frontend", 2, one_gpu), ("worker", 4, one_gpu)], **{WORKLOAD_REQUIRED: "zone"}),
    )
    wl = await ready(kube, s, "deploy")
    assert len({zone(h, s) for ps in ("frontend", "worker") for h in hosts(wl, ps)}) == 1

    # Service only: the worker in one block (Kueue's own per-PodSet constraint).
    await jobs.create_jobset(
        kube, namespace, jobset("service", [("frontend", 2, one_gpu), ("worker", 4, block_worker)])
    )
    wl = await ready(kube, s, "service")
    assert len({(zone(h, s), "b1") for h in hosts(wl, "worker")}) == 1

    # Both: the whole deployment in one zone, the worker in one block of it.
    await jobs.create_jobset(
        kube,
        namespace,
        jobset("both", [("frontend", 2, one_gpu), ("worker", 4, block_worker)], **{WORKLOAD_REQUIRED: "zone"}),
    )
    wl = await ready(kube, s, "both")
    assert len({zone(h, s) for ps in ("frontend", "worker") for h in hosts(wl, ps)}) == 1

    # A service constraint broader than the deployment's: refused, both levels named.
    broad = model({jobs.REQUIRED: "zone"}, gpu=1)
    await jobs.create_jobset(
        kube, namespace, jobset("broad", [("worker", 2, broad)], **{WORKLOAD_REQUIRED: "gpu-clique"})
    )
    _, message = await workloads.wait_rejected(kube, s, "broad", owner_kind=JOBSET)
    assert 'PodSet "worker": its required level "zone" is broader than the workload\'s level "gpu-clique"' in message
    assert WORKLOAD_REQUIRED in message, message


async def test_kai_required_zone_with_preferred_clique(
    kube: Kube, namespace: str, unique: str, tas: ControllerGroup
) -> None:
    s = await nvl_fleet(kube, namespace, unique, tas, "ka")
    pair = {jobs.REQUIRED: "zone", jobs.PREFERRED: "gpu-clique"}
    await jobs.create_job(kube, namespace, jobs.job("kai", 4, gpu=2, annotations=pair))
    placed = hosts(await ready(kube, s, "kai", "Job"))
    assert sum(placed.values()) == 4 and len({clique(h, s) for h in placed}) == 1, placed
    # Twelve 2-GPU pods: no clique holds them, zone z2 (16 GPUs) does; never both zones.
    await jobs.create_job(kube, namespace, jobs.job("kai-wide", 6, gpu=2, annotations=pair))
    wide = hosts(await ready(kube, s, "kai-wide", "Job"))
    assert sum(wide.values()) == 6 and len({zone(h, s) for h in wide}) == 1, wide


async def test_patience_holds_a_preferred_clique_then_places_it(
    kube: Kube, namespace: str, unique: str, tas: ControllerGroup
) -> None:
    """``podset-preferred-topology-wait``: held while no clique holds it, placed in one clique
    when one frees within the wait; placed over several once the wait is over."""
    s = await nvl_fleet(kube, namespace, unique, tas, "pa")
    # Three blockers of 3 x 2 GPUs, one per clique (tightest first): every clique keeps 1 slot.
    for i in (1, 2, 3):
        await jobs.create_job(kube, namespace, jobs.job(f"block{i}", 3, gpu=2, required="gpu-clique"))
        await ready(kube, s, f"block{i}", "Job")
    patient = {jobs.PREFERRED: "gpu-clique", WAIT: "90s"}
    await jobs.create_job(kube, namespace, jobs.job("patient", 2, gpu=2, annotations=patient))
    wl = await workloads.wait_check(kube, s, "patient", ("Retry",), owner_kind="Job")
    message = entry_of(wl, s)["message"]
    assert 'for one domain of level "gpu-clique" to hold all 2 pods (podset-preferred-topology-wait 1m30s)' in message
    assert "waiting until " in message, message
    # A clique frees within the wait: the next decision takes it whole.
    await jobs.delete_job(kube, namespace, "block2")
    wl = await workloads.wait_check(kube, s, "patient", ("Ready",), owner_kind="Job", timeout_s=80)
    placed = hosts(wl)
    assert sum(placed.values()) == 2 and len({clique(h, s) for h in placed}) == 1, placed
    started = (wl["metadata"].get("annotations") or {}).get("kueue-tas.io/preferred-wait-started")
    assert started, "the wait's start is on the Workload"

    # Nothing frees: after its 15 s the PodSet is placed over several cliques.
    short = {jobs.PREFERRED: "gpu-clique", WAIT: "15s"}
    await jobs.create_job(kube, namespace, jobs.job("impatient", 4, gpu=2, annotations=short))
    await workloads.wait_check(kube, s, "impatient", ("Retry",), owner_kind="Job")
    wl = await workloads.wait_check(kube, s, "impatient", ("Ready",), owner_kind="Job", timeout_s=120)
    assert len({clique(h, s) for h in hosts(wl)}) > 1
