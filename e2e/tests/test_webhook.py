"""Issue 14 item 5 on the real local cluster: the validating admission webhook, as deployed.

Two replicas under the manifests' RBAC, each serving the webhook on its own port (in a cluster
each pod has its own address behind the Service; here the configuration's URL picks one). The
controller issues its own certificate into the Secret of ``manifests/base`` and writes its CA
into the ValidatingWebhookConfiguration of ``manifests/base/webhook.yaml``, installed here with
the Service reference turned into a local URL and no caBundle. Requests go through ``kubectl``,
as a user sends them.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import datetime as dt
import subprocess
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest_asyncio
import yaml
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from e2e import jobs, procs, workloads
from e2e import stack as st
from e2e.cluster_state import State
from e2e.controller import REPO_ROOT, ControllerGroup
from e2e.kube import KUEUE_GROUP, KUEUE_VERSION, Kube, as_body, content_type, eventually
from e2e.nodes import BLOCK_LABEL, GPU, RACK_LABEL, NodePool, default_allocatable
from e2e.paths import bin_dir
from e2e.rbac import reset_webhook_secret
from e2e.tests.admission_helpers import DECIDED
from e2e.webhooks import install_pod_gate, localized, remove_pod_gate
from kueue_tas.api.constants import GATED_LABEL, GATED_LABEL_VALUE, HOSTNAME_LABEL, SCHEDULING_GATE
from kueue_tas.runtime.certs import ServingCert, renewal_reason, service_hosts
from kueue_tas.topology.level_names import LEVEL_NAMES_ANNOTATION

NS = "kueue-tas-system"
SECRET = "kueue-tas-webhook-cert"
CONFIGURATION = "kueue-tas"
DENIED = 'admission webhook "validate.kueue-tas.io" denied the request: '
WORKLOAD_REQUIRED = "kueue-tas.io/workload-required-topology"
VWC_GROUP = "admissionregistration.k8s.io"
VALIDATING_FILE = REPO_ROOT / "manifests" / "base" / "webhook.yaml"


@dataclass
class Webhook:
    group: ControllerGroup
    ports: list[int]
    kubeconfig: str

    async def kubectl(self, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        command = [str(bin_dir() / "kubectl"), "--kubeconfig", self.kubeconfig, *args]
        return await asyncio.to_thread(
            subprocess.run, command, input=stdin, capture_output=True, text=True, timeout=60, check=False
        )

    async def apply(self, namespace: str, manifest: dict[str, Any]) -> subprocess.CompletedProcess[str]:
        return await self.kubectl("apply", "-n", namespace, "-f", "-", stdin=yaml.safe_dump(manifest))


async def _delete_quietly(request: Any) -> None:
    with contextlib.suppress(ApiException):
        await request


@pytest_asyncio.fixture(loop_scope="session")
async def webhook(
    api_client: client.ApiClient, controller_kubeconfig: str, cluster_state: State
) -> AsyncIterator[Webhook]:
    reg = client.AdmissionregistrationV1Api(api_client)
    await reset_webhook_secret(api_client)  # a certificate issued by this run, in the shipped Secret
    await _delete_quietly(reg.delete_validating_webhook_configuration(CONFIGURATION))
    ports = [procs.free_port(), procs.free_port()]
    await reg.create_validating_webhook_configuration(as_body(localized(VALIDATING_FILE, ports[0])))
    await install_pod_gate(api_client, ports[0])
    group = ControllerGroup(
        controller_kubeconfig,
        Path(cluster_state.kubeconfig).parent / "logs" / "kueue-tas",
        replicas=2,
        extra_env={"KUEUE_TAS_WEBHOOK_HOSTS": "127.0.0.1"},
    )
    for port in ports:
        group.add_process().env["KUEUE_TAS_WEBHOOK_BIND"] = f"127.0.0.1:{port}"
    try:
        await group.start()
        yield Webhook(group, ports, cluster_state.kubeconfig)
    finally:
        group.kill_all()
        await _delete_quietly(reg.delete_validating_webhook_configuration(CONFIGURATION))
        await remove_pod_gate(api_client)


async def small_stack(kube: Kube, namespace: str, unique: str, tas: ControllerGroup) -> st.TasStack:
    pool = NodePool(
        name=f"wh{unique}", racks_per_block=2, hosts_per_rack=2, allocatable={**default_allocatable(), GPU: "4"}
    )
    s = await st.tas_stack(kube, namespace, tas.controller_name, pool)
    names = f"block={BLOCK_LABEL},rack={RACK_LABEL}"
    body = {"metadata": {"annotations": {LEVEL_NAMES_ANNOTATION: names}}}
    await kube.custom.patch_cluster_custom_object(
        KUEUE_GROUP, KUEUE_VERSION, "topologies", s.topology, body, **content_type("application/merge-patch+json")
    )
    return s


async def wait_names_seen(webhook: Webhook, namespace: str, s: st.TasStack) -> None:
    """The webhook's caches have the stack (the Topology's names): a probe Job is judged by them."""

    async def judged() -> bool:
        out = await webhook.kubectl(
            "create",
            "--dry-run=server",
            "-n",
            namespace,
            "-f",
            "-",
            stdin=yaml.safe_dump(jobs.job("probe", 1, required="aisle")),
        )
        return out.returncode != 0 and f'Topology "{s.topology}"' in out.stderr

    await eventually("the webhook judges by the stack's Topology", judged, timeout_s=30, interval_s=0.5)


async def test_the_controller_issues_its_certificate_and_publishes_its_ca(
    webhook: Webhook, api_client: client.ApiClient
) -> None:
    core = client.CoreV1Api(api_client)
    secret = await core.read_namespaced_secret(SECRET, NS)
    assert secret.type == "Opaque"  # the manifests ship it empty; the controller fills it keeping its type
    cert = ServingCert(*(base64.b64decode(secret.data[k]) for k in ("ca.crt", "tls.crt", "tls.key")))
    hosts = service_hosts("kueue-tas-webhook", NS, ["127.0.0.1"])
    assert renewal_reason(cert, hosts, dt.datetime.now(dt.UTC)) is None
    reg = client.AdmissionregistrationV1Api(api_client)

    async def published() -> bool:
        vwc = await reg.read_validating_webhook_configuration(CONFIGURATION)
        bundle = vwc.webhooks[0].client_config.ca_bundle
        return bundle is not None and base64.b64decode(bundle) == cert.ca_pem

    await eventually("the caBundle holds the Secret's CA", published, timeout_s=30, interval_s=0.5)
    # Both replicas serve the one certificate (the second read the first's Secret).
    assert "webhook_certificate_issued" in "".join(p.log_text() for p in webhook.group.processes)
    assert sum("webhook_certificate_issued" in p.log_text() for p in webhook.group.processes) == 1


async def test_a_new_pod_labelled_gated_gets_our_gate_from_the_pod_webhook(
    webhook: Webhook, kube: Kube, namespace: str, api_client: client.ApiClient
) -> None:
    """What closes the late-stop race (chaos seeds 1209, 1213): a pod of a PodSet the ungater
    places is gated at creation even when its Job's template lost our gate; other pods are not
    touched. The CA reaches the pod webhook's configuration as it reaches the validating one."""
    reg = client.AdmissionregistrationV1Api(api_client)

    async def published() -> bool:
        mwc = await reg.read_mutating_webhook_configuration(CONFIGURATION)
        vwc = await reg.read_validating_webhook_configuration(CONFIGURATION)
        bundle = mwc.webhooks[0].client_config.ca_bundle
        return bundle is not None and bundle == vwc.webhooks[0].client_config.ca_bundle

    await eventually("the pod webhook's caBundle holds the CA", published, timeout_s=30, interval_s=0.5)

    def pod(name: str, labels: dict[str, str]) -> dict[str, Any]:
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "labels": labels},
            "spec": {
                "schedulingGates": [{"name": "example.com/other"}],
                "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}],
            },
        }

    gated = await kube.core.create_namespaced_pod(namespace, as_body(pod("gated", {GATED_LABEL: GATED_LABEL_VALUE})))
    assert [g.name for g in gated.spec.scheduling_gates] == ["example.com/other", SCHEDULING_GATE]
    other = await kube.core.create_namespaced_pod(namespace, as_body(pod("other", {"app": "x"})))
    assert [g.name for g in other.spec.scheduling_gates] == ["example.com/other"]
    metrics = "".join(p.metrics() for p in webhook.group.processes if p.alive)
    assert 'kueue_tas_webhook_reviews_total{kind="Pod",operation="CREATE",result="gated"} 1.0' in metrics


