"""MIR: the primitive vocabulary (jax.lax-shaped). Operands of elementwise ops have equal shapes
and dtypes; broadcasting and promotion are made explicit by the frontend.
"""

from __future__ import annotations

import math
from typing import Any

from rlx_core.errors import ConstantValueError, DTypeError, ShapeError
from rlx_core.ir import dtypes as dt
from rlx_core.ir.graph import Level, TensorType
from rlx_core.ir.ops.base import (
    REQUIRED,
    AttrSpec,
    OpDef,
    normalize_axis,
    require,
    require_same_dtype,
)

T = TensorType

UNARY = (
    "neg", "abs", "exp", "log", "sqrt", "rsqrt", "tanh", "erf", "logistic", "sin", "cos",
    "floor", "ceil", "round", "sign", "reciprocal", "logical_not",
)
# unary ops that only make sense on inexact (float/complex) values
_FLOAT_UNARY = {"exp", "log", "sqrt", "rsqrt", "tanh", "erf", "logistic", "sin", "cos",
                "floor", "ceil", "round", "reciprocal"}
BINARY = ("add", "sub", "mul", "div", "pow", "max", "min", "rem", "and", "or", "xor")
COMPARE = ("eq", "ne", "lt", "le", "gt", "ge")
REDUCE = ("reduce_sum", "reduce_max", "reduce_min", "reduce_prod")


def _unary(op: str):
    def infer(ins: list[T], a: dict[str, Any]) -> T:
        x = ins[0]
        if op == "logical_not":
            require(x.dtype == dt.bool_ or x.dtype.is_int, op, f"needs bool or int, got {x}",
                    exc=DTypeError)
        elif op in _FLOAT_UNARY:
            require(x.dtype.is_inexact, op, f"needs a float operand, got {x}",
                    hint="cast to f32 first (x.astype('f32'))", exc=DTypeError)
        return x

    return infer


def _binary(op: str):
    def infer(ins: list[T], a: dict[str, Any]) -> T:
        x, y = ins
        require(x.shape == y.shape, op, f"operand shapes differ ({x} vs {y})",
                hint="MIR needs explicit broadcast_in_dim; the frontend inserts it")
        d = require_same_dtype(op, ins)
        if op in ("and", "or", "xor"):
            require(d == dt.bool_ or d.is_int, op, f"needs bool or int operands, got {x}",
                    exc=DTypeError)
        if op == "rem":
            require(not d.is_complex, op, "complex remainder is undefined", exc=DTypeError)
        return x

    return infer


def _compare(op: str):
    def infer(ins: list[T], a: dict[str, Any]) -> T:
        x, y = ins
        require(x.shape == y.shape, op, f"operand shapes differ ({x} vs {y})")
        require_same_dtype(op, ins)
        return T(dt.bool_, x.shape)

    return infer


def _select(ins: list[T], a: dict[str, Any]) -> T:
    p, x, y = ins
    require(p.dtype == dt.bool_, "select", f"predicate must be bool, got {p}", exc=DTypeError)
    require(p.shape == x.shape == y.shape, "select", f"shapes differ ({p}, {x}, {y})")
    require_same_dtype("select", [x, y])
    return x


def _cast(ins: list[T], a: dict[str, Any]) -> T:
    return T(dt.get(a["dtype"]), ins[0].shape)


def _reduce(op: str):
    def infer(ins: list[T], a: dict[str, Any]) -> T:
        x = ins[0]
        axes = tuple(normalize_axis(op, ax, x.rank) for ax in a["axes"])
        require(len(set(axes)) == len(axes), op, f"repeated axis in {a['axes']}")
        require(axes == tuple(a["axes"]), op, "axes must be given sorted and non-negative",
                hint="normalize axes before building MIR")
        require(axes == tuple(sorted(axes)), op, "axes must be sorted")
        if op in ("reduce_max", "reduce_min"):
            require(not x.dtype.is_complex, op, "complex values are not ordered", exc=DTypeError)
        return T(x.dtype, tuple(d for i, d in enumerate(x.shape) if i not in axes))

    return infer


