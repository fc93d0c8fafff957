"""Review of issue 30 (adversarial): what a stolen controller token can still do that the
ValidatingAdmissionPolicy ``kueue-tas-controller-writes`` does not narrow. RBAC grants ``delete``
on every pod of the cluster (controllers/stray/reconciler.py) and ``patch`` on every Workload
(controllers/check_entry_writes.py: our assignment annotation); the policy matched only UPDATEs of
pods, Jobs, JobSets and the webhook configurations. Fixed: pod deletes only of our labelled pods,
Workload updates only of annotations, a Job's ttlSecondsAfterFinished kept (e2e/tests/
test_admission_policy.py checks each on a real apiserver)."""

from __future__ import annotations

from typing import Any

import yaml
from manifest_files import BASE, POLICY, documents, one

from kueue_tas.api import constants as c


def policy() -> dict[str, Any]:
    return one(documents(BASE), "ValidatingAdmissionPolicy", POLICY)


def rules_for(resource: str) -> list[dict[str, Any]]:
    return [r for r in policy()["spec"]["matchConstraints"]["resourceRules"] if resource in r["resources"]]


def test_the_policy_limits_pod_deletes_to_the_pods_of_workloads_we_place() -> None:
    assert any("DELETE" in r["operations"] for r in rules_for("pods"))
    variables = {v["name"]: yaml.safe_load(v["expression"]) for v in policy()["spec"]["variables"]}
    assert variables["workloadLabel"] == c.WORKLOAD_LABEL
    pod_rules = [v["expression"] for v in policy()["spec"]["validations"] if "'pods'" in v["expression"]]
    assert any("'DELETE'" in e and "variables.workloadLabel in oldObject" in e for e in pod_rules)
    # ``object`` is null on a DELETE: every rule reading it must not be evaluated then.
    assert all("'DELETE'" in e or "request.operation != 'UPDATE'" in e for e in pod_rules)


def test_the_policy_limits_workload_updates_to_our_annotation() -> None:
    (rule,) = rules_for("workloads")
    # The main resource only, in the version our controller writes: the status subresource
    # (our check entry, server-side applied) must stay writable.
    assert rule == {
        "apiGroups": [c.KUEUE_GROUP],
        "apiVersions": [c.KUEUE_VERSION],
        "operations": ["UPDATE"],
        "resources": ["workloads"],
    }
    (check,) = [v["expression"] for v in policy()["spec"]["validations"] if "'workloads'" in v["expression"]]
    assert "object.spec == oldObject.spec" in check
    for field in ("labels", "ownerReferences", "finalizers"):
        assert f"object.metadata.?{field}" in check
    assert "annotations" not in check


def test_the_policy_keeps_a_jobs_ttl_after_finished() -> None:
    job_rule = next(v for v in policy()["spec"]["validations"] if "'jobs'" in v["expression"])
    assert "ttlSecondsAfterFinished" in job_rule["expression"]
