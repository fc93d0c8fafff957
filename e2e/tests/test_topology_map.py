"""The topology map in a real browser (headless Chromium, ``e2e/browser.py``), as a person uses it.

* From the running controller: the session's group serves the map on every replica
  (``ControllerGroup(map_server=True)``). A private pool of 1 block x 2 racks x 2 hosts of 8
  GPUs; Job ``train`` (6 x 4 GPUs in one block: both racks) is admitted, Job ``wait`` (2 x 8
  GPUs in one rack) cannot fit now. On the leader's page: one tile per node of the pool;
  clicking ``train`` highlights exactly its assignment's hosts with their pod counts; clicking
  ``wait`` shows the why-not numbers ``kueue-tas describe -o json`` gives. The standby's page
  (a cluster read) draws and highlights the same.
* From a ``kueue-tas plan -o html`` file (no cluster): one tile per node of the dump; the URL's
  ``#wl=`` selects a workload and highlights its planned domains; the one that does not fit
  shows plan's numbers.
* The open page reloads itself every ``map_refresh_seconds`` and keeps the selection (the
  controller's server, here in the test's process over a fixed cluster read).

Each test saves a screenshot under ``<run dir>/logs/topology-map/`` and prints its path.
"""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest
import yaml

from e2e import jobs, paths, workloads
from e2e import stack as st
from e2e.browser import MapPage, chromium
from e2e.cluster_state import State
from e2e.controller import REPO_ROOT, ControllerGroup
from e2e.kube import Kube
from e2e.nodes import BLOCK_LABEL, GPU, POOL_LABEL, RACK_LABEL, NodePool
from e2e.tests.test_cli_live import cli
from kueue_tas.api import constants as c
from kueue_tas.api.kueue_objects import AdmissionCheck, ClusterQueue, ResourceFlavor, Topology
from kueue_tas.api.workload import Workload
from kueue_tas.cli.cluster_read import ClusterState, KueueConfig
from kueue_tas.cli.map_server import MapServer
from kueue_tas.cli.map_sources import ReadSource
from kueue_tas.controllers.informers import slim_node
from kueue_tas.runtime.config import Settings

T = TypeVar("T")
KUEUE_API = f"{c.KUEUE_GROUP}/{c.KUEUE_VERSION}"


@pytest.fixture(scope="module")
def browser() -> Iterator[MapPage]:
    driver = chromium(1200, 800)
    try:
        yield MapPage(driver)
    finally:
        driver.quit()


@pytest.fixture
def screenshot(request: pytest.FixtureRequest) -> Callable[[MapPage, str], Path]:
    def take(page: MapPage, what: str) -> Path:
        path = page.screenshot(paths.run_dir() / "logs" / "topology-map" / f"{request.node.name}-{what}.png")
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", path
        print(f"screenshot: {path}")
        return path

    return take


async def settled(what: str, probe: Callable[[], Awaitable[T | None]], timeout_s: float = 30) -> T:
    """``probe()``'s first non-None answer; the map is rebuilt at most every few seconds."""
    deadline = time.monotonic() + timeout_s
    last: Any = None
    while True:
        try:
            got = await probe()
        except AssertionError as exc:
            got, last = None, exc
        if got is not None:
            return got
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what}: {last}")
        await asyncio.sleep(1)


# --- served by the controller -----------------------------------------------------------------


