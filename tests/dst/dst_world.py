"""Test-only (deterministic simulation): the cluster around the controller.

Small models of what kueue-tas lives with, each acting on the in-memory API server directly
(their writes are instant; ours wait in the pending pool):

* Kueue: submit a Job + Workload, reserve quota and add a Pending entry for our check, admit
  when every check is Ready (unsuspend the Job with the check's podSetUpdates merged into its
  template), evict and requeue resetting our entry to Pending (waitForPodsReady timeout,
  preemption), deactivate (``spec.active=false``), retry on our Retry, finish.
* the Job controller and the pod webhook: pods for every unsuspended Job, gated with the
  configured gate when they carry ``kueue-tas.io/gated=true``; pods of a suspended Job deleted.
* the kube-scheduler: bind an ungated pod on a Ready, uncordoned node matching its
  nodeSelector with room for it.
* nodes: NotReady and back, deletion (its pods go) and re-creation, relabel, cordon, a huge
  extended-resource allocatable.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

import builders as mk
from dst_api import SimApiServer

from kueue_tas.api import constants as c
from kueue_tas.kube import catalogue as cat

Obj = dict[str, Any]

NS = "team-a"
GPU = mk.GPU
RACK = "example.com/rack"
HOST = c.HOSTNAME_LABEL
POOL = {"pool": "gpu"}
CHECK = "tas"
WORKLOADS = f"{cat.WORKLOADS.api_version}/workloads"
PODS = "v1/pods"
NODES = "v1/nodes"
JOBS = "batch/v1/jobs"
TOPOLOGIES = f"{cat.TOPOLOGIES.api_version}/topologies"
FLAVORS = f"{cat.RESOURCE_FLAVORS.api_version}/resourceflavors"
CHECKS = f"{cat.ADMISSION_CHECKS.api_version}/admissionchecks"
QUEUES = f"{cat.CLUSTER_QUEUES.api_version}/clusterqueues"
HUGE = "example.com/huge"


def ready_of(node: Obj) -> bool:
    conds = (node.get("status") or {}).get("conditions") or []
    return any(x.get("type") == "Ready" and x.get("status") == "True" for x in conds)


def entry_of(wl: Obj, check: str = CHECK) -> Obj | None:
    for e in (wl.get("status") or {}).get("admissionChecks") or []:
        if e.get("name") == check:
            return e  # type: ignore[no-any-return]
    return None


def has_quota(wl: Obj) -> bool:
    return bool((wl.get("status") or {}).get("admission"))


def condition_true(obj: Obj, kind: str) -> bool:
    return any(
        x.get("type") == kind and x.get("status") == "True" for x in (obj.get("status") or {}).get("conditions") or []
    )


def pod_gates(pod: Obj) -> list[str]:
    return [g.get("name", "") for g in (pod.get("spec") or {}).get("schedulingGates") or []]


def pod_gpus(pod: Obj) -> int:
    total = 0
    for ctr in pod["spec"].get("containers") or []:
        total += int(((ctr.get("resources") or {}).get("requests") or {}).get(GPU, "0"))
    return total


@dataclass
class Fleet:
    """The cluster's shape: ``racks`` x ``hosts`` nodes of ``gpus`` GPUs; ``hostname_differs``:
    the hostname label is not the Node's name (EKS: label ``ip-…``, name the FQDN)."""

    racks: int = 2
    hosts: int = 3
    gpus: int = 4
    hostname_differs: bool = False

    def node_name(self, r: int, h: int) -> str:
        return f"ip-10-0-{r}-{h}.ec2.internal" if self.hostname_differs else f"r{r}-h{h}"

    def hostname(self, r: int, h: int) -> str:
        return f"ip-10-0-{r}-{h}" if self.hostname_differs else f"r{r}-h{h}"

    def node(self, r: int, h: int, now: str) -> Obj:
        obj = mk.node(
            self.node_name(r, h),
            labels={**POOL, RACK: f"rack-{r}"},
            hostname=self.hostname(r, h),
            allocatable={"cpu": "32", "pods": "110", GPU: str(self.gpus)},
            conditions=[mk.condition("Ready", True, time=now)],
        )
        return obj

    def all(self) -> list[tuple[int, int]]:
        return [(r, h) for r in range(self.racks) for h in range(self.hosts)]


