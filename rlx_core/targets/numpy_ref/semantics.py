"""The living definition of every MIR op and HIR composite: ``eval_op`` on numpy arrays.

Every backend is checked against this file, so each rule that numpy leaves open is pinned here:

- Host representation: each dtype is held in ``dt.to_numpy_name(dtype)``. bf16 lives in float32
  and is rounded to bf16 (round-to-nearest-even of the top 16 bits, NaN kept NaN) on every op
  that produces bf16. Packed i4 lives unpacked in int8 within [-8, 7].
- Integer arithmetic wraps (two's complement) in the result's width, i4 included. ``div``
  truncates toward zero and ``rem`` has the sign of the dividend (C). Integer division or
  remainder by zero gives 0 (numpy's convention; C leaves it undefined, so conformance tests
  avoid it). ``pow`` with a negative integer exponent truncates 1/x^n toward zero (0 unless
  |x| == 1).
- Bool arithmetic is computed in i8 and read back as ``!= 0`` (so add is or, mul is and, sub
  is xor); ``logical_not`` is logical on bool and bitwise (``~x``) on integers.
- ``cast``: float -> int truncates toward zero and saturates to the target range, NaN -> 0;
  int -> int wraps; anything -> bool is ``!= 0``; complex -> real keeps the real part.
- float sums and products (reductions) accumulate in f64 and round once at the end (as the C
  targets do: docs/reliability.md); f16 and bf16 contractions accumulate in f32.
- Comparisons give bool; ``argmax`` gives the first maximum (a NaN counts as the maximum);
  ``reduce_max``/``reduce_min`` of an empty axis give the lowest/highest value of the dtype.
- ``gather`` is ``np.take(x, idx, axis)`` (negative indices count from the end; an index out of
  range raises IndexOutOfRangeError); ``scatter_add`` is ``np.add.at`` along ``axis``.
- ``dot_general`` result axes are batch, lhs free, rhs free (each group in operand order).
- ``round`` is half to even (like ``np.round``); ``erf`` is ``math.erf`` elementwise.
- HIR ``attention`` replaces masked scores by the dtype's most negative finite value (not -inf),
  so a fully masked row averages v uniformly instead of giving NaN. ``causal`` lets query i see
  keys j <= i (top-left aligned, like torch ``is_causal``). A padding mask (batch, seq_k) is
  truthy where a key is real (the HuggingFace ``attention_mask`` convention).
- HIR ``avg_pool2d`` counts padding as zeros (``count_include_pad=True``, like torch).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from rlx_core.errors import DTypeError, IndexOutOfRangeError, RlxError
from rlx_core.ir import dtypes as dt
from rlx_core.ir.dtypes import DType
from rlx_core.ir.graph import TensorType
from rlx_core.ir.ops.collective import COLLECTIVE_OPS
from rlx_core.targets.numpy_ref import (
    linalg_semantics,
    quant_semantics,
    sparse_semantics,
    splat_semantics,
)


class SemanticsError(RlxError):
    """The reference has no rule for this op (or the op disagrees with its shape rule)."""

    code = "RLX-R003"


Array = np.ndarray
OpFn = Callable[[dict[str, Any], list[Array], TensorType], Array]


# ---- dtype plumbing ---------------------------------------------------------------------------


def host_dtype(d: DType) -> np.dtype:
    """The numpy dtype holding values of ``d`` (bf16 -> float32, i4 -> int8)."""
    return np.dtype(dt.to_numpy_name(d))


def round_bf16(x: Array) -> Array:
    """float32 values rounded to the nearest bf16 (ties to even), returned as float32."""
    f = np.asarray(x, dtype=np.float32)
    bits = f.view(np.uint32).astype(np.uint64)
    bias = ((bits >> 16) & 1) + 0x7FFF
    rounded = ((bits + bias) & 0xFFFF0000).astype(np.uint32).view(np.float32)
    # the carry trick would turn a NaN whose payload sits in the low bits into inf
    return np.where(np.isnan(f), np.float32(np.nan), rounded).astype(np.float32)


def _int_bounds(d: DType) -> tuple[int, int]:
    if d == dt.i4:
        return -8, 7
    info = np.iinfo(host_dtype(d))
    return int(info.min), int(info.max)


def _wrap_i4(x: Array) -> Array:
    return (((x.astype(np.int64) + 8) % 16) - 8).astype(np.int8)


def convert(x: Array, d: DType) -> Array:
    """``cast`` semantics: convert host array ``x`` to dtype ``d`` (see the module docstring)."""
    x = np.asarray(x)
    want = host_dtype(d)
    if d == dt.bool_:
        return x if x.dtype == np.bool_ else (x != 0)
    if np.iscomplexobj(x) and not d.is_complex:
        x = x.real
    if d.is_int:
        if x.dtype.kind == "f":
            lo, hi = _int_bounds(d)
            f = x.astype(np.float64)
            f = np.where(np.isnan(f), 0.0, f)
            high, low = f >= float(hi), f <= float(lo)
            safe = np.where(high | low, 0.0, np.trunc(f)).astype(np.int64)
            out = np.where(high, hi, np.where(low, lo, safe))
            return out.astype(want)
        if d == dt.i4:
            return _wrap_i4(x)
        return x.astype(want)  # int -> int wraps, bool -> 0/1
    out = x.astype(want)
    if d == dt.bf16:
        out = round_bf16(out)
    return out


def finish(x: Any, t: TensorType) -> Array:
    """Bring a computed result into the host form of ``t`` (dtype, bf16 rounding, i4 wrap)."""
    arr = np.asarray(x)
    if arr.dtype != host_dtype(t.dtype) or t.dtype in (dt.bf16, dt.i4):
        arr = convert(arr, t.dtype)
    if arr.shape != t.shape:
        raise SemanticsError(f"result shape {list(arr.shape)} disagrees with the rule's {t}",
                             hint="the op's shape rule and its reference semantics differ")
    return np.asarray(arr, order="C")  # (np.ascontiguousarray would make 0-d arrays 1-d)


def _wide(x: Array) -> Array:
    """Operands as computed: f16 (bf16 is already f32) widened to f32, bool to i8."""
    if x.dtype == np.float16:
        return x.astype(np.float32)
    if x.dtype == np.bool_:
        return x.astype(np.int8)
    return x


def _is_int(x: Array) -> bool:
    return x.dtype.kind in "iu"


def _float_only(op: str, x: Array) -> None:
    if x.dtype.kind not in "fc":
        raise DTypeError(f"{op}: needs a float operand, got {x.dtype}")


# ---- elementwise --------------------------------------------------------------------------


def _erf(x: Array) -> Array:
    if np.iscomplexobj(x):
        raise DTypeError("erf: complex operands are not supported by the reference")
    flat = np.fromiter((math.erf(float(v)) for v in x.reshape(-1)), np.float64, x.size)
    return flat.reshape(x.shape)


def _logistic(x: Array) -> Array:
    if np.iscomplexobj(x):
        return 1.0 / (1.0 + np.exp(-x))
    # the two branches keep exp from overflowing for large |x|
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1.0 / (1.0 + e), e / (1.0 + e))


def _real_only(op: str, fn: Callable[[Array], Array]) -> Callable[[Array], Array]:
    def run(x: Array) -> Array:
        if np.iscomplexobj(x):
            raise DTypeError(f"{op}: complex operands are not supported by the reference")
        return fn(x)

    return run


def _logical_not(x: Array) -> Array:
    return np.logical_not(x) if x.dtype == np.bool_ else np.invert(x)


_UNARY: dict[str, Callable[[Array], Array]] = {
    "neg": np.negative,
    "abs": np.abs,
    "exp": np.exp,
    "log": np.log,
    "sqrt": np.sqrt,
    "rsqrt": lambda x: 1.0 / np.sqrt(x),
    "tanh": np.tanh,
    "erf": _erf,
    "logistic": _logistic,
    "sin": np.sin,
    "cos": np.cos,
    "floor": _real_only("floor", np.floor),
    "ceil": _real_only("ceil", np.ceil),
    "round": np.round,
    "sign": np.sign,
    "reciprocal": lambda x: 1.0 / x,
}


def _int_div(a: Array, b: Array) -> Array:
    q = np.floor_divide(a, b)
    r = np.fmod(a, b)
    # floor and truncation differ when the remainder is nonzero and the signs differ
    fix = (r != 0) & ((a < 0) != (b < 0))
    return np.where(fix, q + 1, q).astype(q.dtype)


def _float_pow(a: Array, b: Array) -> Array:
    """np.power through its array loop whatever the rank: on 0-d operands numpy takes its
    scalar path, where pow(-inf, 0.5) is NaN, while the array loop (and C99/IEEE 754 pow, as
    the compiled targets call it) gives +inf (numpy 2.4; a cpu fuzz finding, seed [20261212,
    20526, 953])."""
    shape = np.broadcast_shapes(np.shape(a), np.shape(b))
    return np.power(np.atleast_1d(a), np.atleast_1d(b)).reshape(shape)


def _int_pow(a: Array, b: Array) -> Array:
    neg = b < 0
    base = np.power(a, np.where(neg, 0, b).astype(b.dtype))
    if not neg.any():
        return base
    odd = (b % 2) != 0
    minus_one = np.where(odd, -1, 1)
    frac = np.where(a == 1, 1, np.where(a == -1, minus_one, 0)).astype(a.dtype)
    return np.where(neg, frac, base).astype(a.dtype)


def _binary(op: str, a: Array, b: Array) -> Array:
    if op in ("and", "or", "xor"):
        fn = {"and": np.bitwise_and, "or": np.bitwise_or, "xor": np.bitwise_xor}[op]
        return fn(a, b)
    if op in ("max", "min") and a.dtype == np.bool_:
        return np.logical_or(a, b) if op == "max" else np.logical_and(a, b)
    a, b = _wide(a), _wide(b)
    ints = _is_int(a)
    if op == "add":
        return np.add(a, b)
    if op == "sub":
        return np.subtract(a, b)
    if op == "mul":
        return np.multiply(a, b)
    if op == "div":
        return _int_div(a, b) if ints else np.true_divide(a, b)
    if op == "rem":
        return np.fmod(a, b)
    if op == "pow":
        return _int_pow(a, b) if ints else _float_pow(a, b)
    if op == "max":
        return np.maximum(a, b)
    if op == "min":
        return np.minimum(a, b)
    raise SemanticsError(f"no reference rule for binary op {op!r}")


_COMPARE: dict[str, Callable[[Array, Array], Array]] = {
    "eq": np.equal, "ne": np.not_equal, "lt": np.less,
    "le": np.less_equal, "gt": np.greater, "ge": np.greater_equal,
}


# ---- reductions -------------------------------------------------------------------------------


def _acc(x: Array) -> Array:
    """Operand type of max/min: f16 compared in f32 (bf16 already is f32)."""
    return x.astype(np.float32) if x.dtype == np.float16 else x


def _acc_dtype(x: Array) -> Any:
    """Accumulator of sums and products: f64 for every float (rounded once to the result's
    dtype by ``finish``, as the C targets' double accumulators do), so an overflow that only a
    partial sum has is not one (docs/reliability.md); integers keep their width (they wrap)."""
    return np.float64 if x.dtype.kind == "f" else x.dtype


def _reduce(op: str, a: dict[str, Any], x: Array) -> Array:
    axes = tuple(a["axes"])
    if op == "reduce_sum":
        return np.sum(x, axis=axes, dtype=_acc_dtype(x))
    if op == "reduce_prod":
        return np.prod(x, axis=axes, dtype=_acc_dtype(x))
    xs = _acc(x)
    if xs.dtype == np.bool_:
        return np.any(xs, axis=axes) if op == "reduce_max" else np.all(xs, axis=axes)
    if xs.dtype.kind == "f":
        lowest, highest = -np.inf, np.inf
    else:
        info = np.iinfo(xs.dtype)
        lowest, highest = info.min, info.max
    if op == "reduce_max":
        return np.max(xs, axis=axes, initial=lowest)
    return np.min(xs, axis=axes, initial=highest)


def _argmax(a: dict[str, Any], x: Array) -> Array:
    ax = a["axis"]
    if x.shape[ax] == 0:
        raise SemanticsError("argmax over an empty axis has no answer")
    return np.argmax(x, axis=ax)


# ---- data movement and indexing ------------------------------------------------------------------


def broadcast_in_dim(x: Array, shape: tuple[int, ...], dims: tuple[int, ...]) -> Array:
    """Operand axis i becomes output axis dims[i]; size-1 axes stretch (a read-only view)."""
    expanded = [1] * len(shape)
    for i, d in enumerate(dims):
        expanded[d] = x.shape[i]
    return np.broadcast_to(x.reshape(expanded), shape)


def _check_indices(op: str, idx: Array, size: int) -> None:
    if idx.size and (idx.min() < -size or idx.max() >= size):
        bad = idx[(idx < -size) | (idx >= size)].reshape(-1)[0]
        raise IndexOutOfRangeError(f"{op}: index {int(bad)} is out of range for an axis of "
                                   f"size {size}", hint=f"indices must lie in [{-size}, {size - 1}]")


def _gather(a: dict[str, Any], x: Array, idx: Array) -> Array:
    ax = a["axis"]
    _check_indices("gather", idx, x.shape[ax])
    return np.take(x, idx.astype(np.int64), axis=ax)


def _scatter_add(a: dict[str, Any], x: Array, idx: Array, upd: Array) -> Array:
    ax = a["axis"]
    _check_indices("scatter_add", idx, x.shape[ax])
    out = _wide(x).copy()
    target = np.moveaxis(out, ax, 0)  # a view: np.add.at writes through it into out
    k = idx.ndim
    src = np.moveaxis(_wide(upd), list(range(ax, ax + k)), list(range(k)))
    np.add.at(target, idx.astype(np.int64), src)
    return out


def _dot_general(a: dict[str, Any], lhs: Array, rhs: Array) -> Array:
    (lc, rc), (lb, rb) = a["contract"], a["batch"]
    lf = [i for i in range(lhs.ndim) if i not in lc and i not in lb]
    rf = [i for i in range(rhs.ndim) if i not in rc and i not in rb]
    batch = [lhs.shape[i] for i in lb]
    m = [lhs.shape[i] for i in lf]
    n = [rhs.shape[i] for i in rf]
    k = math.prod(lhs.shape[i] for i in lc)
    if _is_int(lhs):
        # i64 accumulation then one wrap equals wrapping at every step (modular arithmetic)
        lhs, rhs = lhs.astype(np.int64), rhs.astype(np.int64)
    else:
        lhs, rhs = _acc(lhs), _acc(rhs)
    lt = np.transpose(lhs, list(lb) + lf + list(lc)).reshape(math.prod(batch), math.prod(m), k)
    rt = np.transpose(rhs, list(rb) + list(rc) + rf).reshape(math.prod(batch), k, math.prod(n))
    return np.matmul(lt, rt).reshape(batch + m + n)


def _iota(a: dict[str, Any]) -> Array:
    shape, dim = tuple(a["shape"]), a["dim"]
    ramp = np.arange(shape[dim]).reshape([-1 if i == dim else 1 for i in range(len(shape))])
    return np.broadcast_to(ramp, shape)


def _constant(a: dict[str, Any], t: TensorType) -> Array:
    value = a["value"]
    if isinstance(value, tuple):
        return convert(np.array(value).reshape(t.shape), t.dtype)
    return convert(np.full(t.shape, value), t.dtype)


def _pad(a: dict[str, Any], x: Array, t: TensorType) -> Array:
    fill = convert(np.asarray(a["value"]), t.dtype)
    return np.pad(x, list(zip(a["low"], a["high"], strict=True)), constant_values=fill)


def _mir(op: str, a: dict[str, Any], args: list[Array], t: TensorType) -> Array:
    if op in _UNARY:
        x = _wide(args[0])
        if x.dtype.kind in "iu" and op not in ("neg", "abs", "sign"):
            _float_only(op, x)
        return _UNARY[op](x)
    if op == "logical_not":
        return _logical_not(args[0])
    if op in _COMPARE:
        return _COMPARE[op](args[0], args[1])
    if op in ("add", "sub", "mul", "div", "pow", "max", "min", "rem", "and", "or", "xor"):
        return _binary(op, args[0], args[1])
    if op == "select":
        return np.where(args[0], args[1], args[2])
    if op == "cast":
        return convert(args[0], dt.get(a["dtype"]))
    if op in ("reduce_sum", "reduce_max", "reduce_min", "reduce_prod"):
        return _reduce(op, a, args[0])
    if op == "argmax":
        return _argmax(a, args[0])
    if op == "broadcast_in_dim":
        return broadcast_in_dim(args[0], tuple(a["shape"]), tuple(a["dims"]))
    if op == "reshape":
        return np.reshape(args[0], tuple(a["shape"]))
    if op == "transpose":
        return np.transpose(args[0], tuple(a["perm"]))
    if op == "slice":
        return args[0][tuple(slice(s, e, st) for s, e, st in
                             zip(a["start"], a["limit"], a["stride"], strict=True))]
    if op == "pad":
        return _pad(a, args[0], t)
    if op == "concat":
        return np.concatenate(args, axis=a["axis"])
    if op == "gather":
        return _gather(a, args[0], args[1])
    if op == "scatter_add":
        return _scatter_add(a, *args)
    if op == "dot_general":
        return _dot_general(a, args[0], args[1])
    if op == "iota":
        return _iota(a)
    if op == "constant":
        return _constant(a, t)
    raise SemanticsError(f"no reference semantics for op {op!r}",
                         hint="add it to rlx_core/targets/numpy_ref/semantics.py")


# ---- HIR composites (oracles for the decompositions; computed in f64, rounded once) ----------


def _f64(x: Array) -> Array:
    return x.astype(np.complex128 if np.iscomplexobj(x) else np.float64)


def _linear(a: dict[str, Any], args: list[Array], t: TensorType) -> Array:
    x, w = _f64(args[0]), _f64(args[1])
    y = x @ w.T
    return y + _f64(args[2]) if len(args) == 3 else y


def _affine(y: Array, args: list[Array]) -> Array:
    if len(args) >= 2:
        y = y * _f64(args[1])
    if len(args) >= 3:
        y = y + _f64(args[2])
    return y


def _layer_norm(a: dict[str, Any], args: list[Array], t: TensorType) -> Array:
    x = _f64(args[0])
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)  # biased, as torch
    return _affine((x - mean) / np.sqrt(var + a["eps"]), args)


def _rms_norm(a: dict[str, Any], args: list[Array], t: TensorType) -> Array:
    x = _f64(args[0])
    y = x / np.sqrt((x * x).mean(axis=-1, keepdims=True) + a["eps"])
    return y * _f64(args[1]) if len(args) == 2 else y


def _softmax(x: Array, axis: int, log: bool) -> Array:
    # initial=-inf: a zero-size operand has no maximum to shift by (its result is empty too)
    shifted = x - x.max(axis=axis, keepdims=True, initial=-np.inf)
    total = np.exp(shifted).sum(axis=axis, keepdims=True)
    return shifted - np.log(total) if log else np.exp(shifted) / total


def _gelu(a: dict[str, Any], args: list[Array], t: TensorType) -> Array:
    x = _f64(args[0])
    if a.get("approximate", "none") == "tanh":
        return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))
    return 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0)))


def _attention(a: dict[str, Any], args: list[Array], t: TensorType) -> Array:
    q, k, v = (_f64(x) for x in args[:3])
    if a.get("layout", "bhsd") == "bshd":  # (batch, seq, heads, dim) in and out
        q, k, v = (x.transpose(0, 2, 1, 3) for x in (q, k, v))
        out = _attention({**a, "layout": "bhsd"}, [q, k, v, *args[3:]],
                         TensorType(t.dtype, (t.shape[0], t.shape[2], t.shape[1], t.shape[3])))
        return out.transpose(0, 2, 1, 3)
    scale = a.get("scale", 0.0) or 1.0 / math.sqrt(q.shape[-1])
    scores = np.einsum("bhqd,bhkd->bhqk", q, k) * scale
    sq, sk = q.shape[2], k.shape[2]
    keep = np.ones((q.shape[0], 1, sq, sk), dtype=bool)
    if a.get("mask", "none") == "causal":
        keep = keep & np.tril(np.ones((sq, sk), dtype=bool))
    elif a.get("mask") == "padding":
        keep = keep & (args[3] != 0).reshape(q.shape[0], 1, 1, sk)
    # replacement, not addition, of the most negative finite value: no inf - inf, no NaN rows
    scores = np.where(keep, scores, np.finfo(host_dtype(t.dtype)).min)
    return np.einsum("bhqk,bhkd->bhqd", _softmax(scores, -1, False), v)


def _embedding(a: dict[str, Any], args: list[Array], t: TensorType) -> Array:
    ids, table = args
    _check_indices("embedding", ids, table.shape[0])
    return np.take(table, ids.astype(np.int64), axis=0)


def _windows(x: Array, kh: int, kw: int, sh: int, sw: int, dh: int, dw: int,
             oh: int, ow: int) -> Array:
    """(N, C, kh, kw, oh, ow): the input sample under every window tap."""
    taps = [[x[:, :, i * dh: i * dh + sh * (oh - 1) + 1: sh, j * dw: j * dw + sw * (ow - 1) + 1: sw]
             for j in range(kw)] for i in range(kh)]
    return np.stack([np.stack(row, axis=2) for row in taps], axis=2)


def _conv2d(a: dict[str, Any], args: list[Array], t: TensorType) -> Array:
    x, w = _f64(args[0]), _f64(args[1])
    (sh, sw), (ph, pw), (dh, dw) = a["stride"], a["padding"], a["dilation"]
    g = a["groups"]
    n, _, oh, ow = t.shape
    o, cg, kh, kw = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw)))
    win = _windows(xp, kh, kw, sh, sw, dh, dw, oh, ow)  # N, C, kh, kw, oh, ow
    win = win.reshape(n, g, cg, kh, kw, oh, ow)
    wg = w.reshape(g, o // g, cg, kh, kw)
    y = np.einsum("ngcijhw,gocij->ngohw", win, wg).reshape(n, o, oh, ow)
    return y + _f64(args[2]).reshape(1, o, 1, 1) if len(args) == 3 else y


def _conv2d_fused(a: dict[str, Any], args: list[Array], t: TensorType) -> Array:
    residual = bool(a["residual"])
    y = _conv2d(a, args[:len(args) - int(residual)], t)
    if residual:
        y = y + _f64(args[-1])
    return _act(a, y)


def _act(a: dict[str, Any], y: Array) -> Array:
    """A fused convolution's act: none, max(., lo), min(., hi) or clip."""
    if a["act"] in ("max", "clip"):
        y = np.maximum(y, a["lo"])
    if a["act"] in ("min", "clip"):
        y = np.minimum(y, a["hi"])
    return y


def _conv2d_pair(a: dict[str, Any], args: list[Array], t: TensorType) -> Array:
    second = {"stride": a["stride2"], "padding": (0, 0), "dilation": (1, 1), "groups": 1}
    return _act(a, _conv2d(a, args[:3], t) + _conv2d(second, args[3:], t))


def _pool(a: dict[str, Any], args: list[Array], t: TensorType, kind: str) -> Array:
    x = _f64(args[0])
    (kh, kw), (sh, sw), (ph, pw) = a["kernel"], a["stride"], a["padding"]
    fill = -np.inf if kind == "max" else 0.0
    xp = np.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw)), constant_values=fill)
    win = _windows(xp, kh, kw, sh, sw, 1, 1, t.shape[2], t.shape[3])
    return win.max(axis=(2, 3)) if kind == "max" else win.sum(axis=(2, 3)) / (kh * kw)


