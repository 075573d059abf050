"""Converters for ONNX shape and data-movement ops: Reshape, Transpose, Concat, Slice, Pad, ..."""

from __future__ import annotations

import math
from typing import Any

from rlx_core.frontend.onnx_import import dtypes as odt
from rlx_core.frontend.onnx_import.context import (
    NodeCtx,
    check_index_table,
    check_static_size,
    tensor_array,
)
from rlx_core.frontend.onnx_import.errors import Reject
from rlx_core.ir import dtypes as dt
from rlx_core.ir.graph import TensorType, Value, row_strides


def reshape(n: NodeCtx) -> Value:
    x = n.x(0)
    spec = n.static_ints(n.x(1), "the target shape")
    allowzero = int(n.attr("allowzero", 0))
    shape = []
    for i, s in enumerate(spec):
        if s == 0 and not allowzero:
            if i >= x.type.rank:
                raise Reject(f"shape entry {i} is 0 (copy) but the input has rank {x.type.rank}")
            shape.append(x.type.shape[i])
        else:
            shape.append(s)
    if shape.count(-1) > 1:
        raise Reject("more than one -1 in the target shape")
    if -1 in shape:
        known = math.prod(s for s in shape if s != -1)
        if known == 0 or x.type.size % known:
            raise Reject(f"cannot infer -1 reshaping {x.type} to {spec}")
        shape[shape.index(-1)] = x.type.size // known
    if any(s < 0 for s in shape) or math.prod(shape) != x.type.size:
        raise Reject(f"cannot reshape {x.type} to {spec}")
    return n.reshape(x, shape)


def flatten(n: NodeCtx) -> Value:
    x = n.x(0)
    rank = x.type.rank
    ax = int(n.attr("axis", 1))
    if not -rank <= ax <= rank:
        raise Reject(f"axis {ax} out of range for rank {rank}")
    ax = ax + rank if ax < 0 else ax
    return n.reshape(x, [math.prod(x.type.shape[:ax]), math.prod(x.type.shape[ax:])])


def squeeze(n: NodeCtx) -> Value:
    x = n.x(0)
    shape = x.type.shape
    given = n.opt(1)
    if n.version >= 13 and n.has("axes"):
        raise Reject("Squeeze-13 takes its axes as an input, not an attribute")
    if n.version < 13 and n.has("axes"):  # Squeeze-1/11 take the axes as an attribute
        axes = [n.axis(int(a), x.type.rank) for a in n.attr("axes")]
    elif given is None:
        axes = [i for i, s in enumerate(shape) if s == 1]
    else:
        axes = [n.axis(a, x.type.rank) for a in n.static_ints(given, "axes")]
    for a in axes:
        if shape[a] != 1:
            raise Reject(f"cannot squeeze axis {a} of size {shape[a]}")
    return n.reshape(x, [s for i, s in enumerate(shape) if i not in axes])


def unsqueeze(n: NodeCtx) -> Value:
    x = n.x(0)
    if n.version >= 13 and n.has("axes"):
        raise Reject("Unsqueeze-13 takes its axes as an input, not an attribute")
    if n.version < 13:  # Unsqueeze-1/11 take the axes as an attribute
        if not n.has("axes"):
            raise Reject("axes is required")
        axes = [int(a) for a in n.attr("axes")]
    else:
        axes = n.static_ints(n.x(1), "axes")
    rank = x.type.rank + len(axes)
    norm = sorted(n.axis(a, rank) for a in axes)
    if len(set(norm)) != len(norm):
        raise Reject(f"repeated axis in {axes}")
    rest = iter(x.type.shape)
    return n.reshape(x, [1 if i in norm else next(rest) for i in range(rank)])


def transpose(n: NodeCtx) -> Value:
    x = n.x(0)
    perm = n.attr("perm")
    perm = list(range(x.type.rank))[::-1] if perm is None else [int(p) for p in perm]
    if sorted(perm) != list(range(x.type.rank)):
        raise Reject(f"perm {perm} is not a permutation of {x.type.rank} axes")
    return n.transpose(x, perm)


