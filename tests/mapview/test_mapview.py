"""The topology map: its model (``mapview.build``) and the page's DOM (``mapview.render``), on
the small cluster of ``map_scene``."""

from __future__ import annotations

import json

import map_scene as scene
import pytest
from map_scene import Element, host_key, parse_page
from vocab import BLOCK, GPU, HOST, RACK

from kueue_tas.api import constants as c
from kueue_tas.api.pod_shape import parse_pod_shape
from kueue_tas.capacity.pod_counts import PodCounts
from kueue_tas.mapview.build import build_map, default_shape, is_extended
from kueue_tas.mapview.model import Amount, FlavorMap, MapModel, Mark, State, WorkloadView, map_hosts
from kueue_tas.mapview.panels import colour_class
from kueue_tas.mapview.render import render_map
from kueue_tas.mapview.workloads import WorkloadInputs


def flavor() -> FlavorMap:
    (fm,) = scene.model().flavors
    return fm


def workload(key: str) -> WorkloadView:
    return next(w for w in scene.model().workloads if w.key == key)


# --- the model ------------------------------------------------------------------------------------


def test_hosts_are_drawn_under_their_domains_with_their_marks() -> None:
    fm = flavor()
    assert (fm.flavor, fm.topology, fm.levels, fm.level_names) == (
        "gpu",
        "topo",
        (BLOCK, RACK, HOST),
        ("block", "rack", "host"),
    )
    assert fm.hostname_level and fm.unplaced_nodes == 1  # x lacks the rack label; other is not the flavor's
    assert [d.key for d in fm.domains] == ["b1", "b2"]
    assert [c.key for d in fm.domains for c in d.children] == ["b1/b1-r1", "b1/b1-r2", "b2/b2-r3"]
    hosts = {h.node: h for h in map_hosts(fm)}
    assert set(hosts) == set(scene.DRAWN)
    assert {n: h.marks for n, h in hosts.items() if h.marks} == {
        "h12": (Mark.NOT_READY, Mark.FAILED),
        "h21": (Mark.CORDONED,),
        "h22": (Mark.TAINTED,),
    }
    assert hosts["h12"].notes == ("Ready=False", "failed for ns/train: NotReady for 3600s")
    assert hosts["h22"].notes == ("taint maint=soon:NoSchedule",)
    # Not Ready and cordoned nodes are drawn but their capacity does not count.
    assert {n for n, h in hosts.items() if not h.counted} == {"h12", "h21"}


def test_free_capacity_is_the_admitters() -> None:
    fm = flavor()
    hosts = {h.node: h for h in map_hosts(fm)}
    assert fm.domains[0].children[0].hosts[0].node == "h11"
    # h11: 8 GPUs, train's two bound 2-GPU pods take 4; h12's two slots of train sit on a node
    # that does not count.
    assert hosts["h11"].amount(0) == Amount(4, 8)
    assert hosts["h12"].amount(0) == Amount(0, 8)
    b1, b2 = fm.domains
    assert (b1.amount(0), b2.amount(0)) == (Amount(12, 16), Amount(16, 16))  # counted hosts only
    r3 = b2.children[0]
    assert r3.free[1] == 63_000 and r3.allocatable[1] == 64_000  # cpu: the daemon pod on h31


def test_free_slots_for_the_default_shape_of_8_gpus() -> None:
    model = scene.model()
    assert (model.resource, model.shape) == (GPU, "nvidia.com/gpu=8")
    fm = model.flavors[0]
    by_level = {s.level: (s.fit, s.free_domains, s.domains) for s in fm.slots}
    assert by_level == {BLOCK: (3, 1, 2), RACK: (3, 2, 3), HOST: (3, 3, 4)}
    b1, b2 = fm.domains
    assert (b1.slots, b2.slots, b2.free_for_shape, b1.free_for_shape) == (1, 2, True, False)
    assert {h.node: h.slots for h in map_hosts(fm)} == {
        "h11": 0,
        "h12": None,
        "h21": None,
        "h22": 1,
        "h31": 1,
        "h32": 1,
    }


