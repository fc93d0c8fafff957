"""The small cluster the topology map tests (``test_mapview*``, ``test_map_cli``) draw.

Topology ``topo`` = block > rack > hostname; flavor ``gpu`` (nodes labelled ``pool=a``) governed
by our AdmissionCheck ``tas``. Nodes, 8 GPUs each:

* ``b1/b1-r1``: ``h11``; ``h12`` NotReady since an hour before ``NOW`` (and failed for ``train``,
  whose pods no longer run there);
* ``b1/b1-r2``: ``h21`` cordoned; ``h22`` tainted NoSchedule;
* ``b2/b2-r3``: ``h31``, ``h32``;
* ``x`` of the flavor without a rack label (not drawn); ``other`` of another pool (not the flavor's).

Workloads (namespace ``ns``):

* ``train`` admitted: 2 two-GPU pods on h11 (both bound) and 2 on h12 (one released there,
  not bound; the other gated);
* ``big`` pending (quota on ``gpu``, our check Retry): 3 pods of 8 GPUs, required rack. Only
  b2-r3 has room for 2: h11 has 4 GPUs left, h22 is tainted, h12 and h21 are not counted;
* ``small`` waiting for quota, our check listed: 1 pod of 1 GPU, fits now;
* ``done`` finished, ``foreign`` none of our checks and no flavor: neither is shown.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from functools import partial
from html.parser import HTMLParser
from typing import Any

import builders as mk
from vocab import BLOCK, CONTROLLER, GPU, HOST, PODSET_LABEL, RACK, REQUIRED, SCHEDULING_GATE, WORKLOAD_LABEL

from kueue_tas.api.kueue_objects import AdmissionCheck, ClusterQueue, ResourceFlavor, Topology
from kueue_tas.api.workload import Workload
from kueue_tas.capacity.feed import capacity_from_lists
from kueue_tas.capacity.live import LiveCapacity
from kueue_tas.cli.cluster_read import KueueConfig, TasConfig, tas_config
from kueue_tas.controllers.informers import slim_node
from kueue_tas.kube.slim import SlimPod, slim_pod
from kueue_tas.mapview.build import MapOptions, build_map
from kueue_tas.mapview.model import MapModel
from kueue_tas.mapview.workloads import WorkloadInputs
from kueue_tas.topology.assignment import DomainAssignment, TopologyAssignment
from kueue_tas.topology.model import NodeInfo

NOW = datetime(2026, 1, 1, 1, 0, tzinfo=UTC)
AN_HOUR_BEFORE = "2026-01-01T00:00:00Z"
TRAIN_UID = "uid-train"

PLACES = {
    "h11": ("b1", "b1-r1"),
    "h12": ("b1", "b1-r1"),
    "h21": ("b1", "b1-r2"),
    "h22": ("b1", "b1-r2"),
    "h31": ("b2", "b2-r3"),
    "h32": ("b2", "b2-r3"),
}
DRAWN = tuple(PLACES)


def kueue_config() -> KueueConfig:
    cq = mk.cluster_queue("cq", ("gpu",), {"tas": ["gpu"]}, covered=(GPU,), quota=None)
    return KueueConfig(
        topologies={"topo": Topology.model_validate(mk.topology("topo", (BLOCK, RACK, HOST)))},
        flavors={"gpu": ResourceFlavor.model_validate(mk.flavor("gpu", {"pool": "a"}))},
        checks={"tas": AdmissionCheck.model_validate(mk.admission_check("tas", "topo"))},
        queues=[ClusterQueue.model_validate(cq)],
    )


def kueue() -> TasConfig:
    return tas_config(kueue_config(), CONTROLLER)


def node_objects() -> list[dict[str, Any]]:
    out = []
    for name, (block, rack) in PLACES.items():
        kw: dict[str, Any] = {}
        if name == "h12":
            kw["conditions"] = [mk.condition("Ready", False, time=AN_HOUR_BEFORE)]
        if name == "h21":
            kw["unschedulable"] = True
        if name == "h22":
            kw["taints"] = [{"key": "maint", "value": "soon", "effect": "NoSchedule"}]
        out.append(mk.node(name, labels={BLOCK: block, RACK: rack, "pool": "a"}, gpus=8, **kw))
    out.append(mk.node("x", labels={BLOCK: "b1", "pool": "a"}, gpus=8))
    out.append(mk.node("other", labels={BLOCK: "b9", RACK: "b9-r9", "pool": "b"}, gpus=8))
    return out


def nodes() -> list[NodeInfo]:
    return [slim_node(n) for n in node_objects()]


TRAIN = TopologyAssignment((HOST,), (DomainAssignment(("h11",), 2), DomainAssignment(("h12",), 2)))


def workload_objects() -> list[dict[str, Any]]:
    required = {REQUIRED: RACK}
    ready = [mk.condition("QuotaReserved"), mk.condition("Admitted")]
    return [
        mk.workload(
            "train",
            4,
            required,
            namespace="ns",
            uid=TRAIN_UID,
            gpus=2,
            assignment=TRAIN,
            admitted_flavor="gpu",
            check_state="Ready",
            conditions=ready,
        ),
        mk.workload(
            "big",
            3,
            required,
            namespace="ns",
            uid="uid-big",
            gpus=8,
            admitted_flavor="gpu",
            check_state="Retry",
            conditions=[mk.condition("QuotaReserved")],
        ),
        mk.workload("small", 1, required, namespace="ns", uid="uid-small", check_state="Pending"),
        mk.workload(
            "done",
            1,
            required,
            namespace="ns",
            uid="uid-done",
            assignment=TopologyAssignment((HOST,), (DomainAssignment(("h31",), 1),)),
            admitted_flavor="gpu",
            check_state="Ready",
            conditions=[*ready, mk.condition("Finished")],
        ),
        mk.workload("foreign", 1, namespace="ns", uid="uid-foreign", queue="other"),
    ]


def workloads() -> list[Workload]:
    return [Workload.model_validate(w) for w in workload_objects()]


train_pod = partial(
    mk.pod,
    namespace="ns",
    gpus=2,
    labels={WORKLOAD_LABEL: TRAIN_UID, PODSET_LABEL: "main"},
)


def pod_objects() -> list[dict[str, Any]]:
    return [
        train_pod("t0", "h11"),
        train_pod("t1", "h11"),
        train_pod("t2", phase="Pending", selector={HOST: "h12"}),  # released to h12, not bound
        train_pod("t3", phase="Pending", gates=(SCHEDULING_GATE,)),
        mk.pod("daemon", "h31", namespace="kube-system", requests={"cpu": "1"}),
    ]


def pods() -> list[SlimPod]:
    return [slim_pod(p) for p in pod_objects()]


def capacity(tas: TasConfig | None = None) -> LiveCapacity:
    tas = tas or kueue()
    return capacity_from_lists(tas.specs, tas.checks, nodes(), pods(), workloads())


def model(**options: Any) -> MapModel:
    tas = kueue()
    live = capacity(tas)
    inputs = WorkloadInputs(live, tas.check_flavors, now=NOW)
    return build_map(live, workloads(), pods(), inputs, MapOptions(**options))


# --- reading the page back ------------------------------------------------------------------------

VOID = frozenset({"meta", "br", "img", "input", "link", "hr", "rect"})


class Element:
    def __init__(self, tag: str, attrs: dict[str, str], parent: Element | None) -> None:
        self.tag, self.attrs, self.parent = tag, attrs, parent
        self.children: list[Element] = []
        self.text = ""

    @property
    def classes(self) -> set[str]:
        return set(self.attrs.get("class", "").split())

    def iter(self) -> Iterator[Element]:
        yield self
        for child in self.children:
            yield from child.iter()

    def find_all(self, tag: str | None = None, cls: str | None = None, **attrs: str) -> list[Element]:
        return [
            e
            for e in self.iter()
            if (tag is None or e.tag == tag)
            and (cls is None or cls in e.classes)
            and all(e.attrs.get(k.replace("_", "-")) == v for k, v in attrs.items())
        ]

    def find(self, tag: str | None = None, cls: str | None = None, **attrs: str) -> Element:
        (found,) = self.find_all(tag, cls, **attrs)
        return found

    def all_text(self) -> str:
        return self.text + "".join(c.all_text() for c in self.children)

    def ancestors(self) -> Iterator[Element]:
        up = self.parent
        while up is not None:
            yield up
            up = up.parent


class _Builder(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.root = Element("#document", {}, None)
        self.at = self.root
        self.unclosed: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        el = Element(tag, {k: v or "" for k, v in attrs}, self.at)
        self.at.children.append(el)
        if tag not in VOID:
            self.at = el

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.at.children.append(Element(tag, {k: v or "" for k, v in attrs}, self.at))

    def handle_endtag(self, tag: str) -> None:
        if tag in VOID:
            return
        if self.at.tag != tag:
            self.unclosed.append(f"</{tag}> closes <{self.at.tag}>")
            return
        assert self.at.parent is not None
        self.at = self.at.parent

    def handle_data(self, data: str) -> None:
        self.at.text += data


def parse_page(page: str) -> Element:
    """The page as a tree; fails when an end tag does not close the element it should (a value
    that broke out of its attribute or text would do that)."""
    builder = _Builder()
    builder.feed(page)
    builder.close()
    assert not builder.unclosed, builder.unclosed[:5]
    assert builder.at is builder.root, f"<{builder.at.tag}> never closed"
    return builder.root


def host_key(host: Element) -> str:
    """A host tile's domain on a hostname-level map: its rack tile's key + '/' + its hostname."""
    up = next((a for a in host.ancestors() if "d" in a.classes), None)
    name = host.attrs.get("data-h") or host.attrs["data-node"]
    return name if up is None else f"{up.attrs['data-domain']}/{name}"
