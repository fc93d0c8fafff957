"""Every overlay under manifests/ as ``kustomize build`` makes it, with the kustomize kubectl 1.32
vendors (v5.5) and the newest (e2e/kustomize.py builds both once, like helm): reading the files
with PyYAML is not enough, v5.5 panics on what newer versions accept."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from e2e.kustomize import BINARIES, MANIFESTS_DIR, REPO_ROOT, build, overlays

NAMESPACE = "kueue-tas-system"


def kinds(objects: list[dict[str, Any]]) -> set[tuple[str, str]]:
    return {(o["kind"], o["metadata"]["name"]) for o in objects}


def test_every_overlay_is_found() -> None:
    names = {str(p.relative_to(MANIFESTS_DIR)) for p in overlays()}
    assert {"base", "cert-manager", "prometheus", "grafana", "samples", "samples/advanced"} <= names


@pytest.mark.parametrize("name", BINARIES)
@pytest.mark.parametrize("overlay", overlays(), ids=lambda p: str(p.relative_to(MANIFESTS_DIR)))
def test_every_overlay_builds(overlay: Path, name: str) -> None:
    objects = build(overlay, name)
    assert objects and all(o.get("kind") and o.get("metadata", {}).get("name") for o in objects)


def test_each_patch_file_holds_one_object() -> None:
    """kustomize v5.5 panics on a patch file of several documents (newer ones accept it)."""
    for overlay in overlays():
        kustomization = yaml.safe_load((overlay / "kustomization.yaml").read_text())
        for patch in kustomization.get("patches") or []:
            if "path" in patch:
                text = (overlay / patch["path"]).read_text()
                docs = [d for d in yaml.safe_load_all(text) if d is not None]
                assert len(docs) == 1, f"{overlay.relative_to(REPO_ROOT)}/{patch['path']}: {len(docs)} objects"


@pytest.mark.parametrize("name", BINARIES)
def test_cert_manager_overlay_takes_secrets_and_webhook_configurations_away_from_the_controller(name: str) -> None:
    objects = build(MANIFESTS_DIR / "cert-manager", name)
    present = kinds(objects)
    assert ("Role", "kueue-tas-webhook-cert") not in present
    assert ("RoleBinding", "kueue-tas-webhook-cert") not in present
    assert ("Secret", "kueue-tas-webhook-cert") not in present, "cert-manager's Secret is kueue-tas-webhook-tls"
    (cluster_role,) = [o for o in objects if o["kind"] == "ClusterRole" and o["metadata"]["name"] == "kueue-tas"]
    groups = {g for rule in cluster_role["rules"] for g in rule["apiGroups"]}
    assert "admissionregistration.k8s.io" not in groups, "cert-manager injects the CA; the controller writes none"
    assert not any(
        "secrets" in r.get("resources", []) for o in objects if o["kind"] in ("Role", "ClusterRole") for r in o["rules"]
    )
    for kind in ("ValidatingWebhookConfiguration", "MutatingWebhookConfiguration"):
        (config,) = [o for o in objects if o["kind"] == kind]
        assert config["metadata"]["annotations"]["cert-manager.io/inject-ca-from"] == f"{NAMESPACE}/kueue-tas-webhook"


@pytest.mark.parametrize("name", BINARIES)
def test_cert_manager_serving_certificates_come_from_a_ca_issuer_so_their_renewal_keeps_the_ca(name: str) -> None:
    """self-signed Issuer -> CA Certificate -> CA Issuer -> serving Certificates: renewing a
    serving certificate re-signs it with the same CA, so the injected caBundle stays valid for
    the leaf a replica has not reloaded yet."""
    objects = build(MANIFESTS_DIR / "cert-manager", name)
    issuers = {o["metadata"]["name"]: o["spec"] for o in objects if o["kind"] == "Issuer"}
    certificates = {o["metadata"]["name"]: o["spec"] for o in objects if o["kind"] == "Certificate"}
    (ca_name,) = [n for n, spec in certificates.items() if spec.get("isCA")]
    ca = certificates[ca_name]
    assert "selfSigned" in issuers[ca["issuerRef"]["name"]]
    (ca_issuer,) = [n for n, spec in issuers.items() if spec.get("ca", {}).get("secretName") == ca["secretName"]]
    for serving in ("kueue-tas-webhook", "kueue-tas-metrics"):
        assert certificates[serving]["issuerRef"] == {"kind": "Issuer", "name": ca_issuer}
        assert not certificates[serving].get("isCA")
