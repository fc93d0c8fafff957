"""``make demo``: a local GPU cluster with kueue-tas running beside Kueue, placing sample jobs.

Brings the cluster up (building it once), creates 2 blocks x 4 racks x 8 hosts of 8-GPU kwok
nodes, applies ``manifests/samples`` (Topology, ResourceFlavor, AdmissionCheck, ClusterQueue,
LocalQueue), starts ``kueue-tas run`` under the ServiceAccount RBAC of ``manifests/base``
(recorded in the cluster state, so ``make down`` stops it too), submits the sample Job and
JobSet, waits until every pod is bound, checks that each domain got exactly its assigned
count, and prints ``kueue-tas describe`` and ``kueue-tas capacity``, then the URL of the topology
map the controller serves (``map_bind``, on here). The controller keeps running afterwards:
submit your own annotated Jobs to LocalQueue ``default/gpu``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from e2e import cluster, procs
from e2e.cluster_state import State, rest_client
from e2e.controller import LOCAL_DEV_OPEN
from e2e.nodes import GPU, POOL_LABEL, NodePool
from e2e.paths import bin_dir
from e2e.rest import ApiError, Rest, resource_path, wait_for

DEMO_POOL = NodePool(
    name="gpu",
    blocks=2,
    racks_per_block=4,
    hosts_per_rack=8,
    allocatable={"cpu": "96", "memory": "1Ti", "pods": "110", GPU: "8"},
)
REPO = Path(__file__).resolve().parent.parent
SAMPLES = REPO / "manifests" / "samples"
PLURALS = {
    "Topology": "topologies",
    "ResourceFlavor": "resourceflavors",
    "AdmissionCheck": "admissionchecks",
    "ClusterQueue": "clusterqueues",
    "LocalQueue": "localqueues",
    "Job": "jobs",
    "JobSet": "jobsets",
}
WORKLOAD_KINDS = ("Job", "JobSet")
CONTROLLER_PROC = "kueue-tas"
MAP_PORT = "kueue_tas_map"  # in the cluster state's ports
KUEUE_API = "kueue.x-k8s.io/v1beta2"


@dataclass(frozen=True)
class DemoObjects:
    """Names of the sample objects (manifests/samples)."""

    topology: str = "gpu-topology"
    flavor: str = "gpu"
    admission_check: str = "kueue-tas"
    cluster_queue: str = "gpu-cq"
    local_queue: str = "gpu"
    namespace: str = "default"


def log(msg: str) -> None:
    print(f"[e2e.demo] {msg}", file=sys.stderr, flush=True)


def sample_documents() -> list[dict[str, Any]]:
    """The documents of manifests/samples, in kustomization order."""
    kustomization = yaml.safe_load((SAMPLES / "kustomization.yaml").read_text())
    docs: list[dict[str, Any]] = []
    for name in kustomization["resources"]:
        docs.extend(d for d in yaml.safe_load_all((SAMPLES / name).read_text()) if d)
    return docs


def apply_samples(rest: Rest, kinds: tuple[str, ...] | None = None, skip: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    applied = []
    for doc in sample_documents():
        if (kinds is not None and doc["kind"] not in kinds) or doc["kind"] in skip:
            continue
        rest.apply(resource_path(doc, PLURALS[doc["kind"]]), doc)
        applied.append(doc)
    return applied


def _controller_kubeconfig(state: State) -> str:
    """A kubeconfig bound to the manifests' ServiceAccount (the Deployment's exact RBAC)."""
    from e2e.kube import new_api_client
    from e2e.rbac import service_account_kubeconfig

    async def make() -> str:
        api = await new_api_client(state.kubeconfig)
        try:
            out = Path(state.run_dir) / "kueue-tas-sa.kubeconfig"
            return str(await service_account_kubeconfig(api, state.kubeconfig, out))
        finally:
            await api.close()

    return asyncio.run(make())


def start_kueue_tas_controller(state: State, rest: Rest, names: DemoObjects) -> procs.ProcInfo:
    """Start ``kueue-tas run`` (or keep the one already running) and wait for the check to turn Active."""
    current = state.proc(CONTROLLER_PROC)
    if current is not None and procs.is_alive(current):
        log(f"kueue-tas already running (pid {current.pid}, log {current.log})")
    else:
        if current is not None:
            state.procs.remove(current)
        health, metrics, topology_map = procs.free_port(), procs.free_port(), procs.free_port()
        env = dict(os.environ)
        env.update(
            {
                "KUEUE_TAS_KUBECONFIG": _controller_kubeconfig(state),
                "KUEUE_TAS_HEALTH_BIND": f"127.0.0.1:{health}",
                "KUEUE_TAS_METRICS_BIND": f"127.0.0.1:{metrics}",
                "KUEUE_TAS_MAP_BIND": f"127.0.0.1:{topology_map}",
                "KUEUE_TAS_MAP_REFRESH_SECONDS": "10",
                # The local-dev switch (README "Who may look"): a browser sends no bearer token,
                # and both servers listen on 127.0.0.1 only, where this machine's user is the reader.
                **LOCAL_DEV_OPEN,
                "POD_NAME": "kueue-tas-demo",
                "NO_PROXY": "127.0.0.1,localhost",
                "PYTHONPATH": str(REPO),
            }
        )
        argv = [sys.executable, "-m", "kueue_tas.cli.main", "run"]
        current = procs.start(CONTROLLER_PROC, argv, Path(state.log_dir), env=env, cwd=REPO)
        state.procs.append(current)
        state.save()
        state.ports["kueue_tas_health"], state.ports["kueue_tas_metrics"] = health, metrics
        state.ports[MAP_PORT] = topology_map
        state.save()
        log(f"kueue-tas started (pid {current.pid}, health :{health}, metrics :{metrics}, log {current.log})")
    ac_path = f"/apis/{KUEUE_API}/admissionchecks/{names.admission_check}"

    def active() -> bool:
        if not procs.is_alive(current):
            raise RuntimeError(f"kueue-tas exited; log tail:\n{procs.tail(current.log)}")
        conds = (rest.get(ac_path).get("status") or {}).get("conditions") or []
        return any(c["type"] == "Active" and c["status"] == "True" for c in conds)

    wait_for(f"AdmissionCheck {names.admission_check} Active", active, 90)
    url = map_url(state)
    if url is not None:
        wait_for(f"the topology map at {url}", lambda: _http_ok(url), 60)
    return current


def map_url(state: State) -> str | None:
    """The topology map of the demo's controller; None when it was started without one."""
    port = state.ports.get(MAP_PORT)
    return None if port is None else f"http://127.0.0.1:{port}/"


