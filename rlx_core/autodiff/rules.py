"""VJP rules: for every differentiable MIR primitive, how a cotangent flows back to its operands.

A rule is ``fn(node, ins, out, g, b) -> tuple[Value | None, ...]``: ``ins`` are the operand
values, ``out`` the node's result, ``g`` the cotangent of ``out`` (same type) and ``b`` a
Builder. It returns one cotangent per operand (``None``: the operand receives nothing, e.g.
integer indices). Everything is written in MIR, so a backward graph compiles like any other.

Ops that are piecewise constant (floor, ceil, round, sign) have a zero derivative almost
everywhere; they appear in ``ZERO_GRAD`` so that gradients through them are 0, as in JAX.
Ops with integer or boolean results (compare, argmax, iota, logical ops) carry no gradient.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from rlx_core.autodiff.linalg_rules import LINALG_VJP_RULES
from rlx_core.autodiff.splat_rules import SPLAT_VJP_RULES
from rlx_core.dispatch.decompositions import axis_of, const
from rlx_core.ir.builder import Builder
from rlx_core.ir.graph import Node, Value

Cotangents = tuple[Value | None, ...]
VJPRule = Callable[[Node, list[Value], Value, Value, Builder], Cotangents]


# ---- helpers: small MIR idioms the rules share ------------------------------------------------


def _mul(b: Builder, x: Value, y: Value) -> Value:
    return b.emit("mul", [x, y])


def _scale(b: Builder, x: Value, k: float) -> Value:
    return _mul(b, x, const(b, k, x))


def _zeros_like(b: Builder, x: Value) -> Value:
    return const(b, 0.0, x)


def _where(b: Builder, pred: Value, x: Value, y: Value) -> Value:
    return b.emit("select", [pred, x, y])


def _back_to(b: Builder, reduced: Value, full: Value, axes: tuple[int, ...]) -> Value:
    """Broadcast a value reduced over ``axes`` back to ``full``'s shape."""
    dims = tuple(i for i in range(full.type.rank) if i not in axes)
    return b.emit("broadcast_in_dim", [reduced], {"shape": full.type.shape, "dims": dims})


def _inverse(perm: tuple[int, ...]) -> tuple[int, ...]:
    inv = [0] * len(perm)
    for i, p in enumerate(perm):
        inv[p] = i
    return tuple(inv)


# ---- unary ----------------------------------------------------------------------------------


def _neg(n, ins, out, g, b):
    return (b.emit("neg", [g]),)


def _abs(n, ins, out, g, b):
    return (_mul(b, g, b.emit("sign", [ins[0]])),)


def _exp(n, ins, out, g, b):
    return (_mul(b, g, out),)  # d exp(x) = exp(x): reuse the forward result


def _log(n, ins, out, g, b):
    return (b.emit("div", [g, ins[0]]),)


def _sqrt(n, ins, out, g, b):
    return (b.emit("div", [_scale(b, g, 0.5), out]),)  # 1 / (2 sqrt x)


def _rsqrt(n, ins, out, g, b):
    # d x^(-1/2) = -1/2 x^(-3/2) = -1/2 * out / x
    return (b.emit("div", [_mul(b, _scale(b, g, -0.5), out), ins[0]]),)


def _tanh(n, ins, out, g, b):
    one_minus = b.emit("sub", [const(b, 1.0, out), _mul(b, out, out)])
    return (_mul(b, g, one_minus),)


def _erf(n, ins, out, g, b):
    x = ins[0]
    bump = b.emit("exp", [b.emit("neg", [_mul(b, x, x)])])
    return (_mul(b, g, _scale(b, bump, 2.0 / math.sqrt(math.pi))),)


def _logistic(n, ins, out, g, b):
    one_minus = b.emit("sub", [const(b, 1.0, out), out])
    return (_mul(b, g, _mul(b, out, one_minus)),)


def _sin(n, ins, out, g, b):
    return (_mul(b, g, b.emit("cos", [ins[0]])),)


def _cos(n, ins, out, g, b):
    return (b.emit("neg", [_mul(b, g, b.emit("sin", [ins[0]]))]),)


def _reciprocal(n, ins, out, g, b):
    return (b.emit("neg", [_mul(b, g, _mul(b, out, out))]),)


