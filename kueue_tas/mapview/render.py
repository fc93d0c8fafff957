"""The topology map as one self-contained HTML document: inline CSS, a little inline script of
our own (``assets``), no external fetch.

Every name and label value comes from the cluster and is untrusted: text and attribute values
go through ``html.escape`` (attributes always double-quoted), and the JSON blob read by the
script sits in a ``<script type="application/json">`` with ``<``, ``>`` and ``&`` escaped as
``\\u003c`` and so on, so no value can close the element or open a comment.

Stable DOM (tests and the browser tests rely on it): a host tile is ``.h[data-node]``; a
domain tile is ``.d[data-domain][data-level]`` (``data-domain`` = its values joined by '/',
``data-level`` its level's index). When the lowest level is the hostname
(``section.flavor[data-hostname-level="true"]``), the host tiles are that level's domains:
a host's domain is its parent tile's ``data-domain`` + '/' + its hostname, which is
``data-h`` when the node's hostname label differs from its name, else ``data-node`` (the
script keys tiles the same way). Writing that path on every host would cost ~100 bytes per
host at real name lengths, past the page budget at 10,000 nodes. Workload entries are
``#wl-list li[data-workload="ns/name"]``, each with a hidden ``section.wl-detail[data-workload]``
(``panels``). The hover details are in the blob, per host by its position in the flavor.
"""

from __future__ import annotations

import json
from html import escape
from typing import Any

from kueue_tas.mapview.assets import CSS, JS
from kueue_tas.mapview.model import DomainTile, FlavorMap, HostTile, MapModel, map_hosts
from kueue_tas.mapview.panels import (
    amount_text,
    colour_class,
    legend,
    slots_table,
    workload_list,
    workload_panel,
)


def render_map(model: MapModel, *, title: str, refresh_seconds: int | None = None, source: str | None = None) -> str:
    """The page. ``refresh_seconds``: reload that often (the selection survives in the URL);
    ``source``: where the numbers come from and when, shown under the title."""
    out: list[str] = [
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
    ]
    body = "<body>"
    if refresh_seconds is not None and refresh_seconds > 0:
        # The script reloads the page's current URL, the selection's #wl= included; a meta
        # refresh would go back to the URL the page was loaded from. Without a script, it does.
        out.append(f'<noscript><meta http-equiv="refresh" content="{int(refresh_seconds)}"></noscript>')
        body = f'<body data-refresh="{int(refresh_seconds)}">'
    out.append(f"<title>{escape(title)}</title><style>{CSS}</style></head>{body}")
    origin = f'<p id="map-source">{escape(source)}</p>' if source else ""
    out.append(f"<header><h1>{escape(title)}</h1>{origin}{_resource_picker(model)}{legend(model)}</header>")
    # The selected workload's section sits above the list, so a long list never hides it.
    out.append('<div id="layout"><aside id="side"><div id="wl-detail-panel">')
    out.extend(workload_panel(w, model) for w in model.workloads)
    out.append("</div><h2>Workloads</h2>")
    out.append(workload_list(model.workloads))
    out.append('</aside><main id="maps">')
    for note in model.notes:
        out.append(f'<p class="notes">{escape(note)}</p>')
    if not model.flavors:
        out.append('<p class="notes">No flavor of ours: no ClusterQueue lists an AdmissionCheck of kueue-tas.</p>')
    blob: list[dict[str, Any]] = []
    for fm in model.flavors:
        data = _FlavorData(model)
        out.append(_flavor_section(fm, model, data))
        blob.append(data.as_json(fm))
    out.append('</main></div><div id="tip" hidden></div>')
    doc = {"resource": model.resource, "resources": list(model.resources), "shape": model.shape, "flavors": blob}
    out.append(f'<script type="application/json" id="map-data">{script_json(doc)}</script>')
    out.append(f"<script>{JS}</script></body></html>\n")
    return "".join(out)


def script_json(value: object) -> str:
    """JSON safe inside a ``<script>`` element: nothing in it can end the element, open a
    comment or an entity (``</script>``, ``<!--``, ``&``)."""
    text = json.dumps(value, separators=(",", ":"), ensure_ascii=True)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def _resource_picker(model: MapModel) -> str:
    options = "".join(
        f'<option value="{escape(r)}"{" selected" if r == model.resource else ""}>{escape(r)}</option>'
        for r in model.resources
    )
    return f'<label>colour by <select id="resource">{options}</select></label>'


