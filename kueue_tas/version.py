"""The version of kueue-tas: the installed distribution's, which setuptools-scm derived from the
git tag at build time (``pyproject.toml`` ``[tool.setuptools_scm]``; in the image, the Dockerfile's
``VERSION``). Read from the package metadata, so the source tree holds no generated file."""

from __future__ import annotations

import functools
from importlib import metadata

DISTRIBUTION = "kueue-tas"
# Running from a source tree that was never installed (no metadata to read).
UNKNOWN = "0+unknown"


@functools.cache
def version() -> str:
    try:
        return metadata.version(DISTRIBUTION)
    except metadata.PackageNotFoundError:
        return UNKNOWN
