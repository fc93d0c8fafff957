"""Issue 12, defect 9: the assignment of a very large workload can exceed what Kubernetes lets a
Workload's annotations hold (256 KiB, keys and values together); the write then failed on
every retry. The annotation is Kueue's compact v1beta2 encoding (slices, universal values,
common prefixes and suffixes, hostname-prefix runs); when even that does not fit, the workload
is Rejected with the size and the limit."""

from __future__ import annotations

import json
import random
import string
from typing import Any

import builders as mk
from admission_harness import CHECK, Writes, harness, workload
from vocab import GPU, HOST, RACK, UNCONSTRAINED

from kueue_tas.api import constants as c
from kueue_tas.api.workload import Workload
from kueue_tas.controllers.admission.reconciler import ANNOTATIONS_SIZE_LIMIT, with_annotation
from kueue_tas.controllers.decide import Decision, Outcome, PodSetPlacement
from kueue_tas.kube.errors import Invalid
from kueue_tas.topology.assignment import DomainAssignment, TopologyAssignment
from kueue_tas.topology.codec.codec import decode_assignment_annotation

N = 12_500
FIELD = f"metadata.annotations[{c.TOPOLOGY_ASSIGNMENT_ANNOTATION}]"


def hostnames(shape: str, seed: int = 7) -> list[str]:
    rng = random.Random(seed)
    alnum = string.ascii_lowercase + string.digits
    names: set[str] = set()
    while len(names) < N:
        if shape == "ec2":
            names.add(f"ip-10-{rng.randint(0, 255)}-{rng.randint(0, 255)}-{rng.randint(1, 254)}.ec2.internal")
        elif shape == "gke":
            node, suffix = "".join(rng.choices(alnum, k=8)), "".join(rng.choices(alnum, k=4))
            names.add(f"gke-prod-gpu-pool-{rng.randint(0, 40)}-{node}-{suffix}")
        else:  # no structure at all
            names.add("".join(rng.choices(alnum, k=20)))
    out = sorted(names)
    rng.shuffle(out)
    return out


def big(names: list[str]) -> TopologyAssignment:
    rng = random.Random(3)
    return TopologyAssignment((HOST,), tuple(DomainAssignment((n,), rng.randint(1, 8)) for n in names))


def ready(ta: TopologyAssignment) -> Decision:
    return Decision(Outcome.READY, "topology assignment: main", [PodSetPlacement("main", "gpu", ta, {"cpu": 1})])


WL = Workload.model_validate(workload(workload_annotations={"team": "a"}))


def test_12500_random_host_names_fit_and_decode_to_the_input() -> None:
    for shape in ("ec2", "gke"):
        ta = big(hostnames(shape))
        decision, text = with_annotation(WL, ready(ta))
        assert decision.outcome is Outcome.READY and text is not None, decision.message
        assert len(text.encode()) + len(c.TOPOLOGY_ASSIGNMENT_ANNOTATION) + len("team") + 1 <= ANNOTATIONS_SIZE_LIMIT
        assert decode_assignment_annotation(text) == [("main", ta)]
        # Kueue's compact form: far below one JSON object per domain.
        assert len(text) < 0.75 * sum(len(n) + 24 for n in (d.values[0] for d in ta.domains))


def test_an_assignment_that_cannot_fit_is_rejected_with_size_and_limit() -> None:
    ta = big(hostnames("random"))
    decision, text = with_annotation(WL, ready(ta))
    assert text is None and decision.outcome is Outcome.REJECTED and decision.placements == []
    assert decision.message.startswith(f"{FIELD}: the assignment of {N} domains takes ")
    assert f"over Kubernetes' limit of {ANNOTATIONS_SIZE_LIMIT} bytes (256 KiB)" in decision.message


def test_other_annotations_count_against_the_limit() -> None:
    ta = big(hostnames("gke")[:4000])
    _, text = with_annotation(WL, ready(ta))
    assert text is not None
    ours = len(c.TOPOLOGY_ASSIGNMENT_ANNOTATION) + len(text)
    room = ANNOTATIONS_SIZE_LIMIT - ours - len("note")  # the bytes the other annotation may take
    exact = Workload.model_validate(workload(workload_annotations={"note": "x" * room}))
    assert with_annotation(exact, ready(ta))[0].outcome is Outcome.READY
    crowded = Workload.model_validate(workload(workload_annotations={"note": "x" * (room + 1)}))
    decision, text = with_annotation(crowded, ready(ta))
    assert decision.outcome is Outcome.REJECTED and text is None


def test_the_previous_format_still_decodes() -> None:
    old = {
        "podSets": [
            {
                "name": "main",
                "topologyAssignment": {
                    "levels": [HOST],
                    "domains": [{"values": ["h1"], "count": 3}, {"values": ["h2"], "count": 1}],
                },
            }
        ]
    }
    expect = TopologyAssignment((HOST,), (DomainAssignment(("h1",), 3), DomainAssignment(("h2",), 1)))
    assert decode_assignment_annotation(json.dumps(old)) == [("main", expect)]


class LimitedWrites(Writes):
    """Writes as the API server takes them: annotations over the limit are Invalid (422)."""

    async def write_annotation(self, workload: Workload, text: str) -> Workload:
        if len(text) > ANNOTATIONS_SIZE_LIMIT:
            raise Invalid(422, "Invalid", "metadata.annotations: Too long: must have at most 262144 bytes")
        return await super().write_annotation(workload, text)


async def test_live_workload_too_large_to_record_is_rejected_and_holds_nothing() -> None:
    writes = LimitedWrites()
    h = harness(writer=writes)
    names = hostnames("random")
    for n in names:
        h.informers.nodes.handle_event(
            "ADDED",
            mk.node(
                n,
                labels={RACK: "r9", "pool": "gpu"},
                allocatable={"cpu": "4", "pods": "110", GPU: "1"},
                resource_version="1",
            ),
        )
    unconstrained = {UNCONSTRAINED: "true"}
    obj: dict[str, Any] = workload(podsets=[mk.podset("main", N, unconstrained)])
    h.add_workload(obj)
    assert await h.admission.reconcile("ns/wl") is None
    [entry] = writes.checks
    assert entry["name"] == CHECK and entry["state"] == "Rejected", entry["message"]
    assert entry["message"].startswith(f"{FIELD}: the assignment of ")
    assert writes.annotations == [] and writes.gated == []
    assert not h.capacity.holds("ns/wl")
