"""Issue 30 finding 8, in manifests/base (the chart is held to the same objects by
tests/project/test_chart.py): the controller creates no Secrets, a ValidatingAdmissionPolicy limits what
its ServiceAccount may change, its namespace enforces Pod Security "restricted", and its pods
have a priority class. What the policy refuses and allows on a real apiserver:
e2e/tests/test_admission_policy.py."""

from __future__ import annotations

from typing import Any

import yaml
from manifest_files import BASE, NAMESPACE, POLICY, config, documents, one

SERVICE_ACCOUNT = f"system:serviceaccount:{NAMESPACE}:kueue-tas"


def base() -> list[dict[str, Any]]:
    return documents(BASE)


def test_the_controller_may_not_create_secrets_the_manifests_ship_its_own_empty() -> None:
    docs = base()
    secret_rules = [
        r
        for d in docs
        if d["kind"] in ("Role", "ClusterRole")
        for r in d["rules"]
        if "secrets" in r.get("resources", [])
    ]
    assert secret_rules == [
        {
            "apiGroups": [""],
            "resources": ["secrets"],
            "resourceNames": [config(docs)["webhook_secret"]],
            "verbs": ["get", "update"],
        }
    ]
    secret = one(docs, "Secret", config(docs)["webhook_secret"])
    assert secret["metadata"]["namespace"] == NAMESPACE == config(docs)["webhook_namespace"]
    # Empty and Opaque: the controller fills it keeping its type (webhook/cert_keeper.py), and a
    # re-apply of the manifests, which set no data, leaves the certificate alone.
    assert secret.get("type", "Opaque") == "Opaque" and not secret.get("data") and not secret.get("stringData")


def test_the_namespace_enforces_the_restricted_pod_security_standard() -> None:
    labels = one(base(), "Namespace")["metadata"]["labels"]
    assert labels["pod-security.kubernetes.io/enforce"] == "restricted"


def test_the_controller_pods_have_a_critical_priority_class() -> None:
    """They answer a failurePolicy Fail webhook: preempting them for the workloads they gate
    would hold every gated pod back."""
    pod = one(base(), "Deployment")["spec"]["template"]["spec"]
    assert pod["priorityClassName"] == "system-cluster-critical"


def test_the_admission_policy_holds_every_update_our_service_account_makes_to_what_it_patches() -> None:
    docs = base()
    policy = one(docs, "ValidatingAdmissionPolicy", POLICY)
    spec = policy["spec"]
    assert spec["failurePolicy"] == "Fail"
    matched = {
        (group, resource)
        for rule in spec["matchConstraints"]["resourceRules"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        if "UPDATE" in rule["operations"]
    }
    # Every object the ClusterRole lets us patch whose content could hurt a tenant or the
    # cluster (Workload status, Events, AdmissionCheck status are ours or Kueue's).
    assert matched == {
        ("", "pods"),
        ("kueue.x-k8s.io", "workloads"),
        ("admissionregistration.k8s.io", "validatingwebhookconfigurations"),
        ("admissionregistration.k8s.io", "mutatingwebhookconfigurations"),
        ("batch", "jobs"),
        ("jobset.x-k8s.io", "jobsets"),
    }
    (condition,) = spec["matchConditions"]
    assert condition["expression"] == f"request.userInfo.username == '{SERVICE_ACCOUNT}'"
    variables = {v["name"]: v["expression"] for v in spec["variables"]}
    assert yaml.safe_load(variables["gate"]) == f"{config(docs)['scheduling_gate']}"
    expressions = " ".join(v["expression"] for v in spec["validations"])
    assert "oldObject" in expressions and "variables.gate" in expressions
    assert all(v.get("message") for v in spec["validations"])
    binding = one(docs, "ValidatingAdmissionPolicyBinding", POLICY)
    assert binding["spec"] == {"policyName": POLICY, "validationActions": ["Deny"]}


def test_the_image_is_a_release_tag_never_latest() -> None:
    chart = yaml.safe_load((BASE.parent.parent / "charts" / "kueue-tas" / "Chart.yaml").read_text())
    image = one(base(), "Deployment")["spec"]["template"]["spec"]["containers"][0]["image"]
    assert image == f"ghcr.io/kueue-tas/kueue-tas:{chart['appVersion']}"
