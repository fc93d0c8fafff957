"""Hostile input for ``kueue-tas plan``: each row a file set an adversary (or a tired user) could
give it, run through the real command under a wall-clock guard.

A refused row exits 1 with nothing on stdout and ONE stderr line, no traceback, naming the
object, the field and the problem (its distinctive fragments are asserted). An accepted row
exits 0 and its answer is checked: a wrong answer with exit 0 is as bad as a crash. A row that
hangs fails on the alarm instead of blocking the suite.
"""

from __future__ import annotations

import io
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any

import builders as mk
import pytest

from kueue_tas.cli.main import main

# Per run: the slowest legitimate row (100k pods on 1000 nodes) takes about a second alone.
SECONDS = 20
Args = list[str]


@dataclass(frozen=True)
class Outcome:
    code: int
    out: str
    err: str

    @property
    def lines(self) -> list[str]:
        return [line for line in self.err.splitlines() if line.strip()]

    @property
    def workloads(self) -> dict[str, dict[str, Any]]:
        return {w["name"]: w for w in json.loads(self.out)["workloads"]}


@dataclass(frozen=True)
class Row:
    id: str
    make: Callable[[Path], Args]  # writes the files; returns the arguments after "plan"
    fragments: tuple[str, ...]  # in the error line (code 1) or in a warning line (code 0)
    code: int = 1
    check: Callable[[Outcome], None] | None = None  # the answer of an accepted row
    marks: tuple[pytest.MarkDecorator, ...] = ()


# --- file builders ---------------------------------------------------------------------------


def _write(tmp: Path, name: str, content: str | bytes) -> str:
    path = tmp / name
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8")
    return str(path)


def text(content: str | bytes, name: str = "input.yaml") -> Callable[[Path], Args]:
    return lambda tmp: ["-f", _write(tmp, name, content)]


def objects(*objs: dict[str, Any]) -> Callable[[Path], Args]:
    """The objects alone, in one file."""
    return lambda tmp: ["-f", mk.write_yaml(tmp / "input.yaml", list(objs)), "-o", "json"]


def on_cluster(*objs: dict[str, Any], **grid: Any) -> Callable[[Path], Args]:
    """The default plan cluster (2 blocks x 2 racks x 2 hosts of 4 GPUs) in one file, ``objs`` in another."""

    def make(tmp: Path) -> Args:
        cluster = mk.write_yaml(tmp / "cluster.yaml", mk.cluster(**grid))
        return ["-f", cluster, "-f", mk.write_yaml(tmp / "jobs.yaml", list(objs)), "-o", "json"]

    return make


def _annotated(obj: dict[str, Any], annotations: dict[str, Any]) -> dict[str, Any]:
    """``obj`` with ``annotations`` in its own metadata (where a workload-wide constraint goes)."""
    obj["metadata"]["annotations"] = annotations
    return obj


def job_with(path: str, value: Any, n: int = 1) -> dict[str, Any]:
    """Job ``a`` of ``n`` pods with ``value`` at ``path`` (dots, below the Job) replaced."""
    j = mk.job("a", n, mk.required(mk.RACK))
    *parents, leaf = path.split(".")
    at: Any = j
    for part in parents:
        at = at[int(part)] if isinstance(at, list) else at[part]
    if isinstance(at, list):
        at[int(leaf)] = value
    else:
        at[leaf] = value
    return j


def nested(depth: int, leaf: Any = "x") -> Any:
    value = leaf
    for _ in range(depth):
        value = {"a": value}
    return value


def billion_laughs(levels: int = 9, fan: int = 10) -> str:
    lines = ["apiVersion: v1", "kind: Pod", "metadata:", "  name: lol", "  namespace: team-a", "  annotations:"]
    lines.append('    l0: &l0 ["lol"' + ', "lol"' * (fan - 1) + "]")
    lines += [f"    l{i}: &l{i} [" + ", ".join([f"*l{i - 1}"] * fan) + "]" for i in range(1, levels)]
    return "\n".join(lines) + "\n"


def topology_file(levels: list[str], *extra: dict[str, Any]) -> Callable[[Path], Args]:
    return objects(mk.topology(levels=levels), mk.flavor(), mk.admission_check(), mk.cluster_queue(), *extra)


def big_workload(pods: int, podsets: int = 1) -> dict[str, Any]:
    sets = [mk.podset(f"ps{i}", pods, gpus=0, cpu="10m") for i in range(podsets)]
    return mk.workload("big", podsets=sets, admitted_flavor="gpu")