def _axis(a: dict[str, Any], x: Array) -> int:
    return a.get("axis", -1) % max(x.ndim, 1)


def _collective(op: str, a: dict[str, Any], xs: list[Array], t: TensorType) -> Array:
    # imported on use: the communicator needs mpi4py, which plain numpy runs never load
    from rlx_core.distributed.collective_exec import run_collective

    return run_collective(op, a, xs, t)


COMPOSITES: dict[str, OpFn] = {
    "linear": _linear,
    "layer_norm": _layer_norm,
    "rms_norm": _rms_norm,
    "softmax": lambda a, xs, t: _softmax(_f64(xs[0]), _axis(a, xs[0]), False),
    "log_softmax": lambda a, xs, t: _softmax(_f64(xs[0]), _axis(a, xs[0]), True),
    "gelu": _gelu,
    "silu": lambda a, xs, t: _f64(xs[0]) * _logistic(_f64(xs[0])),
    "attention": _attention,
    "embedding": _embedding,
    "conv2d": _conv2d,
    "conv2d_fused": _conv2d_fused,
    "conv2d_pair": _conv2d_pair,
    "max_pool2d": lambda a, xs, t: _pool(a, xs, t, "max"),
    "avg_pool2d": lambda a, xs, t: _pool(a, xs, t, "avg"),
    # quantization (quant_semantics.py pins their integer rules)
    **{op: (lambda a, xs, t, op=op: quant_semantics.eval_quant(op, a, xs, t))
       for op in quant_semantics.QUANT_OPS},
    # 3D Gaussian splatting: the oracle (splat_semantics.py, rlx_core/splat/reference.py)
    **{op: (lambda a, xs, t, op=op: splat_semantics.eval_splat(op, a, xs, t))
       for op in splat_semantics.SPLAT_OPS},
    # dense and sparse linear algebra (linalg_semantics.py, sparse_semantics.py)
    **{op: (lambda a, xs, t, op=op: linalg_semantics.eval_linalg(op, a, xs, t))
       for op in linalg_semantics.LINALG_OPS},
    **{op: (lambda a, xs, t, op=op: sparse_semantics.eval_sparse(op, a, xs, t))
       for op in sparse_semantics.SPARSE_SEMANTIC_OPS},
    # collectives: one mpi4py buffer operation each, on the active communicator
    **{op: (lambda a, xs, t, op=op: _collective(op, a, xs, t)) for op in COLLECTIVE_OPS},
}


def eval_op(op: str, attrs: dict[str, Any], args: list[Array], out_type: TensorType) -> Array:
    """Evaluate one MIR or HIR op on host arrays; the result is in ``out_type``'s host form.

    The result is a fresh contiguous array or a read-only view of an operand; callers that
    keep it beyond the operands' lifetime copy it.
    """
    args = [np.asarray(x) for x in args]
    with np.errstate(all="ignore"):  # overflow, 0/0 and friends are defined above, not warned
        if op in COMPOSITES:
            raw = COMPOSITES[op](attrs, args, out_type)
        else:
            raw = _mir(op, attrs, args, out_type)
        return finish(raw, out_type)


__all__ = ["eval_op", "convert", "finish", "round_bf16", "host_dtype", "broadcast_in_dim",
           "IndexOutOfRangeError", "SemanticsError"]
