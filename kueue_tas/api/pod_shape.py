"""Pod shapes: ``nvidia.com/gpu=8`` or ``nvidia.com/gpu=8,cpu=16``, the per-pod requests the
free-slot count (``kueue_tas.topology.explain.free_slots``) asks "how many still fit?" about.

Here, in ``api``, beside the quantities, so that the settings (``runtime``, which must not
import the engine) can refuse a bad shape at start with the parser's own words.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from kueue_tas.api.quantity import MAX_MILLI_UNITS, QuantityError, parse_quantity, to_kueue_units

PODS = "pods"

# A resource name is a Kubernetes qualified name: an optional DNS-subdomain prefix and '/', then
# a name of at most 63 characters (cpu, memory, nvidia.com/gpu, hugepages-2Mi).
_RESOURCE_NAME = re.compile(
    r"(?:[a-z0-9](?:[-a-z0-9]*[a-z0-9])?(?:\.[a-z0-9](?:[-a-z0-9]*[a-z0-9])?)*/)?"
    r"(?=.{1,63}$)[A-Za-z0-9](?:[-A-Za-z0-9_.]*[A-Za-z0-9])?"
)


class PodShapeError(ValueError):
    """A pod shape that cannot be read; the message is one line naming the shape and the problem."""


@dataclass(frozen=True, slots=True)
class PodShape:
    """One pod's requests, as written (``text``) and in the engine's units (``requests``: cpu in
    millicores, memory in bytes, every other resource in base units, all rounded up)."""

    text: str
    requests: Mapping[str, int]

    def __hash__(self) -> int:
        return hash((self.text, tuple(sorted(self.requests.items()))))


def parse_pod_shape(text: str) -> PodShape:
    """``resource=quantity[,resource=quantity...]`` -> a :class:`PodShape`; a problem raises
    :class:`PodShapeError` (empty, not ``resource=quantity``, not a quantity, a resource twice,
    an amount of zero or less, ``pods``, which every pod takes one of anyway)."""
    if not isinstance(text, str):
        raise PodShapeError(f"pod shape {text!r}: expected a string like 'nvidia.com/gpu=8'")
    shown = text.strip()
    if not shown:
        raise PodShapeError("pod shape '': empty (expected resource=quantity[,resource=quantity...])")
    requests: dict[str, int] = {}
    for part in shown.split(","):
        name, sep, amount = (piece.strip() for piece in part.partition("="))
        if not sep or not name or not amount:
            raise PodShapeError(f"pod shape {shown!r}: {part.strip()!r} is not resource=quantity")
        if not _RESOURCE_NAME.fullmatch(name):
            raise PodShapeError(f"pod shape {shown!r}: {name!r} is not a resource name (e.g. 'cpu', 'nvidia.com/gpu')")
        if name == PODS:
            raise PodShapeError(f"pod shape {shown!r}: 'pods' is not a request (every pod takes one)")
        if name in requests:
            raise PodShapeError(f"pod shape {shown!r}: resource {name!r} appears twice")
        try:
            exact = parse_quantity(amount)
        except QuantityError:
            raise PodShapeError(f"pod shape {shown!r}: {amount!r} is not a quantity") from None
        try:
            value = to_kueue_units(name, exact)
        except QuantityError:
            raise PodShapeError(f"pod shape {shown!r}: {amount} is beyond {MAX_MILLI_UNITS}m") from None
        if value <= 0:
            raise PodShapeError(f"pod shape {shown!r}: {name} must be more than 0, got {amount}")
        requests[name] = value
    return PodShape(shown, MappingProxyType(requests))
