"""Render Kueue's, JobSet's and kwok's own manifests (from the Go module cache) for a local cluster.

The upstream files are kustomize bases meant for an in-cluster Deployment behind a Service. Here
every webhook ``clientConfig.service`` becomes ``url: https://127.0.0.1:<port><path>`` plus the
harness CA, the kustomize name prefixes and namespace selectors are applied in Python, and
CRD conversion webhooks point at the same local URL.
"""

from __future__ import annotations

import base64
import copy
import json
import re
import subprocess
from pathlib import Path
from typing import Any

import yaml

from e2e import versions
from e2e.build import go_env
from e2e.paths import cache_dir

# Namespaces whose pods/jobs never go through the job webhooks (mirrors Kueue's kustomize layer).
SYSTEM_NAMESPACES = ("kube-system", "kueue-system", "jobset-system")


def module_dir(module: str, version: str) -> Path:
    """Directory of ``module@version`` in the Go module cache (``go mod download -json``)."""
    cache_dir().mkdir(parents=True, exist_ok=True)
    out = subprocess.run(
        ["go", "mod", "download", "-json", f"{module}@{version}"],
        capture_output=True,
        text=True,
        check=True,
        env=go_env(),
        cwd=cache_dir(),
        timeout=600,
    )
    return Path(json.loads(out.stdout)["Dir"])


