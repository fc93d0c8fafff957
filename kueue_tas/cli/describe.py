"""``kueue-tas describe workload``: where a Workload's pods were assigned, and where they are.

For each PodSet: the flavor and Topology, the topology request, and the assignment as a tree
of domains; each leaf domain shows its assigned count, the pods bound to a node of that
domain and the pods released to it but not bound yet ("pending"). Pods still carrying the
scheduling gate have no domain yet and are counted per PodSet ("gated"). With no assignment,
the check entry's state and message say why.

``-o json`` prints, with these keys only::

    {"namespace", "name", "uid", "queue", "clusterQueue",
     "conditions": {"QuotaReserved"|"Admitted"|"Evicted"|"Finished": {"status", "reason", "message"}},
     "events": [{"time", "type", "reason", "from", "message", "count"}],
     "checks": [{"name", "state", "message", "lastTransitionTime"}],
     "placementNotEnforced": [str],
     "podSets": [{"name", "count", "flavor", "topology", "request", "topologyLevels", "levels",
                  "domains": [{"values", "path", "assigned", "bound", "pending"}] | null,
                  "pods": {"total", "bound", "pending", "gated", "finished", "boundElsewhere", "unplaced"},
                  "message"}]}

``placementNotEnforced`` names each reason the Topology no longer enforces the trusted
assignment (a Topology deleted or missing a level, a required domain gone or no longer whole;
the controller's own rule, judged on what was read) and is empty while it is enforced.
``checks`` lists only the entries of our AdmissionChecks; ``conditions`` only those present;
``events`` the Workload's last 10 Events, oldest first (Kueue's and ours: when Kueue evicts a
Workload it resets our entry to Pending, and the reason lives on in the Evicted condition and
the Events).
``levels`` and ``values`` are the assignment's (only ``kubernetes.io/hostname`` when it is the
lowest level, as Kueue writes it); ``path`` is the domain's values along ``topologyLevels``
(null when the node behind a hostname is gone). ``request`` is the PodSet's topology request
(``{"required": level}``, ``{"preferred": level}``, ``{"unconstrained": true}``, plus
``sliceLevel``/``sliceSize``; ``{"implied": true}`` without annotations) or null when unknown.
Pod counts: ``bound`` in an assigned domain, ``boundElsewhere`` on a node outside every assigned
domain, ``pending`` released to a domain and not bound yet, ``gated`` still gated, ``unplaced``
neither gated nor bound nor selecting an assigned domain, ``finished`` Succeeded or Failed.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from kueue_tas.api.workload import Workload
from kueue_tas.cli.cluster_read import (
    ClusterReadError,
    TasConfig,
    default_namespace,
    load_settings,
    read_events,
    read_kueue_config,
    read_nodes,
    read_workload,
    read_workload_pods,
    run_read,
    tas_config,
)
from kueue_tas.cli.describe_build import describe_workload
from kueue_tas.cli.describe_output import describe_json, render_text
from kueue_tas.kube.slim import SlimPod
from kueue_tas.topology.model import NodeInfo


def run(args: argparse.Namespace) -> int:
    if (args.name is None) == (args.for_job is None):
        print("error: give either a Workload NAME or --for-job JOB", file=sys.stderr)
        return 1
    try:
        settings = load_settings(args.config, args.kubeconfig)
        namespace = args.namespace or default_namespace(settings)
        prefix = settings.annotation_prefix
        warnings: list[str] = []

        async def read(api: Any) -> tuple[Workload, TasConfig, list[NodeInfo], list[SlimPod], list[dict[str, Any]]]:
            wl = await read_workload(api, namespace, args.name, args.for_job)
            tas = tas_config(await read_kueue_config(api, warnings), settings.controller_name)
            nodes = await read_nodes(api, warnings)
            pods = await read_workload_pods(api, wl, prefix)
            try:
                events = await read_events(api, wl)
            except ClusterReadError as exc:  # Events only add detail: show the rest without them
                warnings.append(str(exc))
                events = []
            return wl, tas, nodes, pods, events

        wl, tas, nodes, pods, events = run_read(settings, read)
    except ClusterReadError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    for warning in warnings:
        print(f"warning: {warning}", file=sys.stderr)
    desc = describe_workload(wl, tas, nodes, pods, prefix, events)
    if args.output == "json":
        json.dump(describe_json(desc), sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        sys.stdout.write(render_text(desc))
    return 0