def wide_cluster(blocks: int, racks: int, hosts: int, *objs: dict[str, Any]) -> Callable[[Path], Args]:
    def make(tmp: Path) -> Args:
        nodes = mk.grid_nodes(blocks, racks, hosts)
        cluster = mk.write_yaml(tmp / "cluster.yaml", [*mk.kueue_objects(), *nodes])
        return ["-f", cluster, "-f", mk.write_yaml(tmp / "jobs.yaml", list(objs)), "-o", "json"]

    return make


def twice(first: list[dict[str, Any]], second: list[dict[str, Any]]) -> Callable[[Path], Args]:
    def make(tmp: Path) -> Args:
        a = mk.write_yaml(tmp / "a.yaml", first)
        b = mk.write_yaml(tmp / "b.yaml", second)
        return ["-f", a, "-f", b, "-o", "json"]

    return make


def same_file_twice(*objs: dict[str, Any]) -> Callable[[Path], Args]:
    def make(tmp: Path) -> Args:
        cluster = mk.write_yaml(tmp / "cluster.yaml", mk.cluster())
        jobs = mk.write_yaml(tmp / "jobs.yaml", list(objs))
        return ["-f", cluster, "-f", cluster, "-f", jobs, "-o", "json"]

    return make


# --- answers of accepted rows ------------------------------------------------------------------


def fits(name: str, expected: bool, pods: int | None = None) -> Callable[[Outcome], None]:
    def check(res: Outcome) -> None:
        wl = res.workloads[name]
        assert wl["fits"] is expected, wl
        if pods is not None:
            assert sum(d["count"] for ps in wl["podSets"] for d in ps["domains"]) == pods, wl

    return check


def no_workloads(res: Outcome) -> None:
    assert res.workloads == {}


# --- the table ---------------------------------------------------------------------------------

NODE = mk.node("n1")
LEVELS_17 = [f"example.com/l{i}" for i in range(17)]
POD_ANNOTATED = mk.pod("sneaky", "b0-r0-h0", gpus=4, annotations={mk.REQUIRED: mk.RACK})
ADMITTED_NEGATIVE = mk.workload("w", 4, admitted_flavor="gpu")
ADMITTED_NEGATIVE["status"]["admission"]["podSetAssignments"][0]["count"] = -1
BAD_POD = mk.pod("p", "b0-r0-h0")
BAD_POD["spec"]["containers"][0]["resources"] = []
_PLAIN_JOB = mk.job("a", 1, mk.required(mk.RACK))