async def test_map_served_by_the_leader_and_the_standby(
    kube: Kube,
    namespace: str,
    unique: str,
    tas: ControllerGroup,
    cluster_state: State,
    browser: MapPage,
    screenshot: Callable[[MapPage, str], Path],
) -> None:
    pool = NodePool(name=f"map{unique}", blocks=1, racks_per_block=2, hosts_per_rack=2)
    s = await st.tas_stack(kube, namespace, tas.controller_name, pool)
    racks = st.host_racks(pool)
    await jobs.create_job(kube, namespace, jobs.job("train", 6, gpu=4, required=BLOCK_LABEL))
    wl = await workloads.wait_admitted(kube, s, "train")
    placed = {values[-1]: n for values, n in workloads.domain_counts(wl, "main").items()}
    assert sum(placed.values()) == 6 and len({racks[h] for h in placed}) == 2
    # Two 8-GPU pods in one rack: train leaves at most one free host per rack.
    await jobs.create_job(kube, namespace, jobs.job("wait", 2, gpu=8, required=RACK_LABEL))
    waiting = await workloads.wait_check(kube, s, "wait", ("Retry",))
    train_key = f"{namespace}/{wl['metadata']['name']}"
    wait_key = f"{namespace}/{waiting['metadata']['name']}"
    leader = await tas.wait_leader()
    standby = next(p for p in tas.processes if p is not leader)

    async def loaded(url: str) -> bool | None:
        browser.open(url)
        listed = browser.workloads()
        assert listed.get(train_key) == "st-admitted", listed
        assert listed.get(wait_key) == "st-pending", listed
        return True

    await settled("the leader's page lists both workloads", lambda: loaded(leader.map_url))
    assert browser.source_line().startswith(f"Live model of the leader {leader.identity_prefix}")
    assert sorted(browser.hosts(s.flavor)) == sorted(pool.node_names())

    # Clicking the admitted workload highlights its assignment: the hosts, each with its count.
    browser.select(train_key)
    assert browser.highlighted_hosts(s.flavor) == placed
    assert browser.domains_holding_highlights(s.flavor) == {"b1"} | {f"b1/{racks[h]}" for h in placed}
    screenshot(browser, "leader")

    # Clicking the pending one shows the numbers describe gives for it.
    async def same_why_not() -> bool | None:
        run = await cli(
            tas, cluster_state.kubeconfig, "describe", "workload", "--for-job", "wait", "-n", namespace, "-o", "json"
        )
        assert run.code == 0, run.err
        (ps,) = run.json["podSets"]
        want = ps["whyNot"]
        browser.open(leader.map_url)
        browser.select(wait_key)
        assert browser.highlighted_hosts(s.flavor) == {}, "a workload without an assignment highlights no host"
        (got,) = browser.why_not(wait_key)
        shown = {k: got[k] for k in ("level", "domainFit", "fit", "needed", "oneDomain", "totalNodes", "excluded")}
        assert shown == {k: want[k] for k in shown}, (got, want)
        assert got["domain"] == "/".join(want["domain"]) and got["reasons"] == want["reasons"], (got, want)
        assert (got["podSet"], want["fit"] < want["needed"], want["totalNodes"]) == ("main", True, pool.size)
        assert browser.best_domains(s.flavor) == {got["domain"]}
        return True

    await settled("the page's why-not equals describe's", same_why_not)
    screenshot(browser, "why-not")

    # A standby reads the cluster (it keeps no informers) and draws the same.
    await settled("the standby's page lists both workloads", lambda: loaded(standby.map_url))
    assert browser.source_line().startswith(f"Read from the API server by {standby.identity_prefix}")
    assert sorted(browser.hosts(s.flavor)) == sorted(pool.node_names())
    browser.select(train_key)
    assert browser.highlighted_hosts(s.flavor) == placed
    screenshot(browser, "standby")


# --- a plan -o html file ----------------------------------------------------------------------


def plan_dump(pool: NodePool) -> list[dict[str, Any]]:
    """``pool``'s nodes (Ready), our Topology, flavor, check and ClusterQueue, and two Jobs: ``fits``
    (6 one-GPU pods in one rack of 8 GPUs) and ``nine`` (9 in one rack: never)."""
    nodes = pool.node_objects()
    for node in nodes:
        node["status"]["conditions"] = [{"type": "Ready", "status": "True"}]
    kueue = [
        {
            "apiVersion": KUEUE_API,
            "kind": "Topology",
            "metadata": {"name": "topo"},
            "spec": {"levels": [{"nodeLabel": level} for level in pool.level_labels()]},
        },
        {
            "apiVersion": KUEUE_API,
            "kind": "ResourceFlavor",
            "metadata": {"name": "gpu"},
            "spec": {"nodeLabels": {POOL_LABEL: pool.name}},
        },
        {
            "apiVersion": KUEUE_API,
            "kind": "AdmissionCheck",
            "metadata": {"name": "tas"},
            "spec": {
                "controllerName": c.CONTROLLER_NAME,
                "parameters": {"apiGroup": c.KUEUE_GROUP, "kind": "Topology", "name": "topo"},
            },
        },
        {
            "apiVersion": KUEUE_API,
            "kind": "ClusterQueue",
            "metadata": {"name": "cq"},
            "spec": {
                "resourceGroups": [
                    {
                        "coveredResources": [GPU],
                        "flavors": [{"name": "gpu", "resources": [{"name": GPU, "nominalQuota": 1000}]}],
                    }
                ],
                "admissionChecksStrategy": {"admissionChecks": [{"name": "tas"}]},
            },
        },
    ]
    work = []
    for name, pods in (("fits", 6), ("nine", 9)):
        job = jobs.job(name, pods, gpu=1, required=RACK_LABEL)
        job["metadata"]["namespace"] = "team"
        work.append(job)
    return [*nodes, *kueue, *work]