def _http_ok(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=10) as resp:
            return int(resp.status) == 200
    except (OSError, urllib.error.URLError):
        return False


def _workload_of(rest: Rest, ns: str, kind: str, name: str) -> dict[str, Any] | None:
    for wl in rest.get(f"/apis/{KUEUE_API}/namespaces/{ns}/workloads").get("items", []):
        if any(r["kind"] == kind and r["name"] == name for r in wl["metadata"].get("ownerReferences") or []):
            return dict(wl)
    return None


def placement_report(rest: Rest, wl: dict[str, Any]) -> tuple[bool, list[str]]:
    """Whether every bound pod is inside its assigned domain and each domain holds exactly its count."""
    from kueue_tas.api.constants import PODSET_LABEL, TOPOLOGY_ASSIGNMENT_ANNOTATION, WORKLOAD_LABEL
    from kueue_tas.topology.codec.codec import decode_assignment_annotation

    ns, uid = wl["metadata"]["namespace"], wl["metadata"]["uid"]
    text = (wl["metadata"].get("annotations") or {}).get(TOPOLOGY_ASSIGNMENT_ANNOTATION)
    if not text:
        return False, ["no assignment yet"]
    pods = rest.request("GET", f"/api/v1/namespaces/{ns}/pods", query={"labelSelector": f"{WORKLOAD_LABEL}={uid}"})[
        "items"
    ]
    nodes = {
        n["metadata"]["name"]: n["metadata"].get("labels") or {}
        for n in rest.request("GET", "/api/v1/nodes", query={"labelSelector": f"{POOL_LABEL}={DEMO_POOL.name}"})[
            "items"
        ]
    }
    ok, lines = True, []
    for podset, ta in decode_assignment_annotation(text):
        mine = [
            p
            for p in pods
            if (p["metadata"].get("labels") or {}).get(PODSET_LABEL) == podset
            and p["status"].get("phase") not in ("Succeeded", "Failed")
        ]
        bound = [p for p in mine if p["spec"].get("nodeName")]
        for d in ta.domains:
            here = sum(
                1 for p in bound if tuple(nodes.get(p["spec"]["nodeName"], {}).get(k) for k in ta.levels) == d.values
            )
            ok &= here == d.count
            lines.append(f"  {podset} {'/'.join(d.values)}: assigned {d.count}, bound {here}")
        ok &= len(bound) == ta.total
    return ok, lines


