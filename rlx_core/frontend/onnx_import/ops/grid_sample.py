"""Converter for ONNX GridSample (opset 16, 20, 22), following ONNX's reference
(onnx/reference/ops/op_grid_sample.py) step for step:

    x_i = denormalize(grid[..., r-1-i])   (in the grid's dtype, then f32, as the reference)
    [nearest: x_i = round half to even]
    x_i outside [lo_i, hi_i] -> border: clamp to [0, D_i - 1]; reflection: reflect into range
    Y = sum over the 1 / 2^r / 4^r neighbour corners of prod_i w_i * pixel(corner)
    pixel: zeros -> 0 outside the image; border -> clamped index; reflection -> reflected index

The sampled pixels are one gather from X flattened to (N*C*prod(D),).
"""

from __future__ import annotations

import itertools

from rlx_core.frontend.onnx_import.context import NodeCtx, numel
from rlx_core.frontend.onnx_import.errors import Reject
from rlx_core.ir import dtypes as dt
from rlx_core.ir.graph import Value

_MODES = {"bilinear": "linear", "linear": "linear", "bicubic": "cubic", "cubic": "cubic",
          "nearest": "nearest"}
_CUBIC_A = -0.75


def _reflect(n: NodeCtx, x: Value, lo: float, hi: float) -> Value:
    """The reference's _gs_reflect: fold x into [lo, hi] by the nearer border, repeatedly."""
    rng = hi - lo

    def fold(dx: Value, near: float, far: float) -> Value:
        k = n.emit("floor", [n.scalar_op("div", dx, rng)])
        r = n.emit("sub", [dx, n.scalar_op("mul", k, rng)])
        half = n.emit("floor", [n.scalar_op("mul", k, 0.5)])
        even = n.emit("eq", [k, n.scalar_op("mul", half, 2.0)])
        toward = n.full_like(1.0 if near < far else -1.0, x)
        at_near = n.emit("add", [n.full_like(near, x), n.emit("mul", [toward, r])])
        at_far = n.emit("sub", [n.full_like(far, x), n.emit("mul", [toward, r])])
        return n.emit("select", [even, at_near, at_far])

    below = n.emit("lt", [x, n.full_like(lo, x)])
    above = n.emit("gt", [x, n.full_like(hi, x)])
    from_lo = fold(n.emit("sub", [n.full_like(lo, x), x]), lo, hi)
    from_hi = fold(n.emit("sub", [x, n.full_like(hi, x)]), hi, lo)
    return n.emit("select", [below, from_lo, n.emit("select", [above, from_hi, x])])


def _clamp(n: NodeCtx, x: Value, lo: float, hi: float) -> Value:
    return n.emit("min", [n.emit("max", [x, n.full_like(lo, x)]), n.full_like(hi, x)])


def _linear_w(n: NodeCtx, t: Value) -> list[Value]:
    return [n.emit("sub", [n.full_like(1.0, t), t]), t]


def _cubic_w(n: NodeCtx, t: Value) -> list[Value]:
    """Keys' cubic convolution weights (a = -0.75) for offsets t+1, t, 1-t, 2-t."""
    a = _CUBIC_A

    def outer(u: Value) -> Value:  # ((a*u - 5a)*u + 8a)*u - 4a
        p = n.scalar_op("sub", n.scalar_op("mul", u, a), 5 * a)
        p = n.scalar_op("add", n.emit("mul", [p, u]), 8 * a)
        return n.scalar_op("sub", n.emit("mul", [p, u]), 4 * a)

    def inner(u: Value) -> Value:  # ((a+2)*u - (a+3))*u*u + 1
        p = n.scalar_op("sub", n.scalar_op("mul", u, a + 2), a + 3)
        return n.scalar_op("add", n.emit("mul", [n.emit("mul", [p, u]), u]), 1.0)

    one_m = n.emit("sub", [n.full_like(1.0, t), t])
    return [outer(n.scalar_op("add", t, 1.0)), inner(t), inner(one_m),
            outer(n.emit("sub", [n.full_like(2.0, t), t]))]


