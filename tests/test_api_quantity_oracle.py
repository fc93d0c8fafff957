"""The Decimal parser gives exactly the Kubernetes Python client's results (kept until the client is dropped)."""

from __future__ import annotations

import math
import re
from decimal import Decimal

from hypothesis import given, settings
from hypothesis import strategies as st
from kubernetes.utils.quantity import parse_quantity as client_parse_quantity

from kueue_tas.api.quantity import QuantityError, parse_quantity

digits = st.text(alphabet="0123456789", max_size=40)
numbers = st.builds(
    lambda sign, whole, frac, dot: sign + whole + (dot + frac if dot else ""),
    st.sampled_from(["", "+", "-"]),
    digits,
    digits,
    st.sampled_from(["", "."]),
)
suffixes = st.sampled_from(["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei", "n", "u", "m", "k", "M", "G", "T", "P", "E"])
exponents = st.builds(lambda e, s, d: e + s + d, st.sampled_from(["e", "E"]), st.sampled_from(["", "+", "-"]), digits)
texts = st.one_of(
    st.builds(lambda n, s: n + s, numbers, suffixes),
    st.builds(lambda n, e: n + e, numbers, exponents),
    st.text(alphabet="0123456789.+-eEKMGTPEinumk \n_", max_size=12),
)


# The grammar guard in front of the client library before it was dropped.
OLD_GUARD = re.compile(r"^[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[KMGTPE]i|[numkMGTPE]|[eE][+-]?[0-9]+)?$")


def old_parse(value: str | int | float) -> Decimal | None:
    """The previous parser: the guard, then the client library; None where it refused."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    text = str(value)
    if not OLD_GUARD.match(text):
        return None
    try:
        parsed = client_parse_quantity(text)
    except ValueError:
        return None
    assert isinstance(parsed, Decimal)
    return parsed


@settings(max_examples=5000, deadline=None)
@given(st.one_of(texts, st.integers(), st.floats()))
def test_same_as_client_library(value: str | int | float) -> None:
    try:
        ours: Decimal | None = parse_quantity(value)
    except QuantityError:
        ours = None
    theirs = old_parse(value)
    if isinstance(value, str) and value.endswith("\n"):
        # The old guard's `$` let one trailing newline through; the API server refuses it, and so do we now.
        assert ours is None
        return
    assert (ours is None) == (theirs is None), (value, ours, theirs)
    if ours is not None and theirs is not None:
        assert ours.as_tuple() == theirs.as_tuple(), value
