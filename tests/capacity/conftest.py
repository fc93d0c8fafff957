"""Tests of kueue_tas.capacity: the live capacity model, its rules, DaemonSet reservations, creation checks."""

from __future__ import annotations

import pytest
from admission_harness import Harness, harness


@pytest.fixture
def h() -> Harness:
    """The admission harness as it comes (a module needing other fakes defines its own ``h``)."""
    return harness()
