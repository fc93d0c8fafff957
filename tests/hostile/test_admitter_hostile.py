"""Hostile input for the live admitter: each row a Workload or a configuration an adversary (or a
tired admin) could put in front of the admission reconciler, run through the real reconciler on
hand-fed shared informers (``admission_harness``: four 8-GPU hosts in two racks).

Every row asserts the entry the reconciler writes (Pending / Retry / Rejected / Ready), that its
message is one line naming the object, the field and the problem (the row's fragments), that
the Warning Event says the same, that no exception escapes ``reconcile``, and that a workload
that is not Ready holds no capacity. The tampering rows (an admitted Workload whose assignment
annotation a user edits) assert that capacity never drops below what we decided, that the
ungater releases nothing into an edited domain, and that the guard restores or re-places.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import builders as mk
import pytest
from admission_harness import (
    CHECK,
    HOST,
    HOSTS,
    RACK,
    Harness,
    add_gated_pods,
    admitted,
    edited,
    guard,
    harness,
    other_hosts,
    workload,
)
from admission_harness import ungater as ungater_of

from kueue_tas.api import constants as c
from kueue_tas.controllers.guard.reconciler import REASON
from kueue_tas.topology.assignment import DomainAssignment, TopologyAssignment
from kueue_tas.topology.codec.codec import decode_assignment_annotation, encode_assignment_annotation
from kueue_tas.topology.explain.free import domain_free

P = "kueue-tas.io/"
REQ, PREF, UNC = P + "podset-required-topology", P + "podset-preferred-topology", P + "podset-unconstrained-topology"
SLICE_LEVEL, SLICE_SIZE = P + "podset-slice-required-topology", P + "podset-slice-size"
LAYERS, GROUP = P + "podset-slice-required-topology-constraints", P + "podset-group-name"
ASSIGNMENT_FIELD = f"metadata.annotations[{c.TOPOLOGY_ASSIGNMENT_ANNOTATION}]"
Obj = dict[str, Any]


# --- builders ----------------------------------------------------------------------------------


def one(count: int = 4, ann: dict[str, Any] | None = None, **template: Any) -> Callable[[], Obj]:
    """ns/wl with one PodSet ``main`` of ``count`` pods (1 GPU each unless ``template`` says)."""
    annotations = {REQ: RACK} if ann is None else ann
    return lambda: workload(podsets=[mk.podset("main", count, annotations, **template)])


def podsets(*sets: Obj) -> Callable[[], Obj]:
    return lambda: workload(podsets=list(sets))


def with_template(template: Obj, count: int = 4) -> Callable[[], Obj]:
    return lambda: workload(podsets=[{"name": "main", "count": count, "template": template}])


def admitted_count(count: int) -> Callable[[], Obj]:
    def make() -> Obj:
        obj = workload(podsets=[mk.podset("main", 4, {REQ: RACK})])
        obj["status"]["admission"]["podSetAssignments"][0]["count"] = count
        return obj

    return make


def with_field(field: Obj, count: int) -> Callable[[], Obj]:
    return lambda: workload(podsets=[mk.podset("main", count, {}, topology_request=field)])


def topology(levels: tuple[str, ...]) -> Callable[[Harness], None]:
    return lambda h: h.informers.topologies.handle_event("MODIFIED", mk.topology("topo", levels, resource_version="2"))


def delete_topology(h: Harness) -> None:
    h.informers.topologies.handle_event("DELETED", mk.topology("topo", (RACK, HOST), resource_version="1"))


def check_params(topology_name: str | None) -> Callable[[Harness], None]:
    return lambda h: h.informers.checks.handle_event(
        "MODIFIED", mk.admission_check(CHECK, topology_name, resource_version="2")
    )


def second_binding(h: Harness) -> None:
    h.informers.topologies.handle_event("ADDED", mk.topology("other", (RACK,), resource_version="1"))
    h.informers.checks.handle_event("ADDED", mk.admission_check("tas2", "other", resource_version="1"))
    cq2 = mk.cluster_queue("cq2", ("gpu",), {"tas2": ["gpu"]}, covered=("nvidia.com/gpu",), resource_version="1")
    h.informers.queues.handle_event("ADDED", cq2)


def delete_flavor(h: Harness) -> None:
    h.informers.flavors.handle_event("DELETED", mk.flavor("gpu", {"pool": "gpu"}, resource_version="1"))


def absurd_node(h: Harness) -> None:
    alloc = {"cpu": "16", "pods": "110", "nvidia.com/gpu": "1e30"}
    h.informers.nodes.handle_event(
        "ADDED", mk.node("evil", labels={RACK: "r1", "pool": "gpu"}, allocatable=alloc, resource_version="1")
    )


# --- the table ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Row:
    id: str
    make: Callable[[], Obj]
    outcome: str | None  # the entry written; None: nothing is written (the object cannot exist)
    fragments: tuple[str, ...] = ()
    setup: Callable[[Harness], None] | None = None


REJ, PEND, READY = "Rejected", "Pending", "Ready"
layers = json.dumps([{"topology": RACK, "size": 4}, {"topology": HOST, "size": 2}])

ROWS = [
    # PodSets and counts
    Row("podsets-2000", podsets(*(mk.podset(f"p{i}", 1) for i in range(2000))), REJ,
        ("spec.podSets", "Too many: 2000", "at most 18 items")),
    Row("podsets-none", podsets(), REJ, ("spec.podSets", "Required value")),
    Row("pods-100k", one(100_000, {UNC: "true"}), REJ,
        ('PodSet "main"', "can never fit", "only 32 out of 100000 pod(s)")),
    Row("count-negative", one(-3), REJ, ('PodSet "main"', "spec.podSets[0].count", "-3", "greater than or equal to 0")),
    Row("count-beyond-int32", one(2**31), REJ,
        ("spec.podSets[0].count", "2147483648", "less than or equal to 2147483647")),
    Row("count-beyond-int64", one(2**70), REJ, ("spec.podSets[0].count", str(2**70))),
    Row("admitted-count-negative", admitted_count(-1), REJ,
        ("status.admission.podSetAssignments[main].count", "greater than or equal to 0")),
    Row("count-zero", one(0), READY, ("main: 0 pods in 0 domain(s)",)),
    # slices
    Row("slice-not-dividing", one(9, {REQ: RACK, SLICE_LEVEL: HOST, SLICE_SIZE: "2"}), REJ,
        ('PodSet "main"', SLICE_SIZE, '"2"', "must evenly divide pod set count 9")),
    Row("slice-over-count", one(4, {REQ: RACK, SLICE_LEVEL: HOST, SLICE_SIZE: "8"}), REJ,
        (SLICE_SIZE, "must not be greater than pod set count 4")),
    Row("slice-size-zero", one(4, {REQ: RACK, SLICE_LEVEL: HOST, SLICE_SIZE: "0"}), REJ,
        (SLICE_SIZE, "must be greater than or equal to 1")),
    Row("slice-size-beyond-int32", one(4, {REQ: RACK, SLICE_LEVEL: HOST, SLICE_SIZE: "99999999999"}), REJ,
        (SLICE_SIZE, "must be a numeric value")),
    Row("slice-layers-not-dividing", one(6, {LAYERS: layers}), REJ, (LAYERS, "must evenly divide pod set count 6")),
    Row("slice-layers-not-json", one(4, {LAYERS: "[{"}), REJ, (LAYERS,)),
    Row("slice-field-not-dividing", with_field({"required": RACK, "podSetSliceRequiredTopology": HOST,
                                               "podSetSliceSize": 4}, 6), REJ,
        ("topologyRequest.podSetSliceSize", "must evenly divide pod set count 6")),
    # levels and annotations
    Row("unknown-level", one(4, {REQ: "example.com/row"}), REJ,
        ('PodSet "main"', REQ, 'unknown topology level "example.com/row"', 'Topology "topo"')),
    Row("level-not-a-label", one(4, {REQ: "Not A Label!"}), REJ, (REQ, '"Not A Label!"')),
    Row("two-modes", one(4, {PREF: HOST, UNC: "true"}), REJ, ("must not contain more than one topology annotation",)),
    Row("required-and-preferred", one(4, {REQ: RACK, PREF: HOST}), READY, ("main: 4 pods in 1 domain(s)",)),
    Row("preferred-above-required", one(4, {REQ: HOST, PREF: RACK}), REJ,
        ('PodSet "main"', f"annotation {PREF}: level \"{RACK}\" is above the required level \"{HOST}\"",
         f"(annotation {REQ})")),
    Row("field-preferred-above-required", with_field({"required": HOST, "preferred": RACK}, 4), REJ,
        ('PodSet "main"', f"topologyRequest.preferred: level \"{RACK}\"", "(topologyRequest.required)")),
    Row("unconstrained-not-bool", one(4, {UNC: "maybe"}), REJ, (UNC, '"maybe"', "must be a boolean value")),
    Row("annotation-100k-chars", one(4, {REQ: "x" * 100_000}), REJ, (REQ, "(100000 characters)")),
    Row("annotation-value-int", one(4, {REQ: RACK, SLICE_LEVEL: HOST, SLICE_SIZE: 2}), REJ,
        (SLICE_SIZE, "value must be a string, got int")),
    Row("annotations-not-mapping", with_template({"metadata": {"annotations": ["x"]}, "spec": {}}), REJ,
        ('PodSet "main"', "metadata.annotations must be a mapping, got list")),
    # issue 27 (defect 10's sibling in the controller): a template metadata of the wrong type
    Row("template-metadata-a-string", with_template({"metadata": "x", "spec": {}}), REJ,
        ('PodSet "main"', "template metadata must be a mapping, got str")),
    Row("template-metadata-a-number", with_template({"metadata": 7, "spec": {}}), REJ,
        ('PodSet "main"', "template metadata must be a mapping, got int")),
    Row("group-of-three", podsets(*(mk.podset(n, 1, {REQ: RACK, GROUP: "g"}) for n in ("a", "b", "c"))), REJ,
        (GROUP, "can only define groups of exactly 2 pod sets")),
    # quantities
    Row("quantity-absurd", one(4, gpus=0, cpu="1e30"), REJ, ('PodSet "main"', "'cpu'", "out of range")),
    Row("quantity-malformed", one(4, gpus=0, cpu="abc"), REJ, ('PodSet "main"', "invalid quantity 'abc'", "'cpu'")),
    Row("quantity-negative-charged-as-zero", one(4, gpus=1, cpu="-1"), READY, ("main: 4 pods",)),
    # configuration
    Row("topology-missing", one(), PEND, ('PodSet "main"', 'Topology "topo" of ResourceFlavor "gpu" not found'),
        delete_topology),
    Row("topology-zero-levels", one(), PEND, ('Topology "topo"', "spec.levels: must have at least 1 item"),
        topology(())),
    Row("topology-duplicate-levels", one(), PEND, ('Topology "topo"', f'spec.levels: Invalid value: "{RACK}"',
                                                   "must be unique"), topology((RACK, RACK, HOST))),
    Row("topology-17-levels", one(), PEND, ('Topology "topo"', "spec.levels: Too many: 17"),
        topology((*(f"example.com/l{i}" for i in range(16)), HOST))),
    Row("topology-hostname-not-lowest", one(), PEND, ("can only be used at the lowest level of topology",),
        topology((HOST, RACK))),
    Row("topology-level-not-a-label", one(), PEND, ("spec.levels[0].nodeLabel", '"Not A Label!"'),
        topology(("Not A Label!", HOST))),
    Row("check-parameters-not-a-topology", one(), PEND, ('AdmissionCheck "tas"', "spec.parameters"),
        check_params(None)),
    Row("check-points-at-missing-topology", one(), PEND, ('Topology "nope" of ResourceFlavor "gpu" not found',),
        check_params("nope")),
    Row("flavor-on-two-topologies", one(), PEND,
        ("ResourceFlavor 'gpu'", "Topology 'topo' by AdmissionCheck 'tas'", "Topology 'other' by AdmissionCheck"),
        second_binding),
    Row("flavor-missing", one(), PEND, ('ResourceFlavor "gpu" not found',), delete_flavor),
    Row("node-absurd-allocatable", one(8), READY, ("main: 8 pods",), absurd_node),
    # An object the API server could never store: the informer refuses it (logged), nothing is decided.
    Row("workload-annotation-not-string",
        lambda: workload(workload_annotations={c.TOPOLOGY_ASSIGNMENT_ANNOTATION: 5}), None),
]  # fmt: skip


def free_gpus(h: Harness) -> int:
    snap = h.capacity.snapshot("gpu")
    if snap is None:
        return -1
    free = domain_free(snap)
    return sum(int(free.get((HOST, host, "nvidia.com/gpu"), 0)) for host in HOSTS)


@pytest.mark.parametrize("row", ROWS, ids=[r.id for r in ROWS])
async def test_admitter_hostile(row: Row) -> None:
    h = harness()
    if row.setup is not None:
        row.setup(h)
    before = free_gpus(h)
    h.add_workload(row.make())
    assert await h.admission.reconcile("ns/wl") is None  # nothing escapes, nothing retried blindly
    if row.outcome is None:
        assert h.writes.checks == [] and h.events.seen == []
        assert free_gpus(h) == before
        return
    [entry] = h.writes.checks
    assert entry["name"] == CHECK and entry["state"] == row.outcome, entry["message"]
    message = entry["message"]
    assert "\n" not in message and len(message) <= 4096, message[:300]
    for fragment in row.fragments:
        assert fragment in message, f"{fragment!r} not in {message!r}"
    [(obj, kind, _, said)] = h.events.seen
    assert obj == "Workload/wl" and said == message
    assert kind == ("Normal" if row.outcome == READY else "Warning")
    if row.outcome == READY:
        assert h.writes.annotations and decode_assignment_annotation(h.writes.annotations[-1])
    else:
        assert h.writes.annotations == [] and h.writes.gated == []
        assert not h.capacity.holds("ns/wl") and free_gpus(h) == before


# --- tampering with an admitted Workload ---------------------------------------------------------


def doubled(text: str) -> str:
    [(name, ta)] = decode_assignment_annotation(text)
    d = ta.domains[0]
    return encode_assignment_annotation([(name, TopologyAssignment((HOST,), (DomainAssignment(d.values, 1),)))])


DIFFERS = f'{ASSIGNMENT_FIELD}: PodSet "main" differs from the assignment kueue-tas recorded'
TAMPER = [
    ("malformed-json", lambda t: "{not json", f"{ASSIGNMENT_FIELD}: no longer decodes: "),
    ("wrong-shape", lambda t: '{"podSets": 7}', f"{ASSIGNMENT_FIELD}: no longer decodes: "),
    ("moved-to-other-host", other_hosts, DIFFERS),
    ("fewer-pods", doubled, DIFFERS),
    ("podset-renamed", lambda t: t.replace('"main"', '"other"'), f'{ASSIGNMENT_FIELD}: PodSet "main" was removed'),
    ("removed", lambda t: None, f"{ASSIGNMENT_FIELD}: removed"),
]


@pytest.mark.parametrize(("edit_of", "problem"), [(e, p) for _, e, p in TAMPER], ids=[t[0] for t in TAMPER])
async def test_tampered_assignment_never_double_books(edit_of: Callable[[str], str | None], problem: str) -> None:
    h = harness()
    g = guard(h)
    ungater, patches = ungater_of(h, ungate_batch_period_seconds=0)
    obj = await admitted(h)
    original = obj["metadata"]["annotations"][c.TOPOLOGY_ASSIGNMENT_ANNOTATION]
    charged = free_gpus(h)
    assert charged == 32 - 8
    add_gated_pods(h)
    h.modify_workload(edited(obj, edit_of(original)))
    assert free_gpus(h) == charged, "capacity dropped below what we decided"
    assert await ungater.reconcile("ns/wl") is None and patches == [], "the ungater followed an edited assignment"
    assert await g.reconcile("ns/wl") is None
    assert h.writes.annotations[-1] == original
    [(who, kind, _, message)] = [e for e in h.events.seen if e[2] == REASON]
    assert who == "Workload/wl" and kind == "Warning" and "\n" not in message
    assert message.startswith(problem) and message.endswith("restored the assignment kueue-tas recorded")


@pytest.mark.parametrize(("edit_of", "problem"), [(e, p) for _, e, p in TAMPER], ids=[t[0] for t in TAMPER])
async def test_tampered_assignment_after_restart_is_re_placed(
    edit_of: Callable[[str], str | None], problem: str
) -> None:
    h = harness()
    obj = await admitted(h)
    original = obj["metadata"]["annotations"][c.TOPOLOGY_ASSIGNMENT_ANNOTATION]
    restarted = harness()
    restarted.add_workload(edited(obj, edit_of(original)))
    assert await guard(restarted).reconcile("ns/wl") is None
    [entry] = restarted.writes.checks
    assert entry["name"] == CHECK and entry["state"] == "Retry" and "\n" not in entry["message"]
    assert entry["message"].startswith(problem) and "re-placed" in entry["message"]
    assert [e[1:3] for e in restarted.events.seen] == [("Warning", REASON)]
