"""PodSets built as Kueue's job_controller.go / jobset_controller.go build them."""

from __future__ import annotations

from typing import Any

import builders as mk
import pytest
from vocab import REQUIRED

from kueue_tas.api.core_objects import Job
from kueue_tas.api.podsets import PodSetSpec, podsets_of, podsets_of_job, podsets_of_jobset, podsets_of_workload
from kueue_tas.api.workload import Workload

TEMPLATE: dict[str, Any] = {
    "metadata": {
        "labels": {
            "app": "train",
            "job-name": "legacy",
            "controller-uid": "legacy",
            "batch.kubernetes.io/job-name": "train",
            "batch.kubernetes.io/controller-uid": "u",
        },
        "annotations": {REQUIRED: "rack"},
    },
    "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]},
}


@pytest.mark.parametrize(
    ("parallelism", "completions", "count"),
    [
        (None, None, 1),  # parallelism defaults to 1, completions to parallelism
        (4, None, 4),
        (4, 2, 2),  # completions below parallelism caps the count
        (2, 10, 2),
        (None, 5, 1),
        (3, 3, 3),
        (0, None, 0),
    ],
)
def test_job_count(parallelism: int | None, completions: int | None, count: int) -> None:
    [ps] = podsets_of_job(mk.job("train", parallelism, completions=completions, template=TEMPLATE))
    assert ps.name == "main"
    assert ps.count == count


def test_job_template_copied_without_managed_labels() -> None:
    raw = mk.job("train", 2, completions=None, template=TEMPLATE)
    [ps] = podsets_of_job(raw)
    assert ps.template["metadata"]["labels"] == {"app": "train"}
    assert ps.template["metadata"]["annotations"] == TEMPLATE["metadata"]["annotations"]
    assert ps.template["spec"] == TEMPLATE["spec"]
    ps.template["spec"]["containers"].append({"name": "x"})
    assert len(TEMPLATE["spec"]["containers"]) == 1  # deep copy: input untouched
    assert "job-name" in TEMPLATE["metadata"]["labels"]


def test_job_model_input() -> None:
    [ps] = podsets_of_job(Job.model_validate(mk.job("train", 5, completions=7, template=TEMPLATE)))
    assert ps == PodSetSpec(name="main", count=5, template=ps.template)


def rjob(name: str, replicas: int | None, parallelism: int | None, completions: int | None) -> dict[str, Any]:
    """A replicated Job whose pod template is TEMPLATE annotated ``for: <name>``."""
    template = {**TEMPLATE, "metadata": {"annotations": {"for": name}}}
    return mk.replicated_job(name, replicas, parallelism, completions, template=template)


def test_jobset_podsets() -> None:
    js = mk.jobset(
        "llm",
        [
            rjob("Leader", 1, None, None),
            rjob("workers", 3, 4, None),  # 3 x 4
            rjob("capped", 2, 4, 2),  # 2 x min(4, 2)
            rjob("defaults", None, 2, 8),  # replicas default 1 -> 1 x 2
        ],
    )
    podsets = podsets_of_jobset(js)
    assert [(p.name, p.count) for p in podsets] == [("leader", 1), ("workers", 12), ("capped", 4), ("defaults", 2)]
    assert podsets[1].template["metadata"]["annotations"] == {"for": "workers"}
    assert podsets[1].template["spec"] == TEMPLATE["spec"]


def test_workload_podsets() -> None:
    wl = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "spec": {"podSets": [{"name": "leader", "count": 1, "template": TEMPLATE}, {"name": "workers", "count": 8}]},
    }
    podsets = podsets_of_workload(wl)
    assert [(p.name, p.count) for p in podsets] == [("leader", 1), ("workers", 8)]
    assert podsets[0].template == TEMPLATE and podsets[0].template is not TEMPLATE
    assert podsets_of(Workload.model_validate(wl)) == podsets


def test_dispatch() -> None:
    assert podsets_of(mk.job("train", 2, completions=None, template=TEMPLATE))[0].count == 2
    assert podsets_of({"kind": "JobSet", "spec": {"replicatedJobs": [rjob("a", 2, 2, None)]}})[0].count == 4
    with pytest.raises(ValueError, match="Deployment"):
        podsets_of({"kind": "Deployment"})
