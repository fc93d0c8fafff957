"""kueue-tas: Topology Aware Scheduling for Kueue, as an AdmissionCheck controller."""

from __future__ import annotations


def __getattr__(name: str) -> str:
    # Lazy: reading the package metadata costs a directory scan every import would pay.
    if name == "__version__":
        from kueue_tas.version import version

        return version()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
