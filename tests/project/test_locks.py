"""The locks (requirements/*.lock) install what pyproject.toml declares, within its ranges."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[2]
_PIN = re.compile(r"^([A-Za-z0-9_.\-]+)==([^ \\]+)", re.MULTILINE)


def _pins(name: str) -> dict[str, Version]:
    text = (ROOT / "requirements" / name).read_text()
    assert "--hash=sha256:" in text, f"{name} has no hashes: installs could not be checked"
    return {canonicalize_name(m[1]): Version(m[2]) for m in _PIN.finditer(text)}


def _declared(extra: str | None) -> list[Requirement]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    specs = project["dependencies"] if extra is None else project["optional-dependencies"][extra]
    return [Requirement(spec) for spec in specs]


@pytest.mark.parametrize(("lock", "extras"), [("runtime.lock", [None]), ("dev.lock", [None, "dev"])])
def test_every_declared_dependency_is_pinned_within_its_range(lock: str, extras: list[str | None]) -> None:
    pins = _pins(lock)
    for extra in extras:
        for req in _declared(extra):
            name = canonicalize_name(req.name)
            assert name in pins, f"{lock}: {req.name} is declared in pyproject.toml but not locked"
            assert req.specifier.contains(pins[name], prereleases=True), (
                f"{lock}: {req.name}=={pins[name]} is outside pyproject.toml's {req.specifier}"
            )


def test_the_runtime_and_build_locks_agree_with_the_dev_lock() -> None:
    dev = _pins("dev.lock")
    for lock in ("runtime.lock", "build.lock"):
        for name, version in _pins(lock).items():
            assert dev.get(name) == version, f"{lock} pins {name}=={version}, dev.lock {dev.get(name)}"


def test_the_build_lock_can_build_an_spdx_license() -> None:
    build = tomllib.loads((ROOT / "pyproject.toml").read_text())["build-system"]["requires"]
    setuptools = next(Requirement(r) for r in build if r.startswith("setuptools"))
    assert setuptools.specifier.contains(_pins("build.lock")["setuptools"])


# Advisories fixed in these releases: a floor below them lets a resolver (a user's own, not our
# locks) pick a version with the hole. aiohttp 3.13.3: request decompression bomb and more;
# cryptography 44.0.1: CVE-2024-12797 in its bundled OpenSSL; orjson 3.9.15: CVE-2024-27454
# (unbounded recursion); setuptools 78.1.1: CVE-2025-47273 (path traversal in PackageIndex).
ADVISORY_FLOORS = {"aiohttp": "3.13.3", "cryptography": "44.0.1", "orjson": "3.9.15", "setuptools": "78.1.1"}


def test_floors_are_past_known_advisories() -> None:
    declared = {canonicalize_name(r.name): r for extra in (None, "dev") for r in _declared(extra)}
    for line in (ROOT / "requirements" / "build.in").read_text().splitlines():
        spec = line.split("#")[0].strip()
        if spec:
            req = Requirement(spec)
            declared[canonicalize_name(req.name)] = req
    for name, fixed in ADVISORY_FLOORS.items():
        req = declared[canonicalize_name(name)]
        below = (*Version(fixed).release[:-1], Version(fixed).release[-1] - 1)
        assert not req.specifier.contains(".".join(map(str, below))), f"{req}: allows a version before {fixed}"
        assert req.specifier.contains(fixed), f"{req}: excludes the fixed {fixed}"


def test_the_dockerfile_installs_only_from_the_hashed_locks() -> None:
    """Every pip install in the image build either takes a lock with --require-hashes (wheels
    only: nothing built from an unhashed sdist) or installs our own wheel with --no-index."""
    text = (ROOT / "Dockerfile").read_text().replace("\\\n", " ")
    installs = [
        " ".join(step.split())
        for line in text.splitlines()
        if line.startswith("RUN ")
        for step in line.split("&&")
        if "pip" in step and " install " in f" {step} "
    ]
    assert len(installs) == 3, installs
    for step in installs:
        if "--no-index" in step:
            assert "/dist/" in step and "-r " not in step, step
            continue
        assert "--require-hashes" in step and "--only-binary=:all:" in step, step
        assert re.search(r"-r requirements/(build|runtime)\.lock\b", step), step
