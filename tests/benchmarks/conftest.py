"""Tests of benchmarks/: the placement-quality simulator's bookkeeping (not its figures)."""

from __future__ import annotations

import pytest

from benchmarks.quality.shapes import Shape


@pytest.fixture
def tiny() -> Shape:
    """1 block x 2 racks x 2 hosts x 4 GPUs: 16 GPUs, small enough to work out by hand."""
    return Shape("tiny", 1, 2, 2, 4, "1 block x 2 racks x 2 hosts x 4 GPUs")


@pytest.fixture
def small() -> Shape:
    """1 block x 2 racks x 4 hosts x 4 GPUs: every job of the mix fits it when empty."""
    return Shape("small", 1, 2, 4, 4, "1 block x 2 racks x 4 hosts x 4 GPUs")
