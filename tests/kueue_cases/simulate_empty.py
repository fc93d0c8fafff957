"""``simulate_empty=True`` cases.

Kueue's ``TestFindTopologyAssignments`` table has no simulateEmpty case (its
harness never sets the option), so these are *derived*: each one reuses the
inputs of a Kueue case and changes only ``simulate_empty``, with the expected
result worked out from Kueue's documented rule (simulateEmpty ignores the usage
of admitted TAS workloads but still subtracts non-TAS usage). The ids say
"derived from" so they are never mistaken for Kueue's own expectations.
"""

from __future__ import annotations

from dataclasses import replace

from .find_topology_assignments import CASES
from .model import HOST, TWO_LEVELS, KueueCase, PodSetCase, on_domains, on_hosts, required

_BY_NAME = {c.name: c for c in CASES}


def _derived(base: str, podsets: tuple[PodSetCase, ...], note: str) -> KueueCase:
    case = _BY_NAME[base]
    return replace(case, name=f"derived from: {base}; simulate_empty", podsets=podsets, simulate_empty=True, note=note)


SIMULATE_EMPTY_CASES: tuple[KueueCase, ...] = (
    _derived(
        "sibling-flavor usage on the shared hostname reduces remaining capacity",
        (PodSetCase(count=1, requests={"cpu": 1000}, topology=required(HOST), want=on_hosts(("x1", 1))),),
        "TAS usage on x1 is ignored, so the name-order tie break picks x1 again.",
    ),
    _derived(
        "non-hostname-leaf topology: prior c.usage must be applied even when aggregatedDomainUsages is non-nil empty",
        (
            PodSetCase(
                count=1,
                requests={"cpu": 1000},
                topology=required("cloud.com/topology-rack"),
                want=on_domains(TWO_LEVELS, (("b1", "r1"), 1)),
            ),
        ),
        "TAS usage on b1/r1 and b1/r2 is ignored; the first rack in name order wins.",
    ),
    _derived(
        "include usage from running non-TAS pods, found free capacity on another node; BestFit",
        (PodSetCase(count=1, requests={"cpu": 600}, topology=required(HOST), want=on_hosts(("x5", 1))),),
        "Non-TAS usage still counts under simulate_empty, so x3 stays too small.",
    ),
    _derived(
        "include usage from running non-TAS pods, blocked assignment; BestFit",
        (
            PodSetCase(
                count=1,
                requests={"cpu": 600},
                topology=required(HOST),
                reason=(
                    'topology "default" doesn\'t allow to fit any of 1 pod(s). '
                    'Total nodes: 1; excluded: resource "cpu": 1'
                ),
            ),
        ),
        "Non-TAS usage still counts under simulate_empty: the same failure as without it.",
    ),
)
