"""Shared by every unit test."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from kueue_tas.runtime.logging import reset_logging

# The helpers beside this file are imported by bare name (pyproject's pythonpath); pytest rewrites
# the asserts of test modules and conftests only, so the helpers' asserts are registered to explain
# their failures the same way (several used to live in test modules).
pytest.register_assert_rewrite(
    "admission_harness",
    "builders",
    "capacity_histories",
    "controller_cluster",
    "daemonset_scenes",
    "elastic_harness",
    "faults",
    "hostname_scenes",
    "kueue_cases",
    "loop_watch",
    "manifest_files",
    "map_scene",
    "plan_harness",
    "random_clusters",
    "repair_harness",
    "ungater_harness",
    "virtual_time",
    "webhook_harness",
)


@pytest.fixture(autouse=True)
def _restore_logging() -> Iterator[None]:
    """CLI entry points configure logging onto pytest's captured stream, which is closed after
    the test; later tests must not inherit that set-up."""
    yield
    reset_logging()


@pytest.fixture
def no_settings_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """No ``KUEUE_TAS_*`` variable of the environment pytest runs in reaches ``Settings``."""
    for key in list(os.environ):
        if key.upper().startswith("KUEUE_TAS_"):
            monkeypatch.delenv(key)
