"""Converters for ONNX elementwise ops: arithmetic, comparisons, logic, activations, casts."""

from __future__ import annotations

import math
from collections.abc import Callable

from rlx_core.frontend.onnx_import import dtypes as odt
from rlx_core.frontend.onnx_import.context import NodeCtx
from rlx_core.frontend.onnx_import.errors import Reject
from rlx_core.ir import dtypes as dt
from rlx_core.ir.graph import Value

Converter = Callable[[NodeCtx], "Value | list[Value | None]"]


def _same_dtype(n: NodeCtx, *vals: Value) -> None:
    ds = {v.type.dtype for v in vals}
    if len(ds) != 1:
        raise Reject(f"operand dtypes differ ({', '.join(str(v.type) for v in vals)})")


def binary(op: str, *, ints: bool = True, floats: bool = True) -> Converter:
    """An ONNX binary op with multidirectional broadcasting onto the MIR op ``op``."""

    def convert(n: NodeCtx) -> Value:
        a, b = n.x(0), n.x(1)
        _same_dtype(n, a, b)
        d = a.type.dtype
        if (d.is_int and not ints) or (d.is_inexact and not floats):
            raise Reject(f"dtype {d} is not supported")
        return n.binary(op, a, b)

    return convert


def compare(op: str) -> Converter:
    def convert(n: NodeCtx) -> Value:
        a, b = n.x(0), n.x(1)
        _same_dtype(n, a, b)
        return n.binary(op, a, b)

    return convert


def logical(op: str) -> Converter:
    def convert(n: NodeCtx) -> Value:
        a, b = n.x(0), n.x(1)
        if a.type.dtype != dt.bool_ or b.type.dtype != dt.bool_:
            raise Reject("operands must be bool")
        return n.binary(op, a, b)

    return convert


def bitwise(op: str) -> Converter:
    def convert(n: NodeCtx) -> Value:
        a, b = n.x(0), n.x(1)
        _same_dtype(n, a, b)
        if not a.type.dtype.is_int:
            raise Reject(f"bitwise ops need integer operands, got {a.type.dtype}")
        return n.binary(op, a, b)

    return convert


def bitwise_not(n: NodeCtx) -> Value:
    x = n.x(0)
    if not x.type.dtype.is_int:
        raise Reject(f"BitwiseNot needs an integer operand, got {x.type.dtype}")
    return n.emit("logical_not", [x])  # MIR logical_not is bitwise (~x) on integers


def not_(n: NodeCtx) -> Value:
    x = n.x(0)
    if x.type.dtype != dt.bool_:
        raise Reject("Not needs a bool operand")
    return n.emit("logical_not", [x])


def unary(op: str, *, floats_only: bool = True) -> Converter:
    def convert(n: NodeCtx) -> Value:
        x = n.x(0)
        if floats_only:
            n.float_type(x)
        return n.emit(op, [x])

    return convert


def abs_(n: NodeCtx) -> Value:
    x = n.x(0)
    if x.type.dtype.kind is dt.Kind.UINT or x.type.dtype == dt.bool_:
        return x
    return n.emit("abs", [x])


def neg(n: NodeCtx) -> Value:
    x = n.x(0)
    if x.type.dtype.kind is dt.Kind.UINT:
        raise Reject("Neg of an unsigned tensor")
    return n.emit("neg", [x])


def sign(n: NodeCtx) -> Value:
    x = n.x(0)
    if x.type.dtype.kind is dt.Kind.UINT:
        # unsigned: 1 where nonzero (MIR sign's rule for unsigned is not pinned)
        return n.cast(n.emit("ne", [x, n.full_like(0, x)]), x.type.dtype)
    return n.emit("sign", [x])


def reciprocal(n: NodeCtx) -> Value:
    x = n.x(0)
    n.float_type(x)
    return n.emit("div", [n.full_like(1.0, x), x])


def div(n: NodeCtx) -> Value:
    # integer Div truncates toward zero in ONNX's reference and in MIR alike
    a, b = n.x(0), n.x(1)
    _same_dtype(n, a, b)
    return n.binary("div", a, b)


