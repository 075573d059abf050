"""Converters for ONNX neural-network ops: MatMul, Gemm, Softmax, normalizations, Dropout."""

from __future__ import annotations

from rlx_core.frontend.onnx_import.context import NodeCtx
from rlx_core.frontend.onnx_import.errors import Reject
from rlx_core.ir import dtypes as dt
from rlx_core.ir.graph import Value


def _check_dot_dtype(a: Value, b: Value) -> None:
    if a.type.dtype != b.type.dtype:
        raise Reject(f"operand dtypes differ ({a.type}, {b.type})")
    if a.type.dtype == dt.bool_:
        raise Reject("bool matmul")


def matmul_values(n: NodeCtx, a: Value, b: Value) -> Value:
    """numpy.matmul: 1-D operands are promoted and the added axis dropped; batch axes
    broadcast."""
    _check_dot_dtype(a, b)
    a_vec, b_vec = a.type.rank == 1, b.type.rank == 1
    if a.type.rank == 0 or b.type.rank == 0:
        raise Reject("MatMul of a scalar")
    if a_vec:
        a = n.reshape(a, (1, a.type.shape[0]))
    if b_vec:
        b = n.reshape(b, (b.type.shape[0], 1))
    if a.type.shape[-1] != b.type.shape[-2]:
        raise Reject(f"cannot multiply {a.type} by {b.type}")
    from rlx_core.ir.ops.base import broadcast_shapes

    try:
        batch = broadcast_shapes("MatMul", a.type.shape[:-2], b.type.shape[:-2])
    except Exception as err:  # noqa: BLE001 - a ShapeError: reported as a rejection
        raise Reject(str(err)) from None
    a = n.broadcast(a, batch + a.type.shape[-2:])
    b = n.broadcast(b, batch + b.type.shape[-2:])
    k = len(batch)
    bd = tuple(range(k))
    y = n.emit("dot_general", [a, b], {"contract": ((k + 1,), (k,)), "batch": (bd, bd)})
    shape = list(y.type.shape)
    if b_vec:
        shape.pop(-1)
    if a_vec:
        shape.pop(-2 if not b_vec else -1)
    return n.reshape(y, shape)


def matmul(n: NodeCtx) -> Value:
    return matmul_values(n, n.x(0), n.x(1))


def gemm(n: NodeCtx) -> Value:
    a, b, c = n.x(0), n.x(1), n.opt(2)
    _check_dot_dtype(a, b)
    if a.type.rank != 2 or b.type.rank != 2:
        raise Reject("A and B must be 2-D")
    alpha, beta = float(n.attr("alpha", 1.0)), float(n.attr("beta", 1.0))
    ta, tb = int(n.attr("transA", 0)), int(n.attr("transB", 0))
    ca = 0 if ta else 1
    cb = 1 if tb else 0
    if a.type.shape[ca] != b.type.shape[cb]:
        raise Reject(f"cannot multiply {a.type} by {b.type} (transA={ta}, transB={tb})")
    y = n.emit("dot_general", [a, b], {"contract": ((ca,), (cb,))})
    is_float = a.type.dtype.is_inexact
    if alpha != 1.0:
        if not is_float and alpha != int(alpha):
            raise Reject("fractional alpha with integer operands")
        y = n.scalar_op("mul", y, alpha if is_float else int(alpha))
    if c is not None and beta != 0.0:
        if c.type.dtype != y.type.dtype:
            raise Reject("C has another dtype")
        cc = n.broadcast(c, y.type.shape)  # unidirectional: C broadcasts to (M, N)
        if beta != 1.0:
            if not is_float and beta != int(beta):
                raise Reject("fractional beta with integer operands")
            cc = n.scalar_op("mul", cc, beta if is_float else int(beta))
        y = n.emit("add", [y, cc])
    return y


def softmax(op: str):
    def convert(n: NodeCtx) -> Value:
        x = n.x(0)
        n.float_type(x)
        ax = n.axis(int(n.attr("axis", -1)), x.type.rank)
        if x.type.rank == 0:
            raise Reject("softmax of a scalar")
        return n.emit(op, [x], {"axis": ax})

    return convert


def hardmax(n: NodeCtx) -> Value:
    x = n.x(0)
    return hardmax_values(n, x, n.axis(int(n.attr("axis", -1)), x.type.rank))


def hardmax_values(n: NodeCtx, x: Value, ax: int) -> Value:
    """One-hot of the first maximum along ``ax``."""
    idx = n.emit("argmax", [x], {"axis": ax, "index_dtype": dt.i64})
    dims = tuple(i for i in range(x.type.rank) if i != ax)
    bidx = n.emit("broadcast_in_dim", [idx], {"shape": x.type.shape, "dims": dims})
    ramp = n.emit("iota", [], {"shape": x.type.shape, "dim": ax, "dtype": dt.i64})
    return n.cast(n.emit("eq", [bidx, ramp]), x.type.dtype)