def test_resource_and_shape_can_be_chosen() -> None:
    model = scene.model(resource="cpu", shape=parse_pod_shape("cpu=16"))
    assert model.resources[0] == "cpu" and model.shape == "cpu=16"
    b2 = model.flavors[0].domains[1]
    assert b2.amount(0) == Amount(63_000, 64_000) and b2.slots == 3  # 31 + 32 cores: 1 + 2 pods of 16


def test_default_colour_is_the_first_extended_resource_and_its_shape_8() -> None:
    assert is_extended(GPU) and not is_extended("cpu") and not is_extended("kubernetes.io/batch")
    assert default_shape(GPU).requests == {GPU: 8}
    assert default_shape("cpu").requests == {"cpu": 1000}


def test_admitted_workload_domains_equal_its_assignment_with_bound_and_pending() -> None:
    w = workload("ns/train")
    assert (w.state, w.queue, w.cluster_queue) == (State.ADMITTED, "lq", "cq")
    (ps,) = w.podsets
    assert [(d.values, d.key, d.assigned, d.bound, d.pending) for d in ps.domains] == [
        (("h11",), "b1/b1-r1/h11", 2, 2, 0),
        (("h12",), "b1/b1-r1/h12", 2, 0, 1),
    ]
    assert {d.values: d.assigned for d in ps.domains} == {d.values: d.count for d in scene.TRAIN.domains}
    assert ps.pods == PodCounts(total=4, bound=2, pending=1, gated=1)


def test_pending_workload_gets_the_engines_why_not() -> None:
    w = workload("ns/big")
    assert w.state == State.PENDING
    (ps,) = w.podsets
    why = ps.why_not
    assert why is not None and ps.domains == ()
    assert (why.level, why.domain, why.domain_fit, why.fit, why.needed, why.one_domain) == (
        RACK,
        ("b2", "b2-r3"),
        2,
        2,
        3,
        True,
    )
    assert why.exclusions.total_nodes == 4  # the counted hosts
    assert why.exclusions.reasons() == (("resource nvidia.com/gpu", 1), ("taint maint=soon:NoSchedule", 1))
    assert ps.message == why.message()


def test_workload_waiting_for_quota_shows_where_it_would_go() -> None:
    w = workload("ns/small")
    assert w.state == State.FITS
    assert [d.key for d in w.podsets[0].domains] == ["b1/b1-r1/h11"]


def test_finished_and_foreign_workloads_are_not_listed() -> None:
    assert [w.key for w in scene.model().workloads] == ["ns/train", "ns/big", "ns/small"]


@pytest.mark.parametrize(
    ("free", "alloc", "cls"),
    [(0, 8, "c0"), (1, 100, "c1"), (8, 8, "c9"), (7, 8, "c8"), (4, 8, "c5"), (5, 0, "cn"), (-3, 8, "c0")],
)
def test_colour_classes_never_round_away_the_extremes(free: int, alloc: int, cls: str) -> None:
    assert colour_class(Amount(free, alloc)) == cls


# --- the page -------------------------------------------------------------------------------------


def host_tiles(doc: Element) -> list[Element]:
    return [h for h in doc.find_all("i", "h") if "data-node" in h.attrs]  # the legend's samples have none


def page() -> str:
    return page_of(scene.model())


def page_of(model: MapModel) -> str:
    return render_map(model, title="map")