def pow_(n: NodeCtx) -> Value:
    a, b = n.x(0), n.x(1)
    da, db = a.type.dtype, b.type.dtype
    if da == db:
        return n.binary("pow", a, b)
    if da.is_float and db.is_int:
        return n.binary("pow", a, n.cast(b, da))
    if da.is_int and db.is_float:
        # ONNX computes in floating point and casts back to the base type (truncation)
        wide = n.binary("pow", n.cast(a, dt.f64), n.cast(b, dt.f64))
        return n.cast(wide, da)
    if da.is_float and db.is_float:
        wide = dt.f64 if dt.f64 in (da, db) else dt.f32
        return n.cast(n.binary("pow", n.cast(a, wide), n.cast(b, wide)), da)
    if da.is_int and db.is_int:
        return n.binary("pow", a, n.cast(b, da))
    raise Reject(f"Pow of {da} by {db}")


def mod(n: NodeCtx) -> Value:
    a, b = n.x(0), n.x(1)
    _same_dtype(n, a, b)
    a, b = n.same_shape(a, b)
    fmod = int(n.attr("fmod", 0))
    d = a.type.dtype
    if fmod == 1:
        return n.emit("rem", [a, b])  # C fmod: the sign of the dividend
    if not d.is_int and n.version < 28:
        raise Reject("Mod with fmod=0 is only defined for integers before opset 28")
    if d.is_complex or d == dt.bool_:
        raise Reject(f"Mod of {d}")
    r = n.emit("rem", [a, b])
    if d.kind is dt.Kind.UINT:
        return r
    zero = n.full_like(0, r)
    # floor-style (A - floor(A / B) * B): the result takes the divisor's sign
    fix = n.emit("and", [n.emit("ne", [r, zero]),
                         n.emit("ne", [n.emit("lt", [r, zero]), n.emit("lt", [b, zero])])])
    return n.emit("select", [fix, n.emit("add", [r, b]), r])


def variadic(op: str) -> Converter:
    """Max / Min / Sum: fold the inputs pairwise with broadcasting."""

    def convert(n: NodeCtx) -> Value:
        vals = [v for v in n.inputs if v is not None]
        if not vals:
            raise Reject("needs at least one input")
        _same_dtype(n, *vals)
        vals = n.same_shape(*vals)
        out = vals[0]
        for v in vals[1:]:
            out = n.emit(op, [out, v])
        return out

    return convert


def mean(n: NodeCtx) -> Value:
    total = variadic("add")(n)
    assert isinstance(total, Value)  # variadic returns one value (internal invariant)
    count = len([v for v in n.inputs if v is not None])
    n.float_type(total)
    return n.scalar_op("div", total, float(count))


def where(n: NodeCtx) -> Value:
    c, a, b = n.x(0), n.x(1), n.x(2)
    if c.type.dtype != dt.bool_:
        raise Reject("condition must be bool")
    _same_dtype(n, a, b)
    return n.select(c, a, b)


def clip(n: NodeCtx) -> Value:
    x = n.x(0)
    out = x
    lo, hi = n.opt(1), n.opt(2)
    # ONNX applies min(max(x, lo), hi): with lo > hi every element becomes hi
    if lo is not None:
        _same_dtype(n, x, lo)
        if lo.type.rank:
            raise Reject("min must be a scalar")
        out = n.emit("max", [out, n.broadcast(lo, x.type.shape)])
    if hi is not None:
        _same_dtype(n, x, hi)
        if hi.type.rank:
            raise Reject("max must be a scalar")
        out = n.emit("min", [out, n.broadcast(hi, x.type.shape)])
    return out


def cast(n: NodeCtx) -> Value:
    x = n.x(0)
    to = int(n.attr("to"))
    d = odt.to_rlx(to)
    if d is None:
        raise Reject(f"cast to {odt.onnx_type_name(to)}: rlx has no such dtype")
    if int(n.attr("saturate", 1)) != 1 and d.is_float:
        pass  # saturate only affects float8 targets, which are rejected above
    if n.attr("round_mode", b"up") not in (b"up", "up"):
        raise Reject("round_mode other than 'up' (float8/float4 rounding) is not supported")
    return _cast_exact(n, x, d)


