"""Which ResourceFlavors kueue-tas governs, and on which Topology.

An AdmissionCheck whose controllerName is ours points at a Topology through
``spec.parameters``; every ClusterQueue that lists the check puts the flavors
named in ``onFlavors`` (all of its flavors when empty) on that Topology.
Optionally (Kueue's own keys, Kueue's TAS switched off) a flavor's
``spec.topologyName`` maps it too.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from kueue_tas.api import constants as c
from kueue_tas.api.kueue_objects import AdmissionCheck, ClusterQueue


class FlavorMappingError(ValueError):
    pass


@dataclass(frozen=True, slots=True)
class FlavorBinding:
    flavor: str
    topology: str
    check: str | None  # the AdmissionCheck that governs it; None when mapped by spec.topologyName


def check_topology(check: AdmissionCheck) -> str | None:
    """The Topology an AdmissionCheck of ours points at, or None when its parameters are not a Topology."""
    params = check.spec.parameters
    if params is None or params.kind != c.KIND_TOPOLOGY or params.api_group != c.KUEUE_GROUP or not params.name:
        return None
    return params.name


def bind_flavors(
    checks: Iterable[AdmissionCheck],
    cluster_queues: Iterable[ClusterQueue],
    flavor_topology_names: dict[str, str | None] | None = None,
    *,
    controller_name: str = c.CONTROLLER_NAME,
    conflicts: dict[str, str] | None = None,
) -> dict[str, FlavorBinding]:
    """flavor name -> binding. ``flavor_topology_names`` (flavor -> spec.topologyName) is
    consulted only for flavors that no check of ours governs. ``controller_name`` is the
    configured one (``Settings.controller_name``), so that a renamed controller finds its checks.

    A flavor put on two Topologies raises ``FlavorMappingError``; given ``conflicts``, that
    flavor is left unbound and its problem recorded there instead (flavor -> message), so
    that one bad flavor does not unbind every other one (the live controller)."""
    ours = {ac.name: check_topology(ac) for ac in checks if ac.spec.controller_name == controller_name}
    bindings: dict[str, FlavorBinding] = {}
    for cq in cluster_queues:
        for rule in cq.check_rules():
            if rule.name not in ours:
                continue
            topology = ours[rule.name]
            if topology is None:
                continue
            for flavor in rule.on_flavors or cq.flavor_names():
                if conflicts is not None and flavor in conflicts:
                    continue
                prev = bindings.get(flavor)
                if prev is not None and prev.topology != topology:
                    message = (
                        f"ResourceFlavor {flavor!r}: put on Topology {prev.topology!r} by AdmissionCheck "
                        f"{prev.check!r} and on Topology {topology!r} by AdmissionCheck {rule.name!r}"
                    )
                    if conflicts is None:
                        raise FlavorMappingError(message)
                    conflicts[flavor] = message
                    del bindings[flavor]
                    continue
                bindings[flavor] = FlavorBinding(flavor, topology, rule.name)
    for flavor, topology_name in (flavor_topology_names or {}).items():
        if topology_name and flavor not in bindings and flavor not in (conflicts or {}):
            bindings[flavor] = FlavorBinding(flavor, topology_name, None)
    return bindings
