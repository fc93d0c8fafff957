"""What every reconciler is built from: the shared informers, which checks are ours, the Event
sink, the metrics, the settings and the feature gates. ``controllers/setup.py`` builds one;
each reconciler takes it first, then only what is its own (a writer, a clock, a capacity model)."""

from __future__ import annotations

from dataclasses import dataclass

from kueue_tas.controllers.informers import OurChecks, SharedInformers
from kueue_tas.kube.events import EventSink
from kueue_tas.runtime.config import Settings
from kueue_tas.runtime.metrics import Metrics
from kueue_tas.topology.features import DEFAULT_GATES, FeatureGates


@dataclass(frozen=True, slots=True)
class ControllerDeps:
    informers: SharedInformers
    checks: OurChecks
    events: EventSink
    metrics: Metrics
    settings: Settings
    gates: FeatureGates = DEFAULT_GATES
