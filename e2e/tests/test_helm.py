"""Issue 28: kueue-tas installed, upgraded and uninstalled with its Helm chart, on the local cluster.

What runs where. ``helm install`` puts every object of charts/kueue-tas into the cluster
(ServiceAccount, RBAC, ConfigMap, Deployment, Services, both webhook configurations, the empty
Secret and Lease). The local cluster has no kubelet that could run the image (kwok nodes, and
no Deployment controller), so the Deployment's pod is played by one ``kueue-tas run --config``
process on this machine, given what the pod would get:

- the ConfigMap's ``config.yaml`` as helm installed it, read back from the cluster and written
  to the file ``--config`` names (no ``KUEUE_TAS_*`` override at all);
- the release's ServiceAccount: a token from the TokenRequest API in a kubeconfig (in a pod:
  the mounted token), so a permission missing from the chart's RBAC fails the test;
- ``POD_NAME``, as the Deployment's env sets it.

/metrics is served as the chart configures it (HTTPS, a bearer token reviewed per request): the
test reads it with a token bound to the chart's ``<release>-metrics-reader`` ClusterRole, the
way its ServiceMonitor's Prometheus does, and is refused without one.

The one value set for this machine rather than for a cluster is ``webhook.url``: the API server
cannot reach a Service here, so both webhook configurations call the process at
``https://127.0.0.1:<port>`` (``config.webhookHosts`` puts that address in the controller's
self-issued certificate). The ports are free ports of this machine, set through ``ports.*``.
An upgrade that changes a setting is rolled as the Deployment would roll it (its pod-template
checksum changes): the process is stopped and a new one starts with the new ConfigMap.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import ssl
import time
from pathlib import Path
from typing import Any

import aiohttp
import yaml
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from e2e import jobs, procs, rbac, workloads
from e2e import stack as st
from e2e.cluster_state import State
from e2e.controller import REPO_ROOT, ControllerProcess, metric_value
from e2e.helm import CHART_DIR, run_helm, set_args
from e2e.kube import Kube, as_body, eventually
from e2e.nodes import RACK_LABEL, NodePool
from e2e.pods import is_gated
from kueue_tas.kube.client import request_json
from kueue_tas.kube.errors import NotFound

# The chart's full name is the release name when that contains "kueue-tas".
RELEASE = "helm-kueue-tas"
JOB_NAME = "batch.kubernetes.io/job-name"
NEW_PREFIX = "tas.example.com/"
DENIED = 'admission webhook "validate.kueue-tas.io" denied the request'
# What Kubernetes itself puts into every namespace.
KUBERNETES_OWN = frozenset({"kube-root-ca.crt", "default"})
# Namespaced kinds the chart and the controller create (listed whole in the release namespace),
# cluster-scoped ones (listed by the release's label), after uninstall.
LISTED_PATHS = (
    "/api/v1/namespaces/{ns}/configmaps",
    "/api/v1/namespaces/{ns}/secrets",
    "/api/v1/namespaces/{ns}/services",
    "/api/v1/namespaces/{ns}/serviceaccounts",
    "/apis/apps/v1/namespaces/{ns}/deployments",
    "/apis/coordination.k8s.io/v1/namespaces/{ns}/leases",
    "/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/roles",
    "/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/rolebindings",
    "/apis/rbac.authorization.k8s.io/v1/clusterroles",
    "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
    "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations",
    "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations",
)


class Release:
    """One helm release of the chart and the process that plays its pod."""

    def __init__(self, api: client.ApiClient, state: State, namespace: str, unique: str) -> None:
        self.api = api
        self.admin_kubeconfig = state.kubeconfig
        self.namespace = namespace
        self.run_dir = Path(state.kubeconfig).parent / "helm" / unique
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.ports = procs.free_ports(["health", "metrics", "webhook"])
        self.controller_name = f"kueue-tas.io/helm-{unique}"
        self.process: ControllerProcess | None = None
        self.rolls = 0

    def helm(self, *args: str) -> str:
        return run_helm([*args, "--namespace", self.namespace], kubeconfig=self.admin_kubeconfig)

    def install_values(self) -> dict[str, Any]:
        return {
            "ports.health": self.ports["health"],
            "ports.metrics": self.ports["metrics"],
            "ports.webhook": self.ports["webhook"],
            "webhook.url": f"https://127.0.0.1:{self.ports['webhook']}",
            "config.webhookHosts": ["127.0.0.1"],
            "config.controllerName": self.controller_name,
            "config.logLevel": "debug",
        }

    async def get(self, path: str) -> dict[str, Any]:
        result: dict[str, Any] = await request_json(self.api, "GET", path)
        return result

    async def config_map(self) -> dict[str, Any]:
        return await self.get(f"/api/v1/namespaces/{self.namespace}/configmaps/{RELEASE}-config")

    async def deployment(self) -> dict[str, Any]:
        return await self.get(f"/apis/apps/v1/namespaces/{self.namespace}/deployments/{RELEASE}")

    async def service_account_kubeconfig(self, manifest: list[dict[str, Any]]) -> Path:
        user = rbac.service_account_user(self.namespace, RELEASE)
        await rbac.wait_rbac_effective(self.api, user, manifest)
        body: Any = {"spec": {"expirationSeconds": 3600}}
        token = await client.CoreV1Api(self.api).create_namespaced_service_account_token(RELEASE, self.namespace, body)
        out = self.run_dir / "sa.kubeconfig"
        return rbac.write_token_kubeconfig(out, rbac.admin_cluster(self.admin_kubeconfig), user, token.status.token)

    async def start_pod(self, kubeconfig: Path) -> ControllerProcess:
        """A new 'pod' of the Deployment: the live ConfigMap's config.yaml, the ServiceAccount."""
        deployment = await self.deployment()
        (container,) = deployment["spec"]["template"]["spec"]["containers"]
        config_path = Path(container["args"][container["args"].index("--config") + 1])
        config_file = self.run_dir / f"roll-{self.rolls}" / config_path.name
        config_file.parent.mkdir(parents=True, exist_ok=True)
        config_file.write_text((await self.config_map())["data"][config_path.name])
        identity = f"{RELEASE}-{self.rolls}"
        self.rolls += 1
        env = {k: v for k, v in os.environ.items() if not k.startswith("KUEUE_TAS_")}
        env.update(
            PYTHONPATH=str(REPO_ROOT),
            POD_NAME=identity,
            KUEUE_TAS_KUBECONFIG=str(kubeconfig),  # in a pod: the mounted ServiceAccount token
            PYTHONUNBUFFERED="1",
            NO_PROXY=",".join(h for h in (env.get("NO_PROXY", ""), "127.0.0.1", "localhost") if h),
        )
        env["no_proxy"] = env["NO_PROXY"]
        p = ControllerProcess(
            identity,
            env,
            self.run_dir / f"{identity}.log",
            self.ports["health"],
            self.ports["metrics"],
            # The Deployment's arguments, the mounted file's path being this run's copy of it.
            args=tuple(str(config_file) if a == str(config_path) else a for a in container["args"][1:]),
        )
        assert container["args"][0] == "run" and str(config_file) in p.args
        p.start()
        self.process = p
        await p.wait_ready()
        return p

    def stop_pod(self) -> None:
        if self.process is not None:
            self.process.terminate()


