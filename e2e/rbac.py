"""Run kueue-tas in tests under exactly the RBAC of ``manifests/base``.

:func:`service_account_kubeconfig` applies the base's Namespace, ServiceAccount and RBAC objects
(server-side apply, so repeated and concurrent calls converge), asks the TokenRequest API for a
token of that ServiceAccount, and writes a kubeconfig that reaches the same API server as the
admin one but authenticates as the ServiceAccount. A controller started with it gets a 403 for
any request the manifests do not grant, so a missing permission fails the e2e test that needs it.

The base is read with PyYAML (no kustomize binary): :func:`base_documents` follows the
``resources`` of ``manifests/base/kustomization.yaml`` and applies its ``images`` entries, which
is all the base uses.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Final

import yaml
from kubernetes_asyncio import client

from kueue_tas.kube.client import APPLY_PATCH, request_json
from kueue_tas.kube.errors import NotFound

REPO_ROOT: Final = Path(__file__).resolve().parent.parent
MANIFESTS_DIR: Final = REPO_ROOT / "manifests"
BASE_DIR: Final = MANIFESTS_DIR / "base"
SAMPLES_DIR: Final = MANIFESTS_DIR / "samples"

FIELD_MANAGER: Final = "kueue-tas-e2e"
DEFAULT_TOKEN_SECONDS: Final = 6 * 3600
RBAC_PROPAGATION_S: Final = 30.0

# What service_account_kubeconfig installs, in this order (a binding's subject must exist first):
# the identity, its RBAC, the empty webhook-certificate Secret it may only fill (no create), and the
# ValidatingAdmissionPolicy that narrows what it may change, so every e2e controller runs under it.
IDENTITY_KINDS: Final = (
    "Namespace",
    "ServiceAccount",
    "ClusterRole",
    "ClusterRoleBinding",
    "Role",
    "RoleBinding",
    "Secret",
    "ValidatingAdmissionPolicy",
    "ValidatingAdmissionPolicyBinding",
)

# kind -> (URL prefix of its group/version, plural, namespaced) for every kind in manifests/.
_RESOURCES: Final[dict[str, tuple[str, str, bool]]] = {
    "Namespace": ("/api/v1", "namespaces", False),
    "ServiceAccount": ("/api/v1", "serviceaccounts", True),
    "ConfigMap": ("/api/v1", "configmaps", True),
    "Secret": ("/api/v1", "secrets", True),
    "Lease": ("/apis/coordination.k8s.io/v1", "leases", True),
    "Service": ("/api/v1", "services", True),
    "ClusterRole": ("/apis/rbac.authorization.k8s.io/v1", "clusterroles", False),
    "ClusterRoleBinding": ("/apis/rbac.authorization.k8s.io/v1", "clusterrolebindings", False),
    "Role": ("/apis/rbac.authorization.k8s.io/v1", "roles", True),
    "RoleBinding": ("/apis/rbac.authorization.k8s.io/v1", "rolebindings", True),
    "Deployment": ("/apis/apps/v1", "deployments", True),
    "NetworkPolicy": ("/apis/networking.k8s.io/v1", "networkpolicies", True),
    "ValidatingWebhookConfiguration": (
        "/apis/admissionregistration.k8s.io/v1",
        "validatingwebhookconfigurations",
        False,
    ),
    "MutatingWebhookConfiguration": (
        "/apis/admissionregistration.k8s.io/v1",
        "mutatingwebhookconfigurations",
        False,
    ),
    "ValidatingAdmissionPolicy": ("/apis/admissionregistration.k8s.io/v1", "validatingadmissionpolicies", False),
    "ValidatingAdmissionPolicyBinding": (
        "/apis/admissionregistration.k8s.io/v1",
        "validatingadmissionpolicybindings",
        False,
    ),
    "Job": ("/apis/batch/v1", "jobs", True),
    "JobSet": ("/apis/jobset.x-k8s.io/v1alpha2", "jobsets", True),
    "Topology": ("/apis/kueue.x-k8s.io/v1beta2", "topologies", False),
    "ResourceFlavor": ("/apis/kueue.x-k8s.io/v1beta2", "resourceflavors", False),
    "AdmissionCheck": ("/apis/kueue.x-k8s.io/v1beta2", "admissionchecks", False),
    "ClusterQueue": ("/apis/kueue.x-k8s.io/v1beta2", "clusterqueues", False),
    "LocalQueue": ("/apis/kueue.x-k8s.io/v1beta2", "localqueues", True),
}


# ---- reading the manifests ----------------------------------------------------------------------


def kustomization(directory: Path) -> dict[str, Any]:
    data = yaml.safe_load((directory / "kustomization.yaml").read_text(encoding="utf-8"))
    if not isinstance(data, dict):
        raise ValueError(f"{directory}/kustomization.yaml is not a mapping")
    return data


def load_documents(directory: Path) -> list[dict[str, Any]]:
    """The objects of every ``resources`` file of ``directory``'s kustomization, in order."""
    docs: list[dict[str, Any]] = []
    for name in kustomization(directory).get("resources") or []:
        path = directory / str(name)
        for doc in yaml.safe_load_all(path.read_text(encoding="utf-8")):
            if doc is None:
                continue
            if not isinstance(doc, dict) or "kind" not in doc:
                raise ValueError(f"{path}: every document must be a Kubernetes object")
            docs.append(doc)
    return docs