def _along(n: NodeCtx, v: Value, like: Value, axis: int) -> Value:
    """A 1-D per-channel vector broadcast along ``axis`` of ``like``."""
    if v.type.shape != (like.type.shape[axis],):
        raise Reject(f"parameter {v.type} must be [{like.type.shape[axis]}]")
    return n.emit("broadcast_in_dim", [v], {"shape": like.type.shape, "dims": (axis,)})


def _moments(n: NodeCtx, x: Value, axes: tuple[int, ...]) -> tuple[Value, Value]:
    """Mean and biased variance over ``axes``, both kept broadcastable (keepdims) and
    broadcast back to ``x``'s shape."""
    count = 1
    for a in axes:
        count *= x.type.shape[a]
    mean = n.scalar_op("div", n.reduce("reduce_sum", x, axes, True), float(count))
    mean_b = n.broadcast(mean, x.type.shape)
    d = n.emit("sub", [x, mean_b])
    var = n.scalar_op("div", n.reduce("reduce_sum", n.emit("mul", [d, d]), axes, True),
                      float(count))
    return mean, var


def batch_norm(n: NodeCtx) -> Value:
    x, scale, bias, mean, var = (n.x(i) for i in range(5))
    n.float_type(x)
    if int(n.attr("training_mode", 0)):
        raise Reject("training_mode=1 (batch statistics and running-mean outputs)")
    if any(n.output_wanted(i) for i in (1, 2)):
        raise Reject("running mean/var outputs are only produced in training mode")
    if x.type.rank < 2:
        raise Reject("needs (N, C, ...) input")
    eps = float(n.attr("epsilon", 1e-5))
    vals = []
    for v in (scale, bias, mean, var):
        vals.append(n.cast(v, x.type.dtype) if v.type.dtype != x.type.dtype else v)
    scale, bias, mean, var = (_along(n, v, x, 1) for v in vals)
    inv = n.emit("rsqrt", [n.scalar_op("add", var, eps)])
    return n.emit("add", [n.emit("mul", [n.emit("mul", [n.emit("sub", [x, mean]), inv]),
                                         scale]), bias])


def instance_norm(n: NodeCtx) -> Value:
    x, scale, bias = n.x(0), n.x(1), n.x(2)
    n.float_type(x)
    eps = float(n.attr("epsilon", 1e-5))
    axes = tuple(range(2, x.type.rank))
    mean, var = _moments(n, x, axes)
    y = n.emit("div", [n.emit("sub", [x, n.broadcast(mean, x.type.shape)]),
                       n.broadcast(n.emit("sqrt", [n.scalar_op("add", var, eps)]),
                                   x.type.shape)])
    return n.emit("add", [n.emit("mul", [y, _along(n, scale, x, 1)]), _along(n, bias, x, 1)])


def _stash(n: NodeCtx, x: Value) -> tuple[Value, dt.DType]:
    """Compute in the stash type (float32 unless stash_type says double)."""
    st = int(n.attr("stash_type", 1))
    if st not in (1, 11):
        raise Reject(f"stash_type {st}")
    want = dt.f32 if st == 1 else dt.f64
    if x.type.dtype == dt.f64 and want == dt.f32:
        return x, dt.f64  # never narrow a double input
    return n.cast(x, want), want


def layer_norm(n: NodeCtx) -> list[Value | None]:
    x, scale, bias = n.x(0), n.x(1), n.opt(2)
    d = n.float_type(x)
    rank = x.type.rank
    ax = n.axis(int(n.attr("axis", -1)), rank)
    eps = float(n.attr("epsilon", 1e-5))
    axes = tuple(range(ax, rank))
    xs, sd = _stash(n, x)
    mean, var = _moments(n, xs, axes)
    inv = n.emit("rsqrt", [n.scalar_op("add", var, eps)])
    y = n.emit("mul", [n.emit("sub", [xs, n.broadcast(mean, xs.type.shape)]),
                       n.broadcast(inv, xs.type.shape)])
    y = n.cast(y, d)
    y = n.emit("mul", [y, n.broadcast(n.cast(scale, d), x.type.shape)])
    if bias is not None:
        y = n.emit("add", [y, n.broadcast(n.cast(bias, d), x.type.shape)])
    return [y, mean if n.output_wanted(1) else None, inv if n.output_wanted(2) else None]


