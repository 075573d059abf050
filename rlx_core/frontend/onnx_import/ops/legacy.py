"""Converters of op versions from opsets 7 to 10 whose inputs or semantics differ from the
current op: what were attributes became inputs (Slice-1, Pad-2, Clip-6, TopK-1), Softmax-1/11
normalizes over a 2-D coercion of its input, BatchNormalization-7 has per-activation
statistics (spatial=0), Dropout-7's mask has the input's type, Resize-10 is Upsample.

Versions whose semantics equal a later one (Relu-6, Conv-1, Reshape-5, Gemm-7/9/11, ...) are
listed in the table under the current converter instead; nothing here guesses."""

from __future__ import annotations

import math
from collections.abc import Callable

from rlx_core.frontend.onnx_import.context import NodeCtx
from rlx_core.frontend.onnx_import.errors import Reject
from rlx_core.frontend.onnx_import.ops import nn, pooling, roi_align, shape, topk
from rlx_core.ir import dtypes as dt
from rlx_core.ir.graph import Value

# Clip-6's defaults: the float32 extremes (the spec's numeric_limits<float>::lowest / max)
_F32_MAX = 3.4028234663852886e38


def coerced_softmax(op: str) -> Callable[[NodeCtx], Value]:
    """Softmax / LogSoftmax / Hardmax 1 and 11: the input is coerced to 2-D at ``axis``
    (default 1), (prod(shape[:axis]), prod(shape[axis:])), normalized along the second axis,
    and reshaped back."""

    def convert(n: NodeCtx) -> Value:
        x = n.x(0)
        if x.type.rank == 0:
            raise Reject("softmax of a scalar")
        if op != "hardmax":
            n.float_type(x)
        rank = x.type.rank
        ax = int(n.attr("axis", 1))
        if not -rank <= ax < rank:
            raise Reject(f"axis {ax} is out of range for rank {rank}")
        ax %= rank
        shp = x.type.shape
        x2 = n.reshape(x, (math.prod(shp[:ax]), math.prod(shp[ax:])))
        y = nn.hardmax_values(n, x2, 1) if op == "hardmax" else n.emit(op, [x2], {"axis": 1})
        return n.reshape(y, shp)

    return convert


def slice_1(n: NodeCtx) -> Value:
    """Slice-1: starts, ends and (optional) axes are attributes; no steps."""
    starts = [int(s) for s in n.attr("starts", [])]
    ends = [int(e) for e in n.attr("ends", [])]
    axes = [int(a) for a in n.attr("axes", range(len(starts)))]
    return shape.slice_values(n, n.x(0), starts, ends, axes, [1] * len(starts))


def pad_2(n: NodeCtx) -> Value:
    """Pad-2: pads, mode and value are attributes; every axis is padded."""
    x = n.x(0)
    mode = n.text("mode", "constant")
    pads = [int(p) for p in n.attr("pads", [])]
    return shape.pad_values(n, x, pads, list(range(x.type.rank)), mode,
                            float(n.attr("value", 0.0)))


def clip_6(n: NodeCtx) -> Value:
    """Clip-6: min and max are float attributes defaulting to the float32 extremes."""
    x = n.x(0)
    n.float_type(x)
    lo = float(n.attr("min", -_F32_MAX))
    hi = float(n.attr("max", _F32_MAX))
    # min(max(x, lo), hi), as the spec orders it; a default bound is the identity on x's
    # finite values, and skipping it keeps NaN and infinities exactly as the reference does
    out = x if lo == -_F32_MAX else n.scalar_op("max", x, lo)
    return out if hi == _F32_MAX else n.scalar_op("min", out, hi)


def batch_norm_7(n: NodeCtx) -> Value:
    """BatchNormalization-7/9 in inference (one output). ``spatial=0`` (7 only) holds one
    statistic per activation: scale etc. are shaped (C, D1, ...) and broadcast over N."""
    if any(n.output_wanted(i) for i in range(1, 5)):
        raise Reject(f"training-mode outputs (mean, var, saved_mean, saved_var) of "
                     f"BatchNormalization-{n.version}")
    spatial = int(n.attr("spatial", 1))
    if n.version >= 9 and n.has("spatial"):
        raise Reject("BatchNormalization-9 has no spatial attribute")
    if spatial == 1:
        return nn.batch_norm(n)
    x, scale, bias, mean, var = (n.x(i) for i in range(5))
    d = n.float_type(x)
    want = x.type.shape[1:]
    vals = []
    for v in (scale, bias, mean, var):
        if v.type.shape != want:
            raise Reject(f"spatial=0 needs parameters of shape {list(want)}, got {v.type}")
        v = n.cast(v, d)
        vals.append(n.emit("broadcast_in_dim", [v], {"shape": x.type.shape,
                                                     "dims": tuple(range(1, x.type.rank))}))
    s, b, m, v = vals
    inv = n.emit("rsqrt", [n.scalar_op("add", v, float(n.attr("epsilon", 1e-5)))])
    return n.emit("add", [n.emit("mul", [n.emit("mul", [n.emit("sub", [x, m]), inv]), s]), b])


def dropout_7(n: NodeCtx) -> list[Value | None]:
    """Dropout-7 (inference; there is no training input): the identity, with a mask of the
    input's type (Dropout-10 made it bool)."""
    x = n.x(0)
    mask = n.const(1, x.type.dtype, x.type.shape) if n.output_wanted(1) else None
    return [x, mask]


def resize_10(n: NodeCtx) -> Value:
    """Resize-10 (X, scales) is Upsample-9's nearest repetition under another name."""
    return pooling.upsample(n)


def topk_1(n: NodeCtx) -> list[Value]:
    """TopK-1: k is an attribute (the largest values, sorted, along ``axis``)."""
    if not n.has("k"):
        raise Reject("TopK-1 needs the k attribute")
    n.inputs = [n.x(0), n.const((int(n.attr("k")),), dt.i64, (1,))]
    return topk.topk(n)


def roi_align_10(n: NodeCtx) -> Value:
    """RoiAlign-10 samples as RoiAlign-16 with coordinate_transformation_mode=
    output_half_pixel (16 changed the default to half_pixel)."""
    if n.has("coordinate_transformation_mode"):
        raise Reject("RoiAlign-10 has no coordinate_transformation_mode attribute")
    n.attrs["coordinate_transformation_mode"] = b"output_half_pixel"
    return roi_align.roi_align(n)


__all__ = ["batch_norm_7", "clip_6", "coerced_softmax", "dropout_7", "pad_2", "resize_10",
           "roi_align_10", "slice_1", "topk_1"]
