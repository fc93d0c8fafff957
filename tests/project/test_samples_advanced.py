"""manifests/samples/advanced: the PodSet-group JobSet and the 3-layer sliced Job are valid for
Kueue's webhook rules and are placed as documented on the demo topology by the controller's planner."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from manifest_files import SAMPLES, demo_nodes, documents, kustomization

from kueue_tas.api.kinds import KubeObject, parse_object
from kueue_tas.api.podsets import podsets_of
from kueue_tas.cli.planner import Planner
from kueue_tas.topology.model import SliceLayer, TopologyRequest
from kueue_tas.topology.requests.inputs import podset_request

ADVANCED = SAMPLES / "advanced"
BLOCK, RACK = "cloud.provider.com/topology-block", "cloud.provider.com/topology-rack"


@pytest.fixture(scope="module")
def plans() -> dict[str, Any]:
    nodes = demo_nodes()
    docs = [*nodes, *documents(SAMPLES), *documents(ADVANCED)]
    objects: list[KubeObject] = [o for o in (parse_object(d) for d in docs) if o is not None]
    return {p.name: p for p in Planner(objects).run()}


def node_labels() -> dict[str, dict[str, str]]:
    return {n["metadata"]["name"]: n["metadata"]["labels"] for n in demo_nodes()}


def test_every_file_listed() -> None:
    listed = kustomization(ADVANCED)["resources"]
    on_disk = {p.name for p in Path(ADVANCED).glob("*.yaml")} - {"kustomization.yaml"}
    assert on_disk == set(listed)
    for name in listed:
        for doc in yaml.safe_load_all((ADVANCED / name).read_text()):
            assert doc["metadata"]["namespace"] == "default"
            assert doc["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "gpu"


def test_leader_and_workers_share_one_rack(plans: dict[str, Any]) -> None:
    plan = plans["sample-leader-workers"]
    assert plan.fits, [ps.message for ps in plan.podsets]
    labels = node_labels()
    leader, workers = plan.podsets
    assert (leader.count, workers.count) == (1, 4)
    racks = {labels[d.values[0]][RACK] for ps in (leader, workers) for d in ps.assignment.domains}
    assert len(racks) == 1


def test_sliced_job_one_block_racks_of_16_hosts_of_4(plans: dict[str, Any]) -> None:
    plan = plans["sample-sliced-job"]
    assert plan.fits, [ps.message for ps in plan.podsets]
    (ps,) = plan.podsets
    labels = node_labels()
    per_rack: dict[str, int] = {}
    for d in ps.assignment.domains:
        assert d.count % 4 == 0  # whole 4-pod host slices
        per_rack[labels[d.values[0]][RACK]] = per_rack.get(labels[d.values[0]][RACK], 0) + d.count
    assert ps.assignment.total == 32
    assert all(n % 16 == 0 for n in per_rack.values())  # whole 16-pod rack slices
    assert len({labels[d.values[0]][BLOCK] for d in ps.assignment.domains}) == 1


def test_samples_state_the_requests_the_readme_describes() -> None:
    docs = {d["metadata"]["name"]: d for d in documents(ADVANCED)}
    requests = [podset_request(ps.name, ps.count, ps.template) for ps in podsets_of(docs["sample-leader-workers"])]
    assert [r.topology for r in requests] == [TopologyRequest(required=RACK, group="lws-0")] * 2
    (ps,) = podsets_of(docs["sample-sliced-job"])
    assert podset_request(ps.name, ps.count, ps.template).topology == TopologyRequest(
        required=BLOCK, slice_layers=(SliceLayer(RACK, 16), SliceLayer("kubernetes.io/hostname", 4))
    )
