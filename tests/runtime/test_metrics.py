from __future__ import annotations

import pytest
from prometheus_client.parser import text_string_to_metric_families

from kueue_tas.runtime.metrics import Metrics


def samples(m: Metrics) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    body, content_type = m.render()
    assert content_type.startswith("text/plain")
    out = {}
    for fam in text_string_to_metric_families(body.decode()):
        for s in fam.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def test_metric_names_and_labels() -> None:
    m = Metrics()
    m.record_admission("ready")
    m.record_admission("retry")
    m.record_admission("ready")
    m.decision_seconds.observe(0.02)
    m.informer_lag_seconds.labels("pods").set(1.5)
    m.ungated_pods_total.inc(3)
    m.ungate_errors_total.inc()
    s = samples(m)
    assert s[("kueue_tas_admissions_total", (("outcome", "ready"),))] == 2
    assert s[("kueue_tas_admissions_total", (("outcome", "retry"),))] == 1
    assert s[("kueue_tas_admissions_total", (("outcome", "rejected"),))] == 0  # exported as zero
    assert s[("kueue_tas_admissions_total", (("outcome", "error"),))] == 0
    assert s[("kueue_tas_decision_seconds_count", ())] == 1
    assert s[("kueue_tas_informer_lag_seconds", (("resource", "pods"),))] == 1.5
    assert s[("kueue_tas_ungated_pods_total", ())] == 3
    assert s[("kueue_tas_ungate_errors_total", ())] == 1
    assert not any(name.endswith("_created") for name, _ in s)


def test_registries_are_independent() -> None:
    a, b = Metrics(), Metrics()
    a.ungated_pods_total.inc()
    assert samples(b)[("kueue_tas_ungated_pods_total", ())] == 0


def test_unknown_outcome_rejected() -> None:
    with pytest.raises(ValueError):
        Metrics().record_admission("maybe")  # type: ignore[arg-type]


def test_domain_free_replaces_stale_series() -> None:
    m = Metrics()
    m.set_domain_free("topo", "gpu", {("rack", "r1", "cpu"): 4000, ("rack", "r2", "cpu"): 2000})
    m.set_domain_free("topo", "cpu", {("rack", "r9", "pods"): 10})
    m.set_domain_free("topo", "gpu", {("rack", "r1", "cpu"): 1000})

    def free() -> dict[tuple[tuple[str, str], ...], float]:
        return {labels: v for (name, labels), v in samples(m).items() if name == "kueue_tas_domain_free"}

    got = free()
    assert got == {
        (("domain", "r1"), ("flavor", "gpu"), ("level", "rack"), ("resource", "cpu"), ("topology", "topo")): 1000,
        (("domain", "r9"), ("flavor", "cpu"), ("level", "rack"), ("resource", "pods"), ("topology", "topo")): 10,
    }
    m.clear_domain_free("topo", ["gpu"])
    assert len(free()) == 1
    m.clear_domain_free("topo")
    assert free() == {}
