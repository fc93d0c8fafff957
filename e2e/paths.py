"""Where the harness keeps its build cache, binaries and run state."""

from __future__ import annotations

import os
from pathlib import Path


def cache_dir() -> Path:
    """Root of the harness cache: ``$KUEUE_TAS_CACHE`` or ``~/.cache/kueue-tas``."""
    env = os.environ.get("KUEUE_TAS_CACHE")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "kueue-tas"


def bin_dir() -> Path:
    return cache_dir() / "bin"


def src_dir() -> Path:
    """Wrapper Go modules, one directory per component."""
    return cache_dir() / "src"


def run_dir() -> Path:
    """State of the running cluster: ``$KUEUE_TAS_RUN_DIR`` or ``<cache>/run``."""
    env = os.environ.get("KUEUE_TAS_RUN_DIR")
    return Path(env).expanduser() if env else cache_dir() / "run"
