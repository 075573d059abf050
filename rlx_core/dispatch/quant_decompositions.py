"""The quantization ops (rlx_core/ir/ops/quant.py) written as MIR primitives.

Each follows its reference rule (targets/numpy_ref/quant_semantics.py) step for step, in the
same dtype, so a target that runs the primitives matches the reference bit for bit:
``quantize`` is f32 ``div``, ``round`` (half to even), ``add``, ``max``, ``min``, ``cast``;
``requantize`` is TFLite's fixed-point multiply in i64 with C's truncating ``div``, where
``>>`` is an exact ``div`` of ``x - (x & mask)``.
"""

from __future__ import annotations

from collections.abc import Callable

import rlx_core.dispatch.decompositions as common  # a module object: the two import each other
from rlx_core.ir import dtypes as dt
from rlx_core.ir.builder import Builder
from rlx_core.ir.graph import Node, Value
from rlx_core.ir.ops.quant import qrange

Decomposition = Callable[[Node, list[Value], Builder], Value]


def const(b: Builder, value: float | int, like: Value) -> Value:
    return common.const(b, value, like)


def _along(b: Builder, p: Value, like: Value, axis: int) -> Value:
    """A () or (C,) parameter broadcast to ``like``'s shape (per tensor or along ``axis``)."""
    dims = () if p.type.rank == 0 else (axis % like.type.rank,)
    return b.emit("broadcast_in_dim", [p], {"shape": like.type.shape, "dims": dims})


def _per_channel(b: Builder, vals: tuple[int, ...], like: Value, axis: int) -> Value:
    """i64 constants, one per channel along ``axis`` (or one splat), shaped like ``like``."""
    if len(set(vals)) == 1:
        return const(b, int(vals[0]), like)
    vec = b.emit("constant", [], {"value": tuple(int(v) for v in vals), "shape": (len(vals),),
                                  "dtype": like.type.dtype})
    return _along(b, vec, like, axis)


def _clamp_cast(b: Builder, y: Value, dtype: object) -> Value:
    lo, hi = qrange(dtype)
    y = b.emit("max", [y, const(b, lo if y.type.dtype.is_int else float(lo), y)])
    y = b.emit("min", [y, const(b, hi if y.type.dtype.is_int else float(hi), y)])
    return b.emit("cast", [y], {"dtype": dt.get(dtype)})


def quantize(node: Node, ins: list[Value], b: Builder) -> Value:
    x, scale, zp = ins
    axis = node.attr("axis")
    q = b.emit("round", [b.emit("div", [x, _along(b, scale, x, axis)])])
    zf = b.emit("cast", [_along(b, zp, x, axis)], {"dtype": dt.f32})
    return _clamp_cast(b, b.emit("add", [q, zf]), node.attr("dtype"))


def dequantize(node: Node, ins: list[Value], b: Builder) -> Value:
    q, scale, zp = ins
    axis = node.attr("axis")
    wide = q if q.type.dtype == dt.i32 else b.emit("cast", [q], {"dtype": dt.i32})
    diff = b.emit("sub", [wide, _along(b, zp, wide, axis)])
    f = b.emit("cast", [diff], {"dtype": dt.f32})
    return b.emit("mul", [f, _along(b, scale, f, axis)])


def requantize(node: Node, ins: list[Value], b: Builder) -> Value:
    axis = node.attr("axis")
    mult, shift = node.attr("multiplier"), node.attr("shift")
    x = b.emit("cast", [ins[0]], {"dtype": dt.i64})

    def k(vals: list[int]) -> Value:
        return _per_channel(b, tuple(vals), x, axis)

    def where(pred: Value, yes: int, no: int) -> Value:
        return b.emit("select", [pred, const(b, yes, x), const(b, no, x)])

    left = [max(s, 0) for s in shift]
    right = [max(-s, 0) for s in shift]
    if any(left):  # x * 2^left wraps in i32, as TFLite's int32 product does
        x = b.emit("mul", [x, k([1 << s for s in left])])
        x = b.emit("cast", [b.emit("cast", [x], {"dtype": dt.i32})], {"dtype": dt.i64})
    # SaturatingRoundingDoublingHighMul(x, m): trunc((x * m + nudge) / 2^31)
    ab = b.emit("mul", [x, k(list(mult))])
    nudge = where(b.emit("ge", [ab, const(b, 0, ab)]), 1 << 30, 1 - (1 << 30))
    h = b.emit("div", [b.emit("add", [ab, nudge]), const(b, 1 << 31, ab)])
    if any(right):  # RoundingDivideByPOT(h, right): ties away from zero
        mask = k([(1 << r) - 1 for r in right])
        rem = b.emit("and", [h, mask])
        threshold = b.emit("add", [k([((1 << r) - 1) >> 1 for r in right]),
                                   where(b.emit("lt", [h, const(b, 0, h)]), 1, 0)])
        floor = b.emit("div", [b.emit("sub", [h, rem]), k([1 << r for r in right])])
        h = b.emit("add", [floor, where(b.emit("gt", [rem, threshold]), 1, 0)])
    y = b.emit("add", [h, const(b, int(node.attr("zero_point")), h)])
    return _clamp_cast(b, y, node.attr("dtype"))


