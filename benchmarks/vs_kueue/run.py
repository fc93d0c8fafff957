"""One shape on the local cluster: the nodes and both variants' Kueue objects, then runs.

Variant ``kueue``: a ResourceFlavor with ``spec.topologyName`` (Kueue's built-in TAS) and Jobs
annotated with Kueue's ``kueue.x-k8s.io/podset-*-topology``. Variant ``tas``: a flavor without
it, our AdmissionCheck on it, Jobs annotated with ``kueue-tas.io/podset-*-topology``, and a
``kueue-tas run`` started for the run only (so Kueue's runs carry none of its load), serving
the pod webhook with its configuration installed, as the manifests deploy it. Variant
``tas-no-webhook``: the same without the pod webhook (what it costs: one review per gated
pod). Variant ``floor``: not a TAS, the least an AdmissionCheck controller must do
(``floor_check``: Ready at once, one write), on the same ClusterQueue as ``tas``: what the
protocol alone costs. All select the same kwok nodes;
only one variant runs at a time, each in a fresh namespace.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kubernetes_asyncio.client.exceptions import ApiException
from prometheus_client.parser import text_string_to_metric_families

from e2e import jobs
from e2e.cluster_state import State
from e2e.controller import REPO_ROOT, ControllerGroup
from e2e.kube import KUEUE_GROUP, Kube, eventually
from e2e.nodes import GPU, POOL_LABEL, NodePool
from e2e.procs import free_port
from e2e.webhooks import install_pod_gate, remove_pod_gate, webhook_env
from kueue_tas.api import constants as c
from kueue_tas.kube import catalogue as cat
from kueue_tas.kube.catalogue import Resource
from kueue_tas.kube.client import send
from kueue_tas.kube.informer import Informer
from kueue_tas.runtime.config import Settings

from .procstats import ProcUsage
from .report import RunFigures, figures
from .timeline import Timelines, job_state, pod_state, workload_state
from .trace import JobSpec, Shape

TAS_VARIANTS = ("tas", "tas-no-webhook")
WEBHOOK_NAMESPACE = Settings.model_fields["webhook_namespace"].default  # where the controller keeps its certificate
JOBS = Resource("batch", "v1", "jobs", namespaced=True, kind="Job", strip_managed_fields=True)
KUEUE_REQUIRED = "kueue.x-k8s.io/podset-required-topology"
KUEUE_PREFERRED = "kueue.x-k8s.io/podset-preferred-topology"


@dataclass
class Bench:
    """The nodes and Kueue objects of one shape; ``controller_env``: the settings of the
    ``kueue-tas run`` each ``tas`` run starts."""

    kube: Kube
    state: State
    shape: Shape
    pool: NodePool
    controller_env: dict[str, str]
    suffix: str = ""

    @property
    def rack_of(self) -> dict[str, str]:
        return {n["metadata"]["name"]: n["metadata"]["labels"][self.pool.rack_label] for n in self.pool.node_objects()}

    def _group(self, webhook_port: int | None = None) -> ControllerGroup:
        env = dict(self.controller_env)
        if webhook_port is not None:
            env.update(webhook_env(webhook_port))
        return ControllerGroup(
            self.state.kubeconfig,
            Path(self.state.log_dir) / "kueue-tas-vs-kueue",
            replicas=1,
            leader_election=False,
            extra_env=env,
            group_id=f"vk{self.suffix}",
        )

    async def setup(self) -> None:
        """Nodes, one Topology, and per variant a flavor and a ClusterQueue (ours with the check,
        made Active by a controller started for that moment)."""
        kube, u = self.kube, self.suffix
        # Where the controller keeps the webhook certificate it issues (a cluster just brought up
        # has no manifests applied).
        with contextlib.suppress(ApiException):
            await kube.core.create_namespace({"metadata": {"name": WEBHOOK_NAMESPACE}})  # type: ignore[arg-type]
        await kube.create_nodes(self.pool, timeout_s=max(120.0, self.pool.size / 10))
        await kube.create_topology(f"topo-{u}", self.pool.level_labels())
        gpus = str(self.shape.cluster_gpus) if self.shape.capacity_quota else "1000000"
        quota = {"cpu": "1000000", "memory": "10000Ti", GPU: gpus}
        selector = {POOL_LABEL: self.pool.name}
        await kube.create_resource_flavor(f"rf-k-{u}", node_labels=selector, topology_name=f"topo-{u}")
        await kube.create_cluster_queue(f"cq-k-{u}", {f"rf-k-{u}": quota})
        await kube.create_resource_flavor(f"rf-t-{u}", node_labels=selector)
        group = self._group()
        await kube.create_admission_check(
            f"ac-{u}", group.controller_name, {"apiGroup": KUEUE_GROUP, "kind": "Topology", "name": f"topo-{u}"}
        )
        await kube.create_cluster_queue(
            f"cq-t-{u}", {f"rf-t-{u}": quota}, admission_checks=[{"name": f"ac-{u}", "onFlavors": [f"rf-t-{u}"]}]
        )
        try:
            await group.start()
            await kube.wait_cluster_queue_active(f"cq-t-{u}", timeout_s=60)
        finally:
            group.stop()
        await kube.wait_cluster_queue_active(f"cq-k-{u}", timeout_s=60)

    def job_body(self, spec: JobSpec, variant: str) -> dict[str, Any]:
        rack = self.pool.rack_label
        if variant == "kueue":
            key = KUEUE_REQUIRED if spec.mode == "required" else KUEUE_PREFERRED
            annotations = {key: rack}
            body = jobs.job(spec.name, spec.pods, annotations=annotations, run_for=f"{self.shape.run_seconds}s")
        else:
            body = jobs.job(
                spec.name,
                spec.pods,
                required=rack if spec.mode == "required" else None,
                preferred=rack if spec.mode == "preferred" else None,
                run_for=f"{self.shape.run_seconds}s",
            )
        return body

    async def run(self, variant: str, trace: list[JobSpec], index: int, timeout: float) -> RunFigures:
        kube, u = self.kube, self.suffix
        namespace = f"vk-{variant}-{index}-{uuid.uuid4().hex[:5]}"
        webhook_port = free_port() if variant == "tas" else None
        group = self._group(webhook_port) if variant in TAS_VARIANTS else None
        floor: subprocess.Popen[bytes] | None = None
        timelines = Timelines()
        informers: list[Informer[Any]] = []
        usage: dict[str, ProcUsage] = {}
        try:
            await kube.core.create_namespace({"metadata": {"name": namespace}})  # type: ignore[arg-type]
            await kube.create_local_queue(namespace, "lq", f"cq-{'k' if variant == 'kueue' else 't'}-{u}")
            if webhook_port is not None:
                await install_pod_gate(kube.api, webhook_port)
            if group is not None:
                await group.start()
                if webhook_port is not None:
                    await wait_ca_published(group)
            if variant == "floor":
                floor = start_floor_check(self.state.kubeconfig, namespace, f"ac-{u}")
            for resource, transform, handle in (
                (JOBS, job_state, timelines.on_job),
                (cat.WORKLOADS, workload_state, timelines.on_workload),
                (cat.PODS, pod_state, timelines.on_pod),
            ):
                inf: Informer[Any] = Informer(
                    kube.api, resource, transform, namespace=namespace, name=f"vk-{resource.plural}"
                )

                def on(obj: Any, handle: Any = handle) -> None:
                    handle(obj, time.time())

                def on_update(_old: Any, new: Any, on: Any = on) -> None:
                    on(new)

                inf.add_handler(on, on_update)
                informers.append(inf)
            for inf in informers:
                inf.start()
            for inf in informers:
                await inf.wait_synced(60)
            # Every control-plane process: on a small machine they share the CPUs, so what one
            # variant makes the apiserver or etcd do is part of its cost.
            for proc in self.state.procs:
                usage[proc.name] = ProcUsage.start(proc.pid)
            if group is not None:
                assert group.processes[0].proc is not None
                usage["kueue-tas"] = ProcUsage.start(group.processes[0].proc.pid)
            if floor is not None:
                usage["floor-check"] = ProcUsage.start(floor.pid)
            requests_before = await api_requests(kube)
            await asyncio.gather(*(jobs.create_job(kube, namespace, self.job_body(s, variant)) for s in trace))

            async def drained() -> bool:
                return timelines.finished() >= len(trace)

            await eventually(f"{len(trace)} Jobs finished ({variant})", drained, timeout, interval_s=0.2)
            out = figures(variant, trace, timelines.jobs, self.rack_of)
            after = await api_requests(kube)
            out.writes = {k: v - requests_before.get(k, 0) for k, v in after.items() if v > requests_before.get(k, 0)}
            for name, pu in usage.items():
                out.cpu[name], out.peak_rss_mib[name] = pu.stop()
            return out
        finally:
            for inf in informers:
                await inf.stop()
            if group is not None:
                group.stop()
            if floor is not None:
                floor.kill()
                floor.wait()
            if webhook_port is not None:
                await remove_pod_gate(kube.api)
            await drain(kube, namespace)

    async def teardown(self) -> None:
        await self.kube.cleanup()


def start_floor_check(kubeconfig: str, namespace: str, check: str) -> subprocess.Popen[bytes]:
    """The ``floor`` variant's check controller (``floor_check``), a process of its own."""
    return subprocess.Popen(
        [
            *(sys.executable, "-m", "benchmarks.vs_kueue.floor_check"),
            *("--kubeconfig", kubeconfig, "--namespace", namespace, "--check", check),
        ],
        cwd=REPO_ROOT,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
    )


