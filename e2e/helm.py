"""helm for the chart in ``charts/kueue-tas``: the binary (built once by ``e2e/build.py``, cached
in ``~/.cache/kueue-tas/bin`` like the control plane's components) and the calls the lint, the
unit tests and the e2e test make with it."""

from __future__ import annotations

import functools
import os
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final

import yaml

from e2e.paths import bin_dir

REPO_ROOT: Final = Path(__file__).resolve().parent.parent
CHART_DIR: Final = REPO_ROOT / "charts" / "kueue-tas"
# The release that renders exactly manifests/base's names (fullname == "kueue-tas").
RELEASE: Final = "kueue-tas"
NAMESPACE: Final = "kueue-tas-system"


class HelmError(RuntimeError):
    """A helm command failed; the message holds its command line and output."""


@functools.cache
def helm_binary() -> Path:
    """The cached helm, built first when missing or stale (needs the Go toolchain)."""
    from e2e.build import ensure_built

    ensure_built(["helm"])
    return bin_dir() / "helm"


def run_helm(args: Sequence[str], *, kubeconfig: str | Path | None = None, timeout: float = 300) -> str:
    """``helm args...``; its stdout, or HelmError with what it said."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("HELM_")}
    # A private cache/config: never the user's repositories or plugins.
    home = bin_dir().parent / "helm-home"
    env.update(
        HELM_CACHE_HOME=str(home / "cache"),
        HELM_CONFIG_HOME=str(home / "config"),
        HELM_DATA_HOME=str(home / "data"),
    )
    if kubeconfig is not None:
        env["KUBECONFIG"] = str(kubeconfig)
    cmd = [str(helm_binary()), *args]
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout, check=False)
    if done.returncode != 0:
        raise HelmError(f"{' '.join(cmd)} failed (exit {done.returncode}):\n{done.stderr.strip()}{done.stdout.strip()}")
    return done.stdout


def set_args(values: Mapping[str, Any]) -> list[str]:
    """``--set-json path=<json>`` for each entry (a dotted path, as ``--set`` takes)."""
    import json

    out: list[str] = []
    for path, value in values.items():
        out += ["--set-json", f"{path}={json.dumps(value)}"]
    return out


def template(
    values: Mapping[str, Any] | None = None, *, release: str = RELEASE, namespace: str = NAMESPACE
) -> list[dict[str, Any]]:
    """The chart's objects as ``helm template`` renders them with ``values`` (dotted paths)."""
    text = run_helm(["template", release, str(CHART_DIR), "--namespace", namespace, *set_args(values or {})])
    return [d for d in yaml.safe_load_all(text) if d]
