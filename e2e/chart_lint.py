"""``make lint`` for charts/kueue-tas: ``helm lint --strict`` and offline schema validation.

Each variant of values (the defaults, and every option on) is linted by helm and rendered, and
each rendered object is validated against Kubernetes' own OpenAPI schemas (the PyPI package
kubernetes-validate, strict: an unknown field fails). Objects of CRDs that the package has no
schema for (cert-manager's, the Prometheus Operator's) are listed, not skipped silently; any
other unknown kind fails.

Usage: ``python -m e2e.chart_lint``.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any, Final

import kubernetes_validate

from e2e.helm import CHART_DIR, HelmError, run_helm, set_args, template

# Kubernetes version the objects are validated for: the local cluster's (e2e/versions.py).
KUBERNETES_VERSION: Final = "1.36.0"
# Custom resources the chart can render, with no schema in kubernetes-validate.
CRD_KINDS: Final = frozenset(
    {
        ("cert-manager.io/v1", "Issuer"),
        ("cert-manager.io/v1", "Certificate"),
        ("monitoring.coreos.com/v1", "ServiceMonitor"),
    }
)

VARIANTS: Final[dict[str, Mapping[str, Any]]] = {
    "defaults": {},
    "every option on": {
        "certManager.enabled": True,
        "serviceMonitor.enabled": True,
        "networkPolicy.enabled": True,
        "networkPolicy.egress.apiServerCidrs": ["10.0.0.0/28"],
        "networkPolicy.egress.apiServerPort": 6443,
        "networkPolicy.egress.extra": [{"ports": [{"port": 443, "protocol": "TCP"}]}],
        "networkPolicy.webhookFrom": [{"ipBlock": {"cidr": "10.0.0.0/28"}}],
        "grafanaDashboard.enabled": True,
        "podDisruptionBudget.enabled": True,
        "priorityClassName": "system-cluster-critical",
        "config.mapBind": ":8082",
        "config.featureGates": {"TASBalancedPlacement": True},
    },
    "readers plain and open, a serving certificate of one's own": {
        "config.metricsSecure": False,
        "config.metricsAuth": False,
        "config.mapSecure": False,
        "config.mapAuth": False,
        "config.mapBind": "127.0.0.1:8082",
        "config.servingCertDir": "/etc/serving",
        "extraVolumes": [{"name": "serving", "secret": {"secretName": "my-tls"}}],
        "extraVolumeMounts": [{"name": "serving", "mountPath": "/etc/serving", "readOnly": True}],
        "serviceMonitor.enabled": True,
        "networkPolicy.enabled": True,
        "networkPolicy.egress.enabled": False,
    },
    "cert-manager with an issuer of the cluster's": {
        "certManager.enabled": True,
        "certManager.issuerRef": {"kind": "ClusterIssuer", "name": "ca"},
    },
}


def validate(objects: list[dict[str, Any]]) -> tuple[list[str], list[str]]:
    """(problems, kinds not validated) of rendered objects."""
    problems: list[str] = []
    unchecked: list[str] = []
    for obj in objects:
        what = f"{obj.get('kind')} {obj.get('metadata', {}).get('name')}"
        if (obj.get("apiVersion"), obj.get("kind")) in CRD_KINDS:
            unchecked.append(what)
            continue
        try:
            kubernetes_validate.validate(obj, KUBERNETES_VERSION, strict=True)
        except kubernetes_validate.ValidationError as e:
            problems.append(f"{what}: {e.message}")
        except kubernetes_validate.SchemaNotFoundError:
            problems.append(f"{what}: no schema for {obj.get('apiVersion')} {obj.get('kind')}")
    return problems, unchecked


def main() -> int:
    failed = False
    for name, values in VARIANTS.items():
        try:
            run_helm(["lint", "--strict", "--quiet", str(CHART_DIR), *set_args(values)])
            problems, unchecked = validate(template(values))
        except HelmError as e:
            problems, unchecked = [str(e)], []
        status = "ok" if not problems else "FAILED"
        extra = f" (custom resources not validated: {', '.join(unchecked)})" if unchecked else ""
        print(f"chart {name}: {status}{extra}")
        for problem in problems:
            print(f"  {problem}")
        failed = failed or bool(problems)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
