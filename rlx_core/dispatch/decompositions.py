"""The common IR: every HIR composite op written as MIR primitives, one function per op.

Each decomposition is ``fn(node, inputs, b) -> Value``: ``node`` is the HIR node being lowered,
``inputs`` its operand values (in order) and ``b`` a Builder whose ``loc`` already points at the
HIR node (so every primitive made here keeps the user source line and the HIR origin). The
returned value has exactly the HIR node's type. MIR elementwise ops need equal shapes and
dtypes, so every broadcast and every scalar constant is spelled out.

The table at the bottom (``DECOMPOSITIONS``) is the registry the lowering routes consult; a few
MIR primitives also have a decomposition (``rsqrt`` -> ``1 / sqrt``) so that ``force-common``
has something to move them to.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace

from rlx_core.ir import dtypes as dt
from rlx_core.ir.builder import Builder
from rlx_core.ir.dtypes import DType
from rlx_core.ir.graph import Node, Value, freeze_attrs
from rlx_core.ir.ops.hir import HEADS_SWAP

Decomposition = Callable[[Node, list[Value], Builder], Value]


# ---- small helpers: every one emits plain MIR ----------------------------------------------


def const(b: Builder, value: float | int | complex, like: Value) -> Value:
    """A scalar splat with ``like``'s dtype and shape (MIR has no implicit broadcasting)."""
    return b.emit("constant", [], {"value": value, "shape": like.type.shape,
                                   "dtype": like.type.dtype})


def const_of(b: Builder, value: float | int, dtype: DType, shape: tuple[int, ...]) -> Value:
    return b.emit("constant", [], {"value": value, "shape": shape, "dtype": dtype})


def keep_dims(b: Builder, reduced: Value, full: Value, axis: int) -> Value:
    """Broadcast a value reduced over ``axis`` back to ``full``'s shape."""
    dims = tuple(i for i in range(full.type.rank) if i != axis)
    return b.emit("broadcast_in_dim", [reduced], {"shape": full.type.shape, "dims": dims})


def along(b: Builder, vec: Value, full: Value, axis: int) -> Value:
    """Broadcast a 1-D parameter (weight, bias) along ``axis`` of ``full``."""
    return b.emit("broadcast_in_dim", [vec], {"shape": full.type.shape, "dims": (axis,)})


def axis_of(node: Node, rank: int) -> int:
    return node.attr("axis", -1) % rank


def softmax_parts(b: Builder, x: Value, axis: int) -> tuple[Value, Value]:
    """(x - max, sum(exp(x - max))) along ``axis``; subtracting the max keeps exp finite."""
    m = b.emit("reduce_max", [x], {"axes": (axis,)})
    shifted = b.emit("sub", [x, keep_dims(b, m, x, axis)])
    total = b.emit("reduce_sum", [b.emit("exp", [shifted])], {"axes": (axis,)})
    return shifted, total


def mean_last(b: Builder, x: Value) -> Value:
    """Mean over the last axis, broadcast back to ``x``'s shape."""
    axis = x.type.rank - 1
    s = b.emit("reduce_sum", [x], {"axes": (axis,)})
    s = b.emit("div", [s, const(b, float(x.type.shape[axis]), s)])
    return keep_dims(b, s, x, axis)


def windows(b: Builder, x: Value, kernel: tuple[int, int], stride: tuple[int, int],
            dilation: tuple[int, int], out_hw: tuple[int, int]) -> Value:
    """im2col: every kernel tap of a padded NCHW input, stacked as (N, C, KH*KW, OH, OW).

    Tap (i, j) is the strided slice ``x[:, :, i*dh : i*dh + (OH-1)*sh + 1 : sh, j*dw : ...]``;
    taps are ordered row-major (i outer, j inner), the order an OIHW weight flattens in.
    """
    n, c, _, _ = x.type.shape
    (kh, kw), (sh, sw), (dh, dw), (oh, ow) = kernel, stride, dilation, out_hw
    taps = []
    for i in range(kh):
        for j in range(kw):
            start = (0, 0, i * dh, j * dw)
            limit = (n, c, i * dh + (oh - 1) * sh + 1, j * dw + (ow - 1) * sw + 1)
            tap = b.emit("slice", [x], {"start": start, "limit": limit, "stride": (1, 1, sh, sw)})
            taps.append(b.emit("reshape", [tap], {"shape": (n, c, 1, oh, ow)}))
    return concat_tree(b, taps, 2)


