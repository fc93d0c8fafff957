"""The topology map from the command line: ``plan -o html`` (a dump), ``capacity --html`` (a
cluster read, here served by a fake read), and ``describe``'s why-not, which must show the
numbers the map shows for the same workload."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from typing import Any

import builders as mk
import map_scene as scene
import pytest
from map_scene import Element, host_key, parse_page
from vocab import RACK

from kueue_tas.cli import capacity as cap
from kueue_tas.cli.cluster_read import ClusterState
from kueue_tas.cli.describe_build import describe_workload
from kueue_tas.cli.describe_output import describe_json, render_text
from kueue_tas.cli.main import main
from kueue_tas.runtime.config import Settings

REQUIRED_RACK = mk.required(mk.RACK)


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def dump(tmp_path: Path) -> str:
    """The default plan cluster (2 blocks x 2 racks x 2 hosts of 4 GPUs) with a Job that fits in
    a rack and one that cannot (9 one-GPU pods in a rack of 8 GPUs)."""
    objects = [*mk.cluster(), mk.job("fits", 6, REQUIRED_RACK), mk.job("nine", 9, REQUIRED_RACK)]
    return mk.write_yaml(tmp_path / "dump.yaml", objects)


def hosts(doc: Element) -> list[Element]:
    return [h for h in doc.find_all("i", "h") if "data-node" in h.attrs]


def test_plan_html_draws_every_node_and_each_workloads_domains_and_why_not(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = dump(tmp_path)
    code, out, err = run(capsys, "plan", "-f", path, "-o", "html")
    assert (code, err) == (0, "")
    code, js, _ = run(capsys, "plan", "-f", path, "-o", "json")
    plan = {w["name"]: w["podSets"][0] for w in json.loads(js)["workloads"]}
    doc = parse_page(out)
    assert sorted(h.attrs["data-node"] for h in hosts(doc)) == sorted(
        f"b{b}-r{r}-h{h}" for b in range(2) for r in range(2) for h in range(2)
    )
    tiles = {host_key(h): h for h in hosts(doc)}
    # The placed Job: its rows are plan -o json's domains, each a tile of the map.
    section = doc.find("section", "wl-detail", data_workload="team-a/fits")
    rows = {r.attrs["data-domain"]: int(r.find("td", "assigned").all_text()) for r in section.find_all("tr", "dom")}
    assert {k.rsplit("/", 1)[1]: n for k, n in rows.items()} == {
        d["values"][-1]: d["count"] for d in plan["fits"]["domains"]
    }
    assert set(rows) <= set(tiles)
    # The Job that does not fit: plan's message, and its numbers in the why-not.
    section = doc.find("section", "wl-detail", data_workload="team-a/nine")
    assert section.find("p", "message").all_text() == plan["nine"]["message"]
    fit, needed = re.search(r"only (\d+) out of (\d+)", plan["nine"]["message"]).groups()  # type: ignore[union-attr]
    why = section.find(cls="why-not")
    assert (why.find(cls="wn-fit").all_text(), why.find(cls="wn-needed").all_text()) == (fit, needed)
    states = {li.attrs["data-workload"]: li.classes for li in doc.find_all("li", "wl")}
    assert "st-planned" in states["team-a/fits"] and "st-notfit" in states["team-a/nine"]


def test_plan_html_options(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = dump(tmp_path)
    code, out, _ = run(capsys, "plan", "-f", path, "-o", "html", "--resource", "cpu", "--shape", "cpu=4")
    assert code == 0
    doc = parse_page(out)
    assert doc.find("table", "slots").attrs["data-shape"] == "cpu=4"
    assert doc.find("option", selected="").attrs["value"] == "cpu"
    code, out, err = run(capsys, "plan", "-f", path, "-o", "html", "--shape", "gpu")
    assert (code, out) == (1, "")
    assert err == "error: --shape: pod shape 'gpu': 'gpu' is not resource=quantity\n"


def fake_read(monkeypatch: pytest.MonkeyPatch) -> None:
    state = ClusterState(scene.kueue_config(), scene.nodes(), scene.pods(), scene.workloads())
    monkeypatch.setattr(cap, "load_settings", lambda config, kubeconfig: Settings())
    monkeypatch.setattr(cap, "run_read", lambda settings, read: state)


def test_capacity_html_writes_the_page(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_read(monkeypatch)
    target = tmp_path / "map.html"
    code, out, err = run(capsys, "capacity", "--html", str(target))
    assert (code, err) == (0, "")
    assert out == f"wrote {target}: 1 flavor(s), 6 node(s), 3 workload(s)\n"
    doc = parse_page(target.read_text(encoding="utf-8"))
    assert sorted(h.attrs["data-node"] for h in hosts(doc)) == sorted(scene.DRAWN)
    code, out, _ = run(capsys, "capacity", "--html", "-", "--topology", "none")
    assert code == 1 and out == ""
    code, out, err = run(capsys, "capacity", "--html", str(tmp_path / "no" / "such" / "dir.html"))
    assert code == 1 and err.startswith(f"error: --html {tmp_path / 'no' / 'such' / 'dir.html'}: ")


# --- describe's why-not is the map's ------------------------------------------------------------


def describe_big() -> Any:
    tas = scene.kueue()
    big = next(w for w in scene.workloads() if w.name == "big")
    return describe_workload(big, tas, scene.nodes(), [], capacity=scene.capacity(tas))


def test_describe_why_not_equals_the_maps() -> None:
    (ps,) = describe_big().podsets
    assert ps.trial is not None and ps.trial.why_not is not None
    on_map = next(w for w in scene.model().workloads if w.key == "ns/big").podsets[0].why_not
    assert ps.trial.why_not == on_map


def test_describe_prints_the_why_not_after_its_existing_lines() -> None:
    text = render_text(describe_big())
    lines = text.splitlines()
    at = lines.index("    why not (placing it now):")
    assert lines[at + 1 :][:2] == [
        "      fits 2 of 3 pod(s) in one domain of cloud.provider.com/topology-rack; the best, b2/b2-r3, holds 2",
        "      nodes: 4 in the topology, 2 excluded (resource nvidia.com/gpu: 1, taint maint=soon:NoSchedule: 1)",
    ]
    assert lines[at - 1] == "    not placed: check tas is Retry"  # the PodSet's own line stays


def test_describe_json_carries_the_why_not_of_a_podset_that_does_not_fit() -> None:
    (ps,) = json.loads(json.dumps(describe_json(describe_big())))["podSets"]
    assert ps["whyNot"] == {
        "topology": "topo",
        "level": RACK,
        "domain": ["b2", "b2-r3"],
        "domainFit": 2,
        "fit": 2,
        "needed": 3,
        "unit": "pod",
        "oneDomain": True,
        "totalNodes": 4,
        "excluded": 2,
        "reasons": {"resource nvidia.com/gpu": 1, "taint maint=soon:NoSchedule": 1},
    }


def test_describe_of_a_workload_that_would_fit_says_so() -> None:
    tas = scene.kueue()
    small = next(w for w in scene.workloads() if w.name == "small")
    text = render_text(describe_workload(small, tas, scene.nodes(), [], capacity=scene.capacity(tas)))
    assert "    placing it now: would fit, in 1 domain(s)\n" in text


def test_describe_of_an_admitted_workload_tries_nothing() -> None:
    tas = scene.kueue()
    train = next(w for w in scene.workloads() if w.name == "train")
    desc = describe_workload(train, tas, scene.nodes(), scene.pods(), capacity=scene.capacity(tas))
    assert desc.podsets[0].trial is None and "why not" not in render_text(desc)


def test_capacity_run_without_html_is_unchanged(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    fake_read(monkeypatch)
    code, out, _ = run(capsys, "capacity")
    assert code == 0 and out.startswith(
        "Topology topo: cloud.provider.com/topology-block > cloud.provider.com/topology-rack > kubernetes.io/hostname\n"
    )


def fake_describe_read(monkeypatch: pytest.MonkeyPatch, *, may_list_everything: bool) -> None:
    """``describe``'s reads served from ``map_scene``; listing every pod (the capacity read) may be refused."""
    from kueue_tas.cli import describe as describe_cli

    big = next(w for w in scene.workloads() if w.name == "big")

    async def read_for_capacity(api: Any, prefix: str, gate: str) -> ClusterState:
        if not may_list_everything:
            raise describe_cli.ClusterReadError("cannot list pods: forbidden")
        return ClusterState(scene.kueue_config(), scene.nodes(), scene.pods(), scene.workloads())

    async def value(v: Any) -> Any:
        return v

    monkeypatch.setattr(describe_cli, "load_settings", lambda config, kubeconfig: Settings())
    monkeypatch.setattr(describe_cli, "read_workload", lambda api, ns, name, job: value(big))
    monkeypatch.setattr(describe_cli, "read_kueue_config", lambda api, warnings: value(scene.kueue_config()))
    monkeypatch.setattr(describe_cli, "read_nodes", lambda api, warnings: value(scene.nodes()))
    monkeypatch.setattr(describe_cli, "read_workload_pods", lambda api, wl, prefix, gate: value([]))
    monkeypatch.setattr(describe_cli, "read_events", lambda api, wl: value([]))
    monkeypatch.setattr(describe_cli, "read_for_capacity", read_for_capacity)
    monkeypatch.setattr(describe_cli, "run_read", lambda settings, read: asyncio.run(read(None)))


def test_describe_command_places_a_pending_workload(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    fake_describe_read(monkeypatch, may_list_everything=True)
    code, out, err = run(capsys, "describe", "workload", "big", "-n", "ns")
    assert (code, err) == (0, "")
    assert (
        "    why not (placing it now):\n      fits 2 of 3 pod(s) in one domain of cloud.provider.com/topology-rack"
    ) in out


def test_describe_without_leave_to_list_every_pod_shows_the_rest(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    fake_describe_read(monkeypatch, may_list_everything=False)
    code, out, err = run(capsys, "describe", "workload", "big", "-n", "ns")
    assert code == 0 and "why not" not in out and out.startswith("Workload ns/big\n")
    assert err == "warning: not placing it now (why not): cannot list pods: forbidden\n"
