"""RoiAlign over import-time regions: every sample's four bilinear taps and weights are
computed on the host exactly as ONNX's reference does (float32 scalar arithmetic, the same
clamping at the borders), then the graph gathers the taps and pools them (avg or max)."""

from __future__ import annotations

import math
from typing import Any

from rlx_core.frontend.onnx_import.context import NodeCtx
from rlx_core.frontend.onnx_import.errors import Reject
from rlx_core.ir import dtypes as dt
from rlx_core.ir.graph import Value


def _taps(roi: Any, scale: float, half: bool, ph_n: int, pw_n: int, ratio: int,
          h: int, w: int) -> tuple[list[list[int]], list[list[float]], int]:
    """Per output cell (row-major) the flat positions and weights of its samples' taps (four
    per sample), and the sample count the average divides by."""
    import numpy as np

    f = np.float32
    off = 0.5 if half else 0.0
    start_w, start_h = roi[0] * scale - off, roi[1] * scale - off
    end_w, end_h = roi[2] * scale - off, roi[3] * scale - off
    rw, rh = end_w - start_w, end_h - start_h
    if not half:  # malformed regions become 1 x 1
        rw, rh = max(rw, 1.0), max(rh, 1.0)
    bh, bw = rh / ph_n, rw / pw_n
    gh = int(ratio) if ratio > 0 else int(np.ceil(rh / ph_n))
    gw = int(ratio) if ratio > 0 else int(np.ceil(rw / pw_n))
    count = int(max(gh * gw, 1))
    pos_out, wt_out = [], []
    for ph in range(ph_n):
        for pw in range(pw_n):
            pos, wt = [], []
            for iy in range(gh):
                yy = start_h + ph * bh + (iy + 0.5) * bh / gh
                for ix in range(gw):
                    x = start_w + pw * bw + (ix + 0.5) * bw / gw
                    y = yy
                    if y < -1.0 or y > h or x < -1.0 or x > w:
                        pos += [0, 0, 0, 0]
                        wt += [0.0, 0.0, 0.0, 0.0]
                        continue
                    y, x = max(y, 0), max(x, 0)
                    y_lo, x_lo = int(y), int(x)
                    if y_lo >= h - 1:
                        y_hi = y_lo = h - 1
                        y = y_lo
                    else:
                        y_hi = y_lo + 1
                    if x_lo >= w - 1:
                        x_hi = x_lo = w - 1
                        x = x_lo
                    else:
                        x_hi = x_lo + 1
                    ly, lx = y - y_lo, x - x_lo
                    hy, hx = 1.0 - ly, 1.0 - lx
                    pos += [y_lo * w + x_lo, y_lo * w + x_hi, y_hi * w + x_lo, y_hi * w + x_hi]
                    wt += [float(f(v)) for v in (hy * hx, hy * lx, ly * hx, ly * lx)]
            pos_out.append(pos)
            wt_out.append(wt)
    return pos_out, wt_out, count


def roi_align(n: NodeCtx) -> Value:
    import numpy as np

    x, rois, batch = n.x(0), n.x(1), n.x(2)
    d = n.float_type(x)
    if d != dt.f32 or rois.type.dtype != dt.f32:
        raise Reject("RoiAlign of f32 data and regions (the reference's arithmetic)")
    if x.type.rank != 4 or rois.type.rank != 2 or rois.type.shape[1] != 4:
        raise Reject("needs (N, C, H, W) data and (R, 4) regions")
    mode = n.text("mode", "avg")
    ctm = n.text("coordinate_transformation_mode", "half_pixel")
    if mode not in ("avg", "max") or ctm not in ("half_pixel", "output_half_pixel"):
        raise Reject(f"mode {mode!r} / coordinate_transformation_mode {ctm!r}")
    ph_n, pw_n = int(n.attr("output_height", 1)), int(n.attr("output_width", 1))
    ratio = int(n.attr("sampling_ratio", 0))
    scale = float(n.attr("spatial_scale", 1.0))
    boxes = np.asarray(n.static(rois, "the regions")).astype(np.float32)
    which = [int(b) for b in np.asarray(n.static(batch, "batch_indices")).reshape(-1)]
    nb, c, h, w = x.type.shape
    r_n = boxes.shape[0]
    if len(which) != r_n or any(not 0 <= b < nb for b in which):
        raise Reject("batch_indices must name one image per region")
    if ph_n < 1 or pw_n < 1 or ratio < 0:
        raise Reject("output sizes must be positive and sampling_ratio non-negative")
    cells = []
    taps = 0
    for r in range(r_n):
        pos, wt, count = _taps(boxes[r], scale, ctm == "half_pixel", ph_n, pw_n, ratio, h, w)
        cells.append((pos, wt, count, which[r]))
        taps = max(taps, len(pos[0]))
    if taps == 0:
        raise Reject("a region has no samples")
    # pad every cell to the same number of taps with weight 0 (a max ignores them below)
    rows = np.zeros((r_n, ph_n * pw_n, taps), np.int64)
    weights = np.zeros((r_n, ph_n * pw_n, taps), np.float32)
    real = np.zeros((r_n, ph_n * pw_n, taps), bool)
    counts = np.zeros((r_n, 1, 1), np.float32)
    for r, (pos, wt, count, b) in enumerate(cells):
        k = len(pos[0])
        rows[r, :, :k] = np.asarray(pos) + b * h * w
        weights[r, :, :k] = wt
        real[r, :, :k] = True
        counts[r] = count
    # (N, C, H, W) -> rows of C channels: (N*H*W, C)
    xr = n.reshape(n.transpose(x, (0, 2, 3, 1)), (nb * h * w, c))
    g = n.emit("gather", [xr, n.array(rows.reshape(-1))], {"axis": 0})
    g = n.reshape(g, (r_n, ph_n * pw_n, taps, c))
    full = (r_n, ph_n * pw_n, taps, c)
    wv = n.emit("broadcast_in_dim", [n.array(weights)], {"shape": full, "dims": (0, 1, 2)})
    prod = n.emit("mul", [wv, g])
    # the padding taps are left out: 0 in a sum, below every real value in a max
    real_v = n.emit("broadcast_in_dim", [n.array(real, dt.bool_)],
                    {"shape": full, "dims": (0, 1, 2)})
    if mode == "avg":
        prod = n.select(real_v, prod, n.const(0.0, dt.f32, full))
        y = n.emit("reduce_sum", [prod], {"axes": (2,)})
        y = n.emit("div", [y, n.emit("broadcast_in_dim", [n.array(counts)],
                                     {"shape": y.type.shape, "dims": (0, 1, 2)})])
    else:
        # the max of a sample's four weighted taps, then over the samples, as the reference
        prod = n.select(real_v, prod, n.const(-math.inf, dt.f32, full))
        y = n.emit("reduce_max", [prod], {"axes": (2,)})
    y = n.reshape(y, (r_n, ph_n, pw_n, c))
    return n.transpose(y, (0, 3, 1, 2))