def test_one_tile_per_drawn_node_nested_as_the_topology_says() -> None:
    doc = parse_page(page())
    hosts = host_tiles(doc)
    assert sorted(h.attrs["data-node"] for h in hosts) == sorted(scene.DRAWN)
    for h in hosts:
        block, rack = scene.PLACES[h.attrs["data-node"]]
        assert host_key(h) == f"{block}/{rack}/{h.attrs['data-node']}"
    for d in doc.find_all(cls="d"):
        values = d.attrs["data-domain"].split("/")
        assert int(d.attrs["data-level"]) == len(values) - 1
        parent = next((a for a in d.ancestors() if "d" in a.classes), None)
        assert (parent is None) == (len(values) == 1)
        if parent is not None:
            assert parent.attrs["data-domain"] == "/".join(values[:-1])
    marks = {h.attrs["data-node"]: sorted(c for c in h.classes if c.startswith("m-")) for h in hosts}
    assert marks == {
        "h11": [],
        "h12": ["m-failed", "m-notready"],
        "h21": ["m-cordoned"],
        "h22": ["m-tainted"],
        "h31": [],
        "h32": [],
    }
    assert {h.attrs["data-node"] for h in hosts if "cn" in h.classes} == {"h12", "h21"}


def test_workload_sections_hold_the_domains_to_highlight_and_their_counts() -> None:
    doc = parse_page(page())
    assert [li.attrs["data-workload"] for li in doc.find("ul", id="wl-list").find_all("li")] == [
        "ns/train",
        "ns/big",
        "ns/small",
    ]
    section = doc.find("section", "wl-detail", data_workload="ns/train")
    assert "hidden" in section.attrs
    rows = section.find_all("tr", "dom")
    got = {
        r.attrs["data-domain"]: tuple(int(r.find("td", c).all_text()) for c in ("assigned", "bound", "pending"))
        for r in rows
    }
    assert got == {"b1/b1-r1/h11": (2, 2, 0), "b1/b1-r1/h12": (2, 0, 1)}
    tiles = {host_key(h) for h in host_tiles(doc)}
    assert set(got) <= tiles  # every highlighted domain is a tile of the map
    assert section.find(cls="pods-gated").all_text() == "1"


def test_why_not_numbers_have_stable_classes() -> None:
    doc = parse_page(page())
    block = doc.find("section", "wl-detail", data_workload="ns/big").find(cls="why-not")
    text = {
        c: block.find(cls=c).all_text()
        for c in ("wn-fit", "wn-needed", "wn-domain-fit", "wn-total-nodes", "wn-excluded")
    }
    assert text == {"wn-fit": "2", "wn-needed": "3", "wn-domain-fit": "2", "wn-total-nodes": "4", "wn-excluded": "2"}
    assert block.find(cls="wn-domain").attrs["data-domain"] == "b2/b2-r3"
    assert block.find(cls="wn-level").attrs["data-level-key"] == RACK
    reasons = {li.attrs["data-reason"]: li.find(cls="wn-count").all_text() for li in block.find_all("li", "wn-reason")}
    assert reasons == {"resource nvidia.com/gpu": "1", "taint maint=soon:NoSchedule": "1"}


def test_free_slot_table_and_blob() -> None:
    doc = parse_page(page())
    table = doc.find("table", "slots")
    assert table.attrs["data-shape"] == "nvidia.com/gpu=8"
    rows = {
        r.attrs["data-level-key"]: (r.find(cls="slot-fit").all_text(), r.find(cls="slot-free").all_text())
        for r in table.find_all("tr", "slot-level")
    }
    assert rows == {BLOCK: ("3", "1"), RACK: ("3", "2"), HOST: ("3", "3")}
    blob = json.loads(doc.find("script", id="map-data").all_text())
    fl = blob["flavors"][0]
    hosts = host_tiles(doc)
    assert len(fl["hosts"]) == len(hosts)
    h11 = next(i for i, h in enumerate(hosts) if h.attrs["data-node"] == "h11")
    row = fl["rows"][fl["hosts"][h11]]
    assert (fl["alloc"][row[0]][0], row[1], row[2]) == (8, 0, 4)  # 8 GPUs, fits no 8-GPU pod, 4 free
    assert fl["notes"][str(next(i for i, h in enumerate(hosts) if h.attrs["data-node"] == "h22"))] == [
        "taint maint=soon:NoSchedule"
    ]