def _argmax(ins: list[T], a: dict[str, Any]) -> T:
    x = ins[0]
    ax = normalize_axis("argmax", a["axis"], x.rank)
    require(ax == a["axis"], "argmax", "axis must be non-negative in MIR")
    out_dt = dt.get(a["index_dtype"])
    require(out_dt.is_int, "argmax", f"index_dtype must be an integer type, got {out_dt}",
            exc=DTypeError)
    return T(out_dt, tuple(d for i, d in enumerate(x.shape) if i != ax))


def _broadcast_in_dim(ins: list[T], a: dict[str, Any]) -> T:
    x = ins[0]
    shape, dims = tuple(a["shape"]), tuple(a["dims"])
    require(len(dims) == x.rank, "broadcast_in_dim",
            f"dims {dims} must name one output axis per operand axis of {x}")
    require(list(dims) == sorted(set(dims)), "broadcast_in_dim", f"dims {dims} must increase")
    for i, d in enumerate(dims):
        require(0 <= d < len(shape), "broadcast_in_dim", f"dim {d} out of range for {shape}")
        require(x.shape[i] in (1, shape[d]), "broadcast_in_dim",
                f"operand axis {i} (size {x.shape[i]}) cannot broadcast to {shape[d]}")
    return T(x.dtype, shape)


def _reshape(ins: list[T], a: dict[str, Any]) -> T:
    x = ins[0]
    shape = tuple(a["shape"])
    require(all(isinstance(d, int) and d >= 0 for d in shape), "reshape",
            f"target shape {list(shape)} must be non-negative integers")
    require(math.prod(shape) == x.size, "reshape",
            f"cannot reshape {x} ({x.size} elements) to {list(shape)} ({math.prod(shape)})")
    return T(x.dtype, shape)


def _transpose(ins: list[T], a: dict[str, Any]) -> T:
    x = ins[0]
    perm = tuple(a["perm"])
    require(sorted(perm) == list(range(x.rank)), "transpose",
            f"perm {list(perm)} is not a permutation of the {x.rank} axes of {x}")
    return T(x.dtype, tuple(x.shape[p] for p in perm))