def submit_sample_jobs(rest: Rest, names: DemoObjects, timeout_s: float = 120) -> list[tuple[str, str]]:
    """Submit the sample Job and JobSet and wait until kueue-tas placed every pod exactly."""
    submitted = [(d["kind"], d["metadata"]["name"]) for d in apply_samples(rest, WORKLOAD_KINDS)]
    for kind, name in submitted:
        log(f"submitted {kind} {names.namespace}/{name}")

    def placed() -> bool:
        for kind, name in submitted:
            wl = _workload_of(rest, names.namespace, kind, name)
            if wl is None or not placement_report(rest, wl)[0]:
                return False
        return True

    wait_for("sample pods bound in their assigned domains", placed, timeout_s)
    for kind, name in submitted:
        wl = _workload_of(rest, names.namespace, kind, name)
        assert wl is not None
        log(f"{kind} {name} -> Workload {wl['metadata']['name']}: every domain holds exactly its count")
        for line in placement_report(rest, wl)[1]:
            log(line)
    return submitted


def show(state: State, argv: list[str]) -> None:
    """Print a ``kueue-tas`` CLI command and its output against the demo cluster."""
    print(f"$ kueue-tas {' '.join(argv)}", flush=True)
    env = dict(os.environ, NO_PROXY="127.0.0.1,localhost")
    subprocess.run(
        [sys.executable, "-m", "kueue_tas.cli.main", *argv, "--kubeconfig", state.kubeconfig],
        env=env,
        cwd=REPO,
        check=False,
    )


def usage_text(state: State, pool: NodePool, names: DemoObjects) -> str:
    """What the demo ends with: what is running, and commands to try next, ready to paste."""
    ctl = state.proc(CONTROLLER_PROC)
    url = map_url(state)
    topology_map = (
        f"Topology map (every node, each workload's domains, why a pending one does not fit): {url}"
        if url
        else "Topology map: off in the running controller (an older demo started it): make down && make demo"
    )
    return f"""
kueue-tas is running beside Kueue on {pool.size} kwok nodes ({pool.blocks} blocks x {pool.racks_per_block} racks x \
{pool.hosts_per_rack} hosts, {pool.allocatable[GPU]} GPUs each; levels {", ".join(pool.level_labels())}).

{topology_map}

What to try next, in this shell:

  export KUBECONFIG={state.kubeconfig}
  export NO_PROXY=127.0.0.1,localhost
  export PATH={bin_dir()}:$PATH                        # kubectl

  # where the sample jobs went, and what is left
  .venv/bin/kueue-tas describe workload --for-job sample-rack-job -n {names.namespace}
  .venv/bin/kueue-tas capacity --topology {names.topology}

  # a leader + workers JobSet in one rack, and a job in 3 layers of slices
  kubectl apply -k manifests/samples/advanced
  kubectl get workloads -n {names.namespace}

  # your own job: copy manifests/samples/job.yaml, change the name and the annotation
  #   kueue-tas.io/podset-required-topology: {pool.rack_label}   (or {pool.block_label}, or host)
  # keep the label kueue.x-k8s.io/queue-name: {names.local_queue}, then kubectl apply -f it

  # where would a job go, offline, without a cluster
  .venv/bin/kueue-tas plan -f examples/cluster.yaml

Read on: docs/getting-started.md (or `make docs`, then open site/index.html).
Controller log: {ctl.log if ctl else "?"}     Cluster logs: {state.log_dir}
Status: .venv/bin/python -m e2e.cluster status     Stop everything: make down
"""


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m e2e.demo", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--no-samples", action="store_true", help="do not submit the sample Job and JobSet")
    args = ap.parse_args(argv)
    names = DemoObjects()
    try:
        state = cluster.up(DEMO_POOL)
        rest = rest_client(state)
        apply_samples(rest, skip=WORKLOAD_KINDS)
        start_kueue_tas_controller(state, rest, names)
        submitted = [] if args.no_samples else submit_sample_jobs(rest, names)
    except (RuntimeError, TimeoutError, ApiError) as e:
        log(f"failed: {e}")
        return 1
    for kind, name in submitted:
        wl = _workload_of(rest, names.namespace, kind, name)
        if wl is not None:
            show(state, ["describe", "workload", wl["metadata"]["name"], "-n", names.namespace])
    show(state, ["capacity", "--topology", names.topology, "--depth", "2"])
    print(usage_text(state, DEMO_POOL, names))
    url = map_url(state)
    if url is not None:
        log(f"topology map: {url}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