def concat(n: NodeCtx) -> Value:
    vals = [v for v in n.inputs if v is not None]
    if not vals:
        raise Reject("Concat needs at least one input")
    if len({v.type.rank for v in vals}) != 1:
        raise Reject(f"inputs of different ranks: {[str(v.type) for v in vals]}")
    ax = n.axis(int(n.attr("axis")), vals[0].type.rank)
    vals = [v for v in vals if v.type.shape[ax] != 0] or vals[:1]
    if len(vals) == 1:
        return vals[0]
    return n.emit("concat", vals, {"axis": ax})


def split(n: NodeCtx) -> list[Value | None]:
    x = n.x(0)
    ax = n.axis(int(n.attr("axis", 0)), x.type.rank)
    size = x.type.shape[ax]
    parts = n.n_outputs
    if n.opt(1) is not None:
        sizes = n.static_ints(n.opt(1), "split")
    elif n.has("split"):
        sizes = [int(s) for s in n.attr("split")]
    else:
        count = int(n.attr("num_outputs", parts))
        if count != parts:
            raise Reject(f"num_outputs={count} but the node has {parts} outputs")
        chunk = -(-size // count)  # the last chunk may be smaller (opset 18)
        sizes = [min(chunk, size - i * chunk) for i in range(count)]
        if n.version < 18 and size % count:
            raise Reject(f"axis of size {size} does not split evenly into {count}")
    if sum(sizes) != size or len(sizes) != parts or any(s < 0 for s in sizes):
        raise Reject(f"split sizes {sizes} do not fit an axis of size {size} in {parts} parts")
    outs: list[Value | None] = []
    start = 0
    for s in sizes:
        outs.append(n.slice_axis(x, ax, start, start + s))
        start += s
    return outs


def _slice_indices(start: int, end: int, step: int, dim: int) -> list[int]:
    """The indices ONNX Slice selects along one axis (its clamping rules, as numpy's)."""
    picked = range(dim)[slice(start, end, step)]  # a range: nothing is built before the check
    check_index_table(len(picked), "a Slice")
    return list(picked)


def slice_(n: NodeCtx) -> Value:
    x = n.x(0)
    starts = n.static_ints(n.x(1), "starts")
    ends = n.static_ints(n.x(2), "ends")
    axes = n.static_ints(n.opt(3), "axes") if n.opt(3) is not None else list(range(len(starts)))
    steps = n.static_ints(n.opt(4), "steps") if n.opt(4) is not None else [1] * len(starts)
    return slice_values(n, x, starts, ends, axes, steps)


def slice_values(n: NodeCtx, x: Value, starts: list[int], ends: list[int], axes: list[int],
                 steps: list[int]) -> Value:
    """ONNX Slice with its starts/ends/axes/steps known (inputs since Slice-10, attributes in
    Slice-1)."""
    rank = x.type.rank
    if not len(starts) == len(ends) == len(axes) == len(steps):
        raise Reject("starts, ends, axes and steps differ in length")
    out = x
    seen = set()
    for s, e, a, st in zip(starts, ends, axes, steps, strict=False):
        a = n.axis(a, rank)
        if a in seen:
            raise Reject(f"axis {a} repeated")
        seen.add(a)
        if st == 0:
            raise Reject("a step of 0")
        dim = x.type.shape[a]
        # int64 extremes stand for "to the end" in ONNX; Python slicing clamps them the same way
        idx = _slice_indices(s, e, st, dim)
        out = n.take(out, a, idx)
    return out


def gather(n: NodeCtx) -> Value:
    x, idx = n.x(0), n.x(1)
    ax = n.axis(int(n.attr("axis", 0)), x.type.rank)
    if not idx.type.dtype.is_int:
        raise Reject("indices must be integers")
    return n.emit("gather", [x, idx], {"axis": ax})


def norm_index(n: NodeCtx, idx: Value, size: int) -> Value:
    """Negative indices count from the end: idx + size where idx < 0."""
    neg = n.emit("lt", [idx, n.full_like(0, idx)])
    return n.emit("select", [neg, n.scalar_op("add", idx, size), idx])


def gather_elements(n: NodeCtx) -> Value:
    x, idx = n.x(0), n.x(1)
    rank = x.type.rank
    ax = n.axis(int(n.attr("axis", 0)), rank)
    if idx.type.rank != rank:
        raise Reject("indices must have the data's rank")
    idx = norm_index(n, n.cast(idx, dt.i64), x.type.shape[ax])
    flat = _flat_index(n, idx, ax, x.type.shape)
    return n.emit("gather", [n.reshape(x, [x.type.size]), flat], {"axis": 0})


def _flat_index(n: NodeCtx, idx: Value, ax: int, shape: tuple[int, ...]) -> Value:
    """Row-major flat offsets into ``shape`` for positions of ``idx`` (whose own coordinates
    give every axis but ``ax``, where its values are used)."""
    strides = row_strides(shape)
    total = n.scalar_op("mul", idx, strides[ax])
    for k in range(idx.type.rank):
        if k == ax or idx.type.shape[k] == 1 and shape[k] == 1:
            continue
        ramp = n.emit("iota", [], {"shape": idx.type.shape, "dim": k, "dtype": dt.i64})
        total = n.emit("add", [total, n.scalar_op("mul", ramp, strides[k])])
    return total


def gather_nd(n: NodeCtx) -> Value:
    """Index tuples address rows of x; with batch_dims b the first b axes of x and the
    indices are shared, so the tuple of batch entry i addresses rows of x[i] (the batch's
    flat number times the rows per batch entry is added to each offset)."""
    x, idx = n.x(0), n.x(1)
    b = int(n.attr("batch_dims", 0))
    if idx.type.rank < 1 or not 0 <= b < min(idx.type.rank, x.type.rank):
        raise Reject(f"batch_dims {b} for indices {idx.type} and data {x.type}")
    if idx.type.shape[:b] != x.type.shape[:b]:
        raise Reject("the batch axes of the data and the indices differ")
    m = idx.type.shape[-1]
    if b + m > x.type.rank:
        raise Reject("index tuples are longer than the data's rank")
    idx = n.cast(idx, dt.i64)
    lead = x.type.shape[b:b + m]
    strides = row_strides(lead)
    outer = idx.type.shape[:-1]
    total = n.const(0, dt.i64, outer)
    for k in range(m):
        comp = n.reshape(n.slice_axis(idx, idx.type.rank - 1, k, k + 1), outer)
        comp = norm_index(n, comp, lead[k])
        total = n.emit("add", [total, n.scalar_op("mul", comp, strides[k])])
    per_batch = math.prod(lead)
    for k in range(b):  # the batch entry's first row
        ramp = n.emit("iota", [], {"shape": outer, "dim": k, "dtype": dt.i64})
        step = per_batch * math.prod(x.type.shape[k + 1:b])
        total = n.emit("add", [total, n.scalar_op("mul", ramp, step)])
    inner = x.type.shape[b + m:]
    rows = n.reshape(x, [math.prod(x.type.shape[:b + m])] + list(inner))
    y = n.emit("gather", [rows, total], {"axis": 0})
    return n.reshape(y, outer + inner)


def expand(n: NodeCtx) -> Value:
    x = n.x(0)
    shape = n.static_ints(n.x(1), "the shape")
    rank = max(len(shape), x.type.rank)
    a = [1] * (rank - x.type.rank) + list(x.type.shape)
    b = [1] * (rank - len(shape)) + shape
    out = []
    for da, db in zip(a, b, strict=False):
        if da != db and 1 not in (da, db):
            raise Reject(f"cannot expand {x.type} to {shape}")
        out.append(db if da == 1 else da)
    return n.broadcast(x, out)


def tile(n: NodeCtx) -> Value:
    x = n.x(0)
    reps = n.static_ints(n.x(1), "repeats")
    if len(reps) != x.type.rank or any(r < 0 for r in reps):
        raise Reject(f"repeats {reps} must give one non-negative count per axis")
    shape = x.type.shape
    # (r0, d0, r1, d1, ...) broadcast, then merged: each axis repeated whole, as numpy.tile
    big = []
    dims = []
    for i, (r, d) in enumerate(zip(reps, shape, strict=False)):
        big += [r, d]
        dims.append(2 * i + 1)
    y = n.emit("broadcast_in_dim", [x], {"shape": tuple(big), "dims": tuple(dims)})
    return n.reshape(y, [r * d for r, d in zip(reps, shape, strict=False)])


def shape(n: NodeCtx) -> Value:
    x = n.x(0)
    dims = list(x.type.shape)
    r = len(dims)
    start, end = int(n.attr("start", 0)), n.attr("end")
    end = r if end is None else int(end)
    sel = dims[max(-r, min(r, start)) if start < 0 else min(start, r):
               (max(-r, end) if end < 0 else min(end, r))]
    return n.const(tuple(sel), dt.i64, (len(sel),))


def size(n: NodeCtx) -> Value:
    return n.const(n.x(0).type.size, dt.i64, ())


def constant_of_shape(n: NodeCtx) -> Value:
    shape = n.static_ints(n.x(0), "the shape")
    value = n.attr("value")
    if value is None:
        return n.const(0.0, dt.f32, shape)

    d = odt.to_rlx(value.data_type)
    if d is None:
        raise Reject(f"value of type {odt.onnx_type_name(value.data_type)}")
    v = tensor_array(value, "the value attribute").reshape(-1).tolist()
    if len(v) != 1:
        raise Reject("value must hold one element")
    return n.const(v[0], d, shape)


def constant(n: NodeCtx) -> Value:
    if len(n.attrs) != 1:
        raise Reject("exactly one value attribute is expected")
    key, value = next(iter(n.attrs.items()))
    if key == "value":
        d = odt.to_rlx(value.data_type)
        if d is None:
            raise Reject(f"tensor of type {odt.onnx_type_name(value.data_type)}")
        return n.array(tensor_array(value, "the value attribute"), d)
    if key == "value_float":
        return n.const(float(value), dt.f32, ())
    if key == "value_int":
        return n.const(int(value), dt.i64, ())
    if key == "value_floats":
        return n.const(tuple(float(v) for v in value), dt.f32, (len(value),))
    if key == "value_ints":
        return n.const(tuple(int(v) for v in value), dt.i64, (len(value),))
    raise Reject(f"{key} constants (sparse or string) are not supported")


def range_(n: NodeCtx) -> Value:
    start, limit, delta = (n.x(i) for i in range(3))
    d = start.type.dtype
    vals = [n.static_scalar(v, what) for v, what in
            ((start, "start"), (limit, "limit"), (delta, "delta"))]
    s, lim, st = vals
    if not (d.is_float or d.is_int):
        raise Reject(f"Range of {d} (numbers only)")
    if st == 0:
        raise Reject("delta is 0")
    if not all(math.isfinite(float(v)) for v in (s, lim, st)):
        raise Reject(f"start, limit and delta must be finite, got {s}, {lim}, {st}")
    check_static_size(TensorType(d, (max(int(math.ceil((lim - s) / st)), 0),)),
                      "the Range output")
    if d in (dt.f16, dt.bf16):
        return n.array(_low_precision_range(n, d, s, lim, st), d)
    count = max(int(math.ceil((lim - s) / st)), 0)
    import numpy as np

    data = (np.asarray(s, dtype=dt.to_numpy_name(d))
            + np.arange(count, dtype=dt.to_numpy_name(d)) * np.asarray(st, dtype=dt.to_numpy_name(d)))
    return n.array(data, d)


def _low_precision_range(n: NodeCtx, d: dt.DType, s: float, lim: float, st: float) -> object:
    """ONNX's reference for f16/bf16: Range-27 runs np.arange in the stash type (f32 or f64,
    its accumulation rounding included), Range-11 in f64; then rounds to the input type."""
    import ml_dtypes
    import numpy as np

    low = np.float16 if d == dt.f16 else ml_dtypes.bfloat16
    if n.version >= 27:
        stash = {1: np.float32, 11: np.float64}.get(int(n.attr("stash_type", 1)))
        if stash is None:
            raise Reject(f"stash_type {n.attr('stash_type')} (FLOAT or DOUBLE expected)")
        # start is an f16/bf16 value, exact in either stash type
        out = np.arange(float(s), float(lim), float(st), dtype=stash)
    else:
        out = np.arange(float(s), float(lim), float(st))
    return out.astype(low)


def one_hot(n: NodeCtx) -> Value:
    idx, depth_v, values = n.x(0), n.x(1), n.x(2)
    depth = int(n.static_scalar(depth_v, "depth"))
    if depth <= 0:
        raise Reject("depth must be positive")
    rank = idx.type.rank + 1
    ax = n.axis(int(n.attr("axis", -1)), rank)
    if values.type.shape != (2,):
        raise Reject("values must be [off, on]")
    if idx.type.dtype.is_float:
        idx = n.cast(idx, dt.i64)  # ONNX truncates float indices toward zero
    idx = n.cast(idx, dt.i64)
    idx = norm_index(n, idx, depth)
    out_shape = list(idx.type.shape)
    out_shape.insert(ax, depth)
    dims = tuple(i for i in range(rank) if i != ax)
    bidx = n.emit("broadcast_in_dim", [idx], {"shape": tuple(out_shape), "dims": dims})
    ramp = n.emit("iota", [], {"shape": tuple(out_shape), "dim": ax, "dtype": dt.i64})
    hot = n.emit("eq", [bidx, ramp])
    off = n.broadcast(n.reshape(n.slice_axis(values, 0, 0, 1), []), out_shape)
    on = n.broadcast(n.reshape(n.slice_axis(values, 0, 1, 2), []), out_shape)
    return n.emit("select", [hot, on, off])


def _pad_index(mode: str, i: Any, dim: int) -> Any:
    """The source index of output position ``i`` (an int or a numpy array of them)."""
    import numpy as np

    if mode == "edge":
        return np.clip(i, 0, dim - 1)
    if mode == "wrap":
        return i % dim
    # reflect: mirror without repeating the edge
    period = 2 * (dim - 1)
    j = i % period if period else i * 0
    return np.where(j < dim, j, period - j)


def pad(n: NodeCtx) -> Value:
    x = n.x(0)
    mode = n.attr("mode", b"constant")
    mode = mode.decode() if isinstance(mode, bytes) else mode
    pads = n.static_ints(n.x(1), "pads")
    axes = n.static_ints(n.opt(3), "axes") if n.opt(3) is not None else list(range(x.type.rank))
    value = 0
    if n.opt(2) is not None and mode == "constant":
        value = n.static_scalar(n.opt(2), "constant_value")
    return pad_values(n, x, pads, axes, mode, value)


def pad_values(n: NodeCtx, x: Value, pads: list[int], axes: list[int], mode: str,
               value: Any) -> Value:
    """ONNX Pad with its pads and value known (inputs since Pad-11, attributes in Pad-2)."""
    rank = x.type.rank
    axes = [n.axis(a, rank) for a in axes]
    if len(pads) != 2 * len(axes):
        raise Reject(f"pads {pads} must hold 2 entries per padded axis")
    low = [0] * rank
    high = [0] * rank
    for k, a in enumerate(axes):
        low[a], high[a] = pads[k], pads[k + len(axes)]
    if mode == "constant":
        # negative pads crop first
        out = x
        for a in range(rank):
            lo_c, hi_c = max(-low[a], 0), max(-high[a], 0)
            if lo_c or hi_c:
                out = n.slice_axis(out, a, lo_c, out.type.shape[a] - hi_c)
        lo = tuple(max(v, 0) for v in low)
        hi = tuple(max(v, 0) for v in high)
        if not any(lo + hi):
            return out
        if x.type.dtype.is_complex or isinstance(value, complex):
            raise Reject("complex pad")
        if x.type.dtype.is_int and abs(int(value)) > 2 ** 53:
            raise Reject("integer pad value does not fit a float attribute exactly")
        return n.emit("pad", [out], {"low": lo, "high": hi, "value": float(value)})
    if mode not in ("edge", "reflect", "wrap"):
        raise Reject(f"mode {mode!r}")
    out = x
    for a in range(rank):
        dim = x.type.shape[a]
        if not (low[a] or high[a]):
            continue
        if dim == 0 or (mode == "reflect" and dim == 1 and (low[a] > 0 or high[a] > 0)):
            raise Reject(f"{mode} padding of an axis of size {dim}")
        check_index_table(dim + low[a] + high[a], f"{mode} padding of axis {a}")
        import numpy as np

        idx = _pad_index(mode, np.arange(-low[a], dim + high[a], dtype=np.int64), dim)
        out = n.take(out, a, idx)
    return out


def trilu(n: NodeCtx) -> Value:
    x = n.x(0)
    k = int(n.static_scalar(n.opt(1), "k")) if n.opt(1) is not None else 0
    upper = int(n.attr("upper", 1))
    if x.type.rank < 2:
        raise Reject("needs at least 2 axes")
    shape = x.type.shape
    r = n.emit("iota", [], {"shape": shape, "dim": x.type.rank - 2, "dtype": dt.i64})
    c = n.emit("iota", [], {"shape": shape, "dim": x.type.rank - 1, "dtype": dt.i64})
    diff = n.emit("sub", [c, r])  # j - i
    kk = n.const(k, dt.i64, shape)
    keep = n.emit("ge" if upper else "le", [diff, kk])
    return n.emit("select", [keep, x, n.full_like(0, x)])


def eye_like(n: NodeCtx) -> Value:
    x = n.x(0)
    if x.type.rank != 2:
        raise Reject("needs a 2-D input")
    k = int(n.attr("k", 0))
    d = odt.to_rlx(int(n.attr("dtype"))) if n.has("dtype") else x.type.dtype
    if d is None:
        raise Reject("dtype has no rlx equivalent")
    shape = x.type.shape
    r = n.emit("iota", [], {"shape": shape, "dim": 0, "dtype": dt.i64})
    c = n.emit("iota", [], {"shape": shape, "dim": 1, "dtype": dt.i64})
    on = n.emit("eq", [n.emit("sub", [c, r]), n.const(k, dt.i64, shape)])
    return n.cast(on, d)


def compress(n: NodeCtx) -> Value:
    x = n.x(0)
    cond = n.static(n.x(1), "condition").reshape(-1).tolist()
    ax = n.attr("axis")
    if ax is None:
        x = n.reshape(x, [x.type.size])
        ax = 0
    else:
        ax = n.axis(int(ax), x.type.rank)
    idx = [i for i, c in enumerate(cond[:x.type.shape[ax]]) if c]
    return n.take(x, ax, idx)


def _blocks_nchw(n: NodeCtx) -> tuple[Value, int, str]:
    """DepthToSpace's and SpaceToDepth's NCHW input, ``blocksize`` and ``mode`` (DCR unset)."""
    x = n.x(0)
    b = int(n.attr("blocksize"))
    mode = n.attr("mode", b"DCR")
    mode = mode.decode() if isinstance(mode, bytes) else mode
    if x.type.rank != 4:
        raise Reject("needs NCHW input")
    return x, b, mode


def depth_to_space(n: NodeCtx) -> Value:
    x, b, mode = _blocks_nchw(n)
    nb, c, h, w = x.type.shape
    if c % (b * b):
        raise Reject("channels not divisible by blocksize^2")
    if mode == "DCR":
        y = n.reshape(x, [nb, b, b, c // (b * b), h, w])
        y = n.transpose(y, [0, 3, 4, 1, 5, 2])
    elif mode == "CRD":
        y = n.reshape(x, [nb, c // (b * b), b, b, h, w])
        y = n.transpose(y, [0, 1, 4, 2, 5, 3])
    else:
        raise Reject(f"mode {mode!r}")
    return n.reshape(y, [nb, c // (b * b), h * b, w * b])


def space_to_depth(n: NodeCtx) -> Value:
    x, b, mode = _blocks_nchw(n)
    nb, c, h, w = x.type.shape
    if h % b or w % b:
        raise Reject("spatial size not divisible by blocksize")
    y = n.reshape(x, [nb, c, h // b, b, w // b, b])
    if mode == "DCR":
        y = n.transpose(y, [0, 3, 5, 1, 2, 4])
    elif mode == "CRD":
        y = n.transpose(y, [0, 1, 3, 5, 2, 4])
    else:
        raise Reject(f"mode {mode!r}")
    return n.reshape(y, [nb, c * b * b, h // b, w // b])
