"""``kueue-tas version``: the version this copy was built as, and the Python running it."""

from __future__ import annotations

import argparse
import json
import platform

from kueue_tas.version import version


def run(args: argparse.Namespace) -> int:
    if args.output == "json":
        print(json.dumps({"version": version(), "python": platform.python_version()}))
    else:
        print(f"kueue-tas {version()}")
    return 0
