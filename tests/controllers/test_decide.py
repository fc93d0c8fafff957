"""The admission decision and the live capacity model, without a cluster."""

from __future__ import annotations

from functools import partial

import builders as mk
from vocab import BLOCK, GPU, RACK, REQUIRED, SLICE_SIZE

from kueue_tas.api.constants import GATED_LABEL, GATED_LABEL_VALUE, HOSTNAME_LABEL
from kueue_tas.api.workload import Workload
from kueue_tas.capacity.live import LiveCapacity
from kueue_tas.capacity.rules import FlavorSpec
from kueue_tas.controllers.check_entry_writes import check_entry
from kueue_tas.controllers.decide import Outcome, decide

LEVELS = (BLOCK, RACK, HOSTNAME_LABEL)
B1_R2 = {BLOCK: "b1", RACK: "b1-r2", "pool": "gpu"}
gpu_node = partial(mk.node_info, cpu=16000, pods=110, gpus=4)


def capacity() -> LiveCapacity:
    live = LiveCapacity()
    live.set_flavors({"gpu": FlavorSpec("gpu", "topo", LEVELS, {"pool": "gpu"})})
    for r in ("b1-r1", "b1-r2"):
        for h in range(2):
            live.upsert_node(gpu_node(f"{r}-h{h}", {BLOCK: "b1", RACK: r, "pool": "gpu"}))
    return live


def admitted(name: str, count: int, annotations: dict[str, str]) -> Workload:
    """Workload ns/<name>: ``count`` one-GPU pods with those PodSet annotations, admitted on ``gpu``."""
    return Workload.model_validate(
        mk.workload(name, count, annotations, namespace="ns", queue=None, admitted_flavor="gpu")
    )


def test_ready_single_rack_and_multi_domain() -> None:
    live = capacity()
    d = decide(admitted("a", 8, {REQUIRED: RACK}), {"gpu"}, live)
    assert d.outcome is Outcome.READY
    [p] = d.placements
    assert p.assignment.total == 8
    assert {v.values[0][:5] for v in p.assignment.domains} == {"b1-r1"}
    assert p.multi_domain and p.gated(False) and p.gated(True)
    assert p.node_selector(False) == {} and p.node_selector(True) == {}


def test_single_host_is_gated_when_repairs_are_on_else_pinned_by_node_selector() -> None:
    """Kueue keeps podSetUpdates unchanged while admitted: a PodSet pinned there could never follow
    a node repair, so with repairs on its pods are gated and placed by the ungater."""
    d = decide(admitted("a", 3, {REQUIRED: HOSTNAME_LABEL}), {"gpu"}, capacity())
    assert d.outcome is Outcome.READY
    [p] = d.placements
    assert not p.multi_domain
    assert p.gated(True) and p.node_selector(True) == {}
    assert not p.gated(False) and p.node_selector(False) == {HOSTNAME_LABEL: "b1-r1-h0"}


def test_the_check_entry_labels_gated_podsets_for_the_pod_webhook() -> None:
    """Only PodSets the ungater places carry GATED_LABEL: the pod webhook gates what carries it,
    and a pinned PodSet's pods must not wait for an ungater that will never release them."""
    multi = admitted("m", 8, {REQUIRED: RACK})
    pinned = admitted("p", 3, {REQUIRED: HOSTNAME_LABEL})
    for wl, repairs, gated in ((multi, False, True), (pinned, True, True), (pinned, False, False)):
        d = decide(wl, {"gpu"}, capacity())
        [update] = check_entry("tas", d, wl, repairs=repairs)["podSetUpdates"]
        assert (update["labels"].get(GATED_LABEL) == GATED_LABEL_VALUE) is gated
        assert ("nodeSelector" in update) is not gated


def test_assumed_usage_prevents_double_booking() -> None:
    live = capacity()
    first = decide(admitted("a", 8, {REQUIRED: RACK}), {"gpu"}, live)
    live.assume("ns/a", first.usage())
    second = decide(admitted("b", 8, {REQUIRED: RACK}), {"gpu"}, live)
    assert second.outcome is Outcome.READY
    racks = {d.values[0][:5] for d in second.placements[0].assignment.domains}
    assert racks == {"b1-r2"}
    live.assume("ns/b", second.usage())
    third = decide(admitted("c", 1, {REQUIRED: RACK}), {"gpu"}, live)
    assert third.outcome is Outcome.RETRY
    assert "doesn't allow to fit any of 1 pod(s)" in third.message
    # Observing the first as Ready replaces its assumption without charging twice.
    live.set_workload_usage("ns/a", first.usage())
    assert decide(admitted("c", 1, {REQUIRED: RACK}), {"gpu"}, live).outcome is Outcome.RETRY
    live.remove_workload_usage("ns/a")
    assert decide(admitted("c", 8, {REQUIRED: RACK}), {"gpu"}, live).outcome is Outcome.READY


def test_non_tas_pod_and_node_changes() -> None:
    live = capacity()
    assert decide(admitted("a", 8, {REQUIRED: RACK}), {"gpu"}, live).outcome is Outcome.READY
    live.upsert_pod("kube-system/ds-1", "b1-r1-h0", {GPU: 1, "pods": 1})
    live.upsert_pod("kube-system/ds-2", "b1-r2-h0", {GPU: 1, "pods": 1})
    d = decide(admitted("a", 8, {REQUIRED: RACK}), {"gpu"}, live)
    assert d.outcome is Outcome.RETRY and "allows to fit only 7 out of 8 pod(s)" in d.message
    live.delete_pod("kube-system/ds-2")
    assert decide(admitted("a", 8, {REQUIRED: RACK}), {"gpu"}, live).outcome is Outcome.READY
    live.upsert_node(gpu_node("b1-r2-h1", B1_R2, ready=False))
    assert decide(admitted("a", 8, {REQUIRED: RACK}), {"gpu"}, live).outcome is Outcome.RETRY
    live.upsert_node(gpu_node("b1-r2-h1", B1_R2, gpus=8))
    assert decide(admitted("a", 11, {REQUIRED: RACK}), {"gpu"}, live).outcome is Outcome.READY


def test_rejections() -> None:
    live = capacity()
    d = decide(admitted("a", 2, {REQUIRED: "example.com/row"}), {"gpu"}, live)
    assert d.outcome is Outcome.REJECTED and 'unknown topology level "example.com/row"' in d.message
    d = decide(admitted("a", 2, {SLICE_SIZE: "2"}), {"gpu"}, live)
    assert d.outcome is Outcome.REJECTED and "podset-slice-size" in d.message
    d = decide(admitted("a", 17, {REQUIRED: BLOCK}), {"gpu"}, live)
    assert d.outcome is Outcome.REJECTED and "can never fit" in d.message


def test_implied_and_ungoverned() -> None:
    live = capacity()
    d = decide(admitted("a", 5, {}), {"gpu"}, live)
    assert d.outcome is Outcome.READY and d.placements[0].assignment.total == 5
    d = decide(admitted("a", 5, {}), {"other-flavor"}, live)
    assert d.outcome is Outcome.READY and d.placements == []
    # Asking for a topology on a flavor the check does not govern is never Ready with nothing assigned.
    d = decide(admitted("a", 5, {REQUIRED: RACK}), {"other-flavor"}, live)
    assert d.outcome is Outcome.PENDING and d.placements == []
    assert d.message.startswith('PodSet "main" requests a topology, but its ResourceFlavor "gpu" is not one')
