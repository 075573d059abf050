"""Converters for ONNX reductions (ReduceSum ... ReduceLogSumExp), ArgMax/ArgMin, CumSum."""

from __future__ import annotations

from collections.abc import Callable

from rlx_core.frontend.onnx_import.context import NodeCtx
from rlx_core.frontend.onnx_import.errors import Reject
from rlx_core.ir import dtypes as dt
from rlx_core.ir.graph import Value

# first op version that takes the axes as an input instead of an attribute
_AXES_INPUT_SINCE = {"ReduceSum": 13}
_AXES_INPUT_DEFAULT = 18


def _axes(n: NodeCtx) -> tuple[int, ...] | None:
    """The reduced axes (normalized), or None for "no-op" (empty axes with noop_with_empty_axes)."""
    x = n.x(0)
    rank = x.type.rank
    since = _AXES_INPUT_SINCE.get(n.op_type, _AXES_INPUT_DEFAULT)
    if n.version >= since:
        given = n.opt(1)
        axes = n.static_ints(given, "axes") if given is not None else []
    else:
        axes = list(n.attr("axes", []) or [])
    if not axes:
        if int(n.attr("noop_with_empty_axes", 0)):
            return None
        return tuple(range(rank))
    out = tuple(sorted({n.axis(int(a), rank, "axis") for a in axes}))
    if len(out) != len(axes):
        raise Reject(f"repeated axis in {axes}")
    return out


def _count(x: Value, axes: tuple[int, ...]) -> int:
    c = 1
    for a in axes:
        c *= x.type.shape[a]
    return c


def reduction(kind: str) -> Callable[[NodeCtx], Value]:
    def convert(n: NodeCtx) -> Value:
        x = n.x(0)
        axes = _axes(n)
        keep = bool(int(n.attr("keepdims", 1)))
        d = x.type.dtype
        if axes is None:  # noop_with_empty_axes: the op is the identity (after its map)
            return _map(n, kind, x)
        if kind in ("mean", "l2", "log_sum", "log_sum_exp") and not d.is_float:
            raise Reject(f"{n.op_type} of {d} is not supported (only floats)")
        if d == dt.bool_ and kind not in ("max", "min"):
            raise Reject(f"{n.op_type} of bool")
        if kind == "sum":
            return n.reduce("reduce_sum", x, axes, keep)
        if kind == "max":
            return n.reduce("reduce_max", x, axes, keep)
        if kind == "min":
            return n.reduce("reduce_min", x, axes, keep)
        if kind == "prod":
            return n.reduce("reduce_prod", x, axes, keep)
        if kind == "mean":
            total = n.reduce("reduce_sum", x, axes, keep)
            return n.scalar_op("div", total, float(_count(x, axes)))
        if kind == "l1":
            return n.reduce("reduce_sum", _map(n, "l1", x), axes, keep)
        if kind == "sum_square":
            return n.reduce("reduce_sum", _map(n, "sum_square", x), axes, keep)
        if kind == "l2":
            return n.emit("sqrt", [n.reduce("reduce_sum", _map(n, "sum_square", x), axes, keep)])
        if kind == "log_sum":
            return n.emit("log", [n.reduce("reduce_sum", x, axes, keep)])
        if kind == "log_sum_exp":
            return _log_sum_exp(n, x, axes, keep)
        raise Reject(f"unknown reduction {kind}")

    return convert


def _map(n: NodeCtx, kind: str, x: Value) -> Value:
    """The elementwise part of a reduction, applied alone when there is nothing to reduce."""
    if kind == "l1":
        return x if x.type.dtype.kind is dt.Kind.UINT else n.emit("abs", [x])
    if kind == "sum_square":
        return n.emit("mul", [x, x])
    if kind == "l2":
        return n.emit("abs", [x])
    if kind == "log_sum":
        return n.emit("log", [x])
    return x  # sum, max, min, prod, mean, log_sum_exp(x) of one element is x


