"""Run ``kueue-tas run`` as real processes beside the local cluster, for tests and the demo.

A ``ControllerGroup`` is N replicas of the controller sharing one Lease (leader election on),
as the Deployment in ``manifests/base`` runs them. Each group gets its own controller name
(``kueue-tas.io/e2e-<id>``) and Lease, so several groups (and several test sessions) can run
against one cluster without acting on each other's AdmissionChecks: a test creates its
AdmissionCheck with ``group.controller_name``.

The processes authenticate with the kubeconfig given to the group; the e2e fixtures pass one
bound to the manifests' ServiceAccount (``e2e/rbac.py``), so a permission missing from the
ClusterRole fails the tests.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from e2e import procs

if TYPE_CHECKING:
    from e2e.image_controller import ImageRuntime

# (argv, environment) of a replica from the environment the group made for a local process.
Launcher = Callable[[dict[str, str]], tuple[list[str], dict[str, str]]]

LEASE_NAMESPACE = "kueue-tas-system"
# Plain HTTP without token reviews for /metrics and the map: the settings' local-dev switch
# (README "Who may look"), for servers bound to 127.0.0.1 where this machine's user is the reader.
LOCAL_DEV_OPEN: dict[str, str] = {
    "KUEUE_TAS_METRICS_SECURE": "false",
    "KUEUE_TAS_METRICS_AUTH": "false",
    "KUEUE_TAS_MAP_SECURE": "false",
    "KUEUE_TAS_MAP_AUTH": "false",
}
REPO_ROOT = Path(__file__).resolve().parent.parent


def _http_status(url: str) -> int | None:
    try:
        with urllib.request.urlopen(url, timeout=2) as resp:
            return int(resp.status)
    except urllib.error.HTTPError as e:
        return int(e.code)
    except (OSError, urllib.error.URLError):
        return None


@dataclass
class ControllerProcess:
    """One ``kueue-tas run`` process; ``identity_prefix`` is its POD_NAME (the Lease holder starts with it)."""

    identity_prefix: str
    env: dict[str, str]
    log_path: Path
    health_port: int
    metrics_port: int
    proc: subprocess.Popen[bytes] | None = None
    log_offset: int = 0  # where this run's output starts in the (appended) log file
    map_port: int | None = None  # the topology map's port, when the group serves it
    args: tuple[str, ...] = ()  # after `run`, e.g. ("--config", path) as the chart's Deployment runs it
    launcher: Launcher | None = None  # how to start it; default: this venv's ``kueue-tas run``

    @property
    def map_url(self) -> str:
        """The topology map this replica serves (``ControllerGroup(map_server=True)``)."""
        if self.map_port is None:
            raise RuntimeError(f"controller {self.identity_prefix} does not serve the topology map")
        return f"{self._scheme('MAP')}://127.0.0.1:{self.map_port}/"

    @property
    def metrics_url(self) -> str:
        return f"{self._scheme('METRICS')}://127.0.0.1:{self.metrics_port}/metrics"

    def _scheme(self, server: str) -> str:
        return "http" if self.env.get(f"KUEUE_TAS_{server}_SECURE", "true").lower() == "false" else "https"

    def start(self) -> None:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self.log_offset = self.log_path.stat().st_size if self.log_path.exists() else 0
        out = self.log_path.open("ab")
        argv, env = (
            self.launcher(self.env)
            if self.launcher is not None
            else ([sys.executable, "-m", "kueue_tas.cli.main", "run", *self.args], self.env)
        )
        self.proc = subprocess.Popen(
            argv,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=REPO_ROOT,
            start_new_session=True,
        )
        out.close()

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill(self) -> None:
        """SIGKILL: no cleanup, no lease release, like a node dying."""
        if self.alive:
            assert self.proc is not None
            self.proc.kill()
            self.proc.wait(10)

    def terminate(self, timeout: float = 20) -> None:
        if self.alive:
            assert self.proc is not None
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)

    def ready(self) -> bool:
        return self.alive and _http_status(f"http://127.0.0.1:{self.health_port}/readyz") == 200

    def metrics(self) -> str:
        with urllib.request.urlopen(self.metrics_url, timeout=5) as resp:
            return bytes(resp.read()).decode()

    def log_text(self, all_runs: bool = False) -> str:
        """This run's output (every run's with ``all_runs``)."""
        try:
            with self.log_path.open("rb") as f:
                f.seek(0 if all_runs else self.log_offset)
                return f.read().decode(errors="replace")
        except FileNotFoundError:
            return ""

    async def wait_ready(self, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while not self.ready():
            if not self.alive:
                raise RuntimeError(f"controller {self.identity_prefix} exited; log:\n{self.log_text()[-4000:]}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"controller {self.identity_prefix} not ready; log:\n{self.log_text()[-4000:]}")
            await asyncio.sleep(0.2)


@dataclass
class ControllerGroup:
    kubeconfig: str
    log_dir: Path
    replicas: int = 2
    leader_election: bool = True
    extra_env: dict[str, str] = field(default_factory=dict)
    map_server: bool = False  # serve the topology map, each replica on a port of its own
    image: ImageRuntime | None = None  # run the replicas from the image (e2e/image_controller.py)
    group_id: str = field(default_factory=lambda: uuid.uuid4().hex[:8])
    processes: list[ControllerProcess] = field(default_factory=list)

    @property
    def controller_name(self) -> str:
        """The ``spec.controllerName`` this group's AdmissionChecks must carry."""
        return f"kueue-tas.io/e2e-{self.group_id}"

    @property
    def lease_name(self) -> str:
        return f"kueue-tas-e2e-{self.group_id}"

    def _env(self, identity: str, health: int, metrics: int, map_port: int | None = None) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("KUEUE_TAS_")}
        env.update(
            {
                "PYTHONPATH": str(REPO_ROOT),
                "POD_NAME": identity,
                "KUEUE_TAS_KUBECONFIG": self.kubeconfig,
                "KUEUE_TAS_CONTROLLER_NAME": self.controller_name,
                "KUEUE_TAS_LEADER_ELECTION": "true" if self.leader_election else "false",
                "KUEUE_TAS_LEASE_NAME": self.lease_name,
                "KUEUE_TAS_LEASE_NAMESPACE": LEASE_NAMESPACE,
                # Short timings keep fail-over tests quick; client-go's ratios are kept.
                "KUEUE_TAS_LEASE_DURATION_SECONDS": "6",
                "KUEUE_TAS_RENEW_DEADLINE_SECONDS": "4",
                "KUEUE_TAS_RETRY_PERIOD_SECONDS": "1",
                "KUEUE_TAS_RETRY_BACKOFF_BASE_SECONDS": "2",
                "KUEUE_TAS_RETRY_BACKOFF_MAX_SECONDS": "8",
                "KUEUE_TAS_HEALTH_BIND": f"127.0.0.1:{health}",
                "KUEUE_TAS_METRICS_BIND": f"127.0.0.1:{metrics}",
                # /metrics and the map plain and open on loopback (the settings' local-dev switch),
                # so the tests and the browser read them without a token;
                # e2e/tests/test_reader_auth.py turns both back on through extra_env.
                **LOCAL_DEV_OPEN,
                "KUEUE_TAS_LOG_LEVEL": "debug",
                # A SIGKILLed replica (a chaos fault, the teardown) keeps its last lines: a failed
                # run's logs must reach its end (chaos seed 653's stopped 90 s early).
                "PYTHONUNBUFFERED": "1",
            }
        )
        if map_port is not None:
            env["KUEUE_TAS_MAP_BIND"] = f"127.0.0.1:{map_port}"
        for var in ("NO_PROXY", "no_proxy"):
            hosts = [h for h in env.get(var, "").split(",") if h]
            env[var] = ",".join(dict.fromkeys([*hosts, "127.0.0.1", "localhost"]))
        env.update(self.extra_env)
        return env

    def add_process(self) -> ControllerProcess:
        i = len(self.processes)
        identity = f"e2e-{self.group_id}-{i}"
        health, metrics = procs.free_port(), procs.free_port()
        map_port = procs.free_port() if self.map_server else None
        p = ControllerProcess(
            identity,
            self._env(identity, health, metrics, map_port),
            self.log_dir / f"{identity}.log",
            health,
            metrics,
            map_port=map_port,
            launcher=self.image.launch if self.image is not None else None,
        )
        self.processes.append(p)
        return p

    async def start(self, wait_leader: bool = True) -> None:
        while len(self.processes) < self.replicas:
            self.add_process()
        for p in self.processes:
            if not p.alive:
                p.start()
        for p in self.processes:
            await self._ready(p)
        if wait_leader:
            await self.wait_leader()

    async def restart(self, p: ControllerProcess) -> None:
        p.kill()
        p.start()
        await self._ready(p)

    async def _ready(self, p: ControllerProcess, attempts: int = 3) -> None:
        """Wait until ``p`` is ready; a port another process took between ``free_port`` and the
        bind (two campaigns on one machine: chaos seed 824) gets new ports and another start."""
        for attempt in range(attempts):
            try:
                await p.wait_ready()
                return
            except RuntimeError:
                if attempt == attempts - 1 or "address already in use" not in p.log_text():
                    raise
            p.health_port, p.metrics_port = procs.free_port(), procs.free_port()
            p.map_port = procs.free_port() if self.map_server else None
            p.env = self._env(p.identity_prefix, p.health_port, p.metrics_port, p.map_port)
            p.start()

    def stop(self) -> None:
        for p in self.processes:
            p.terminate()

    def kill_all(self) -> None:
        for p in self.processes:
            p.kill()

    async def wait_leader(self, timeout: float = 30) -> ControllerProcess:
        deadline = time.monotonic() + timeout
        while True:
            if not self.leader_election:
                return self.processes[0]
            leading = [p for p in self.processes if p.alive and _leads(p)]
            if len(leading) == 1:
                return leading[0]
            if time.monotonic() > deadline:
                raise TimeoutError(f"no single leader among {len(self.processes)} controllers\n{self.logs()[-8000:]}")
            await asyncio.sleep(0.2)

    def logs(self) -> str:
        return "\n".join(f"--- {p.identity_prefix} ({p.log_path})\n{p.log_text()}" for p in self.processes)


