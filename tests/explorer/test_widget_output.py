"""The widget output: no Graphviz build in any widget's state (served once per page over the
comm), and a MIME bundle with a self-contained HTML fallback and a readable text line."""

from __future__ import annotations

from typing import Any

import numpy as np

from rlx_explorer import explore
from rlx_explorer.assets import viz_source
from rlx_explorer.widget import ExplorerWidget, widget_esm


def _widget() -> ExplorerWidget:
    w = np.ones((4, 3), np.float32)
    return explore(lambda x: x @ w, np.ones((2, 4), np.float32), run=False, title="tiny").widget()


def test_widget_state_carries_no_graphviz_and_serves_it_on_request() -> None:
    widget = _widget()
    assert widget.get_state()["viz_src"] == ""
    sent: list[Any] = []
    widget.send = sent.append  # type: ignore[method-assign]
    widget._on_custom(widget, {"type": "viz"}, [])
    assert sent == [{"type": "viz", "src": viz_source()}]
    assert "globalThis.rlxVizSource" in widget_esm() and widget_esm().count("export default") == 1


def test_widget_mimebundle_has_an_html_fallback() -> None:
    data, _meta = _widget()._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in data
    assert data["text/plain"] == "RLX Explorer · tiny (numpy)"
    html = data["text/html"]
    assert "RLX Explorer · tiny" in html and "<script type='module'>" in html
    assert len(html) < 200_000  # no Graphviz build in it
