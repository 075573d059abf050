"""The explorer as ``text/html``: what a notebook output shows where neither the widget nor
the rlx-explorer JupyterLab extension renders it (GitHub, nbviewer, VS Code without the
widget state, JupyterLab on an untrusted notebook).

Without scripts it is a static summary: the title, each target compiled or not, every
legalization failure (code, nodes, fix) and the server-side HIR layout as SVG. Where the page
runs scripts, a module script replaces the summary with the full viewer, booted from the
gzipped bundle and the viewer ESM the output carries (pre-laid-out graphs; expanding a block
needs Graphviz, which only the widget, the extension and the HTML export carry).
"""

from __future__ import annotations

import html
import json
import re
import uuid
from typing import Any

from rlx_explorer.assets import viewer_esm
from rlx_explorer.html_export import embed, packed

# an SVG is inlined only when it has nothing a browser could run (Graphviz escapes labels;
# this is the second line of defence, the viewer's sanitizer being unavailable here)
_ACTIVE = re.compile(r"<script|<foreignObject|\son[a-z]+\s*=|javascript:", re.I)

_BOOT = """
const el = document.getElementById("%(id)s");
const read = (k) => JSON.parse(document.getElementById("%(id)s-" + k).textContent);
const bytes = Uint8Array.from(atob(read("data")), (c) => c.charCodeAt(0));
const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"));
const data = await new Response(stream).text();
const url = URL.createObjectURL(new Blob([read("esm")], { type: "text/javascript" }));
const mod = await import(url);
const values = { data, viz_src: globalThis.rlxVizSource || "", live: false, policy: "" };
const model = { get: (k) => values[k], set: (k, v) => { values[k] = v; }, on: () => {},
                off: () => {}, save_changes: () => {} };
const app = document.createElement("div");
el.replaceChildren(app);
mod.default.render({ model, el: app });
"""


def _summary(bundle: dict[str, Any]) -> str:
    esc = html.escape
    chips = " ".join(
        f"<span style='color:{'#15803d' if t.get('compiled') else '#b91c1c'}' "
        f"title='{esc(str(t.get('note', '')))}'>{esc(str(t.get('name')))}"
        f"{'' if t.get('compiled') else ' ✗'}</span>" for t in bundle.get("targets", ()))
    rows = []
    for f in bundle.get("failures", ()):
        for g in f.get("groups", ()) or ():
            rows.append(f"<li><b>{esc(str(f.get('target')))}</b> {esc(str(g.get('code', '')))}: "
                        f"{esc(str(g.get('title', '')))} — fix: {esc(str(g.get('fix_line', '')))}</li>")
        if not f.get("groups"):
            rows.append(f"<li><b>{esc(str(f.get('target')))}</b> "
                        f"{esc(', '.join(map(str, f.get('codes', ()))))}: "
                        f"{esc(str(f.get('message', ''))[:300])}</li>")
    svg = (bundle.get("svg", {}).get("hir") or {}).get("svg", "")
    svg = "" if not svg or _ACTIVE.search(svg) else re.sub(r"<\?xml[^>]*>|<!DOCTYPE[^>]*>", "",
                                                            svg)
    return (f"<div style='font:13px sans-serif'><b>RLX Explorer · {esc(str(bundle.get('title')))}"
            f"</b> {chips}</div>"
            + (f"<ul style='font:12px monospace'>{''.join(rows)}</ul>" if rows else "")
            + (f"<div style='max-width:100%;overflow:auto'>{svg}</div>" if svg else "")
            + "<div style='font:11px sans-serif;color:#64748b'>static summary: run the notebook "
              "or install the rlx-explorer JupyterLab extension for the interactive explorer"
              "</div>")


def fallback_html(bundle: dict[str, Any]) -> str:
    """A self-contained ``text/html`` output for ``bundle`` (ids unique per call)."""
    oid = f"rlx-{uuid.uuid4().hex[:12]}"
    return (f"<div id='{oid}' class='rlx-fallback'>{_summary(bundle)}</div>\n"
            f"<script type='application/json' id='{oid}-data'>"
            f"{embed(packed(json.dumps(bundle)))}</script>\n"
            f"<script type='application/json' id='{oid}-esm'>{embed(viewer_esm())}</script>\n"
            f"<script type='module'>{_BOOT % {'id': oid}}</script>\n")