async def test_kubectl_apply_of_a_malformed_job_is_refused_with_the_message(
    webhook: Webhook, kube: Kube, namespace: str, unique: str
) -> None:
    s = await small_stack(kube, namespace, unique, webhook.group)
    await wait_names_seen(webhook, namespace, s)

    out = await webhook.apply(namespace, jobs.job("bad", 2, required="rakc"))
    assert out.returncode != 0
    assert (
        f"{DENIED}Job/{namespace}/bad: spec.template.metadata.annotations[kueue-tas.io/podset-required-topology]: "
        f'unknown topology level "rakc"; Topology "{s.topology}" has levels {BLOCK_LABEL}, {RACK_LABEL}, '
        f"{HOSTNAME_LABEL}; level names: block, rack, host"
    ) in out.stderr, out.stderr
    assert await _missing(kube, namespace, "bad")

    out = await webhook.apply(namespace, jobs.job("inverted", 2, required="rack", preferred="block"))
    assert out.returncode != 0 and "the preferred level must be the required level or a level below it" in out.stderr

    # A key we do not read is let through with a warning that names the one meant.
    typo = jobs.job("typo", 2, annotations={"kueue-tas.io/podset-requried-topology": "rack"})
    out = await webhook.apply(namespace, typo)
    assert out.returncode == 0, out.stderr
    assert "Warning: " in out.stderr and "did you mean kueue-tas.io/podset-required-topology?" in out.stderr


