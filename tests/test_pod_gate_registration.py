"""Whether the pod webhook is registered so that the admitter can leave the Job's template
alone (controllers/pod_gate_registration.py), checked against the configuration we ship."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml
from admission_harness import harness, workload

from kueue_tas.api import constants as c
from kueue_tas.controllers.pod_gate_registration import PodGateRegistration, registered_cover
from kueue_tas.kube.errors import NotFound

SHIPPED = Path(__file__).resolve().parents[1] / "manifests" / "base" / "pod-gate-webhook.yaml"


def shipped() -> dict[str, Any]:
    return dict(yaml.safe_load(SHIPPED.read_text()))


def test_the_shipped_configuration_covers_user_namespaces_and_not_the_excluded_ones() -> None:
    cover = registered_cover(shipped())
    assert cover is not None
    assert cover.covers("team-a") and cover.covers("default")
    assert not cover.covers("kube-system") and not cover.covers("kueue-tas-system")


@pytest.mark.parametrize(
    "change",
    [
        lambda h: h.update(failurePolicy="Ignore"),
        lambda h: h.update(objectSelector={"matchLabels": {c.GATED_LABEL: "false"}}),
        lambda h: h.update(objectSelector={}),
        lambda h: h.update(matchConditions=[{"name": "x", "expression": "true"}]),
        lambda h: h.update(name="other.example.com"),
        lambda h: h["rules"][0].update(operations=["UPDATE"]),
        lambda h: h["rules"][0].update(resources=["pods/status"]),
        lambda h: h.update(namespaceSelector={"matchLabels": {"team": "a"}}),
        lambda h: h.update(
            namespaceSelector={"matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "Exists"}]}
        ),
    ],
    ids=[
        "ignore",
        "other-label",
        "every-pod",
        "match-conditions",
        "not-ours",
        "update-only",
        "status-only",
        "label-selector",
        "exists",
    ],
)
def test_a_configuration_that_might_let_a_pod_through_ungated_does_not_count(change: Any) -> None:
    doc = copy.deepcopy(shipped())
    change(doc["webhooks"][0])
    assert registered_cover(doc) is None


def test_no_namespace_selector_covers_every_namespace_and_in_covers_only_those_named() -> None:
    doc = shipped()
    doc["webhooks"][0].pop("namespaceSelector")
    cover = registered_cover(doc)
    assert cover is not None and cover.covers("kube-system")
    doc["webhooks"][0]["namespaceSelector"] = {
        "matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "In", "values": ["a", "b"]}]
    }
    cover = registered_cover(doc)
    assert cover is not None and cover.covers("a") and not cover.covers("c")


class FakeApi:
    pass


async def test_registration_follows_the_reads_and_a_failed_read_means_the_template_gate(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    answers: list[Any] = [shipped(), NotFound("gone"), shipped(), OSError("reset")]

    async def request_json(api: Any, method: str, path: str, **_: Any) -> dict[str, Any]:
        assert (method, path.rsplit("/", 1)[-1]) == ("GET", "kueue-tas")
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return dict(answer)

    monkeypatch.setattr("kueue_tas.controllers.pod_gate_registration.request_json", request_json)
    reg = PodGateRegistration(FakeApi(), "kueue-tas")  # type: ignore[arg-type]
    assert not reg.covers("team-a")  # nothing read yet
    seen = []
    for _ in range(4):
        await reg.refresh()
        seen.append(reg.covers("team-a"))
    assert seen == [True, False, True, False]


async def test_the_admitter_writes_the_template_gate_only_where_the_webhook_does_not_gate() -> None:
    for covered, expected in ((False, [{"main"}]), (True, [set()])):
        h = harness(pod_gate_webhook=lambda _ns, covered=covered: covered)
        h.add_workload(workload())
        assert await h.admission.reconcile("ns/wl") is None
        entry = h.writes.checks[-1]
        assert entry["state"] == "Ready"
        # The label that makes the webhook gate the pods is there either way.
        assert entry["podSetUpdates"][0]["labels"][c.GATED_LABEL] == c.GATED_LABEL_VALUE
        assert h.writes.gated == expected