ROWS: list[Row] = [
    # --- text that is not YAML or JSON ---
    Row("yaml-tab-indent", text("a:\n\t- b\n"), ("input.yaml", "line 2", "not valid YAML")),
    Row("yaml-unclosed-flow", text("apiVersion: v1\nkind: [Node\n"), ("input.yaml", "not valid YAML")),
    Row("yaml-nul-bytes", text("\x00\x01\x02"), ("input.yaml", "not valid YAML", "control characters")),
    Row("not-utf8", text(b"kind: \xff\xfe\n"), ("input.yaml", "not UTF-8")),
    Row("missing-file", lambda tmp: ["-f", str(tmp / "nope.yaml")], ("nope.yaml", "cannot read")),
    Row("directory-as-file", lambda tmp: ["-f", str(tmp)], ("cannot read",)),
    Row("yaml-undefined-alias", text("a: *nope\n"), ("input.yaml", "not valid YAML", "undefined alias")),
    Row("json-5000-digit-number", text('{"kind": ' + "9" * 5000 + "}", "n.json"), ("n.json", "not valid JSON")),
    Row("yaml-5000-digit-number", text("kind: " + "9" * 5000 + "\n"), ("input.yaml", "not valid YAML")),
    Row("yaml-month-13", text("when: 2024-13-45\n"), ("input.yaml", "not valid YAML", "month")),
    # --- nesting and alias bombs ---
    Row("json-array-nested-100k", text("[" * 100_000 + "]" * 100_000, "deep.json"), ("deep.json", "deeper than 100")),
    Row("json-object-nested-500", text(json.dumps(nested(500)), "deep.json"), ("deep.json", "deeper than 100")),
    Row("yaml-flow-nested-100k", text("a: " + "[" * 100_000 + "]" * 100_000), ("line 1", "deeper than 100")),
    Row("yaml-block-nested-3000", text("".join("  " * i + "a:\n" for i in range(3000))), ("deeper than 100",)),
    Row(
        "yaml-deep-inside-job-template",
        on_cluster(job_with("spec.template.spec.extra", nested(150))),
        ("jobs.yaml", "deeper than 100"),
    ),
    Row("yaml-billion-laughs", text(billion_laughs()), ("input.yaml", "aliases expand", "100000 nodes")),
    Row(
        "yaml-billion-laughs-flow",
        text(
            'a: &a ["x","x","x","x","x","x","x","x","x","x"]\n'
            + "".join(f"{chr(98 + i)}: &{chr(98 + i)} [" + ",".join([f"*{chr(97 + i)}"] * 10) + "]\n" for i in range(8))
        ),
        ("aliases expand",),
    ),
    Row("yaml-alias-cycle", text("a: &a [1, *a]\n"), ("alias *a", "contains it")),
    Row(
        "yaml-alias-deepens",
        text("a: &a " + json.dumps(nested(90)) + "\nb: " + "[" * 20 + "*a" + "]" * 20 + "\n"),
        ("deeper than 100", "alias *a"),
    ),
    # --- documents that are not Kubernetes objects ---
    Row("scalar-document", text("hello\n"), ("input.yaml", "document 1", "expected a Kubernetes object", "string")),
    Row("list-of-scalars", text("apiVersion: v1\nkind: List\nitems: [1, 2]\n"), ("List: items[0]", "got number")),
    Row("list-items-scalar", text("apiVersion: v1\nkind: List\nitems: 5\n"), ("List: items", "expected an array")),
    Row("json-array-of-numbers", text("[1, 2, 3]", "a.json"), ("a.json", "document 1[0]", "expected a Kubernetes")),
    Row("metadata-a-string", text("apiVersion: v1\nkind: Node\nmetadata: n1\n"), ("Node", "metadata", "mapping")),
    Row(
        "node-without-name", objects(*mk.kueue_objects(), mk.node("")), ("Node/<no name>", "metadata.name", "required")
    ),
    Row("job-without-name", on_cluster(mk.job("", 1)), ("Job/<no name>", "metadata.name", "required")),
    Row("name-a-number", objects({"apiVersion": "v1", "kind": "Node", "metadata": {"name": 5}}), ("metadata.name",)),
    Row("label-a-number", objects({**NODE, "metadata": {"name": "n1", "labels": {"a": 5}}}), ("Node/n1", "labels")),
    Row(
        "unknown-kind-skipped",
        on_cluster({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}}, _PLAIN_JOB),
        ("skipping v1 ConfigMap/c", "kind not read"),
        code=0,
        check=fits("a", True, 1),
    ),
    # --- the same object twice ---
    Row(
        "same-dump-given-twice",
        same_file_twice(mk.job("a", 40)),  # 40 pods on 32 GPUs: twice the nodes would "fit"
        ("cluster.yaml", "identical copies read once", "Topology/topo"),
        code=0,
        check=fits("a", False),
    ),
    Row(
        "node-in-two-files-identical",
        twice(mk.cluster(), [*mk.grid_nodes(), mk.job("a", 40)]),
        ("b.yaml repeats ", "a.yaml: 8 identical copies read once", "Node/b0-r0-h0"),
        code=0,
        check=fits("a", False),
    ),
    Row(
        "node-in-two-files-different",
        twice(mk.cluster(), [mk.node("b0-r0-h0", gpus=8)]),
        ("Node/b0-r0-h0", "given twice, differently", "a.yaml (document 5)", "b.yaml (document 1)"),
    ),
    Row(
        "topology-twice-different",
        twice(mk.kueue_objects(), [mk.topology(levels=[mk.RACK, mk.HOST])]),
        ("Topology/topo", "given twice, differently"),
    ),
    # --- quantities ---
    # Issue 27 (defect 8): an amount beyond what Kubernetes counts is more than any pod asks for;
    # the node is capped at that and used, never refused (the controller took it for deleted).
    Row(
        "allocatable-1e30",
        objects(*mk.kueue_objects(), mk.node("n1", allocatable={"cpu": "1e30", mk.GPU: "4", "pods": "8"}), _PLAIN_JOB),
        (),
        code=0,
        check=fits("a", True, pods=1),
    ),
    Row(
        "allocatable-2^63-milli",
        objects(
            *mk.kueue_objects(), mk.node("n1", allocatable={"pods": "9223372036854775808m", mk.GPU: "10Ei"}), _PLAIN_JOB
        ),
        (),
        code=0,
        check=fits("a", True, pods=1),
    ),
    Row(
        "allocatable-word",
        objects(*mk.kueue_objects(), mk.node("n1", allocatable={"memory": "lots"}), _PLAIN_JOB),
        ("Node/n1", "status.allocatable", "invalid quantity 'lots'"),
    ),
    Row(
        "allocatable-a-list",
        objects(*mk.kueue_objects(), {**NODE, "status": {"allocatable": ["cpu"]}}),
        ("Node/n1", "status.allocatable"),
    ),
    Row("request-2^70", on_cluster(mk.job("a", 1, cpu=str(2**70))), ("Job/team-a/a", "'cpu'", "out of range")),
    Row("request-1.2.3", on_cluster(mk.job("a", 1, cpu="1.2.3")), ("Job/team-a/a", "invalid quantity '1.2.3'")),
    Row("request-infinite", on_cluster(mk.job("a", 1, cpu=".inf")), ("Job/team-a/a", "invalid quantity")),
    Row(
        "request-boolean",
        on_cluster(job_with("spec.template.spec.containers.0.resources.requests", {"cpu": True})),
        ("Job/team-a/a", "expected a string or a number"),
    ),
    Row(
        "running-pod-request-2^70",
        on_cluster(mk.pod("p", "b0-r0-h0", requests={"cpu": str(2**70)}), _PLAIN_JOB),
        ("Pod/team-a/p", "out of range"),
    ),
    # --- counts ---
    Row("parallelism-negative", on_cluster(mk.job("a", -3)), ("Job/a", "spec.parallelism", "at least 0, got -3")),
    Row(
        "completions-negative", on_cluster(mk.job("a", 2, completions=-1)), ("Job/a", "spec.completions", "at least 0")
    ),
    Row("parallelism-2^70", on_cluster(mk.job("a", 2**70)), ("Job/a", "spec.parallelism", "at most 2147483647")),
    Row("parallelism-a-word", on_cluster(mk.job("a", "many")), ("Job/a", "spec.parallelism", "expected an integer")),  # type: ignore[arg-type]
    Row("parallelism-2.5", on_cluster(mk.job("a", 2.5)), ("Job/a", "spec.parallelism", "expected an integer")),  # type: ignore[arg-type]
    Row(
        "workload-count-negative",
        on_cluster(mk.workload("w", -4)),
        ("Workload/team-a/w", "spec.podSets[0].count", "at least 0, got -4"),
    ),
    Row(
        "workload-count-2^64",
        on_cluster(mk.workload("w", 2**64)),
        ("Workload/team-a/w", "spec.podSets[0].count", "at most 2147483647"),
    ),
    Row(
        "workload-admitted-count-negative",
        on_cluster(ADMITTED_NEGATIVE),
        ("Workload/team-a/w", "status.admission.podSetAssignments[0].count", "at least 0, got -1"),
    ),
    Row(
        "jobset-replicas-negative",
        on_cluster(mk.jobset("js", [mk.replicated_job("w", -1, 1, 1)])),
        ("JobSet/js", "spec.replicatedJobs[0].replicas", "at least 0"),
    ),
    Row(
        "jobset-pods-beyond-int32",
        on_cluster(mk.jobset("js", [mk.replicated_job("w", 2**20, 2**20, 2**20)])),
        ("JobSet/team-a/js", "spec.replicatedJobs[0]", "replicas x pods per Job is 1099511627776"),
    ),
    Row("zero-pods-fit", on_cluster(mk.job("a", 0, mk.required(mk.RACK))), (), code=0, check=fits("a", True, 0)),
    Row(
        "workload-100k-pods",
        lambda tmp: wide_cluster(10, 10, 10, big_workload(100_000))(tmp),  # 1000 nodes x 110 pods
        (),
        code=0,
        check=fits("big", True, 100_000),
    ),
    Row(
        "workload-5000-podsets",
        lambda tmp: on_cluster(big_workload(1, podsets=5000))(tmp),
        ("Workload/team-a/big", "spec.podSets", "5000 entries, at most 18"),
    ),
    Row(
        "jobset-5000-replicated-jobs",
        lambda tmp: on_cluster(mk.jobset("js", [mk.replicated_job(f"r{i}", 1, 1, 1) for i in range(5000)]))(tmp),
        ("JobSet/team-a/js", "spec.replicatedJobs", "5000 entries", "at most 18 PodSets"),
    ),
    # --- pod templates of the wrong shape ---
    Row("template-a-list", on_cluster(job_with("spec.template", [1])), ("Job/a", "spec.template", "got array")),
    Row(
        "template-metadata-a-list",
        on_cluster(job_with("spec.template.metadata", [])),
        ("Job/team-a/a", "spec.template.metadata: expected a mapping, got array"),
    ),
    Row(
        "template-annotations-a-list",
        on_cluster(job_with("spec.template.metadata.annotations", ["x"])),
        ("Job/team-a/a", "spec.template.metadata.annotations: expected a mapping, got array"),
    ),
    Row(
        "template-annotation-a-number",
        on_cluster(job_with("spec.template.metadata.annotations", {mk.SLICE_SIZE: 2})),
        ("Job/team-a/a", mk.SLICE_SIZE, "must be a string"),
    ),
    Row(
        "template-spec-a-list",
        on_cluster(job_with("spec.template.spec", [])),
        ("Job/team-a/a", "spec.template.spec: expected a mapping"),
    ),
    Row(
        "containers-a-string",
        on_cluster(job_with("spec.template.spec.containers", "c")),
        ("Job/team-a/a", "spec.template.spec.containers: expected an array, got string"),
    ),
    Row(
        "container-a-number",
        on_cluster(job_with("spec.template.spec.containers.0", 5)),
        ("Job/team-a/a", "spec.template.spec.containers[0]: expected a mapping, got number"),
    ),
    Row(
        "resources-a-list",
        on_cluster(job_with("spec.template.spec.containers.0.resources", [])),
        ("Job/team-a/a", "spec.template.spec.containers[0].resources: expected a mapping"),
    ),
    Row(
        "init-container-requests-a-list",
        on_cluster(job_with("spec.template.spec.initContainers", [{"resources": {"requests": ["cpu"]}}])),
        ("Job/team-a/a", "spec.template.spec.initContainers[0].resources.requests: expected a mapping"),
    ),
    Row(
        "node-selector-a-list",
        on_cluster(job_with("spec.template.spec.nodeSelector", ["a"])),
        ("Job/team-a/a", "spec.template.spec.nodeSelector: expected a mapping"),
    ),
    Row(
        "affinity-a-list",
        on_cluster(job_with("spec.template.spec.affinity", [])),
        ("Job/team-a/a", "spec.template.spec.affinity: expected a mapping"),
    ),
    Row(
        "selector-term-a-number",
        on_cluster(
            job_with(
                "spec.template.spec.affinity",
                {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [5]}}},
            )
        ),
        ("Job/team-a/a", "nodeSelectorTerms[0]: expected a mapping, got number"),
    ),
    Row(
        "tolerations-a-string",
        on_cluster(job_with("spec.template.spec.tolerations", "all")),
        ("Job/team-a/a", "spec.template.spec.tolerations: expected an array"),
    ),
    Row(
        "toleration-a-number",
        on_cluster(job_with("spec.template.spec.tolerations", [7])),
        ("Job/team-a/a", "spec.template.spec.tolerations[0]: expected a mapping"),
    ),
    Row(
        "running-pod-resources-a-list",
        on_cluster(BAD_POD, _PLAIN_JOB),
        ("Pod/team-a/p", "spec.containers[0].resources: expected a mapping, got array"),
    ),
    Row(
        "workload-template-containers-a-map",
        on_cluster(mk.workload("w", 1, podsets=[mk.podset(template={"spec": {"containers": {"c": 1}}})])),
        ("Workload/team-a/w", "spec.podSets[0].template.spec.containers: expected an array"),
    ),
    # --- Topologies ---
    Row("topology-17-levels", topology_file(LEVELS_17), ("Topology/topo", "spec.levels", "17 entries, at most 16")),
    Row(
        "topology-10000-levels",
        lambda tmp: topology_file([f"example.com/l{i}" for i in range(10_000)])(tmp),
        ("Topology/topo", "spec.levels", "10000 entries"),
    ),
    Row("topology-no-levels", topology_file([]), ("Topology/topo", "spec.levels", "at least one level")),
    Row(
        "topology-level-twice",
        topology_file([mk.RACK, mk.RACK]),
        ("Topology/topo", "spec.levels[1].nodeLabel", "must be unique"),
    ),
    Row(
        "topology-level-not-a-label",
        topology_file(["bad key!"]),
        ("Topology/topo", "spec.levels[0].nodeLabel", "invalid label key 'bad key!'"),
    ),
    Row(
        "topology-hostname-not-lowest",
        topology_file([mk.HOST, mk.RACK]),
        ("Topology/topo", "spec.levels[0].nodeLabel", "only be used at the lowest level"),
    ),
    Row(
        "topology-level-names-not-pairs",
        objects({**mk.topology(), "metadata": {"name": "topo", "annotations": {"kueue-tas.io/level-names": "rack"}}}),
        ("Topology/topo", "metadata.annotations[kueue-tas.io/level-names]", "expected name=label"),
    ),
    Row(
        "topology-level-names-100kB",
        objects(
            {**mk.topology(), "metadata": {"name": "topo", "annotations": {"kueue-tas.io/level-names": "r=" * 50_000}}}
        ),
        ("Topology/topo", "kueue-tas.io/level-names", "(99998 characters) is not a level"),
    ),
    Row(
        "workload-topology-100kB",
        on_cluster(_annotated(mk.job("a", 1), {"kueue-tas.io/workload-required-topology": "z" * 100_000})),
        ("Job/team-a/a", "workload: annotation 'kueue-tas.io/workload-required-topology': invalid value"),
    ),
    Row(
        "workload-topology-broader-podset",
        on_cluster(
            _annotated(mk.job("a", 2, mk.required(mk.BLOCK)), {"kueue-tas.io/workload-required-topology": mk.RACK})
        ),
        ("Job/team-a/a", 'its required level "cloud.provider.com/topology-block" is broader than'),
    ),
    Row(
        "workload-topology-not-a-string",
        on_cluster(_annotated(mk.job("a", 1), {"kueue-tas.io/workload-preferred-topology": ["rack"]})),
        ("Job/a: metadata.annotations.kueue-tas.io/workload-preferred-topology", "Input should be a valid string"),
    ),
    Row(
        "level-name-unknown",
        on_cluster(mk.job("a", 1, mk.required("rak"))),
        ("Job/team-a/a", 'unknown topology level "rak"', "level names: host"),
    ),
    Row(
        "topology-levels-a-string",
        objects({**mk.topology(), "spec": {"levels": "rack"}}),
        ("Topology/topo", "spec.levels", "expected an array"),
    ),
    Row(
        "check-on-missing-topology",
        objects(
            mk.flavor(), mk.admission_check(topology_name="nope"), mk.cluster_queue(), *mk.grid_nodes(), _PLAIN_JOB
        ),
        ("Job/team-a/a", "Topology 'nope'", "not in the input"),
    ),
    Row(
        "unknown-level",
        on_cluster(mk.job("a", 1, mk.required("example.com/nope"))),
        ("Job/team-a/a", f"annotations[{mk.REQUIRED}]", 'unknown topology level "example.com/nope"'),
    ),
    # --- slices ---
    Row(
        "slice-size-does-not-divide",
        on_cluster(mk.job("a", 5, {mk.REQUIRED: mk.BLOCK, mk.SLICE_LEVEL: mk.RACK, mk.SLICE_SIZE: "2"})),
        ("Job/team-a/a", mk.SLICE_SIZE, '"2"', "must evenly divide pod set count 5"),
    ),
    Row(
        "slice-size-field-does-not-divide",
        on_cluster(
            mk.workload(
                "w",
                podsets=[
                    mk.podset(
                        count=7,
                        topology_request={
                            "required": mk.BLOCK,
                            "podSetSliceRequiredTopology": mk.RACK,
                            "podSetSliceSize": 3,
                        },
                    )
                ],
                admitted_flavor="gpu",
            )
        ),
        ("Workload/team-a/w", "spec.podSets[0].topologyRequest.podSetSliceSize", "must evenly divide pod set count 7"),
    ),
    Row(
        "slice-size-zero",
        on_cluster(mk.job("a", 4, {mk.REQUIRED: mk.BLOCK, mk.SLICE_LEVEL: mk.RACK, mk.SLICE_SIZE: "0"})),
        ("Job/team-a/a", mk.SLICE_SIZE, "greater than or equal to 1"),
    ),
    Row(
        "slice-size-beyond-int32",
        on_cluster(mk.job("a", 4, {mk.REQUIRED: mk.BLOCK, mk.SLICE_LEVEL: mk.RACK, mk.SLICE_SIZE: "9" * 20})),
        ("Job/team-a/a", mk.SLICE_SIZE, "must be a numeric value"),
    ),
    Row(
        "slice-size-above-count",
        on_cluster(mk.job("a", 4, {mk.REQUIRED: mk.BLOCK, mk.SLICE_LEVEL: mk.RACK, mk.SLICE_SIZE: "8"})),
        ("Job/team-a/a", mk.SLICE_SIZE, "must not be greater than pod set count 4"),
    ),
    # --- node labels the domains are told apart by ---
    Row(
        "hostname-70-characters",
        objects(*mk.kueue_objects(), mk.node("h" * 70), _PLAIN_JOB),
        ("Node/" + "h" * 70, f"metadata.labels[{mk.HOST}]", "no more than 63 characters"),
    ),
    Row(
        "rack-label-with-comma",
        objects(*mk.kueue_objects(), mk.node("n1", rack="r1,r2"), mk.node("n2", rack="r1"), _PLAIN_JOB),
        ("Node/n1", f"metadata.labels[{mk.RACK}]", "'r1,r2'", "alphanumeric"),
    ),
    Row(
        "rack-label-with-newline",
        objects(*mk.kueue_objects(), mk.node("n1", rack="r1\n"), _PLAIN_JOB),
        ("Node/n1", f"metadata.labels[{mk.RACK}]", "alphanumeric"),
    ),
    # --- silently ignored before ---
    Row(
        "unknown-key-under-our-prefix",
        on_cluster(mk.job("a", 1, {"kueue-tas.io/podset-requird-topology": mk.RACK})),
        ("Job/team-a/a", "kueue-tas.io/podset-requird-topology", "ignored", f"did you mean {mk.REQUIRED}"),
        code=0,
        check=fits("a", True, 1),
    ),
    Row(
        # A pod nobody manages that carries our annotation still takes its node's 4 GPUs: of the
        # cluster's 32, 28 are left, so three rack-sized (8-pod) jobs fit and a fourth does not.
        "unmanaged-pod-with-our-annotation",
        on_cluster(POD_ANNOTATED, *(mk.job(n, 8, mk.required(mk.RACK)) for n in "abcd")),
        (),
        code=0,
        check=lambda res: _fit_list(res, "abcd", [True, True, True, False]),
    ),
]