def _zero(n, ins, out, g, b):
    return (_zeros_like(b, ins[0]),)


# ---- binary ---------------------------------------------------------------------------------


def _add(n, ins, out, g, b):
    return (g, g)


def _sub(n, ins, out, g, b):
    return (g, b.emit("neg", [g]))


def _mul_rule(n, ins, out, g, b):
    x, y = ins
    return (_mul(b, g, y), _mul(b, g, x))


def _div(n, ins, out, g, b):
    x, y = ins
    gx = b.emit("div", [g, y])
    return (gx, b.emit("neg", [_mul(b, gx, out)]))  # d(x/y)/dy = -x/y^2 = -(1/y) * out


def _pow(n, ins, out, g, b):
    x, y = ins
    # d x^y / dx = y x^(y-1); written with pow (not out / x) so that x = 0 stays finite
    y_minus = b.emit("sub", [y, const(b, 1.0, y)])
    gx = _mul(b, g, _mul(b, y, b.emit("pow", [x, y_minus])))
    # d x^y / dy = x^y log x, defined for x > 0; 0 elsewhere (as JAX does at x = 0)
    pos = b.emit("gt", [x, _zeros_like(b, x)])
    safe_x = _where(b, pos, x, const(b, 1.0, x))
    gy = _where(b, pos, _mul(b, g, _mul(b, out, b.emit("log", [safe_x]))), _zeros_like(b, x))
    return (gx, gy)


def _max(n, ins, out, g, b):
    x, y = ins
    pick_x = b.emit("ge", [x, y])  # ties go to the first operand
    return (_where(b, pick_x, g, _zeros_like(b, g)), _where(b, pick_x, _zeros_like(b, g), g))


def _min(n, ins, out, g, b):
    x, y = ins
    pick_x = b.emit("le", [x, y])
    return (_where(b, pick_x, g, _zeros_like(b, g)), _where(b, pick_x, _zeros_like(b, g), g))


def _rem(n, ins, out, g, b):
    x, y = ins
    # fmod: x - y * trunc(x / y); the quotient is piecewise constant
    q = b.emit("div", [x, y])
    trunc = _where(b, b.emit("lt", [q, _zeros_like(b, q)]), b.emit("ceil", [q]),
                   b.emit("floor", [q]))
    return (g, b.emit("neg", [_mul(b, g, trunc)]))


def _select(n, ins, out, g, b):
    p = ins[0]
    zero = _zeros_like(b, g)
    return (None, _where(b, p, g, zero), _where(b, p, zero, g))


def _cast(n, ins, out, g, b):
    x = ins[0]
    if not x.type.dtype.is_float:
        return (None,)
    return (b.emit("cast", [g], {"dtype": x.type.dtype}),)


# ---- reductions -----------------------------------------------------------------------------


def _reduce_sum(n, ins, out, g, b):
    return (_back_to(b, g, ins[0], tuple(n.attr("axes"))),)


def _reduce_extreme(n, ins, out, g, b):
    # the cotangent is shared equally between the positions that attain the max (or min)
    x = ins[0]
    axes = tuple(n.attr("axes"))
    hit = b.emit("eq", [x, _back_to(b, out, x, axes)])
    hit_f = b.emit("cast", [hit], {"dtype": x.type.dtype})
    count = b.emit("reduce_sum", [hit_f], {"axes": axes})
    share = b.emit("div", [g, count])
    return (_mul(b, hit_f, _back_to(b, share, x, axes)),)


def _reduce_prod(n, ins, out, g, b):
    # d prod / d x_i = prod / x_i (operands assumed nonzero, as the gradient check uses)
    x = ins[0]
    axes = tuple(n.attr("axes"))
    return (b.emit("div", [_back_to(b, _mul(b, g, out), x, axes), x]),)


# ---- data movement --------------------------------------------------------------------------


def _broadcast_in_dim(n, ins, out, g, b):
    x = ins[0]
    dims = tuple(n.attr("dims"))
    # sum over new axes and over stretched size-1 axes, then restore the operand's shape
    summed = tuple(i for i in range(out.type.rank)
                   if i not in dims or (x.type.shape[dims.index(i)] == 1 and out.type.shape[i] != 1))
    red = b.emit("reduce_sum", [g], {"axes": summed}) if summed else g
    if red.type.shape != x.type.shape:
        red = b.emit("reshape", [red], {"shape": x.type.shape})
    return (red,)


