"""The ungater's passes wired to hand-fed shared informers, with recording fakes for its pod patches
and Events: a Workload ns/wl of 4 pods under check ``tas-check``, its assignment per test."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

import builders as mk
from vocab import HOST

from kueue_tas.api import constants as c
from kueue_tas.api.kueue_objects import AdmissionCheck
from kueue_tas.controllers.deps import ControllerDeps
from kueue_tas.controllers.informers import OurChecks, SharedInformers
from kueue_tas.controllers.ungate import reconciler as uc
from kueue_tas.controllers.ungate.writes import PodPatcher
from kueue_tas.kube.events import ObjectRef
from kueue_tas.kube.stores import Store
from kueue_tas.runtime.config import Settings
from kueue_tas.runtime.manager import Manager
from kueue_tas.runtime.metrics import Metrics
from kueue_tas.topology.assignment import DomainAssignment, TopologyAssignment

CHECK = "tas-check"
UID = "wl-uid-1"


def assignment(*domains: tuple[str, int]) -> TopologyAssignment:
    return TopologyAssignment((HOST,), tuple(DomainAssignment((h,), n) for h, n in domains))


# Workload ns/wl of 4 pods (PodSet main, no requests); our check's state and the assignment per test.
workload = partial(
    mk.workload,
    "wl",
    4,
    gpus=0,
    namespace="ns",
    uid=UID,
    resource_version="1",
    queue=None,
    check=CHECK,
    check_state="Ready",
    check_time="2026-01-01T00:00:00Z",
)


class Recorder:
    """The PodPatcher and the Event sink: records patches and Events; ``fail`` raises per pod."""

    def __init__(self) -> None:
        self.patches: list[dict[str, Any]] = []
        self.fail: dict[str, Exception] = {}
        self.events: list[tuple[str, str, str]] = []

    async def patch(self, namespace: str, name: str, patch: dict[str, Any], resource_version: str) -> None:
        if name in self.fail:
            raise self.fail.pop(name)
        self.patches.append({"name": name, "patch": patch, "rv": resource_version})

    async def emit_event(self, regarding: ObjectRef, *, reason: str, message: str, type: str = "Normal") -> bool:
        self.events.append((regarding.kind, reason, message))
        return True

    def selectors(self) -> dict[str, str]:
        return {p["name"]: p["patch"]["spec"]["nodeSelector"][HOST] for p in self.patches}


class FixedChecks(OurChecks):
    """Our checks by name, set by the test (the AdmissionCheck informer is not exercised here)."""

    def __init__(self) -> None:
        super().__init__(Store[AdmissionCheck](), c.CONTROLLER_NAME)
        self.current = {CHECK}

    def names(self) -> set[str]:
        return set(self.current)


class Harness:
    def __init__(
        self,
        clock: Callable[[], float] | None = None,
        patcher: PodPatcher | None = None,
        repairing: Callable[[str], bool] | None = None,
        *,
        node_usable: Callable[[str], bool] | None = None,
        node_problem: Callable[[str], str | None] | None = None,
    ) -> None:
        """``patcher``: where the pod patches go (default: the recorder); ``repairing``: the
        workloads with a node repair in flight (none by default); ``node_usable`` /
        ``node_problem``: whether / why not a hostname's node takes pods (default: every one)."""
        self.rec = Recorder()
        settings = Settings(leader_election=False, ungate_batch_period_seconds=0)
        self.metrics = Metrics()
        informers = SharedInformers.register(Manager(None, settings, self.metrics), settings.annotation_prefix)
        self.ungater_informers = informers
        self.pods = informers.pods
        self.workloads = informers.workloads
        self.checks = FixedChecks()
        self.ungater = uc.Ungater(
            ControllerDeps(
                informers=informers, checks=self.checks, events=self.rec, metrics=self.metrics, settings=settings
            ),
            patcher=patcher or self.rec,
            clock=clock,
            node_usable=node_usable,
            node_problem=node_problem,
            **({"repairing": repairing} if repairing is not None else {}),
        )

    def workload(self, ta: TopologyAssignment | None, state: str = "Ready") -> None:
        self.workloads.handle_event("ADDED", workload(assignment=ta, check_state=state))

    def pod(
        self,
        name: str,
        event: str = "ADDED",
        *,
        index: int | None = None,
        gated: bool = True,
        other_gates: tuple[str, ...] = (),
        uid: str | None = None,
        rv: str = "1",
        phase: str = "Pending",
        **pod_args: Any,
    ) -> None:
        """Deliver a pod of the workload (PodSet main), held by our gate unless not ``gated``."""
        labels = {c.WORKLOAD_LABEL: UID, c.PODSET_LABEL: "main"}
        if index is not None:
            labels[c.JOB_COMPLETION_INDEX_LABEL] = str(index)
        gates = (*other_gates, c.SCHEDULING_GATE) if gated else other_gates
        uid = uid or f"uid-{name}"
        pod = mk.pod(
            name, namespace="ns", uid=uid, resource_version=rv, labels=labels, gates=gates, phase=phase, **pod_args
        )
        self.pods.handle_event(event, pod)

    def observe_patches(self) -> None:
        """Play the apiserver: deliver each patched pod back, ungated with its new selector."""
        for p in self.rec.patches:
            pod = self.pods.store.get(f"ns/{p['name']}")
            assert pod is not None
            self.pod(
                p["name"],
                "MODIFIED",
                uid=pod.uid,
                rv=str(int(pod.resource_version) + 1),
                gated=False,
                index=pod.completion_index,
                selector=p["patch"]["spec"]["nodeSelector"],
            )

    async def run_pass(self) -> float | None:
        return await self.ungater.reconcile("ns/wl")