def _centred(b: Builder, v: Value, zp: int) -> Value:
    """``v - zp`` in i32 (exact: i8/u8 minus a zero point in their range)."""
    w = b.emit("cast", [v], {"dtype": dt.i32})
    return b.emit("sub", [w, const(b, zp, w)]) if zp else w


def int_linear(node: Node, ins: list[Value], b: Builder) -> Value:
    x = _centred(b, ins[0], node.attr("a_zero_point"))
    w = _centred(b, ins[1], node.attr("b_zero_point"))
    y = b.emit("dot_general", [x, w], {"contract": ((x.type.rank - 1,), (1,)),
                                        "batch": ((), ())})
    if len(ins) == 3:
        y = b.emit("add", [y, _along(b, ins[2], y, -1)])
    return y


def int_conv2d(node: Node, ins: list[Value], b: Builder) -> Value:
    """``conv2d``'s decomposition (im2col GEMM, depthwise taps, grouped GEMM) on the centred
    i32 operands: padding the centred input with 0 is padding the input with its zero point,
    and i32 products and sums wrap as the reference's one final wrap does."""
    x = _centred(b, ins[0], node.attr("a_zero_point"))
    w = _centred(b, ins[1], node.attr("b_zero_point"))
    return common.conv2d(node, [x, w, *ins[2:]], b)


