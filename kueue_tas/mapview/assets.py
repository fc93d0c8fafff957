"""The topology map page's own CSS and JavaScript, inlined into every page (no external fetch).

The script reads only the page: the data blob (``#map-data``: per flavor the distinct
allocatable rows, the distinct host rows (allocatable row, shape slots, free amounts) and per
host the index of its row, per domain its amounts) and the
server-rendered workload sections, whose ``tr.dom[data-domain]`` rows say what to highlight.
So selecting a workload needs no server, and a test can click through the page offline.
The page's Content-Security-Policy allows them by their sha256 (``JS_HASH``, ``CSS_HASH``).
"""

from __future__ import annotations

import base64
import hashlib
from typing import Final

# Free share of the colour resource: c0 nothing free ... c9 all free (RdYlGn, 10 classes).
PALETTE: Final = (
    "#a50026",
    "#d73027",
    "#f46d43",
    "#fdae61",
    "#fee08b",
    "#d9ef8b",
    "#a6d96a",
    "#66bd63",
    "#1a9850",
    "#006837",
)

CSS: Final = """
*{box-sizing:border-box}
body{font:13px/1.35 system-ui,sans-serif;margin:0;color:#222;background:#fafafa}
header{padding:8px 12px;background:#263238;color:#fff;display:flex;gap:16px;align-items:center;flex-wrap:wrap}
header h1{font-size:16px;margin:0}
#map-source{margin:0;font-size:11px;color:#cfd8dc}
#layout{display:flex;align-items:flex-start}
#side{width:300px;flex:none;padding:8px;position:sticky;top:0;max-height:100vh;overflow:auto}
#maps{flex:1;padding:8px;min-width:0}
#wl-list{list-style:none;margin:0;padding:0}
#wl-list li{padding:3px 6px;margin:2px 0;border-radius:3px;cursor:pointer;background:#fff;border:1px solid #ddd}
#wl-list li.sel{border-color:#1565c0;background:#e3f2fd}
.wl-state{float:right;font-size:11px;padding:0 4px;border-radius:3px;background:#eee}
.st-admitted .wl-state{background:#c8e6c9}.st-pending .wl-state,.st-notfit .wl-state{background:#ffcdd2}
.st-fits .wl-state,.st-planned .wl-state{background:#fff9c4}
.wl-queue{display:block;color:#666;font-size:11px}
.flavor{margin-bottom:16px}
.flavor h2{font-size:14px;margin:4px 0}
.tiles{display:flex;flex-wrap:wrap;gap:6px;align-items:flex-start}
.d{border:1px solid #b0bec5;background:#fff;border-radius:3px;padding:2px}
.d>.db{display:flex;flex-wrap:wrap;gap:3px;align-items:flex-start;padding:2px}
.dh{font-size:11px;white-space:nowrap;padding:0 3px;border-left:6px solid #ccc}
.dh .fit{color:#555}
.d.kept{border:2px dashed #6a1b9a}
.dh .keptfor{color:#6a1b9a;font-style:italic}
.h{display:inline-block;width:12px;height:12px;margin:0;border:1px solid rgba(0,0,0,.15);position:relative}
.h.cn{background:repeating-linear-gradient(45deg,#bbb 0 2px,#eee 2px 4px)}
.h.m-notready{outline:2px solid #000;outline-offset:-2px}
.h.m-cordoned{background-image:linear-gradient(45deg,transparent 45%,#000 45% 55%,transparent 55%)}
.h.m-tainted::before{content:"";position:absolute;right:0;top:0;border:3px solid #7b1fa2;border-left-color:transparent;
border-bottom-color:transparent}
.h.m-failed{outline:2px solid #ff1744;outline-offset:-1px}
.hl{box-shadow:0 0 0 2px #1565c0;z-index:1}
.d.hl{background:#e3f2fd}
.hl-in{border-color:#1565c0}
.best{box-shadow:0 0 0 2px #ff6f00}
.hl[data-count]::after{content:attr(data-count);position:absolute;left:0;top:-13px;font-size:10px;background:#1565c0;
color:#fff;padding:0 2px;border-radius:2px}
.d.hl[data-count]{position:relative}
.h.hl[data-count]::after{top:-1px;left:-1px;width:12px;line-height:12px;padding:0;font-size:9px;font-weight:bold;
text-align:center;background:none;color:#000;text-shadow:0 0 2px #fff,0 0 2px #fff}
#tip{position:fixed;pointer-events:none;background:#263238;color:#fff;padding:4px 6px;border-radius:3px;font-size:11px;
white-space:pre;z-index:10}
table{border-collapse:collapse;margin:4px 0}
td,th{border:1px solid #ddd;padding:1px 5px;text-align:right}
td.path,th.path{text-align:left}
.why-not{border-left:3px solid #d32f2f;padding:2px 6px;background:#fff3f3;margin:4px 0;overflow-wrap:anywhere}
.why-not dl{display:grid;grid-template-columns:auto 1fr;gap:0 8px;margin:2px 0}
.why-not dt{color:#666}.why-not dd{margin:0}
.message{color:#555;word-break:break-word}
.legend{display:flex;gap:8px;align-items:center;flex-wrap:wrap;font-size:11px}
.legend .h{vertical-align:middle}
.notes{color:#b71c1c}
""" + "".join(
    f".c{i}{{background:{colour}}}.dh.c{i}{{border-left-color:{colour};background:none}}"
    for i, colour in enumerate(PALETTE)
)

