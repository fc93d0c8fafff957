"""The locks (requirements/*.lock) install what pyproject.toml declares, within its ranges."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[1]
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
