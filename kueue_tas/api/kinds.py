"""Which model reads a manifest: the apiVersion/kind table and ``parse_object``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

from kueue_tas.api import constants as c
from kueue_tas.api.core_objects import DaemonSet, Job, JobSet, Node, Pod
from kueue_tas.api.kueue_objects import AdmissionCheck, ClusterQueue, ResourceFlavor, Topology
from kueue_tas.api.object_base import TypedObject
from kueue_tas.api.workload import Workload

KubeObject = (
    Topology | ResourceFlavor | AdmissionCheck | ClusterQueue | Workload | Node | Pod | Job | JobSet | DaemonSet
)

_KUEUE_KINDS: dict[str, type[TypedObject]] = {
    c.KIND_RESOURCE_FLAVOR: ResourceFlavor,
    c.KIND_ADMISSION_CHECK: AdmissionCheck,
    c.KIND_CLUSTER_QUEUE: ClusterQueue,
    c.KIND_WORKLOAD: Workload,
}

_OTHER_KINDS: dict[tuple[str, str], type[TypedObject]] = {
    (c.CORE_API_VERSION, c.KIND_NODE): Node,
    (c.CORE_API_VERSION, c.KIND_POD): Pod,
    (c.BATCH_API_VERSION, c.KIND_JOB): Job,
    (c.JOBSET_API_VERSION, c.KIND_JOBSET): JobSet,
    (c.APPS_API_VERSION, c.KIND_DAEMONSET): DaemonSet,
}


def model_class_for(api_version: str, kind: str) -> type[TypedObject] | None:
    """The model for an apiVersion/kind pair, or None when we do not read that kind."""
    group, _, version = api_version.rpartition("/")
    if group == c.KUEUE_GROUP:
        if kind == c.KIND_TOPOLOGY:
            return Topology if version in c.KUEUE_TOPOLOGY_INPUT_VERSIONS else None
        if version in c.KUEUE_INPUT_VERSIONS:
            return _KUEUE_KINDS.get(kind)
        return None
    return _OTHER_KINDS.get((api_version, kind))


def parse_object(obj: Mapping[str, Any]) -> KubeObject | None:
    """Parse a manifest into its model by apiVersion and kind; None for kinds we do not read.

    Raises ``pydantic.ValidationError`` when a known kind has a malformed shape.
    """
    api_version = obj.get("apiVersion")
    kind = obj.get("kind")
    if not isinstance(api_version, str) or not isinstance(kind, str):
        return None
    cls = model_class_for(api_version, kind)
    if cls is None:
        return None
    return cast(KubeObject, cls.model_validate(obj))
