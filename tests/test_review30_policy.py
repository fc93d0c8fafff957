"""Review of issue 30 (adversarial): what a stolen controller token can still do that the
ValidatingAdmissionPolicy ``kueue-tas-controller-writes`` does not narrow. RBAC grants ``delete``
on every pod of the cluster (controllers/stray_pods.py) and ``patch`` on every Workload
(controllers/admission_writes.py: our assignment annotation); the policy matches only UPDATEs of
pods, Jobs, JobSets and the webhook configurations."""

from __future__ import annotations

from typing import Any

import pytest
from test_least_privilege import POLICY, base
from test_manifests import one

from kueue_tas.api import constants as c


def policy() -> dict[str, Any]:
    return one(base(), "ValidatingAdmissionPolicy", POLICY)


def rules_for(resource: str) -> list[dict[str, Any]]:
    return [r for r in policy()["spec"]["matchConstraints"]["resourceRules"] if resource in r["resources"]]


@pytest.mark.xfail(
    strict=True,
    reason="issue 30 review, not fixed: with the controller's token any pod of the cluster (kube-system's "
    "too) can be deleted; the stray-pod reaper deletes only pods that carry our workload label "
    f"({c.WORKLOAD_LABEL}), which the policy "
    "already keeps the token from adding; fix: match DELETE of pods and allow it only when "
    "oldObject carries that label (guarding the UPDATE rules with request.operation == 'UPDATE', "
    "since object is null on DELETE), checked on a real apiserver in e2e/tests/test_admission_policy.py",
)
def test_the_policy_limits_pod_deletes_to_the_pods_of_workloads_we_place() -> None:
    assert any("DELETE" in r["operations"] for r in rules_for("pods"))
    assert any(
        "DELETE" in v["expression"] and "kueue-tas.io/workload" in v["expression"]
        for v in policy()["spec"]["validations"]
    )


@pytest.mark.xfail(
    strict=True,
    reason="issue 30 review, not fixed: with the controller's token any Workload's spec can be patched "
    "(spec.active: false evicts every admitted workload of the cluster; queueName, priority); our "
    "writes change only the assignment annotation (and status through workloads/status); fix: match "
    "UPDATE of workloads and allow only metadata.annotations to change, checked in e2e",
)
def test_the_policy_limits_workload_updates_to_our_annotation() -> None:
    assert rules_for("workloads")


@pytest.mark.xfail(
    strict=True,
    reason="issue 30 review, not fixed (low): spec.ttlSecondsAfterFinished of a Job stays mutable after "
    "creation, and the policy does not compare it: a stolen token can set it to 0 on every Job so "
    "that each is deleted, with its pods and their logs, the moment it finishes; fix: add it to the "
    "Job rule's comparisons (with the chart's copy), checked in e2e",
)
def test_the_policy_keeps_a_jobs_ttl_after_finished() -> None:
    job_rule = next(v for v in policy()["spec"]["validations"] if "'jobs'" in v["expression"])
    assert "ttlSecondsAfterFinished" in job_rule["expression"]
