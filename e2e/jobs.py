"""The Jobs and JobSets e2e tests submit (suspended, in a LocalQueue), their topology annotations,
and what the controller did to their pod templates (scheduling gates)."""

from __future__ import annotations

from typing import Any

from e2e.kube import JOBSET_GROUP, JOBSET_VERSION, QUEUE_LABEL, Kube, as_body
from e2e.manifests import POD_COMPLETE_DELAY_ANNOTATION
from e2e.nodes import GPU
from kueue_tas.api import constants as kc

PREFIX = kc.DEFAULT_ANNOTATION_PREFIX
REQUIRED = PREFIX + kc.SUFFIX_REQUIRED_TOPOLOGY
PREFERRED = PREFIX + kc.SUFFIX_PREFERRED_TOPOLOGY
SLICE_REQUIRED = PREFIX + "podset-slice-required-topology"
SLICE_SIZE = PREFIX + "podset-slice-size"


def container(gpu: int = 1, cpu: str = "100m") -> dict[str, Any]:
    requests: dict[str, str] = {"cpu": cpu, "memory": "64Mi"}
    limits: dict[str, str] = {}
    if gpu:
        requests[GPU] = str(gpu)
        limits[GPU] = str(gpu)  # extended resources need limits
    return {"name": "main", "image": "registry.invalid/fake:1", "resources": {"requests": requests, "limits": limits}}


def pod_template(
    *,
    gpu: int = 1,
    required: str | None = None,
    preferred: str | None = None,
    annotations: dict[str, str] | None = None,
    run_for: str = "1h",
) -> dict[str, Any]:
    ann = {POD_COMPLETE_DELAY_ANNOTATION: run_for}
    if required:
        ann[REQUIRED] = required
    if preferred:
        ann[PREFERRED] = preferred
    ann.update(annotations or {})
    return {"metadata": {"annotations": ann}, "spec": {"restartPolicy": "Never", "containers": [container(gpu)]}}


def job(
    name: str,
    parallelism: int,
    *,
    gpu: int = 1,
    required: str | None = None,
    preferred: str | None = None,
    annotations: dict[str, str] | None = None,
    queue: str = "lq",
    indexed: bool = True,
    run_for: str = "1h",
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "suspend": True,
        "parallelism": parallelism,
        "completions": parallelism,
        "template": pod_template(
            gpu=gpu, required=required, preferred=preferred, annotations=annotations, run_for=run_for
        ),
    }
    if indexed:
        spec["completionMode"] = "Indexed"
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "labels": {QUEUE_LABEL: queue}},
        "spec": spec,
    }


def jobset(name: str, replicated: list[tuple[str, int, int, dict[str, Any]]], *, queue: str = "lq") -> dict[str, Any]:
    """``replicated``: (name, replicas, parallelism, pod template) per replicated job."""
    return {
        "apiVersion": f"{JOBSET_GROUP}/{JOBSET_VERSION}",
        "kind": "JobSet",
        "metadata": {"name": name, "labels": {QUEUE_LABEL: queue}},
        "spec": {
            "suspend": True,
            "replicatedJobs": [
                {
                    "name": rj,
                    "replicas": replicas,
                    "template": {
                        "spec": {
                            "parallelism": par,
                            "completions": par,
                            "completionMode": "Indexed",
                            "backoffLimit": 0,
                            "template": tmpl,
                        }
                    },
                }
                for rj, replicas, par, tmpl in replicated
            ],
        },
    }


async def create_job(kube: Kube, namespace: str, body: dict[str, Any]) -> None:
    await kube.batch.create_namespaced_job(namespace, as_body(body))


async def create_jobset(kube: Kube, namespace: str, body: dict[str, Any]) -> None:
    await kube.custom.create_namespaced_custom_object(JOBSET_GROUP, JOBSET_VERSION, namespace, "jobsets", body)


async def delete_job(kube: Kube, namespace: str, name: str) -> None:
    await kube.batch.delete_namespaced_job(name, namespace, propagation_policy="Background")


async def job_gates(kube: Kube, namespace: str, name: str) -> list[str]:
    job = await kube.batch.read_namespaced_job(name, namespace)
    gates = job.spec.template.spec.scheduling_gates or []
    return [g.name for g in gates]


async def jobset_gates(kube: Kube, namespace: str, name: str) -> dict[str, list[str]]:
    """Replicated job name -> scheduling gates of its pod template."""
    js = await kube.custom.get_namespaced_custom_object(JOBSET_GROUP, JOBSET_VERSION, namespace, "jobsets", name)
    return {
        rj["name"]: [g["name"] for g in rj["template"]["spec"]["template"]["spec"].get("schedulingGates") or []]
        for rj in js["spec"]["replicatedJobs"]
    }
