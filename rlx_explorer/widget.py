"""The Jupyter host: an anywidget (JupyterLab, Notebook 7, VS Code, JupyterLite) around the
shared ESM viewer. Changing the policy in the viewer recompiles here and sends the new bundle.

The 1.1 MB Graphviz WASM build is not part of any widget's state: the first widget on a page
asks the kernel for it once (a custom comm message) and every later widget of the page reuses
it (``globalThis.rlxVizSource``), so a notebook of ten explorers saves and sends it zero times
instead of ten. Without a kernel (a saved notebook reopened) the server-side layouts still show.
"""

from __future__ import annotations

import json
from typing import Any

import anywidget
import traitlets

from rlx_explorer.assets import viewer_esm, viz_source
from rlx_explorer.fallback import fallback_html
from rlx_explorer.mime import plain_text

_EXPORT = "export default { render };"
# the viewer's render, behind one wait for the page's Graphviz build (at most VIZ_WAIT_MS)
_WRAP = """
const viewer = { render };
const VIZ_WAIT_MS = 4000;
function pageViz(model) {
  if (globalThis.rlxVizSource) return Promise.resolve(globalThis.rlxVizSource);
  if (!globalThis.rlxVizPromise) {
    globalThis.rlxVizPromise = new Promise((resolve) => {
      const done = (src) => { if (src) globalThis.rlxVizSource = src; resolve(src || ""); };
      const onMsg = (msg) => {
        if (msg && msg.type === "viz") { model.off("msg:custom", onMsg); done(msg.src); }
      };
      model.on("msg:custom", onMsg);
      try {
        model.send({ type: "viz" });
      } catch (err) {  // no kernel behind a widget restored from a saved notebook
        globalThis.rlxVizPromise = null;
        done("");
        return;
      }
      setTimeout(() => { globalThis.rlxVizPromise = null; done(""); }, VIZ_WAIT_MS);
    });
  }
  return globalThis.rlxVizPromise;
}
async function renderWidget({ model, el }) {
  const viz = await pageViz(model);
  const proxy = { get: (k) => (k === "viz_src" ? viz : model.get(k)),
                  set: (k, v) => model.set(k, v), on: (e, f) => model.on(e, f),
                  off: (e, f) => model.off(e, f), save_changes: () => model.save_changes() };
  return viewer.render({ model: proxy, el });
}
export default { render: renderWidget };
"""


def widget_esm() -> str:
    """The viewer ESM with its entry point wrapped by the page-wide Graphviz fetch."""
    esm = viewer_esm()
    if _EXPORT not in esm:
        raise RuntimeError("static/parts/90_main.js must end with " + _EXPORT)
    return esm.replace(_EXPORT, _WRAP)


class ExplorerWidget(anywidget.AnyWidget):
    """``data`` is the bundle as JSON text; ``viz_src`` stays empty (see the module docstring)."""

    _esm = widget_esm()
    data = traitlets.Unicode("{}").tag(sync=True)
    viz_src = traitlets.Unicode("").tag(sync=True)
    live = traitlets.Bool(True).tag(sync=True)  # the policy selector recompiles through Python
    policy = traitlets.Unicode("").tag(sync=True)

    def __init__(self, explorer: Any, **kwargs: Any):
        self._explorer = explorer
        bundle = explorer.bundle
        super().__init__(data=json.dumps(bundle), policy=bundle["dispatch"]["current"], **kwargs)
        self.on_msg(self._on_custom)

    def _on_custom(self, _widget: Any, content: Any, _buffers: Any) -> None:
        if isinstance(content, dict) and content.get("type") == "viz":
            self.send({"type": "viz", "src": viz_source()})

    @traitlets.observe("policy")
    def _on_policy(self, change: dict[str, Any]) -> None:
        if change["new"] and change["new"] != json.loads(self.data)["dispatch"]["current"]:
            self.data = json.dumps(self._explorer.recompile(change["new"], view="dispatch"))

    def _repr_mimebundle_(self, **kwargs: Any) -> Any:
        """The widget, plus a self-contained ``text/html`` fallback and a readable text line
        for frontends without a widget manager (GitHub, nbviewer, a reopened notebook)."""
        shown = super()._repr_mimebundle_(**kwargs)
        if shown is None:
            return None
        data, meta = shown
        bundle = self._explorer.bundle
        return {**data, "text/html": fallback_html(bundle), "text/plain": plain_text(bundle)}, meta

    def save_html(self, path: str = "rlx-explorer.html") -> Any:
        return self._explorer.save_html(path)
