"""manifests/ read as kustomize would (resources in order, then ``images``), the one object of a kind,
the controller's ConfigMap settings, the routes its read-only servers serve, and the demo's
node pool."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import builders as mk
import yaml

from kueue_tas.runtime.config import Settings

REPO = Path(__file__).resolve().parents[1]
BASE = REPO / "manifests" / "base"
SAMPLES = REPO / "manifests" / "samples"
NAMESPACE = "kueue-tas-system"
# The ValidatingAdmissionPolicy that narrows what the controller's ServiceAccount may change.
POLICY = "kueue-tas-controller-writes"
# ---- loading (as kustomize would: resources in order, then `images`) ----------------------------


def kustomization(directory: Path) -> dict[str, Any]:
    data = yaml.safe_load((directory / "kustomization.yaml").read_text())
    assert isinstance(data, dict)
    return data


def documents(directory: Path) -> list[dict[str, Any]]:
    docs: list[dict[str, Any]] = []
    for name in kustomization(directory)["resources"]:
        docs.extend(d for d in yaml.safe_load_all((directory / name).read_text()) if d is not None)
    for doc in docs:
        for container in _containers(doc):
            for rule in kustomization(directory).get("images") or []:
                if container["image"].split(":")[0] == rule["name"]:
                    container["image"] = f"{rule.get('newName', rule['name'])}:{rule['newTag']}"
    return docs


def _containers(doc: dict[str, Any]) -> list[dict[str, Any]]:
    if doc["kind"] != "Deployment":
        return []
    return list(doc["spec"]["template"]["spec"]["containers"])


def one(docs: list[dict[str, Any]], kind: str, name: str | None = None) -> dict[str, Any]:
    found = [d for d in docs if d["kind"] == kind and (name is None or d["metadata"]["name"] == name)]
    assert len(found) == 1, f"expected one {kind} {name or ''}, found {len(found)}"
    return found[0]


def config(base: list[dict[str, Any]]) -> dict[str, Any]:
    data = yaml.safe_load(one(base, "ConfigMap")["data"]["config.yaml"])
    assert isinstance(data, dict)
    return data


def served_paths() -> dict[str, set[str]]:
    """The routes the metrics and the map servers register, by the reader ClusterRole (its name
    less the ``kueue-tas-`` prefix) that must grant `get` on exactly them (tests/project/test_chart.py too)."""
    from kueue_tas.cli.map_server import MapServer
    from kueue_tas.runtime.health import HealthServer

    class NoSource:
        kind = "read"
        max_age = 10.0

        def usable(self) -> bool:
            return True

        async def build(self) -> Any:
            raise RuntimeError("never built here")

    metrics_app = HealthServer(Settings(leader_election=False)).make_metrics_app()
    map_app = MapServer("127.0.0.1:0", NoSource(), replica="r0").make_app()  # type: ignore[arg-type]
    return {
        "metrics-reader": {r.canonical for r in metrics_app.router.resources()},
        "map-reader": {r.canonical for r in map_app.router.resources()},
    }


def reader_rules_by_role(docs: list[dict[str, Any]], prefix: str = "kueue-tas-") -> dict[str, set[str]]:
    """What each reader ClusterRole of ``docs`` grants: only `get`, on non-resource URLs."""
    out: dict[str, set[str]] = {}
    for role in served_paths():
        (rule,) = one(docs, "ClusterRole", prefix + role)["rules"]
        assert set(rule) == {"nonResourceURLs", "verbs"} and rule["verbs"] == ["get"], rule
        out[role] = set(rule["nonResourceURLs"])
    return out


def demo_nodes() -> list[dict[str, Any]]:
    """The demo's pool (e2e/demo.py DEMO_POOL): 2 blocks x 4 racks x 8 hosts of 8 GPUs."""
    allocatable = {"cpu": "96", "memory": "1Ti", "pods": "110", "nvidia.com/gpu": "8"}
    return [
        mk.node(
            f"gpu-b{b}-r{r}-h{h}",
            labels={"e2e.kueue-tas.io/pool": "gpu", mk.BLOCK: f"b{b}", mk.RACK: f"b{b}-r{r}"},
            allocatable=allocatable,
        )
        for b in range(1, 3)
        for r in range(1, 5)
        for h in range(1, 9)
    ]
