"""``kueue-tas capacity`` and ``kueue-tas describe workload`` against the real local cluster.

Each test gets a private pool (1 block x 2 racks x 2 hosts of 8 GPUs) and its own Topology,
flavor, check and queues (``e2e.stack``), served by the session's controller group (``tas``).
The commands run as separate processes, as a user runs them, with the admin kubeconfig and
``KUEUE_TAS_CONTROLLER_NAME`` set to the group's controller name.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from e2e import jobs, workloads
from e2e import stack as st
from e2e.cluster_state import State
from e2e.controller import REPO_ROOT, ControllerGroup
from e2e.kube import Kube, condition_true, eventually
from e2e.manifests import POD_COMPLETE_DELAY_ANNOTATION
from e2e.nodes import BLOCK_LABEL, GPU, RACK_LABEL, NodePool
from e2e.pods import is_live, pods_raw
from kueue_tas.api.constants import HOSTNAME_LABEL

HOST_GPUS = 8
HOST_PODS = 110


@dataclass
class Run:
    code: int
    out: str
    err: str

    @property
    def json(self) -> Any:
        return json.loads(self.out)


async def cli(group: ControllerGroup, kubeconfig: str, *args: str, program: list[str] | None = None) -> Run:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KUEUE_TAS_")}
    env["KUEUE_TAS_CONTROLLER_NAME"] = group.controller_name
    env["PYTHONPATH"] = str(REPO_ROOT)
    cmd = program or [sys.executable, "-m", "kueue_tas.cli.main"]
    proc = await asyncio.create_subprocess_exec(
        *cmd,
        *args,
        "--kubeconfig",
        kubeconfig,
        env=env,
        cwd=REPO_ROOT,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode is not None
    return Run(proc.returncode, out.decode(), err.decode())


def pool_of(unique: str) -> NodePool:
    return NodePool(name=f"cli{unique}", blocks=1, racks_per_block=2, hosts_per_rack=2)


async def other_pod(kube: Kube, namespace: str, node: str, gpu: int) -> None:
    """A pod kueue-tas knows nothing of (as a DaemonSet's), bound straight to a node."""
    body: Any = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": f"other-{node}", "annotations": {POD_COMPLETE_DELAY_ANNOTATION: "1h"}},
        "spec": {"nodeName": node, "containers": [jobs.container(gpu=gpu)]},
    }
    await kube.core.create_namespaced_pod(namespace, body)


async def running_pods(kube: Kube, namespace: str, job: str, n: int) -> list[dict[str, Any]]:
    async def bound() -> list[dict[str, Any]] | None:
        pods = [p for p in await pods_raw(kube, namespace, f"batch.kubernetes.io/job-name={job}") if is_live(p)]
        ok = len(pods) == n and all(p["spec"].get("nodeName") and p["status"].get("phase") == "Running" for p in pods)
        return pods if ok else None

    return await eventually(f"{n} pods of Job {job} Running", bound, 90)


def flavor_levels(out: dict[str, Any], topology: str) -> dict[tuple[str, ...], dict[str, Any]]:
    (topo,) = [t for t in out["topologies"] if t["name"] == topology]
    (flavor,) = topo["flavors"]
    return {tuple(d["values"]): d for lvl in flavor["levels"] for d in lvl["domains"]}


