"""The ``kueue-tas`` command line."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from kueue_tas.api import constants as c
from kueue_tas.cli import plan, run


def annotation_prefix(value: str) -> str:
    if not value.endswith("/") or len(value) < 2:
        raise argparse.ArgumentTypeError(f"{value!r}: must end with '/' (a DNS prefix such as kueue-tas.io/)")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kueue-tas", description="Topology Aware Scheduling for Kueue, as an AdmissionCheck controller."
    )
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser(
        "plan",
        help="place Workloads, Jobs and JobSets offline, from YAML/JSON dumps of a cluster",
        description="Place Workloads, Jobs and JobSets offline with the controller's placement engine.",
    )
    p.add_argument("-f", "--filename", dest="files", action="append", required=True, metavar="FILE",
                   help="YAML or JSON (multi-document, kind: List); '-' for stdin; repeatable")
    p.add_argument("--flavor", help="flavor of PodSets whose Workload has no status.admission")
    p.add_argument("-o", "--output", choices=("json", "yaml", "text"), default="text")
    p.add_argument("--annotation-prefix", type=annotation_prefix, default=c.DEFAULT_ANNOTATION_PREFIX,
                   help=f"prefix of the podset-*-topology annotations (default {c.DEFAULT_ANNOTATION_PREFIX})")
    p.set_defaults(func=plan.run)
    r = sub.add_parser("run", help="run the AdmissionCheck controller against a cluster")
    r.add_argument("--config", help="YAML settings file (see kueue_tas/runtime/config.py)")
    r.add_argument("--kubeconfig", help="kubeconfig file (default: in-cluster, then $KUBECONFIG)")
    r.set_defaults(func=run.run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    code: int = args.func(args)
    return code


if __name__ == "__main__":
    sys.exit(main())
