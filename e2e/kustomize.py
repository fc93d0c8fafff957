"""kustomize for every overlay under ``manifests/``: the binaries (built once by ``e2e/build.py``,
cached in ``~/.cache/kueue-tas/bin`` like helm) and ``kustomize build`` with each.

Two versions: the one kubectl 1.32 vendors (what ``kubectl apply -k`` of the oldest kubectl we
support runs; v5.5 panics where newer ones only warn) and the newest. ``make lint`` runs
``python -m e2e.kustomize``: every overlay must build with both.
"""

from __future__ import annotations

import functools
import subprocess
import sys
from pathlib import Path
from typing import Any, Final

import yaml

from e2e import versions
from e2e.paths import bin_dir

REPO_ROOT: Final = Path(__file__).resolve().parent.parent
MANIFESTS_DIR: Final = REPO_ROOT / "manifests"
# Component names in e2e/build.py, which are also the binaries' names.
BINARIES: Final = (f"kustomize-{versions.KUSTOMIZE_KUBECTL_1_32}", "kustomize")


class KustomizeError(RuntimeError):
    """``kustomize build`` failed; the message names the binary, the overlay and what it said."""


def overlays() -> list[Path]:
    """Every directory under manifests/ that has a kustomization.yaml."""
    return sorted(p.parent for p in MANIFESTS_DIR.rglob("kustomization.yaml"))


@functools.cache
def binary(name: str) -> Path:
    """The cached kustomize ``name``, built first when missing or stale (needs the Go toolchain)."""
    from e2e.build import ensure_built

    ensure_built([name])
    return bin_dir() / name


def build(overlay: Path, name: str) -> list[dict[str, Any]]:
    """The objects ``kustomize build overlay`` emits with the binary ``name``."""
    cmd = [str(binary(name)), "build", str(overlay)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)
    if done.returncode != 0:
        # A panic prints pages of goroutines; its first lines say what went wrong.
        said = "\n".join(done.stderr.strip().splitlines()[:8])
        raise KustomizeError(f"{name} build {overlay.relative_to(REPO_ROOT)} failed (exit {done.returncode}):\n{said}")
    return [d for d in yaml.safe_load_all(done.stdout) if d]


def main() -> int:
    failed = False
    for overlay in overlays():
        for name in BINARIES:
            try:
                count = len(build(overlay, name))
                print(f"{name} build {overlay.relative_to(REPO_ROOT)}: ok ({count} objects)")
            except KustomizeError as exc:
                print(str(exc))
                failed = True
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
