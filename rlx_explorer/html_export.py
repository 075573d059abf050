"""Self-contained offline HTML: the viewer, the Graphviz WASM build and the bundle, inlined.

Everything is embedded as JSON inside ``<script type="application/json">`` with ``<``, ``>``
and ``&`` written as ``\\u00XX`` escapes, so no name in the IR (``</script>``, ``<img ...>``)
can end the script element or become markup; the bootstrap imports the viewer from a Blob URL
and hands it a tiny stand-in for the anywidget model (``get`` / ``set`` / ``on``).
"""

from __future__ import annotations

import html
import json
from pathlib import Path
from typing import Any

from rlx_explorer.assets import viewer_esm, viz_source

_BOOT = """
const read = (id) => JSON.parse(document.getElementById(id).textContent);
const values = { data: JSON.stringify(read("rlx-data")), viz_src: read("rlx-viz"), live: false,
                 policy: "" };
const handlers = {};
const model = {
  get: (k) => values[k],
  set: (k, v) => { values[k] = v; (handlers["change:" + k] || []).forEach((f) => f()); },
  on: (ev, f) => { (handlers[ev] ||= []).push(f); },
  off: (ev, f) => { handlers[ev] = (handlers[ev] || []).filter((g) => g !== f); },
  save_changes: () => {},
};
const url = URL.createObjectURL(new Blob([read("rlx-esm")], { type: "text/javascript" }));
const mod = await import(url);
window.rlxCleanup = mod.default.render({ model, el: document.getElementById("rlx-app") });
"""


def _embed(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=True, separators=(",", ":"))
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def html_document(bundle: dict[str, Any]) -> str:
    """The whole page as a string."""
    title = html.escape(f"RLX Explorer · {bundle.get('title', '')}")
    return (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        f"<title>{title}</title>"
        "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
        "</head><body style=\"margin:8px\">\n<div id=\"rlx-app\"></div>\n"
        f"<script type=\"application/json\" id=\"rlx-data\">{_embed(bundle)}</script>\n"
        f"<script type=\"application/json\" id=\"rlx-esm\">{_embed(viewer_esm())}</script>\n"
        f"<script type=\"application/json\" id=\"rlx-viz\">{_embed(viz_source())}</script>\n"
        f"<script type=\"module\">{_BOOT}</script>\n</body></html>\n")


def save_html(bundle: dict[str, Any], path: str | Path) -> Path:
    """Write the offline explorer for ``bundle`` to ``path``; returns the path."""
    p = Path(path)
    p.write_text(html_document(bundle), encoding="utf-8")
    return p