@dataclass
class KueueModel:
    """Kueue, the Job controller, the pod webhook and the kube-scheduler, on the server."""

    server: SimApiServer
    gate: str
    quota: int
    now: Any  # () -> RFC 3339 of virtual time
    originals: dict[str, Obj] = field(default_factory=dict)  # job name -> its template before any start
    pod_seq: int = 0

    # --- Kueue -------------------------------------------------------------------------------

    def submit(
        self, name: str, count: int, level: str, mode: str, *, priority: int | None = None, runtime: int | None = None
    ) -> None:
        annotations = {f"kueue-tas.io/podset-{mode}-topology": level}
        job = mk.job(name, count, annotations, namespace=NS)
        stored_job = self.server.create(JOBS, job)
        wl = mk.workload(name, count, annotations, namespace=NS, owner=stored_job, queue="lq")
        wl["spec"]["podSets"][0]["template"] = copy.deepcopy(job["spec"]["template"])
        if priority is not None:
            wl["spec"]["priority"] = priority
        if runtime is not None:
            wl["spec"]["maximumExecutionTimeSeconds"] = runtime
        wl["metadata"]["labels"] = {"sim/job": name}
        self.server.create(WORKLOADS, wl)
        self.originals[name] = copy.deepcopy(job["spec"]["template"])

    def reserved_gpus(self) -> int:
        return sum(
            ps["count"]
            for wl in self.server.items(WORKLOADS)
            if has_quota(wl) and not condition_true(wl, "Finished")  # a replaced slice's quota is the new one's
            for ps in wl["spec"]["podSets"]
        )

    def reserve(self, wl: Obj) -> bool:
        need = sum(ps["count"] for ps in wl["spec"]["podSets"])
        if self.reserved_gpus() + need > self.quota:
            return False
        new = copy.deepcopy(wl)
        st = new.setdefault("status", {})
        st["admission"] = {
            "clusterQueue": "cq",
            "podSetAssignments": [
                {"name": ps["name"], "flavors": {GPU: "gpu"}, "count": ps["count"]} for ps in wl["spec"]["podSets"]
            ],
        }
        conds = [x for x in st.get("conditions") or [] if x.get("type") not in ("QuotaReserved", "Evicted")]
        conds.append(mk.condition("QuotaReserved", True, reason="QuotaReserved", message="", time=self.now()))
        st["conditions"] = conds
        if entry_of(new) is None:
            st["admissionChecks"] = [*(st.get("admissionChecks") or []), self._pending_entry()]
        self.server.replace(WORKLOADS, new)
        return True

    def _pending_entry(self) -> Obj:
        return {"name": CHECK, "state": "Pending", "message": "", "lastTransitionTime": self.now()}

    def scale_up(self, wl: Obj, extra: int, seq: int) -> str:
        """An elastic Job grows: Kueue makes a new slice (the whole new count) naming ``wl`` as
        the slice it replaces; the Job's pods keep running meanwhile."""
        job = wl["metadata"]["labels"]["sim/job"]
        name = f"{job}-s{seq}"
        owner = self.server.get(JOBS, NS, job)
        assert owner is not None
        ps = copy.deepcopy(wl["spec"]["podSets"][0])
        ps["count"] += extra
        new = mk.workload(name, ps["count"], namespace=NS, owner=owner, queue="lq", podsets=[ps])
        new["metadata"]["labels"] = {"sim/job": job}
        new["metadata"]["annotations"] = {c.KUEUE_SLICE_REPLACEMENT_ANNOTATION: f"{NS}/{wl['metadata']['name']}"}
        self.server.create(WORKLOADS, new)
        return name

    def admit(self, wl: Obj) -> None:
        """Every check Ready on a Workload holding quota: admitted, its Job started (a new
        elastic slice: the slice it replaces finished, the Job's parallelism its count)."""
        replaced = (wl["metadata"].get("annotations") or {}).get(c.KUEUE_SLICE_REPLACEMENT_ANNOTATION)
        if replaced:
            old = self.server.get(WORKLOADS, NS, replaced.split("/", 1)[1])
            if old is not None and not condition_true(old, "Finished"):
                old["status"]["conditions"] = [
                    *old["status"].get("conditions", []),
                    mk.condition("Finished", True, reason="WorkloadSliceReplaced", message="", time=self.now()),
                ]
                self.server.replace(WORKLOADS, old)
        new = copy.deepcopy(wl)
        st = new["status"]
        st["conditions"] = [x for x in st.get("conditions") or [] if x.get("type") != "Admitted"]
        st["conditions"].append(mk.condition("Admitted", True, reason="Admitted", message="", time=self.now()))
        self.server.replace(WORKLOADS, new)
        job = self.server.get(JOBS, NS, wl["metadata"]["labels"]["sim/job"])
        if job is None:
            return
        template = job["spec"]["template"]
        meta = template.setdefault("metadata", {})
        spec = template.setdefault("spec", {})
        for update in entry_of(wl, CHECK).get("podSetUpdates") or []:  # type: ignore[union-attr]
            meta["labels"] = {**(meta.get("labels") or {}), **(update.get("labels") or {})}
            if update.get("nodeSelector"):
                spec["nodeSelector"] = {**(spec.get("nodeSelector") or {}), **update["nodeSelector"]}
        job["spec"]["suspend"] = False
        job["spec"]["parallelism"] = sum(ps["count"] for ps in wl["spec"]["podSets"])
        self.server.replace(JOBS, job)

    def evict(self, wl: Obj, reason: str, *, deactivate: bool = False) -> None:
        """Kueue's eviction: quota released, every check reset to Pending, the Job stopped
        (template restored as first seen); ``deactivate``: also ``spec.active=false``."""
        new = copy.deepcopy(wl)
        st = new.setdefault("status", {})
        st.pop("admission", None)
        conds = [x for x in st.get("conditions") or [] if x.get("type") not in ("QuotaReserved", "Admitted")]
        conds.append(mk.condition("Evicted", True, reason=reason, message=reason, time=self.now()))
        st["conditions"] = conds
        st["admissionChecks"] = [
            {
                "name": e["name"],
                "state": "Pending",
                "message": "Reset to Pending after eviction",
                "lastTransitionTime": self.now(),
            }
            for e in st.get("admissionChecks") or []
        ]
        if deactivate:
            new["spec"]["active"] = False
        self.server.replace(WORKLOADS, new)
        self.stop_job(wl["metadata"]["labels"]["sim/job"])

    def stop_job(self, name: str) -> None:
        job = self.server.get(JOBS, NS, name)
        if job is None or job["spec"].get("suspend"):
            return
        job["spec"]["suspend"] = True
        job["spec"]["template"] = copy.deepcopy(self.originals.get(name, job["spec"]["template"]))
        self.server.replace(JOBS, job)

    def finish(self, wl: Obj) -> None:
        """The Job completed: its pods, every slice of it and the Job go."""
        name = wl["metadata"]["labels"]["sim/job"]
        for other in self.server.items(WORKLOADS):
            if other["metadata"]["labels"].get("sim/job") == name and other is not wl:
                self.server.delete(WORKLOADS, NS, other["metadata"]["name"])
        for pod in self.pods_of(name):
            self.server.delete(PODS, NS, pod["metadata"]["name"])
        self.server.delete(WORKLOADS, NS, wl["metadata"]["name"])
        self.server.delete(JOBS, NS, name)

    def pods_of(self, job: str) -> list[Obj]:
        return [p for p in self.server.items(PODS) if (p["metadata"].get("labels") or {}).get("sim/job") == job]

    # --- the Job controller and the pod webhook ---------------------------------------------------

    def job_step(self, job: Obj) -> str | None:
        """One pod created or deleted for ``job``; None when it has what it should."""
        name = job["metadata"]["name"]
        pods = self.pods_of(name)
        if job["spec"].get("suspend"):
            if pods:
                self.server.delete(PODS, NS, pods[0]["metadata"]["name"])
                return f"job {name}: stopped, pod {pods[0]['metadata']['name']} deleted"
            return None
        if len(pods) >= job["spec"].get("parallelism", 1):
            return None
        self.pod_seq += 1
        template = copy.deepcopy(job["spec"]["template"])
        labels = {**(template.get("metadata") or {}).get("labels", {}), "sim/job": name}
        spec = template["spec"]
        if labels.get(c.GATED_LABEL) == c.GATED_LABEL_VALUE and self.gate not in [
            g["name"] for g in spec.get("schedulingGates") or []
        ]:
            spec["schedulingGates"] = [*(spec.get("schedulingGates") or []), {"name": self.gate}]  # the pod webhook
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": f"{name}-{self.pod_seq}",
                "namespace": NS,
                "labels": labels,
                "annotations": {
                    **((template.get("metadata") or {}).get("annotations") or {}),
                    "sim/created": str(self.server.clock()),
                },
                "ownerReferences": [mk.controller_ref(job)],
            },
            "spec": spec,
            "status": {"phase": "Pending"},
        }
        self.server.create(PODS, pod)
        return f"job {name}: pod {pod['metadata']['name']} created{' gated' if pod_gates(pod) else ''}"

    # --- the kube-scheduler ----------------------------------------------------------------------

    def bind(self, pod: Obj) -> str | None:
        selector = pod["spec"].get("nodeSelector") or {}
        used: dict[str, int] = {}
        for p in self.server.items(PODS):
            node = p["spec"].get("nodeName")
            if node:
                used[node] = used.get(node, 0) + pod_gpus(p)
        for node in self.server.items(NODES):
            labels = node["metadata"].get("labels") or {}
            if not ready_of(node) or node["spec"].get("unschedulable"):
                continue
            if any(labels.get(k) != v for k, v in selector.items()):
                continue
            name = node["metadata"]["name"]
            if used.get(name, 0) + pod_gpus(pod) > int(node["status"]["allocatable"].get(GPU, "0")):
                continue
            bound = copy.deepcopy(pod)
            bound["spec"]["nodeName"] = name
            bound["status"] = {"phase": "Running"}
            self.server.replace(PODS, bound)
            return str(name)
        return None