# --- metadata, annotations, labels and spec of the wrong type at every level (issue 27, defect 10:
# a Job whose spec.template.metadata was a string printed a traceback) --------------------------


def _with(obj: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    """``obj`` with ``value`` at ``path`` (dots; numbers index arrays)."""
    *parents, leaf = path.split(".")
    at: Any = obj
    for part in parents:
        at = at[int(part)] if isinstance(at, list) else at[part]
    if isinstance(at, list):
        at[int(leaf)] = value
    else:
        at[leaf] = value
    return obj


def _shown(path: str) -> str:
    """A field path as an error line shows it: ``spec.podSets[0].template``."""
    return re.sub(r"\.(\d+)", r"[\1]", path)


_OWNERS: dict[str, tuple[Callable[[], dict[str, Any]], str, str, tuple[str, ...]]] = {
    # kind -> (the object, how a line names it once its metadata is read, the pod template's path,
    # the levels between the object's spec and that template)
    "Job": (lambda: mk.job("a", 1, mk.required(mk.RACK)), "Job/team-a/a", "spec.template", ()),
    "JobSet": (
        lambda: mk.jobset("js", [mk.replicated_job("r", 1, 1, 1, mk.required(mk.RACK))]),
        "JobSet/team-a/js",
        "spec.replicatedJobs.0.template.spec.template",
        (
            "spec.replicatedJobs.0",
            "spec.replicatedJobs.0.template",
            "spec.replicatedJobs.0.template.metadata",
            "spec.replicatedJobs.0.template.spec",
        ),
    ),
    "Workload": (
        lambda: mk.workload("w", 1, mk.required(mk.RACK)),
        "Workload/team-a/w",
        "spec.podSets.0.template",
        ("spec.podSets.0",),
    ),
}


def _wrong_type_rows() -> list[Row]:
    rows = []
    for kind, (make, ref, template, between) in _OWNERS.items():
        short = ref.replace("/team-a", "")  # the object read alone (before its namespace is defaulted)
        object_level = ["metadata.annotations", "metadata.labels", "spec", *between, template]
        template_level = [f"{template}.metadata", f"{template}.metadata.annotations", f"{template}.metadata.labels"]
        template_level.append(f"{template}.spec")
        for path, value in [(p, v) for p in object_level + template_level for v in ("x", 7)]:
            name = f"{kind.lower()}-{path}-a-{'string' if isinstance(value, str) else 'number'}"
            shown = _shown(path)
            who = ref if path in template_level else short
            rows.append(Row(name, on_cluster(_with(make(), path, value)), (who, f"{shown}: expected a mapping")))
        rows.append(
            Row(f"{kind.lower()}-metadata-a-string", on_cluster(_with(make(), "metadata", "x")), (kind, "metadata"))
        )
    return rows


ROWS.extend(_wrong_type_rows())


def _fit_list(res: Outcome, names: str, expected: list[bool]) -> None:
    wls = res.workloads
    assert [wls[n]["fits"] for n in names] == expected, wls


# --- running a row -----------------------------------------------------------------------------


class Hang(Exception):
    pass


def _alarm(signum: int, frame: FrameType | None) -> None:
    raise Hang(f"plan ran longer than {SECONDS * 2} s")


def run_plan(argv: Args, capsys: pytest.CaptureFixture[str]) -> tuple[Outcome, float]:
    """``kueue-tas plan`` in this process, stopped by SIGALRM if it hangs."""
    capsys.readouterr()
    previous = signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(SECONDS * 2)
    start = time.monotonic()
    try:
        code = main(["plan", *argv])
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    elapsed = time.monotonic() - start
    cap = capsys.readouterr()
    return Outcome(code, cap.out, cap.err), elapsed


def assert_outcome(row: Row, res: Outcome) -> None:
    assert "Traceback" not in res.err, res.err
    assert res.code == row.code, (res.code, res.err, res.out[:500])
    if row.code != 0:
        assert res.out == "", res.out[:500]
        assert len(res.lines) == 1, res.err
        line = res.lines[0]
        assert line.startswith("error: "), line
        for fragment in row.fragments:
            assert fragment in line, f"{fragment!r} not in {line!r}"
        return
    assert all(line.startswith("warning: ") for line in res.lines), res.err
    for fragment in row.fragments:
        assert any(fragment in line for line in res.lines), f"{fragment!r} not in {res.err!r}"
    assert row.check is not None, "an accepted row checks its answer"
    row.check(res)


@pytest.fixture
def sandbox(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.setattr(sys, "stdin", io.StringIO(""))
    yield tmp_path


def test_table_has_at_least_60_inputs() -> None:
    assert len(ROWS) >= 60
    assert len({row.id for row in ROWS}) == len(ROWS)


@pytest.mark.parametrize("row", [pytest.param(r, id=r.id, marks=r.marks) for r in ROWS])
def test_hostile_input(row: Row, sandbox: Path, capsys: pytest.CaptureFixture[str]) -> None:
    res, elapsed = run_plan(row.make(sandbox), capsys)
    assert_outcome(row, res)
    assert elapsed < SECONDS, f"{elapsed:.1f} s"


# --- a few through the installed command: a crash of the interpreter itself would show here ---

CONSOLE_ROWS = ["json-array-nested-100k", "yaml-flow-nested-100k", "yaml-billion-laughs", "parallelism-2^70"]


def _console_script() -> str:
    script = Path(sys.executable).with_name("kueue-tas")
    if not script.exists():
        pytest.skip(f"no console script beside {sys.executable}")
    return str(script)


@pytest.mark.parametrize("row_id", CONSOLE_ROWS)
def test_hostile_input_through_the_console_script(row_id: str, tmp_path: Path) -> None:
    row = next(r for r in ROWS if r.id == row_id)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    proc = subprocess.run(
        [_console_script(), "plan", *row.make(tmp_path)],
        capture_output=True,
        text=True,
        timeout=SECONDS * 3,
        env=env,
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == row.code, proc.stderr  # not -11 (SIGSEGV) nor 2 (argparse)
    assert_outcome(row, Outcome(proc.returncode, proc.stdout, proc.stderr))
