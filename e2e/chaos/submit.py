"""Turn a planned submission into a Job or JobSet and create it, retrying through faults."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import aiohttp
from kubernetes_asyncio.client.exceptions import ApiException

from e2e import jobs
from e2e import stack as st
from e2e.chaos.profile import BIG_GPUS, DEFAULT, Profile
from e2e.kube import Kube
from e2e.nodes import NodePool
from kueue_tas.api import constants as kc

CREATE_TIMEOUT_S = 60.0


def level_label(pool: NodePool, level: str) -> str:
    return {"block": pool.block_label, "rack": pool.rack_label, "host": kc.HOSTNAME_LABEL}[level]


def _annotations(spec: dict[str, Any], pool: NodePool, profile: Profile) -> dict[str, str]:
    mode, level = spec["mode"], level_label(pool, spec.get("level", "rack"))
    required = profile.key(kc.SUFFIX_REQUIRED_TOPOLOGY)
    if mode in ("required", "group"):
        ann = {required: level}
    elif mode == "preferred":
        ann = {profile.key(kc.SUFFIX_PREFERRED_TOPOLOGY): level}
    elif mode == "unconstrained":
        ann = {profile.key(kc.SUFFIX_UNCONSTRAINED_TOPOLOGY): "true"}
    elif mode == "slices":
        ann = {
            required: level,
            profile.key(jobs.SLICE_REQUIRED.removeprefix(jobs.PREFIX)): level_label(pool, spec["slice_level"]),
            profile.key(jobs.SLICE_SIZE.removeprefix(jobs.PREFIX)): str(spec["slice_size"]),
        }
    else:  # implied: no request, placed as unconstrained on a governed flavor
        ann = {}
    if mode == "group":
        ann[profile.key(kc.SUFFIX_GROUP_NAME)] = "g"
    return ann


def manifest(spec: dict[str, Any], pool: NodePool, profile: Profile = DEFAULT) -> dict[str, Any]:
    """The Job or JobSet of a planned submission (suspended, in LocalQueue ``lq``), its topology
    annotations under the run's annotation prefix."""
    ann = _annotations(spec, pool, profile)
    if spec["workload"] == "job":
        body = jobs.job(
            spec["name"],
            int(spec["pods"]),
            gpu=int(spec["gpu"]),
            annotations=ann,
            indexed=bool(spec.get("indexed", True)),
            run_for=str(spec["run_for"]),
        )
    else:
        tmpl = jobs.pod_template(gpu=int(spec["gpu"]), annotations=ann, run_for=str(spec["run_for"]))
        body = jobs.jobset(spec["name"], [(rj, int(n), int(par), tmpl) for rj, n, par in spec["replicated"]])
        for rj in body["spec"]["replicatedJobs"]:
            # Pod deletions are among the faults: a replaced pod must not fail the whole JobSet.
            rj["template"]["spec"]["backoffLimit"] = 6
    if profile.big_jobs:
        # ``priority_stack``'s classes: the big submissions may preempt the small ones.
        big = pods_of(spec) * int(spec["gpu"]) >= BIG_GPUS
        st.prioritised(body, f"{'high' if big else 'low'}-{pool.name}")
    return body


def pods_of(spec: dict[str, Any]) -> int:
    if spec["workload"] == "job":
        return int(spec["pods"])
    return sum(int(n) * int(par) for _, n, par in spec["replicated"])


async def create(kube: Kube, namespace: str, spec: dict[str, Any], pool: NodePool, profile: Profile = DEFAULT) -> str:
    """Create it; retry while the apiserver or Kueue's webhook is down. Returns what happened."""
    body = manifest(spec, pool, profile)
    deadline = time.monotonic() + CREATE_TIMEOUT_S
    attempts = 0
    while True:
        attempts += 1
        try:
            if spec["workload"] == "job":
                await jobs.create_job(kube, namespace, body)
            else:
                await jobs.create_jobset(kube, namespace, body)
            return f"created after {attempts} attempt(s)"
        except ApiException as e:
            if e.status == 409:  # an earlier attempt went through before its connection broke
                return f"created (409 on attempt {attempts})"
            if e.status is not None and e.status < 500 and e.status != 429:
                raise
            last = f"{e.status} {e.reason}"
        except (aiohttp.ClientError, OSError, TimeoutError) as e:
            last = f"{type(e).__name__}: {e}"
        if time.monotonic() > deadline:
            raise TimeoutError(f"{spec['workload']} {spec['name']} not created in {CREATE_TIMEOUT_S:.0f}s: {last}")
        await asyncio.sleep(0.5)
