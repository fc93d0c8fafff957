"""Kubernetes resource quantities and Kueue's integer units.

Parsing is done by ``kubernetes.utils.quantity.parse_quantity``. That function is
more lenient than the API server (it accepts ``NaN``, ``1K``, ``1_000``, blanks),
so the text is first checked against the quantity grammar of
``k8s.io/apimachinery/pkg/api/resource`` and anything outside it is refused.

Kueue's units: ``cpu`` in millicores rounded up (``Quantity.MilliValue``), every
other resource in base units rounded up (``Quantity.Value``).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from decimal import ROUND_CEILING, Decimal

from kubernetes.utils import quantity as _k8s_quantity

CPU = "cpu"

# The client library's parser is untyped; give it its real signature once.
_k8s_parse_quantity: Callable[[str], Decimal] = _k8s_quantity.parse_quantity

QuantityValue = str | int | float | Decimal

# <signedNumber><suffix>; suffix is a binary SI prefix, a decimal SI prefix or a
# decimal exponent (e/E followed by a signed integer).
_QUANTITY_RE = re.compile(
    r"^[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)"  # signed number
    r"(?:[KMGTPE]i|[numkMGTPE]|[eE][+-]?[0-9]+)?$"  # binary SI | decimal SI | exponent
)


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
    if not _QUANTITY_RE.match(text):
        raise QuantityError(
            f"invalid quantity {text!r}{where}: expected a number with an optional suffix "
            "(Ki, Mi, Gi, Ti, Pi, Ei, n, u, m, k, M, G, T, P, E or an exponent like e3)"
        )
    try:
        parsed = _k8s_parse_quantity(text)
    except ValueError as exc:  # should not happen after the grammar check
        raise QuantityError(f"invalid quantity {text!r}{where}: {exc}") from exc
    return parsed


def to_kueue_units(resource: str, amount: Decimal) -> int:
    """Convert an exact amount to Kueue's integer units (cpu: millicores; others: base units), rounding up."""
    if resource == CPU:
        amount = amount * 1000
    return int(amount.to_integral_value(rounding=ROUND_CEILING))


def quantity_to_int(resource: str, value: QuantityValue) -> int:
    """Parse ``value`` and convert it to Kueue units for ``resource``."""
    return to_kueue_units(resource, parse_quantity(value, resource=resource))


def resource_list_to_ints(resources: Mapping[str, QuantityValue] | None) -> dict[str, int]:
    """Convert a ResourceList (``{"cpu": "500m", "memory": "1Gi"}``) to Kueue units."""
    if not resources:
        return {}
    return {name: quantity_to_int(name, value) for name, value in resources.items()}