def _cast_exact(n: NodeCtx, x: Value, d: dt.DType) -> Value:
    s = x.type.dtype
    # float -> int of out-of-range values (and NaN) is undefined behaviour in ONNX; rlx
    # saturates (NaN -> 0), which is one of the allowed outcomes
    if s.is_complex and not d.is_complex:
        raise Reject(f"cast {s} -> {d} drops the imaginary part")
    return n.cast(x, d)


def cast_like(n: NodeCtx) -> Value:
    if n.attr("round_mode", b"up") not in (b"up", "up"):
        raise Reject("round_mode other than 'up' is not supported")
    return _cast_exact(n, n.x(0), n.x(1).type.dtype)


def identity(n: NodeCtx) -> Value:
    return n.x(0)


# ---- activations ---------------------------------------------------------------------------


def relu(n: NodeCtx) -> Value:
    x = n.x(0)
    if x.type.dtype.kind is dt.Kind.UINT:
        return x
    return n.emit("max", [x, n.full_like(0, x)])


def leaky_relu(n: NodeCtx) -> Value:
    x = n.x(0)
    n.float_type(x)
    alpha = float(n.attr("alpha", 0.01))
    pos = n.emit("gt", [x, n.full_like(0.0, x)])
    return n.emit("select", [pos, x, n.scalar_op("mul", x, alpha)])


def elu(n: NodeCtx) -> Value:
    x = n.x(0)
    n.float_type(x)
    alpha = float(n.attr("alpha", 1.0))
    neg = n.scalar_op("mul", n.scalar_op("sub", n.emit("exp", [x]), 1.0), alpha)
    return n.emit("select", [n.emit("gt", [x, n.full_like(0.0, x)]), x, neg])


def celu(n: NodeCtx) -> Value:
    x = n.x(0)
    n.float_type(x)
    alpha = float(n.attr("alpha", 1.0))
    # max(0, x) + min(0, alpha * (exp(x / alpha) - 1))
    e = n.scalar_op("mul", n.scalar_op("sub", n.emit("exp", [n.scalar_op("div", x, alpha)]),
                                       1.0), alpha)
    return n.emit("add", [n.emit("max", [x, n.full_like(0.0, x)]),
                          n.emit("min", [e, n.full_like(0.0, x)])])


def selu(n: NodeCtx) -> Value:
    x = n.x(0)
    n.float_type(x)
    alpha = float(n.attr("alpha", 1.67326319217681884765625))
    gamma = float(n.attr("gamma", 1.05070102214813232421875))
    neg = n.scalar_op("mul", n.scalar_op("sub", n.emit("exp", [x]), 1.0), alpha)
    y = n.emit("select", [n.emit("gt", [x, n.full_like(0.0, x)]), x, neg])
    return n.scalar_op("mul", y, gamma)


def hard_sigmoid(n: NodeCtx) -> Value:
    x = n.x(0)
    n.float_type(x)
    alpha, beta = float(n.attr("alpha", 0.2)), float(n.attr("beta", 0.5))
    y = n.scalar_op("add", n.scalar_op("mul", x, alpha), beta)
    return n.emit("min", [n.emit("max", [y, n.full_like(0.0, x)]), n.full_like(1.0, x)])


def hard_swish(n: NodeCtx) -> Value:
    x = n.x(0)
    n.float_type(x)
    y = n.scalar_op("add", n.scalar_op("mul", x, 1.0 / 6.0), 0.5)
    y = n.emit("min", [n.emit("max", [y, n.full_like(0.0, x)]), n.full_like(1.0, x)])
    return n.emit("mul", [x, y])


def softplus(n: NodeCtx) -> Value:
    x = n.x(0)
    n.float_type(x)
    return n.emit("log", [n.scalar_op("add", n.emit("exp", [x]), 1.0)])


def softsign(n: NodeCtx) -> Value:
    x = n.x(0)
    n.float_type(x)
    return n.emit("div", [x, n.scalar_op("add", n.emit("abs", [x]), 1.0)])


def thresholded_relu(n: NodeCtx) -> Value:
    x = n.x(0)
    n.float_type(x)
    alpha = float(n.attr("alpha", 1.0))
    keep = n.emit("gt", [x, n.full_like(alpha, x)])
    return n.emit("select", [keep, x, n.full_like(0.0, x)])