# Concats take at most this many operands, so that one concat (operands + result) fits in the
# 8 storage buffers per stage a WebGPU device guarantees; longer lists concat in a tree.
MAX_CONCAT_OPERANDS = 7


def concat_tree(b: Builder, parts: list[Value], axis: int) -> Value:
    while len(parts) > 1:
        parts = [parts[i] if len(parts[i:i + MAX_CONCAT_OPERANDS]) == 1 else
                 b.emit("concat", parts[i:i + MAX_CONCAT_OPERANDS], {"axis": axis})
                 for i in range(0, len(parts), MAX_CONCAT_OPERANDS)]
    return parts[0]


def pad_hw(b: Builder, x: Value, padding: tuple[int, int], value: float) -> Value:
    ph, pw = padding
    if ph == 0 and pw == 0:
        return x
    return b.emit("pad", [x], {"low": (0, 0, ph, pw), "high": (0, 0, ph, pw), "value": value})


# ---- the decompositions ---------------------------------------------------------------------


def linear(node: Node, ins: list[Value], b: Builder) -> Value:
    """y[..., o] = sum_i x[..., i] * w[o, i] (+ bias[o]): contract x's last axis with w's axis 1."""
    x, w = ins[0], ins[1]
    y = b.emit("dot_general", [x, w], {"contract": ((x.type.rank - 1,), (1,)),
                                        "batch": ((), ())})
    if len(ins) == 3:
        y = b.emit("add", [y, along(b, ins[2], y, y.type.rank - 1)])
    return y


def _rstd(b: Builder, var: Value, eps: float) -> Value:
    """1 / sqrt(var + eps), NaN where var overflowed the dtype: the row's squares passed its
    max, so no value of it can be normalised, and 1/sqrt(inf) = 0 would give a row of zeros
    that looks like an answer. ``var - var`` is 0, or NaN for inf (docs/reliability.md)."""
    rstd = b.emit("rsqrt", [b.emit("add", [var, const(b, eps, var)])])
    return b.emit("add", [rstd, b.emit("sub", [var, var])])


def _widen(b: Builder, ins: list[Value]) -> tuple[list[Value], DType | None]:
    """f16/bf16 operands of a normalisation cast to f32 (and the dtype to cast back to): its
    squares pass f16's max once |x - mean| > 256, as torch computes them in f32 too."""
    d = ins[0].type.dtype
    if d not in (dt.f16, dt.bf16):
        return ins, None
    return [b.emit("cast", [v], {"dtype": dt.f32}) for v in ins], d


def _narrow(b: Builder, y: Value, d: DType | None) -> Value:
    return y if d is None else b.emit("cast", [y], {"dtype": d})


def layer_norm(node: Node, ins: list[Value], b: Builder) -> Value:
    """(x - mean) / sqrt(var + eps) * weight + bias over the last axis; biased variance, as torch."""
    ins, low = _widen(b, ins)
    x = ins[0]
    last = x.type.rank - 1
    centred = b.emit("sub", [x, mean_last(b, x)])
    var = mean_last(b, b.emit("mul", [centred, centred]))
    y = b.emit("mul", [centred, _rstd(b, var, float(node.attr("eps")))])
    if len(ins) >= 2:
        y = b.emit("mul", [y, along(b, ins[1], y, last)])
    if len(ins) == 3:
        y = b.emit("add", [y, along(b, ins[2], y, last)])
    return _narrow(b, y, low)


