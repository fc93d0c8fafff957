"""e2e/advisories.py: how a pip-audit report becomes `make lint`'s verdict (the scan itself needs
PyPI's JSON API, which this test does not)."""

from __future__ import annotations

from e2e.advisories import judge


def test_a_known_vulnerability_fails_and_names_the_advisory_and_the_fix() -> None:
    report = {
        "dependencies": [
            {"name": "aiohttp", "version": "3.13.2", "vulns": [{"id": "GHSA-x", "fix_versions": ["3.13.3"]}]},
            {"name": "yarl", "version": "1.25.1", "vulns": []},
        ]
    }
    ok, lines = judge("runtime.lock", report)
    assert not ok and lines[1] == "  aiohttp==3.13.2: GHSA-x (fixed in 3.13.3)"


def test_a_scan_that_looked_nothing_up_is_skipped_with_the_reason_never_passed_as_clean() -> None:
    reason = "Dependency not found on PyPI and could not be audited: aiohttp (3.14.5)"
    report = {"dependencies": [{"name": "aiohttp", "skip_reason": reason}, {"name": "yarl", "skip_reason": reason}]}
    ok, lines = judge("runtime.lock", report)
    assert ok and lines[0].startswith("advisories runtime.lock: SKIPPED") and reason in lines[0]
    assert not lines[0].startswith("advisories runtime.lock: ok")


def test_a_partial_scan_passes_and_names_what_it_could_not_check() -> None:
    report = {
        "dependencies": [
            {"name": "aiohttp", "version": "3.14.5", "vulns": []},
            {"name": "pip", "skip_reason": "not found"},
        ]
    }
    assert judge("build.lock", report) == (
        True,
        ["advisories build.lock: ok (1 packages, no known vulnerability; not looked up: pip)"],
    )
