"""manifests/, Dockerfile and .dockerignore, checked without a cluster.

The e2e side (e2e/tests/test_rbac.py) proves the RBAC on a real API server; here: the files
exist and parse, RBAC is least privilege and pinned, the Deployment matches the controller's
settings, and the samples are placed by the controller's own planner on the demo topology.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from manifest_files import (
    BASE,
    NAMESPACE,
    REPO,
    SAMPLES,
    config,
    demo_nodes,
    documents,
    kustomization,
    one,
    reader_rules_by_role,
    served_paths,
)

from kueue_tas.api import constants as c
from kueue_tas.api.kinds import KubeObject, parse_object
from kueue_tas.cli.planner import Planner
from kueue_tas.runtime.config import Settings, parse_bind
from kueue_tas.webhook.server import POD_GATE_PATH

IMAGE = "ghcr.io/kueue-tas/kueue-tas:0.1.0"
TOPOLOGY_ANNOTATIONS = tuple(
    c.DEFAULT_ANNOTATION_PREFIX + k
    for k in (
        "podset-required-topology",
        "podset-preferred-topology",
        "podset-unconstrained-topology",
        "podset-slice-required-topology",
    )
)

# The ClusterRole, rule by rule: (apiGroup, resource) -> verbs. A change here is a change of what
# kueue-tas may do in every namespace: each entry is justified in manifests/base/clusterrole.yaml.
EXPECTED_CLUSTER_RULES: dict[tuple[str, str], set[str]] = {
    ("", "nodes"): {"list", "watch"},
    ("", "pods"): {"list", "watch", "patch", "delete"},
    ("apps", "daemonsets"): {"list", "watch"},
    ("kueue.x-k8s.io", "topologies"): {"list", "watch"},
    ("kueue.x-k8s.io", "resourceflavors"): {"list", "watch"},
    ("kueue.x-k8s.io", "clusterqueues"): {"list", "watch"},
    ("kueue.x-k8s.io", "admissionchecks"): {"list", "watch"},
    ("kueue.x-k8s.io", "localqueues"): {"list", "watch"},
    ("kueue.x-k8s.io", "admissionchecks/status"): {"patch"},
    ("kueue.x-k8s.io", "workloads"): {"get", "list", "watch", "patch"},
    ("kueue.x-k8s.io", "workloads/status"): {"patch"},
    ("batch", "jobs"): {"get", "patch"},
    ("jobset.x-k8s.io", "jobsets"): {"get", "patch"},
    ("events.k8s.io", "events"): {"create", "patch"},
    ("authentication.k8s.io", "tokenreviews"): {"create"},
    ("authorization.k8s.io", "subjectaccessreviews"): {"create"},
}
# Rules limited to named objects: (apiGroup, resource) -> (names, verbs).
EXPECTED_NAMED_CLUSTER_RULES: dict[tuple[str, str], tuple[list[str], set[str]]] = {
    ("admissionregistration.k8s.io", "validatingwebhookconfigurations"): (["kueue-tas"], {"get", "patch"}),
    ("admissionregistration.k8s.io", "mutatingwebhookconfigurations"): (["kueue-tas"], {"get", "patch"}),
}


# ---- files ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("directory", [BASE, SAMPLES], ids=["base", "samples"])
def test_every_resource_exists_and_is_an_object(directory: Path) -> None:
    listed = kustomization(directory)["resources"]
    assert listed and len(listed) == len(set(listed))
    for name in listed:
        assert (directory / name).is_file(), f"{directory.name}/{name} is listed but missing"
        for doc in yaml.safe_load_all((directory / name).read_text()):
            assert {"apiVersion", "kind", "metadata"} <= set(doc), f"{name}: not a Kubernetes object"
            assert doc["metadata"].get("name"), f"{name}: {doc['kind']} has no name"
    on_disk = {p.name for p in directory.glob("*.yaml")} - {"kustomization.yaml"}
    assert on_disk == set(listed), "every manifest file is in the kustomization"


def test_base_kinds_and_namespace(base: list[dict[str, Any]]) -> None:
    kinds = sorted(d["kind"] for d in base)
    assert kinds == sorted(
        [
            "Namespace",
            "ServiceAccount",
            "ClusterRole",
            "ClusterRole",
            "ClusterRole",
            "ClusterRoleBinding",
            "Role",
            "RoleBinding",
            "ConfigMap",
            "Deployment",
            "Service",
            "Service",
            "Role",
            "RoleBinding",
            "ValidatingWebhookConfiguration",
            "MutatingWebhookConfiguration",
            "Secret",
            "ValidatingAdmissionPolicy",
            "ValidatingAdmissionPolicyBinding",
            "ValidatingAdmissionPolicy",  # our records on Workloads (issue 31)
            "ValidatingAdmissionPolicyBinding",
            "NetworkPolicy",
        ]
    )
    assert one(base, "Namespace")["metadata"]["name"] == NAMESPACE
    cluster_scoped = {
        "Namespace",
        "ClusterRole",
        "ClusterRoleBinding",
        "ValidatingWebhookConfiguration",
        "MutatingWebhookConfiguration",
        "ValidatingAdmissionPolicy",
        "ValidatingAdmissionPolicyBinding",
    }
    for doc in base:
        ns = doc["metadata"].get("namespace")
        assert ns == (None if doc["kind"] in cluster_scoped else NAMESPACE), f"{doc['kind']}: namespace {ns}"


# ---- RBAC ----------------------------------------------------------------------------------------


READER_ROLES = ("kueue-tas-metrics-reader", "kueue-tas-map-reader")


def _rules(base: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The rules of the controller's own roles (not the readers', which grant URLs only)."""
    return [
        r
        for d in base
        if d["kind"] in ("ClusterRole", "Role") and d["metadata"]["name"] not in READER_ROLES
        for r in d["rules"]
    ]


