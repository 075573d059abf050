"""Converters for max pooling with its Indices output and integer inputs, MaxUnpool, and the
old Upsample (nearest, integer scales)."""

from __future__ import annotations

import itertools
import math

from rlx_core.frontend.onnx_import.context import NodeCtx, check_index_table
from rlx_core.frontend.onnx_import.errors import Reject
from rlx_core.frontend.onnx_import.ops import conv as conv_ops
from rlx_core.ir import dtypes as dt
from rlx_core.ir.graph import Value


def _lowest(d: dt.DType) -> float:
    """A padding value that never wins a max of ``d`` (ties are settled by tap validity)."""
    if d.is_float:
        return -math.inf
    if d == dt.bool_:
        return 0.0
    return float(-(1 << (d.bits - 1)) if d.kind is dt.Kind.INT else 0)


def max_pool(n: NodeCtx) -> list[Value | None]:
    x = n.x(0)
    d = x.type.dtype
    if not (d.is_float or d.is_int) or d == dt.i64:
        raise Reject(f"MaxPool of {d}")  # an i64 lowest value does not survive a float pad
    if x.type.rank < 3:
        raise Reject("needs (N, C, spatial...) input")
    kernel = [int(s) for s in n.attr("kernel_shape")]
    ceil_mode = bool(int(n.attr("ceil_mode", 0)))
    spatial = x.type.shape[2:]
    strides, dil, pb, pe, out = conv_ops.window_geometry(n, spatial, kernel,
                                                         ceil_mode=ceil_mode)
    if any(o < 1 for o in out):
        raise Reject("empty pooling output")
    order = int(n.attr("storage_order", 0))
    if order not in (0, 1) or (order == 1 and len(kernel) != 2 and n.output_wanted(1)):
        raise Reject(f"storage_order {order}")
    if d.is_float and not n.output_wanted(1):
        y = conv_ops.hir_pool(n, "max_pool2d", x, kernel, strides, dil, pb, pe, out)
        if y is not None:
            return [y, None]
    xp = conv_ops._padded(n, x, pb, pe, _lowest(d))
    y = conv_ops._pool_reduce(n, xp, kernel, strides, dil, out, "max")
    if not n.output_wanted(1):
        return [y, None]
    return [y, _indices(n, x, xp, y, kernel, strides, dil, pb, out, order)]


def _indices(n: NodeCtx, x: Value, xp: Value, y: Value, kernel: list[int], strides: list[int],
             dil: list[int], pb: list[int], out: list[int], order: int) -> Value:
    """ONNX's Indices: the flat input position of the first window tap (in row-major tap
    order) holding the maximum. Row-major tap order is increasing spatial offset, so the
    first hit is the smallest offset among the taps equal to the max."""
    import numpy as np

    spatial = x.type.shape[2:]
    k = len(kernel)
    big = math.prod(spatial)
    check_index_table(math.prod(kernel) * math.prod(out), "MaxPool's Indices output")
    best = None
    for tap in itertools.product(*(range(kk) for kk in kernel)):
        # this tap of every window: a strided slice of the padded input
        v = xp
        for a in range(k):
            s0 = tap[a] * dil[a]
            v = n.slice_axis(v, a + 2, s0, s0 + (out[a] - 1) * strides[a] + 1, strides[a])
        # its input position per output position (-1 where it reads padding)
        pos = [np.arange(out[a]) * strides[a] - pb[a] + tap[a] * dil[a] for a in range(k)]
        grids = np.meshgrid(*pos, indexing="ij")
        inside = np.ones(out, dtype=bool)
        for a in range(k):
            inside &= (grids[a] >= 0) & (grids[a] < spatial[a])
        if not inside.any():
            continue
        offset = np.zeros(out, dtype=np.int64)
        for a in range(k):
            offset = offset * spatial[a] + np.clip(grids[a], 0, spatial[a] - 1)
        cand = np.where(inside, offset, big)
        hit = n.emit("eq", [v, y])
        if x.type.dtype.is_float:  # a NaN max is found where the tap is NaN too
            hit = n.emit("or", [hit, n.emit("and", [n.emit("ne", [v, v]),
                                                     n.emit("ne", [y, y])])])
        cv = n.emit("broadcast_in_dim", [n.array(cand, dt.i64)],
                    {"shape": y.type.shape, "dims": tuple(range(2, 2 + k))})
        pick = n.select(hit, cv, n.const(big, dt.i64, y.type.shape))
        best = pick if best is None else n.emit("min", [best, pick])
    assert best is not None
    if order == 1:  # column-major within the image: h + w * H
        h, w = spatial
        row = n.scalar_op("div", best, w)
        col = n.scalar_op("rem", best, w)
        best = n.emit("add", [row, n.scalar_op("mul", col, h)])
    nb, c = x.type.shape[:2]
    image = n.emit("add", [n.scalar_op("mul", n.emit(
        "iota", [], {"shape": y.type.shape, "dim": 0, "dtype": dt.i64}), c),
        n.emit("iota", [], {"shape": y.type.shape, "dim": 1, "dtype": dt.i64})])
    return n.emit("add", [best, n.scalar_op("mul", image, big)])