def rms_norm(n: NodeCtx) -> Value:
    x, scale = n.x(0), n.x(1)
    d = n.float_type(x)
    rank = x.type.rank
    ax = n.axis(int(n.attr("axis", -1)), rank)
    eps = float(n.attr("epsilon", 1e-5))
    axes = tuple(range(ax, rank))
    xs, _ = _stash(n, x)
    count = 1
    for a in axes:
        count *= x.type.shape[a]
    ms = n.scalar_op("div", n.reduce("reduce_sum", n.emit("mul", [xs, xs]), axes, True),
                     float(count))
    inv = n.emit("rsqrt", [n.scalar_op("add", ms, eps)])
    y = n.cast(n.emit("mul", [xs, n.broadcast(inv, xs.type.shape)]), d)
    return n.emit("mul", [y, n.broadcast(n.cast(scale, d), x.type.shape)])


def group_norm(n: NodeCtx) -> Value:
    x, scale, bias = n.x(0), n.x(1), n.x(2)
    d = n.float_type(x)
    g = int(n.attr("num_groups"))
    eps = float(n.attr("epsilon", 1e-5))
    shape = x.type.shape
    if x.type.rank < 3 or shape[1] % g:
        raise Reject(f"channels {shape[1]} do not split into {g} groups")
    c = shape[1]
    xs, _ = _stash(n, x) if n.version >= 21 else (x, d)
    grouped = n.reshape(xs, [shape[0], g, (c // g) * _prod(shape[2:])])
    mean, var = _moments(n, grouped, (2,))
    y = n.emit("div", [n.emit("sub", [grouped, n.broadcast(mean, grouped.type.shape)]),
                       n.broadcast(n.emit("sqrt", [n.scalar_op("add", var, eps)]),
                                   grouped.type.shape)])
    y = n.cast(n.reshape(y, shape), d)
    if n.version >= 21:
        s, b = _along(n, n.cast(scale, d), y, 1), _along(n, n.cast(bias, d), y, 1)
    else:  # opset 18: scale and bias are per group
        if scale.type.shape != (g,):
            raise Reject("scale must be [num_groups] in GroupNormalization-18")
        rep = [i // (c // g) for i in range(c)]
        s = _along(n, n.take(n.cast(scale, d), 0, rep), y, 1)
        b = _along(n, n.take(n.cast(bias, d), 0, rep), y, 1)
    return n.emit("add", [n.emit("mul", [y, s]), b])


def _prod(xs: tuple[int, ...]) -> int:
    out = 1
    for v in xs:
        out *= v
    return out


def lp_norm(n: NodeCtx) -> Value:
    x = n.x(0)
    n.float_type(x)
    ax = n.axis(int(n.attr("axis", -1)), x.type.rank)
    p = int(n.attr("p", 2))
    if p == 1:
        norm = n.reduce("reduce_sum", n.emit("abs", [x]), (ax,), True)
    elif p == 2:
        norm = n.emit("sqrt", [n.reduce("reduce_sum", n.emit("mul", [x, x]), (ax,), True)])
    else:
        raise Reject(f"p={p}")
    # a zero norm divides by 1 (the zero vector stays zero), as ONNX's reference does
    norm = n.emit("select", [n.emit("eq", [norm, n.full_like(0.0, norm)]),
                             n.full_like(1.0, norm), norm])
    return n.emit("div", [x, n.broadcast(norm, x.type.shape)])


def mvn(n: NodeCtx) -> Value:
    x = n.x(0)
    n.float_type(x)
    axes = tuple(sorted(n.axis(int(a), x.type.rank) for a in n.attr("axes", [0, 2, 3])))
    count = 1
    for a in axes:
        count *= x.type.shape[a]
    mean = n.scalar_op("div", n.reduce("reduce_sum", x, axes, True), float(count))
    sq = n.scalar_op("div", n.reduce("reduce_sum", n.emit("mul", [x, x]), axes, True),
                     float(count))
    # ONNX's function body: var = E[x^2] - E[x]^2, y = (x - mean) / (sqrt(var) + 1e-9)
    var = n.emit("sub", [sq, n.emit("mul", [mean, mean])])
    std = n.scalar_op("add", n.emit("sqrt", [var]), 1e-9)
    return n.emit("div", [n.emit("sub", [x, n.broadcast(mean, x.type.shape)]),
                          n.broadcast(std, x.type.shape)])


def dropout(n: NodeCtx) -> list[Value | None]:
    x = n.x(0)
    training = n.opt(2)
    if training is not None and bool(n.static_scalar(training, "training_mode")):
        ratio = n.opt(1)
        r = float(n.static_scalar(ratio, "ratio")) if ratio is not None else 0.5
        if r != 0.0:
            raise Reject("training-mode dropout draws random numbers")
    mask = n.const(True, dt.bool_, x.type.shape) if n.output_wanted(1) else None
    return [x, mask]
