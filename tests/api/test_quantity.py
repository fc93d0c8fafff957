from __future__ import annotations

from decimal import Decimal

import pytest
from vocab import GPU

from kueue_tas.api.quantity import (
    QuantityError,
    parse_quantity,
    quantity_to_int,
    resource_list_to_ints,
    to_kueue_units,
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("100m", Decimal("0.1")),
        ("1.5Gi", Decimal(3 * 512 * 1024 * 1024)),
        ("2e3", Decimal(2000)),
        ("2E3", Decimal(2000)),
        ("1e-3", Decimal("0.001")),
        ("1Ki", Decimal(1024)),
        ("1k", Decimal(1000)),
        ("1M", Decimal(1_000_000)),
        ("1E", Decimal(10**18)),  # bare E is the exa prefix, not an exponent
        ("1Ei", Decimal(2**60)),
        ("500n", Decimal("0.0000005")),
        ("3u", Decimal("0.000003")),
        ("0.5", Decimal("0.5")),
        (".5", Decimal("0.5")),
        ("5.", Decimal(5)),
        ("+2", Decimal(2)),
        ("-2", Decimal(-2)),
        (4, Decimal(4)),
        (0.25, Decimal("0.25")),
    ],
)
def test_parse_quantity(text: str | int | float, expected: Decimal) -> None:
    assert parse_quantity(text) == expected


@pytest.mark.parametrize(
    "bad",
    ["", "abc", "1K", "1ki", "1mi", "1 Gi", " 1", "1_000", "NaN", "Infinity", "1.2.3", "1Gi1", "e3", "1e", "1ee3"],
)
def test_malformed_quantity_raises_quantity_error(bad: str) -> None:
    with pytest.raises(QuantityError) as err:
        parse_quantity(bad, resource="memory")
    assert repr(bad) in str(err.value)
    assert "memory" in str(err.value)
    assert isinstance(err.value, ValueError)


@pytest.mark.parametrize("bad", [True, None, [1], float("nan"), float("inf"), Decimal("NaN")])
def test_non_quantity_types_rejected(bad: object) -> None:
    with pytest.raises(QuantityError):
        parse_quantity(bad)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("resource", "text", "expected"),
    [
        ("cpu", "100m", 100),
        ("cpu", "1", 1000),
        ("cpu", "1.5", 1500),
        ("cpu", "0.0001", 1),  # 0.1 millicore rounds up to 1
        ("cpu", "2e3", 2_000_000),
        ("memory", "1.5Gi", 1610612736),
        ("memory", "1Ki", 1024),
        ("memory", "100m", 1),  # 0.1 byte rounds up
        ("memory", "2e3", 2000),
        (GPU, "8", 8),
        ("pods", "110", 110),
        ("ephemeral-storage", "1.1", 2),
    ],
)
def test_kueue_units(resource: str, text: str, expected: int) -> None:
    assert quantity_to_int(resource, text) == expected


def test_to_kueue_units_rounds_up_not_to_nearest() -> None:
    assert to_kueue_units("memory", Decimal("1.0001")) == 2
    assert to_kueue_units("cpu", Decimal("0.0011")) == 2


def test_resource_list_to_ints() -> None:
    assert resource_list_to_ints({"cpu": "250m", "memory": "64Mi", "pods": 10}) == {
        "cpu": 250,
        "memory": 64 * 1024 * 1024,
        "pods": 10,
    }
    assert resource_list_to_ints(None) == {}
    with pytest.raises(QuantityError, match="'cpu'"):
        resource_list_to_ints({"cpu": "lots"})


@pytest.mark.parametrize(
    ("resource", "value"),
    [("cpu", "9223372036854776"), ("memory", "9223372036854776"), (GPU, "10E"), ("cpu", "-10E")],
)
def test_amount_beyond_int64_milli_units_is_refused_with_the_resource(resource: str, value: str) -> None:
    with pytest.raises(QuantityError, match=f"{resource!r} is out of range"):
        quantity_to_int(resource, value)


def test_largest_countable_amount_is_accepted() -> None:
    assert quantity_to_int("memory", "9223372036854775") == 9223372036854775
    assert quantity_to_int("cpu", "9223372036854775") == 9223372036854775000
