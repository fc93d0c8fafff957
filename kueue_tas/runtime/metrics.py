"""Prometheus metrics of kueue-tas, in a dedicated registry (never the process-global one).

One :class:`Metrics` object is created at start-up and handed to the components; tests make
their own. ``render()`` gives the text exposition for ``/metrics``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Final, Literal

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    disable_created_metrics,
    generate_latest,
)

_disable_created_metrics: Callable[[], None] = disable_created_metrics

AdmissionOutcome = Literal["ready", "retry", "rejected", "error"]
OUTCOMES: Final[tuple[AdmissionOutcome, ...]] = ("ready", "retry", "rejected", "error")

DECISION_BUCKETS: Final = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)

# (level, domain, resource) -> free amount
DomainFree = Mapping[tuple[str, str, str], float]


class Metrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        _disable_created_metrics()  # no *_created series (a process-wide switch of prometheus_client)
        self.registry = registry if registry is not None else CollectorRegistry(auto_describe=True)
        r = self.registry
        self.admissions_total = Counter(
            "kueue_tas_admissions_total",
            "Admission-check decisions by outcome (ready, retry, rejected, error).",
            ["outcome"],
            registry=r,
        )
        for outcome in OUTCOMES:
            self.admissions_total.labels(outcome)  # export zeros
        self.decision_seconds = Histogram(
            "kueue_tas_decision_seconds",
            "Time to compute a workload's topology assignment.",
            buckets=DECISION_BUCKETS,
            registry=r,
        )
        self.domain_free = Gauge(
            "kueue_tas_domain_free",
            "Free capacity per topology domain and resource (Kueue units: cpu in millicores).",
            ["topology", "flavor", "level", "domain", "resource"],
            registry=r,
        )
        self.informer_lag_seconds = Gauge(
            "kueue_tas_informer_lag_seconds",
            "Seconds since the informer last received an event or bookmark, per resource.",
            ["resource"],
            registry=r,
        )
        self.ungated_pods_total = Counter(
            "kueue_tas_ungated_pods_total", "Pods whose scheduling gate was removed.", registry=r
        )
        self.ungate_errors_total = Counter(
            "kueue_tas_ungate_errors_total", "Failed attempts to ungate a pod.", registry=r
        )
        self._domain_series: dict[tuple[str, str], set[tuple[str, str, str]]] = {}

    # ---- helpers ---------------------------------------------------------------------------------

    def record_admission(self, outcome: AdmissionOutcome) -> None:
        if outcome not in OUTCOMES:
            raise ValueError(f"unknown admission outcome {outcome!r} (one of {', '.join(OUTCOMES)})")
        self.admissions_total.labels(outcome).inc()

    def set_domain_free(self, topology: str, flavor: str, values: DomainFree) -> None:
        """Replace the free-capacity series of one (topology, flavor): series not in ``values``
        are removed, so deleted domains do not linger."""
        key = (topology, flavor)
        old = self._domain_series.get(key, set())
        new = set(values)
        for level, domain, resource in old - new:
            self.domain_free.remove(topology, flavor, level, domain, resource)
        for (level, domain, resource), amount in values.items():
            self.domain_free.labels(topology, flavor, level, domain, resource).set(amount)
        if new:
            self._domain_series[key] = new
        else:
            self._domain_series.pop(key, None)

    def clear_domain_free(self, topology: str, flavors: Iterable[str] | None = None) -> None:
        """Drop the series of a topology (all flavors, or only ``flavors``)."""
        wanted = None if flavors is None else set(flavors)
        for t, f in list(self._domain_series):
            if t == topology and (wanted is None or f in wanted):
                self.set_domain_free(t, f, {})

    def render(self) -> tuple[bytes, str]:
        """(body, content type) of the text exposition format."""
        return generate_latest(self.registry), CONTENT_TYPE_LATEST
