"""The numpy-like functional API traced into MIR: promotion and broadcasting made explicit."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from rlx_core.errors import AxisError, DTypeError, ShapeError, TraceError
from rlx_core.frontend.tracer import INLINE_CONSTANT_LIMIT, current, flatten_nested, type_of_example
from rlx_core.ir import dtypes as dt
from rlx_core.ir.graph import Value
from rlx_core.ir.ops.base import broadcast_shapes, normalize_axis


def _tensor(v: Value) -> Any:
    from rlx_core.frontend.tensor import Tensor

    return Tensor(v)


def _value(x: Any) -> Value | None:
    from rlx_core.frontend.tensor import Tensor

    return x.value if isinstance(x, Tensor) else None


def constant(value: Any, dtype: object, shape: tuple[int, ...] = ()) -> Any:
    """A literal tensor: a scalar splat over ``shape``, or a flat row-major tuple."""
    d = dt.get(dtype)
    if isinstance(value, tuple | list):
        value = tuple(dt.python_scalar(v, d) for v in value)
    else:
        value = dt.python_scalar(value, d)
    return _tensor(current().emit("constant", [], {"value": value, "dtype": d, "shape": tuple(shape)}))


def asarray(x: Any, like: dt.DType | None = None) -> Any:
    """Lift ``x`` into the trace: tensors pass through, Python scalars become weak-typed
    constants, arrays become inline constants (small) or parameters (large)."""
    if _value(x) is not None:
        return x
    if isinstance(x, bool | int | float | complex):
        d = dt.weak_scalar_dtype(x, like) if like is not None else type_of_example(x).dtype
        return constant(x, d)
    if hasattr(x, "shape") and hasattr(x, "dtype"):
        ty = type_of_example(x)
        if ty.size <= INLINE_CONSTANT_LIMIT and hasattr(x, "tolist"):
            flat, _ = flatten_nested(x.tolist())
            return constant(tuple(flat) if ty.shape else flat[0], ty.dtype, ty.shape)
        return _tensor(current().add_param(x))
    if isinstance(x, memoryview) or (type(x).__name__ == "array" and hasattr(x, "typecode")):
        # numpy-free arrays (Pyodide): typed by their buffer format, shaped by the memoryview
        ty = type_of_example(x)
        if ty.size <= INLINE_CONSTANT_LIMIT:
            flat = (x.cast("B").cast(x.format) if isinstance(x, memoryview) and x.ndim != 1
                    else x).tolist()
            return constant(tuple(flat) if ty.shape else flat[0], ty.dtype, ty.shape)
        return _tensor(current().add_param(x))
    if isinstance(x, list | tuple):
        flat, shape = flatten_nested(list(x))
        d = type_of_example(list(x)).dtype if like is None else (
            dt.weak_scalar_dtype(flat[0], like) if flat else like)
        return constant(tuple(flat), d, shape)
    raise TraceError(f"cannot use {type(x).__name__} in a traced computation",
                     hint="use rlx tensors, numpy arrays, lists, array.array, memoryviews or "
                          "Python scalars")


def param(data: Any, name: str) -> Any:
    """Declare ``data`` (an array) as a named parameter, e.g. ``param(w, "fc1.weight")``.

    Make ``data`` outside the traced function (or from a seeded generator inside it): the
    function is traced again for each target it is compiled for (``rlx run`` and the explorer
    compile it per target, the numpy reference included) and for each new argument signature
    of an ``@rlx.jit`` function, so ``param(np.random.default_rng().normal(size=s), "w")``
    inside it gives every trace different weights, and the targets disagree.
    """
    return _tensor(current().add_param(data, name))


def astype(x: Any, dtype: object) -> Any:
    """``x`` cast to ``dtype`` (a DType or its name, e.g. ``"f16"``); unchanged if already it."""
    d = dt.get(dtype)
    v = asarray(x).value
    if v.type.dtype == d:
        return _tensor(v)
    return _tensor(current().emit("cast", [v], {"dtype": d}))


def broadcast_to(x: Any, shape: Sequence[int]) -> Any:
    """``x`` broadcast to ``shape`` by numpy's rules (size-1 and missing leading dims repeat)."""
    v = asarray(x).value
    shape = tuple(shape)
    if v.type.shape == shape:
        return _tensor(v)
    broadcast_shapes("broadcast_to", v.type.shape, shape)
    if len(shape) < v.type.rank:
        raise ShapeError(f"broadcast_to: cannot broadcast {v.type} to rank {len(shape)}")
    offset = len(shape) - v.type.rank
    dims = tuple(range(offset, len(shape)))
    return _tensor(current().emit("broadcast_in_dim", [v], {"shape": shape, "dims": dims}))


