"""Hostile names on the topology map: every name and label value from the cluster is untrusted.

Node, label, taint, flavor, Topology, namespace, Workload and queue names that try to close
an attribute, a ``<script>`` element or open a comment must come back as plain text and
attribute values: the document keeps its structure (every end tag closes what it should),
only our two scripts exist, no element gains an attribute, and the data blob decodes to the
very strings."""

from __future__ import annotations

import json

import builders as mk
from map_scene import Element, parse_page
from vocab import BLOCK, GPU, HOST, RACK, REQUIRED

from kueue_tas.api.workload import Workload
from kueue_tas.capacity.feed import capacity_from_lists
from kueue_tas.capacity.rules import FlavorSpec
from kueue_tas.mapview.build import build_map
from kueue_tas.mapview.render import render_map
from kueue_tas.mapview.workloads import WorkloadInputs
from kueue_tas.topology.assignment import DomainAssignment, TopologyAssignment
from kueue_tas.topology.model import NodeInfo, Taint

NODE = '"><script>alert("node")</script>'
HOSTNAME = "h'</script><!--"
BLOCK_VALUE = "<img src=x onerror=alert(1)>"
RACK_VALUE = "</div></section></main>&amp;"
TAINT = '</script><script>alert("taint")</script>'
FLAVOR = "<b>flavor</b>"
TOPOLOGY = '" onmouseover="alert(1)'
NAMESPACE = "</script><!--ns"
NAME = "<svg onload=alert(1)>"
QUEUE = "'\"><iframe src=javascript:alert(1)>"
TITLE = "</title><script>alert('title')</script>"


def hostile_page() -> str:
    spec = FlavorSpec(FLAVOR, TOPOLOGY, (BLOCK, RACK, HOST), {})
    node = NodeInfo(
        NODE,
        {BLOCK: BLOCK_VALUE, RACK: RACK_VALUE, HOST: HOSTNAME},
        {GPU: 8, "cpu": 8000, "pods": 110},
        (Taint(TAINT, "", "NoSchedule"),),
    )
    required = {REQUIRED: RACK}
    admitted = mk.workload(
        NAME,
        1,
        required,
        namespace=NAMESPACE,
        uid="u1",
        queue=QUEUE,
        assignment=TopologyAssignment((HOST,), (DomainAssignment((HOSTNAME,), 1),)),
        admitted_flavor=FLAVOR,
        check_state="Ready",
    )
    pending = mk.workload(
        NAME + "2", 2, required, namespace=NAMESPACE, uid="u2", gpus=8, admitted_flavor=FLAVOR, check_state="Retry"
    )
    workloads = [Workload.model_validate(w) for w in (admitted, pending)]
    live = capacity_from_lists({FLAVOR: spec}, {"tas"}, [node], [], workloads)
    inputs = WorkloadInputs(live, {"tas": {FLAVOR}})
    return render_map(build_map(live, workloads, [], inputs), title=TITLE)


def test_document_structure_survives_and_only_our_scripts_exist() -> None:
    doc = parse_page(hostile_page())  # fails on any end tag that closes the wrong element
    scripts = doc.find_all("script")
    assert [s.attrs.get("id") for s in scripts] == ["map-data", None]
    assert not doc.find_all("img") and not doc.find_all("iframe")
    assert [e.attrs.get("aria-label") for e in doc.find_all("svg")] == ["free share scale"]  # the legend only
    assert all(b.all_text() != "flavor" for b in doc.find_all("b"))
    for el in doc.iter():
        assert not any(name.startswith("on") for name in el.attrs), (el.tag, el.attrs)
    assert doc.find("title").all_text() == TITLE


def test_names_come_back_as_text_and_attribute_values() -> None:
    doc = parse_page(hostile_page())
    (host,) = [h for h in doc.find_all("i", "h") if "data-node" in h.attrs]
    assert host.attrs["data-node"] == NODE and host.attrs["data-h"] == HOSTNAME
    rack = next(a for a in host.ancestors() if "d" in a.classes)
    assert rack.attrs["data-domain"] == f"{BLOCK_VALUE}/{RACK_VALUE}"
    section = doc.find("section", "flavor")
    assert (section.attrs["data-flavor"], section.attrs["data-topology"]) == (FLAVOR, TOPOLOGY)
    key = f"{NAMESPACE}/{NAME}"
    assert [li.attrs["data-workload"] for li in doc.find_all("li", "wl")] == [key, key + "2"]
    assert QUEUE in doc.find("li", "wl", data_workload=key).all_text()
    (row,) = doc.find("section", "wl-detail", data_workload=key).find_all("tr", "dom")
    assert row.attrs["data-domain"] == f"{BLOCK_VALUE}/{RACK_VALUE}/{HOSTNAME}"
    why = doc.find("section", "wl-detail", data_workload=key + "2").find(cls="why-not")
    reasons = [li.attrs["data-reason"] for li in why.find_all("li", "wn-reason")]
    assert f"taint {TAINT}:NoSchedule" in reasons


def test_blob_decodes_to_the_very_strings_and_hides_no_markup() -> None:
    text = hostile_page()
    start = text.index('<script type="application/json" id="map-data">')
    raw = text[start : text.index("</script>", start)]
    assert "<" not in raw[raw.index(">") + 1 :] and "&" not in raw  # nothing can end or open anything
    doc: Element = parse_page(text)
    blob = json.loads(doc.find("script", id="map-data").all_text())
    notes = blob["flavors"][0]["notes"]["0"]
    assert f"taint {TAINT}:NoSchedule" in notes
