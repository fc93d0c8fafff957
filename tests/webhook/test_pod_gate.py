"""The pod webhook's rule (webhook/pod_gate.py) and the label the check puts on gated PodSets."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from kueue_tas.api import constants as c
from kueue_tas.webhook.pod_gate import gate_patch, needs_gate

GATE = c.SCHEDULING_GATE


def pod(labels: Any = None, gates: Any = None, node: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": "x"}]}
    if gates is not None:
        spec["schedulingGates"] = gates
    if node is not None:
        spec["nodeName"] = node
    return {"metadata": {"labels": {c.GATED_LABEL: "true"} if labels is None else labels}, "spec": spec}


def apply(obj: dict[str, Any], ops: list[dict[str, Any]]) -> dict[str, Any]:
    """The two JSON patch operations the webhook sends, applied as the apiserver would."""
    for op in ops:
        assert op["op"] == "add"
        if op["path"] == "/spec/schedulingGates":
            obj["spec"]["schedulingGates"] = op["value"]
        else:
            assert op["path"] == "/spec/schedulingGates/-"
            obj["spec"]["schedulingGates"].append(op["value"])
    return obj


def test_a_labelled_pod_without_gates_gets_a_list_with_ours() -> None:
    assert gate_patch(pod(), GATE) == [{"op": "add", "path": "/spec/schedulingGates", "value": [{"name": GATE}]}]
    assert gate_patch(pod(gates=[]), GATE) == [
        {"op": "add", "path": "/spec/schedulingGates", "value": [{"name": GATE}]}
    ]


def test_other_gates_are_kept_and_ours_appended() -> None:
    patched = apply(
        pod(gates=[{"name": "kueue.x-k8s.io/admission"}]),
        gate_patch(pod(gates=[{"name": "kueue.x-k8s.io/admission"}]), GATE),
    )
    assert patched["spec"]["schedulingGates"] == [{"name": "kueue.x-k8s.io/admission"}, {"name": GATE}]


def test_pods_left_alone() -> None:
    assert not needs_gate(pod(labels={}), GATE)  # not one of ours
    assert not needs_gate(pod(labels={c.GATED_LABEL: "false"}), GATE)
    assert not needs_gate(pod(gates=[{"name": GATE}]), GATE)  # the template had it
    assert not needs_gate(pod(node="host-1"), GATE)  # created bound: the apiserver refuses gates there
    assert not needs_gate({"metadata": "x", "spec": {}}, GATE)  # malformed: the apiserver's validation answers
    assert not needs_gate(pod(labels=["x"]), GATE)
    assert not needs_gate(pod(gates="x"), GATE)


gates_lists = st.lists(
    st.sampled_from(["a", "b", GATE, "kueue.x-k8s.io/admission"]).map(lambda n: {"name": n}), max_size=4
)


@given(gates=st.one_of(st.none(), gates_lists), labelled=st.booleans())
def test_after_the_patch_a_labelled_pod_holds_our_gate_exactly_once(gates: Any, labelled: bool) -> None:
    labels = {c.GATED_LABEL: "true"} if labelled else {}
    before = pod(labels=labels, gates=None if gates is None else list(gates))
    after = apply(pod(labels=labels, gates=None if gates is None else list(gates)), gate_patch(before, GATE))
    names = [g["name"] for g in after["spec"].get("schedulingGates") or []]
    if labelled:
        assert GATE in names
        assert names.count(GATE) == max(1, [g["name"] for g in gates or []].count(GATE))
    else:
        assert after == before
    # The other gates are untouched and in order.
    assert [n for n in names if n != GATE] == [g["name"] for g in gates or [] if g["name"] != GATE]
