"""Shared by every unit test."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from kueue_tas.runtime.logging import reset_logging


@pytest.fixture(autouse=True)
def _restore_logging() -> Iterator[None]:
    """CLI entry points configure logging onto pytest's captured stream, which is closed after
    the test; later tests must not inherit that set-up."""
    yield
    reset_logging()