def rms_norm(node: Node, ins: list[Value], b: Builder) -> Value:
    """x / sqrt(mean(x^2) + eps) * weight over the last axis."""
    ins, low = _widen(b, ins)
    x = ins[0]
    ms = mean_last(b, b.emit("mul", [x, x]))
    y = b.emit("mul", [x, _rstd(b, ms, float(node.attr("eps")))])
    if len(ins) == 2:
        y = b.emit("mul", [y, along(b, ins[1], y, x.type.rank - 1)])
    return _narrow(b, y, low)


def softmax(node: Node, ins: list[Value], b: Builder) -> Value:
    """exp(x - max) / sum(exp(x - max)) along axis."""
    x = ins[0]
    axis = axis_of(node, x.type.rank)
    shifted, total = softmax_parts(b, x, axis)
    return b.emit("div", [b.emit("exp", [shifted]), keep_dims(b, total, x, axis)])


def log_softmax(node: Node, ins: list[Value], b: Builder) -> Value:
    """(x - max) - log(sum(exp(x - max))) along axis: never takes the log of a tiny ratio."""
    x = ins[0]
    axis = axis_of(node, x.type.rank)
    shifted, total = softmax_parts(b, x, axis)
    return b.emit("sub", [shifted, keep_dims(b, b.emit("log", [total]), x, axis)])


def gelu(node: Node, ins: list[Value], b: Builder) -> Value:
    """Exact: 0.5 x (1 + erf(x / sqrt 2)). tanh form: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))."""
    x = ins[0]
    if node.attr("approximate") == "tanh":
        cube = b.emit("mul", [b.emit("mul", [x, x]), x])
        inner = b.emit("add", [x, b.emit("mul", [cube, const(b, 0.044715, x)])])
        inner = b.emit("mul", [inner, const(b, math.sqrt(2.0 / math.pi), x)])
        phi2 = b.emit("add", [const(b, 1.0, x), b.emit("tanh", [inner])])
    else:
        scaled = b.emit("mul", [x, const(b, 1.0 / math.sqrt(2.0), x)])
        phi2 = b.emit("add", [const(b, 1.0, x), b.emit("erf", [scaled])])
    return b.emit("mul", [b.emit("mul", [x, phi2]), const(b, 0.5, x)])


def silu(node: Node, ins: list[Value], b: Builder) -> Value:
    """x * sigmoid(x)."""
    return b.emit("mul", [ins[0], b.emit("logistic", [ins[0]])])


def attention(node: Node, ins: list[Value], b: Builder) -> Value:
    """softmax(q @ k^T * scale + mask) @ v over (batch, heads, seq, dim).

    ``causal`` keeps key j for query i when j <= i (top-left aligned, as torch's
    scaled_dot_product_attention with is_causal=True). ``padding`` takes a (batch, seq_k) mask
    that is truthy where a key is real (HuggingFace ``attention_mask``). Dropped scores become
    the dtype's most negative finite value rather than -inf, so a fully masked row averages v
    uniformly instead of producing NaN (the reference semantics pin this).
    """
    q, k, v = heads_first(node, ins[:3], b)
    scale = float(node.attr("scale")) or 1.0 / math.sqrt(q.type.shape[3])
    scores = b.emit("dot_general", [q, k], {"contract": ((3,), (3,)), "batch": ((0, 1), (0, 1))})
    scores = b.emit("mul", [scores, const(b, scale, scores)])
    scores = mask_scores(b, node.attr("mask"), scores, ins[3] if len(ins) == 4 else None)
    # the HIR softmax, legalized in turn: a target that keeps it whole (the CPU's row kernel)
    # reads each row of scores once; elsewhere it decomposes as softmax() below
    probs = b.emit("softmax", [scores], {"axis": 3})
    out = b.emit("dot_general", [probs, v], {"contract": ((3,), (2,)), "batch": ((0, 1), (0, 1))})
    return heads_back(node, out, b)


def heads_first(node: Node, qkv: list[Value], b: Builder) -> list[Value]:
    """attention's q, k, v in (batch, heads, seq, dim): layout bshd operands are transposed
    (views the matmuls read in place, see algebraic_simplify.dot_of_transpose)."""
    if node.attr("layout") != "bshd":
        return list(qkv)
    return [b.emit("transpose", [x], {"perm": HEADS_SWAP}) for x in qkv]


