"""The Panel host: ``AnyWidgetComponent`` running the same ESM as the Jupyter widget, and the
app ``rlx explore FILE`` serves on 127.0.0.1."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import panel as pn
import param
from panel.custom import AnyWidgetComponent

from rlx_explorer.assets import viewer_esm, viz_source


class ExplorerComponent(AnyWidgetComponent):
    """Parameters mirror the widget's traits one for one (the ESM reads the same names)."""

    _esm = viewer_esm()
    data = param.String(default="{}")
    viz_src = param.String(default="")
    live = param.Boolean(default=True)
    policy = param.String(default="")

    def __init__(self, explorer: Any = None, **params: Any):
        self._explorer = explorer
        if explorer is not None:
            bundle = explorer.bundle
            params.setdefault("data", json.dumps(bundle))
            params.setdefault("policy", bundle["dispatch"]["current"])
        params.setdefault("viz_src", viz_source())
        super().__init__(**params)

    @param.depends("policy", watch=True)
    def _on_policy(self) -> None:
        if self._explorer is None or not self.policy:
            return
        if self.policy != json.loads(self.data)["dispatch"]["current"]:
            self.data = json.dumps(self._explorer.recompile(self.policy, view="dispatch"))


def explorer_component(explorer: Any) -> ExplorerComponent:
    return ExplorerComponent(explorer, sizing_mode="stretch_width")


def app_for_file(path: str | Path, targets: tuple[str, ...] = ("numpy",)) -> Any:
    """The Panel page for a model file (model + example_inputs convention)."""
    from rlx_core.cli import load_model_file
    from rlx_explorer.explorer import explore

    fn, inputs, _ = load_model_file(path)
    ex = explore(fn, *inputs, targets=targets, title=Path(path).name)
    return pn.Column(f"## RLX Explorer · {Path(path).name}", explorer_component(ex),
                     sizing_mode="stretch_width")


def serve_file(path: str | Path, port: int = 5006, targets: tuple[str, ...] = ("numpy",),
               show: bool = False, threaded: bool = False) -> Any:
    """Serve the explorer for ``path`` on 127.0.0.1 only (never on other interfaces)."""
    pn.extension()
    return pn.serve({"/": lambda: app_for_file(path, targets)}, address="127.0.0.1", port=port,
                    show=show, threaded=threaded, websocket_origin=[f"127.0.0.1:{port}",
                                                                    f"localhost:{port}"],
                    title="RLX Explorer")
