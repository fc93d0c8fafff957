"""Pinned versions of every Go component the e2e harness builds.

Changing a value here triggers a rebuild of that component (its stamp changes).
"""

from __future__ import annotations

KUBERNETES = "v1.36.3"
# Staging modules (k8s.io/api, k8s.io/client-go, ...) are tagged v0.<minor>.<patch>.
KUBERNETES_STAGING = "v0." + KUBERNETES.removeprefix("v1.")
ETCD = "v3.6.16"
KWOK = "v0.8.0"
KUEUE = "v0.19.2"
JOBSET = "v0.12.0"
# helm (charts/kueue-tas: `make lint`, the unit drift test, e2e/tests/test_helm.py): the newest v3
# release the Go module proxy serves; its client-go is v0.37, i.e. Kubernetes 1.37.
HELM = "v3.22.0"
HELM_KUBERNETES_MINOR = "37"

# Fixed build date so the Go build cache stays valid between runs.
BUILD_DATE = "2026-01-01T00:00:00Z"