def max_unpool(n: NodeCtx) -> Value:
    """Values written at their (import-time) flat indices into zeros of the inferred shape
    (a later write to the same place wins), then padded at the end to output_shape."""
    import numpy as np

    x, idx, shape_in = n.x(0), n.x(1), n.opt(2)
    k = x.type.rank - 2
    if k < 1:
        raise Reject("needs (N, C, spatial...) input")
    kernel = [int(s) for s in n.attr("kernel_shape")]
    strides = [int(s) for s in n.attr("strides", [1] * k)]
    pads = [int(p) for p in n.attr("pads", [0] * (2 * k))]
    if len(kernel) != k or len(strides) != k or len(pads) != 2 * k:
        raise Reject("kernel_shape/strides/pads do not match the spatial rank")
    if idx.type.shape != x.type.shape or not idx.type.dtype.is_int:
        raise Reject("indices must be integers of X's shape")
    inferred = list(x.type.shape[:2]) + [
        (x.type.shape[2 + a] - 1) * strides[a] - (pads[a] + pads[k + a]) + kernel[a]
        for a in range(k)]
    target = inferred if shape_in is None else n.static_ints(shape_in, "output_shape")
    if len(target) != len(inferred) or any(t < i for t, i in zip(target, inferred, strict=False)):
        raise Reject(f"output_shape {target} is smaller than the unpooled {inferred}")
    size = math.prod(inferred)
    flat = np.asarray(n.static(idx, "the indices")).astype(np.int64).reshape(-1)
    if flat.size and (flat.min() < 0 or flat.max() >= size):
        raise Reject("an index is outside the unpooled tensor")
    last = {int(p): j for j, p in enumerate(flat.tolist())}  # the last write wins
    values = n.reshape(x, [x.type.size])
    zeros = n.const(0, x.type.dtype, (size,))
    source = list(range(size))
    for p, j in last.items():
        source[p] = size + j
    y = n.take(n.emit("concat", [zeros, values], {"axis": 0}), 0, source)
    y = n.reshape(y, inferred)
    if target != inferred:
        y = n.emit("pad", [y], {"low": (0,) * len(target),
                                "high": tuple(t - i for t, i in zip(target, inferred, strict=False)),
                                "value": 0.0})
    return y


def upsample(n: NodeCtx) -> Value:
    """Upsample (7, 9): nearest with whole-number scales repeats each element, as the
    reference does; other modes and fractional scales are rejected."""
    x = n.x(0)
    mode = n.text("mode", "nearest")
    if n.version >= 9:
        scales = [float(s) for s in n.static(n.x(1), "scales").reshape(-1).tolist()]
    else:
        scales = [float(s) for s in n.attr("scales", [])]
    if mode != "nearest":
        raise Reject(f"mode {mode!r}")
    if len(scales) != x.type.rank or any(s != int(s) or s < 1 for s in scales):
        raise Reject(f"scales {scales} must be one whole number >= 1 per axis")
    reps = [int(s) for s in scales]
    shape = x.type.shape
    big, dims = [], []
    for i, (dd, r) in enumerate(zip(shape, reps, strict=False)):
        big += [dd, r]
        dims.append(2 * i)
    y = n.emit("broadcast_in_dim", [x], {"shape": tuple(big), "dims": tuple(dims)})
    return n.reshape(y, [dd * r for dd, r in zip(shape, reps, strict=False)])
