"""``make lint``'s advisory scan: every lock (requirements/*.lock) through pip-audit against
PyPI's vulnerability data (``--vulnerability-service pypi``; no other service is reachable from
the build machines).

pip-audit reports a package it could not look up as skipped and still says "No known
vulnerabilities found", so its exit status alone would pass a scan that checked nothing. Here:
a known vulnerability fails; a scan that could look up no package at all (PyPI's per-release JSON
API unreachable, e.g. behind a mirror that serves only the simple index) is skipped with a line
saying so, never failed at random; a partial scan passes and names what it could not check.

Usage: ``python -m e2e.advisories``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any, Final

REPO_ROOT: Final = Path(__file__).resolve().parent.parent
LOCKS: Final = ("runtime.lock", "build.lock", "dev.lock")
TIMEOUT_S: Final = 300


def audit(lock: Path) -> dict[str, Any]:
    """pip-audit's JSON report of ``lock`` (hashed pins: no resolution, no pip)."""
    cmd = [
        sys.executable,
        "-m",
        "pip_audit",
        "-r",
        str(lock),
        "--require-hashes",
        "--disable-pip",
        "--vulnerability-service",
        "pypi",
        "--progress-spinner",
        "off",
        "--format",
        "json",
    ]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT_S, check=False)
    try:
        report: dict[str, Any] = json.loads(done.stdout)
    except json.JSONDecodeError as exc:
        raise RuntimeError(f"pip-audit {lock.name}: no report (exit {done.returncode}): {done.stderr.strip()}") from exc
    return report


def judge(name: str, report: dict[str, Any]) -> tuple[bool, list[str]]:
    """(passed, lines to print) for one lock's report."""
    dependencies = report.get("dependencies") or []
    vulnerable = [d for d in dependencies if d.get("vulns")]
    skipped = [d for d in dependencies if d.get("skip_reason")]
    if vulnerable:
        lines = [f"advisories {name}: FAILED"]
        for dep in vulnerable:
            for vuln in dep["vulns"]:
                fixed = ", ".join(vuln.get("fix_versions") or []) or "no fixed release"
                lines.append(f"  {dep['name']}=={dep['version']}: {vuln['id']} (fixed in {fixed})")
        return False, lines
    if dependencies and len(skipped) == len(dependencies):
        return True, [
            f"advisories {name}: SKIPPED, no package could be looked up ({skipped[0]['skip_reason']}); "
            "PyPI's per-release JSON API is not reachable from here"
        ]
    audited = len(dependencies) - len(skipped)
    extra = f"; not looked up: {', '.join(d['name'] for d in skipped)}" if skipped else ""
    return True, [f"advisories {name}: ok ({audited} packages, no known vulnerability{extra})"]


def main() -> int:
    passed = True
    for name in LOCKS:
        try:
            ok, lines = judge(name, audit(REPO_ROOT / "requirements" / name))
        except (RuntimeError, subprocess.TimeoutExpired) as exc:
            ok, lines = True, [f"advisories {name}: SKIPPED, pip-audit did not report: {exc}"]
        print("\n".join(lines))
        passed = passed and ok
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
