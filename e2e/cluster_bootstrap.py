"""What the local cluster holds before any test: CRDs, webhook configurations, namespaces, kwok
nodes, and the dry-run probes that tell when the webhooks answer."""

from __future__ import annotations

from typing import Any

from e2e.nodes import NodePool, is_ready
from e2e.rest import ApiError, Rest, resource_path, wait_for

# Bounded waits (seconds).
T_CRDS = 120
T_NODES = 120

PROBE_NAMESPACE = "default"


def install_crds(rest: Rest, crds: list[dict[str, Any]]) -> None:
    for crd in crds:
        rest.apply(resource_path(crd, "customresourcedefinitions"), crd)

    def established() -> bool:
        for crd in crds:
            got = rest.get(resource_path(crd, "customresourcedefinitions"))
            conds = {c["type"]: c["status"] for c in got.get("status", {}).get("conditions", [])}
            if conds.get("Established") != "True":
                return False
        return True

    wait_for("CRDs Established", established, T_CRDS, interval_s=0.5)


def install_webhooks(rest: Rest, docs: list[dict[str, Any]]) -> None:
    plural = {
        "MutatingWebhookConfiguration": "mutatingwebhookconfigurations",
        "ValidatingWebhookConfiguration": "validatingwebhookconfigurations",
    }
    for d in docs:
        d = {"apiVersion": "admissionregistration.k8s.io/v1", **d}
        rest.apply(resource_path(d, plural[d["kind"]]), d)


def ensure_namespace(rest: Rest, name: str) -> None:
    ns = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
    rest.apply(resource_path(ns, "namespaces"), ns)


def _probe_job() -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": "e2e-webhook-probe",
            "namespace": PROBE_NAMESPACE,
            "labels": {"kueue.x-k8s.io/queue-name": "e2e-probe"},
        },
        "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "probe"}]}}},
    }


def _probe_jobset() -> dict[str, Any]:
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": "e2e-webhook-probe", "namespace": PROBE_NAMESPACE},
        "spec": {
            "replicatedJobs": [
                {
                    "name": "w",
                    "replicas": 1,
                    "template": {
                        "spec": {
                            "template": {
                                "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "probe"}]}
                            }
                        }
                    },
                }
            ]
        },
    }


def kueue_webhook_works(rest: Rest) -> bool:
    """A dry-run Job with a queue label comes back suspended: Kueue's mutating webhook answered."""
    job = _probe_job()
    try:
        got = rest.request("POST", resource_path(job, "jobs", with_name=False), job, query={"dryRun": "All"})
    except ApiError:
        return False
    return bool(got.get("spec", {}).get("suspend") is True)


def jobset_webhook_works(rest: Rest) -> bool:
    js = _probe_jobset()
    try:
        got = rest.request("POST", resource_path(js, "jobsets", with_name=False), js, query={"dryRun": "All"})
    except ApiError:
        return False
    # JobSet's defaulting webhook fills in the success policy.
    return bool(got.get("spec", {}).get("successPolicy"))


# ------------------------------------------------------------------ nodes


def create_nodes(rest: Rest, pool: NodePool, timeout_s: float = T_NODES) -> list[str]:
    """Create (or update) the pool's nodes and wait until kwok reports them Ready."""
    names = []
    for node in pool.node_objects():
        name = node["metadata"]["name"]
        names.append(name)
        try:
            rest.request("POST", "/api/v1/nodes", node)
        except ApiError as e:
            if e.status != 409:
                raise
            rest.request(
                "PATCH",
                f"/api/v1/nodes/{name}",
                {"metadata": {"labels": node["metadata"]["labels"]}},
                content_type="application/merge-patch+json",
            )
            rest.request(
                "PATCH",
                f"/api/v1/nodes/{name}/status",
                {"status": node["status"]},
                content_type="application/merge-patch+json",
            )

    wanted = set(names)

    def all_ready() -> bool:
        items = rest.get("/api/v1/nodes")["items"]
        ready = {n["metadata"]["name"] for n in items if is_ready(n)}
        return wanted <= ready

    wait_for(f"{len(names)} kwok nodes Ready", all_ready, timeout_s, interval_s=0.5)
    return names
