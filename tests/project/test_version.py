"""Issue 28 item 3: one version, from git tags, wherever the package is built; shown by the CLI,
the metrics and the image.

setuptools-scm derives it (``pyproject.toml`` ``[tool.setuptools_scm]``): a tag ``v0.2.0`` makes
0.2.0; without git metadata (the image build's context has no ``.git``) it is the Dockerfile's
``VERSION`` through SETUPTOOLS_SCM_PRETEND_VERSION, else the fallback.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from kueue_tas.cli.main import build_parser, main
from kueue_tas.runtime.metrics import Metrics
from kueue_tas.version import version

REPO = Path(__file__).resolve().parents[2]
FALLBACK = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools_scm"]["fallback_version"]
SCM = [sys.executable, "-m", "setuptools_scm"]
PIP_WHEEL = [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "--no-index"]


def _scm_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SETUPTOOLS_SCM")}
    return {**env, **extra}


def _scm_version(root: Path, **env: str) -> str:
    out = subprocess.run([*SCM, "--root", str(root)], capture_output=True, text=True, cwd=root, env=_scm_env(**env))
    assert out.returncode == 0, out.stderr
    return out.stdout.strip().splitlines()[-1]


def _sources(dest: Path) -> Path:
    """The package's sources without git metadata, as the image build's context has them."""
    dest.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, dest / name)
    shutil.copytree(REPO / "kueue_tas", dest / "kueue_tas", ignore=shutil.ignore_patterns("__pycache__"))
    return dest


def test_version_and_dash_dash_version_print_the_installed_version(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["version"]) == 0
    assert capsys.readouterr().out == f"kueue-tas {version()}\n"
    with pytest.raises(SystemExit) as exit_info:
        main(["--version"])
    assert exit_info.value.code == 0
    assert capsys.readouterr().out == f"kueue-tas {version()}\n"
    assert main(["version", "-o", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["version"] == version() and re.fullmatch(r"3\.\d+\.\d+", doc["python"])


def test_the_version_is_the_package_metadata_and_in_the_help() -> None:
    from importlib import metadata

    assert version() == metadata.version("kueue-tas") != "0+unknown"
    text = build_parser().format_help()
    assert "--version" in text and re.search(r"^\s+version\s+print the version", text, re.M)


def test_build_info_names_the_version() -> None:
    body, _ = Metrics().render()
    samples = [
        s
        for fam in text_string_to_metric_families(body.decode())
        for s in fam.samples
        if s.name == "kueue_tas_build_info"
    ]
    assert len(samples) == 1
    assert samples[0].labels["version"] == version() and samples[0].value == 1
    assert samples[0].labels["python_version"] == ".".join(map(str, sys.version_info[:3]))


def test_without_git_the_version_is_the_pretend_one_else_the_fallback(tmp_path: Path) -> None:
    src = _sources(tmp_path / "src")
    assert _scm_version(src) == FALLBACK
    assert _scm_version(src, SETUPTOOLS_SCM_PRETEND_VERSION="0.3.1") == "0.3.1"


def test_the_dockerfile_default_version_is_the_fallback() -> None:
    # `docker build .` without arguments labels the image with the version its package reports.
    defaults = re.findall(r"^ARG VERSION=(\S+)$", (REPO / "Dockerfile").read_text(), re.M)
    assert defaults and set(defaults) == {FALLBACK}


def test_a_wheel_built_without_git_carries_the_version_passed_in(tmp_path: Path) -> None:
    """What the image's builder stage does: no .git, VERSION from the build argument."""
    src = _sources(tmp_path / "src")
    out = subprocess.run(
        [*PIP_WHEEL, "--wheel-dir", str(tmp_path / "dist"), str(src)],
        capture_output=True,
        text=True,
        env=_scm_env(SETUPTOOLS_SCM_PRETEND_VERSION="0.2.0"),
    )
    assert out.returncode == 0, out.stderr
    assert [p.name.split("-")[1] for p in (tmp_path / "dist").glob("*.whl")] == ["0.2.0"]


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_a_clean_clone_takes_its_version_from_the_tag(tmp_path: Path) -> None:
    """The release flow: `git tag v0.2.0` makes 0.2.0; a commit after it is a dev release of 0.2.1."""
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True, check=True)
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(REPO), str(clone)], check=True)
    git = ["git", "-C", str(clone), "-c", "user.name=t", "-c", "user.email=t@example.invalid"]
    subprocess.run([*git, "checkout", "-q", head.stdout.strip()], check=True)
    untagged = _scm_version(clone)
    assert re.fullmatch(r"\d+\.\d+\.\d+\.dev\d+\+g[0-9a-f]+", untagged), untagged
    subprocess.run([*git, "tag", "v0.2.0"], check=True)
    assert _scm_version(clone) == "0.2.0"
    subprocess.run([*git, "commit", "-q", "--allow-empty", "-m", "next"], check=True)
    assert re.fullmatch(r"0\.2\.1\.dev1\+g[0-9a-f]+", _scm_version(clone))