async def _dry_run_job(api: client.ApiClient, namespace: str, body: dict[str, Any]) -> str | None:
    """None when the API server (and so both webhooks) accepts the Job, else its refusal."""
    try:
        await client.BatchV1Api(api).create_namespaced_job(namespace, as_body(body), dry_run="All")
    except ApiException as e:
        return str(json.loads(e.body).get("message")) if e.body else f"{e.status} {e.reason}"
    return None


def _bad_job(prefix: str) -> dict[str, Any]:
    body = jobs.job("probe", 1)
    body["spec"]["template"]["metadata"]["annotations"][f"{prefix}podset-required-topology"] = "no-such-level"
    return body


# Each process issues its own serving certificate (certManager off): read as the ServiceMonitor
# scrapes it, with insecureSkipVerify; the token is what is checked.
_UNVERIFIED = ssl.create_default_context()
_UNVERIFIED.check_hostname = False
_UNVERIFIED.verify_mode = ssl.CERT_NONE


async def _metrics_status(url: str, token: str | None) -> tuple[int, str]:
    headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
    async with aiohttp.ClientSession() as session, session.get(url, headers=headers, ssl=_UNVERIFIED) as resp:
        return resp.status, await resp.text()


async def _scraper_token(api: client.ApiClient, namespace: str, name: str, role: str) -> str:
    """A ServiceAccount bound to ``role`` (as serviceMonitor.enabled binds Prometheus's), its token
    once the authorizer lets it get /metrics (the controller caches a denial for 30 s)."""
    core = client.CoreV1Api(api)
    account: Any = {"metadata": {"name": name}}
    await core.create_namespaced_service_account(namespace, account)
    binding: Any = {
        "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
        "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": namespace}],
    }
    await client.RbacAuthorizationV1Api(api).create_cluster_role_binding(binding)
    review: Any = {
        "spec": {
            "user": rbac.service_account_user(namespace, name),
            "nonResourceAttributes": {"path": "/metrics", "verb": "get"},
        }
    }
    deadline = time.monotonic() + 30
    while not (await client.AuthorizationV1Api(api).create_subject_access_review(review)).status.allowed:
        assert time.monotonic() < deadline, f"the binding of {name} to {role} is not effective"
        await asyncio.sleep(0.2)
    body: Any = {"spec": {"expirationSeconds": 600}}
    request = await core.create_namespaced_service_account_token(name, namespace, body)
    return str(request.status.token)