def _reshape(n, ins, out, g, b):
    return (b.emit("reshape", [g], {"shape": ins[0].type.shape}),)


def _transpose(n, ins, out, g, b):
    return (b.emit("transpose", [g], {"perm": _inverse(tuple(n.attr("perm")))}),)


def _slice(n, ins, out, g, b):
    x = ins[0]
    start, stride = tuple(n.attr("start")), tuple(n.attr("stride"))
    cur = g
    # strided axes: interleave zeros (expand, pad the new axis, merge), so that element k of
    # the cotangent lands at offset k * stride
    for ax, st in enumerate(stride):
        cnt = cur.type.shape[ax]
        if st == 1 or cnt == 0:
            continue
        shp = cur.type.shape
        cur = b.emit("reshape", [cur], {"shape": shp[:ax + 1] + (1,) + shp[ax + 1:]})
        hi = [0] * cur.type.rank
        hi[ax + 1] = st - 1
        cur = b.emit("pad", [cur], {"low": (0,) * cur.type.rank, "high": tuple(hi), "value": 0.0})
        cur = b.emit("reshape", [cur], {"shape": shp[:ax] + (cnt * st,) + shp[ax + 1:]})
        keep = min(cnt * st, x.type.shape[ax] - start[ax])
        if keep != cnt * st:
            lim = list(cur.type.shape)
            lim[ax] = keep
            cur = b.emit("slice", [cur], {"start": (0,) * cur.type.rank, "limit": tuple(lim),
                                          "stride": (1,) * cur.type.rank})
    high = tuple(d - s - c for d, s, c in zip(x.type.shape, start, cur.type.shape, strict=False))
    if any(start) or any(high):
        cur = b.emit("pad", [cur], {"low": start, "high": high, "value": 0.0})
    return (cur,)


def _pad(n, ins, out, g, b):
    x = ins[0]
    low = tuple(n.attr("low"))
    limit = tuple(lo + d for lo, d in zip(low, x.type.shape, strict=False))
    return (None if not x.type.dtype.is_float else
            b.emit("slice", [g], {"start": low, "limit": limit, "stride": (1,) * x.type.rank}),)


def _concat(n, ins, out, g, b):
    ax = n.attr("axis")
    parts: list[Value | None] = []
    offset = 0
    for x in ins:
        start = [0] * g.type.rank
        limit = list(g.type.shape)
        start[ax], limit[ax] = offset, offset + x.type.shape[ax]
        offset += x.type.shape[ax]
        parts.append(b.emit("slice", [g], {"start": tuple(start), "limit": tuple(limit),
                                           "stride": (1,) * g.type.rank}))
    return tuple(parts)


def _gather(n, ins, out, g, b):
    x, idx = ins
    # rows picked several times accumulate: scatter_add into zeros
    return (b.emit("scatter_add", [_zeros_like(b, x), idx, g], {"axis": n.attr("axis")}), None)


def _scatter_add(n, ins, out, g, b):
    x, idx, upd = ins
    return (g, None, b.emit("gather", [g, idx], {"axis": n.attr("axis")}))


# ---- contraction ----------------------------------------------------------------------------


