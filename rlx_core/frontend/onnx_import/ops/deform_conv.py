"""DeformConv (2-D): each kernel tap reads the input at its regular position plus a learned
offset, by bilinear interpolation with zeros outside the image (ONNX's reference samples with
GridSample, align_corners=1, zeros padding), optionally scaled by a mask; the samples are then
contracted with the weight per group, as conv2d's im2col decomposition does.

The offsets and mask are run-time values: positions, weights and the four taps' indices are
computed in the graph (taps outside the image are clamped for the gather and weighted 0)."""

from __future__ import annotations

from rlx_core.frontend.onnx_import.context import NodeCtx
from rlx_core.frontend.onnx_import.errors import Reject
from rlx_core.ir import dtypes as dt
from rlx_core.ir.graph import Value


def deform_conv(n: NodeCtx) -> Value:
    x, w, off, b, mask = n.x(0), n.x(1), n.x(2), n.opt(3), n.opt(4)
    d = n.float_type(x)
    if x.type.rank != 4:
        raise Reject("only 2-D DeformConv (the reference's only form)")
    if any(v is not None and v.type.dtype != d for v in (w, off, b, mask)):
        raise Reject("all inputs must share x's dtype")
    nb, c, h, wd = x.type.shape
    m, cg, kh, kw = w.type.shape
    g = int(n.attr("group", 1))
    og = int(n.attr("offset_group", 1))
    kernel = [int(s) for s in n.attr("kernel_shape", [kh, kw])]
    strides = [int(s) for s in n.attr("strides", [1, 1])]
    dil = [int(s) for s in n.attr("dilations", [1, 1])]
    pads = [int(p) for p in n.attr("pads", [0, 0, 0, 0])]
    if kernel != [kh, kw] or len(strides) != 2 or len(dil) != 2 or len(pads) != 4:
        raise Reject("kernel_shape/strides/dilations/pads do not fit a 2-D weight")
    if c != cg * g or m % g or c % og:
        raise Reject(f"channels: x {x.type}, w {w.type}, group {g}, offset_group {og}")
    if h < 2 or wd < 2:
        raise Reject("an image side of 1 (the reference's coordinate normalisation divides "
                     "by side - 1)")
    oh = (h + pads[0] + pads[2] - ((kh - 1) * dil[0] + 1)) // strides[0] + 1
    ow = (wd + pads[1] + pads[3] - ((kw - 1) * dil[1] + 1)) // strides[1] + 1
    if off.type.shape != (nb, og * kh * kw * 2, oh, ow):
        raise Reject(f"offset {off.type} must be [{nb}, {og * kh * kw * 2}, {oh}, {ow}]")
    if mask is not None and mask.type.shape != (nb, og * kh * kw, oh, ow):
        raise Reject(f"mask {mask.type} must be [{nb}, {og * kh * kw}, {oh}, {ow}]")
    taps = (nb, og, kh, kw, oh, ow)
    # offsets: (N, og, kh, kw, 2, oh, ow); component 0 is the row, 1 the column
    o = n.reshape(off, (nb, og, kh, kw, 2, oh, ow))

    def comp(i: int) -> Value:
        return n.reshape(n.slice_axis(o, 4, i, i + 1), taps)

    def base(k_axis: int, o_axis: int, stride: int, dl: int, pad: int) -> Value:
        # regular position of each tap: o * stride - pad + k * dilation
        ko = n.emit("iota", [], {"shape": taps, "dim": k_axis, "dtype": dt.i32})
        oo = n.emit("iota", [], {"shape": taps, "dim": o_axis, "dtype": dt.i32})
        p = n.emit("add", [n.scalar_op("mul", oo, stride), n.scalar_op("mul", ko, dl)])
        return n.cast(n.scalar_op("sub", p, pad), d)

    py = n.emit("add", [base(2, 4, strides[0], dil[0], pads[0]), comp(0)])
    px = n.emit("add", [base(3, 5, strides[1], dil[1], pads[1]), comp(1)])
    y0, x0 = n.emit("floor", [py]), n.emit("floor", [px])
    fy, fx = n.emit("sub", [py, y0]), n.emit("sub", [px, x0])
    one = n.const(1.0, d, taps)
    iy0, ix0 = n.cast(y0, dt.i64), n.cast(x0, dt.i64)
    # (N, og, kh, kw, oh, ow) -> per channel: (N, C, kh, kw, oh, ow)
    per = c // og
    chan = (nb, og, per, kh, kw, oh, ow)
    full = (nb, c, kh, kw, oh, ow)

    def spread(v: Value) -> Value:
        v = n.emit("broadcast_in_dim", [v], {"shape": chan, "dims": (0, 1, 3, 4, 5, 6)})
        return n.reshape(v, full)

    # flat index of channel row (n, c): (n * C + c) * H * W
    rows = n.emit("add", [n.scalar_op("mul", n.emit(
        "iota", [], {"shape": full, "dim": 0, "dtype": dt.i64}), c),
        n.emit("iota", [], {"shape": full, "dim": 1, "dtype": dt.i64})])
    rows = n.scalar_op("mul", rows, h * wd)
    flat = n.reshape(x, (x.type.size,))
    acc = None
    for dy in (0, 1):
        for dx in (0, 1):
            iy = n.scalar_op("add", iy0, dy) if dy else iy0
            ix = n.scalar_op("add", ix0, dx) if dx else ix0
            inside = n.emit("and", [
                n.emit("and", [n.emit("ge", [iy, n.full_like(0, iy)]),
                               n.emit("lt", [iy, n.full_like(h, iy)])]),
                n.emit("and", [n.emit("ge", [ix, n.full_like(0, ix)]),
                               n.emit("lt", [ix, n.full_like(wd, ix)])])])
            wy = fy if dy else n.emit("sub", [one, fy])
            wx = fx if dx else n.emit("sub", [one, fx])
            wt = n.select(inside, n.emit("mul", [wy, wx]), n.const(0.0, d, taps))
            cy = n.emit("min", [n.emit("max", [iy, n.full_like(0, iy)]),
                                n.full_like(h - 1, iy)])
            cx = n.emit("min", [n.emit("max", [ix, n.full_like(0, ix)]),
                                n.full_like(wd - 1, ix)])
            pos = n.emit("add", [n.scalar_op("mul", cy, wd), cx])
            idx = n.emit("add", [rows, spread(pos)])
            val = n.emit("gather", [flat, idx], {"axis": 0})
            # a tap outside the image contributes 0 (never 0 * its clamped neighbour)
            term = n.select(spread(inside), n.emit("mul", [spread(wt), val]),
                            n.const(0.0, d, full))
            acc = term if acc is None else n.emit("add", [acc, term])
    assert acc is not None
    if mask is not None:
        acc = n.emit("mul", [acc, spread(n.reshape(mask, taps))])
    # contract per group: w (g, M/g, Cg*kh*kw) with samples (N, g, Cg*kh*kw, oh, ow)
    cols = n.reshape(acc, (nb, g, cg * kh * kw, oh, ow))
    wm = n.reshape(w, (g, m // g, cg * kh * kw))
    y = n.emit("dot_general", [wm, cols], {"contract": ((2,), (2,)), "batch": ((0,), (1,))})
    y = n.reshape(n.transpose(y, (2, 0, 1, 3, 4)), (nb, m, oh, ow))
    if b is not None:
        if b.type.shape != (m,):
            raise Reject(f"bias {b.type} must be [{m}]")
        y = n.emit("add", [y, n.emit("broadcast_in_dim", [b], {"shape": y.type.shape,
                                                              "dims": (1,)})])
    return y
