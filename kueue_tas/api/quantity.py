"""Kubernetes resource quantities and Kueue's integer units.

The text must match the quantity grammar of ``k8s.io/apimachinery/pkg/api/resource``;
its number is then read by :class:`decimal.Decimal` and scaled by the suffix's power
of 1000 or 1024, in the default decimal context (as the Kubernetes Python client
computes it, so results are the same Decimals it gives).

Kueue's units: ``cpu`` in millicores rounded up (``Quantity.MilliValue``), every
other resource in base units rounded up (``Quantity.Value``).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from decimal import ROUND_CEILING, Decimal, DecimalException

CPU = "cpu"

QuantityValue = str | int | float | Decimal

# <signedNumber><suffix>; suffix is a binary SI prefix, a decimal SI prefix or a
# decimal exponent (e/E followed by a signed integer).
_QUANTITY_RE = re.compile(
    r"(?P<number>[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))"  # signed number
    r"(?:(?P<suffix>[KMGTPE]i|[numkMGTPE])|(?P<exponent>[eE][+-]?[0-9]+))?"  # binary SI | decimal SI | exponent
)
# Suffix -> (base, power): the amount is number * base ** power.
_SUFFIXES = {
    **{f"{p}i": (1024, i) for i, p in enumerate("KMGTPE", start=1)},
    **{p: (1000, i) for p, i in {"n": -3, "u": -2, "m": -1, "k": 1, "M": 2, "G": 3, "T": 4, "P": 5, "E": 6}.items()},
}


class QuantityError(ValueError):
    """A malformed Kubernetes quantity."""


def parse_quantity(value: QuantityValue, *, resource: str | None = None) -> Decimal:
    """Parse a quantity (``"100m"``, ``"1.5Gi"``, ``"2e3"``, ``4``) into an exact Decimal."""
    where = f" for resource {resource!r}" if resource else ""
    if isinstance(value, bool) or not isinstance(value, str | int | float | Decimal):
        raise QuantityError(f"invalid quantity {value!r}{where}: expected a string or a number")
    if isinstance(value, Decimal):
        if not value.is_finite():
            raise QuantityError(f"invalid quantity {value!r}{where}: not a finite number")
        return value
    if isinstance(value, float) and not math.isfinite(value):
        raise QuantityError(f"invalid quantity {value!r}{where}: not a finite number")
    text = str(value)
    m = _QUANTITY_RE.fullmatch(text)
    if m is None:
        raise QuantityError(
            f"invalid quantity {text!r}{where}: expected a number with an optional suffix "
            "(Ki, Mi, Gi, Ti, Pi, Ei, n, u, m, k, M, G, T, P, E or an exponent like e3)"
        )
    try:
        if m["suffix"] is None:
            return Decimal(m["number"] + (m["exponent"] or ""))
        base, power = _SUFFIXES[m["suffix"]]
        # A Decimal power, then a product rounded to the context's precision: the client library's arithmetic.
        return Decimal(m["number"]) * (base ** Decimal(power))
    except DecimalException as exc:  # an exponent beyond what Decimal can hold
        raise QuantityError(f"invalid quantity {text!r}{where}: out of range") from exc


# Kubernetes reads every quantity as an int64 of milli-units (``Quantity.MilliValue``); beyond that
# Go saturates or wraps, so such an amount has no meaning to the apiserver, Kueue or our int64 arrays.
MAX_MILLI_UNITS = 2**63 - 1


def to_kueue_units(resource: str, amount: Decimal) -> int:
    """Convert an exact amount to Kueue's integer units (cpu: millicores; others: base units), rounding up.

    Raises :class:`QuantityError` when the amount is beyond ``MAX_MILLI_UNITS`` milli-units.
    """
    if abs(amount) * 1000 > MAX_MILLI_UNITS:
        raise QuantityError(
            f"quantity {amount} for resource {resource!r} is out of range: Kubernetes counts at most {MAX_MILLI_UNITS}m"
        )
    if resource == CPU:
        amount = amount * 1000
    return int(amount.to_integral_value(rounding=ROUND_CEILING))


def capped_kueue_units(resource: str, amount: Decimal) -> int:
    """``to_kueue_units``, an amount beyond ``MAX_MILLI_UNITS`` milli-units read as that limit
    (with its sign) instead of refused.

    For what a Node offers (allocatable, capacity): a node with ``10Ei`` of an extended resource
    has more of it than any pod can request (a request beyond the limit is refused), and the
    limit says exactly that. Refusing the amount would leave the node out, so a Ready node would
    look deleted. The capacity matrices hold the limit: a cell beyond their own bound saturates
    with the exact value kept aside (``topology.engine.capacity_matrix``), and sums saturate instead of wrapping.
    """
    if abs(amount) * 1000 > MAX_MILLI_UNITS:
        limit = MAX_MILLI_UNITS if resource == CPU else MAX_MILLI_UNITS // 1000
        return limit if amount > 0 else -limit
    return to_kueue_units(resource, amount)


def quantity_to_int(resource: str, value: QuantityValue) -> int:
    """Parse ``value`` and convert it to Kueue units for ``resource``."""
    return to_kueue_units(resource, parse_quantity(value, resource=resource))


def resource_list_to_ints(resources: Mapping[str, QuantityValue] | None) -> dict[str, int]:
    """Convert a ResourceList (``{"cpu": "500m", "memory": "1Gi"}``) to Kueue units."""
    if not resources:
        return {}
    return {name: quantity_to_int(name, value) for name, value in resources.items()}


def offered_list_to_ints(resources: Mapping[str, QuantityValue] | None) -> dict[str, int]:
    """A Node's ResourceList (allocatable) in Kueue units, amounts beyond what Kubernetes counts
    capped at it (``capped_kueue_units``); a malformed quantity still raises ``QuantityError``."""
    if not resources:
        return {}
    return {name: capped_kueue_units(name, parse_quantity(value, resource=name)) for name, value in resources.items()}