def _dot_general(n, ins, out, g, b):
    """out = batch + lhs_free + rhs_free. Each operand's cotangent contracts g with the other
    operand over the other's free axes, then is transposed back into the operand's layout."""
    lhs, rhs = ins
    (lc, rc), (lb, rb) = n.attr("contract"), n.attr("batch")
    lc, rc, lb, rb = tuple(lc), tuple(rc), tuple(lb), tuple(rb)
    nb = len(lb)
    lf = tuple(i for i in range(lhs.type.rank) if i not in lc and i not in lb)
    rf = tuple(i for i in range(rhs.type.rank) if i not in rc and i not in rb)
    g_batch = tuple(range(nb))
    g_lf = tuple(range(nb, nb + len(lf)))
    g_rf = tuple(range(nb + len(lf), nb + len(lf) + len(rf)))

    def back(other: Value, other_free: tuple[int, ...], other_batch: tuple[int, ...],
             g_other_free: tuple[int, ...], mine: Value, my_batch: tuple[int, ...],
             my_free: tuple[int, ...], my_contract: tuple[int, ...],
             other_contract: tuple[int, ...]) -> Value:
        d = b.emit("dot_general", [g, other], {"contract": (g_other_free, other_free),
                                               "batch": (g_batch, other_batch)})
        # result axes: batch, my free axes (g's), then other's contracted axes in axis order
        rest = tuple(sorted(other_contract))
        n_mine_free = len(my_free)
        perm = []
        for i in range(mine.type.rank):
            if i in my_batch:
                perm.append(my_batch.index(i))
            elif i in my_free:
                perm.append(nb + my_free.index(i))
            else:
                paired = other_contract[my_contract.index(i)]
                perm.append(nb + n_mine_free + rest.index(paired))
        perm_t = tuple(perm)
        if perm_t == tuple(range(len(perm_t))):
            return d
        return b.emit("transpose", [d], {"perm": perm_t})

    g_lhs = back(rhs, rf, rb, g_rf, lhs, lb, lf, lc, rc)
    g_rhs = back(lhs, lf, lb, g_lf, rhs, rb, rf, rc, lc)
    return (g_lhs, g_rhs)


# ---- collectives (ir/ops/collective.py: Megatron's convention, a replicated value's
# cotangent is the full one on every rank) -------------------------------------------------


def _all_reduce(n, ins, out, g, b):
    op = n.attr("op")
    if op == "sum":
        return (g,)  # Megatron's g: partial sums in, replicated sum out
    if op == "mean":
        return (_scale(b, g, 1.0 / n.attr("ranks")),)
    return (_where(b, b.emit("eq", [ins[0], out]), g, _zeros_like(b, g)),)  # max/min: argmax


def _replicate(n, ins, out, g, b):
    # Megatron's f: every rank's work on the replicated x contributes to its gradient
    return (b.emit("all_reduce", [g], {"op": "sum", "ranks": n.attr("ranks")}),)


def _all_gather(n, ins, out, g, b):
    # the full cotangent is on every rank: the mean over ranks of this rank's chunk is it
    return (b.emit("reduce_scatter", [g], {"axis": n.attr("axis"), "op": "mean",
                                           "ranks": n.attr("ranks")}),)


def _reduce_scatter(n, ins, out, g, b):
    full = b.emit("all_gather", [g], {"axis": n.attr("axis"), "ranks": n.attr("ranks")})
    return (full if n.attr("op") == "sum" else _scale(b, full, 1.0 / n.attr("ranks")),)


def _broadcast(n, ins, out, g, b):
    rank = b.emit("rank", [], {"ranks": n.attr("ranks")})
    root = b.emit("constant", [], {"value": n.attr("root"), "shape": (), "dtype": rank.type.dtype})
    here = b.emit("broadcast_in_dim", [b.emit("eq", [rank, root])],
                  {"shape": g.type.shape, "dims": ()})
    return (_where(b, here, g, _zeros_like(b, g)),)


def _send(n, ins, out, g, b):
    return (g,)  # the result is x passed through; the pipeline sends cotangents itself


# The registry: op -> VJP rule. Every float-valued MIR primitive is here or in ZERO_GRAD.
VJP_RULES: dict[str, VJPRule] = {
    # unary
    "neg": _neg, "abs": _abs, "exp": _exp, "log": _log, "sqrt": _sqrt, "rsqrt": _rsqrt,
    "tanh": _tanh, "erf": _erf, "logistic": _logistic, "sin": _sin, "cos": _cos,
    "reciprocal": _reciprocal,
    # binary
    "add": _add, "sub": _sub, "mul": _mul_rule, "div": _div, "pow": _pow, "max": _max,
    "min": _min, "rem": _rem,
    # select and cast
    "select": _select, "cast": _cast,
    # reductions
    "reduce_sum": _reduce_sum, "reduce_max": _reduce_extreme, "reduce_min": _reduce_extreme,
    "reduce_prod": _reduce_prod,
    # data movement and indexing
    "broadcast_in_dim": _broadcast_in_dim, "reshape": _reshape, "transpose": _transpose,
    "slice": _slice, "pad": _pad, "concat": _concat, "gather": _gather,
    "scatter_add": _scatter_add,
    # contraction
    "dot_general": _dot_general,
    # collectives
    "all_reduce": _all_reduce, "replicate": _replicate, "all_gather": _all_gather,
    "reduce_scatter": _reduce_scatter, "broadcast": _broadcast, "send": _send,
}