async def _gone(api: client.ApiClient, doc: dict[str, Any]) -> bool:
    try:
        await request_json(api, "GET", rbac.object_path(doc))
    except NotFound:
        return True
    return False


async def test_helm_install_admits_a_job_upgrade_takes_effect_uninstall_leaves_nothing(
    api_client: client.ApiClient, cluster_state: State, kube: Kube, namespace: str, unique: str
) -> None:
    release = Release(api_client, cluster_state, f"kueue-tas-helm-{unique}", unique)
    installed = False
    try:
        # ---- install --------------------------------------------------------------------------
        release.helm("install", RELEASE, str(CHART_DIR), "--create-namespace", *set_args(release.install_values()))
        installed = True
        manifest = [d for d in yaml.safe_load_all(release.helm("get", "manifest", RELEASE)) if d]
        kinds = sorted(d["kind"] for d in manifest)
        assert "Deployment" in kinds and "MutatingWebhookConfiguration" in kinds and "Lease" in kinds
        sa_kubeconfig = await release.service_account_kubeconfig(manifest)
        first = await release.start_pod(sa_kubeconfig)

        # The empty objects the chart made are the ones the controller fills: the Lease it holds,
        # the Secret its certificate is in (still Helm's), the CA in both configurations.
        ns = release.namespace
        lease = await release.get(f"/apis/coordination.k8s.io/v1/namespaces/{ns}/leases/{RELEASE}")
        assert lease["spec"]["holderIdentity"].startswith(first.identity_prefix)
        secret = await release.get(f"/api/v1/namespaces/{ns}/secrets/{RELEASE}-webhook-cert")
        assert {"ca.crt", "tls.crt", "tls.key"} <= set(secret["data"])
        assert secret["metadata"]["annotations"]["meta.helm.sh/release-name"] == RELEASE
        ca = secret["data"]["ca.crt"]

        async def published() -> bool:
            hooks = []
            for kind in ("validatingwebhookconfigurations", "mutatingwebhookconfigurations"):
                hooks += (await release.get(f"/apis/admissionregistration.k8s.io/v1/{kind}/{RELEASE}"))["webhooks"]
            return all(h["clientConfig"].get("caBundle") == ca for h in hooks)

        await eventually("the controller's CA in both webhook configurations", published, 30)

        # ---- a Job with a required topology, admitted and placed through the installed release --
        pool = NodePool(name=f"hm{unique}", blocks=1, racks_per_block=2, hosts_per_rack=2)
        s = await st.tas_stack(kube, namespace, release.controller_name, pool)
        await jobs.create_job(kube, namespace, jobs.job("rack-job", 12, required=RACK_LABEL))
        wl = await workloads.wait_admitted(kube, s, "rack-job")
        per_rack = workloads.racks_of(wl, "main", st.host_racks(pool))
        assert list(per_rack.values()) == [12], per_rack
        racks = {n["metadata"]["name"]: n["metadata"]["labels"][RACK_LABEL] for n in pool.node_objects()}

        async def placed() -> list[dict[str, Any]] | None:
            pods = await kube.core.list_namespaced_pod(namespace, label_selector=f"{JOB_NAME}=rack-job")
            raw = [kube.api.sanitize_for_serialization(p) for p in pods.items]
            ok = len(raw) == 12 and all(p["spec"].get("nodeName") and not is_gated(p) for p in raw)
            return raw if ok else None

        pods = await eventually("the Job's 12 pods ungated and bound", placed, 90)
        assert {racks[p["spec"]["nodeName"]] for p in pods} == set(per_rack)
        # Spanning two hosts, the PodSet went through the pod webhook of the chart's
        # MutatingWebhookConfiguration: its pods carry the gated label.
        assert all(p["metadata"]["labels"].get("kueue-tas.io/gated") == "true" for p in pods)

        # ---- /metrics as the chart serves it: HTTPS, a token allowed by its metrics-reader role ---
        assert first.metrics_url.startswith("https://")
        assert await _metrics_status(first.metrics_url, None) == (401, "Unauthorized: a bearer token is required\n")
        scraper = f"scraper-{unique}"
        reader_role = f"{RELEASE}-metrics-reader"
        assert reader_role in {d["metadata"]["name"] for d in manifest if d["kind"] == "ClusterRole"}
        scraper_token = await _scraper_token(api_client, namespace, scraper, reader_role)
        status, text = await _metrics_status(first.metrics_url, scraper_token)
        assert status == 200 and "kueue_tas_admissions_total" in text, (status, text[:300])
        # The reviews were the controller's own (its ClusterRole's tokenreviews/subjectaccessreviews).
        assert (metric_value(text, "kueue_tas_http_auth_total", server="metrics", result="allowed") or 0) >= 1

        # ---- upgrade: a setting and a webhook value ---------------------------------------------
        assert await _dry_run_job(api_client, namespace, _bad_job(NEW_PREFIX)) is None
        checksum = (await release.deployment())["spec"]["template"]["metadata"]["annotations"]["checksum/config"]
        release.helm(
            "upgrade",
            RELEASE,
            str(CHART_DIR),
            "--reuse-values",
            *set_args({"config.annotationPrefix": NEW_PREFIX, "webhook.timeoutSeconds": 7}),
        )
        rolled = (await release.deployment())["spec"]["template"]["metadata"]["annotations"]["checksum/config"]
        assert rolled != checksum, "a changed setting changes the pod template, so the pods roll"
        vwc = await release.get(f"/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/{RELEASE}")
        assert vwc["webhooks"][0]["timeoutSeconds"] == 7
        assert vwc["webhooks"][0]["clientConfig"]["caBundle"] == ca, "helm upgrade keeps the controller's CA"
        live_secret = await release.get(f"/api/v1/namespaces/{ns}/secrets/{RELEASE}-webhook-cert")
        assert live_secret["data"]["ca.crt"] == ca, "helm upgrade leaves the certificate alone"
        release.stop_pod()
        await release.start_pod(sa_kubeconfig)

        async def refused_by_new_prefix() -> str | None:
            refusal = await _dry_run_job(api_client, namespace, _bad_job(NEW_PREFIX))
            return refusal if refusal and DENIED in refusal else None

        refusal = await eventually("the webhook judges the new prefix's annotations", refused_by_new_prefix, 60)
        assert f"{NEW_PREFIX}podset-required-topology" in refusal
        assert await _dry_run_job(api_client, namespace, _bad_job("kueue-tas.io/")) is None

        # ---- uninstall: the pods go first (the Deployment's deletion), then every object ------------
        release.stop_pod()
        release.helm("uninstall", RELEASE, "--wait")
        installed = False
        left = [f"{d['kind']} {d['metadata']['name']}" for d in manifest if not await _gone(api_client, d)]
        assert left == [], f"left after helm uninstall: {left}"
        # Nothing else either: the release namespace holds only what Kubernetes puts in every
        # namespace (what the controller wrote at run time included), and nothing cluster-wide
        # carries the release's label.
        selector = f"app.kubernetes.io/instance={RELEASE}"
        for path in LISTED_PATHS:
            namespaced = "{ns}" in path
            query = [] if namespaced else [("labelSelector", selector)]
            found = await request_json(api_client, "GET", path.format(ns=ns), query=query)
            names = {i["metadata"]["name"] for i in found["items"]} - KUBERNETES_OWN
            assert not names, f"left after helm uninstall: {path}: {sorted(names)}"
        assert base64.b64decode(ca)  # the certificate was real, and is gone with its Secret
    finally:
        release.stop_pod()
        try:
            await client.RbacAuthorizationV1Api(api_client).delete_cluster_role_binding(f"scraper-{unique}")
        except ApiException as e:
            if e.status != 404:
                raise
        if installed:
            try:
                release.helm("uninstall", RELEASE, "--wait")
            except Exception as e:  # the test's own failure is the one to report
                print(f"cleanup: helm uninstall failed: {e}")
        try:
            await client.CoreV1Api(api_client).delete_namespace(release.namespace)
        except ApiException as e:
            if e.status != 404:
                raise