def _slice(ins: list[T], a: dict[str, Any]) -> T:
    x = ins[0]
    start, limit, stride = tuple(a["start"]), tuple(a["limit"]), tuple(a["stride"])
    require(len(start) == len(limit) == len(stride) == x.rank, "slice",
            f"start/limit/stride need one entry per axis of {x}")
    shape = []
    for s, lim, st, d in zip(start, limit, stride, x.shape, strict=False):
        require(0 <= s <= lim <= d and st >= 1, "slice",
                f"bounds {s}:{lim}:{st} invalid for an axis of size {d}")
        shape.append(max(0, -(-(lim - s) // st)))
    return T(x.dtype, tuple(shape))


def _pad(ins: list[T], a: dict[str, Any]) -> T:
    x = ins[0]
    low, high = tuple(a["low"]), tuple(a["high"])
    require(len(low) == len(high) == x.rank, "pad", f"low/high need one entry per axis of {x}")
    require(all(v >= 0 for v in low + high), "pad", "negative padding is not supported",
            hint="use slice to crop")
    return T(x.dtype, tuple(d + lo + hi for d, lo, hi in zip(x.shape, low, high, strict=False)))


def _concat(ins: list[T], a: dict[str, Any]) -> T:
    first = ins[0]
    ax = a["axis"]
    require(0 <= ax < first.rank, "concat", f"axis {ax} out of range for {first}")
    require_same_dtype("concat", ins)
    for t in ins[1:]:
        require(t.rank == first.rank and all(
            d == e for i, (d, e) in enumerate(zip(t.shape, first.shape, strict=False)) if i != ax),
            "concat", f"shapes {t} and {first} differ off axis {ax}")
    return T(first.dtype, tuple(
        sum(t.shape[ax] for t in ins) if i == ax else d for i, d in enumerate(first.shape)))


def _gather(ins: list[T], a: dict[str, Any]) -> T:
    x, idx = ins
    ax = a["axis"]
    require(0 <= ax < x.rank, "gather", f"axis {ax} out of range for {x}")
    require(idx.dtype.is_int, "gather", f"indices must be integers, got {idx}", exc=DTypeError)
    return T(x.dtype, x.shape[:ax] + idx.shape + x.shape[ax + 1:])


def _scatter_add(ins: list[T], a: dict[str, Any]) -> T:
    x, idx, upd = ins
    ax = a["axis"]
    require(0 <= ax < x.rank, "scatter_add", f"axis {ax} out of range for {x}")
    require(idx.dtype.is_int, "scatter_add", f"indices must be integers, got {idx}",
            exc=DTypeError)
    want = x.shape[:ax] + idx.shape + x.shape[ax + 1:]
    require(upd.shape == want, "scatter_add", f"updates {upd} must have shape {list(want)}")
    require_same_dtype("scatter_add", [x, upd])
    return x


def _dot_general(ins: list[T], a: dict[str, Any]) -> T:
    lhs, rhs = ins
    (lc, rc), (lb, rb) = a["contract"], a["batch"]
    require(len(lc) == len(rc) and len(lb) == len(rb), "dot_general",
            "contract/batch dims must pair up")
    for i, j in zip(lc + lb, rc + rb, strict=False):
        require(0 <= i < lhs.rank and 0 <= j < rhs.rank, "dot_general",
                f"dimension out of range for {lhs} @ {rhs}")
        require(lhs.shape[i] == rhs.shape[j], "dot_general",
                f"cannot contract {lhs} with {rhs}: lhs axis {i} is {lhs.shape[i]}, "
                f"rhs axis {j} is {rhs.shape[j]}",
                hint="transpose one operand, or check the weight's layout (out, in) vs (in, out)")
    d = require_same_dtype("dot_general", ins)
    require(d != dt.bool_, "dot_general", "bool matmul is undefined", exc=DTypeError)
    batch = tuple(lhs.shape[i] for i in lb)
    lfree = tuple(s for i, s in enumerate(lhs.shape) if i not in lc and i not in lb)
    rfree = tuple(s for i, s in enumerate(rhs.shape) if i not in rc and i not in rb)
    return T(d, batch + lfree + rfree)


def _iota(ins: list[T], a: dict[str, Any]) -> T:
    shape = tuple(a["shape"])
    require(0 <= a["dim"] < len(shape), "iota", f"dim {a['dim']} out of range for {shape}")
    return T(dt.get(a["dtype"]), shape)


def _constant(ins: list[T], a: dict[str, Any]) -> T:
    shape = tuple(a["shape"])
    value = a["value"]
    d = dt.get(a["dtype"])
    n = math.prod(shape)
    if isinstance(value, tuple):
        require(len(value) == n, "constant",
                f"{len(value)} values given for shape {list(shape)} ({n} elements)")
        for i, v in enumerate(value):
            _check_literal(v, d, f"element {i}")
    else:
        _check_literal(value, d, "value")
    return T(d, shape)


def _int_range(d: dt.DType) -> tuple[int, int]:
    if d.kind is dt.Kind.UINT:
        return 0, (1 << d.bits) - 1
    return -(1 << (d.bits - 1)), (1 << (d.bits - 1)) - 1


def _check_literal(v: Any, d: dt.DType, what: str) -> None:
    """A constant's value must be a number every target can write as a ``d`` literal: no
    strings, none, dtypes or nested tuples; complex only for complex dtypes; integers within
    the dtype's range; no inf/nan or fractions for integer dtypes."""
    def bad(why: str) -> ConstantValueError:
        return ConstantValueError(
            f"constant: {what} {v!r} {why} (dtype {d})",
            hint=f"write a {d} literal: a number, or a flat tuple of numbers "
                 "(complex(re, im) only for complex dtypes)")

    if not isinstance(v, bool | int | float | complex):
        raise bad(f"is a {type(v).__name__}, not a number")
    if isinstance(v, complex):
        if not d.is_complex:
            raise bad("is complex but the dtype is not")
        return
    if d.kind is dt.Kind.BOOL:
        return  # any real number: zero is false, anything else true (numpy's and C's cast)
    if d.is_float or d.is_complex:
        if isinstance(v, int) and not isinstance(v, bool) and abs(v) >= 2 ** 1024:
            raise bad("overflows every float type")
        return
    if isinstance(v, float):
        if not math.isfinite(v):
            raise bad("is not finite, and integer types have no inf or nan")
        if v != int(v):
            raise bad("is not a whole number")
    lo, hi = _int_range(d)
    if not lo <= v <= hi:
        raise bad(f"is outside [{lo}, {hi}]")


def _no_attrs() -> dict[str, AttrSpec]:
    return {}


def _defs() -> dict[str, OpDef]:
    mir = Level.MIR
    table: dict[str, OpDef] = {}

    def add(name, cat, arity, attrs, infer, doc):
        table[name] = OpDef(name, mir, cat, arity, attrs, infer, doc)

    for op in UNARY:
        add(op, "unary", (1, 1), _no_attrs(), _unary(op), f"elementwise {op}(x)")
    for op in BINARY:
        add(op, "binary", (2, 2), _no_attrs(), _binary(op), f"elementwise {op}(x, y)")
    for op in COMPARE:
        add(op, "compare", (2, 2), _no_attrs(), _compare(op), f"elementwise x {op} y -> bool")
    add("select", "select", (3, 3), {}, _select, "select(pred, on_true, on_false)")
    add("cast", "cast", (1, 1), {"dtype": AttrSpec("dtype")}, _cast, "convert element type")
    for op in REDUCE:
        add(op, "reduce", (1, 1), {"axes": AttrSpec("ints")}, _reduce(op),
            f"{op} over the given axes (dropped from the result)")
    add("argmax", "reduce", (1, 1),
        {"axis": AttrSpec("int"), "index_dtype": AttrSpec("dtype", dt.i32)}, _argmax,
        "index of the first maximum along axis")
    add("broadcast_in_dim", "movement", (1, 1),
        {"shape": AttrSpec("ints"), "dims": AttrSpec("ints")}, _broadcast_in_dim,
        "operand axis i becomes output axis dims[i]; size-1 axes stretch")
    add("reshape", "movement", (1, 1), {"shape": AttrSpec("ints")}, _reshape, "row-major reshape")
    add("transpose", "movement", (1, 1), {"perm": AttrSpec("ints")}, _transpose,
        "output axis i is operand axis perm[i]")
    add("slice", "movement", (1, 1),
        {"start": AttrSpec("ints"), "limit": AttrSpec("ints"), "stride": AttrSpec("ints")},
        _slice, "strided window start:limit:stride per axis")
    add("pad", "movement", (1, 1),
        {"low": AttrSpec("ints"), "high": AttrSpec("ints"), "value": AttrSpec("float", 0.0)},
        _pad, "constant padding before/after each axis")
    add("concat", "movement", (1, 64), {"axis": AttrSpec("int")}, _concat,
        "concatenate along axis")
    add("gather", "index", (2, 2), {"axis": AttrSpec("int")}, _gather,
        "take(x, indices, axis): indices' shape replaces axis")
    add("scatter_add", "index", (3, 3), {"axis": AttrSpec("int")}, _scatter_add,
        "x with updates added at indices along axis (repeats accumulate)")
    add("dot_general", "contract", (2, 2),
        {"contract": AttrSpec("ints2"), "batch": AttrSpec("ints2", ((), ()))}, _dot_general,
        "contraction; result axes are batch, lhs free, rhs free")
    add("iota", "source", (0, 0),
        {"shape": AttrSpec("ints"), "dim": AttrSpec("int"), "dtype": AttrSpec("dtype", dt.i32)},
        _iota, "index along dim, broadcast to shape")
    add("constant", "source", (0, 0),
        {"value": AttrSpec("any"), "shape": AttrSpec("ints", ()), "dtype": AttrSpec("dtype")},
        _constant, "a literal: a scalar splat or a flat row-major tuple")
    return table


MIR_OPS: dict[str, OpDef] = _defs()
ELEMENTWISE_CATEGORIES = ("unary", "binary", "compare", "select", "cast")

__all__ = ["MIR_OPS", "UNARY", "BINARY", "COMPARE", "REDUCE", "ELEMENTWISE_CATEGORIES",
           "REQUIRED", "ShapeError"]
