"""Pod requests as Kubernetes computes them (component-helpers PodRequests).

The sidecar/init cases are the named cases of Kubernetes' own
``staging/src/k8s.io/component-helpers/resource/helpers_test.go``.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from vocab import GPU

from kueue_tas.api.quantity import QuantityError
from kueue_tas.api.resources import aggregate_container_requests, container_requests, pod_requests


def ctr(name: str, requests: dict[str, Any] | None = None, limits: dict[str, Any] | None = None) -> dict[str, Any]:
    resources: dict[str, Any] = {}
    if requests is not None:
        resources["requests"] = requests
    if limits is not None:
        resources["limits"] = limits
    return {"name": name, "image": "busybox", "resources": resources}


def sidecar(name: str, requests: dict[str, Any]) -> dict[str, Any]:
    return {**ctr(name, requests), "restartPolicy": "Always"}


def test_regular_containers_are_summed() -> None:
    spec = {"containers": [ctr("a", {"cpu": "250m", "memory": "1Gi"}), ctr("b", {"cpu": "1", "memory": "512Mi"})]}
    assert pod_requests(spec) == {"cpu": 1250, "memory": 1536 * 1024 * 1024}


def test_empty_spec_has_no_requests() -> None:
    assert pod_requests({}) == {}
    assert pod_requests({"containers": [{"name": "a"}]}) == {}


def test_init_container_larger_than_sum_wins() -> None:
    # regular init containers run one at a time before the app: max(sum, each init)
    spec = {
        "initContainers": [ctr("i1", {"cpu": "2"}), ctr("i2", {"cpu": "3", "memory": "1Gi"})],
        "containers": [ctr("a", {"cpu": "1", "memory": "2Gi"}), ctr("b", {"cpu": "1"})],
    }
    assert pod_requests(spec) == {"cpu": 3000, "memory": 2 * 1024**3}


def test_restartable_init_container_adds() -> None:
    # helpers_test "restartable init container": 1 + 1 = 2
    spec = {"initContainers": [sidecar("ri1", {"cpu": "1"})], "containers": [ctr("c1", {"cpu": "1"})]}
    assert pod_requests(spec) == {"cpu": 2000}


def test_multiple_restartable_init_containers() -> None:
    # helpers_test "multiple restartable init containers": max(5, (1+2+3) + 1) = 7
    spec = {
        "initContainers": [
            ctr("init-1", {"cpu": "5"}),
            sidecar("restartable-init-1", {"cpu": "1"}),
            sidecar("restartable-init-2", {"cpu": "2"}),
            sidecar("restartable-init-3", {"cpu": "3"}),
        ],
        "containers": [ctr("container-1", {"cpu": "1"})],
    }
    assert pod_requests(spec) == {"cpu": 7000}


def test_regular_init_after_sidecars_counts_only_earlier_sidecars() -> None:
    # helpers_test "multiple restartable and regular init containers":
    # init-2 needs 5 + the sidecars started before it (1+2) = 8; ri3 starts after it.
    spec = {
        "initContainers": [
            ctr("init-1", {"cpu": "5"}),
            sidecar("restartable-init-1", {"cpu": "1"}),
            sidecar("restartable-init-2", {"cpu": "2"}),
            ctr("init-2", {"cpu": "5"}),
            sidecar("restartable-init-3", {"cpu": "3"}),
        ],
        "containers": [ctr("container-1", {"cpu": "1"})],
    }
    assert pod_requests(spec) == {"cpu": 8000}


def test_restartable_init_then_regular_init_and_regular() -> None:
    # helpers_test "restartable-init, init and regular": init-1's 200 + the sidecar's 10 = 210
    spec = {
        "initContainers": [sidecar("restartable-init-1", {"cpu": "10"}), ctr("init-1", {"cpu": "200"})],
        "containers": [ctr("container-1", {"cpu": "100"})],
    }
    assert pod_requests(spec) == {"cpu": 210_000}


def test_overhead_is_added() -> None:
    # the example of the Kubernetes "Pod Overhead" docs: 2000m/200Mi of containers + 250m/120Mi overhead
    spec = {
        "containers": [
            # the docs' containers set only limits; requests default to them
            ctr("busybox-ctr", None, {"cpu": "500m", "memory": "100Mi"}),
            ctr("nginx-ctr", None, {"cpu": "1500m", "memory": "100Mi"}),
        ],
        "overhead": {"cpu": "250m", "memory": "120Mi"},
    }
    assert pod_requests(spec) == {"cpu": 2250, "memory": 320 * 1024 * 1024}


def test_overhead_added_after_init_max() -> None:
    spec = {
        "initContainers": [ctr("i", {"cpu": "4"})],
        "containers": [ctr("a", {"cpu": "1"})],
        "overhead": {"cpu": "100m", "pods": "0"},
    }
    assert pod_requests(spec) == {"cpu": 4100, "pods": 0}


def test_limits_fill_missing_requests_per_resource() -> None:
    # SetDefaults_Pod / Kueue UseLimitsAsMissingRequestsInPod: per resource, not all-or-nothing
    c = ctr("a", {"cpu": "100m"}, {"cpu": "2", "memory": "1Gi", GPU: "1"})
    assert container_requests(c) == {
        "cpu": Decimal("0.1"),
        "memory": 1024**3,
        GPU: 1,
    }
    assert pod_requests({"containers": [c]}) == {"cpu": 100, "memory": 1024**3, GPU: 1}


def test_limits_only_container_uses_limits() -> None:
    spec = {"containers": [ctr("a", None, {"cpu": "1", "memory": "256Mi"})]}
    assert pod_requests(spec) == {"cpu": 1000, "memory": 256 * 1024 * 1024}


def test_limits_fallback_applies_to_init_containers_and_sidecars() -> None:
    spec = {
        "initContainers": [
            {**ctr("side", None, {"cpu": "1"}), "restartPolicy": "Always"},
            ctr("init", None, {"cpu": "3"}),
        ],
        "containers": [ctr("a", {"cpu": "1"})],
    }
    # sidecar 1 + app 1 = 2; init 3 + sidecar 1 = 4
    assert pod_requests(spec) == {"cpu": 4000}


def test_explicit_zero_request_is_not_replaced_by_limit() -> None:
    spec = {"containers": [ctr("a", {"cpu": "0"}, {"cpu": "2"})]}
    assert pod_requests(spec) == {"cpu": 0}


def test_pod_level_requests_replace_container_aggregate() -> None:
    spec = {
        "resources": {"requests": {"cpu": "4", "memory": "8Gi"}},
        "containers": [ctr("a", {"cpu": "1", "memory": "1Gi", GPU: "2"})],
        "overhead": {"cpu": "100m"},
    }
    # extended resources are not pod-level resources: still from containers
    assert pod_requests(spec) == {"cpu": 4100, "memory": 8 * 1024**3, GPU: 2}


def test_pod_level_limits_default_requests() -> None:
    # API-server defaulting: containers request cpu -> pod cpu request = aggregate;
    # no container requests memory -> pod memory request = pod memory limit.
    spec = {
        "resources": {"limits": {"cpu": "8", "memory": "4Gi"}},
        "containers": [ctr("a", {"cpu": "1"})],
    }
    assert pod_requests(spec) == {"cpu": 1000, "memory": 4 * 1024**3}


def test_negative_requests_charged_as_zero() -> None:
    spec = {"containers": [ctr("a", {"cpu": "-1"}), ctr("b", {"cpu": "1"})]}
    assert pod_requests(spec) == {"cpu": 1000}


def test_aggregate_ignores_overhead_and_pod_level() -> None:
    spec = {"containers": [ctr("a", {"cpu": "1"})], "overhead": {"cpu": "1"}, "resources": {"requests": {"cpu": "5"}}}
    assert aggregate_container_requests(spec) == {"cpu": 1}


def test_malformed_quantity_in_container_raises() -> None:
    with pytest.raises(QuantityError, match="'memory'"):
        pod_requests({"containers": [ctr("a", {"memory": "1 GB"})]})
