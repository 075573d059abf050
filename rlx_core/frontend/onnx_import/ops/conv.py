"""Converters for ONNX convolution and pooling: Conv (HIR conv2d), MaxPool / AveragePool (HIR
max_pool2d / avg_pool2d where the window is one they express, else N-d window taps in MIR),
LpPool, the global pools."""

from __future__ import annotations

import itertools
import math

from rlx_core.frontend.onnx_import.context import NodeCtx
from rlx_core.frontend.onnx_import.errors import Reject
from rlx_core.ir.graph import Value


def window_geometry(n: NodeCtx, spatial: tuple[int, ...], kernel: list[int],
                    *, ceil_mode: bool = False) -> tuple[list[int], list[int], list[int],
                                                         list[int], list[int]]:
    """ONNX's window arithmetic: (strides, dilations, pads_begin, pads_end, out_sizes).

    ``pads_end`` includes the extra room a ceil_mode window needs past the explicit padding.
    """
    k = len(spatial)
    strides = [int(s) for s in n.attr("strides", [1] * k)]
    dil = [int(d) for d in n.attr("dilations", [1] * k)]
    if len(strides) != k or len(dil) != k or len(kernel) != k:
        raise Reject("strides/dilations/kernel_shape do not match the spatial rank")
    if min(strides + dil + kernel, default=1) < 1:
        raise Reject("strides, dilations and kernel sizes must be positive")
    auto = n.text("auto_pad", "NOTSET")
    eff = [(kk - 1) * d + 1 for kk, d in zip(kernel, dil, strict=False)]
    begin, end, out = [], [], []
    if auto in ("SAME_UPPER", "SAME_LOWER"):
        for size, s, e in zip(spatial, strides, eff, strict=False):
            o = -(-size // s)
            total = max((o - 1) * s + e - size, 0)
            small = total // 2
            big = total - small
            begin.append(small if auto == "SAME_UPPER" else big)
            end.append(big if auto == "SAME_UPPER" else small)
            out.append(o)
        return strides, dil, begin, end, out
    if auto == "VALID":
        pads = [0] * (2 * k)
    elif auto == "NOTSET":
        pads = [int(p) for p in n.attr("pads", [0] * (2 * k))]
        if len(pads) != 2 * k or min(pads, default=0) < 0:
            raise Reject(f"pads {pads} must be 2 non-negative entries per spatial axis")
    else:
        raise Reject(f"auto_pad={auto!r}")
    for i, (size, s, e) in enumerate(zip(spatial, strides, eff, strict=False)):
        pb, pe = pads[i], pads[i + k]
        span = size + pb + pe - e
        if span < 0:
            raise Reject(f"window {e} does not fit input {size} with pads {pb}+{pe}")
        o = (-(-span // s) if ceil_mode else span // s) + 1
        if ceil_mode and (o - 1) * s >= size + pb:
            o -= 1  # the last window would start in the end padding only
        begin.append(pb)
        end.append(max(pe, (o - 1) * s + e - size - pb))
        out.append(o)
    return strides, dil, begin, end, out


def conv(n: NodeCtx) -> Value:
    x, w, b = n.x(0), n.x(1), n.opt(2)
    n.float_type(x)
    if w.type.dtype != x.type.dtype or (b is not None and b.type.dtype != x.type.dtype):
        raise Reject("X, W and B must share one dtype")
    return conv_values(n, x, w, b)


def conv_values(n: NodeCtx, x: Value, w: Value, b: Value | None) -> Value:
    """ONNX Conv of float values with the node's geometry attributes (also used by the
    integer convolutions, which run it on exact f64 integers)."""
    k = x.type.rank - 2
    if k not in (1, 2, 3):
        raise Reject(f"{k}-D convolution (1-D, 2-D and 3-D are supported)")
    kernel = [int(s) for s in n.attr("kernel_shape", w.type.shape[2:])]
    if tuple(kernel) != w.type.shape[2:]:
        raise Reject("kernel_shape disagrees with the weight")
    g = int(n.attr("group", 1))
    strides, dil, pb, pe, out = window_geometry(n, x.type.shape[2:], kernel)
    if k == 3:
        xp = n.emit("pad", [x], {"low": (0, 0, *pb), "high": (0, 0, *pe), "value": 0.0}) \
            if any(pb + pe) else x
        return conv3d(n, xp, w, b, strides, dil, out[0], g)
    if k == 1:  # a 1-D conv is a 2-D conv over a height of 1
        x = n.reshape(x, x.type.shape[:2] + (1,) + x.type.shape[2:])
        w = n.reshape(w, w.type.shape[:2] + (1,) + w.type.shape[2:])
        strides, dil, pb, pe = [1] + strides, [1] + dil, [0] + pb, [0] + pe
    if pb == pe:
        padding = tuple(pb)
    else:
        x = n.emit("pad", [x], {"low": (0, 0, *pb), "high": (0, 0, *pe), "value": 0.0})
        padding = (0, 0)
    ins = [x, w] + ([b] if b is not None else [])
    y = n.emit("conv2d", ins, {"stride": tuple(strides), "padding": padding,
                               "dilation": tuple(dil), "groups": g})
    if k == 1:
        y = n.reshape(y, (y.type.shape[0], y.type.shape[1], y.type.shape[3]))
    return y


def conv3d(n: NodeCtx, xp: Value, w: Value, b: Value | None, strides: list[int],
           dil: list[int], od: int, g: int) -> Value:
    """A 3-D convolution of the already padded ``xp`` as a sum over the depth taps of 2-D
    convolutions: tap kd reads the depth slices kd*dil_d + od*stride_d, folded into the
    batch axis."""
    nb, c = xp.type.shape[:2]
    m, cg, kd_n, kh, kw = w.type.shape
    acc = None
    for kd in range(kd_n):
        s0 = kd * dil[0]
        xs = n.slice_axis(xp, 2, s0, s0 + (od - 1) * strides[0] + 1, strides[0])
        xs = n.transpose(xs, (0, 2, 1, 3, 4))
        xs = n.reshape(xs, (nb * od, c) + xs.type.shape[3:])
        wk = n.reshape(n.slice_axis(w, 2, kd, kd + 1), (m, cg, kh, kw))
        y = n.emit("conv2d", [xs, wk], {"stride": tuple(strides[1:]), "padding": (0, 0),
                                        "dilation": tuple(dil[1:]), "groups": g})
        acc = y if acc is None else n.emit("add", [acc, y])
    assert acc is not None
    y = n.transpose(n.reshape(acc, (nb, od) + acc.type.shape[1:]), (0, 2, 1, 3, 4))
    if b is not None:
        y = n.emit("add", [y, n.emit("broadcast_in_dim", [b], {"shape": y.type.shape,
                                                              "dims": (1,)})])
    return y


def _pool_reduce(n: NodeCtx, xp: Value, kernel: list[int], strides: list[int],
                 dil: list[int], out: list[int], op: str) -> Value:
    """Combine every window tap with ``op`` (max or add) over a padded input.

    A pooling window is the Cartesian product of per-axis taps, and max and sum are
    associative, so the window is reduced one spatial axis at a time: sum(k) strided slices
    instead of prod(k) (a 3x3x3 window costs 9 slices, not 27).
    """
    y = xp
    for i, (kk, s, d, o) in enumerate(zip(kernel, strides, dil, out, strict=False)):
        a = i + 2
        acc = None
        for t in range(kk):
            tap = n.slice_axis(y, a, t * d, t * d + (o - 1) * s + 1, s)
            acc = tap if acc is None else n.emit(op, [acc, tap])
        y = acc  # type: ignore[assignment]
    return y


def hir_pool(n: NodeCtx, op: str, x: Value, kernel: list[int], strides: list[int],
             dil: list[int], pb: list[int], pe: list[int], out: list[int]) -> Value | None:
    """The HIR pooling ``op`` (max_pool2d, avg_pool2d) of a 2-D window it expresses (no
    dilation, the same padding on both sides, at most half the window, the floor output
    size), or None: then the caller reduces the taps in MIR. Kept whole, a target with a
    pooling kernel runs it as one (the cpu's, cpu/pool.py); the others decompose it into the
    same per-axis taps (dispatch/decompositions.py)."""
    if x.type.rank != 4 or dil != [1, 1] or pb != pe:
        return None
    spatial = x.type.shape[2:]
    for size, kk, s, p, o in zip(spatial, kernel, strides, pb, out, strict=True):
        if 2 * p > kk or (size + 2 * p - kk) // s + 1 != o:
            return None
    return n.emit(op, [x], {"kernel": tuple(kernel), "stride": tuple(strides),
                            "padding": tuple(pb)})


def _padded(n: NodeCtx, x: Value, pb: list[int], pe: list[int], fill: float) -> Value:
    if not any(pb) and not any(pe):
        return x
    return n.emit("pad", [x], {"low": (0, 0, *pb), "high": (0, 0, *pe), "value": fill})


def _pool_setup(n: NodeCtx) -> tuple[Value, list[int], list[int], list[int], list[int],
                                     list[int], list[int]]:
    x = n.x(0)
    n.float_type(x)
    if x.type.rank < 3:
        raise Reject("needs (N, C, spatial...) input")
    kernel = [int(s) for s in n.attr("kernel_shape")]
    ceil_mode = bool(int(n.attr("ceil_mode", 0)))
    strides, dil, pb, pe, out = window_geometry(n, x.type.shape[2:], kernel,
                                                ceil_mode=ceil_mode)
    if any(o < 1 for o in out):
        raise Reject("empty pooling output")
    return x, kernel, strides, dil, pb, pe, out


def _counts(spatial: tuple[int, ...], kernel: list[int], strides: list[int], dil: list[int],
            pb: list[int], pe_explicit: list[int], out: list[int], include_pad: bool) -> list:
    """How many taps of each output window fall inside the input (or its explicit padding)."""
    per_axis = []
    for size, kk, s, d, b, e, o in zip(spatial, kernel, strides, dil, pb, pe_explicit, out, strict=False):
        lo, hi = (-b, size + e) if include_pad else (0, size)
        per_axis.append([sum(1 for t in range(kk) if lo <= i * s - b + t * d < hi)
                         for i in range(o)])
    counts = []
    for idx in itertools.product(*(range(o) for o in out)):
        counts.append(math.prod(per_axis[a][i] for a, i in enumerate(idx)))
    return counts


def _explicit_end(n: NodeCtx, k: int, pe: list[int]) -> list[int]:
    auto = n.text("auto_pad", "NOTSET")
    if auto == "NOTSET":
        pads = [int(p) for p in n.attr("pads", [0] * (2 * k))]
        return pads[k:]
    return pe  # SAME_* pads are real padding; VALID has none beyond ceil_mode room


def avg_pool(n: NodeCtx) -> Value:
    x, kernel, strides, dil, pb, pe, out = _pool_setup(n)
    include = bool(int(n.attr("count_include_pad", 0)))
    k = len(kernel)
    counts = _counts(x.type.shape[2:], kernel, strides, dil, pb, _explicit_end(n, k, pe), out,
                     include)
    if set(counts) == {math.prod(kernel)}:  # avg_pool2d divides by the window size
        y = hir_pool(n, "avg_pool2d", x, kernel, strides, dil, pb, pe, out)
        if y is not None:
            return y
    y = _pool_reduce(n, _padded(n, x, pb, pe, 0.0), kernel, strides, dil, out, "add")
    if 0 in counts:
        raise Reject("a pooling window covers no input element")
    if len(set(counts)) == 1:
        return n.scalar_op("div", y, float(counts[0]))
    import numpy as np

    div = n.array(np.asarray(counts, dtype=np.float64).reshape(out), x.type.dtype)
    div = n.emit("broadcast_in_dim", [div], {"shape": y.type.shape,
                                             "dims": tuple(range(2, 2 + k))})
    return n.emit("div", [y, div])


def lp_pool(n: NodeCtx) -> Value:
    x, kernel, strides, dil, pb, pe, out = _pool_setup(n)
    p = float(n.attr("p", 2))
    if p <= 0:
        raise Reject(f"p={p}")
    ax = n.emit("abs", [x])
    powed = n.emit("mul", [ax, ax]) if p == 2 else n.scalar_op("pow", ax, p)
    y = _pool_reduce(n, _padded(n, powed, pb, pe, 0.0), kernel, strides, dil, out, "add")
    return n.emit("sqrt", [y]) if p == 2 else n.scalar_op("pow", y, 1.0 / p)


def global_pool(kind: str):
    def convert(n: NodeCtx) -> Value:
        x = n.x(0)
        n.float_type(x)
        axes = tuple(range(2, x.type.rank))
        if kind == "max":
            return n.reduce("reduce_max", x, axes, True)
        count = math.prod(x.type.shape[2:])
        return n.scalar_op("div", n.reduce("reduce_sum", x, axes, True), float(count))

    return convert


def conv_transpose(n: NodeCtx) -> Value:
    """ConvTranspose as a stride-1 convolution: the input dilated by the stride (zeros between
    elements), padded by (kernel extent - 1 - pads), convolved with the flipped kernel whose
    in/out channels are swapped per group."""
    x, w, b = n.x(0), n.x(1), n.opt(2)
    n.float_type(x)
    if w.type.dtype != x.type.dtype or (b is not None and b.type.dtype != x.type.dtype):
        raise Reject("X, W and B must share one dtype")
    k = x.type.rank - 2
    if k not in (1, 2, 3):
        raise Reject(f"{k}-D transposed convolution (1-D, 2-D and 3-D are supported)")
    g = int(n.attr("group", 1))
    c_in = x.type.shape[1]
    if w.type.shape[0] != c_in or c_in % g:
        raise Reject(f"weight {w.type} does not match {c_in} input channels in {g} groups")
    kernel = [int(s) for s in n.attr("kernel_shape", w.type.shape[2:])]
    if tuple(kernel) != w.type.shape[2:]:
        raise Reject("kernel_shape disagrees with the weight")
    strides = [int(s) for s in n.attr("strides", [1] * k)]
    dil = [int(d) for d in n.attr("dilations", [1] * k)]
    outpad = [int(p) for p in n.attr("output_padding", [0] * k)]
    spatial = x.type.shape[2:]
    eff = [(kk - 1) * d + 1 for kk, d in zip(kernel, dil, strict=False)]
    auto = n.text("auto_pad", "NOTSET")
    if n.has("output_shape"):
        want = [int(s) for s in n.attr("output_shape")][-k:]
        total = [s * (i - 1) + op + e - o
                 for s, i, op, e, o in zip(strides, spatial, outpad, eff, want, strict=False)]
        # a negative total (output_shape past the natural size) extends the end, as in ONNX's
        # reference (Python floor division)
        if auto == "SAME_UPPER":
            pb, pe = [t // 2 for t in total], [t - t // 2 for t in total]
        else:
            pb, pe = [t - t // 2 for t in total], [t // 2 for t in total]
    elif auto in ("SAME_UPPER", "SAME_LOWER"):
        total = [s * (i - 1) + op + e - i * s
                 for s, i, op, e in zip(strides, spatial, outpad, eff, strict=False)]
        total = [max(t, 0) for t in total]
        if auto == "SAME_UPPER":
            pb, pe = [t // 2 for t in total], [t - t // 2 for t in total]
        else:
            pb, pe = [t - t // 2 for t in total], [t // 2 for t in total]
    elif auto in ("NOTSET", "VALID"):
        pads = [int(p) for p in n.attr("pads", [0] * (2 * k))] if auto == "NOTSET" \
            else [0] * (2 * k)
        pb, pe = pads[:k], pads[k:]
    else:
        raise Reject(f"auto_pad={auto!r}")
    if len(strides) != k or len(dil) != k or len(outpad) != k:
        raise Reject("strides/dilations/output_padding do not match the spatial rank")
    if k == 1:
        x = n.reshape(x, x.type.shape[:2] + (1,) + x.type.shape[2:])
        w = n.reshape(w, w.type.shape[:2] + (1,) + w.type.shape[2:])
        strides, dil, outpad, pb, pe, eff = ([1] + strides, [1] + dil, [0] + outpad,
                                             [0] + pb, [0] + pe, [1] + eff)
    nb, c = x.type.shape[:2]
    sp = x.type.shape[2:]
    ks = len(sp)
    # 1. dilate by the stride, one axis at a time: (.., i, 1, ..) padded to (.., i, s, ..),
    #    merged and cropped to (i - 1) * s + 1
    y = x
    for a, s in enumerate(strides):
        if s == 1:
            continue
        ax = a + 2
        shp = y.type.shape
        y = n.reshape(y, shp[:ax + 1] + (1,) + shp[ax + 1:])
        hi = [0] * y.type.rank
        hi[ax + 1] = s - 1
        y = n.emit("pad", [y], {"low": (0,) * y.type.rank, "high": tuple(hi), "value": 0.0})
        y = n.reshape(y, shp[:ax] + (shp[ax] * s,) + shp[ax + 1:])
        y = n.slice_axis(y, ax, 0, (sp[a] - 1) * s + 1)
    # 2. pad by extent - 1 - pads on each side (output_padding adds to the end); crop negatives
    low = [e - 1 - p for e, p in zip(eff, pb, strict=False)]
    high = [e - 1 - p + op for e, p, op in zip(eff, pe, outpad, strict=False)]
    for ax, (lo, hi) in enumerate(zip(low, high, strict=False)):
        a = ax + 2
        lo_c, hi_c = max(-lo, 0), max(-hi, 0)
        if lo_c or hi_c:
            y = n.slice_axis(y, a, lo_c, y.type.shape[a] - hi_c)
    lo_p = tuple(max(v, 0) for v in low)
    hi_p = tuple(max(v, 0) for v in high)
    if any(lo_p + hi_p):
        y = n.emit("pad", [y], {"low": (0, 0) + lo_p, "high": (0, 0) + hi_p, "value": 0.0})
    # 3. the kernel: (C, M/g, k...) -> (M, C/g, k...), flipped spatially
    mg = w.type.shape[1]
    kshape = w.type.shape[2:]
    wk = n.reshape(w, (g, c // g, mg) + kshape)
    wk = n.transpose(wk, (0, 2, 1) + tuple(range(3, 3 + ks)))
    wk = n.reshape(wk, (g * mg, c // g) + kshape)
    for a, kk in enumerate(kshape):
        wk = n.take(wk, a + 2, list(range(kk - 1, -1, -1)))
    if ks == 3:
        od = y.type.shape[2] - eff[0] + 1
        return conv3d(n, y, wk, b, [1, 1, 1], dil, od, g)
    ins = [y, wk] + ([b] if b is not None else [])
    out = n.emit("conv2d", ins, {"stride": (1, 1), "padding": (0, 0),
                                 "dilation": tuple(dil), "groups": g})
    if k == 1:
        out = n.reshape(out, (out.type.shape[0], out.type.shape[1], out.type.shape[3]))
    return out