def _load_all(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def _url_client_config(cfg: dict[str, Any], port: int, ca_pem: bytes) -> dict[str, Any]:
    path = cfg.get("service", {}).get("path", "")
    return {"url": f"https://127.0.0.1:{port}{path}", "caBundle": base64.b64encode(ca_pem).decode()}


def _system_ns_selector() -> dict[str, Any]:
    return {
        "matchExpressions": [
            {"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": list(SYSTEM_NAMESPACES)}
        ]
    }


def _localize_webhooks(
    doc: dict[str, Any], prefix: str, port: int, ca_pem: bytes, selected: set[str]
) -> dict[str, Any]:
    doc = copy.deepcopy(doc)
    doc["metadata"] = {"name": prefix + doc["metadata"]["name"]}
    for wh in doc.get("webhooks", []):
        wh["clientConfig"] = _url_client_config(wh["clientConfig"], port, ca_pem)
        if wh["name"] in selected:
            wh["namespaceSelector"] = _system_ns_selector()
        wh.setdefault("timeoutSeconds", 10)
    return doc


# ---------------------------------------------------------------- Kueue


def kueue_dir() -> Path:
    return module_dir("sigs.k8s.io/kueue", versions.KUEUE)


def _kueue_conversion_crds(crd_dir: Path) -> set[str]:
    """CRD names that Kueue's kustomization wires to the conversion webhook (uncommented patches)."""
    kust = yaml.safe_load((crd_dir / "kustomization.yaml").read_text())
    names: set[str] = set()
    for p in kust.get("patches", []) or []:
        path = p.get("path", "") if isinstance(p, dict) else str(p)
        if "webhook_in_" in path:
            names.add(yaml.safe_load((crd_dir / path).read_text())["metadata"]["name"])
    return names


def kueue_crds(port: int, ca_pem: bytes) -> list[dict[str, Any]]:
    crd_dir = kueue_dir() / "config" / "components" / "crd"
    conv = _kueue_conversion_crds(crd_dir)
    crds = []
    for f in sorted((crd_dir / "bases").glob("*.yaml")):
        for crd in _load_all(f):
            if crd["metadata"]["name"] in conv:
                crd["spec"]["conversion"] = {
                    "strategy": "Webhook",
                    "webhook": {
                        "clientConfig": _url_client_config({"service": {"path": "/convert"}}, port, ca_pem),
                        "conversionReviewVersions": ["v1"],
                    },
                }
            crds.append(crd)
    return crds


def _kueue_selected_webhooks(webhook_dir: Path) -> set[str]:
    """Webhook names that Kueue's kustomization gives the system-namespace selector."""
    text = (webhook_dir / "kustomization.yaml").read_text()
    return set(re.findall(r"\[name=([\w.-]+)\]", text)) | set(re.findall(r"- name: ([\w.-]+\.kb\.io)", text))


def kueue_webhooks(port: int, ca_pem: bytes) -> list[dict[str, Any]]:
    wdir = kueue_dir() / "config" / "components" / "webhook"
    selected = _kueue_selected_webhooks(wdir)
    return [_localize_webhooks(d, "kueue-", port, ca_pem, selected) for d in _load_all(wdir / "manifests.yaml")]


# ---------------------------------------------------------------- JobSet


def jobset_dir() -> Path:
    return module_dir("sigs.k8s.io/jobset", versions.JOBSET)


def jobset_crds() -> list[dict[str, Any]]:
    bases = jobset_dir() / "config" / "components" / "crd" / "bases"
    return [crd for f in sorted(bases.glob("*.yaml")) for crd in _load_all(f)]


def _apply_json_patch(doc: dict[str, Any], ops: list[dict[str, Any]]) -> None:
    """Apply the ``replace``/``add`` operations JobSet's webhook kustomization uses."""
    for op in ops:
        parts = [p.replace("~1", "/").replace("~0", "~") for p in op["path"].lstrip("/").split("/")]
        target: Any = doc
        for p in parts[:-1]:
            target = target[int(p)] if isinstance(target, list) else target[p]
        last = parts[-1]
        if op["op"] == "replace":
            if isinstance(target, list):
                target[int(last)] = op["value"]
            else:
                target[last] = op["value"]
        elif op["op"] == "add":
            if isinstance(target, list):
                target.append(op["value"]) if last == "-" else target.insert(int(last), op["value"])
            else:
                target[last] = op["value"]
        else:
            raise ValueError(f"unsupported JSON patch op {op['op']!r}")


def jobset_webhooks(port: int, ca_pem: bytes) -> list[dict[str, Any]]:
    wdir = jobset_dir() / "config" / "components" / "webhook"
    docs = _load_all(wdir / "manifests.yaml")
    kust = yaml.safe_load((wdir / "kustomization.yaml").read_text())
    for p in kust.get("patches", []) or []:
        target = p.get("target", {})
        ops = yaml.safe_load((wdir / p["path"]).read_text())
        for d in docs:
            if d["kind"] == target.get("kind") and d["metadata"]["name"] == target.get("name"):
                _apply_json_patch(d, ops)
    # JobSet's pod webhooks already carry an objectSelector; keep the system namespaces out of all.
    names = {wh["name"] for d in docs for wh in d.get("webhooks", [])}
    return [_localize_webhooks(d, "jobset-", port, ca_pem, names) for d in docs]


# ---------------------------------------------------------------- kwok stages

POD_COMPLETE_DELAY_ANNOTATION = "pod-complete.stage.kwok.x-k8s.io/delay"


def kwok_stages(default_complete_delay_ms: int = 1000) -> list[dict[str, Any]]:
    """kwok's own 'fast' node and pod stages; Job-owned pods complete after a delay.

    The delay is ``default_complete_delay_ms`` unless the pod carries the annotation
    ``pod-complete.stage.kwok.x-k8s.io/delay`` (a Go duration, e.g. ``"30s"``, ``"1h"``), the
    same annotation kwok's 'general' pod stages use.
    """
    stage_dir = module_dir("sigs.k8s.io/kwok", versions.KWOK) / "kustomize" / "stage"
    files = [
        "node/fast/node-initialize.yaml",
        "pod/fast/pod-ready.yaml",
        "pod/fast/pod-complete.yaml",
        "pod/fast/pod-delete.yaml",
    ]
    stages: list[dict[str, Any]] = []
    for rel in files:
        for doc in _load_all(stage_dir / rel):
            if doc["metadata"]["name"] == "pod-complete":
                doc["spec"]["delay"] = {
                    "durationMilliseconds": default_complete_delay_ms,
                    "durationFrom": {"expressionFrom": f'.metadata.annotations["{POD_COMPLETE_DELAY_ANNOTATION}"]'},
                }
            stages.append(doc)
    return stages


def dump_yaml_docs(docs: list[dict[str, Any]]) -> str:
    return "---\n".join(yaml.safe_dump(d, sort_keys=False) for d in docs)