def heads_back(node: Node, out: Value, b: Builder) -> Value:
    """attention's (batch, heads, seq, dim) result in the node's layout."""
    if node.attr("layout") != "bshd":
        return out
    return b.emit("transpose", [out], {"perm": HEADS_SWAP})


def mask_scores(b: Builder, mask: str, scores: Value, operand: Value | None) -> Value:
    """Apply attention's mask to (B, H, Sq, Sk) scores: the lowest finite value where a key
    must not be seen."""
    shape = scores.type.shape
    if mask == "causal":
        row = b.emit("iota", [], {"shape": shape, "dim": 2, "dtype": dt.i32})
        col = b.emit("iota", [], {"shape": shape, "dim": 3, "dtype": dt.i32})
        keep = b.emit("ge", [row, col])
    elif mask == "padding" and operand is not None:
        keep = b.emit("broadcast_in_dim", [operand], {"shape": shape, "dims": (0, 3)})
        if operand.type.dtype != dt.bool_:
            keep = b.emit("ne", [keep, const(b, 0, keep)])
    else:
        return scores
    low = LOWEST_FINITE[scores.type.dtype.name]
    return b.emit("select", [keep, scores, const(b, low, scores)])


# The most negative finite value per float dtype: what a masked attention score becomes.
LOWEST_FINITE: dict[str, float] = {
    "f16": -65504.0,
    "bf16": -3.3895313892515355e38,
    "f32": -3.4028234663852886e38,
    "f64": -1.7976931348623157e308,
}


def embedding(node: Node, ins: list[Value], b: Builder) -> Value:
    """table[ids]: a gather of rows."""
    ids, table = ins
    return b.emit("gather", [table, ids], {"axis": 0})