def test_reader_roles_grant_get_on_exactly_what_is_served(base: list[dict[str, Any]]) -> None:
    from kueue_tas.cli.map_server import PATHS

    served = served_paths()
    assert served == {"metrics-reader": {"/metrics"}, "map-reader": set(PATHS)}
    assert reader_rules_by_role(base) == served
    # Nobody is bound to them in the base: reading is granted deliberately, per reader.
    bound = {d["roleRef"]["name"] for d in base if d["kind"] in ("ClusterRoleBinding", "RoleBinding")}
    assert not bound & set(READER_ROLES)


def test_prometheus_scrapes_over_https_with_a_token_it_may_use() -> None:
    docs = documents(REPO / "manifests" / "prometheus")
    monitor = one(docs, "ServiceMonitor", "kueue-tas")
    (endpoint,) = monitor["spec"]["endpoints"]
    base_docs = documents(BASE)
    service = one(base_docs, "Service", "kueue-tas-metrics")
    assert monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    assert monitor["metadata"]["namespace"] == service["metadata"]["namespace"] == NAMESPACE
    assert endpoint["port"] == service["spec"]["ports"][0]["name"]
    assert (endpoint["scheme"], endpoint["path"]) == ("https", "/metrics")
    assert endpoint["bearerTokenFile"] == "/var/run/secrets/kubernetes.io/serviceaccount/token"
    assert endpoint["tlsConfig"] == {"insecureSkipVerify": True}  # the certificate is self-issued by default
    binding = one(docs, "ClusterRoleBinding", "kueue-tas-metrics-reader")
    assert binding["roleRef"]["name"] == "kueue-tas-metrics-reader"
    assert [s["kind"] for s in binding["subjects"]] == ["ServiceAccount"]


