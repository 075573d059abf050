"""Self-contained offline HTML: the viewer, the Graphviz WASM build and the bundle, inlined.

Everything is embedded inside ``<script type="application/json">``: the viewer as JSON with
``<``, ``>`` and ``&`` written as ``\\u00XX`` escapes, the bundle and the Graphviz build gzipped
and base64-encoded (a third of their JSON size; the browser's ``DecompressionStream`` inflates
them), so no name in the IR (``</script>``, ``<img ...>``) can end the script element or become
markup. The bootstrap imports the viewer from a Blob URL and hands it a tiny stand-in for the
anywidget model (``get`` / ``set`` / ``on``).
"""

from __future__ import annotations

import base64
import gzip
import html
import json
from functools import lru_cache
from pathlib import Path
from typing import Any

from rlx_explorer.assets import viewer_esm, viz_source

_BOOT = """
const read = (id) => JSON.parse(document.getElementById(id).textContent);
const gunzip = async (id) => {
  const bytes = Uint8Array.from(atob(read(id)), (c) => c.charCodeAt(0));
  const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"));
  return await new Response(stream).text();
};
const [data, viz] = await Promise.all([gunzip("rlx-data"), gunzip("rlx-viz")]);
const values = { data, viz_src: viz, live: false, policy: "" };
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


def embed(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=True, separators=(",", ":"))
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def packed(text: str) -> str:
    """``text`` gzipped and base64-encoded: only ``[A-Za-z0-9+/=]``, safe anywhere in HTML."""
    return base64.b64encode(gzip.compress(text.encode("utf-8"), 9, mtime=0)).decode("ascii")


@lru_cache(maxsize=1)
def packed_viz() -> str:
    return packed(viz_source())


def html_document(bundle: dict[str, Any]) -> str:
    """The whole page as a string."""
    title = html.escape(f"RLX Explorer · {bundle.get('title', '')}")
    return (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        f"<title>{title}</title>"
        "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
        "</head><body style=\"margin:8px\">\n<div id=\"rlx-app\"></div>\n"
        f"<script type=\"application/json\" id=\"rlx-data\">{embed(packed(json.dumps(bundle)))}"
        "</script>\n"
        f"<script type=\"application/json\" id=\"rlx-esm\">{embed(viewer_esm())}</script>\n"
        f"<script type=\"application/json\" id=\"rlx-viz\">{embed(packed_viz())}</script>\n"
        f"<script type=\"module\">{_BOOT}</script>\n</body></html>\n")


def save_html(bundle: dict[str, Any], path: str | Path) -> Path:
    """Write the offline explorer for ``bundle`` to ``path``; returns the path."""
    p = Path(path)
    p.write_text(html_document(bundle), encoding="utf-8")
    return p