async def test_capacity_and_describe_of_a_multi_rack_job(
    kube: Kube, namespace: str, unique: str, tas: ControllerGroup, cluster_state: State
) -> None:
    kubeconfig = cluster_state.kubeconfig
    pool = pool_of(unique)
    s = await st.tas_stack(kube, namespace, tas.controller_name, pool)
    hosts = list(pool.node_names())  # b1-r1-h1, b1-r1-h2, b1-r2-h1, b1-r2-h2
    racks = st.host_racks(pool)
    await other_pod(kube, namespace, hosts[0], gpu=3)
    # 6 x 4 GPUs in one block: no rack holds 24 GPUs, so the assignment spans both racks.
    await jobs.create_job(kube, namespace, jobs.job("train", 6, gpu=4, required=BLOCK_LABEL))
    wl = await workloads.wait_admitted(kube, s, "train")
    placed = Counter({values[-1]: n for values, n in workloads.domain_counts(wl, "main").items()})
    assert sum(placed.values()) == 6 and len({racks[h] for h in placed}) == 2
    await running_pods(kube, namespace, "train", 6)

    # --- capacity: allocatable - the other pod - the assignment; bound TAS pods are not counted twice
    run = await cli(tas, kubeconfig, "capacity", "--topology", s.topology, "-o", "json")
    assert run.code == 0, run.err
    got = flavor_levels(run.json, s.topology)
    other = {hosts[0]: 3}
    want_host = {h: HOST_GPUS - other.get(h, 0) - 4 * placed[h] for h in hosts}
    for h in hosts:
        d = got[("b1", racks[h], h)]
        assert (d["free"][GPU], d["allocatable"][GPU]) == (want_host[h], HOST_GPUS), h
        assert d["free"]["pods"] == HOST_PODS - (h in other) - placed[h], h
    for rack in {racks[h] for h in hosts}:
        assert got[("b1", rack)]["free"][GPU] == sum(want_host[h] for h in hosts if racks[h] == rack)
    assert got[("b1",)]["free"][GPU] == 4 * HOST_GPUS - 3 - 24
    best_host = max(want_host.values())
    marked = [v for v, d in got.items() if d["largest"] and len(v) == 3]
    assert len(marked) == 1 and want_host[marked[0][-1]] == best_host

    text = await cli(tas, kubeconfig, "capacity", "--topology", s.topology)
    assert text.code == 0, text.err
    lines = text.out.splitlines()
    assert lines[0] == f"Topology {s.topology}: {BLOCK_LABEL} > {RACK_LABEL} > {HOSTNAME_LABEL}"
    assert lines[1].startswith(f"  Flavor {s.flavor}: 4 node(s), node labels ")
    block_line = next(ln for ln in lines if f"{BLOCK_LABEL}=b1 " in ln)
    assert f"nvidia.com/gpu {4 * HOST_GPUS - 27}/{4 * HOST_GPUS}" in block_line and block_line.endswith("*")
    assert len(lines) == 2 + 1 + 2 + 4

    # --- describe: the check, the tree, every pod bound in its domain
    run = await cli(tas, kubeconfig, "describe", "workload", wl["metadata"]["name"], "-n", namespace, "-o", "json")
    assert run.code == 0, run.err
    desc = run.json
    assert desc["name"] == wl["metadata"]["name"] and desc["clusterQueue"] == s.cluster_queue
    assert desc["conditions"]["Admitted"]["status"] == "True"
    (check,) = desc["checks"]
    assert (check["name"], check["state"]) == (s.check, "Ready")
    (ps,) = desc["podSets"]
    assert (ps["flavor"], ps["topology"], ps["request"]) == (s.flavor, s.topology, {"required": BLOCK_LABEL})
    assert ps["pods"] == {
        "total": 6,
        "bound": 6,
        "pending": 0,
        "gated": 0,
        "finished": 0,
        "boundElsewhere": 0,
        "unplaced": 0,
    }
    assert {dom["values"][-1]: (dom["assigned"], dom["bound"]) for dom in ps["domains"]} == {
        h: (n, n) for h, n in placed.items()
    }
    assert all(dom["path"] == ["b1", racks[dom["values"][-1]], dom["values"][-1]] for dom in ps["domains"])

    # The kubectl plugin entry point, found by its Job's name.
    plugin = str(Path(sys.executable).parent / "kubectl-kueue_tas")
    text = await cli(tas, kubeconfig, "describe", "workload", "--for-job", "train", "-n", namespace, program=[plugin])
    assert text.code == 0, text.err
    lines = text.out.splitlines()
    assert lines[0] == f"Workload {namespace}/{wl['metadata']['name']}"
    assert any(ln.startswith(f"  Check {s.check}:") and ln.split(":", 1)[1].split()[0] == "Ready" for ln in lines)
    assert f"  PodSet main: 6 pod(s), flavor {s.flavor}, topology {s.topology}, required {BLOCK_LABEL}" in lines
    assert "    pods: 6 (6 bound, 0 pending, 0 gated)" in lines
    assert "    cloud.provider.com/topology-block=b1: 6 pod(s)" in lines
    for h, n in placed.items():
        # kubernetes.io/hostname is drawn by its default level name
        assert f"        host={h}: {n} pod(s)   [bound {n}, pending 0]" in lines


async def test_describe_explains_a_refusal_and_errors_are_one_line(
    kube: Kube, namespace: str, unique: str, tas: ControllerGroup, cluster_state: State
) -> None:
    kubeconfig = cluster_state.kubeconfig
    s = await st.tas_stack(kube, namespace, tas.controller_name, pool_of(unique))
    # A rack holds 16 one-GPU pods: 20 can never fit in one. Our check says Rejected; Kueue then
    # deactivates and evicts the Workload and resets our entry to Pending, so describe must
    # find the reason in the Evicted condition and the Events.
    await jobs.create_job(kube, namespace, jobs.job("huge", 20, gpu=1, required=RACK_LABEL))

    async def evicted() -> dict[str, Any] | None:
        wl = await workloads.workload_of(kube, namespace, "huge")
        return wl if wl and condition_true(wl, "Evicted") else None

    await eventually("Workload of Job huge evicted", evicted, 60)
    never = f'PodSet "main" can never fit, even on an empty cluster: topology "{s.topology}" allows to fit only 16'

    run = await cli(tas, kubeconfig, "describe", "workload", "--for-job", "huge", "-n", namespace, "-o", "json")
    assert run.code == 0, run.err
    (ps,) = run.json["podSets"]
    assert ps["domains"] is None
    assert ps["message"].startswith("not placed: the Workload was evicted and deactivated (spec.active=false): ")
    assert never in ps["message"]

    async def rejected_event() -> dict[str, Any] | None:
        out = await cli(tas, kubeconfig, "describe", "workload", "--for-job", "huge", "-n", namespace, "-o", "json")
        return next((e for e in out.json["events"] if e["reason"] == "TopologyRequestRejected"), None)

    event = await eventually("TopologyRequestRejected in describe's events", rejected_event, 20)
    assert event["type"] == "Warning" and event["message"].startswith(never)

    missing = await cli(tas, kubeconfig, "describe", "workload", "nope", "-n", namespace)
    assert (missing.code, missing.out) == (1, "")
    assert missing.err.strip().splitlines()[-1] == f'error: Workload "nope" not found in namespace "{namespace}"'

    no_topo = await cli(tas, kubeconfig, "capacity", "--topology", f"nope-{unique}")
    assert no_topo.code == 1 and no_topo.err.startswith(f'error: Topology "nope-{unique}" not found')