async def test_a_good_job_runs_and_its_admitted_constraint_cannot_change(
    webhook: Webhook, kube: Kube, namespace: str, unique: str
) -> None:
    s = await small_stack(kube, namespace, unique, webhook.group)
    await wait_names_seen(webhook, namespace, s)
    body = jobs.job("good", 2, required="rack")
    body["metadata"]["annotations"] = {WORKLOAD_REQUIRED: "block"}
    out = await webhook.apply(namespace, body)
    assert out.returncode == 0, out.stderr

    # Kueue's unsuspend and our gate injection are updates the webhook sees: it must let them by.
    await workloads.wait_check(kube, s, "good", DECIDED, owner_kind="Job")

    async def running() -> bool:
        job = await kube.batch.read_namespaced_job("good", namespace)
        return job.spec.suspend is False

    await eventually("the Job is admitted and unsuspended", running, timeout_s=60, interval_s=0.5)
    out = await webhook.kubectl("annotate", "--overwrite", "-n", namespace, "job/good", f"{WORKLOAD_REQUIRED}=rack")
    assert out.returncode != 0
    assert (
        f"{DENIED}Job/{namespace}/good: metadata.annotations[{WORKLOAD_REQUIRED}]: changed from 'block' to 'rack': "
        "a constraint may not change while the workload is admitted"
    ) in out.stderr, out.stderr
    # Other changes to the running Job still pass.
    out = await webhook.kubectl("label", "-n", namespace, "job/good", "team=a")
    assert out.returncode == 0, out.stderr


async def test_the_standby_serves_too_and_a_webhook_that_is_down_blocks_nobody(
    webhook: Webhook, kube: Kube, namespace: str, unique: str, api_client: client.ApiClient
) -> None:
    s = await small_stack(kube, namespace, unique, webhook.group)
    leader = await webhook.group.wait_leader()
    standby = next(p for p in webhook.group.processes if p is not leader)
    port = webhook.ports[webhook.group.processes.index(standby)]
    reg = client.AdmissionregistrationV1Api(api_client)
    vwc = await reg.read_validating_webhook_configuration(CONFIGURATION)
    ops = [{"op": "replace", "path": "/webhooks/0/clientConfig/url", "value": f"https://127.0.0.1:{port}/validate"}]
    await reg.patch_validating_webhook_configuration(CONFIGURATION, ops, **content_type("application/json-patch+json"))
    assert vwc.webhooks[0].client_config.ca_bundle  # the same CA: the replicas share the Secret
    await wait_names_seen(webhook, namespace, s)

    webhook.group.kill_all()
    out = await webhook.apply(namespace, jobs.job("unjudged", 2, required="rakc"))
    assert out.returncode == 0, out.stderr  # failurePolicy Ignore: the admitter judges it later
    assert not await _missing(kube, namespace, "unjudged")


async def test_the_cert_manager_overlay_renders_what_the_controller_reads(webhook: Webhook) -> None:
    out = await webhook.kubectl("kustomize", str(REPO_ROOT / "manifests" / "cert-manager"))
    assert out.returncode == 0, out.stderr
    docs = [d for d in yaml.safe_load_all(out.stdout) if d]
    by_kind: dict[str, list[dict[str, Any]]] = {}
    for d in docs:
        by_kind.setdefault(d["kind"], []).append(d)
    # Beside them the CA Certificate that signs both (tests/project/test_kustomize_build.py checks the chain).
    certificates = {d["metadata"]["name"]: d for d in by_kind["Certificate"]}
    cert, serving = certificates["kueue-tas-webhook"], certificates["kueue-tas-metrics"]
    assert cert["spec"]["dnsNames"] == service_hosts("kueue-tas-webhook", NS)
    assert serving["spec"]["dnsNames"] == service_hosts("kueue-tas-metrics", NS)
    (vwc,) = by_kind["ValidatingWebhookConfiguration"]
    assert vwc["metadata"]["annotations"]["cert-manager.io/inject-ca-from"] == f"{NS}/{cert['metadata']['name']}"
    (deployment,) = by_kind["Deployment"]
    pod = deployment["spec"]["template"]["spec"]
    (manager,) = pod["containers"]
    env = {e["name"]: e.get("value") for e in manager["env"]}
    mount = next(m for m in manager["volumeMounts"] if m["mountPath"] == env["KUEUE_TAS_WEBHOOK_CERT_DIR"])
    volume = next(v for v in pod["volumes"] if v["name"] == mount["name"])
    assert volume["secret"]["secretName"] == cert["spec"]["secretName"]
    mount = next(m for m in manager["volumeMounts"] if m["mountPath"] == env["KUEUE_TAS_SERVING_CERT_DIR"])
    volume = next(v for v in pod["volumes"] if v["name"] == mount["name"])
    assert volume["secret"]["secretName"] == serving["spec"]["secretName"]
    # The controller no longer touches Secrets.
    assert all(
        "secrets" not in r.get("resources", [])
        for kind in ("Role", "ClusterRole")
        for d in by_kind[kind]
        for r in d["rules"]
    )


async def _missing(kube: Kube, namespace: str, name: str) -> bool:
    try:
        await kube.batch.read_namespaced_job(name, namespace)
    except ApiException as exc:
        return exc.status == 404
    return False