def mish(n: NodeCtx) -> Value:
    x = n.x(0)
    n.float_type(x)
    sp = n.emit("log", [n.scalar_op("add", n.emit("exp", [x]), 1.0)])
    return n.emit("mul", [x, n.emit("tanh", [sp])])


def swish(n: NodeCtx) -> Value:
    x = n.x(0)
    n.float_type(x)
    alpha = float(n.attr("alpha", 1.0))
    return n.emit("mul", [x, n.emit("logistic", [n.scalar_op("mul", x, alpha)])])


def gelu(n: NodeCtx) -> Value:
    x = n.x(0)
    n.float_type(x)
    approx = n.attr("approximate", b"none")
    approx = approx.decode() if isinstance(approx, bytes) else approx
    if approx not in ("none", "tanh"):
        raise Reject(f"approximate={approx!r}")
    return n.emit("gelu", [x], {"approximate": approx})


def shrink(n: NodeCtx) -> Value:
    x = n.x(0)
    n.float_type(x)
    bias, lambd = float(n.attr("bias", 0.0)), float(n.attr("lambd", 0.5))
    lo = n.emit("lt", [x, n.full_like(-lambd, x)])
    hi = n.emit("gt", [x, n.full_like(lambd, x)])
    zero = n.full_like(0.0, x)
    y = n.emit("select", [hi, n.scalar_op("sub", x, bias), zero])
    return n.emit("select", [lo, n.scalar_op("add", x, bias), y])


def prelu(n: NodeCtx) -> Value:
    x, slope = n.x(0), n.x(1)
    _same_dtype(n, x, slope)
    # unidirectional broadcasting: the slope broadcasts to x, never the other way
    slope = n.broadcast(slope, x.type.shape)
    neg = n.emit("lt", [x, n.full_like(0, x)])
    return n.emit("select", [neg, n.emit("mul", [x, slope]), x])


# ---- math built from primitives --------------------------------------------------------------


def tan(n: NodeCtx) -> Value:
    x = n.x(0)
    n.float_type(x)
    return n.emit("div", [n.emit("sin", [x]), n.emit("cos", [x])])


def sinh(n: NodeCtx) -> Value:
    x = n.x(0)
    n.float_type(x)
    e, ne = n.emit("exp", [x]), n.emit("exp", [n.emit("neg", [x])])
    return n.scalar_op("mul", n.emit("sub", [e, ne]), 0.5)


def cosh(n: NodeCtx) -> Value:
    x = n.x(0)
    n.float_type(x)
    e, ne = n.emit("exp", [x]), n.emit("exp", [n.emit("neg", [x])])
    return n.scalar_op("mul", n.emit("add", [e, ne]), 0.5)


def asinh(n: NodeCtx) -> Value:
    x = n.x(0)
    n.float_type(x)
    r = n.emit("sqrt", [n.scalar_op("add", n.emit("mul", [x, x]), 1.0)])
    return n.emit("log", [n.emit("add", [x, r])])


def acosh(n: NodeCtx) -> Value:
    x = n.x(0)
    n.float_type(x)
    r = n.emit("sqrt", [n.scalar_op("sub", n.emit("mul", [x, x]), 1.0)])
    return n.emit("log", [n.emit("add", [x, r])])


def atanh(n: NodeCtx) -> Value:
    x = n.x(0)
    n.float_type(x)
    num = n.scalar_op("add", x, 1.0)
    den = n.emit("sub", [n.full_like(1.0, x), x])
    return n.scalar_op("mul", n.emit("log", [n.emit("div", [num, den])]), 0.5)


def is_nan(n: NodeCtx) -> Value:
    x = n.x(0)
    n.float_type(x)
    return n.emit("ne", [x, x])


def is_inf(n: NodeCtx) -> Value:
    x = n.x(0)
    n.float_type(x)
    pos, neg = int(n.attr("detect_positive", 1)), int(n.attr("detect_negative", 1))
    out = n.const(False, dt.bool_, x.type.shape)
    if pos:
        out = n.emit("or", [out, n.emit("eq", [x, n.full_like(math.inf, x)])])
    if neg:
        out = n.emit("or", [out, n.emit("eq", [x, n.full_like(-math.inf, x)])])
    return out
