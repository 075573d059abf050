"""The Jupyter host: an anywidget (JupyterLab, Notebook 7, VS Code, JupyterLite) around the
shared ESM viewer. Changing the policy in the viewer recompiles here and sends the new bundle."""

from __future__ import annotations

import json
from typing import Any

import anywidget
import traitlets

from rlx_explorer.assets import viewer_esm, viz_source


class ExplorerWidget(anywidget.AnyWidget):
    """``data`` is the bundle as JSON text; ``viz_src`` the Graphviz WASM module for layouts."""

    _esm = viewer_esm()
    data = traitlets.Unicode("{}").tag(sync=True)
    viz_src = traitlets.Unicode("").tag(sync=True)
    live = traitlets.Bool(True).tag(sync=True)  # the policy selector recompiles through Python
    policy = traitlets.Unicode("").tag(sync=True)

    def __init__(self, explorer: Any, **kwargs: Any):
        self._explorer = explorer
        bundle = explorer.bundle
        super().__init__(data=json.dumps(bundle), viz_src=viz_source(),
                         policy=bundle["dispatch"]["current"], **kwargs)

    @traitlets.observe("policy")
    def _on_policy(self, change: dict[str, Any]) -> None:
        if change["new"] and change["new"] != json.loads(self.data)["dispatch"]["current"]:
            self.data = json.dumps(self._explorer.recompile(change["new"], view="dispatch"))

    def save_html(self, path: str = "rlx-explorer.html") -> Any:
        return self._explorer.save_html(path)
