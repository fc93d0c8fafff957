"""Effective resource requests of a pod, computed the way Kubernetes computes them.

Follows ``PodRequests`` in ``k8s.io/component-helpers/resource/helpers.go``
(which Kueue uses for quota and TAS):

* regular containers are summed;
* restartable init containers (sidecars, ``restartPolicy: Always``) start before
  the regular containers and keep running, so their requests are added to the sum;
* a regular init container runs alone next to the sidecars started before it, so
  the pod needs at least ``that container + those sidecars``: the result is the
  per-resource maximum of the sum and every such init-container figure;
* pod-level ``spec.resources.requests`` (cpu, memory, hugepages-*), when set,
  replace the container aggregate for those resources;
* ``spec.overhead`` is added last.

Before that, a container that sets a limit but no request for a resource gets
the limit as its request (``SetDefaults_Pod`` in ``pkg/apis/core/v1/defaults.go``
for Pods; Kueue's ``UseLimitsAsMissingRequestsInPod`` for Workload templates,
which the API server does not default). Pod-level requests are defaulted as the
API server does: from the container aggregate for cpu/memory the containers
request, otherwise from the pod-level limit.

Negative amounts (rejected by the API server's validation, possible in raw
templates) are charged as zero, as Kueue does.

Input is a plain PodSpec dict in the camelCase of YAML/JSON.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from decimal import Decimal
from typing import Any

from kueue_tas.api.quantity import parse_quantity, to_kueue_units

ExactResources = dict[str, Decimal]

_RESTART_POLICY_ALWAYS = "Always"
_HUGEPAGES_PREFIX = "hugepages-"
_POD_LEVEL_RESOURCES = frozenset({"cpu", "memory"})


def is_supported_pod_level_resource(name: str) -> bool:
    return name in _POD_LEVEL_RESOURCES or name.startswith(_HUGEPAGES_PREFIX)


def _parse_list(resources: Any, *, clamp: bool) -> ExactResources:
    if not resources:
        return {}
    if not isinstance(resources, Mapping):
        raise ValueError(f"expected a resource list mapping, got {type(resources).__name__}")
    out: ExactResources = {}
    for name, value in resources.items():
        amount = parse_quantity(value, resource=str(name))
        if clamp and amount < 0:
            amount = Decimal(0)
        out[str(name)] = amount
    return out


def container_requests(container: Mapping[str, Any]) -> ExactResources:
    """A container's requests, each missing request defaulted to the container's limit."""
    resources = container.get("resources") or {}
    requests = _parse_list(resources.get("requests"), clamp=True)
    for name, amount in _parse_list(resources.get("limits"), clamp=True).items():
        requests.setdefault(name, amount)
    return requests


def _add(into: ExactResources, other: Mapping[str, Decimal]) -> None:
    for name, amount in other.items():
        into[name] = into.get(name, Decimal(0)) + amount


def _max(into: ExactResources, other: Mapping[str, Decimal]) -> None:
    for name, amount in other.items():
        if name not in into or amount > into[name]:
            into[name] = amount


def aggregate_container_requests(spec: Mapping[str, Any]) -> ExactResources:
    """Containers, sidecars and init containers combined (no pod-level resources, no overhead)."""
    result: ExactResources = {}
    containers: Sequence[Mapping[str, Any]] = spec.get("containers") or ()
    for container in containers:
        _add(result, container_requests(container))

    sidecars: ExactResources = {}
    init_peak: ExactResources = {}
    init_containers: Sequence[Mapping[str, Any]] = spec.get("initContainers") or ()
    for container in init_containers:
        requests = container_requests(container)
        if container.get("restartPolicy") == _RESTART_POLICY_ALWAYS:
            _add(result, requests)
            _add(sidecars, requests)
            in_use = dict(sidecars)
        else:
            in_use = dict(requests)
            _add(in_use, sidecars)
        _max(init_peak, in_use)
    _max(result, init_peak)
    return result


def _pod_level_requests(spec: Mapping[str, Any], aggregate: Mapping[str, Decimal]) -> ExactResources:
    """Effective pod-level requests of the supported resources, after API-server defaulting."""
    pod_resources = spec.get("resources") or {}
    if not pod_resources:
        return {}
    requests = {
        name: amount
        for name, amount in _parse_list(pod_resources.get("requests"), clamp=False).items()
        if amount >= 0 and is_supported_pod_level_resource(name)
    }
    for name, limit in _parse_list(pod_resources.get("limits"), clamp=False).items():
        if name in requests or not is_supported_pod_level_resource(name) or limit < 0:
            continue
        if name in aggregate and not name.startswith(_HUGEPAGES_PREFIX):
            requests[name] = aggregate[name]
        else:
            requests[name] = limit
    return requests


def pod_requests_exact(spec: Mapping[str, Any]) -> ExactResources:
    """Effective requests of one pod as exact Decimals (cores, bytes, ...)."""
    result = aggregate_container_requests(spec)
    result.update(_pod_level_requests(spec, result))
    _add(result, _parse_list(spec.get("overhead"), clamp=True))
    return result


def pod_requests(spec: Mapping[str, Any]) -> dict[str, int]:
    """Effective requests of one pod in Kueue units (cpu millicores, others base units, rounded up)."""
    return {name: to_kueue_units(name, amount) for name, amount in pod_requests_exact(spec).items()}