# ---- HIR ops kept whole through differentiation ------------------------------------------
# A target may run these as one kernel each (the CPU's row kernels, c_common/row_ops.py);
# differentiated through their decompositions they would become the max / exp / sum / log
# chain and its backward instead, a dozen small kernels (the MNIST MLP's cross-entropy).
# The rules write the gradient from the op's output, in MIR.


def _log_softmax(n, ins, out, g, b):
    # y = x - logsumexp(x): dx = g - softmax(x) * sum(g), with softmax(x) = exp(y)
    axis = axis_of(n, ins[0].type.rank)
    total = b.emit("reduce_sum", [g], {"axes": (axis,)})
    return (b.emit("sub", [g, _mul(b, b.emit("exp", [out]), _back_to(b, total, out, (axis,)))]),)


def _softmax(n, ins, out, g, b):
    # dx = y * (g - sum(g * y))
    axis = axis_of(n, ins[0].type.rank)
    total = b.emit("reduce_sum", [_mul(b, g, out)], {"axes": (axis,)})
    return (_mul(b, out, b.emit("sub", [g, _back_to(b, total, out, (axis,))])),)


def _fake_quantize(n, ins, out, g, b):
    """Quantization-aware training (ops/quant.py ``fake_quantize``). With v = x / s and
    q = round(v) + z: x gets the straight-through estimator, g where qmin <= q <= qmax
    (0 where clipped); s gets LSQ's gradient, g * (round(v) - v) inside the range and
    g * (qmin - z) or g * (qmax - z) where clipped, summed per tensor or per channel; z
    gets the exact derivative, 0 inside the range and -s * g where clipped."""
    x, s, z = ins
    axis = n.attr("axis") % max(x.type.rank, 1)
    dims = () if s.type.rank == 0 else (axis,)
    keep = tuple(i for i in range(x.type.rank) if i not in dims)

    def full(p: Value) -> Value:
        return b.emit("broadcast_in_dim", [p], {"shape": x.type.shape, "dims": dims})

    sf, zf = full(s), full(z)
    v = b.emit("div", [x, sf])
    r = b.emit("round", [v])
    q = b.emit("add", [r, zf])
    lo, hi = const(b, float(n.attr("qmin")), q), const(b, float(n.attr("qmax")), q)
    below, above = b.emit("lt", [q, lo]), b.emit("gt", [q, hi])
    zero = _zeros_like(b, x)
    dx = _where(b, below, zero, _where(b, above, zero, g))
    ds_elem = _where(b, below, b.emit("sub", [lo, zf]),
                     _where(b, above, b.emit("sub", [hi, zf]), b.emit("sub", [r, v])))
    ds = b.emit("reduce_sum", [_mul(b, g, ds_elem)], {"axes": keep})
    clipped = b.emit("or", [below, above])
    dz_elem = _where(b, clipped, b.emit("neg", [sf]), zero)
    dz = b.emit("reduce_sum", [_mul(b, g, dz_elem)], {"axes": keep})
    return dx, ds, dz


HIR_VJP_RULES: dict[str, VJPRule] = {"log_softmax": _log_softmax, "softmax": _softmax,
                                     "fake_quantize": _fake_quantize,
                                     # the splatting ops: their *_vjp op (splat_rules.py)
                                     **SPLAT_VJP_RULES,
                                     **LINALG_VJP_RULES}  # dense and sparse linear algebra

# piecewise-constant ops: derivative 0 almost everywhere
ZERO_GRAD: dict[str, VJPRule] = {op: _zero for op in ("floor", "ceil", "round", "sign")}

# ops whose results are integers or booleans, or that have no operands: no gradient flows
NO_GRAD: tuple[str, ...] = (
    "eq", "ne", "lt", "le", "gt", "ge", "and", "or", "xor", "logical_not", "argmax", "iota",
    "constant", "recv", "rank",
)


def rule_for(op: str) -> VJPRule | None:
    """The VJP rule of ``op``, or None when no gradient flows through it."""
    return VJP_RULES.get(op) or HIR_VJP_RULES.get(op) or ZERO_GRAD.get(op)