async def wait_ca_published(group: ControllerGroup) -> None:
    """Until the controller has put its CA into the pod webhook's configuration (installed
    afresh, without one; its log says so): before that, every gated pod's creation would be
    refused and retried by its Job controller."""
    proc = group.processes[0]

    async def published() -> bool:
        return '"webhook_ca_bundle_written"' in proc.log_text()

    await eventually("kueue-tas publishes its CA into the pod webhook", published, 60, interval_s=0.2)


async def drain(kube: Kube, namespace: str) -> None:
    """Delete the run's namespace and wait until none of its pods hold a node."""
    with contextlib.suppress(ApiException):
        await kube.core.delete_namespace(namespace, propagation_policy="Background")

    async def gone() -> bool:
        return not (await kube.core.list_namespaced_pod(namespace, limit=1)).items

    with contextlib.suppress(TimeoutError):
        await eventually(f"pods of {namespace} deleted", gone, 180)


WRITE_VERBS = frozenset({"POST", "PUT", "PATCH", "APPLY", "DELETE"})


async def api_requests(kube: Kube) -> dict[str, int]:
    """The apiserver's own count of write requests so far, by ``VERB resource[/subresource]``
    (``apiserver_request_total``; every client's, which is the point: Kueue's writes count)."""
    response = await send(kube.api, "GET", "/metrics", timeout=30)
    try:
        text = (await response.read()).decode()
    finally:
        response.release()
    out: dict[str, int] = {}
    for family in text_string_to_metric_families(text):
        if family.name != "apiserver_request":
            continue
        for sample in family.samples:
            if not sample.name.endswith("_total") or sample.labels.get("verb") not in WRITE_VERBS:
                continue
            what = sample.labels.get("resource", "")
            if sample.labels.get("subresource"):
                what += "/" + sample.labels["subresource"]
            key = f"{sample.labels['verb']} {what}"
            out[key] = out.get(key, 0) + int(sample.value)
    return out


def bench_env(qps: int, burst: int) -> dict[str, str]:
    """``kueue-tas run`` settings for the benchmark: production defaults, info logs, and the same
    client QPS and burst as the local Kueue's ``clientConnection`` (``e2e/components.py``)."""
    return {
        "KUEUE_TAS_LOG_LEVEL": "info",
        # The pipelined admitter (admission_workers: docs/reference/settings.md).
        "KUEUE_TAS_ADMISSION_WORKERS": "16",
        "KUEUE_TAS_API_QPS": str(qps),
        "KUEUE_TAS_API_BURST": str(burst),
        "KUEUE_TAS_RETRY_BACKOFF_BASE_SECONDS": "10",
        "KUEUE_TAS_RETRY_BACKOFF_MAX_SECONDS": "600",
        "KUEUE_TAS_SCHEDULING_GATE": c.SCHEDULING_GATE,
    }