class _FlavorData:
    """The blob of one flavor, filled in document order while its tiles are written."""

    def __init__(self, model: MapModel) -> None:
        self.resources = model.resources
        self.alloc_rows: dict[tuple[int, ...], int] = {}
        self.rows: dict[tuple[int | None, ...], int] = {}
        self.hosts: list[int] = []
        self.notes: dict[str, list[str]] = {}
        self.domains: list[list[int]] = []

    def host(self, h: HostTile) -> None:
        # Most hosts of a big cluster look alike: each distinct row is written once.
        alloc = self.alloc_rows.setdefault(h.allocatable, len(self.alloc_rows))
        row = (alloc, h.slots, *h.free) if h.counted else (alloc, h.slots)
        if h.notes:
            self.notes[str(len(self.hosts))] = list(h.notes)
        self.hosts.append(self.rows.setdefault(row, len(self.rows)))

    def domain(self, d: DomainTile) -> None:
        row: list[int] = []
        for free, alloc in zip(d.free, d.allocatable, strict=True):
            row.extend((free, alloc))
        self.domains.append(row)

    def as_json(self, fm: FlavorMap) -> dict[str, Any]:
        shared = None
        if not fm.hostname_level and any(h.shared_leaf for h in map_hosts(fm)):
            shared = fm.level_names[-1]
        return {
            "alloc": [list(a) for a in self.alloc_rows],
            "rows": [list(r) for r in self.rows],
            "hosts": self.hosts,
            "notes": self.notes,
            "domains": self.domains,
            "shared": shared,
        }


def _flavor_section(fm: FlavorMap, model: MapModel, data: _FlavorData) -> str:
    nodes = len(map_hosts(fm))
    head = (
        f'<section class="flavor" data-flavor="{escape(fm.flavor)}" data-topology="{escape(fm.topology)}"'
        f' data-hostname-level="{str(fm.hostname_level).lower()}">'
        f"<h2>Flavor {escape(fm.flavor)} &middot; Topology {escape(fm.topology)}</h2>"
        f'<p class="levels">{" &gt; ".join(escape(n) for n in fm.level_names)}: {nodes} node(s) drawn'
    )
    if fm.unplaced_nodes:
        head += f"; {fm.unplaced_nodes} node(s) of the flavor lack a level label and are not drawn"
    parts = [head + "</p>", slots_table(fm, model), '<div class="tiles">']
    colour = model.resource
    for d in fm.domains:
        _domain(d, fm, colour, data, parts)
    for h in fm.hosts:
        parts.append(_host(h, fm, colour, data))
    parts.append("</div></section>")
    return "".join(parts)


def _domain(d: DomainTile, fm: FlavorMap, colour: str, data: _FlavorData, out: list[str]) -> None:
    data.domain(d)
    amount = d.amount(0)
    name = f"{fm.level_names[d.level]} {d.values[-1]}"
    fit = f' <span class="fit">fits {d.slots}</span>' if d.slots is not None else ""
    free = " free" if d.free_for_shape else ""
    kept = " kept" if d.kept_for else ""
    kept_for = f' <span class="keptfor">{escape(d.kept_for)}</span>' if d.kept_for else ""
    out.append(
        f'<div class="d l{d.level}{free}{kept}" data-domain="{escape(d.key)}" data-level="{d.level}">'
        f'<div class="dh {colour_class(amount)}"><b>{escape(name)}</b> '
        f'<span class="amt">{amount_text(colour, amount.free)}/{amount_text(colour, amount.allocatable)} '
        f"{escape(colour)}</span>{fit}{kept_for}</div>"
        '<div class="db">'
    )
    for child in d.children:
        _domain(child, fm, colour, data, out)
    for h in d.hosts:
        out.append(_host(h, fm, colour, data))
    out.append("</div></div>")


def _host(h: HostTile, fm: FlavorMap, colour: str, data: _FlavorData) -> str:
    data.host(h)
    cls = colour_class(h.amount(0)) if h.counted else "cn"
    marks = "".join(f" m-{m.value}" for m in h.marks)
    attrs = f' data-node="{escape(h.node)}"'
    if fm.hostname_level and h.values[-1] != h.node:
        attrs += f' data-h="{escape(h.values[-1])}"'
    return f'<i class="h {cls}{marks}"{attrs}></i>'