def _promote_pair(op: str, a: Any, b: Any) -> tuple[Value, Value]:
    va, vb = _value(a), _value(b)
    if va is None and vb is None:
        a = asarray(a)
        va = a.value
    if va is None:
        a = asarray(a, like=vb.type.dtype)  # type: ignore[union-attr]
        va = a.value
    if vb is None:
        b = asarray(b, like=va.type.dtype)
        vb = b.value
    try:
        d = dt.promote(va.type.dtype, vb.type.dtype)
    except DTypeError as err:
        raise DTypeError(f"{op}: {err.message}", hint=err.hint) from None
    shape = broadcast_shapes(op, va.type.shape, vb.type.shape)
    va = broadcast_to(astype(_tensor(va), d), shape).value
    vb = broadcast_to(astype(_tensor(vb), d), shape).value
    return va, vb


def binary(op: str, a: Any, b: Any) -> Any:
    """``op`` (add, mul, lt, ...) with numpy promotion and broadcasting."""
    va, vb = _promote_pair(op, a, b)
    if op == "div" and va.type.dtype.is_int:
        # true division, as numpy's `/`: ints are divided as floats
        va, vb = astype(_tensor(va), dt.f32).value, astype(_tensor(vb), dt.f32).value
    return _tensor(current().emit(op, [va, vb]))


def floordiv(a: Any, b: Any) -> Any:
    va, vb = _promote_pair("floordiv", a, b)
    if va.type.dtype.is_int:
        # MIR div on ints truncates toward zero; correct to floor when signs differ and rem != 0
        q = _tensor(current().emit("div", [va, vb]))
        r = _tensor(current().emit("rem", [va, vb]))
        zero = constant(0, va.type.dtype)
        adjust = (r != zero) & ((r < zero) != (_tensor(vb) < zero))
        return where(adjust, q - 1, q)
    return unary("floor", _tensor(current().emit("div", [va, vb])))


def unary(op: str, x: Any) -> Any:
    v = asarray(x).value
    if op not in ("neg", "abs", "sign", "logical_not") and not v.type.dtype.is_inexact:
        v = astype(_tensor(v), dt.f32).value  # like numpy: exp(int) is a float
    return _tensor(current().emit(op, [v]))


def where(cond: Any, a: Any, b: Any) -> Any:
    """Elementwise select: ``a`` where ``cond`` else ``b`` (all three broadcast)."""
    vc = asarray(cond).value
    if vc.type.dtype != dt.bool_:
        raise DTypeError(f"where: condition must be bool, got {vc.type}",
                         hint="compare first, e.g. where(x > 0, ...)")
    va, vb = _promote_pair("where", a, b)
    shape = broadcast_shapes("where", vc.type.shape, va.type.shape)
    vc = broadcast_to(_tensor(vc), shape).value
    va = broadcast_to(_tensor(va), shape).value
    vb = broadcast_to(_tensor(vb), shape).value
    return _tensor(current().emit("select", [vc, va, vb]))


def _axes(op: str, axis: int | Sequence[int] | None, rank: int) -> tuple[int, ...]:
    if axis is None:
        return tuple(range(rank))
    items = (axis,) if isinstance(axis, int) else tuple(axis)
    out = tuple(sorted(normalize_axis(op, a, rank) for a in items))
    if len(set(out)) != len(out):
        raise AxisError(f"{op}: repeated axis in {axis}")
    return out


