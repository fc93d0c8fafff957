"""Start-up cost of the command line: importing it, building the parser and ``--help`` must not
load the Kubernetes client or the heavy libraries only some commands need. Each check runs in a
fresh interpreter, since this test process has imported everything already."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

HEAVY = ("kubernetes_asyncio", "kubernetes", "aiohttp", "numpy", "pydantic", "prometheus_client", "yaml")

PROBE = """
import contextlib, io, json, sys
import kueue_tas.cli.main as m
m.build_parser().format_help()
with contextlib.suppress(SystemExit), contextlib.redirect_stdout(io.StringIO()):
    m.main([{args}])
print(json.dumps(sorted(name for name in {heavy!r} if name in sys.modules)))
"""


def loaded_after(args: str, heavy: tuple[str, ...] = HEAVY) -> list[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run(
        [sys.executable, "-c", PROBE.format(args=args, heavy=heavy)],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    loaded: list[str] = json.loads(proc.stdout.strip().splitlines()[-1])
    return loaded


@pytest.mark.parametrize("args", ['"--help"', '"plan", "--help"', '"run", "--help"', '"capacity", "--help"'])
def test_help_loads_no_heavy_module(args: str) -> None:
    assert loaded_after(args) == []


def test_plan_loads_no_client_server_or_logging_library() -> None:
    # plan needs the engine (numpy), the models (pydantic) and YAML; nothing of the controller.
    controller_only = ("kubernetes_asyncio", "kubernetes", "aiohttp", "prometheus_client", "structlog", "cachetools")
    # numpy loaded proves the plan ran the engine (a bad path would stop before it).
    loaded = loaded_after('"plan", "-f", "examples/cluster.yaml"', (*controller_only, "numpy"))
    assert loaded == ["numpy"]


def test_import_time_of_the_cli_has_no_kubernetes_client() -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", "import kueue_tas.cli.main"],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    imported = {line.split("|")[-1].strip() for line in proc.stderr.splitlines() if line.startswith("import time:")}
    assert "kueue_tas.cli.main" in imported
    assert not {name for name in imported if name.split(".")[0] in HEAVY}
