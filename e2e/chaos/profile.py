"""The controller settings and fleet a chaos run uses: Kueue users rename our gate and our keys,
and their clouds name Nodes unlike their hostname label, so a run drawn with the ``renamed``
profile proves the controller, the pod webhook and the ungater honour the settings rather than
the defaults (a gate compared with the constant released no pod) on EKS-named nodes.

The ``big-jobs`` profile turns issue 31's features on, under the renamed keys and on the
EKS-named fleet: the ClusterQueue opts into topology-driven preemption (Enabled, preempting
lower priorities within itself), reservations start after a few seconds of waiting, and
submissions of a rack's worth of GPUs or more run at a higher priority than the rest, so
preemptions, holds and reservations happen while the faults do."""

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
    # Issue 31's features: priorities on the submissions, topology-driven preemption on the
    # ClusterQueue, and the controller settings below.
    big_jobs: bool = False
    settings: tuple[tuple[str, str], ...] = ()

    def env(self) -> dict[str, str]:
        """The controller's environment for these settings (pydantic-settings' ``KUEUE_TAS_`` names)."""
        return {
            "KUEUE_TAS_SCHEDULING_GATE": self.scheduling_gate,
            "KUEUE_TAS_ANNOTATION_PREFIX": self.annotation_prefix,
            **{f"KUEUE_TAS_{name.upper()}": value for name, value in self.settings},
        }

    def key(self, suffix: str) -> str:
        """A pod-template annotation key under this profile's prefix."""
        return self.annotation_prefix + suffix


DEFAULT = Profile("default", kc.SCHEDULING_GATE, kc.DEFAULT_ANNOTATION_PREFIX)
RENAMED = Profile("renamed", "tas.example.com/placement", "tas.example.com/", node_name_suffix=EKS_NAME_SUFFIX)
BIG_JOBS = Profile(
    "big-jobs",
    "tas.example.com/placement",
    "tas.example.com/",
    node_name_suffix=EKS_NAME_SUFFIX,
    big_jobs=True,
    # Short enough to happen within a run's 45 s; the rate limit well above the default so
    # preemptions overlap with the faults rather than wait out a minute.
    settings=(
        ("reservation_after_seconds", "4"),
        ("reservation_timeout_seconds", "40"),
        ("preemption_hold_seconds", "20"),
        ("preemption_per_minute", "30"),
    ),
)
PROFILES = {p.name: p for p in (DEFAULT, RENAMED, BIG_JOBS)}
MIXED = "mixed"
# A submission asking for at least this many GPUs runs at the high priority under ``big-jobs``.
BIG_GPUS = 8


def profile_for(seed: int, choice: str) -> Profile:
    """``choice`` is a profile's name, or ``mixed``: every third seed renamed, and of the others
    every fourth with issue 31's features on, so any three consecutive seeds (the smoke's)
    include a renamed run and a campaign of 100 about 17 big-jobs runs."""
    if choice != MIXED:
        return PROFILES[choice]
    if seed % 3 == 0:
        return RENAMED
    return BIG_JOBS if seed % 4 == 1 and seed % 3 != 0 else DEFAULT