def int4_linear(node: Node, ins: list[Value], b: Builder) -> Value:
    """Unpack the nibbles with u8 ``and`` / ``div``, dequantize per group, then ``linear``'s
    contraction: the weight is materialised (targets with a kernel of their own avoid that)."""
    x, packed, scale = ins[:3]
    n, half = packed.type.shape
    k, g = half * 2, node.attr("group")
    lo = b.emit("and", [packed, const(b, 15, packed)])
    hi = b.emit("div", [packed, const(b, 16, packed)])
    pair = [b.emit("reshape", [v], {"shape": (n, half, 1)}) for v in (lo, hi)]
    codes = b.emit("reshape", [b.emit("concat", pair, {"axis": 2})], {"shape": (n, k)})
    q = b.emit("cast", [codes], {"dtype": dt.f32})
    if len(ins) == 3:  # signed codes: 8..15 stand for -8..-1
        q = b.emit("select", [b.emit("ge", [q, const(b, 8.0, q)]),
                              b.emit("sub", [q, const(b, 16.0, q)]), q])
    q = b.emit("reshape", [q], {"shape": (n, k // g, g)})
    dims = {"shape": (n, k // g, g), "dims": (0, 1)}
    if len(ins) == 4:
        zf = b.emit("cast", [ins[3]], {"dtype": dt.f32})
        q = b.emit("sub", [q, b.emit("broadcast_in_dim", [zf], dims)])
    w = b.emit("mul", [q, b.emit("broadcast_in_dim", [scale], dims)])
    w = b.emit("reshape", [w], {"shape": (n, k)})
    return b.emit("dot_general", [x, w], {"contract": ((x.type.rank - 1,), (1,)),
                                           "batch": ((), ())})


def _epilogue(node: Node, ins: list[Value]) -> tuple[list[Value], Value | None]:
    """The inputs without the residual, and the residual (None without one)."""
    return (ins[:-1], ins[-1]) if node.attr("residual") else (ins, None)


def _act_residual(node: Node, y: Value, r: Value | None, b: Builder) -> Value:
    """The store's epilogue: the HIR ``gelu`` (legalized in turn), then ``+ residual``."""
    if node.attr("act") == "gelu":
        y = b.emit("gelu", [y], {"approximate": "none"})
    return b.emit("add", [y, r]) if r is not None else y


def dynamic_int_linear(node: Node, ins: list[Value], b: Builder) -> Value:
    """The chain quantize_dynamic(granularity="token") writes (and this op was folded from):
    per-row scale, quantize, int_linear, dequantize by the weight scale, times the row scale,
    plus the bias; the quantize / int_linear / dequantize of this module, step for step."""
    ins, res = _epilogue(node, ins)
    x, w, ws = ins[:3]
    n, k = w.type.shape
    lead = x.type.shape[:-1]
    rows = 1
    for d in lead:
        rows *= d
    x2 = b.emit("reshape", [x], {"shape": (rows, k)})
    amax = b.emit("reduce_max", [b.emit("abs", [x2])], {"axes": (1,)})
    s = b.emit("div", [b.emit("max", [amax, const(b, 1e-30, amax)]),
                       const(b, float(node.attr("a_qmax")), amax)])
    q = b.emit("round", [b.emit("div", [x2, _along(b, s, x2, 0)])])
    q = _clamp_cast(b, q, dt.i8)  # + f32(zero point 0) folds away
    acc = b.emit("dot_general", [b.emit("cast", [q], {"dtype": dt.i32}),
                                 b.emit("cast", [w], {"dtype": dt.i32})],
                 {"contract": ((1,), (1,)), "batch": ((), ())})
    f = b.emit("cast", [acc], {"dtype": dt.f32})
    y = b.emit("mul", [f, _along(b, ws, f, -1)])
    y = b.emit("mul", [y, _along(b, s, y, 0)])
    if len(ins) == 4:
        y = b.emit("add", [y, _along(b, ins[3], y, -1)])
    return _act_residual(node, b.emit("reshape", [y], {"shape": lead + (n,)}), res, b)


def static_int_linear(node: Node, ins: list[Value], b: Builder) -> Value:
    """quantize_static's chain: quantize with the fixed parameters (the clamp to
    ``[a_qmin, a_qmax]`` in f32, the cast's NaN -> 0, that 0 clamped again), ``int_linear``'s
    contraction of the centred codes (+ the i32 bias), ``f32(acc) * acc_scale``."""
    ins, res = _epilogue(node, ins)
    x, w, scale = ins[:3]
    lo, hi, zp = node.attr("a_qmin"), node.attr("a_qmax"), node.attr("a_zero_point")
    q = b.emit("round", [b.emit("div", [x, const(b, float(node.attr("a_scale")), x)])])
    if zp:
        q = b.emit("add", [q, const(b, float(zp), q)])
    q = b.emit("max", [q, const(b, float(lo), q)])
    q = b.emit("min", [q, const(b, float(hi), q)])
    q = b.emit("cast", [q], {"dtype": dt.i32})
    if not lo <= 0 <= hi:  # a NaN's 0 from the cast is clamped too
        q = b.emit("min", [b.emit("max", [q, const(b, lo, q)]), const(b, hi, q)])
    if zp:
        q = b.emit("sub", [q, const(b, zp, q)])
    y = b.emit("dot_general", [q, b.emit("cast", [w], {"dtype": dt.i32})],
               {"contract": ((q.type.rank - 1,), (1,)), "batch": ((), ())})
    if len(ins) == 4:
        y = b.emit("add", [y, _along(b, ins[3], y, -1)])
    f = b.emit("cast", [y], {"dtype": dt.f32})
    return _act_residual(node, b.emit("mul", [f, _along(b, scale, f, -1)]), res, b)


def requantized_int_linear(node: Node, ins: list[Value], b: Builder) -> Value:
    """The chain it was folded from: [``quantize`` -> clamps, for an f32 input]
    ``int_linear`` -> ``requantize`` (along the last axis)
    -> ``max(qmin)`` / ``min(qmax)`` where they narrow the dtype (HIR ops, legalized in turn)."""
    if ins[0].type.dtype == dt.f32:  # quantize_static's codes: quantize, then the clamps
        lo, hi = node.attr("a_qmin"), node.attr("a_qmax")
        code = dt.u8 if lo >= 0 else dt.i8

        def scalar(v: float | int, dtype: dt.DType) -> Value:
            return b.emit("constant", [], {"value": v, "shape": (), "dtype": dtype})

        q = b.emit("quantize", [ins[0], scalar(float(node.attr("a_scale")), dt.f32),
                                scalar(int(node.attr("a_zero_point")), dt.i32)],
                   {"dtype": code})
        dlo, dhi = qrange(code)
        if lo > dlo:
            q = b.emit("max", [q, const(b, lo, q)])
        if hi < dhi:
            q = b.emit("min", [q, const(b, hi, q)])
        ins = [q, *ins[1:]]
    acc = b.emit("int_linear", ins, {"a_zero_point": node.attr("a_zero_point"),
                                     "b_zero_point": 0})
    y = b.emit("requantize", [acc], {k: node.attr(k) for k in (
        "multiplier", "shift", "zero_point", "dtype")} | {"axis": -1})
    lo, hi = qrange(node.attr("dtype"))
    if node.attr("qmin") > lo:
        y = b.emit("max", [y, const(b, node.attr("qmin"), y)])
    if node.attr("qmax") < hi:
        y = b.emit("min", [y, const(b, node.attr("qmax"), y)])
    return y


def fake_quantize(node: Node, ins: list[Value], b: Builder) -> Value:
    x, scale, zp = ins
    axis = node.attr("axis")
    s, z = _along(b, scale, x, axis), _along(b, zp, x, axis)
    q = b.emit("add", [b.emit("round", [b.emit("div", [x, s])]), z])
    q = b.emit("max", [q, const(b, float(node.attr("qmin")), q)])
    q = b.emit("min", [q, const(b, float(node.attr("qmax")), q)])
    return b.emit("mul", [b.emit("sub", [q, z]), s])


QUANT_DECOMPOSITIONS: dict[str, Decomposition] = {
    "quantize": quantize,
    "dequantize": dequantize,
    "requantize": requantize,
    "int_linear": int_linear,
    "int_conv2d": int_conv2d,
    "int4_linear": int4_linear,
    "fake_quantize": fake_quantize,
    "dynamic_int_linear": dynamic_int_linear,
    "static_int_linear": static_int_linear,
    "requantized_int_linear": requantized_int_linear,
}