def plan(dump: Path, *args: str) -> str:
    proc = subprocess.run(
        [sys.executable, "-m", "kueue_tas.cli.main", "plan", "-f", str(dump), *args],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_plan_html_file_in_chromium(
    tmp_path: Path, browser: MapPage, screenshot: Callable[[MapPage, str], Path]
) -> None:
    pool = NodePool(
        name="plan",
        blocks=2,
        racks_per_block=2,
        hosts_per_rack=2,
        allocatable={"cpu": "32", "memory": "256Gi", "pods": "110", GPU: "4"},
    )
    dump = tmp_path / "dump.yaml"
    dump.write_text(yaml.safe_dump_all(plan_dump(pool)), encoding="utf-8")
    page = tmp_path / "plan.html"
    page.write_text(plan(dump, "-o", "html"), encoding="utf-8")
    planned = {w["name"]: w["podSets"][0] for w in json.loads(plan(dump, "-o", "json"))["workloads"]}
    fits = {d["values"][-1]: d["count"] for d in planned["fits"]["domains"]}
    assert sum(fits.values()) == 6 and "domains" not in planned["nine"]

    browser.open(f"{page.as_uri()}#wl=team/fits")  # the selection lives in the URL
    assert browser.selected() == "team/fits"
    assert sorted(browser.hosts("gpu")) == sorted(pool.node_names())
    assert browser.highlighted_hosts("gpu") == fits
    screenshot(browser, "fits")

    browser.select("team/nine")
    assert browser.highlighted_hosts("gpu") == {}
    (why,) = browser.why_not("team/nine")
    found = re.search(r"only (\d+) out of (\d+)", planned["nine"]["message"])
    assert found is not None, planned["nine"]["message"]
    assert (why["fit"], why["needed"]) == (int(found.group(1)), int(found.group(2)))
    assert why["totalNodes"] == pool.size and browser.best_domains("gpu") == {why["domain"]}
    assert browser.driver.current_url.endswith("#wl=team%2Fnine")


# --- the open page reloads itself ----------------------------------------------------------------


def read_of(objects: list[dict[str, Any]]) -> Callable[[], Awaitable[ClusterState]]:
    """A cluster read that returns ``objects`` (nodes, Kueue objects, Workloads)."""
    config = KueueConfig()
    state = ClusterState(config)
    kinds: dict[str, Any] = {
        "Topology": (Topology, config.topologies),
        "ResourceFlavor": (ResourceFlavor, config.flavors),
        "AdmissionCheck": (AdmissionCheck, config.checks),
    }
    for obj in objects:
        if obj["kind"] == "Node":
            state.nodes.append(slim_node(obj))
        elif obj["kind"] == "Workload":
            state.workloads.append(Workload.model_validate(obj))
        elif obj["kind"] == "ClusterQueue":
            config.queues.append(ClusterQueue.model_validate(obj))
        elif obj["kind"] in kinds:
            model, into = kinds[obj["kind"]]
            into[obj["metadata"]["name"]] = model.model_validate(obj)

    async def read() -> ClusterState:
        return state

    return read


def pending_workload(name: str, pods: int) -> dict[str, Any]:
    """Holding quota on flavor gpu, our check Pending: ``pods`` one-GPU pods in one rack."""
    template = jobs.pod_template(gpu=1, required=RACK_LABEL)
    return {
        "apiVersion": KUEUE_API,
        "kind": "Workload",
        "metadata": {"name": name, "namespace": "team", "uid": f"uid-{name}"},
        "spec": {"queueName": "lq", "podSets": [{"name": "main", "count": pods, "template": template}]},
        "status": {
            "admission": {
                "clusterQueue": "cq",
                "podSetAssignments": [{"name": "main", "flavors": {GPU: "gpu"}, "count": pods}],
            },
            "admissionChecks": [{"name": "tas", "state": "Pending", "message": ""}],
            "conditions": [{"type": "QuotaReserved", "status": "True"}],
        },
    }


async def test_the_open_page_reloads_itself_and_keeps_the_selection(
    browser: MapPage, screenshot: Callable[[MapPage, str], Path]
) -> None:
    """The controller's server with ``map_refresh_seconds`` 2 (here over a fixed cluster read):
    a person who selected a workload and left the page open still sees it selected, with the
    numbers of the newer build."""
    pool = NodePool(
        name="plan",
        blocks=1,
        racks_per_block=2,
        hosts_per_rack=2,
        allocatable={"cpu": "32", "memory": "256Gi", "pods": "110", GPU: "4"},
    )
    objects = [o for o in plan_dump(pool) if o["kind"] != "Job"] + [pending_workload("nine", 9)]
    settings = Settings(leader_election=False, map_bind="127.0.0.1:0")
    source = ReadSource(read_of(objects), settings, max_age=1.0)
    server = MapServer(settings.map_bind, source, replica="e2e", refresh_seconds=2)
    await server.start()

    def person(url: str) -> None:
        # In a thread: the browser's requests are answered by the server on this test's loop.
        browser.open(url)
        browser.select("team/nine")
        first = browser.source_line()
        browser.js("window.notReloadedYet = true;")
        deadline = time.monotonic() + 10
        while browser.js("return window.notReloadedYet === true;") or not browser.loaded():
            assert time.monotonic() < deadline, "the page did not reload itself"
            time.sleep(0.2)
        assert browser.driver.current_url.endswith("#wl=team%2Fnine")
        assert browser.selected() == "team/nine"
        (why,) = browser.why_not("team/nine")
        assert (why["fit"], why["needed"], why["totalNodes"]) == (8, 9, pool.size)
        assert browser.source_line() != first, "the numbers of a newer build"
        screenshot(browser, "reloaded")

    try:
        ((host, port),) = server.addresses
        await asyncio.to_thread(person, f"http://{host}:{port}/")
    finally:
        await server.stop()