def reduce(op: str, x: Any, axis: int | Sequence[int] | None = None, keepdims: bool = False) -> Any:
    """reduce_sum / reduce_max / reduce_min / reduce_prod over ``axis`` (None: all axes)."""
    v = asarray(x).value
    name = op.removeprefix("reduce_")
    axes = _axes(name, axis, v.type.rank)
    if op == "reduce_sum" and v.type.dtype == dt.bool_:
        v = astype(_tensor(v), dt.i64).value
    out = current().emit(op, [v], {"axes": axes})
    if keepdims:
        shape = tuple(1 if i in axes else d for i, d in enumerate(v.type.shape))
        out = current().emit("reshape", [out], {"shape": shape})
    return _tensor(out)


def mean(x: Any, axis: int | Sequence[int] | None = None, keepdims: bool = False) -> Any:
    """The mean over ``axis`` (all axes when None); integers are averaged as f32."""
    v = asarray(x).value
    axes = _axes("mean", axis, v.type.rank)
    n = math.prod(v.type.shape[a] for a in axes)
    total = reduce("reduce_sum", _tensor(v), axes, keepdims)
    if not total.value.type.dtype.is_inexact:
        total = astype(total, dt.f32)
    return total * (1.0 / n) if n else total


def var(x: Any, axis: int | Sequence[int] | None = None, keepdims: bool = False) -> Any:
    """The population variance (``ddof=0``) over ``axis`` (all axes when None)."""
    m = mean(x, axis, keepdims=True)
    d = asarray(x) - m
    return mean(d * d, axis, keepdims)


def argmax(x: Any, axis: int = -1) -> Any:
    """The i32 index of the largest value along ``axis`` (the first one on ties)."""
    v = asarray(x).value
    ax = normalize_axis("argmax", axis, v.type.rank)
    return _tensor(current().emit("argmax", [v], {"axis": ax, "index_dtype": dt.i32}))


def reshape(x: Any, *shape: Any) -> Any:
    """``x`` in a new shape (a tuple or separate ints; one ``-1`` is inferred), row-major."""
    v = asarray(x).value
    dims = list(shape[0]) if len(shape) == 1 and isinstance(shape[0], tuple | list) else list(shape)
    if dims.count(-1) > 1:
        raise ShapeError(f"reshape: only one -1 allowed in {dims}")
    if -1 in dims:
        known = math.prod(d for d in dims if d != -1)
        if known == 0 or v.type.size % known:
            raise ShapeError(f"reshape: cannot reshape {v.type} to {dims}")
        dims[dims.index(-1)] = v.type.size // known
    if tuple(dims) == v.type.shape:
        return _tensor(v)
    return _tensor(current().emit("reshape", [v], {"shape": tuple(dims)}))


def transpose(x: Any, *axes: Any) -> Any:
    """``x`` with its axes permuted (a tuple or separate ints; none: reversed), as numpy."""
    v = asarray(x).value
    perm = list(axes[0]) if len(axes) == 1 and isinstance(axes[0], tuple | list) else list(axes)
    if not perm:
        perm = list(reversed(range(v.type.rank)))
    perm = [normalize_axis("transpose", a, v.type.rank) for a in perm]
    if perm == list(range(v.type.rank)):
        return _tensor(v)
    return _tensor(current().emit("transpose", [v], {"perm": tuple(perm)}))


def swapaxes(x: Any, a: int, b: int) -> Any:
    """``x`` with axes ``a`` and ``b`` exchanged."""
    rank = asarray(x).value.type.rank
    perm = list(range(rank))
    a, b = normalize_axis("swapaxes", a, rank), normalize_axis("swapaxes", b, rank)
    perm[a], perm[b] = perm[b], perm[a]
    return transpose(x, perm)


