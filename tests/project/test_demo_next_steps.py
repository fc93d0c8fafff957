"""What ``make demo`` ends with (e2e/demo.py ``usage_text``): every command it suggests must work
on the demo it just built, so the suggestions are checked against the samples and the CLI."""

from __future__ import annotations

import shlex
from pathlib import Path

import yaml

from e2e.cluster_state import State
from e2e.demo import DEMO_POOL, SAMPLES, DemoObjects, usage_text
from e2e.paths import bin_dir
from kueue_tas.cli.main import build_parser

REPO = Path(__file__).resolve().parents[2]


def ending(tmp_path: Path) -> str:
    state = State(run_dir=str(tmp_path), kubeconfig=str(tmp_path / "kubeconfig"), log_dir=str(tmp_path), ports={})
    return usage_text(state, DEMO_POOL, DemoObjects())


def commands(text: str) -> list[list[str]]:
    """The suggested command lines (indented, not comments), without trailing comments."""
    lines = [ln.strip() for ln in text.splitlines() if ln.startswith("  ") and not ln.strip().startswith("#")]
    return [shlex.split(ln.split("  #", 1)[0]) for ln in lines if ln]


def test_the_demo_ends_with_the_cluster_to_use_and_commands_to_try(tmp_path: Path) -> None:
    text = ending(tmp_path)
    cmds = commands(text)
    assert ["export", f"KUBECONFIG={tmp_path / 'kubeconfig'}"] in cmds
    assert ["export", f"PATH={bin_dir()}:$PATH"] in cmds  # where the build put kubectl
    assert any(c[0] == "kubectl" for c in cmds)
    assert "make down" in text


def test_every_suggested_kueue_tas_command_parses_and_names_real_samples(tmp_path: Path) -> None:
    names = DemoObjects()
    jobs = {d["metadata"]["name"] for d in yaml.safe_load_all((SAMPLES / "job.yaml").read_text()) if d}
    suggested = [c[1:] for c in commands(ending(tmp_path)) if c[0] == ".venv/bin/kueue-tas"]
    assert len(suggested) >= 3
    parser = build_parser()
    for argv in suggested:
        args = parser.parse_args(argv)  # exits (fails the test) on an argument the CLI does not take
        if getattr(args, "for_job", None):
            assert args.for_job in jobs and args.namespace == names.namespace
        if getattr(args, "topology", None):
            assert args.topology == names.topology
        for f in getattr(args, "files", None) or []:
            assert (REPO / f).is_file(), f
    for c in commands(ending(tmp_path)):
        if c[:2] == ["kubectl", "apply"]:
            assert (REPO / c[-1]).exists(), c
