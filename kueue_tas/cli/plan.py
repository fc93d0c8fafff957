"""``kueue-tas plan``: offline placement from YAML/JSON dumps of a cluster."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

import yaml

from kueue_tas.capacity.daemonsets import ReservationPolicy
from kueue_tas.cli.inputs import InputError, read_objects
from kueue_tas.cli.planner import PlanInputError, Planner, PodSetPlan, PreemptionPlan, WorkloadPlan
from kueue_tas.cli.render import render_text
from kueue_tas.runtime.config import ConfigError, Settings
from kueue_tas.topology.codec import AssignmentFormatError, encode_v1beta2
from kueue_tas.topology.features import FeatureGateError, FeatureGates


def podset_json(ps: PodSetPlan) -> dict[str, Any]:
    out: dict[str, Any] = {"name": ps.name, "count": ps.count, "flavor": ps.flavor, "topology": ps.topology}
    if not ps.governed:
        out["domains"] = None
    elif ps.assignment is not None:
        out["levels"] = list(ps.assignment.levels)
        out["domains"] = [{"values": list(d.values), "count": d.count} for d in ps.assignment.domains]
        out["topologyAssignment"] = encode_v1beta2(ps.assignment)
    out["message"] = ps.message
    return out


def preemption_json(p: PreemptionPlan) -> dict[str, Any]:
    return {
        "mode": p.mode,
        "domain": {"levels": list(p.levels), "values": list(p.values)},
        "victims": [{"namespace": ns, "name": name, "priority": prio} for ns, name, prio in p.victims],
    }


def plan_json(plans: list[WorkloadPlan]) -> dict[str, Any]:
    return {
        "workloads": [
            {
                "namespace": p.namespace,
                "name": p.name,
                "fits": p.fits,
                # The workload-wide constraint as resolved (label keys), when there is one.
                **({"workloadTopology": p.scope.as_dict()} if p.scope is not None else {}),
                **({"preemption": preemption_json(p.preemption)} if p.preemption is not None else {}),
                "podSets": [podset_json(ps) for ps in p.podsets],
            }
            for p in plans
        ]
    }


def run(args: argparse.Namespace) -> int:
    try:
        gates = FeatureGates.parse(args.feature_gates)
    except FeatureGateError as exc:
        print(f"error: --feature-gates: {exc}", file=sys.stderr)
        return 1
    try:  # the DaemonSet reservation and preemption settings, as ``run`` reads them
        settings = Settings.load(args.config)
        policy = ReservationPolicy.from_settings(settings)
    except ConfigError as exc:
        print("error: " + str(exc).replace(":\n", ": ").replace("\n", "; "), file=sys.stderr)
        return 1
    options = None
    if args.output == "html":
        from kueue_tas.cli.map_page import MapOptionError, map_options  # only html needs the page's modules

        try:
            options = map_options(args.resource, args.shape)
        except MapOptionError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
    try:
        objects, warnings = read_objects(args.files)
        for w in warnings:
            print(f"warning: {w}", file=sys.stderr)
        planner = Planner(
            objects,
            default_flavor=args.flavor,
            prefix=args.annotation_prefix,
            gates=gates,
            daemonset_policy=policy,
            preemption_max_victims=settings.preemption_max_victims,
            preemption_cost_resource=settings.preemption_cost_resource,
        )
        plans = planner.run()
        for w in dict.fromkeys(planner.warnings):
            print(f"warning: {w}", file=sys.stderr)
        if options is not None:
            from kueue_tas.cli.map_page import plan_page

            text = plan_page(planner, plans, options, "kueue-tas plan: " + ", ".join(args.files))
        elif args.output == "text":
            text = render_text(plans, planner)
        else:
            doc = plan_json(plans)
            text = json.dumps(doc, indent=2) + "\n" if args.output == "json" else yaml.safe_dump(doc, sort_keys=False)
    except (InputError, PlanInputError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except AssignmentFormatError as exc:  # an assignment Kueue's API could not hold
        print(f"error: -o {args.output}: an assignment cannot be written as Kueue's: {exc}", file=sys.stderr)
        return 1
    sys.stdout.write(text)
    return 0
