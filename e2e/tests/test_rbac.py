"""The ServiceAccount of manifests/base can do what kueue-tas does, and nothing it must not.

Checks go through the ServiceAccount's own kubeconfig (e2e/rbac.py): SelfSubjectAccessReviews
for the whole matrix, real requests for a few, and one real admission by ``kueue-tas run``
under that kubeconfig (its own controller name, so it touches no other test's objects).
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
import yaml
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from e2e.cluster_state import State
from e2e.demo import DEMO_POOL, DemoObjects
from e2e.kube import JOBSET_GROUP, JOBSET_VERSION, KUEUE_GROUP, KUEUE_VERSION, Kube, eventually, new_api_client
from e2e.nodes import GPU, POOL_LABEL, NodePool
from e2e.rbac import apply_document, base_documents, sample_documents, service_account_kubeconfig
from kueue_tas.api.constants import CONTROLLER_NAME

LEASE_NS = "kueue-tas-system"

# (verb, group, resource, namespaced) the controller's code paths need; see manifests/base/clusterrole.yaml.
NEEDED: list[tuple[str, str, str, bool]] = [
    *[(v, "", "nodes", False) for v in ("list", "watch")],
    *[(v, "", "pods", False) for v in ("list", "watch")],
    ("patch", "", "pods", True),
    ("delete", "", "pods", True),  # controllers/stray/reconciler.py
    *[(v, "apps", "daemonsets", False) for v in ("list", "watch")],
    *[
        (v, KUEUE_GROUP, r, False)
        for r in ("topologies", "resourceflavors", "clusterqueues", "admissionchecks", "localqueues")
        for v in ("list", "watch")
    ],
    ("patch", KUEUE_GROUP, "admissionchecks/status", False),
    *[(v, KUEUE_GROUP, "workloads", False) for v in ("list", "watch")],
    # The re-read that settles a write with an unknown outcome (found by the chaos campaign, seed 7).
    ("get", KUEUE_GROUP, "workloads", True),
    ("patch", KUEUE_GROUP, "workloads", True),
    ("patch", KUEUE_GROUP, "workloads/status", True),
    *[(v, "batch", "jobs", True) for v in ("get", "patch")],
    *[(v, JOBSET_GROUP, "jobsets", True) for v in ("get", "patch")],
    *[(v, "events.k8s.io", "events", True) for v in ("create", "patch")],
    # runtime/http_auth.py: who may read /metrics and the topology map.
    ("create", "authentication.k8s.io", "tokenreviews", False),
    ("create", "authorization.k8s.io", "subjectaccessreviews", False),
]
LEASES_NEEDED = ("get", "create", "update")
WEBHOOK_CERT = "kueue-tas-webhook-cert"
WEBHOOK_CONFIGURATION = "kueue-tas"
# The admission webhook's certificate (webhook/cert_keeper.py): (verb, group, resource, namespace, name).
NAMED_NEEDED: list[tuple[str, str, str, str | None, str]] = [
    ("get", "admissionregistration.k8s.io", "validatingwebhookconfigurations", None, WEBHOOK_CONFIGURATION),
    ("patch", "admissionregistration.k8s.io", "validatingwebhookconfigurations", None, WEBHOOK_CONFIGURATION),
    ("get", "admissionregistration.k8s.io", "mutatingwebhookconfigurations", None, WEBHOOK_CONFIGURATION),
    ("patch", "admissionregistration.k8s.io", "mutatingwebhookconfigurations", None, WEBHOOK_CONFIGURATION),
    ("get", "", "secrets", LEASE_NS, WEBHOOK_CERT),
    ("update", "", "secrets", LEASE_NS, WEBHOOK_CERT),
]

# (verb, group, resource[/subresource], namespace: "NS" = the test's, None = cluster-wide) that stay denied.
DENIED: list[tuple[str, str, str, str | None]] = [
    ("get", "", "secrets", "NS"),
    ("list", "", "secrets", None),
    ("get", "", "secrets", LEASE_NS),
    ("list", "", "secrets", LEASE_NS),
    ("create", "", "secrets", "NS"),
    ("create", "", "secrets", LEASE_NS),  # the manifests ship the webhook's Secret empty: fill only
    ("patch", "admissionregistration.k8s.io", "validatingwebhookconfigurations", None),
    ("create", "admissionregistration.k8s.io", "validatingwebhookconfigurations", None),
    ("patch", "admissionregistration.k8s.io", "mutatingwebhookconfigurations", None),
    ("create", "admissionregistration.k8s.io", "mutatingwebhookconfigurations", None),
    ("create", KUEUE_GROUP, "localqueues", "NS"),
    ("create", "", "pods", "NS"),
    ("update", "", "pods", "NS"),
    ("create", "", "pods/eviction", "NS"),
    ("patch", "", "pods/status", "NS"),  # stray pods are deleted, never marked Failed
    ("get", "", "nodes", None),
    ("patch", "", "nodes", None),
    ("update", "", "nodes", None),
    ("delete", "", "nodes", None),
    ("patch", "", "nodes/status", None),
    ("create", "", "events", "NS"),  # core/v1 Events: we write events.k8s.io/v1 only
    ("delete", "events.k8s.io", "events", "NS"),
    ("get", "", "configmaps", "NS"),
    ("create", "", "serviceaccounts/token", LEASE_NS),
    ("create", "coordination.k8s.io", "leases", "NS"),
    ("update", "coordination.k8s.io", "leases", "NS"),
    ("delete", "coordination.k8s.io", "leases", LEASE_NS),
    ("list", "coordination.k8s.io", "leases", LEASE_NS),
    ("update", KUEUE_GROUP, "workloads", "NS"),
    ("delete", KUEUE_GROUP, "workloads", "NS"),
    ("create", KUEUE_GROUP, "workloads", "NS"),
    ("update", KUEUE_GROUP, "workloads/status", "NS"),
    ("patch", KUEUE_GROUP, "clusterqueues", None),
    ("patch", KUEUE_GROUP, "topologies", None),
    ("patch", KUEUE_GROUP, "admissionchecks", None),
    ("delete", KUEUE_GROUP, "admissionchecks", None),
    ("create", "batch", "jobs", "NS"),
    ("delete", "batch", "jobs", "NS"),
    ("list", "batch", "jobs", None),
    ("delete", JOBSET_GROUP, "jobsets", "NS"),
    ("create", "rbac.authorization.k8s.io", "clusterrolebindings", None),
    ("escalate", "rbac.authorization.k8s.io", "clusterroles", None),
    ("bind", "rbac.authorization.k8s.io", "clusterroles", None),
    ("impersonate", "", "users", None),
    ("create", "apps", "deployments", LEASE_NS),
    ("patch", "apps", "daemonsets", "NS"),
    ("get", "apps", "daemonsets", "NS"),
]


def _attrs(verb: str, group: str, resource: str, namespace: str | None, name: str = "") -> dict[str, Any]:
    resource, _, sub = resource.partition("/")
    out: dict[str, Any] = {"verb": verb, "group": group, "resource": resource}
    if name:
        out["name"] = name
    if sub:
        out["subresource"] = sub
    if namespace is not None:
        out["namespace"] = namespace
    return out


async def _can(sa_api: client.ApiClient, attrs: dict[str, Any]) -> bool:
    body: Any = {"spec": {"resourceAttributes": attrs}}
    review = await client.AuthorizationV1Api(sa_api).create_self_subject_access_review(body)
    return bool(review.status.allowed)


async def _status(request: Any) -> int:
    try:
        await request
    except ApiException as e:
        return int(e.status)
    return 200


@pytest_asyncio.fixture(loop_scope="session")
async def sa_kubeconfig(api_client: client.ApiClient, cluster_state: State, tmp_path: Path) -> Path:
    return await service_account_kubeconfig(api_client, cluster_state.kubeconfig, tmp_path / "sa.kubeconfig")


@pytest_asyncio.fixture(loop_scope="session")
async def sa_api(sa_kubeconfig: Path) -> AsyncIterator[client.ApiClient]:
    api = await new_api_client(str(sa_kubeconfig))
    try:
        yield api
    finally:
        await api.close()


async def test_kubeconfig_authenticates_as_the_service_account(sa_kubeconfig: Path, sa_api: client.ApiClient) -> None:
    assert sa_kubeconfig.stat().st_mode & 0o077 == 0, "a token file must not be readable by others"
    body: Any = {}
    review = await client.AuthenticationV1Api(sa_api).create_self_subject_review(body)
    assert review.status.user_info.username == "system:serviceaccount:kueue-tas-system:kueue-tas"


async def test_everything_the_controller_does_is_allowed(sa_api: client.ApiClient, namespace: str) -> None:
    missing = []
    for verb, group, resource, namespaced in NEEDED:
        attrs = _attrs(verb, group, resource, namespace if namespaced else None)
        if not await _can(sa_api, attrs):
            missing.append(attrs)
    for verb in LEASES_NEEDED:
        attrs = _attrs(verb, "coordination.k8s.io", "leases", LEASE_NS)
        if not await _can(sa_api, attrs):
            missing.append(attrs)
    for verb, group, resource, ns, name in NAMED_NEEDED:
        attrs = _attrs(verb, group, resource, ns, name)
        if not await _can(sa_api, attrs):
            missing.append(attrs)
    # Events about cluster-scoped objects (AdmissionChecks) go to "default".
    if not await _can(sa_api, _attrs("create", "events.k8s.io", "events", "default")):
        missing.append({"verb": "create", "resource": "events", "namespace": "default"})
    assert not missing, f"denied to the kueue-tas ServiceAccount: {missing}"


async def test_every_granted_rule_is_needed() -> None:
    """The manifests grant nothing beyond NEEDED (so this list and the ClusterRole stay in step)."""
    needed = {(v, g, r) for v, g, r, _ in NEEDED} | {(v, g, r) for v, g, r, ns, _ in NAMED_NEEDED if ns is None}
    (role,) = [d for d in base_documents() if d["kind"] == "ClusterRole" and d["metadata"]["name"] == "kueue-tas"]
    granted = {
        (v, g, r) for rule in role["rules"] for g in rule["apiGroups"] for r in rule["resources"] for v in rule["verbs"]
    }
    assert granted == needed
    roles = [d for d in base_documents() if d["kind"] == "Role"]
    in_namespace = {
        (v, g, r, LEASE_NS, name)
        for role in roles
        for rule in role["rules"]
        if rule["resources"] != ["leases"]
        for g in rule["apiGroups"]
        for r in rule["resources"]
        for v in rule["verbs"]
        for name in rule.get("resourceNames") or [""]
    }
    assert in_namespace == {n for n in NAMED_NEEDED if n[3] is not None}


async def test_nothing_else_is_allowed(sa_api: client.ApiClient, namespace: str) -> None:
    allowed = []
    for verb, group, resource, ns in DENIED:
        attrs = _attrs(verb, group, resource, namespace if ns == "NS" else ns)
        if await _can(sa_api, attrs):
            allowed.append(attrs)
    assert not allowed, f"the kueue-tas ServiceAccount may do more than it needs: {allowed}"


async def test_real_requests(sa_api: client.ApiClient, api_client: client.ApiClient, namespace: str) -> None:
    core = client.CoreV1Api(sa_api)
    await core.list_node(limit=1)
    await core.list_pod_for_all_namespaces(limit=1)
    await client.CustomObjectsApi(sa_api).list_cluster_custom_object(KUEUE_GROUP, KUEUE_VERSION, "workloads", limit=1)

    event: Any = {
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "metadata": {"name": f"rbac-probe.{uuid.uuid4().hex[:8]}", "namespace": namespace},
        "regarding": {"apiVersion": "v1", "kind": "Pod", "name": "rbac-probe", "namespace": namespace},
        "reason": "RbacProbe",
        "note": "e2e RBAC probe",
        "type": "Normal",
        "action": "Probe",
        "eventTime": "2026-01-01T00:00:00.000000Z",
        "reportingController": "kueue-tas.io/topology",
        "reportingInstance": "e2e",
    }
    events = client.EventsV1Api(sa_api)
    await events.create_namespaced_event(namespace, event)
    # What EventRecorder does on a repeat (the note itself is immutable).
    series: Any = {"series": {"count": 2, "lastObservedTime": "2026-01-01T00:00:01.000000Z"}}
    merge: Any = {"_content_type": "application/merge-patch+json"}  # a keyword the stubs do not declare
    await events.patch_namespaced_event(event["metadata"]["name"], namespace, series, **merge)

    co = client.CoordinationV1Api(sa_api)
    name = f"rbac-probe-{uuid.uuid4().hex[:8]}"
    lease: Any = {"metadata": {"name": name, "namespace": LEASE_NS}, "spec": {"holderIdentity": "e2e"}}
    try:
        created = await co.create_namespaced_lease(LEASE_NS, lease)
        got = await co.read_namespaced_lease(name, LEASE_NS)
        assert got.metadata.resource_version == created.metadata.resource_version
        got.spec.holder_identity = "e2e-2"
        await co.replace_namespaced_lease(name, LEASE_NS, got)
        assert await _status(co.delete_namespaced_lease(name, LEASE_NS)) == 403
    finally:
        with contextlib.suppress(ApiException):
            await client.CoordinationV1Api(api_client).delete_namespaced_lease(name, LEASE_NS)

    other: Any = {"metadata": {"name": name, "namespace": namespace}, "spec": {}}
    assert await _status(co.create_namespaced_lease(namespace, other)) == 403
    assert await _status(core.read_namespaced_secret("anything", namespace)) == 403
    assert await _status(core.read_namespaced_secret("anything", LEASE_NS)) == 403  # only its own
    assert await _status(core.list_secret_for_all_namespaces(limit=1)) == 403
    # Authorization comes before lookup: no such pod or node is needed to be refused.
    assert await _status(core.delete_node("anything")) == 403
    # Pods may be deleted (stray pods outside their assignment): authorised, so the lookup answers.
    assert await _status(core.delete_namespaced_pod("anything", namespace)) == 404
    assert await _status(core.patch_node("anything", {"metadata": {"labels": {"x": "y"}}})) == 403


async def test_manifests_validate_on_the_apiserver(api_client: client.ApiClient) -> None:
    """Every base and sample object passes the API server's validation and Kueue's webhooks (dry run)."""
    for doc in [*base_documents(), *sample_documents()]:
        await apply_document(api_client, doc, dry_run=True)


def test_samples_use_the_demo_names() -> None:
    """`make demo` applies manifests/samples as they are, on the demo pool's nodes."""
    names = DemoObjects()
    docs = {d["kind"]: d for d in sample_documents()}
    assert docs["Topology"]["metadata"]["name"] == names.topology
    assert [lv["nodeLabel"] for lv in docs["Topology"]["spec"]["levels"]] == DEMO_POOL.level_labels()
    assert docs["ResourceFlavor"]["metadata"]["name"] == names.flavor
    assert docs["ResourceFlavor"]["spec"]["nodeLabels"] == {POOL_LABEL: DEMO_POOL.name}
    assert docs["AdmissionCheck"]["metadata"]["name"] == names.admission_check
    assert docs["AdmissionCheck"]["spec"]["controllerName"] == CONTROLLER_NAME
    assert docs["ClusterQueue"]["metadata"]["name"] == names.cluster_queue
    assert docs["LocalQueue"]["metadata"]["name"] == names.local_queue
    assert docs["LocalQueue"]["metadata"]["namespace"] == names.namespace