def _split_image(image: str) -> tuple[str, str]:
    """``name[:tag][@digest]`` -> (name, rest with its separator); a ':' in a registry port is not a tag."""
    if "@" in image:
        name, digest = image.split("@", 1)
        return name, "@" + digest
    slash = image.rfind("/")
    colon = image.rfind(":")
    if colon > slash:
        return image[:colon], image[colon:]
    return image, ""


def set_images(docs: Iterable[dict[str, Any]], images: Iterable[dict[str, Any]]) -> None:
    """kustomize's ``images`` transformer for the pod templates of Deployments (in place)."""
    rules = {str(rule["name"]): rule for rule in images}
    for doc in docs:
        if doc.get("kind") != "Deployment":
            continue
        pod_spec = doc["spec"]["template"]["spec"]
        for container in [*pod_spec.get("initContainers", []), *pod_spec.get("containers", [])]:
            name, suffix = _split_image(str(container["image"]))
            rule = rules.get(name)
            if rule is None:
                continue
            name = str(rule.get("newName") or name)
            if rule.get("digest"):
                suffix = "@" + str(rule["digest"])
            elif rule.get("newTag"):
                suffix = ":" + str(rule["newTag"])
            container["image"] = name + suffix


def base_documents() -> list[dict[str, Any]]:
    """``manifests/base`` as ``kustomize build`` renders it (resources in order, images set)."""
    docs = load_documents(BASE_DIR)
    set_images(docs, kustomization(BASE_DIR).get("images") or [])
    return docs


def sample_documents() -> list[dict[str, Any]]:
    return load_documents(SAMPLES_DIR)


# ---- applying -----------------------------------------------------------------------------------


def object_path(doc: dict[str, Any]) -> str:
    kind = str(doc.get("kind"))
    if kind not in _RESOURCES:
        raise ValueError(f"no REST mapping for kind {kind!r} (add it to e2e/rbac.py _RESOURCES)")
    prefix, plural, namespaced = _RESOURCES[kind]
    meta = doc["metadata"]
    if namespaced:
        namespace = meta.get("namespace")
        if not namespace:
            raise ValueError(f"{kind} {meta['name']} must set metadata.namespace")
        return f"{prefix}/namespaces/{namespace}/{plural}/{meta['name']}"
    return f"{prefix}/{plural}/{meta['name']}"


async def apply_document(api: client.ApiClient, doc: dict[str, Any], *, dry_run: bool = False) -> dict[str, Any]:
    """Server-side apply of one object as :data:`FIELD_MANAGER` (forced: the manifests win)."""
    query = [("fieldManager", FIELD_MANAGER), ("force", "true")]
    if dry_run:
        query.append(("dryRun", "All"))
    return await request_json(api, "PATCH", object_path(doc), query=query, body=doc, content_type=APPLY_PATCH)


async def reset_webhook_secret(api: client.ApiClient) -> None:
    """The webhook certificate's Secret back to the base's empty one (admin ``api``): a test that
    wants a certificate issued by its own controllers starts from what an install ships."""
    (secret,) = [d for d in base_documents() if d["kind"] == "Secret"]
    with contextlib.suppress(NotFound):
        await request_json(api, "DELETE", object_path(secret))
    await apply_document(api, secret)


def service_account_user(namespace: str, service_account: str) -> str:
    return f"system:serviceaccount:{namespace}:{service_account}"


def _sa_groups(user: str) -> list[str]:
    namespace = user.split(":")[2]
    return ["system:serviceaccounts", f"system:serviceaccounts:{namespace}", "system:authenticated"]


async def _allowed(api: client.ApiClient, user: str, attributes: dict[str, Any]) -> bool:
    body: Any = {"spec": {"user": user, "groups": _sa_groups(user), "resourceAttributes": attributes}}
    review = await client.AuthorizationV1Api(api).create_subject_access_review(body)
    return bool(review.status.allowed)


