"""The resources kueue-tas lists and watches, named by group/version/plural."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from kueue_tas.api import constants as c


@dataclass(frozen=True, slots=True)
class Resource:
    """A listable, watchable resource. ``group`` is ``""`` for core/v1.

    ``strip_managed_fields`` drops ``metadata.managedFields`` from the response
    bytes before decoding (a quarter of a pod's JSON). It relies on the Go
    struct order of built-in types (``managedFields`` is the last field of
    ObjectMeta and ``spec`` follows metadata), so it is only set for built-in
    kinds that have a ``spec``; never for custom resources, whose keys are sorted.
    """

    group: str
    version: str
    plural: str
    namespaced: bool
    kind: str = ""
    strip_managed_fields: bool = False

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    def path(self, namespace: str | None = None) -> str:
        base = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        if namespace is not None:
            if not self.namespaced:
                raise ValueError(f"{self.plural} is cluster-scoped")
            return f"{base}/namespaces/{namespace}/{self.plural}"
        return f"{base}/{self.plural}"

    def __str__(self) -> str:
        return f"{self.plural}.{self.group}" if self.group else self.plural


NODES: Final = Resource("", "v1", "nodes", namespaced=False, kind=c.KIND_NODE, strip_managed_fields=True)
PODS: Final = Resource("", "v1", "pods", namespaced=True, kind=c.KIND_POD, strip_managed_fields=True)
TOPOLOGIES: Final = Resource(c.KUEUE_GROUP, c.KUEUE_VERSION, "topologies", namespaced=False, kind=c.KIND_TOPOLOGY)
RESOURCE_FLAVORS: Final = Resource(
    c.KUEUE_GROUP, c.KUEUE_VERSION, "resourceflavors", namespaced=False, kind=c.KIND_RESOURCE_FLAVOR
)
ADMISSION_CHECKS: Final = Resource(
    c.KUEUE_GROUP, c.KUEUE_VERSION, "admissionchecks", namespaced=False, kind=c.KIND_ADMISSION_CHECK
)
CLUSTER_QUEUES: Final = Resource(
    c.KUEUE_GROUP, c.KUEUE_VERSION, "clusterqueues", namespaced=False, kind=c.KIND_CLUSTER_QUEUE
)
# Read by the admission webhook only (which ClusterQueue, so which Topology, a Job's queue leads to).
LOCAL_QUEUES: Final = Resource(c.KUEUE_GROUP, c.KUEUE_VERSION, "localqueues", namespaced=True, kind=c.KIND_LOCAL_QUEUE)
WORKLOADS: Final = Resource(c.KUEUE_GROUP, c.KUEUE_VERSION, "workloads", namespaced=True, kind=c.KIND_WORKLOAD)
# Few objects, so their managedFields are not worth the byte-level strip.
DAEMONSETS: Final = Resource(c.APPS_GROUP, "v1", "daemonsets", namespaced=True, kind=c.KIND_DAEMONSET)