def concat(xs: Sequence[Any], axis: int = 0) -> Any:
    """Concatenate along ``axis`` (dtypes promoted)."""
    if not xs:
        raise ShapeError("concat: needs at least one tensor")
    ts = [asarray(x) for x in xs]
    d = ts[0].value.type.dtype
    for t in ts[1:]:
        d = dt.promote(d, t.value.type.dtype)
    vals = [astype(t, d).value for t in ts]
    ax = normalize_axis("concat", axis, vals[0].type.rank)
    return _tensor(current().emit("concat", vals, {"axis": ax}))


def stack(xs: Sequence[Any], axis: int = 0) -> Any:
    """Join same-shaped tensors along a new axis ``axis`` (dtypes promoted)."""
    ts = [asarray(x) for x in xs]
    rank = ts[0].value.type.rank + 1
    ax = normalize_axis("stack", axis, rank)
    expanded = [reshape(t, t.shape[:ax] + (1,) + t.shape[ax:]) for t in ts]
    return concat(expanded, ax)


def take(x: Any, indices: Any, axis: int = 0) -> Any:
    """The slices of ``x`` at integer ``indices`` along ``axis`` (numpy.take; a gather)."""
    v = asarray(x).value
    idx = asarray(indices).value
    ax = normalize_axis("take", axis, v.type.rank)
    return _tensor(current().emit("gather", [v, idx], {"axis": ax}))


def matmul(a: Any, b: Any) -> Any:
    """numpy ``@``: 1-D operands are promoted and squeezed, batch dimensions broadcast."""
    va, vb = _promote_pair_no_broadcast("matmul", a, b)
    ra, rb = va.type.rank, vb.type.rank
    if ra == 0 or rb == 0:
        raise ShapeError("matmul: scalar operands are not allowed", hint="use * for scaling")
    if ra == 1 and rb == 1:
        return _dot(va, vb, ((0,), (0,)), ((), ()))
    if rb == 1:
        return _dot(va, vb, ((ra - 1,), (0,)), ((), ()))
    if ra == 1:
        return _dot(va, vb, ((0,), (rb - 2,)), ((), ()), rhs_batch_front=True)
    if rb == 2:
        return _dot(va, vb, ((ra - 1,), (0,)), ((), ()))
    batch = broadcast_shapes("matmul", va.type.shape[:-2], vb.type.shape[:-2])
    va = broadcast_to(_tensor(va), batch + va.type.shape[-2:]).value
    vb = broadcast_to(_tensor(vb), batch + vb.type.shape[-2:]).value
    nb = len(batch)
    return _dot(va, vb, ((nb + 1,), (nb,)), (tuple(range(nb)), tuple(range(nb))))


def _promote_pair_no_broadcast(op: str, a: Any, b: Any) -> tuple[Value, Value]:
    va, vb = asarray(a).value, asarray(b).value
    d = dt.promote(va.type.dtype, vb.type.dtype)
    return astype(_tensor(va), d).value, astype(_tensor(vb), d).value


def _dot(va: Value, vb: Value, contract: tuple, batch: tuple, rhs_batch_front: bool = False) -> Any:
    if rhs_batch_front and vb.type.rank > 2:  # checked before emitting: no half-built node
        raise ShapeError("matmul: a 1-D lhs with a batched rhs is not supported",
                         hint="reshape the lhs to (1, k) first")
    return _tensor(current().emit("dot_general", [va, vb], {"contract": contract,
                                                            "batch": batch}))