def _probe_attributes(docs: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """One request per Role/ClusterRole of the base: allowed once the authorizer has its binding."""
    probes = []
    for doc in docs:
        if doc["kind"] not in ("Role", "ClusterRole") or not doc.get("rules"):
            continue
        rule = doc["rules"][0]
        if not rule.get("resources"):
            continue  # the readers' roles (URLs only), bound to no one here
        resource, _, subresource = str(rule["resources"][0]).partition("/")
        attrs = {"group": rule["apiGroups"][0], "resource": resource, "verb": rule["verbs"][0]}
        if subresource:
            attrs["subresource"] = subresource
        if rule.get("resourceNames"):
            attrs["name"] = rule["resourceNames"][0]
        if doc["kind"] == "Role":
            attrs["namespace"] = doc["metadata"]["namespace"]
        probes.append(attrs)
    return probes


async def wait_rbac_effective(api: client.ApiClient, user: str, docs: list[dict[str, Any]]) -> None:
    """Until the authorizer allows ``user`` one request of each Role/ClusterRole in ``docs``."""
    # The RBAC authorizer reads bindings through informers, so a fresh binding takes a moment.
    deadline = time.monotonic() + RBAC_PROPAGATION_S
    for attrs in _probe_attributes(docs):
        while not await _allowed(api, user, attrs):
            if time.monotonic() > deadline:
                raise TimeoutError(f"RBAC for {user} not effective after {RBAC_PROPAGATION_S:.0f}s: {attrs}")
            await asyncio.sleep(0.2)


# ---- kubeconfig ---------------------------------------------------------------------------------


def _admin_cluster(admin_kubeconfig: str) -> dict[str, Any]:
    """The cluster entry of the admin kubeconfig's current context, CA path made absolute."""
    path = Path(admin_kubeconfig)
    cfg = yaml.safe_load(path.read_text(encoding="utf-8"))
    contexts = {c["name"]: c["context"] for c in cfg.get("contexts") or []}
    clusters = {c["name"]: c["cluster"] for c in cfg.get("clusters") or []}
    current = cfg.get("current-context") or next(iter(contexts), None)
    if current is None or current not in contexts:
        raise ValueError(f"{path}: no current context")
    cluster = dict(clusters[contexts[current]["cluster"]])
    ca = cluster.get("certificate-authority")
    if ca and not Path(ca).is_absolute():
        cluster["certificate-authority"] = str((path.parent / ca).resolve())
    return cluster


def admin_cluster(admin_kubeconfig: str) -> dict[str, Any]:
    """The cluster entry (server, CA) of the admin kubeconfig's current context."""
    return _admin_cluster(admin_kubeconfig)


def write_token_kubeconfig(out_path: Path, cluster: dict[str, Any], user: str, token: str) -> Path:
    cfg = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "kueue-tas-e2e", "cluster": cluster}],
        "users": [{"name": user, "user": {"token": token}}],
        "contexts": [{"name": "kueue-tas", "context": {"cluster": "kueue-tas-e2e", "user": user}}],
        "current-context": "kueue-tas",
    }
    out_path.parent.mkdir(parents=True, exist_ok=True)
    # The file holds a bearer token: never readable by others, not even for a moment.
    fd = os.open(out_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        yaml.safe_dump(cfg, f, sort_keys=False)
    out_path.chmod(0o600)
    return out_path


def set_policy_gate(policy: dict[str, Any], gate: str) -> None:
    """The admission policy's ``gate`` variable set to ``gate`` (a CEL string literal)."""
    if not re.fullmatch(r"[A-Za-z0-9./_-]+", gate):
        raise ValueError(f"scheduling gate {gate!r}: not a gate name the policy can quote")
    (variable,) = [v for v in policy["spec"]["variables"] if v["name"] == "gate"]
    variable["expression"] = f"'{gate}'"


async def service_account_kubeconfig(
    api: client.ApiClient,
    admin_kubeconfig: str,
    out_path: Path,
    *,
    namespace: str = "kueue-tas-system",
    service_account: str = "kueue-tas",
    expiration_seconds: int = DEFAULT_TOKEN_SECONDS,
    scheduling_gate: str | None = None,
) -> Path:
    """Install the base's identity and RBAC with ``api`` (admin), then write a kubeconfig for
    ``namespace/service_account`` at ``out_path`` and return it. ``scheduling_gate``: the gate
    the controllers are configured with, written into the admission policy as the chart does
    from ``config.schedulingGate`` (the base names the default gate)."""
    docs = [d for d in base_documents() if d["kind"] in IDENTITY_KINDS]
    if scheduling_gate is not None:
        for doc in docs:
            gated = any(v["name"] == "gate" for v in doc["spec"].get("variables", []))
            if doc["kind"] == "ValidatingAdmissionPolicy" and gated:
                set_policy_gate(doc, scheduling_gate)
    docs.sort(key=lambda d: IDENTITY_KINDS.index(d["kind"]))
    sa = [d for d in docs if d["kind"] == "ServiceAccount" and d["metadata"]["name"] == service_account]
    if not sa or sa[0]["metadata"].get("namespace") != namespace:
        raise ValueError(f"manifests/base has no ServiceAccount {namespace}/{service_account}")
    for doc in docs:
        await apply_document(api, doc)
    user = service_account_user(namespace, service_account)
    await wait_rbac_effective(api, user, docs)
    body: Any = {"spec": {"expirationSeconds": expiration_seconds}}
    request = await client.CoreV1Api(api).create_namespaced_service_account_token(service_account, namespace, body)
    token = str(request.status.token)
    return write_token_kubeconfig(out_path, _admin_cluster(admin_kubeconfig), user, token)
