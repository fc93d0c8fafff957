"""Tests of kueue_tas.controllers without a cluster: informers fed by hand, writes and Events recorded."""

from __future__ import annotations

import pytest
from admission_harness import Harness, harness


@pytest.fixture
def h() -> Harness:
    """The admission harness as it comes (a module needing other fakes defines its own ``h``)."""
    return harness()
