"""The controller settings a chaos run uses: Kueue users rename our gate and our keys, so a run
drawn with the ``renamed`` profile proves the controller, the pod webhook and the ungater honour
the settings rather than the defaults (a gate compared with the constant released no pod)."""

from __future__ import annotations

import random
from dataclasses import dataclass

from kueue_tas.api import constants as kc


@dataclass(frozen=True)
class Profile:
    name: str
    scheduling_gate: str
    annotation_prefix: str

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
RENAMED = Profile("renamed", "tas.example.com/placement", "tas.example.com/")
PROFILES = {p.name: p for p in (DEFAULT, RENAMED)}
MIXED = "mixed"


def profile_for(seed: int, choice: str) -> Profile:
    """``choice`` is a profile's name, or ``mixed``: drawn from the seed, one run in three renamed."""
    if choice != MIXED:
        return PROFILES[choice]
    return RENAMED if random.Random(f"profile-{seed}").random() < 1 / 3 else DEFAULT
