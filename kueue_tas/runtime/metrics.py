"""Prometheus metrics of kueue-tas, in a dedicated registry (never the process-global one).

One :class:`Metrics` object is created at start-up and handed to the components; tests make
their own. ``render()`` gives the text exposition for ``/metrics``.
"""

from __future__ import annotations

import platform
from collections.abc import Callable, Iterable, Mapping
from typing import Final, Generic, Literal, TypeVar

import structlog
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    disable_created_metrics,
    generate_latest,
)

from kueue_tas.version import version

log = structlog.get_logger(__name__)

_disable_created_metrics: Callable[[], None] = disable_created_metrics

AdmissionOutcome = Literal["ready", "retry", "rejected", "error"]
OUTCOMES: Final[tuple[AdmissionOutcome, ...]] = ("ready", "retry", "rejected", "error")
# Why the admitter answered Retry: the flavor's Topology is not usable yet, the workload does not
# fit now, or it is held for its preferred level (patience).
RETRY_REASONS: Final[tuple[str, ...]] = ("no_topology", "does_not_fit", "preferred_wait")
PREEMPTION_MODES: Final[tuple[str, ...]] = ("enabled", "dry_run")
# How a reservation ended: its workload placed, deleted or finished, it timed out, or its domain
# could no longer hold its workload once its occupants end (a node gone).
RESERVATION_ENDS: Final[tuple[str, ...]] = ("placed", "gone", "expired", "unfit")
RESERVATION_BUCKETS: Final = (60.0, 300.0, 600.0, 1800.0, 3600.0, 7200.0, 14400.0, 28800.0, 86400.0)

RepairOutcome = Literal["done", "impossible"]
REPAIR_BUCKETS: Final = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0)
DECISION_BUCKETS: Final = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)

# (level, domain, resource) -> free amount
DomainFree = Mapping[tuple[str, str, str], float]
# (level, domain, shape) -> pods of the shape that fit; (level, shape) -> completely free domains
DomainSlotCounts = Mapping[tuple[str, str, str], float]
FreeDomainCounts = Mapping[tuple[str, str], float]


_Labels = TypeVar("_Labels", bound=tuple[str, ...])


