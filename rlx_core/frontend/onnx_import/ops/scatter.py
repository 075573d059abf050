"""Converters for ONNX scatters: ScatterElements, ScatterND and the old Scatter, with every
reduction (none, add, mul, max, min).

``add`` is ``scatter_add`` (repeats accumulate, indices may be run-time values). The other
reductions need the indices at import time: the updates are applied in rounds, round r taking
the r-th update of every position, so each round writes distinct positions (a gather of the
current values, the combination, and a gather that splices the results in) and a position sees
its updates in index order, as ONNX's reference applies them.
"""

from __future__ import annotations

import math
from typing import Any

from rlx_core.frontend.onnx_import.context import NodeCtx
from rlx_core.frontend.onnx_import.errors import Reject
from rlx_core.frontend.onnx_import.ops.shape import norm_index
from rlx_core.ir import dtypes as dt
from rlx_core.ir.graph import Value, row_strides


def _reduction(n: NodeCtx) -> str:
    red = n.text("reduction", "none")
    if red not in ("none", "add", "mul", "max", "min"):
        raise Reject(f"reduction {red!r}")
    return red


def _static_index(n: NodeCtx, idx: Value, dims: tuple[int, ...], red: str) -> Any:
    """The import-time indices with negatives resolved; out-of-range ones are rejected."""
    import numpy as np

    arr = np.asarray(n.static(idx, f"the indices (reduction {red!r} needs them at import "
                                   f"time)")).astype(np.int64)
    lim = np.asarray(dims, dtype=np.int64)
    if arr.size and ((arr < -lim).any() or (arr >= lim).any()):
        raise Reject("an index is out of range")
    return np.where(arr < 0, arr + lim, arr)


def _combine(n: NodeCtx, red: str, cur: Value, upd: Value, ordered_as_python: bool) -> Value:
    if red == "none":
        return upd
    if red == "mul":
        return n.emit("mul", [cur, upd])
    if ordered_as_python:
        # the ScatterElements reference uses Python's max/min: the update wins only when it
        # compares strictly greater (smaller), so a NaN update never does
        cmp = n.emit("gt" if red == "max" else "lt", [upd, cur])
        return n.emit("select", [cmp, upd, cur])
    return n.emit(red, [cur, upd])  # np.maximum / np.minimum: NaN propagates


def _apply_static(n: NodeCtx, rows: Value, offsets: list[int], upd: Value, red: str,
                  ordered_as_python: bool = False) -> Value:
    """Scatter the rows of ``upd`` into ``rows`` (axis 0) at the static ``offsets``."""
    seen: dict[int, int] = {}
    rounds: list[list[int]] = []
    for j, o in enumerate(offsets):
        r = seen.get(o, 0)
        seen[o] = r + 1
        if r == len(rounds):
            rounds.append([])
        rounds[r].append(j)
    if red == "none" and len(rounds) > 1:
        raise Reject("duplicate indices with reduction='none' have no defined result")
    cur = rows
    size = rows.type.shape[0]
    for js in rounds:
        pos = [offsets[j] for j in js]
        new = _combine(n, red, n.take(cur, 0, pos) if red != "none" else cur,
                       n.take(upd, 0, js), ordered_as_python)
        # splice: row i of the result is row i of cur, or the combined row written there
        source = list(range(size))
        for k, p in enumerate(pos):
            source[p] = size + k
        cur = n.take(n.emit("concat", [cur, new], {"axis": 0}), 0, source)
    return cur


def _elements(n: NodeCtx, x: Value, idx: Value, upd: Value, ax: int, red: str) -> Value:
    import numpy as np

    shape = x.type.shape
    if idx.type.shape != upd.type.shape or idx.type.rank != x.type.rank:
        raise Reject("indices and updates must have one shape and the data's rank")
    if not idx.type.dtype.is_int:
        raise Reject("indices must be integers")
    flat_x = n.reshape(x, [x.type.size])
    flat_u = n.reshape(upd, [upd.type.size])
    if red == "add":
        i64 = norm_index(n, n.cast(idx, dt.i64), shape[ax])
        strides = row_strides(shape)
        total = n.scalar_op("mul", i64, strides[ax])
        for k in range(idx.type.rank):
            if k == ax:
                continue
            ramp = n.emit("iota", [], {"shape": idx.type.shape, "dim": k, "dtype": dt.i64})
            total = n.emit("add", [total, n.scalar_op("mul", ramp, strides[k])])
        out = n.emit("scatter_add", [flat_x, n.reshape(total, [idx.type.size]), flat_u],
                     {"axis": 0})
        return n.reshape(out, shape)
    arr = _static_index(n, idx, (shape[ax],), red)
    coords = list(np.indices(idx.type.shape)) if idx.type.rank else []
    if coords:
        coords[ax] = arr
    flat = np.ravel_multi_index(tuple(coords), shape) if coords else np.zeros(0, np.int64)
    out = _apply_static(n, flat_x, [int(o) for o in np.asarray(flat).reshape(-1)], flat_u,
                        red, ordered_as_python=True)
    return n.reshape(out, shape)


