"""Repo-level checks (manifests, chart, locks, docs, version, dashboards); manifests/ as kustomize reads it."""

from __future__ import annotations

from typing import Any

import pytest
from manifest_files import BASE, SAMPLES, documents, one


@pytest.fixture(scope="module")
def base() -> list[dict[str, Any]]:
    return documents(BASE)


@pytest.fixture(scope="module")
def samples() -> list[dict[str, Any]]:
    return documents(SAMPLES)


@pytest.fixture(scope="module")
def deployment(base: list[dict[str, Any]]) -> dict[str, Any]:
    return one(base, "Deployment")


@pytest.fixture(scope="module")
def manager(deployment: dict[str, Any]) -> dict[str, Any]:
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    assert isinstance(container, dict)
    return container
