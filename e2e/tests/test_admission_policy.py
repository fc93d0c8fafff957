"""The ValidatingAdmissionPolicy of manifests/base (issue 30 finding 8) on a real apiserver: with
the controller's own credentials (the ServiceAccount kubeconfig of e2e/rbac.py, which installs
the policy), a pod's image, labels or other gates cannot be changed, nor a suspended Job's
template beyond our gate, nor a Workload's spec, and only pods with our workload label can be
deleted; the ungater's real patch, the gate injection's, the stray-pod reaper's delete and the
admission's annotation and check-entry writes still go through, and the same image change by
someone else is not the policy's business."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio
from kubernetes_asyncio import client

from e2e.kube import as_body, content_type, eventually, new_api_client
from e2e.rbac import base_documents
from kueue_tas.api.constants import (
    KUEUE_GROUP,
    KUEUE_VERSION,
    SCHEDULING_GATE,
    TOPOLOGY_ASSIGNMENT_ANNOTATION,
    WORKLOAD_LABEL,
)
from kueue_tas.api.workload import Workload
from kueue_tas.controllers.check_entry_writes import KubeAdmissionWriter
from kueue_tas.controllers.stray.reconciler import KubePodDeleter
from kueue_tas.controllers.ungate.writes import KubePodPatcher, ungate_patch
from kueue_tas.kube.client import MERGE_PATCH, STRATEGIC_MERGE_PATCH, call_json, patch_pod, raw_kwargs
from kueue_tas.kube.errors import ApiError, Conflict

POLICY = "kueue-tas-controller-writes"
OTHER_GATE = "example.com/other"


def _policy_message(kind: str) -> str:
    (policy,) = [
        d for d in base_documents() if d["kind"] == "ValidatingAdmissionPolicy" and d["metadata"]["name"] == POLICY
    ]
    (message,) = [v["message"] for v in policy["spec"]["validations"] if kind in v["message"]]
    return str(message)


@pytest_asyncio.fixture(loop_scope="session")
async def sa_api(controller_kubeconfig: str) -> AsyncIterator[client.ApiClient]:
    api = await new_api_client(controller_kubeconfig)
    try:
        yield api
    finally:
        await api.close()


def _pod(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": "policy-probe"}},
        "spec": {
            "schedulingGates": [{"name": SCHEDULING_GATE}, {"name": OTHER_GATE}],
            "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10"}],
        },
    }


async def _refused(request: Any, message: str) -> str:
    with pytest.raises(ApiError) as refused:
        await request
    text = str(refused.value)
    assert refused.value.status in (403, 422) and POLICY in text and message in text, text
    return text


async def _policy_in_force(api: client.ApiClient, sa_api: client.ApiClient, namespace: str) -> None:
    """A new policy binding reaches the apiserver's admission through an informer: wait until a
    probe change is refused before trusting an "allowed"."""
    await client.CoreV1Api(api).create_namespaced_pod(namespace, as_body(_pod("probe")))

    async def refused() -> bool:
        try:
            await patch_pod(sa_api, namespace=namespace, name="probe", patch={"metadata": {"labels": {"x": "y"}}})
        except ApiError as exc:
            return POLICY in str(exc)
        # Allowed before the policy was in force: put it back (as the admin) and look again.
        await patch_pod(api, namespace=namespace, name="probe", patch={"metadata": {"labels": {"x": None}}})
        return False

    await eventually("the admission policy refuses the controller's label change", refused, timeout_s=30)


async def test_the_controller_can_ungate_a_pod_but_not_change_its_image(
    api_client: client.ApiClient, sa_api: client.ApiClient, namespace: str
) -> None:
    await _policy_in_force(api_client, sa_api, namespace)
    core = client.CoreV1Api(api_client)
    created = await core.create_namespaced_pod(namespace, as_body(_pod("gated")))
    pod_message = _policy_message("pod only")
    image = {"spec": {"containers": [{"name": "main", "image": "registry.k8s.io/pause:3.9"}]}}
    await _refused(patch_pod(sa_api, namespace=namespace, name="gated", patch=image, strategy="strategic"), pod_message)
    # Nor another controller's gate, nor the pod's labels.
    other_gate = {"spec": {"schedulingGates": [{"$patch": "delete", "name": OTHER_GATE}]}}
    await _refused(
        patch_pod(sa_api, namespace=namespace, name="gated", patch=other_gate, strategy="strategic"), pod_message
    )
    labels = {"metadata": {"labels": {"app": "stolen"}}}
    await _refused(patch_pod(sa_api, namespace=namespace, name="gated", patch=labels), "labels")
    # The ungater's own patch, sent by its own code, is allowed.
    selector = {"kubernetes.io/hostname": "policy-node"}
    await KubePodPatcher(sa_api).patch(
        namespace, "gated", ungate_patch(SCHEDULING_GATE, selector), created.metadata.resource_version
    )
    pod = await core.read_namespaced_pod("gated", namespace)
    assert [g.name for g in pod.spec.scheduling_gates] == [OTHER_GATE]
    assert pod.spec.node_selector == selector
    assert pod.spec.containers[0].image == "registry.k8s.io/pause:3.10"
    # The policy holds the controller only: an admin's image change is Kubernetes' own business.
    await core.patch_namespaced_pod("gated", namespace, as_body(image), **content_type(STRATEGIC_MERGE_PATCH))
    assert (await core.read_namespaced_pod("gated", namespace)).spec.containers[0].image.endswith(":3.9")
    with contextlib.suppress(client.ApiException):
        await core.delete_namespaced_pod("probe", namespace, grace_period_seconds=0)


async def test_the_controller_can_gate_a_jobs_template_but_not_rewrite_it(
    api_client: client.ApiClient, sa_api: client.ApiClient, namespace: str
) -> None:
    await _policy_in_force(api_client, sa_api, namespace)
    job: dict[str, Any] = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "policy-job"},
        "spec": {
            "suspend": True,
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10"}],
                }
            },
        },
    }
    await client.BatchV1Api(api_client).create_namespaced_job(namespace, as_body(job))
    batch = client.BatchV1Api(sa_api)
    job_message = _policy_message("Job only")
    # Kubernetes itself lets a suspended Job's template change only in its scheduling directives
    # (an image change is refused as immutable before any admission policy is asked): the policy
    # keeps even those, bar our gate, from the controller.
    for change in (
        {"nodeSelector": {"kubernetes.io/hostname": "chosen-by-a-thief"}},
        {"tolerations": [{"operator": "Exists"}]},
        {"schedulingGates": [{"name": OTHER_GATE}]},
    ):
        body = {"spec": {"template": {"spec": change}}}
        with pytest.raises(ApiError) as refused:
            await call_json(
                batch.patch_namespaced_job(
                    "policy-job", namespace, body, **raw_kwargs(30, _content_type=STRATEGIC_MERGE_PATCH)
                )
            )
        assert POLICY in str(refused.value) and job_message in str(refused.value), (change, str(refused.value))
    # Nor a TTL that would delete the Job, its pods and their logs the moment it finishes.
    ttl = {"spec": {"ttlSecondsAfterFinished": 0}}
    await _refused(
        call_json(
            batch.patch_namespaced_job("policy-job", namespace, ttl, **raw_kwargs(30, _content_type=MERGE_PATCH))
        ),
        job_message,
    )
    # What controllers/check_entry_writes.py inject_gates sends for a Job.
    gate = {"spec": {"template": {"spec": {"schedulingGates": [{"name": SCHEDULING_GATE}]}}}}
    await call_json(
        batch.patch_namespaced_job("policy-job", namespace, gate, **raw_kwargs(30, _content_type=STRATEGIC_MERGE_PATCH))
    )
    got = await client.BatchV1Api(api_client).read_namespaced_job("policy-job", namespace)
    assert [g.name for g in got.spec.template.spec.scheduling_gates] == [SCHEDULING_GATE]
    assert got.spec.template.spec.containers[0].image == "registry.k8s.io/pause:3.10"


async def test_the_controller_can_delete_only_the_pods_of_our_workloads(
    api_client: client.ApiClient, sa_api: client.ApiClient, namespace: str
) -> None:
    await _policy_in_force(api_client, sa_api, namespace)
    core = client.CoreV1Api(api_client)
    unlabelled = await core.create_namespaced_pod(namespace, as_body(_pod("unlabelled")))
    ours = _pod("ours")
    ours["metadata"]["labels"][WORKLOAD_LABEL] = "policy-workload-uid"
    labelled = await core.create_namespaced_pod(namespace, as_body(ours))
    # The stray-pod reaper's own request (controllers/stray/reconciler.py), with the controller's token.
    reaper = KubePodDeleter(sa_api)
    await _refused(reaper.delete(namespace, "unlabelled", unlabelled.metadata.uid), _policy_message("delete only"))
    assert (await core.read_namespaced_pod("unlabelled", namespace)).metadata.deletion_timestamp is None
    await reaper.delete(namespace, "ours", labelled.metadata.uid)

    async def gone_or_going() -> bool:
        try:
            pod = await core.read_namespaced_pod("ours", namespace)
        except client.ApiException as exc:
            return exc.status == 404
        return pod.metadata.deletion_timestamp is not None

    await eventually("the labelled pod is deleted", gone_or_going, timeout_s=30)
    with contextlib.suppress(client.ApiException):
        await core.delete_namespaced_pod("probe", namespace, grace_period_seconds=0)


async def test_the_controller_can_annotate_a_workload_but_not_change_its_spec(
    api_client: client.ApiClient, sa_api: client.ApiClient, namespace: str
) -> None:
    await _policy_in_force(api_client, sa_api, namespace)
    body: dict[str, Any] = {
        "apiVersion": f"{KUEUE_GROUP}/{KUEUE_VERSION}",
        "kind": "Workload",
        "metadata": {"name": "policy-wl", "namespace": namespace},
        "spec": {
            "queueName": "policy-no-such-queue",
            "podSets": [
                {
                    "name": "main",
                    "count": 1,
                    "template": {
                        "spec": {
                            "restartPolicy": "Never",
                            "containers": [
                                {
                                    "name": "main",
                                    "image": "registry.k8s.io/pause:3.10",
                                    "resources": {"requests": {"cpu": "1m"}},
                                }
                            ],
                        }
                    },
                }
            ],
        },
    }
    admin = client.CustomObjectsApi(api_client)
    created = await admin.create_namespaced_custom_object(KUEUE_GROUP, KUEUE_VERSION, namespace, "workloads", body)
    workload_message = _policy_message("Workload only")
    thief = client.CustomObjectsApi(sa_api)
    # spec.active: false would evict an admitted workload; the queue and labels are not ours either.
    for change in ({"spec": {"active": False}}, {"metadata": {"labels": {"stolen": "yes"}}}):
        await _refused(
            call_json(
                thief.patch_namespaced_custom_object(
                    KUEUE_GROUP,
                    KUEUE_VERSION,
                    namespace,
                    "workloads",
                    "policy-wl",
                    change,
                    **raw_kwargs(30, _content_type=MERGE_PATCH),
                )
            ),
            workload_message,
        )
    # What the admission writes (controllers/check_entry_writes.py), sent by its own code: the
    # annotation on the Workload, then our check entry applied to workloads/status.
    writer = KubeAdmissionWriter(sa_api)
    entry = {
        "name": "policy-check",
        "state": "Pending",
        "message": "policy probe",
        "lastTransitionTime": "2026-01-01T00:00:00Z",
    }

    async def written() -> bool:
        # Both writes are guarded by the resourceVersion, and Kueue's own status updates of the
        # (unqueueable) Workload may race them: a Conflict reads it again.
        current = await writer.read_workload(Workload.model_validate(created))
        assert current is not None
        try:
            annotated = await writer.write_annotation(current, '{"podSets": []}')
            await writer.write_check(annotated, entry)
        except Conflict:
            return False
        return True

    await eventually("the annotation and the check entry are written", written, timeout_s=30)
    got = await admin.get_namespaced_custom_object(KUEUE_GROUP, KUEUE_VERSION, namespace, "workloads", "policy-wl")
    assert got["metadata"]["annotations"][TOPOLOGY_ASSIGNMENT_ANNOTATION] == '{"podSets": []}'
    assert "stolen" not in (got["metadata"].get("labels") or {})
    assert got["spec"].get("active", True) is True
    checks = {c["name"]: c for c in got.get("status", {}).get("admissionChecks", [])}
    assert checks["policy-check"]["message"] == "policy probe"


RECORDS = "kueue-tas-records"


def _probe_workload(name: str, annotations: dict[str, str] | None = None) -> dict[str, Any]:
    container = {"name": "main", "image": "registry.k8s.io/pause:3.10", "resources": {"requests": {"cpu": "1m"}}}
    return {
        "apiVersion": f"{KUEUE_GROUP}/{KUEUE_VERSION}",
        "kind": "Workload",
        "metadata": {"name": name, **({"annotations": annotations} if annotations else {})},
        "spec": {
            "queueName": "none",
            "podSets": [
                {
                    "name": "main",
                    "count": 1,
                    "template": {"spec": {"restartPolicy": "Never", "containers": [container]}},
                }
            ],
        },
    }


async def test_only_the_controller_writes_its_records_on_a_workload(
    api_client: client.ApiClient, sa_api: client.ApiClient, namespace: str
) -> None:
    """Anyone else (here the cluster's admin) can neither create a Workload carrying a reservation
    nor add, change or remove one; the controller's own write of its records goes through."""
    await _policy_in_force(api_client, sa_api, namespace)
    admin = client.CustomObjectsApi(api_client)
    forged = {
        "kueue-tas.io/reservation": '{"flavor":"gpu","level":"rack","values":["r1"],"since":"2026-01-01T00:00:00Z"}'
    }

    async def refused_create() -> bool:
        try:
            await admin.create_namespaced_custom_object(
                KUEUE_GROUP, KUEUE_VERSION, namespace, "workloads", _probe_workload("forged", forged)
            )
        except client.ApiException as exc:
            assert RECORDS in str(exc.body), exc.body
            return True
        await admin.delete_namespaced_custom_object(KUEUE_GROUP, KUEUE_VERSION, namespace, "workloads", "forged")
        return False  # before the binding reached the apiserver's admission: try again

    await eventually("a Workload created with a reservation refused", refused_create, timeout_s=30)
    created = await admin.create_namespaced_custom_object(
        KUEUE_GROUP, KUEUE_VERSION, namespace, "workloads", _probe_workload("records-wl")
    )
    patch = {"metadata": {"annotations": forged}}
    with pytest.raises(client.ApiException) as refused:
        await admin.patch_namespaced_custom_object(
            KUEUE_GROUP, KUEUE_VERSION, namespace, "workloads", "records-wl", patch, **content_type(MERGE_PATCH)
        )
    assert RECORDS in str(refused.value.body)
    # The controller's own write (controllers/check_entry_writes.py write_marks) goes through.
    writer = KubeAdmissionWriter(sa_api)

    async def marked() -> bool:
        current = await writer.read_workload(Workload.model_validate(created))
        assert current is not None
        try:
            await writer.write_marks(current, {"kueue-tas.io/waiting-since": "2026-01-01T00:00:00Z"})
        except Conflict:
            return False
        return True

    await eventually("the controller records the wait's start", marked, timeout_s=30)
    # ... which nobody else may remove.
    with pytest.raises(client.ApiException) as removed:
        await admin.patch_namespaced_custom_object(
            KUEUE_GROUP,
            KUEUE_VERSION,
            namespace,
            "workloads",
            "records-wl",
            {"metadata": {"annotations": {"kueue-tas.io/waiting-since": None}}},
            **content_type(MERGE_PATCH),
        )
    assert RECORDS in str(removed.value.body)