JS: Final = """
(function () {
"use strict";
var data = JSON.parse(document.getElementById("map-data").textContent);
var tiles = new Map(), hosts = [], doms = [];
function keep(k, el) {
  if (!tiles.has(k)) tiles.set(k, []);
  tiles.get(k).push(el);
}
function hostKey(el) {
  var up = el.closest(".d"), name = el.getAttribute("data-h") || el.getAttribute("data-node");
  return up ? up.getAttribute("data-domain") + "/" + name : name;
}
document.querySelectorAll(".flavor").forEach(function (fl, f) {
  var hostLevel = fl.getAttribute("data-hostname-level") === "true";
  fl.querySelectorAll(".h").forEach(function (el, i) {
    el._f = f; el._i = i; hosts.push(el);
    if (hostLevel) keep(hostKey(el), el);
  });
  fl.querySelectorAll(".d").forEach(function (el, i) {
    el._f = f; el._i = i; doms.push(el);
    keep(el.getAttribute("data-domain"), el);
  });
});
var res = data.resources, ri = res.indexOf(data.resource);
var BYTES = [["Ti", 1099511627776], ["Gi", 1073741824], ["Mi", 1048576], ["Ki", 1024]];
function bucket(free, alloc) {
  if (alloc <= 0) return "cn";
  if (free <= 0) return "c0";
  if (free >= alloc) return "c9";
  return "c" + Math.min(8, 1 + Math.floor(8 * free / alloc));
}
function amount(r, v) {
  if (v === null || v === undefined) return "-";
  if (r === "cpu") return String(v / 1000);
  if (r === "memory" || r === "ephemeral-storage" || r.indexOf("hugepages-") === 0) {
    for (var j = 0; j < BYTES.length; j++) {
      if (Math.abs(v) >= BYTES[j][1]) return Number((v / BYTES[j][1]).toPrecision(3)) + BYTES[j][0];
    }
  }
  return String(v);
}
function hostRow(el) { var fl = data.flavors[el._f]; return fl.rows[fl.hosts[el._i]]; }
function setColour(el, c) { el.className = el.className.replace(/\\bc(\\d|n)\\b/, c); }
function recolour() {
  hosts.forEach(function (el) {
    var row = hostRow(el), a = data.flavors[el._f].alloc[row[0]][ri];
    setColour(el, row.length > 2 ? bucket(row[2 + ri], a) : "cn");
  });
  doms.forEach(function (el) {
    var d = data.flavors[el._f].domains[el._i], h = el.querySelector(".dh");
    if (!h) return;
    setColour(h, bucket(d[2 * ri], d[2 * ri + 1]));
    var t = h.querySelector(".amt");
    if (t) t.textContent = amount(res[ri], d[2 * ri]) + "/" + amount(res[ri], d[2 * ri + 1]) + " " + res[ri];
  });
}
var picker = document.getElementById("resource");
if (picker) picker.addEventListener("change", function () { ri = res.indexOf(picker.value); recolour(); });
var tip = document.getElementById("tip");
function tipText(el) {
  var row = hostRow(el), fl = data.flavors[el._f], out = [el.getAttribute("data-node")];
  var up = el.closest(".d");
  if (up) out[0] += "  (" + up.getAttribute("data-domain") + ")";
  if (el.getAttribute("data-h")) out[0] += "  hostname " + el.getAttribute("data-h");
  var counted = row.length > 2;
  if (!counted) out.push("not counted (not Ready or cordoned)");
  res.forEach(function (r, j) {
    out.push(r + ": " + (counted ? amount(r, row[2 + j]) : "-") + " free of " + amount(r, fl.alloc[row[0]][j]));
  });
  if (row[1] !== null && row[1] !== undefined) out.push("fits " + row[1] + " pod(s) of " + data.shape);
  var notes = fl.notes[String(el._i)];
  if (notes) out = out.concat(notes);
  if (fl.shared) out.push("free counted for its whole " + fl.shared);
  return out.join("\\n");
}
document.addEventListener("mouseover", function (ev) {
  var el = ev.target;
  if (el.classList && el.classList.contains("h") && el._f !== undefined) {
    tip.textContent = tipText(el);
    tip.hidden = false;
  } else {
    tip.hidden = true;
  }
});
document.addEventListener("mousemove", function (ev) {
  if (tip.hidden) return;
  tip.style.left = (ev.clientX + 12) + "px";
  tip.style.top = (ev.clientY + 12) + "px";
});
function clear() {
  document.querySelectorAll(".hl,.hl-in,.best").forEach(function (el) {
    el.classList.remove("hl", "hl-in", "best");
    el.removeAttribute("data-count");
  });
  document.querySelectorAll(".wl-detail").forEach(function (s) { s.hidden = true; });
  document.querySelectorAll("#wl-list li").forEach(function (li) {
    li.classList.remove("sel");
    li.removeAttribute("aria-selected");
  });
}
function byKey(selector, key) {
  var found = null;
  document.querySelectorAll(selector).forEach(function (x) {
    if (x.getAttribute("data-workload") === key) found = x;
  });
  return found;
}
function highlight(el, count) {
  el.classList.add("hl");
  el.setAttribute("data-count", String(Number(el.getAttribute("data-count") || 0) + count));
  var up = el.parentElement && el.parentElement.closest(".d");
  while (up) {
    up.classList.add("hl-in");
    up = up.parentElement && up.parentElement.closest(".d");
  }
}
function select(key) {
  clear();
  var li = byKey("#wl-list li", key), sec = byKey(".wl-detail", key);
  if (!li || !sec) return;
  li.classList.add("sel");
  li.setAttribute("aria-selected", "true");
  sec.hidden = false;
  sec.querySelectorAll("tr.dom[data-domain]").forEach(function (tr) {
    var n = Number(tr.querySelector(".assigned").textContent);
    (tiles.get(tr.getAttribute("data-domain")) || []).forEach(function (el) { highlight(el, n); });
  });
  sec.querySelectorAll(".wn-domain[data-domain]").forEach(function (dd) {
    (tiles.get(dd.getAttribute("data-domain")) || []).forEach(function (el) { el.classList.add("best"); });
  });
  if (history.replaceState) history.replaceState(null, "", "#wl=" + encodeURIComponent(key));
}
var list = document.getElementById("wl-list");
list.addEventListener("click", function (ev) {
  var li = ev.target.closest("li[data-workload]");
  if (li) select(li.getAttribute("data-workload"));
});
list.addEventListener("keydown", function (ev) {
  var li = ev.target.closest("li[data-workload]");
  if (li && (ev.key === "Enter" || ev.key === " ")) { ev.preventDefault(); select(li.getAttribute("data-workload")); }
});
if (location.hash.indexOf("#wl=") === 0) select(decodeURIComponent(location.hash.slice(4)));
var refresh = Number(document.body.getAttribute("data-refresh") || 0);
if (refresh > 0) setTimeout(function () { location.reload(); }, refresh * 1000);
window.kueueTasMap = {select: select, clear: clear};
})();
"""


def csp_hash(inline: str) -> str:
    """The Content-Security-Policy source that allows exactly this inline element's content."""
    return "'sha256-" + base64.b64encode(hashlib.sha256(inline.encode()).digest()).decode() + "'"


# Both are constants, so a policy naming their hashes lets them run and nothing else inline: no
# 'unsafe-inline', whatever a cluster value smuggled past the escaping would be inert.
JS_HASH: Final = csp_hash(JS)
CSS_HASH: Final = csp_hash(CSS)