# ---- the controller itself, under the ServiceAccount -----------------------------------------


async def _start_controller(
    tmp_path: Path, kubeconfig: Path, controller_name: str, lease_name: str
) -> asyncio.subprocess.Process:
    config = tmp_path / "config.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "controller_name": controller_name,
                "lease_name": lease_name,
                "health_bind": "127.0.0.1:0",
                "metrics_bind": "0",
                "log_format": "json",
            }
        )
    )
    log = (tmp_path / "controller.log").open("wb")
    try:
        return await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "kueue_tas.cli.main",
            "run",
            "--config",
            str(config),
            "--kubeconfig",
            str(kubeconfig),
            stdout=log,
            stderr=asyncio.subprocess.STDOUT,
        )
    finally:
        log.close()


async def _stop(proc: asyncio.subprocess.Process) -> None:
    if proc.returncode is None:
        proc.terminate()
        try:
            await asyncio.wait_for(proc.wait(), 20)
        except TimeoutError:
            proc.kill()
            await proc.wait()


def _check_state(wl: dict[str, Any], check: str) -> str | None:
    for st in (wl.get("status") or {}).get("admissionChecks") or []:
        if st.get("name") == check:
            return str(st.get("state"))
    return None


async def test_controller_admits_under_service_account(
    kube: Kube, namespace: str, sa_kubeconfig: Path, tmp_path: Path, unique: str
) -> None:
    """Every write path (check Active, gate into a Job and a JobSet, annotation, check entry,
    Events, the ungater's pod patches) succeeds with the manifests' RBAC: a 403 anywhere stalls it."""
    controller_name = f"kueue-tas.io/rbac-{unique}"
    pool = NodePool(
        name=f"rbac-{unique}",
        blocks=1,
        racks_per_block=2,
        hosts_per_rack=2,
        allocatable={"cpu": "16", "memory": "64Gi", "pods": "110", GPU: "8"},
    )
    await kube.create_nodes(pool)
    topo, flavor, check, cq = f"rbac-{unique}", f"rbac-{unique}", f"rbac-{unique}", f"rbac-{unique}"
    await kube.create_topology(topo, pool.level_labels())
    await kube.create_resource_flavor(flavor, {POOL_LABEL: pool.name})
    await kube.create_admission_check(
        check, controller_name, {"apiGroup": KUEUE_GROUP, "kind": "Topology", "name": topo}
    )
    await kube.create_cluster_queue(
        cq,
        {flavor: {"cpu": "64", "memory": "256Gi", GPU: "32"}},
        admission_checks=[{"name": check, "onFlavors": [flavor]}],
    )
    await kube.create_local_queue(namespace, "lq", cq)

    lease_name = f"rbac-{unique}"
    proc = await _start_controller(tmp_path, sa_kubeconfig, controller_name, lease_name)
    try:
        await kube.wait_cluster_queue_active(cq, 60)  # needs our Active condition on the check

        # 2 pods of 8 GPUs on 8-GPU hosts: two domains, so the gate goes into the template.
        container = {
            "name": "c",
            "image": "registry.k8s.io/pause:3.10",
            "resources": {"requests": {"cpu": "1", GPU: "8"}, "limits": {GPU: "8"}},
        }
        pod_template = {
            "metadata": {"annotations": {"kueue-tas.io/podset-unconstrained-topology": "true"}},
            "spec": {"restartPolicy": "Never", "containers": [container]},
        }
        job: Any = {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": "job", "namespace": namespace, "labels": {"kueue.x-k8s.io/queue-name": "lq"}},
            "spec": {"suspend": True, "parallelism": 2, "completions": 2, "template": pod_template},
        }
        jobset = {
            "apiVersion": f"{JOBSET_GROUP}/{JOBSET_VERSION}",
            "kind": "JobSet",
            "metadata": {"name": "js", "namespace": namespace, "labels": {"kueue.x-k8s.io/queue-name": "lq"}},
            "spec": {
                "suspend": True,
                "replicatedJobs": [
                    {
                        "name": "w",
                        "replicas": 1,
                        "template": {"spec": {"parallelism": 2, "completions": 2, "template": pod_template}},
                    }
                ],
            },
        }
        await kube.batch.create_namespaced_job(namespace, job)
        await kube.custom.create_namespaced_custom_object(JOBSET_GROUP, JOBSET_VERSION, namespace, "jobsets", jobset)

        async def both_ready() -> list[dict[str, Any]] | None:
            wls = await kube.workloads(namespace)
            done = [w for w in wls if _check_state(w, check) == "Ready"]
            return done if len(done) == 2 else None

        try:
            workloads = await eventually("both workloads Ready under the ServiceAccount", both_ready, 90)
        except TimeoutError:
            log = (tmp_path / "controller.log").read_text(errors="replace")
            pytest.fail(f"not admitted; controller log tail:\n{log[-4000:]}")
        for wl in workloads:
            assert "kueue-tas.io/topology-assignment" in wl["metadata"]["annotations"]

        got_job = await kube.batch.read_namespaced_job("job", namespace)
        assert [g.name for g in got_job.spec.template.spec.scheduling_gates or []] == ["kueue-tas.io/topology"]
        got_js = await kube.custom.get_namespaced_custom_object(
            JOBSET_GROUP, JOBSET_VERSION, namespace, "jobsets", "js"
        )
        js_spec = got_js["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
        assert js_spec["schedulingGates"] == [{"name": "kueue-tas.io/topology"}]

        async def events() -> list[Any] | None:
            # Raw dicts: the generated model rejects core/v1 Events (Kueue's) that have no eventTime.
            listed = await kube.custom.list_namespaced_custom_object("events.k8s.io", "v1", namespace, "events")
            ours = [e for e in listed["items"] if e.get("reason") == "TopologyAssigned"]
            return ours if len(ours) == 2 else None

        await eventually("TopologyAssigned events", events, 30)

        async def ungated() -> bool:
            # The ungater's pod patch (gate out, nodeSelector in) also runs under the ServiceAccount.
            pods = (await kube.core.list_namespaced_pod(namespace)).items
            return len(pods) == 4 and all(not p.spec.scheduling_gates and p.spec.node_name for p in pods)

        await eventually("all 4 pods ungated and bound", ungated, 60)
    finally:
        await _stop(proc)
        with contextlib.suppress(ApiException):
            await client.CoordinationV1Api(kube.api).delete_namespaced_lease(lease_name, LEASE_NS)
    log = (tmp_path / "controller.log").read_text(errors="replace")
    assert "Forbidden" not in log and " 403" not in log, log[-4000:]
