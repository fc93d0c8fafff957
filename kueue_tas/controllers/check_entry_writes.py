"""The writes that turn an admission decision into cluster state, in the order that keeps
every invariant: gates into the suspended Job/JobSet templates, then the assignment
annotation, then our check entry (one server-side apply, our field manager).

Every entry write carries the resourceVersion of the Workload it was decided on
(:func:`apply_entry`): a Workload that changed since (Kueue evicted it, reset our entry,
withdrew its quota; another leader decided) refuses it with ``Conflict``, so no write of ours
makes or keeps an entry Ready on a state we did not decide. The annotation write, itself
guarded, returns the Workload it left, whose version then guards the entry write.

How a write fails decides what happens to the capacity the decision holds: only the check
entry can make a workload Ready, so only an entry write whose outcome is unknown (no
response, timeout, 5xx; :func:`~kueue_tas.kube.errors.may_have_applied`) keeps it; the
controller then re-reads the Workload (:meth:`AdmissionWriter.read_workload`) before
deciding again. Every other failure leaves nothing that holds capacity.

The one check-entry writer of the controllers: admission and node repair write through it
(``DecisionContext.writer``), the assignment guard and topology health build and guard their
entries with its helpers (the AdmissionCheck status takes only its ``now_rfc3339``)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, Protocol

from kubernetes_asyncio import client as k8s

from kueue_tas.api import constants as c
from kueue_tas.api.object_base import parse_rfc3339
from kueue_tas.api.workload import AdmissionCheckState, Workload
from kueue_tas.controllers.decide import Decision, Outcome
from kueue_tas.kube.client import (
    JSON_PATCH,
    STRATEGIC_MERGE_PATCH,
    apply_status,
    call_json,
    merge_patch_custom,
    raw_kwargs,
)
from kueue_tas.kube.errors import NotFound
from kueue_tas.topology.codec import decode_assignment_annotation, encode_assignment_annotation


class GateInjectionError(RuntimeError):
    pass


class EntryWriteUnknown(Exception):
    """Our check entry write failed in a way that may still have applied it (``__cause__``)."""


def rfc3339(at: datetime) -> str:
    return at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def wait_started(workload: Workload) -> datetime | None:
    """When a decision first held ``workload`` for a preferred level (our annotation; None when
    none did, or the value is not a time: then the wait starts now)."""
    raw = workload.metadata.annotations.get(c.PREFERRED_WAIT_STARTED_ANNOTATION)
    if not raw:
        return None
    try:
        return parse_rfc3339(raw)
    except ValueError:
        return None


def now_rfc3339() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def check_entry(
    check: str, decision: Decision, workload: Workload, requeue_after: int | None = None, *, repairs: bool = True
) -> dict[str, Any]:
    """Our check entry for ``decision``; ``repairs``: node repairs are on (gate
    TASFailedNodeReplacement), so single-domain PodSets on named hosts are gated, not pinned."""
    entry: dict[str, Any] = {
        "name": check,
        "state": decision.outcome.value,
        "message": decision.message[:32768],
        "lastTransitionTime": now_rfc3339(),
    }
    if decision.outcome is Outcome.READY:
        updates = []
        for p in decision.placements:
            update: dict[str, Any] = {
                "name": p.name,
                "labels": {c.WORKLOAD_LABEL: workload.metadata.uid or workload.name, c.PODSET_LABEL: p.name},
            }
            selector = p.node_selector(repairs)
            if selector:
                update["nodeSelector"] = selector
            if p.gated(repairs):
                # Kueue merges podSetUpdates into the template at every start, so this label
                # reaches the pods even when a late stop restored the template without our gate
                # (chaos seeds 1209, 1213); the pod webhook gates what carries it.
                update["labels"][c.GATED_LABEL] = c.GATED_LABEL_VALUE
            updates.append(update)
        if updates:
            entry["podSetUpdates"] = updates
    if decision.outcome is Outcome.RETRY and requeue_after is not None:
        entry["requeueAfterSeconds"] = requeue_after
    return entry


def entry_with_message(st: AdmissionCheckState, message: str) -> dict[str, Any]:
    """The entry as it stands, with ``message``: every field we own is sent again as it is
    (server-side apply drops what its manager no longer sends)."""
    entry: dict[str, Any] = {
        "name": st.name,
        "state": st.state,
        "message": message,
        "lastTransitionTime": st.last_transition_time or now_rfc3339(),
    }
    if st.pod_set_updates:
        entry["podSetUpdates"] = [u.model_dump(by_alias=True, exclude_defaults=True) for u in st.pod_set_updates]
    return entry


def merged_annotation(workload: Workload, decision: Decision) -> str:
    """Our assignments merged with those of other checks of ours already on the Workload."""
    mine = {p.name: p.assignment for p in decision.placements}
    existing = workload.metadata.annotations.get(c.TOPOLOGY_ASSIGNMENT_ANNOTATION)
    merged = []
    if existing:
        try:
            merged = [(n, a) for n, a in decode_assignment_annotation(existing) if n not in mine]
        except ValueError:
            merged = []
    merged.extend(mine.items())
    order = {ps.name: i for i, ps in enumerate(workload.spec.pod_sets)}
    merged.sort(key=lambda item: order.get(item[0], len(order)))
    return encode_assignment_annotation(merged)


# What a placement ends: removed in the write that records the assignment.
PLACED_ENDS = (c.PREEMPTION_HOLD_ANNOTATION, c.RESERVATION_ANNOTATION, c.WAITING_SINCE_ANNOTATION)


class UnguardedWrite(ValueError):
    """An entry write without the resourceVersion of the Workload it was decided on."""


async def apply_entry(api: k8s.ApiClient, workload: Workload, entry: dict[str, Any]) -> None:
    """Server-side apply of our check ``entry`` on the Workload's status, as our field manager,
    only onto the Workload as ``workload`` has it: ``Conflict`` once it changed (a server-side
    apply whose body names a resourceVersion is a precondition). Never unguarded: an entry
    applied without it could turn Ready a Workload Kueue evicted after our decision."""
    version = workload.metadata.resource_version
    if not version:  # I11: an entry write is guarded by the state it was decided on, or not made
        raise UnguardedWrite(f"Workload {workload.namespace}/{workload.name}: no resourceVersion to guard our entry by")
    await apply_status(
        api,
        group=c.KUEUE_GROUP,
        version=c.KUEUE_VERSION,
        plural="workloads",
        kind=c.KIND_WORKLOAD,
        namespace=workload.namespace,
        name=workload.name,
        status={"admissionChecks": [entry]},
        resource_version=version,
    )


def _gate_ops(spec_path: str, pod_spec: dict[str, Any], gate: str) -> list[dict[str, Any]]:
    gates = pod_spec.get("schedulingGates") or []
    if any(g.get("name") == gate for g in gates):
        return []
    if not gates:
        return [{"op": "add", "path": f"{spec_path}/schedulingGates", "value": [{"name": gate}]}]
    return [{"op": "add", "path": f"{spec_path}/schedulingGates/-", "value": {"name": gate}}]


class AdmissionWriter(Protocol):
    """The writes of an admission decision (tests pass a recording fake)."""

    async def inject_gates(self, workload: Workload, podsets: set[str], gate: str) -> None: ...

    async def write_annotation(self, workload: Workload, text: str, kept_slices: str | None = None) -> Workload:
        """Our assignment annotation ``text`` and, for a new elastic slice, the record of the
        slices whose pods it keeps (``KEPT_SLICES_ANNOTATION``), in one write guarded by
        ``workload``'s resourceVersion (``Conflict`` once it changed); the Workload as the write
        left it (its version guards the entry write)."""
        ...

    async def write_check(self, workload: Workload, entry: dict[str, Any]) -> None:
        """Our check entry, only onto the Workload as ``workload`` has it (``Conflict`` once it
        changed): ``workload`` is the state the entry was decided on."""
        ...

    async def write_wait_start(self, workload: Workload, stamp: str) -> Workload:
        """Record when a preferred wait began (``PREFERRED_WAIT_STARTED_ANNOTATION``); the
        Workload as the write left it."""
        ...

    async def write_marks(self, workload: Workload, values: Mapping[str, str]) -> Workload:
        """Record what a decision keeps on the Workload across requeues and restarts (a
        preemption's hold, a reservation, when its wait began), guarded by ``workload``'s
        version; the Workload as the write left it."""
        ...

    async def read_workload(self, workload: Workload) -> Workload | None:
        """The Workload as the API server has it now (None: deleted)."""
        ...


class KubeAdmissionWriter:
    """:class:`AdmissionWriter` against the API server."""

    def __init__(self, api: k8s.ApiClient) -> None:
        self.api = api

    async def write_annotation(self, workload: Workload, text: str, kept_slices: str | None = None) -> Workload:
        """With the Workload's resourceVersion: a Workload that changed since we decided gives Conflict."""
        values: dict[str, str | None] = {c.TOPOLOGY_ASSIGNMENT_ANNOTATION: text}
        if kept_slices is not None:
            values[c.KEPT_SLICES_ANNOTATION] = kept_slices
        for mark in PLACED_ENDS:
            if mark in workload.metadata.annotations:
                values[mark] = None  # placed: its hold, reservation and wait end (null removes)
        return await self._annotate(workload, values, workload.metadata.resource_version)

    async def write_marks(self, workload: Workload, values: Mapping[str, str]) -> Workload:
        return await self._annotate(workload, values, workload.metadata.resource_version)

    async def write_wait_start(self, workload: Workload, stamp: str) -> Workload:
        """Guarded like every write a decision makes: the Retry entry that follows is guarded by
        the version this write returns, so an unguarded write landing after Kueue evicted and
        reserved again would carry that Retry onto the new reservation (and bounce it)."""
        return await self._annotate(
            workload, {c.PREFERRED_WAIT_STARTED_ANNOTATION: stamp}, workload.metadata.resource_version
        )

    async def _annotate(
        self, workload: Workload, values: Mapping[str, str | None], resource_version: str | None
    ) -> Workload:
        written = await merge_patch_custom(
            self.api,
            group=c.KUEUE_GROUP,
            version=c.KUEUE_VERSION,
            plural="workloads",
            namespace=workload.namespace,
            name=workload.name,
            patch={"metadata": {"annotations": values}},
            resource_version=resource_version,
        )
        return Workload.model_validate(written)

    async def read_workload(self, workload: Workload) -> Workload | None:
        co = k8s.CustomObjectsApi(self.api)
        try:
            raw = await call_json(
                co.get_namespaced_custom_object(
                    c.KUEUE_GROUP,
                    c.KUEUE_VERSION,
                    workload.namespace or "default",
                    "workloads",
                    workload.name,
                    **raw_kwargs(30),
                )
            )
        except NotFound:
            return None
        return Workload.model_validate(raw)

    async def write_check(self, workload: Workload, entry: dict[str, Any]) -> None:
        await apply_entry(self.api, workload, entry)

    async def inject_gates(self, workload: Workload, podsets: set[str], gate: str) -> None:
        """Put our scheduling gate into the pod templates of the owner Job or JobSet for the
        given PodSets, while it is suspended (the only time Kubernetes allows it). A JobSet is
        read first: a JSON merge patch would replace its whole list of replicated jobs."""
        if not podsets:
            return
        owner = workload.metadata.controller_owner()
        if owner is None:
            raise GateInjectionError("the Workload has no controller owner (Job or JobSet) to put the gate on")
        ns = workload.namespace or "default"
        if owner.kind == c.KIND_JOB and owner.api_version == c.BATCH_API_VERSION:
            # One request, no read: a strategic merge adds our gate by name beside any others
            # (a second try changes nothing); the apiserver refuses a template change on a Job
            # that is not suspended, and the UID makes it refuse a Job re-created under the name.
            patch: dict[str, Any] = {"spec": {"template": {"spec": {"schedulingGates": [{"name": gate}]}}}}
            if owner.uid:
                patch["metadata"] = {"uid": owner.uid}
            await call_json(
                k8s.BatchV1Api(self.api).patch_namespaced_job(
                    owner.name, ns, patch, **raw_kwargs(30, _content_type=STRATEGIC_MERGE_PATCH)
                )
            )
            return
        if owner.kind == c.KIND_JOBSET:
            co = k8s.CustomObjectsApi(self.api)
            js = await call_json(
                co.get_namespaced_custom_object(
                    c.JOBSET_GROUP, c.JOBSET_VERSION, ns, "jobsets", owner.name, **raw_kwargs(30)
                )
            )
            if not js["spec"].get("suspend"):
                raise GateInjectionError(
                    f"JobSet {owner.name} is not suspended; its pod templates cannot take the gate"
                )
            ops: list[dict[str, Any]] = []
            for i, rj in enumerate(js["spec"].get("replicatedJobs") or []):
                if str(rj.get("name", "")).lower() in podsets:
                    spec = rj["template"]["spec"]["template"].setdefault("spec", {})
                    ops.extend(_gate_ops(f"/spec/replicatedJobs/{i}/template/spec/template/spec", spec, gate))
            if ops:
                ops.insert(
                    0, {"op": "test", "path": "/metadata/resourceVersion", "value": js["metadata"]["resourceVersion"]}
                )
                await call_json(
                    co.patch_namespaced_custom_object(
                        c.JOBSET_GROUP,
                        c.JOBSET_VERSION,
                        ns,
                        "jobsets",
                        owner.name,
                        ops,
                        **raw_kwargs(30, _content_type=JSON_PATCH),
                    )
                )
            return
        raise GateInjectionError(f"owner {owner.kind}/{owner.name} is neither a batch/v1 Job nor a JobSet")