def _log_sum_exp(n: NodeCtx, x: Value, axes: tuple[int, ...], keep: bool) -> Value:
    # shift by the max so that large inputs do not overflow exp; an empty set gives -inf
    m = n.reduce("reduce_max", x, axes, True)
    finite = n.emit("eq", [m, m])  # not NaN
    inf = n.emit("eq", [n.emit("abs", [m]), n.full_like(float("inf"), m)])
    safe = n.emit("select", [n.emit("and", [finite, n.emit("logical_not", [inf])]), m,
                             n.full_like(0.0, m)])
    shifted = n.emit("sub", [x, n.broadcast(safe, x.type.shape)]) if x.type.size else x
    s = n.reduce("reduce_sum", n.emit("exp", [shifted]), axes, True)
    out = n.emit("add", [n.emit("log", [s]), safe])
    if not keep:
        out = n.reshape(out, [d for i, d in enumerate(x.type.shape) if i not in axes])
    return out


def arg(kind: str) -> Callable[[NodeCtx], Value]:
    def convert(n: NodeCtx) -> Value:
        x = n.x(0)
        rank = x.type.rank
        ax = n.axis(int(n.attr("axis", 0)), rank)
        keep = bool(int(n.attr("keepdims", 1)))
        last = bool(int(n.attr("select_last_index", 0)))
        d = x.type.dtype
        if x.type.shape[ax] == 0:
            raise Reject("arg-reduction over an empty axis")
        if d == dt.bool_:
            x = n.cast(x, dt.i8)
            d = dt.i8
        if kind == "min":
            # order-reversing maps: -x for floats (NaN stays NaN), ~x for integers
            x = n.emit("neg", [x]) if d.is_float else n.emit("logical_not", [x])
        size = x.type.shape[ax]
        if last:
            x = n.take(x, ax, list(range(size - 1, -1, -1)))
        idx = n.emit("argmax", [x], {"axis": ax, "index_dtype": dt.i64})
        if last:
            idx = n.emit("sub", [n.full_like(size - 1, idx), idx])
        if keep:
            idx = n.reshape(idx, [1 if i == ax else s for i, s in enumerate(x.type.shape)])
        return idx

    return convert


def _scan(n: NodeCtx, x: Value, ax: int, op: str, identity: float) -> Value:
    """Inclusive prefix ``op`` along ``ax`` by log-step doubling (Hillis-Steele)."""
    size = x.type.shape[ax]
    step = 1
    rank = x.type.rank
    while step < size:
        shifted = n.slice_axis(x, ax, 0, size - step)
        lo = [0] * rank
        hi = [0] * rank
        lo[ax] = step
        if x.type.dtype.is_float:
            shifted = n.emit("pad", [shifted], {"low": tuple(lo), "high": tuple(hi),
                                                "value": float(identity)})
        else:
            fill = n.const(int(identity), x.type.dtype,
                           [step if i == ax else d for i, d in enumerate(x.type.shape)])
            shifted = n.emit("concat", [fill, shifted], {"axis": ax})
        x = n.emit(op, [x, shifted])
        step *= 2
    return x


def cumulative(op: str, identity: float) -> Callable[[NodeCtx], Value]:
    def convert(n: NodeCtx) -> Value:
        x = n.x(0)
        if x.type.dtype == dt.bool_ or x.type.dtype.is_complex:
            raise Reject(f"{n.op_type} of {x.type.dtype}")
        ax = n.axis(int(n.static_scalar(n.x(1), "axis")), x.type.rank)
        exclusive, reverse = int(n.attr("exclusive", 0)), int(n.attr("reverse", 0))
        size = x.type.shape[ax]
        if size == 0:
            return x
        if reverse:
            x = n.take(x, ax, list(range(size - 1, -1, -1)))
        if exclusive:
            head = n.const(identity if x.type.dtype.is_float else int(identity), x.type.dtype,
                           [1 if i == ax else d for i, d in enumerate(x.type.shape)])
            x = n.emit("concat", [head, n.slice_axis(x, ax, 0, size - 1)], {"axis": ax})
        y = _scan(n, x, ax, op, identity)
        if reverse:
            y = n.take(y, ax, list(range(size - 1, -1, -1)))
        return y

    return convert
