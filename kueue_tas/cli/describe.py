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
                  "message", "whyNot"?}]}

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

A Workload with no assignment in force (not finished, not deactivated) is also placed on the
cluster as read now (``capacity.trial_placement``: the capacity model ``capacity`` reads, the
admitter's engine; nothing is held): the text says where it would go, or under "why not" the
best domain of the level searched, what fits there and in all, and the nodes excluded per
reason. ``whyNot`` (only on a PodSet that does not fit now): ``{"topology", "level", "domain",
"domainFit", "fit", "needed", "unit", "oneDomain", "totalNodes", "excluded", "reasons": {reason:
nodes}}``, the numbers of the engine's failure message (``fit`` of ``needed`` pods or slices; in
the best ``domain`` of ``level`` when ``oneDomain``, over the whole level otherwise).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from kueue_tas.api.workload import Workload
from kueue_tas.capacity.daemonsets import ReservationPolicy
from kueue_tas.capacity.feed import capacity_from_lists
from kueue_tas.cli.cluster_read import (
    ClusterReadError,
    ClusterState,
    TasConfig,
    default_namespace,
    load_settings,
    read_events,
    read_for_capacity,
    read_kueue_config,
    read_nodes,
    read_workload,
    read_workload_pods,
    run_read,
    tas_config,
)
from kueue_tas.cli.describe_build import describe_workload, wants_trial
from kueue_tas.cli.describe_output import describe_json, render_text
from kueue_tas.kube.slim import SlimPod
from kueue_tas.topology.features import FeatureGateError, FeatureGates
from kueue_tas.topology.model import NodeInfo

Events = list[dict[str, Any]]
Cluster = ClusterState | None


def run(args: argparse.Namespace) -> int:
    if (args.name is None) == (args.for_job is None):
        print("error: give either a Workload NAME or --for-job JOB", file=sys.stderr)
        return 1
    try:
        settings = load_settings(args.config, args.kubeconfig)
        namespace = args.namespace or default_namespace(settings)
        prefix = settings.annotation_prefix
        warnings: list[str] = []

        gates = FeatureGates.from_mapping(settings.feature_gates)

        async def read(api: Any) -> tuple[Workload, TasConfig, list[NodeInfo], list[SlimPod], Events, Cluster]:
            wl = await read_workload(api, namespace, args.name, args.for_job)
            tas = tas_config(await read_kueue_config(api, warnings), settings.controller_name)
            cluster = None
            if wants_trial(wl, tas.checks):
                # Where it would go now, or why not: the whole capacity model, as `capacity` reads
                # it. Only a detail: a user who may not list every pod still gets the rest.
                try:
                    cluster = await read_for_capacity(api, prefix, settings.scheduling_gate)
                    warnings.extend(cluster.warnings)
                except ClusterReadError as exc:
                    warnings.append(f"not placing it now (why not): {exc}")
            nodes = cluster.nodes if cluster is not None else await read_nodes(api, warnings)
            pods = await read_workload_pods(api, wl, prefix, settings.scheduling_gate)
            try:
                events = await read_events(api, wl)
            except ClusterReadError as exc:  # Events only add detail: show the rest without them
                warnings.append(str(exc))
                events = []
            return wl, tas, nodes, pods, events, cluster

        wl, tas, nodes, pods, events, cluster = run_read(settings, read)
    except ClusterReadError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except FeatureGateError as exc:
        print(f"error: invalid kueue-tas settings: feature_gates: {exc}", file=sys.stderr)
        return 1
    for warning in dict.fromkeys(warnings):
        print(f"warning: {warning}", file=sys.stderr)
    capacity = None
    if cluster is not None:
        st = cluster
        policy = ReservationPolicy.from_settings(settings)
        capacity = capacity_from_lists(
            tas.specs, tas.checks, st.nodes, st.pods, st.workloads, st.daemonsets, gates, daemonset_policy=policy
        )
    desc = describe_workload(wl, tas, nodes, pods, prefix, events, capacity, gates)
    if args.output == "json":
        json.dump(describe_json(desc), sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        sys.stdout.write(render_text(desc))
    return 0