def scatter_elements(n: NodeCtx) -> Value:
    x, idx, upd = n.x(0), n.x(1), n.x(2)
    ax = n.axis(int(n.attr("axis", 0)), x.type.rank)
    return _elements(n, x, idx, upd, ax, _reduction(n))


def scatter(n: NodeCtx) -> Value:
    """Scatter (opsets 9-10; deprecated in 11): ScatterElements without a reduction."""
    x, idx, upd = n.x(0), n.x(1), n.x(2)
    ax = n.axis(int(n.attr("axis", 0)), x.type.rank)
    return _elements(n, x, idx, upd, ax, "none")


def scatter_nd(n: NodeCtx) -> Value:
    import numpy as np

    x, idx, upd = n.x(0), n.x(1), n.x(2)
    red = _reduction(n)
    if idx.type.rank == 0 or not idx.type.dtype.is_int:
        raise Reject("indices must be an integer tensor of rank >= 1")
    m = idx.type.shape[-1]
    if m > x.type.rank:
        raise Reject("index tuples are longer than the data's rank")
    outer = idx.type.shape[:-1]
    inner = x.type.shape[m:]
    if upd.type.shape != outer + inner:
        raise Reject("updates shape does not match indices and data")
    count = math.prod(outer)
    rows = n.reshape(x, [math.prod(x.type.shape[:m])] + list(inner))
    upd_rows = n.reshape(upd, [count] + list(inner))
    if red == "add":
        i64 = n.cast(idx, dt.i64)
        strides = row_strides(x.type.shape[:m])
        total = None
        for k in range(m):
            comp = n.reshape(n.slice_axis(i64, i64.type.rank - 1, k, k + 1), outer)
            term = n.scalar_op("mul", norm_index(n, comp, x.type.shape[k]), strides[k])
            total = term if total is None else n.emit("add", [total, term])
        if total is None:  # empty index tuples address the whole tensor
            total = n.const(0, dt.i64, outer)
        out = n.emit("scatter_add", [rows, n.reshape(total, [count]), upd_rows], {"axis": 0})
        return n.reshape(out, x.type.shape)
    arr = _static_index(n, idx, x.type.shape[:m], red).reshape(count, m)
    flat = np.ravel_multi_index(tuple(arr.T), x.type.shape[:m]) if m else np.zeros(count)
    out = _apply_static(n, rows, [int(o) for o in np.asarray(flat).reshape(-1)], upd_rows, red)
    return n.reshape(out, x.type.shape)


def tensor_scatter(n: NodeCtx) -> Value:
    """TensorScatter (a KV-cache write): update's slices along ``axis`` land at
    write_indices[batch] + i (modulo the axis length in circular mode)."""
    import numpy as np

    cache, upd, where = n.x(0), n.x(1), n.opt(2)
    mode = n.text("mode", "linear")
    if mode not in ("linear", "circular"):
        raise Reject(f"mode {mode!r}")
    shape, ushape = cache.type.shape, upd.type.shape
    ax = n.axis(int(n.attr("axis", -2)), cache.type.rank)
    if ax == 0:
        raise Reject("axis 0 (the batch axis)")
    if upd.type.rank != cache.type.rank or upd.type.dtype != cache.type.dtype or any(
            a != b for i, (a, b) in enumerate(zip(shape, ushape, strict=False)) if i != ax) \
            or ushape[ax] > shape[ax]:
        raise Reject(f"update {upd.type} does not fit the cache {cache.type} along axis {ax}")
    if where is None:
        starts = np.zeros(shape[0], np.int64)
    else:
        starts = np.asarray(n.static(where, "write_indices")).astype(np.int64).reshape(-1)
        if starts.shape != (shape[0],):
            raise Reject("write_indices must hold one start per batch entry")
    length, seq = shape[ax], ushape[ax]
    offsets = []
    for prefix in np.ndindex(*shape[:ax]):
        for s in range(seq):
            pos = int(starts[prefix[0]]) + s
            pos = pos % length if mode == "circular" else pos
            if not 0 <= pos < length:
                raise Reject(f"write position {pos} is outside the cache axis ({length})")
            offsets.append(int(np.ravel_multi_index((*prefix, pos), shape[:ax + 1])))
    inner = list(shape[ax + 1:])
    rows = n.reshape(cache, [math.prod(shape[:ax + 1])] + inner)
    upd_rows = n.reshape(upd, [math.prod(ushape[:ax + 1])] + inner)
    return n.reshape(_apply_static(n, rows, offsets, upd_rows, "none"), shape)