def test_self_contained_with_optional_refresh() -> None:
    text = page()
    doc = parse_page(text)
    assert not doc.find_all("link") and all("src" not in s.attrs for s in doc.find_all("script"))
    assert "http://" not in text and "https://" not in text
    assert not doc.find_all("meta", http_equiv="refresh")
    assert "data-refresh" not in doc.find("body").attrs
    refreshed = parse_page(render_map(scene.model(), title="map", refresh_seconds=30))
    # The script reloads (keeping the selection's #wl=); the meta refresh is for pages without one.
    assert refreshed.find("body").attrs["data-refresh"] == "30"
    meta = refreshed.find("meta", http_equiv="refresh")
    assert meta.attrs["content"] == "30" and meta.parent is not None and meta.parent.tag == "noscript"


def test_a_resource_no_node_has_is_said_once() -> None:
    model = scene.model(resource="example.com/fpga")
    assert model.notes == ("No node of a governed flavor has example.com/fpga: every tile shows none.",)
    assert all(h.allocatable[0] == 0 for h in map_hosts(model.flavors[0]))
    assert "No node of a governed flavor has example.com/fpga" in page_of(model)


def test_a_reserved_and_a_held_domain_say_for_whom() -> None:
    """A reservation and a preemption's hold recorded on waiting workloads mark their domains,
    in the model and on the page (dashed, with who and since or until when)."""
    tas = scene.kueue()
    wls = scene.workloads()
    big = next(w for w in wls if w.name == "big")
    big.metadata.annotations[c.RESERVATION_ANNOTATION] = json.dumps(
        {"flavor": "gpu", "level": RACK, "values": ["b1", "b1-r2"], "since": "2026-01-01T00:00:00Z"}
    )
    small = next(w for w in wls if w.name == "small")
    small.metadata.annotations[c.PREEMPTION_HOLD_ANNOTATION] = json.dumps(
        {"flavor": "gpu", "level": RACK, "values": ["b2", "b2-r3"], "until": "2026-01-01T01:00:00Z", "victims": []}
    )
    live = scene.capacity(tas)
    model = build_map(live, wls, scene.pods(), WorkloadInputs(live, tas.check_flavors, now=scene.NOW))
    (fm,) = model.flavors
    kept = {c.key: c.kept_for for d in fm.domains for c in d.children if c.kept_for}
    assert kept == {
        "b1/b1-r2": "reserved for ns/big since 2026-01-01T00:00:00Z",
        "b2/b2-r3": "held for ns/small until 2026-01-01T01:00:00Z (preemption)",
    }
    page = parse_page(render_map(model, title="map"))
    marked = {e.attrs["data-domain"] for e in page.find_all("div", cls="kept")}
    assert marked == {"b1/b1-r2", "b2/b2-r3"}
    assert "reserved for ns/big" in " ".join(e.text for e in page.find_all("span", cls="keptfor"))


def test_a_ready_since_without_an_offset_is_read_as_utc() -> None:
    """Kubernetes writes ``Z``; a time without an offset is UTC too, never compared naive
    against the aware clock (a TypeError in the map)."""
    from datetime import UTC, datetime

    from kueue_tas.mapview.workloads import _Nodes
    from kueue_tas.topology.model import NodeInfo

    now = datetime(2026, 1, 1, 0, 1, 0, tzinfo=UTC)
    nodes = {
        name: NodeInfo(name, {}, {}, ready=False, ready_since=since)
        for name, since in (("z", "2026-01-01T00:00:00Z"), ("naive", "2026-01-01T00:00:30"), ("bad", "soon"))
    }
    view = _Nodes(nodes, now)
    assert view.not_ready_for("z") == 60.0
    assert view.not_ready_for("naive") == 30.0
    assert view.not_ready_for("bad") is None