class TopologySeries(Generic[_Labels]):
    """The series of one gauge labelled (topology, flavor, ...), replaced a (topology, flavor)
    at a time: series not in the new values are removed, so deleted domains do not linger, and
    only changed values are written (a 10,000-node topology has tens of thousands of series,
    most unchanged between updates)."""

    def __init__(self, gauge: Gauge) -> None:
        self.gauge = gauge
        self._series: dict[tuple[str, str], dict[_Labels, float]] = {}

    def replace(self, topology: str, flavor: str, values: Mapping[_Labels, float]) -> None:
        key = (topology, flavor)
        old = self._series.get(key, {})
        for labels in old.keys() - values.keys():
            self.gauge.remove(topology, flavor, *labels)
        for labels, amount in values.items():
            if old.get(labels) != amount:
                self.gauge.labels(topology, flavor, *labels).set(amount)
        if values:
            self._series[key] = dict(values)
        else:
            self._series.pop(key, None)

    def pairs(self) -> set[tuple[str, str]]:
        """The (topology, flavor) pairs that have series now."""
        return set(self._series)


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
        self.retries_total = Counter(
            "kueue_tas_retries_total",
            "Retry decisions by reason (no_topology, does_not_fit, preferred_wait).",
            ["reason"],
            registry=r,
        )
        for reason in RETRY_REASONS:
            self.retries_total.labels(reason)
        self.topology_preemptions_total = Counter(
            "kueue_tas_topology_preemptions_total",
            "Topology-driven preemptions decided, by mode (enabled: victims evicted; dry_run: only reported).",
            ["mode"],
            registry=r,
        )
        self.topology_preemption_victims_total = Counter(
            "kueue_tas_topology_preemption_victims_total",
            "Workloads chosen as victims of topology-driven preemptions, by mode.",
            ["mode"],
            registry=r,
        )
        for mode in PREEMPTION_MODES:
            self.topology_preemptions_total.labels(mode)
            self.topology_preemption_victims_total.labels(mode)
        self.reservations_made_total = Counter(
            "kueue_tas_reservations_made_total",
            "Domains reserved for workloads blocked by fragmentation.",
            registry=r,
        )
        self.reservation_held_seconds = Histogram(
            "kueue_tas_reservation_held_seconds",
            "How long a reservation was held, by how it ended (placed, gone, expired, unfit).",
            ["end"],
            buckets=RESERVATION_BUCKETS,
            registry=r,
        )
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
        self.domain_free_slots = Gauge(
            "kueue_tas_domain_free_slots",
            "Pods of each configured shape (free_slot_shapes) that still fit per topology domain, at the "
            "levels free_slot_levels names: the sum over the domain's hosts of the pods fitting on each.",
            ["topology", "flavor", "level", "domain", "shape"],
            registry=r,
        )
        self.free_domains = Gauge(
            "kueue_tas_free_domains",
            "Domains per level where nothing running takes a slot of the shape (and there is at least one).",
            ["topology", "flavor", "level", "shape"],
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
        self.failed_nodes_seen_total = Counter(
            "kueue_tas_failed_nodes_seen_total",
            "Nodes found failed (NotReady past the grace, deleted, untolerated NoExecute taint, cordoned, "
            "lost label) under an admitted workload; each failure counted once.",
            registry=r,
        )
        self.node_repairs_total = Counter(
            "kueue_tas_node_repairs_total",
            "Workloads repaired after node failures (done: pods moved; impossible: requeued, no replacement fitted).",
            ["outcome"],
            registry=r,
        )
        for repair in ("done", "impossible"):
            self.node_repairs_total.labels(repair)
        self.node_repairs_pending = Gauge(
            "kueue_tas_node_repairs_pending",
            "Admitted workloads on failed nodes for which no replacement fits yet.",
            registry=r,
        )
        self.node_repair_seconds = Histogram(
            "kueue_tas_node_repair_seconds",
            "From a node counted failed (after the grace) to the repaired assignment written.",
            buckets=REPAIR_BUCKETS,
            registry=r,
        )
        self.stray_pods_terminated_total = Counter(
            "kueue_tas_stray_pods_terminated_total",
            "Pods of admitted workloads deleted because their assignment has no slot for them where they run.",
            registry=r,
        )
        self.webhook_reviews_total = Counter(
            "kueue_tas_webhook_reviews_total",
            "Admission reviews answered by the webhooks, by object kind, operation and result "
            "(allowed, denied, error: could not judge, so allowed; gated: the pod webhook added our gate; "
            "rejected: HTTP 400, 413 or 503). Kinds and operations we do not serve are counted as other.",
            ["kind", "operation", "result"],
            registry=r,
        )
        # No user, token or path label: the series are a fixed set, whatever clients send.
        self.http_auth_total = Counter(
            "kueue_tas_http_auth_total",
            "Requests to /metrics and the topology map by the outcome of their authentication and "
            "authorization (allowed, unauthorized, forbidden, throttled, error).",
            ["server", "result"],
            registry=r,
        )
        self.build_info = Gauge(
            "kueue_tas_build_info",
            "Always 1; its labels name the version of kueue-tas (the git tag it was built from) and of "
            "the Python running it, so a dashboard shows which replicas run what during a rollout.",
            ["version", "python_version"],
            registry=r,
        )
        self.build_info.labels(version(), platform.python_version()).set(1)
        self._domain_free: TopologySeries[tuple[str, str, str]] = TopologySeries(self.domain_free)
        self._domain_slots: TopologySeries[tuple[str, str, str]] = TopologySeries(self.domain_free_slots)
        self._free_domains: TopologySeries[tuple[str, str]] = TopologySeries(self.free_domains)
        self._collect_hooks: dict[str, Callable[[], None]] = {}

    # ---- helpers ---------------------------------------------------------------------------------

    def record_admission(self, outcome: AdmissionOutcome) -> None:
        if outcome not in OUTCOMES:
            raise ValueError(f"unknown admission outcome {outcome!r} (one of {', '.join(OUTCOMES)})")
        self.admissions_total.labels(outcome).inc()

    def record_preemption(self, mode: str, victims: int) -> None:
        if mode not in PREEMPTION_MODES:
            raise ValueError(f"unknown preemption mode {mode!r} (one of {', '.join(PREEMPTION_MODES)})")
        self.topology_preemptions_total.labels(mode).inc()
        self.topology_preemption_victims_total.labels(mode).inc(victims)

    def record_reservation_end(self, end: str, held_s: float) -> None:
        if end not in RESERVATION_ENDS:
            raise ValueError(f"unknown reservation end {end!r} (one of {', '.join(RESERVATION_ENDS)})")
        self.reservation_held_seconds.labels(end).observe(max(0.0, held_s))

    def record_retry(self, reason: str) -> None:
        if reason not in RETRY_REASONS:
            raise ValueError(f"unknown retry reason {reason!r} (one of {', '.join(RETRY_REASONS)})")
        self.retries_total.labels(reason).inc()

    def set_domain_free(self, topology: str, flavor: str, values: DomainFree) -> None:
        """Replace the free-capacity series of one (topology, flavor) (``TopologySeries``)."""
        self._domain_free.replace(topology, flavor, values)

    def domain_free_keys(self) -> set[tuple[str, str]]:
        """The (topology, flavor) pairs that have free-capacity series now."""
        return self._domain_free.pairs()

    def set_free_slots(
        self, topology: str, flavor: str, slots: DomainSlotCounts, free_domains: FreeDomainCounts
    ) -> None:
        """Replace the free-slot series of one (topology, flavor); empty mappings drop them."""
        self._domain_slots.replace(topology, flavor, slots)
        self._free_domains.replace(topology, flavor, free_domains)

    def free_slot_keys(self) -> set[tuple[str, str]]:
        """The (topology, flavor) pairs that have free-slot series now."""
        return self._domain_slots.pairs() | self._free_domains.pairs()

    def set_collect_hook(self, name: str, hook: Callable[[], None] | None) -> None:
        """Run ``hook`` before every ``render()`` (for gauges read at scrape time, e.g. a lag);
        one hook per name (a new one replaces it, None removes it)."""
        if hook is None:
            self._collect_hooks.pop(name, None)
        else:
            self._collect_hooks[name] = hook

    def clear_domain_free(self, topology: str, flavors: Iterable[str] | None = None) -> None:
        """Drop the series of a topology (all flavors, or only ``flavors``)."""
        wanted = None if flavors is None else set(flavors)
        for t, f in self._domain_free.pairs():
            if t == topology and (wanted is None or f in wanted):
                self.set_domain_free(t, f, {})

    def render(self) -> tuple[bytes, str]:
        """(body, content type) of the text exposition format."""
        for name, hook in list(self._collect_hooks.items()):
            try:
                hook()
            except Exception:  # a broken gauge must not break the scrape
                log.exception("metrics_collect_hook_failed", hook=name)
        return generate_latest(self.registry), CONTENT_TYPE_LATEST
