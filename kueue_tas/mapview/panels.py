"""The parts of the topology map page around the tiles: the legend, the free-slot table, the
workload list and each workload's detail section (its domains with assigned / bound / pending
pods, and for a PodSet that does not fit, the why-not). All values escaped (see ``render``).

Stable classes: ``tr.dom[data-domain]`` with ``td.assigned``, ``td.bound``, ``td.pending``;
``.why-not[data-podset]`` with ``.wn-level``, ``.wn-domain[data-domain]``, ``.wn-domain-fit``,
``.wn-fit``, ``.wn-needed``, ``.wn-unit``, ``.wn-total-nodes``, ``.wn-excluded`` and one
``li.wn-reason[data-reason]`` per exclusion reason with its ``.wn-count``; the free-slot
table's ``tr.slot-level[data-level]`` with ``.slot-fit``, ``.slot-free``, ``.slot-domains``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from html import escape

from kueue_tas.mapview.assets import PALETTE
from kueue_tas.mapview.model import Amount, FlavorMap, MapModel, Mark, PodSetView, State, WorkloadView, domain_key
from kueue_tas.topology.engine import WhyNot

_BYTES = (("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10))
STATE_TEXT = {
    State.ADMITTED: "admitted",
    State.PENDING: "pending",
    State.FITS: "would fit now",
    State.PLANNED: "fits",
    State.NOT_FIT: "does not fit",
}
MARK_TEXT = {
    Mark.NOT_READY: "not Ready",
    Mark.CORDONED: "cordoned",
    Mark.TAINTED: "tainted NoSchedule/NoExecute",
    Mark.FAILED: "failed under an admitted workload",
}


def amount_text(resource: str, value: int) -> str:
    """cpu in cores, byte amounts with a binary suffix, everything else as is."""
    if resource == "cpu":
        return f"{value / 1000:g}" if value % 1000 else str(value // 1000)
    if resource in ("memory", "ephemeral-storage") or resource.startswith("hugepages-"):
        for unit, size in _BYTES:
            if abs(value) >= size:
                return f"{value / size:.3g}{unit}"
    return str(value)


def colour_class(amount: Amount) -> str:
    """``c0`` (nothing free) to ``c9`` (all free); ``cn`` without any of the resource. Some
    free never rounds to c0, and only all free is c9 (as the ``capacity`` bars)."""
    if amount.allocatable <= 0:
        return "cn"
    if amount.free <= 0:
        return "c0"
    if amount.free >= amount.allocatable:
        return f"c{len(PALETTE) - 1}"
    return f"c{min(len(PALETTE) - 2, 1 + (len(PALETTE) - 2) * amount.free // amount.allocatable)}"


def legend(model: MapModel) -> str:
    width = 16
    rects = "".join(
        f'<rect x="{i * width}" y="0" width="{width}" height="12" fill="{c}"/>' for i, c in enumerate(PALETTE)
    )
    svg = f'<svg width="{width * len(PALETTE)}" height="12" role="img" aria-label="free share scale">{rects}</svg>'
    marks = "".join(f'<span><i class="h c9 m-{m.value}"></i> {MARK_TEXT[m]}</span>' for m in Mark)
    return (
        f'<div class="legend" id="legend"><span>free {escape(model.resource)}: none</span>{svg}<span>all</span>'
        f'<span><i class="h cn"></i> not counted</span>{marks}</div>'
    )


def slots_table(fm: FlavorMap, model: MapModel) -> str:
    if not fm.slots or model.shape is None:
        return ""
    rows = "".join(
        f'<tr class="slot-level" data-level="{i}" data-level-key="{escape(s.level)}">'
        f'<th class="path">{escape(fm.level_names[i])}</th><td class="slot-fit">{s.fit}</td>'
        f'<td class="slot-free">{s.free_domains}</td><td class="slot-domains">{s.domains}</td></tr>'
        for i, s in enumerate(fm.slots)
    )
    return (
        f'<table class="slots" data-shape="{escape(model.shape)}"><caption>More pods of '
        f'{escape(model.shape)} that fit now</caption><tr><th class="path">level</th><th>pods that fit</th>'
        f"<th>wholly free domains</th><th>domains</th></tr>{rows}</table>"
    )


def workload_list(workloads: Iterable[WorkloadView]) -> str:
    items = []
    for w in workloads:
        queue = w.queue or "-"
        if w.cluster_queue:
            queue += f" ({w.cluster_queue})"
        kind = "" if w.kind == "Workload" else f"{w.kind} "
        items.append(
            f'<li class="wl st-{w.state.value}" data-workload="{escape(w.key)}" tabindex="0">'
            f'<span class="wl-state">{STATE_TEXT[w.state]}</span>'
            f'<span class="wl-name">{escape(kind + w.key)}</span>'
            f'<span class="wl-queue">queue {escape(queue)}</span></li>'
        )
    if not items:
        return '<ul id="wl-list"></ul><p>No workload holds or waits for a placement.</p>'
    return f'<ul id="wl-list">{"".join(items)}</ul>'


def workload_panel(w: WorkloadView, model: MapModel) -> str:
    names = {fm.flavor: dict(zip(fm.levels, fm.level_names, strict=True)) for fm in model.flavors}
    meta = f"{escape(w.kind)} {escape(w.key)}, {STATE_TEXT[w.state]}"
    if w.queue or w.cluster_queue:
        meta += f", queue {escape(w.queue or '-')}"
        if w.cluster_queue:
            meta += f" (ClusterQueue {escape(w.cluster_queue)})"
    parts = [f'<section class="wl-detail" data-workload="{escape(w.key)}" data-state="{w.state.value}" hidden>']
    parts.append(f'<h3>{escape(w.key)}</h3><p class="wl-meta">{meta}</p>')
    for ps in w.podsets:
        parts.append(_podset(ps, w.state, names.get(ps.flavor or "", {})))
    parts.append("</section>")
    return "".join(parts)


def _podset(ps: PodSetView, state: State, called: Mapping[str, str]) -> str:
    head = [f"{ps.count} pod(s)"]
    if ps.flavor:
        head.append(f"flavor {escape(ps.flavor)}")
    if ps.topology:
        head.append(f"topology {escape(ps.topology)}")
    out = [f'<div class="podset" data-podset="{escape(ps.name)}"><h4>PodSet {escape(ps.name)}: {", ".join(head)}</h4>']
    if ps.pods is not None:
        p = ps.pods
        out.append(
            f'<p class="pods">pods: <span class="pods-total">{p.total}</span> (<span class="pods-bound">{p.bound}'
            f'</span> bound, <span class="pods-pending">{p.pending}</span> pending, <span class="pods-gated">'
            f"{p.gated}</span> gated)</p>"
        )
    if ps.domains:
        admitted = state == State.ADMITTED
        title = "assigned" if admitted else "would go"
        rows = []
        for d in ps.domains:
            key = f' data-domain="{escape(d.key)}"' if d.key is not None else ""
            shown = " / ".join(escape(v) for v in (d.path if d.path is not None else d.values))
            bound, pending = (str(d.bound), str(d.pending)) if admitted else ("-", "-")
            rows.append(
                f'<tr class="dom"{key}><td class="path">{shown}</td><td class="assigned">{d.assigned}</td>'
                f'<td class="bound">{bound}</td><td class="pending">{pending}</td></tr>'
            )
        out.append(
            f'<table class="domains"><tr><th class="path">domain</th><th>{title}</th><th>bound</th>'
            f"<th>pending</th></tr>{''.join(rows)}</table>"
        )
    if ps.why_not is not None:
        out.append(why_not_block(ps.name, ps.why_not, called))
    if ps.message:
        out.append(f'<p class="message">{escape(ps.message)}</p>')
    out.append("</div>")
    return "".join(out)


def why_not_block(podset: str, w: WhyNot, called: Mapping[str, str]) -> str:
    """The numbers of a PodSet that does not fit; the same as ``describe``'s "why not" lines.
    ``called``: level label -> the name the page gives it."""
    level = called.get(w.level, w.level)
    unit = f"{w.unit}(s)"
    where = (
        f"in one {escape(level)}: the best, "
        if w.one_domain
        else f"over every {escape(level)} together; the best single one, "
    )
    domain = " / ".join(escape(v) for v in w.domain) or "none"
    reasons = "".join(
        f'<li class="wn-reason" data-reason="{escape(reason)}"><span class="wn-what">{escape(reason)}</span>: '
        f'<span class="wn-count">{n}</span></li>'
        for reason, n in w.exclusions.reasons()
    )
    return (
        f'<div class="why-not" data-podset="{escape(podset)}" data-one-domain="{str(w.one_domain).lower()}">'
        f'<p><b>Why not:</b> <span class="wn-fit">{w.fit}</span> of <span class="wn-needed">{w.needed}</span> '
        f'<span class="wn-unit">{unit}</span> fit {where}'
        f'<span class="wn-domain" data-domain="{escape(domain_key(w.domain))}">{domain}</span>, holds '
        f'<span class="wn-domain-fit">{w.domain_fit}</span>.</p>'
        f'<dl><dt>level</dt><dd class="wn-level" data-level-key="{escape(w.level)}">{escape(level)}</dd>'
        f'<dt>nodes</dt><dd><span class="wn-total-nodes">{w.exclusions.total_nodes}</span> in the topology, '
        f'<span class="wn-excluded">{w.exclusions.excluded}</span> excluded</dd></dl>'
        f'<ul class="wn-reasons">{reasons}</ul></div>'
    )
