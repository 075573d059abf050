"""An orbitable live view of a rendered scene: an anywidget whose ESM shows a PNG and turns
pointer drags into camera angles; Python re-renders on every change.

The Python side is the whole model (angles in, PNG bytes out) and is tested without a
browser; the ESM only draws the image and sends the angles. The PNG is written with the
standard library (rlx_explorer/png.py), so the widget needs no imaging package.
"""

from __future__ import annotations

import base64
from collections.abc import Callable
from typing import Any

import anywidget
import traitlets

from rlx_explorer.png import encode_png

__all__ = ["SplatView", "encode_png"]

_ESM = """
function render({ model, el }) {
  const img = document.createElement("img");
  img.style.cssText = "cursor: grab; image-rendering: pixelated; user-select: none;";
  img.draggable = false;
  const label = document.createElement("div");
  label.style.cssText = "font: 12px monospace; color: #555;";
  const show = () => {
    img.src = "data:image/png;base64," + model.get("png");
    img.width = model.get("display_size");
    label.textContent = `azimuth ${model.get("azimuth").toFixed(0)}°, elevation ` +
      `${model.get("elevation").toFixed(0)}° (drag to orbit) · ${model.get("caption")}`;
  };
  let drag = null;
  const down = (e) => { drag = [e.clientX, e.clientY, model.get("azimuth"),
                                model.get("elevation")]; img.setPointerCapture(e.pointerId); };
  const move = (e) => {
    if (!drag) return;
    model.set("azimuth", drag[2] + (e.clientX - drag[0]) * 0.5);
    model.set("elevation", Math.max(-85, Math.min(85, drag[3] - (e.clientY - drag[1]) * 0.5)));
    model.save_changes();
  };
  const up = () => { drag = null; };
  img.addEventListener("pointerdown", down);
  img.addEventListener("pointermove", move);
  img.addEventListener("pointerup", up);
  model.on("change:png", show);
  show();
  el.append(img, label);
  return () => { model.off("change:png", show); };
}
export default { render };
"""


class SplatView(anywidget.AnyWidget):
    """``render(azimuth, elevation) -> (H, W, 3) image``, shown and re-rendered on drags."""

    _esm = _ESM
    png = traitlets.Unicode("").tag(sync=True)
    azimuth = traitlets.Float(0.0).tag(sync=True)
    elevation = traitlets.Float(20.0).tag(sync=True)
    display_size = traitlets.Int(256).tag(sync=True)
    caption = traitlets.Unicode("").tag(sync=True)

    def __init__(self, render: Callable[[float, float], Any], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._render = render
        self.renders = 0
        self.observe(lambda _change: self.refresh(), names=["azimuth", "elevation"])
        self.refresh()

    def refresh(self) -> None:
        """Render at the current angles and send the PNG."""
        self.png = base64.b64encode(encode_png(self._render(self.azimuth, self.elevation))
                                    ).decode("ascii")
        self.renders += 1
