"""The controller settings and fleet a chaos run uses: Kueue users rename our gate and our keys,
and their clouds name Nodes unlike their hostname label, so a run drawn with the ``renamed``
profile proves the controller, the pod webhook and the ungater honour the settings rather than
the defaults (a gate compared with the constant released no pod) on EKS-named nodes."""

from __future__ import annotations

from dataclasses import dataclass

from e2e.nodes import EKS_NAME_SUFFIX
from kueue_tas.api import constants as kc


@dataclass(frozen=True)
class Profile:
    name: str
    scheduling_gate: str
    annotation_prefix: str
    # Node names unlike their hostname label, as eksctl, kops and ``--hostname-override`` make
    # them (an assignment's hostname looked up as a Node name released no pod there).
    node_name_suffix: str = ""

    def env(self) -> dict[str, str]:
        """The controller's environment for these settings (pydantic-settings' ``KUEUE_TAS_`` names)."""
        return {
            "KUEUE_TAS_SCHEDULING_GATE": self.scheduling_gate,
            "KUEUE_TAS_ANNOTATION_PREFIX": self.annotation_prefix,
        }

    def key(self, suffix: str) -> str:
        """A pod-template annotation key under this profile's prefix."""
        return self.annotation_prefix + suffix


DEFAULT = Profile("default", kc.SCHEDULING_GATE, kc.DEFAULT_ANNOTATION_PREFIX)
RENAMED = Profile("renamed", "tas.example.com/placement", "tas.example.com/", node_name_suffix=EKS_NAME_SUFFIX)
PROFILES = {p.name: p for p in (DEFAULT, RENAMED)}
MIXED = "mixed"


def profile_for(seed: int, choice: str) -> Profile:
    """``choice`` is a profile's name, or ``mixed``: every third seed renamed, so any three
    consecutive seeds (the smoke's) include one run of each."""
    if choice != MIXED:
        return PROFILES[choice]
    return RENAMED if seed % 3 == 0 else DEFAULT