def conv2d(node: Node, ins: list[Value], b: Builder) -> Value:
    """NCHW x OIHW as GEMMs over im2col columns; a depthwise conv as a sum of weighted taps.

    - groups == 1: cols (N, C*KH*KW, OH*OW) (the input itself for a 1x1 stride-1 conv: no
      copy) contracted with w (O, C*KH*KW). At N == 1 the product (O, OH*OW) already is the
      NCHW result, so nothing is transposed and the bias (and what follows) can run as the
      GEMM's epilogue; at N > 1 the (O, N, OH*OW) product is transposed once.
    - depthwise (one filter per channel): sum over the KH*KW taps of tap * w[:, 0, i, j]: an
      elementwise chain instead of C GEMMs of one row.
    - other groups: one dot_general with the group as batch axis, transposed back.
    """
    x, w = ins[0], ins[1]
    n, c, _, _ = x.type.shape
    o, cg, kh, kw = w.type.shape
    g = int(node.attr("groups"))
    oh, ow = node.out.type.shape[2:]
    stride, padding = tuple(node.attr("stride")), tuple(node.attr("padding"))
    dilation = tuple(node.attr("dilation"))
    if g > 1 and cg == 1 and o == g:
        y = _depthwise(b, x, w, stride, padding, dilation, (oh, ow))
    elif g == 1:
        # w is contracted over its (C, KH, KW) axes as it is: contiguous, so the GEMM reads
        # the weight in place (a reshaped parameter would be copied on every call)
        p = oh * ow
        if (kh, kw) == (1, 1) and stride == (1, 1) and padding == (0, 0):
            cols = x
        else:
            cols = windows(b, pad_hw(b, x, padding, 0.0), (kh, kw), stride, dilation, (oh, ow))
        if n == 1:
            cols = b.emit("reshape", [cols], {"shape": (c, kh, kw, p)})
            y = b.emit("dot_general", [w, cols], {"contract": ((1, 2, 3), (0, 1, 2)),
                                                   "batch": ((), ())})
        else:
            cols = b.emit("reshape", [cols], {"shape": (n, c, kh, kw, p)})
            y = b.emit("dot_general", [w, cols], {"contract": ((1, 2, 3), (1, 2, 3)),
                                                   "batch": ((), ())})
            y = b.emit("transpose", [y], {"perm": (1, 0, 2)})
        y = b.emit("reshape", [y], {"shape": (n, o, oh, ow)})
    else:
        xp = pad_hw(b, x, padding, 0.0)
        cols = windows(b, xp, (kh, kw), stride, dilation, (oh, ow))
        cols = b.emit("reshape", [cols], {"shape": (n, g, cg * kh * kw, oh, ow)})
        wm = b.emit("reshape", [w], {"shape": (g, o // g, cg * kh * kw)})
        y = b.emit("dot_general", [wm, cols], {"contract": ((2,), (2,)),
                                                "batch": ((0,), (1,))})
        y = b.emit("transpose", [y], {"perm": (2, 0, 1, 3, 4)})
        y = b.emit("reshape", [y], {"shape": (n, o, oh, ow)})
    if len(ins) == 3:
        y = b.emit("add", [y, along(b, ins[2], y, 1)])
    return y


def conv2d_fused(node: Node, ins: list[Value], b: Builder) -> Value:
    """act(conv2d(x, w, b) + residual): the convolution above, then its epilogue."""
    residual = bool(node.attr("residual"))
    y = conv2d(node, ins[:len(ins) - int(residual)], b)
    if residual:
        y = b.emit("add", [y, ins[-1]])
    return _conv_act(node, y, b)


def conv2d_pair(node: Node, ins: list[Value], b: Builder) -> Value:
    """act(conv2d(x, w, b) + conv2d(x2, w2, b2)): both convolutions above, summed, then act."""
    second = replace(node, attrs=freeze_attrs({**node.a, "stride": node.attr("stride2"),
                                               "padding": (0, 0), "dilation": (1, 1),
                                               "groups": 1}))
    y = b.emit("add", [conv2d(node, ins[:3], b), conv2d(second, ins[3:], b)])
    return _conv_act(node, y, b)


def _conv_act(node: Node, y: Value, b: Builder) -> Value:
    """A fused convolution's act on y: none, max(., lo), min(., hi) or clip."""
    act = str(node.attr("act"))
    if act in ("max", "clip"):
        y = b.emit("max", [y, const(b, float(node.attr("lo")), y)])
    if act in ("min", "clip"):
        y = b.emit("min", [y, const(b, float(node.attr("hi")), y)])
    return y


def _depthwise(b: Builder, x: Value, w: Value, stride: tuple[int, ...],
               padding: tuple[int, ...], dilation: tuple[int, ...],
               out_hw: tuple[int, int]) -> Value:
    """sum over taps (i, j) of x_padded[:, :, i*dh + s*oy, j*dw + s*ox] * w[:, 0, i, j].

    f16/bf16 taps are summed in f32 and rounded once, as a dot_general accumulates: rounded
    after every tap, a 3-tap f16 causal conv missed the ONNX node test's tolerance."""
    (x, w), low = _widen(b, [x, w])
    n, c, _, _ = x.type.shape
    _, _, kh, kw = w.type.shape
    (sh, sw), (dh, dw), (oh, ow) = stride, dilation, out_hw
    xp = pad_hw(b, x, padding, 0.0)
    acc = None
    for i in range(kh):
        for j in range(kw):
            tap = b.emit("slice", [xp], {"start": (0, 0, i * dh, j * dw),
                                         "limit": (n, c, i * dh + (oh - 1) * sh + 1,
                                                   j * dw + (ow - 1) * sw + 1),
                                         "stride": (1, 1, sh, sw)})
            wt = b.emit("slice", [w], {"start": (0, 0, i, j), "limit": (c, 1, i + 1, j + 1),
                                       "stride": (1, 1, 1, 1)})
            wt = b.emit("reshape", [wt], {"shape": (c,)})
            term = b.emit("mul", [tap, along(b, wt, tap, 1)])
            acc = term if acc is None else b.emit("add", [acc, term])
    assert acc is not None
    return _narrow(b, acc, low)


def pool_taps(b: Builder, x: Value, kernel: tuple[int, int], stride: tuple[int, int],
              out_hw: tuple[int, int], op: str) -> Value:
    """Every window tap of a padded NCHW input combined with ``op`` (max or add), one
    spatial axis at a time: kh + kw strided slices, not kh * kw, and no stacked taps (the
    ONNX importer's form of an N-d window, onnx_import/ops/conv.py _pool_reduce)."""
    y = x
    for axis, kk, s, o in ((2, kernel[0], stride[0], out_hw[0]), (3, kernel[1], stride[1], out_hw[1])):
        acc = None
        for t in range(kk):
            start, limit, step = [0] * 4, list(y.type.shape), [1] * 4
            start[axis], limit[axis], step[axis] = t, t + (o - 1) * s + 1, s
            tap = y if (t, limit[axis], s) == (0, y.type.shape[axis], 1) else b.emit(
                "slice", [y], {"start": tuple(start), "limit": tuple(limit), "stride": tuple(step)})
            acc = tap if acc is None else b.emit(op, [acc, tap])
        assert acc is not None
        y = acc
    return y


def max_pool2d(node: Node, ins: list[Value], b: Builder) -> Value:
    """Pad with -inf (the dtype's least value for i8 / u8): padding never wins the max, as in
    torch; then the max of the taps."""
    oh, ow = node.out.type.shape[2:]
    d = ins[0].type.dtype
    low = -math.inf if d.is_float else -(1 << (d.bits - 1)) if d.name == "i8" else 0
    xp = pad_hw(b, ins[0], tuple(node.attr("padding")), low)
    return pool_taps(b, xp, tuple(node.attr("kernel")), tuple(node.attr("stride")), (oh, ow),
                     "max")


def avg_pool2d(node: Node, ins: list[Value], b: Builder) -> Value:
    """Pad with zeros, sum the taps, divide by KH*KW (torch's count_include_pad=True default)."""
    oh, ow = node.out.type.shape[2:]
    kh, kw = node.attr("kernel")
    xp = pad_hw(b, ins[0], tuple(node.attr("padding")), 0.0)
    total = pool_taps(b, xp, (kh, kw), tuple(node.attr("stride")), (oh, ow), "add")
    return b.emit("div", [total, const(b, float(kh * kw), total)])


# ---- MIR primitives with a common-IR spelling (what force-common moves them to) ------------


def rsqrt(node: Node, ins: list[Value], b: Builder) -> Value:
    """1 / sqrt(x)."""
    return b.emit("div", [const(b, 1.0, ins[0]), b.emit("sqrt", [ins[0]])])


def reciprocal(node: Node, ins: list[Value], b: Builder) -> Value:
    """1 / x."""
    return b.emit("div", [const(b, 1.0, ins[0]), ins[0]])


def logistic(node: Node, ins: list[Value], b: Builder) -> Value:
    """1 / (1 + exp(-x))."""
    e = b.emit("exp", [b.emit("neg", [ins[0]])])
    return b.emit("div", [const(b, 1.0, ins[0]), b.emit("add", [const(b, 1.0, ins[0]), e])])


# op -> decomposition. Every HIR op has one; the MIR rows only exist so force-common can move a
# claimed primitive to simpler primitives.
DECOMPOSITIONS: dict[str, Decomposition] = {
    "linear": linear,
    "layer_norm": layer_norm,
    "rms_norm": rms_norm,
    "softmax": softmax,
    "log_softmax": log_softmax,
    "gelu": gelu,
    "silu": silu,
    "attention": attention,
    "embedding": embedding,
    "conv2d": conv2d,
    "conv2d_fused": conv2d_fused,
    "conv2d_pair": conv2d_pair,
    "max_pool2d": max_pool2d,
    "avg_pool2d": avg_pool2d,
    "rsqrt": rsqrt,
    "reciprocal": reciprocal,
    "logistic": logistic,
}


# the quantization ops' decompositions live in their own file
from rlx_core.dispatch.quant_decompositions import QUANT_DECOMPOSITIONS  # noqa: E402

DECOMPOSITIONS.update(QUANT_DECOMPOSITIONS)


def decomposition_for(op: str) -> Decomposition | None:
    return DECOMPOSITIONS.get(op)
