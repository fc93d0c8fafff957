"""The ``kueue-tas`` command line.

Start-up stays cheap: this module imports nothing heavy (no Kubernetes client, numpy, pydantic
or prometheus); each command imports its module when it runs (``tests/test_cli_startup.py``).
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from kueue_tas.api import constants as c
from kueue_tas.topology.features import KUEUE_DEFAULTS  # stdlib only: the help text lists the gates

# Installed a second time as ``kubectl-kueue_tas``, kubectl runs us for ``kubectl kueue_tas ...``
# (and ``kubectl kueue-tas ...``) with the same arguments.
KUBECTL_PLUGIN = "kubectl-kueue_tas"


def annotation_prefix(value: str) -> str:
    if not value.endswith("/") or len(value) < 2:
        raise argparse.ArgumentTypeError(f"{value!r}: must end with '/' (a DNS prefix such as kueue-tas.io/)")
    return value


def _cluster_access(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", help="YAML settings file, as for 'run' (controller name, annotation prefix)")
    p.add_argument("--kubeconfig", help="kubeconfig file (default: in-cluster, then $KUBECONFIG, ~/.kube/config)")


def _map_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--resource",
        help="-o html: resource the tiles are coloured by (default: the first extended resource, else cpu)",
    )
    p.add_argument(
        "--shape",
        metavar="RESOURCE=QTY[,...]",
        help="-o html: pod shape of the free-slot summary (default: 8 of --resource if extended, else 1)",
    )


def _positive(value: str) -> int:
    if not value.isdigit() or int(value) < 1:
        raise argparse.ArgumentTypeError(f"{value!r}: must be a whole number >= 1")
    return int(value)


@dataclass(frozen=True, slots=True)
class Command:
    """The ``run(args)`` of ``kueue_tas.cli.<module>``, imported only when the command runs."""

    module: str

    def __call__(self, args: argparse.Namespace) -> int:
        run: Callable[[argparse.Namespace], int] = importlib.import_module(f"kueue_tas.cli.{self.module}").run
        return run(args)


def gates_help() -> str:
    """Kueue's TAS feature gates with their defaults, one per line (help text of plan and run)."""
    width = max(len(name) for name in KUEUE_DEFAULTS)
    lines = [f"  {name:<{width}}  {'true' if on else 'false'}" for name, on in KUEUE_DEFAULTS.items()]
    return "feature gates (Kueue v0.19.2 names and defaults):\n" + "\n".join(lines)


class _VersionAction(argparse.Action):
    """``--version``: the version is read only when asked for (a package metadata scan)."""

    def __init__(self, option_strings: Sequence[str], dest: str = argparse.SUPPRESS, help: str | None = None) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, help=help)

    def __call__(self, parser: argparse.ArgumentParser, *_: object) -> None:
        from kueue_tas.version import version

        print(f"kueue-tas {version()}")
        parser.exit()


def program_name(argv0: str | None = None) -> str:
    name = os.path.basename(argv0 if argv0 is not None else sys.argv[0])
    return "kubectl kueue_tas" if name.startswith(KUBECTL_PLUGIN) else "kueue-tas"


