"""``make demo``: a local cluster with a GPU topology, ready for kueue-tas.

Brings the cluster up (building it once), creates 2 blocks x 4 racks x 8 hosts of 8-GPU kwok
nodes plus the Kueue objects a TAS setup needs (Topology, ResourceFlavor, AdmissionCheck,
ClusterQueue, LocalQueue), and prints how to use it.

The kueue-tas controller does not exist yet: ``start_kueue_tas_controller`` says so and returns
``None``; once ``kueue-tas run`` exists it starts it beside Kueue and ``submit_sample_jobs``
submits the sample Jobs/JobSets.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from e2e import cluster
from e2e.nodes import GPU, HOSTNAME_LABEL, POOL_LABEL, NodePool
from e2e.rest import ApiError, Rest, resource_path

DEMO_POOL = NodePool(
    name="gpu",
    blocks=2,
    racks_per_block=4,
    hosts_per_rack=8,
    allocatable={"cpu": "96", "memory": "1Ti", "pods": "110", GPU: "8"},
)
CONTROLLER_NAME = "kueue-tas.io/topology"
KUEUE_API = "kueue.x-k8s.io/v1beta2"


@dataclass(frozen=True)
class DemoObjects:
    topology: str = "gpu-topology"
    flavor: str = "gpu"
    admission_check: str = "kueue-tas"
    cluster_queue: str = "gpu-cq"
    local_queue: str = "gpu"
    namespace: str = "demo"


def log(msg: str) -> None:
    print(f"[e2e.demo] {msg}", file=sys.stderr, flush=True)


def _apply(rest: Rest, obj: dict[str, Any], plural: str) -> None:
    rest.apply(resource_path(obj, plural), obj)


def kueue_objects(pool: NodePool, names: DemoObjects) -> list[tuple[dict[str, Any], str]]:
    """The Kueue side of a kueue-tas setup, as (object, plural) in creation order."""
    total = {r: str(int(v) * pool.size) for r, v in pool.allocatable.items() if r in ("cpu", GPU)}
    total["memory"] = f"{pool.size}Ti"
    return [
        ({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": names.namespace}}, "namespaces"),
        ({"apiVersion": KUEUE_API, "kind": "Topology", "metadata": {"name": names.topology},
          "spec": {"levels": [{"nodeLabel": lv} for lv in pool.level_labels()]}}, "topologies"),
        # No spec.topologyName: Kueue's own TAS leaves this flavor to kueue-tas.
        ({"apiVersion": KUEUE_API, "kind": "ResourceFlavor", "metadata": {"name": names.flavor},
          "spec": {"nodeLabels": {POOL_LABEL: pool.name}}}, "resourceflavors"),
        ({"apiVersion": KUEUE_API, "kind": "AdmissionCheck", "metadata": {"name": names.admission_check},
          "spec": {"controllerName": CONTROLLER_NAME, "parameters": {
              "apiGroup": "kueue.x-k8s.io", "kind": "Topology", "name": names.topology}}}, "admissionchecks"),
        ({"apiVersion": KUEUE_API, "kind": "ClusterQueue", "metadata": {"name": names.cluster_queue},
          "spec": {
              "namespaceSelector": {},
              "resourceGroups": [{"coveredResources": ["cpu", "memory", GPU], "flavors": [{
                  "name": names.flavor,
                  "resources": [{"name": r, "nominalQuota": total[r]} for r in ("cpu", "memory", GPU)]}]}],
              "admissionChecksStrategy": {"admissionChecks": [
                  {"name": names.admission_check, "onFlavors": [names.flavor]}]},
          }}, "clusterqueues"),
        ({"apiVersion": KUEUE_API, "kind": "LocalQueue",
          "metadata": {"name": names.local_queue, "namespace": names.namespace},
          "spec": {"clusterQueue": names.cluster_queue}}, "localqueues"),
    ]


def install_kueue_objects(rest: Rest, pool: NodePool, names: DemoObjects) -> None:
    for obj, plural in kueue_objects(pool, names):
        _apply(rest, obj, plural)


def start_kueue_tas_controller(state: cluster.State) -> None:
    """Start ``kueue-tas run`` beside Kueue. Not available yet: the controller is still being written.

    When it exists this will: write its config (kubeconfig, webhook serving cert from
    ``<run>/pki/kueue-tas``, 127.0.0.1 ports), start it with ``e2e.procs.start`` recorded in the
    cluster state (so ``python -m e2e.cluster down`` stops it), and wait for its health endpoint
    and for the demo AdmissionCheck to turn Active.
    """
    log("kueue-tas controller: not started (the `kueue-tas run` command does not exist yet); "
        f"the AdmissionCheck stays inactive, so ClusterQueue '{DemoObjects().cluster_queue}' admits nothing")


def submit_sample_jobs(rest: Rest, names: DemoObjects) -> None:
    """Submit sample Jobs/JobSets with kueue-tas topology annotations (once the controller exists)."""
    log("sample jobs: skipped until the kueue-tas controller can place them")


def usage_text(state: cluster.State, pool: NodePool, names: DemoObjects) -> str:
    kc = state.kubeconfig
    first = f"{pool.name}-b1-r1-h1"
    return f"""
Local cluster is up ({pool.size} kwok nodes: {pool.blocks} blocks x {pool.racks_per_block} racks x \
{pool.hosts_per_rack} hosts, {pool.allocatable[GPU]} GPUs each).

  export KUBECONFIG={kc}
  export NO_PROXY=127.0.0.1,localhost

Kueue objects: Topology '{names.topology}' (levels {', '.join(pool.level_labels())}),
ResourceFlavor '{names.flavor}', AdmissionCheck '{names.admission_check}' ({CONTROLLER_NAME}),
ClusterQueue '{names.cluster_queue}', LocalQueue '{names.namespace}/{names.local_queue}'.

No kubectl here; from Python (project venv):
  .venv/bin/python -c "import asyncio; from e2e.kube import new_api_client; \\
from kubernetes_asyncio import client
async def main():
    api = await new_api_client('{kc}')
    nodes = await client.CoreV1Api(api).list_node(label_selector='{POOL_LABEL}={pool.name}')
    print(len(nodes.items), 'nodes'); await api.close()
asyncio.run(main())"

  or plain HTTPS with the admin cert, e.g. the node {first} ({HOSTNAME_LABEL}={first}):
  curl --cacert {Path(state.run_dir) / 'pki/ca.crt'} --cert {Path(state.run_dir) / 'pki/admin.crt'} \\
       --key {Path(state.run_dir) / 'pki/admin.key'} https://127.0.0.1:{state.ports['apiserver']}/api/v1/nodes/{first}

Status: python -m e2e.cluster status     Logs: {state.log_dir}
Stop:   python -m e2e.cluster down       (or: make down)
"""


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m e2e.demo", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.parse_args(argv)
    names = DemoObjects()
    try:
        state = cluster.up(DEMO_POOL)
        rest = cluster.rest_client(state)
        install_kueue_objects(rest, DEMO_POOL, names)
    except (RuntimeError, TimeoutError, ApiError) as e:
        log(f"failed: {e}")
        return 1
    start_kueue_tas_controller(state)
    submit_sample_jobs(rest, names)
    print(usage_text(state, DEMO_POOL, names))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