def getitem(x: Any, key: Any) -> Any:
    """Basic indexing: ints, slices with positive steps, None, Ellipsis, and one integer tensor
    index (a gather)."""
    t = asarray(x)
    v = t.value
    keys = key if isinstance(key, tuple) else (key,)
    if sum(k is Ellipsis for k in keys) > 1:
        raise ShapeError("index: only one Ellipsis allowed")
    used = sum(1 for k in keys if k is not None and k is not Ellipsis)
    if used > v.type.rank:
        raise AxisError(f"index: too many indices ({used}) for {v.type}")
    if any(k is Ellipsis for k in keys):  # identity: `in` would call Tensor.__eq__
        i = next(j for j, k in enumerate(keys) if k is Ellipsis)
        keys = keys[:i] + (slice(None),) * (v.type.rank - used) + keys[i + 1:]
    keys = keys + (slice(None),) * (v.type.rank - sum(1 for k in keys if k is not None))
    start, limit, stride, out_shape = [], [], [], []
    gathers: list[tuple[int, Any]] = []
    axis = 0
    for k in keys:
        if k is None:
            out_shape.append(("new", 1))
            continue
        size = v.type.shape[axis]
        if isinstance(k, bool):
            raise ShapeError("index: boolean indices are not supported")
        if isinstance(k, int):
            idx = k + size if k < 0 else k
            if not 0 <= idx < size:
                raise AxisError(f"index {k} is out of bounds for axis {axis} with size {size}")
            start.append(idx), limit.append(idx + 1), stride.append(1)
            out_shape.append(("drop", 1))
        elif isinstance(k, slice):
            s, e, st = k.indices(size)
            if st <= 0:
                raise ShapeError("index: negative or zero slice steps are not supported",
                                 hint="use rlx.flip-free forms: reverse with an index tensor")
            e = max(e, s)
            start.append(s), limit.append(e), stride.append(st)
            out_shape.append(("keep", len(range(s, e, st))))
        elif _value(k) is not None or isinstance(k, list) or hasattr(k, "shape"):
            start.append(0), limit.append(size), stride.append(1)
            gathers.append((axis, k))
            out_shape.append(("gather", size))
        else:
            raise ShapeError(f"index: unsupported index {k!r}")
        axis += 1
    if len(gathers) > 1:
        raise ShapeError("index: only one tensor index per indexing expression is supported")
    cur = v
    if (tuple(start), tuple(limit), tuple(stride)) != ((0,) * v.type.rank, v.type.shape,
                                                        (1,) * v.type.rank):
        cur = current().emit("slice", [cur], {"start": tuple(start), "limit": tuple(limit),
                                              "stride": tuple(stride)})
    if gathers:
        # axes dropped by integer indices sit before the gather axis in cur; count them
        g_axis, g_idx = gathers[0]
        idx_t = asarray(g_idx)
        cur = current().emit("gather", [cur, idx_t.value], {"axis": g_axis})
        shape = []
        for tag, n in out_shape:
            if tag == "gather":
                shape.extend(idx_t.value.type.shape)
            elif tag == "keep":
                shape.append(n)
            elif tag == "new":
                shape.append(1)
        # integer-indexed axes: their size-1 dims are inside cur; reshape drops them
        return reshape(_tensor(cur), tuple(shape)) if tuple(shape) != cur.type.shape else _tensor(cur)
    shape = tuple(n for tag, n in out_shape if tag in ("keep", "new"))
    if shape != cur.type.shape:
        cur = current().emit("reshape", [cur], {"shape": shape})
    return _tensor(cur)


def iota(shape: Sequence[int], dim: int = 0, dtype: object = "i32") -> Any:
    """A tensor of ``shape`` holding each element's index along ``dim``."""
    return _tensor(current().emit("iota", [], {"shape": tuple(shape), "dim": dim,
                                               "dtype": dt.get(dtype)}))


def arange(n: int, dtype: object = "i32") -> Any:
    """``0, 1, ..., n - 1`` (one argument only, unlike numpy.arange)."""
    return iota((n,), 0, dtype)


def zeros(shape: Sequence[int], dtype: object = "f32") -> Any:
    """A tensor of ``shape`` filled with 0."""
    return constant(0, dtype, tuple(shape))


def ones(shape: Sequence[int], dtype: object = "f32") -> Any:
    """A tensor of ``shape`` filled with 1."""
    return constant(1, dtype, tuple(shape))