def grid_sample(n: NodeCtx) -> Value:
    x, grid = n.x(0), n.x(1)
    xd = n.float_type(x, "X")
    gd = n.float_type(grid, "grid")
    default_mode = "bilinear" if n.version < 20 else "linear"
    mode_name = n.text("mode", default_mode)
    mode = _MODES.get(mode_name)
    legal = ("bilinear", "bicubic", "nearest") if n.version < 20 else ("linear", "cubic",
                                                                       "nearest")
    if mode is None or mode_name not in legal:
        raise Reject(f"mode {mode_name!r} is not defined in GridSample-{n.version}")
    pad = n.text("padding_mode", "zeros")
    if pad not in ("zeros", "border", "reflection"):
        raise Reject(f"padding_mode {pad!r}")
    align = bool(int(n.attr("align_corners", 0)))
    r = x.type.rank - 2
    if r < 1 or grid.type.rank != r + 2 or grid.type.shape[-1] != r \
            or grid.type.shape[0] != x.type.shape[0]:
        raise Reject(f"grid {grid.type} does not fit X {x.type}")
    if n.version < 20 and r != 2:
        raise Reject(f"GridSample-{n.version} takes 4-D inputs only")
    bn, c = x.type.shape[:2]
    dims = x.type.shape[2:]
    out_sp = grid.type.shape[1:-1]
    ws = (bn, *out_sp)  # the per-sample shape of coordinates and weights
    out_shape = (bn, c, *out_sp)
    if numel(out_shape) == 0 or numel(dims) == 0:
        raise Reject("empty input or output")
    if pad == "reflection" and align and 1 in dims:
        raise Reject("reflection padding over a size-1 axis with align_corners divides by 0")

    lo = [0.0 if align else -0.5 for _ in dims]
    hi = [d - 1.0 if align else d - 0.5 for d in dims]
    coords = []
    for i, size in enumerate(dims):
        g = n.reshape(n.slice_axis(grid, r + 1, r - 1 - i, r - i), ws)
        g1 = n.scalar_op("add", g, 1.0)
        if align:
            v = n.scalar_op("mul", n.scalar_op("div", g1, 2.0), float(size - 1))
        else:
            v = n.scalar_op("div", n.scalar_op("sub", n.scalar_op("mul", g1, float(size)), 1.0),
                            2.0)
        v = n.cast(v, dt.f32) if gd != dt.f32 else v
        if mode == "nearest":
            v = n.emit("round", [v])
        if pad in ("border", "reflection"):
            outside = n.emit("or", [n.emit("lt", [v, n.full_like(lo[i], v)]),
                                    n.emit("gt", [v, n.full_like(hi[i], v)])])
            fixed = (_clamp(n, v, 0.0, size - 1.0) if pad == "border"
                     else _reflect(n, v, lo[i], hi[i]))
            v = n.emit("select", [outside, fixed, v])
        coords.append(v)

    # per axis: a list of (index as f32, weight in X's dtype or None) neighbours
    axes: list[list[tuple[Value, Value | None]]] = []
    for v in coords:
        if mode == "nearest":
            axes.append([(n.cast(n.cast(v, dt.i32), dt.f32), None)])  # astype(int32)
            continue
        base = n.emit("floor", [v])
        t = n.emit("sub", [v, base])
        ws_ = _linear_w(n, t) if mode == "linear" else _cubic_w(n, t)
        first = 0 if mode == "linear" else -1
        axes.append([(n.scalar_op("add", base, float(first + k)) if first + k else base,
                      n.cast(w, xd)) for k, w in enumerate(ws_)])

    flat = n.reshape(x, (numel(x.type.shape),))
    plane = numel(dims)
    strides = [numel(dims[i + 1:]) for i in range(r)]
    nc = n.emit("add", [
        n.scalar_op("mul", n.emit("iota", [], {"shape": out_shape, "dim": 0, "dtype": dt.i64}),
                    c * plane),
        n.scalar_op("mul", n.emit("iota", [], {"shape": out_shape, "dim": 1, "dtype": dt.i64}),
                    plane)])
    to_out = {"shape": out_shape, "dims": (0, *range(2, 2 + len(out_sp)))}
    # each axis's neighbours as (flat offset i64, valid mask or None, weight or None)
    per_axis = []
    for i, neigh in enumerate(axes):
        items = []
        for idx, w in neigh:
            valid = None
            if pad == "zeros":
                valid = n.emit("and", [n.emit("ge", [idx, n.full_like(0.0, idx)]),
                                       n.emit("le", [idx, n.full_like(dims[i] - 1.0, idx)])])
            elif pad == "reflection":
                idx = n.cast(n.cast(_reflect(n, idx, lo[i], hi[i]), dt.i32), dt.f32)
            idx = _clamp(n, idx, 0.0, dims[i] - 1.0)  # zeros: masked; border: the pixel rule
            off = n.cast(idx, dt.i64)
            if strides[i] != 1:
                off = n.scalar_op("mul", off, strides[i])
            items.append((off, valid, w))
        per_axis.append(items)

    y: Value | None = None
    for corner in itertools.product(*per_axis):
        off = corner[0][0]
        valid = corner[0][1]
        w = corner[0][2]
        for o, m, wi in corner[1:]:
            off = n.emit("add", [off, o])
            if m is not None:
                valid = m if valid is None else n.emit("and", [valid, m])
            if wi is not None:
                w = wi if w is None else n.emit("mul", [w, wi])
        index = n.emit("add", [n.emit("broadcast_in_dim", [off], to_out), nc])
        pix = n.emit("gather", [flat, index], {"axis": 0})
        if valid is not None:
            pix = n.emit("select", [n.emit("broadcast_in_dim", [valid], to_out), pix,
                                    n.const(0.0, xd, out_shape)])
        if w is not None:
            pix = n.emit("mul", [pix, n.emit("broadcast_in_dim", [w], to_out)])
        y = pix if y is None else n.emit("add", [y, pix])
    return y  # type: ignore[return-value]
