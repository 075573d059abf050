"""``explore()``: the one entry point the hosts share — compile, build the bundle, then show it
as a widget, serve it with Panel, or save it as offline HTML."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rlx_core.ir.graph import Graph
from rlx_explorer.session import Session


@dataclass
class Explorer:
    """A compiled session and its bundle. ``policy`` changes recompile (what the widget's policy
    selector does)."""

    session: Session
    view: str = "graph"
    _bundle: dict[str, Any] | None = field(default=None, repr=False)

    @property
    def bundle(self) -> dict[str, Any]:
        if self._bundle is None:
            self._bundle = self.session.bundle(self.view)
        return self._bundle

    def recompile(self, policy: str | None = None, view: str | None = None) -> dict[str, Any]:
        """Compile again under ``policy`` and rebuild the bundle."""
        self.session.policy = policy
        self.view = view or self.view
        self.session.compile()
        self._bundle = None
        return self.bundle

    def save_html(self, path: str | Path = "rlx-explorer.html") -> Path:
        """The offline, self-contained HTML file (viewer, Graphviz WASM and data inlined)."""
        from rlx_explorer.html_export import save_html

        return save_html(self.bundle, path)

    def widget(self) -> Any:
        """An anywidget for Jupyter (JupyterLab, Notebook 7, VS Code, JupyterLite)."""
        from rlx_explorer.widget import ExplorerWidget

        return ExplorerWidget(self)

    def panel(self) -> Any:
        """A Panel component (Panel's AnyWidgetComponent with the same ESM)."""
        from rlx_explorer.panel_app import explorer_component

        return explorer_component(self)

    def _repr_mimebundle_(self, **kwargs: Any) -> Any:
        try:
            widget = self.widget()
        except ImportError:  # no anywidget (JupyterLite's Pyodide kernel): the saved-output form
            from rlx_explorer.mime import mimebundle

            return mimebundle(self.bundle)
        return widget._repr_mimebundle_(**kwargs)


def explore(fn: Callable[..., Any] | Graph, *example_args: Any,
            targets: str | Sequence[str] = ("numpy",), policy: str | None = None,
            view: str = "graph", run: bool = True, title: str = "",
            progress: Callable[[str], None] | None = None, numerics: bool = False,
            reference: Graph | None = None, devices: bool | None = None,
            calibrate: bool = False) -> Explorer:
    """Compile ``fn`` at ``example_args`` for each target and return the explorer for it.

    Targets that fail legalization show the failure view; ``run`` times the primary target's
    kernels for the profile view; ``progress`` is told each stage (rlx_explorer/progress.py).
    ``numerics`` adds the numerics lens (every node on every target against an f64 oracle;
    ``reference``: the float graph a quantized ``fn`` was made from).
    ``devices`` adds every registered target side by side (dispatch columns, what it would take,
    each kernel in every language; rendered without the devices): ``None`` (the default) adds it
    for graphs of up to ``session.DEVICES_AUTO_NODES`` HIR nodes only, since it lowers the model
    once per registered target; ``calibrate`` measures this
    CPU's FMA and bandwidth peaks for the cost overlay when they were never measured here.
    """
    names = tuple(t.strip() for t in targets.split(",")) if isinstance(targets, str) \
        else tuple(targets)
    session = Session(fn, tuple(example_args), names, policy, run, title, progress=progress,
                      numerics=numerics, reference=reference, devices=devices,
                      calibrate=calibrate)
    return Explorer(session, view)
