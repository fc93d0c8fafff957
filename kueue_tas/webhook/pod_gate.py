"""What the pod webhook (``gate.kueue-tas.io``) does to a pod at creation (pure).

The check's ``podSetUpdates`` label the pods of every PodSet the ungater places
(``GATED_LABEL``); Kueue merges those updates into the Job's template each time it starts the
Job. Our gate in the template is not as durable: Kueue's stop restores the template it first
saw, and a stop that lands after a fast re-admission wrote the gate leaves pods free to bind
anywhere (chaos seeds 1209, 1213). Gating at pod creation closes that gap: a pod that carries
the label and not the gate gets it, so no pod of a gated PodSet can be scheduled before the
ungater has given it its domain.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kueue_tas.api import constants as c


def needs_gate(pod: Mapping[str, Any], gate: str) -> bool:
    """Whether ``pod`` (as the apiserver sends it) is one of ours that lacks ``gate``. A pod
    created with ``spec.nodeName`` is bound already: the apiserver refuses gates on it, and the
    stray-pod reaper answers for it."""
    metadata = pod.get("metadata")
    spec = pod.get("spec")
    if not isinstance(metadata, Mapping) or not isinstance(spec, Mapping):
        return False
    labels = metadata.get("labels")
    if not isinstance(labels, Mapping) or labels.get(c.GATED_LABEL) != c.GATED_LABEL_VALUE:
        return False
    if spec.get("nodeName"):
        return False
    gates = spec.get("schedulingGates")
    if gates is None:
        return True
    if not isinstance(gates, list):
        return False  # not a pod the apiserver would store: its validation answers
    return not any(isinstance(g, Mapping) and g.get("name") == gate for g in gates)


def gate_patch(pod: Mapping[str, Any], gate: str) -> list[dict[str, Any]]:
    """The JSON patch that adds ``gate`` to ``pod`` (``[]``: nothing to add)."""
    if not needs_gate(pod, gate):
        return []
    if not pod["spec"].get("schedulingGates"):
        return [{"op": "add", "path": "/spec/schedulingGates", "value": [{"name": gate}]}]
    return [{"op": "add", "path": "/spec/schedulingGates/-", "value": {"name": gate}}]
