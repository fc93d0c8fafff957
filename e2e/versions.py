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
# kustomize (every overlay under manifests/: `make lint`, tests/project/test_kustomize_build.py): the one
# kubectl 1.32 vendors for `kubectl apply -k` (the oldest kubectl we support), and the newest the
# Go 1.26 toolchain builds (v5.8.3 requires go >= 1.27).
KUSTOMIZE_KUBECTL_1_32 = "v5.5.0"
KUSTOMIZE = "v5.8.2"

# Fixed build date so the Go build cache stays valid between runs.
BUILD_DATE = "2026-01-01T00:00:00Z"