def test_no_wildcards_secrets_or_escalation(base: list[dict[str, Any]]) -> None:
    for rule in _rules(base):
        for key in ("apiGroups", "resources", "verbs"):
            assert "*" not in rule[key] and not any("*" in x for x in rule[key]), f"wildcard in {rule}"
        assert "nonResourceURLs" not in rule
        assert not {"escalate", "bind", "impersonate", "deletecollection"} & set(rule["verbs"]), rule
        # One delete only: controllers/stray/reconciler.py removes a pod its assignment has no slot for.
        if "delete" in rule["verbs"]:
            assert (rule["apiGroups"], rule["resources"]) == ([""], ["pods"]), rule
    for binding in (d for d in base if d["kind"] in ("ClusterRoleBinding", "RoleBinding")):
        assert binding["roleRef"]["name"] not in ("cluster-admin", "admin", "edit")
        assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "kueue-tas", "namespace": NAMESPACE}]


def test_secrets_only_the_webhook_certificate_in_our_namespace(base: list[dict[str, Any]]) -> None:
    settings = config(base)
    holders = [
        d
        for d in base
        if d["kind"] in ("ClusterRole", "Role")
        for r in d["rules"]
        if "secrets" in r.get("resources", [])
    ]
    assert {d["kind"] for d in holders} == {"Role"}
    role = one(base, "Role", "kueue-tas-webhook-cert")
    assert role["metadata"]["namespace"] == NAMESPACE == settings["webhook_namespace"]
    assert role["rules"] == [
        {
            "apiGroups": [""],
            "resources": ["secrets"],
            "resourceNames": [settings["webhook_secret"]],
            "verbs": ["get", "update"],
        },
        # no create: the manifests ship the Secret empty (tests/project/test_least_privilege.py)
    ]
    rb = one(base, "RoleBinding", "kueue-tas-webhook-cert")
    assert rb["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "kueue-tas-webhook-cert"}


def test_cluster_role_is_exactly_what_the_controller_uses(base: list[dict[str, Any]]) -> None:
    granted: dict[tuple[str, str], set[str]] = {}
    named: dict[tuple[str, str], tuple[list[str], set[str]]] = {}
    for rule in one(base, "ClusterRole", "kueue-tas")["rules"]:
        for group in rule["apiGroups"]:
            for resource in rule["resources"]:
                if "resourceNames" in rule:
                    named[(group, resource)] = (rule["resourceNames"], set(rule["verbs"]))
                else:
                    granted.setdefault((group, resource), set()).update(rule["verbs"])
    assert granted == EXPECTED_CLUSTER_RULES
    assert named == EXPECTED_NAMED_CLUSTER_RULES
    assert named[("admissionregistration.k8s.io", "validatingwebhookconfigurations")][0] == [
        config(base)["webhook_configuration"]
    ]
    crb = one(base, "ClusterRoleBinding")
    assert crb["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "ClusterRole",
        "name": "kueue-tas",
    }


def test_leases_only_in_own_namespace(base: list[dict[str, Any]]) -> None:
    role = one(base, "Role", "kueue-tas-leader-election")
    assert role["metadata"]["namespace"] == NAMESPACE
    assert role["rules"] == [
        {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["get", "create", "update"]}
    ]
    rb = one(base, "RoleBinding", "kueue-tas-leader-election")
    assert rb["metadata"]["namespace"] == NAMESPACE
    assert rb["roleRef"]["kind"] == "Role" and rb["roleRef"]["name"] == role["metadata"]["name"]
    assert all("leases" not in r["resources"] for r in one(base, "ClusterRole", "kueue-tas")["rules"])


# ---- Deployment, ConfigMap, Service --------------------------------------------------------------


def test_deployment_shape(deployment: dict[str, Any], manager: dict[str, Any]) -> None:
    spec = deployment["spec"]
    pod = spec["template"]["spec"]
    assert spec["replicas"] == 2
    assert pod["serviceAccountName"] == "kueue-tas"
    assert pod.get("automountServiceAccountToken", True) is True
    assert manager["image"] == IMAGE
    assert manager["args"] == ["run", "--config", "/etc/kueue-tas/config.yaml"]
    selector = spec["selector"]["matchLabels"]
    assert selector.items() <= spec["template"]["metadata"]["labels"].items()
    env = {e["name"]: e for e in manager["env"]}
    assert env["POD_NAME"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"
    resources = manager["resources"]
    assert {"cpu", "memory"} <= set(resources["requests"]) and "memory" in resources["limits"]
    terms = pod["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
    assert [t["podAffinityTerm"]["topologyKey"] for t in terms] == ["kubernetes.io/hostname"]
    assert terms[0]["podAffinityTerm"]["labelSelector"]["matchLabels"] == selector
    assert "requiredDuringSchedulingIgnoredDuringExecution" not in pod["affinity"]["podAntiAffinity"]


def test_security_context(deployment: dict[str, Any], manager: dict[str, Any]) -> None:
    pod_sc = deployment["spec"]["template"]["spec"]["securityContext"]
    sc = manager["securityContext"]
    assert pod_sc["runAsNonRoot"] is True and pod_sc["runAsUser"] != 0
    assert pod_sc["seccompProfile"] == {"type": "RuntimeDefault"}
    assert sc["runAsNonRoot"] is True
    assert sc["readOnlyRootFilesystem"] is True
    assert sc["allowPrivilegeEscalation"] is False
    assert sc["capabilities"] == {"drop": ["ALL"]}
    assert sc["seccompProfile"] == {"type": "RuntimeDefault"}
    assert "privileged" not in sc or sc["privileged"] is False


def test_dockerfile_user_matches_run_as_user(deployment: dict[str, Any]) -> None:
    user_lines = [ln.split()[1] for ln in (REPO / "Dockerfile").read_text().splitlines() if ln.startswith("USER ")]
    uid = int(user_lines[-1].split(":")[0])
    assert uid == deployment["spec"]["template"]["spec"]["securityContext"]["runAsUser"]


def test_probes_and_ports_match_settings(manager: dict[str, Any], base: list[dict[str, Any]]) -> None:
    defaults = Settings.model_fields
    health = parse_bind(str(defaults["health_bind"].default))
    metrics = parse_bind(str(defaults["metrics_bind"].default))
    assert health == (None, 8081) and metrics == (None, 8080)
    ports = {p["name"]: p["containerPort"] for p in manager["ports"]}
    webhook = parse_bind(config(base)["webhook_bind"])
    assert webhook == (None, 9443)
    assert ports == {"health": health[1], "metrics": metrics[1], "webhook": webhook[1]}
    assert manager["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "health"}
    assert manager["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "health"}


def test_config_map_loads_as_settings(
    base: list[dict[str, Any]],
    manager: dict[str, Any],
    deployment: dict[str, Any],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import os

    for var in list(os.environ):
        if var.upper().startswith("KUEUE_TAS_"):
            monkeypatch.delenv(var)
    cm = one(base, "ConfigMap")
    config_path = Path(manager["args"][manager["args"].index("--config") + 1])
    # The file the args name is the ConfigMap key, mounted where the args look for it.
    mount = next(m for m in manager["volumeMounts"] if Path(m["mountPath"]) == config_path.parent)
    volume = next(v for v in deployment["spec"]["template"]["spec"]["volumes"] if v["name"] == mount["name"])
    assert volume["configMap"]["name"] == cm["metadata"]["name"]
    assert config_path.name in cm["data"]

    path = tmp_path / config_path.name
    path.write_text(cm["data"][config_path.name])
    settings = Settings.load(path)
    assert settings.kubeconfig is None, "in the cluster: the ServiceAccount token"
    assert settings.lease_namespace == one(base, "Role", "kueue-tas-leader-election")["metadata"]["namespace"]
    assert settings.leader_election is True
    assert settings.controller_name == c.CONTROLLER_NAME
    assert (settings.health_bind, settings.metrics_bind) == (":8081", ":8080")
    # Every setting is spelled out, so the ConfigMap documents them all.
    assert set(yaml.safe_load(cm["data"][config_path.name])) == set(Settings.model_fields) - {"kubeconfig"}


def test_metrics_service(base: list[dict[str, Any]], deployment: dict[str, Any]) -> None:
    svc = one(base, "Service", "kueue-tas-metrics")
    assert svc["spec"]["selector"] == deployment["spec"]["selector"]["matchLabels"]
    assert svc["spec"]["ports"] == [{"name": "metrics", "port": 8080, "targetPort": "metrics", "protocol": "TCP"}]


def test_the_network_policy_opens_exactly_the_ports_the_controller_serves(
    base: list[dict[str, Any]], deployment: dict[str, Any], manager: dict[str, Any]
) -> None:
    """Port-scoped, as Kueue's: with a CNI that enforces it every other port of our pods is
    closed; no peer is named, since the API server and the kubelet call from their hosts."""
    policy = one(base, "NetworkPolicy")
    assert policy["spec"]["podSelector"] == deployment["spec"]["selector"]
    assert policy["spec"]["policyTypes"] == ["Ingress"]
    opened = [(p["port"], p["protocol"]) for rule in policy["spec"]["ingress"] for p in rule["ports"]]
    assert all(set(rule) == {"ports"} for rule in policy["spec"]["ingress"]), "scoped by port, not peer"
    assert sorted(opened) == sorted((p["name"], p["protocol"]) for p in manager["ports"])
    webhook = one(base, "Service", "kueue-tas-webhook")["spec"]["ports"][0]["targetPort"]
    assert (webhook, "TCP") in opened


def test_the_webhook_configuration_reaches_every_replica_and_never_blocks(
    base: list[dict[str, Any]], deployment: dict[str, Any]
) -> None:
    settings = config(base)
    vwc = one(base, "ValidatingWebhookConfiguration")
    assert vwc["metadata"]["name"] == settings["webhook_configuration"]
    (hook,) = vwc["webhooks"]
    assert hook["failurePolicy"] == "Ignore" and hook["sideEffects"] == "None"
    assert hook["admissionReviewVersions"] == ["v1"] and hook["timeoutSeconds"] <= 10
    target = hook["clientConfig"]["service"]
    assert "caBundle" not in hook["clientConfig"], "the controller writes it"
    assert (target["name"], target["namespace"], target["path"]) == (
        settings["webhook_service"],
        settings["webhook_namespace"],
        "/validate",
    )
    svc = one(base, "Service", target["name"])
    assert svc["spec"]["selector"] == deployment["spec"]["selector"]["matchLabels"]
    assert svc["spec"]["ports"] == [
        {"name": "webhook", "port": target["port"], "targetPort": "webhook", "protocol": "TCP"}
    ]
    covered = {
        (g, r, v)
        for rule in hook["rules"]
        for g in rule["apiGroups"]
        for r in rule["resources"]
        for v in rule["apiVersions"]
    }
    assert covered == {
        ("batch", "jobs", "v1"),
        ("jobset.x-k8s.io", "jobsets", "v1alpha2"),
        ("kueue.x-k8s.io", "workloads", "v1beta2"),
    }
    assert all(rule["operations"] == ["CREATE", "UPDATE"] for rule in hook["rules"])
    assert settings["webhook_namespace"] in hook["namespaceSelector"]["matchExpressions"][0]["values"]


def test_the_pod_webhook_sees_only_pods_labelled_gated_and_only_at_creation(base: list[dict[str, Any]]) -> None:
    """The label the check gives gated PodSets is what selects pods for the pod webhook; a wider
    selector would put every pod of the cluster behind a failurePolicy Fail webhook."""
    settings = config(base)
    mwc = one(base, "MutatingWebhookConfiguration")
    assert mwc["metadata"]["name"] == settings["webhook_configuration"]  # the name cert_keeper publishes into
    (hook,) = mwc["webhooks"]
    assert hook["objectSelector"] == {"matchLabels": {c.GATED_LABEL: c.GATED_LABEL_VALUE}}
    assert hook["failurePolicy"] == "Fail" and hook["sideEffects"] == "None"
    assert hook["rules"] == [
        {
            "apiGroups": [""],
            "apiVersions": ["v1"],
            "operations": ["CREATE"],
            "resources": ["pods"],
            "scope": "Namespaced",
        }
    ]
    assert hook["clientConfig"]["service"]["path"] == POD_GATE_PATH
    assert hook["clientConfig"]["service"]["name"] == settings["webhook_service"]
    assert "caBundle" not in hook["clientConfig"], "the controller writes it"
    assert settings["webhook_namespace"] in hook["namespaceSelector"]["matchExpressions"][0]["values"]


# ---- samples -------------------------------------------------------------------------------------


def _pod_templates(doc: dict[str, Any]) -> list[dict[str, Any]]:
    if doc["kind"] == "Job":
        return [doc["spec"]["template"]]
    return [rj["template"]["spec"]["template"] for rj in doc["spec"]["replicatedJobs"]]


def test_samples_are_a_consistent_setup(samples: list[dict[str, Any]]) -> None:
    # Names as e2e/demo.py DemoObjects (cross-checked against it in e2e/tests/test_rbac.py).
    topo, rf, ac, cq, lq = (
        one(samples, k) for k in ("Topology", "ResourceFlavor", "AdmissionCheck", "ClusterQueue", "LocalQueue")
    )
    assert [lv["nodeLabel"] for lv in topo["spec"]["levels"]] == [
        "cloud.provider.com/topology-block",
        "cloud.provider.com/topology-rack",
        "kubernetes.io/hostname",
    ]
    assert "topologyName" not in rf["spec"], "Kueue's own TAS must leave the flavor to kueue-tas"
    assert ac["spec"]["controllerName"] == c.CONTROLLER_NAME
    assert ac["spec"]["parameters"] == {
        "apiGroup": "kueue.x-k8s.io",
        "kind": "Topology",
        "name": topo["metadata"]["name"],
    }
    assert cq["spec"]["admissionChecksStrategy"]["admissionChecks"] == [
        {"name": ac["metadata"]["name"], "onFlavors": [rf["metadata"]["name"]]}
    ]
    assert [f["name"] for g in cq["spec"]["resourceGroups"] for f in g["flavors"]] == [rf["metadata"]["name"]]
    assert lq["metadata"]["namespace"] == "default" and lq["spec"]["clusterQueue"] == cq["metadata"]["name"]
    assert (
        topo["metadata"]["name"],
        rf["metadata"]["name"],
        ac["metadata"]["name"],
        cq["metadata"]["name"],
        lq["metadata"]["name"],
    ) == ("gpu-topology", "gpu", "kueue-tas", "gpu-cq", "gpu")


def test_sample_workloads_are_annotated(samples: list[dict[str, Any]]) -> None:
    levels = {lv["nodeLabel"] for lv in one(samples, "Topology")["spec"]["levels"]}
    lq = one(samples, "LocalQueue")
    jobset = one(samples, "JobSet")
    assert len(jobset["spec"]["replicatedJobs"]) == 2
    for doc in (one(samples, "Job"), jobset):
        assert doc["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == lq["metadata"]["name"]
        assert doc["metadata"]["namespace"] == lq["metadata"]["namespace"]
        for template in _pod_templates(doc):
            annotations = template["metadata"]["annotations"]
            ours = [k for k in annotations if k in TOPOLOGY_ANNOTATIONS]
            assert len(ours) == 1, f"{doc['metadata']['name']}: one topology annotation per pod template"
            if ours[0].endswith("-unconstrained-topology"):
                assert annotations[ours[0]] == "true"
            else:
                assert annotations[ours[0]] in levels
            assert annotations["pod-complete.stage.kwok.x-k8s.io/delay"]
    job_annotations = one(samples, "Job")["spec"]["template"]["metadata"]["annotations"]
    assert job_annotations[c.DEFAULT_ANNOTATION_PREFIX + "podset-required-topology"] == (
        "cloud.provider.com/topology-rack"
    )


def test_samples_fit_the_demo_cluster(samples: list[dict[str, Any]]) -> None:
    """The controller's own planner places both sample workloads, the Job inside one rack."""
    nodes = demo_nodes()
    objects: list[KubeObject] = [o for o in (parse_object(d) for d in [*nodes, *samples]) if o is not None]
    plans = {p.name: p for p in Planner(objects).run()}
    assert set(plans) == {"sample-rack-job", "sample-jobset"}
    assert all(p.fits for p in plans.values()), {n: [ps.message for ps in p.podsets] for n, p in plans.items()}
    rack_of = {n["metadata"]["name"]: n["metadata"]["labels"]["cloud.provider.com/topology-rack"] for n in nodes}
    (job_ps,) = plans["sample-rack-job"].podsets
    assert job_ps.assignment is not None and job_ps.assignment.total == 8
    assert job_ps.assignment.levels == ("kubernetes.io/hostname",)
    assert len({rack_of[d.values[0]] for d in job_ps.assignment.domains}) == 1
    assert [ps.count for ps in plans["sample-jobset"].podsets] == [1, 8]


# ---- Dockerfile ----------------------------------------------------------------------------------


def test_dockerfile_shape() -> None:
    lines = [ln.strip() for ln in (REPO / "Dockerfile").read_text().splitlines()]
    froms = [ln for ln in lines if ln.startswith("FROM ")]
    # Debian's python3 on the base (BASE_IMAGE, debian:bookworm-slim by default), a builder stage
    # on it, and the final stage on it again (e2e/tests/test_image_units.py checks the rest).
    assert froms == ["FROM ${BASE_IMAGE} AS python", "FROM python AS builder", "FROM python"]
    assert "ARG BASE_IMAGE=debian:bookworm-slim" in lines
    assert 'ENTRYPOINT ["kueue-tas"]' in lines and 'CMD ["run"]' in lines
    users = [ln.split()[1] for ln in lines if ln.startswith("USER ")]
    assert users and all(part.isdigit() and int(part) != 0 for part in users[-1].split(":"))


def test_dockerignore_keeps_what_the_build_copies() -> None:
    rules = [ln for ln in (REPO / ".dockerignore").read_text().splitlines() if ln and not ln.startswith("#")]
    assert rules[0] == "*"
    assert {"!pyproject.toml", "!README.md", "!kueue_tas/"} <= set(rules)
    assert {"!requirements/build.lock", "!requirements/runtime.lock"} <= set(rules)


HADOLINT = shutil.which("hadolint") or (
    str(REPO / ".venv/bin/hadolint") if (REPO / ".venv/bin/hadolint").exists() else None
)


@pytest.mark.skipif(HADOLINT is None, reason="hadolint not installed (pip install -e '.[dev]')")
def test_hadolint_passes_ours_and_fails_a_bad_one(tmp_path: Path) -> None:
    assert HADOLINT is not None
    ours = subprocess.run([HADOLINT, str(REPO / "Dockerfile")], capture_output=True, text=True, cwd=REPO)
    assert ours.returncode == 0, ours.stdout + ours.stderr
    bad = tmp_path / "Dockerfile"
    bad.write_text("FROM python\nRUN pip install kueue-tas\n")
    result = subprocess.run([HADOLINT, str(bad)], capture_output=True, text=True, cwd=REPO)
    assert result.returncode != 0 and "DL3006" in result.stdout