def build_parser(prog: str = "kueue-tas") -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=prog, description="Topology Aware Scheduling for Kueue, as an AdmissionCheck controller."
    )
    parser.add_argument("--version", action=_VersionAction, help="print the version and exit")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser(
        "plan",
        help="place Workloads, Jobs and JobSets offline, from YAML/JSON dumps of a cluster",
        description="Place Workloads, Jobs and JobSets offline with the controller's placement engine.",
        epilog=gates_help(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "-f",
        "--filename",
        dest="files",
        action="append",
        required=True,
        metavar="FILE",
        help="YAML or JSON (multi-document, kind: List); '-' for stdin; repeatable",
    )
    p.add_argument("--flavor", help="flavor of PodSets whose Workload has no status.admission")
    p.add_argument(
        "-o",
        "--output",
        choices=("json", "yaml", "text", "html"),
        default="text",
        help="html: the topology map page (one self-contained document) after the plan",
    )
    _map_options(p)
    p.add_argument(
        "--annotation-prefix",
        type=annotation_prefix,
        default=c.DEFAULT_ANNOTATION_PREFIX,
        help=f"prefix of the podset-*-topology annotations (default {c.DEFAULT_ANNOTATION_PREFIX})",
    )
    p.add_argument(
        "--feature-gates",
        default="",
        metavar="NAME=BOOL[,...]",
        help="Kueue TAS feature gates, as Kueue's flag (e.g. TASBalancedPlacement=true); defaults below",
    )
    p.add_argument(
        "--config",
        help="YAML settings file, as for 'run': which DaemonSets reserve capacity for their pods "
        "(daemonsetReservation* settings)",
    )
    p.set_defaults(func=Command("plan"))
    r = sub.add_parser(
        "run",
        help="run the AdmissionCheck controller against a cluster",
        description="Run the AdmissionCheck controller. Feature gates are set with the 'featureGates' "
        "setting ({Name: bool} in the --config file) or KUEUE_TAS_FEATURE_GATES='Name=true,Name=false'.",
        epilog=gates_help(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    r.add_argument("--config", help="YAML settings file (see kueue_tas/runtime/config.py)")
    r.add_argument("--kubeconfig", help="kubeconfig file (default: in-cluster, then $KUBECONFIG)")
    r.set_defaults(func=Command("run"))

    d = sub.add_parser("describe", help="show a Workload's topology assignment and where its pods are")
    kinds = d.add_subparsers(dest="kind", required=True, metavar="workload")
    w = kinds.add_parser(
        "workload",
        aliases=["workloads", "wl"],
        help="a Workload's check state, its PodSets' assignments as trees, pods bound/pending/gated per domain",
        description="Show a Workload's admission state, our check entry, and for each PodSet its topology "
        "assignment as a tree: per leaf domain the assigned count, the pods bound there and the "
        "pods released to it but not bound yet; pods still gated are counted per PodSet.",
    )
    w.add_argument("name", nargs="?", metavar="NAME", help="the Workload's name")
    w.add_argument("-n", "--namespace", help="default: the kubeconfig context's namespace, else 'default'")
    w.add_argument("--for-job", metavar="JOB", help="the Workload of this Job or JobSet, instead of NAME")
    w.add_argument("-o", "--output", choices=("text", "json"), default="text")
    _cluster_access(w)
    w.set_defaults(func=Command("describe"))

    cap = sub.add_parser(
        "capacity",
        help="free capacity of every domain of each Topology, as the controller sees it",
        description="Free capacity per domain (allocatable of eligible nodes minus non-kueue-tas pods minus "
        "admitted assignments), level by level, with a bar per domain; '*' marks the domain with "
        "the most free capacity on its level.",
    )
    cap.add_argument("--topology", help="only this Topology")
    cap.add_argument(
        "--resource",
        help="resource the bars show (default: nvidia.com/gpu when the nodes have it, else cpu); with --html, "
        "the tiles' colour (default: the first extended resource, else cpu)",
    )
    cap.add_argument("--depth", type=_positive, metavar="N", help="show only the top N levels")
    cap.add_argument("-o", "--output", choices=("text", "json"), default="text")
    cap.add_argument(
        "--html",
        metavar="FILE",
        help="write the topology map page to FILE ('-': stdout) instead of the text or JSON view",
    )
    cap.add_argument(
        "--shape",
        metavar="RESOURCE=QTY[,...]",
        help="pod shape of the map's free-slot summary (default: 8 of --resource if extended, else 1)",
    )
    _cluster_access(cap)
    cap.set_defaults(func=Command("capacity"))

    v = sub.add_parser(
        "version",
        help="print the version (the git tag it was built from; in the image, its label's)",
        description="Print the version of kueue-tas: a release tag (0.2.0) or, between tags, a development "
        "release of the next one with its commit (0.2.1.dev3+g1a2b3c4).",
    )
    v.add_argument("-o", "--output", choices=("text", "json"), default="text")
    v.set_defaults(func=Command("version"))
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser(program_name()).parse_args(argv)
    code: int = args.func(args)
    return code


if __name__ == "__main__":
    sys.exit(main())
