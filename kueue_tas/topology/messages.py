"""Kueue's failure texts for TAS placement, word for word.

Kept in one place because users compare them with what Kueue's own TAS says.
"""

from __future__ import annotations

from dataclasses import dataclass, field


def go_quote(text: str) -> str:
    """Go's %q for the strings we quote (topology names, taints, resource names)."""
    out = ['"']
    for ch in text:
        if ch == '"':
            out.append('\\"')
        elif ch == "\\":
            out.append("\\\\")
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\t":
            out.append("\\t")
        elif ch == "\r":
            out.append("\\r")
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\x{ord(ch):02x}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


@dataclass
class ExclusionStats:
    """Why leaves could not take any pod; appended to "does not fit" messages."""

    total_nodes: int = 0
    node_selector: int = 0
    affinity: int = 0
    topology_domain: int = 0
    taints: dict[str, int] = field(default_factory=dict)
    resources: dict[str, int] = field(default_factory=dict)

    def has_exclusions(self) -> bool:
        return bool(self.node_selector or self.affinity or self.topology_domain or self.taints or self.resources)

    def format_reasons(self) -> str:
        reasons: list[str] = []
        if self.node_selector:
            reasons.append(f"nodeSelector: {self.node_selector}")
        if self.affinity:
            reasons.append(f"affinity: {self.affinity}")
        if self.topology_domain:
            reasons.append(f"topologyDomain: {self.topology_domain}")
        reasons.extend(f"taint {go_quote(t)}: {n}" for t, n in self.taints.items())
        reasons.extend(f"resource {go_quote(r)}: {n}" for r, n in self.resources.items())
        # Kueue sorts the finished strings, not the categories.
        reasons.sort(key=lambda s: s.encode())
        return ", ".join(reasons)


def not_fit_message(topology_name: str, fit: int, needed: int, slice_size: int, stats: ExclusionStats) -> str:
    unit = "pod" if slice_size == 1 else "slice"
    name = go_quote(topology_name)
    if fit == 0:
        text = f"topology {name} doesn't allow to fit any of {needed} {unit}(s)"
    else:
        text = f"topology {name} allows to fit only {fit} out of {needed} {unit}(s)"
    if stats.has_exclusions():
        text += f". Total nodes: {stats.total_nodes}; excluded: {stats.format_reasons()}"
    return text


NO_LEVEL_SPECIFIED = "topology level not specified"
SLICE_SIZE_MISSING = "slice topology requested, but slice size not provided"


def no_domains_at_level(level: str) -> str:
    return f"no topology domains at level: {level}"


def no_requested_level(level: str) -> str:
    return f"no requested topology level: {level}"


def no_requested_slice_level(level: str) -> str:
    return f"no requested topology level for slices: {level}"


def slice_above_podset(slice_level: str, level: str) -> str:
    return f"podset slice topology {slice_level} is above the podset topology {level}"


def no_additional_layer_level(level: str) -> str:
    return f"no requested topology level for additional slice layer: {level}"


def additional_layer_not_lower(level: str, above: str) -> str:
    return f"additional slice layer topology {level} must be at a lower level than {above}"


def additional_layer_size(size: int, parent_size: int) -> str:
    return f"additional slice layer size {size} must evenly divide parent layer size {parent_size}"


def multi_layer_not_fit_message(
    topology_name: str, fits: list[tuple[str, int, int]] | None, stats: ExclusionStats
) -> str:
    """Kueue's multiLayerNotFitMessage; ``fits`` is (layer level, slices that fit, slices
    needed) per layer, or None when the level has no domain at all."""
    text = f"topology {go_quote(topology_name)} doesn't allow to fit"
    if fits is None:
        return text
    for level, fit, needed in fits:
        text += f"; {fit}/{needed} slice(s) fit on level {level}"
    if stats.has_exclusions():
        text += f". Total nodes: {stats.total_nodes}; excluded: {stats.format_reasons()}"
    return text


def stale_assignment(value: str) -> str:
    return (
        "Cannot replace the node, because the existing topologyAssignment is invalid, "
        f"as it contains the stale domain {value}"
    )


def no_replacement_found(node: str) -> str:
    return f"cannot find replacement assignment for unhealthy node: {node}"