def _leads(p: ControllerProcess) -> bool:
    """Whether the process says it leads now: its last leader_elected is after its last leader_stopped."""
    text = p.log_text()
    elected = text.rfind('"event": "leader_elected"')
    stopped = max(text.rfind('"event": "leader_stopped"'), text.rfind('"event": "leader_election_lost"'))
    return elected > stopped


def log_events(text: str, event: str) -> list[dict[str, Any]]:
    """The JSON log lines of one structlog event name."""
    out = []
    for line in text.splitlines():
        if f'"{event}"' not in line:
            continue
        with contextlib.suppress(ValueError):
            doc = json.loads(line)
            if doc.get("event") == event:
                out.append(doc)
    return out


def parse_metrics(text: str) -> list[tuple[str, dict[str, str], float]]:
    """(name, labels, value) of every sample of a Prometheus text exposition."""
    from prometheus_client.parser import text_string_to_metric_families

    return [(s.name, dict(s.labels), s.value) for fam in text_string_to_metric_families(text) for s in fam.samples]


def metric_value(text: str, name: str, **labels: str) -> float | None:
    """The value of the sample ``name`` with exactly ``labels`` in a Prometheus text exposition
    (None when there is none)."""
    return next((value for n, lbl, value in parse_metrics(text) if n == name and lbl == labels), None)
