"""Converter for ONNX TopK (opset 10, 11, 24) with a static k, without a sort primitive.

Along the axis (moved last), element i's rank is the number of elements that come before it in
the output order: j precedes i when x_j is larger (smaller, for largest=0), or equal with
j < i (the reference's tie-break: the lower index first). A NaN counts as larger than every
number, as in numpy's sort. The index of output slot p is then sum_i i * (rank_i == p), and
the values are one gather. The cost is O(n^2) along the axis.

Its programs found two GCC 12.2 bugs on the cpu target, both worked around in the C renderer
(a load inside ``?:`` mis-vectorised into a masked load, c_common/body.py ``hoist``; an i64
constant table stored as a wrong vector constant, c_common/kernels.py ``_constant``);
tests/onnx/test_import_topk.py keeps them as regression tests.
"""

from __future__ import annotations

from rlx_core.frontend.onnx_import.context import NodeCtx, numel
from rlx_core.frontend.onnx_import.errors import Reject
from rlx_core.ir import dtypes as dt
from rlx_core.ir.graph import Value


def _after(n: NodeCtx, a: Value, b: Value) -> tuple[Value, Value]:
    """(a > b, a == b) in sort order (NaN above everything, NaNs equal to each other)."""
    gt, eq = n.emit("gt", [a, b]), n.emit("eq", [a, b])
    if a.type.dtype.is_float:
        na, nb = n.emit("ne", [a, a]), n.emit("ne", [b, b])
        gt = n.emit("or", [gt, n.emit("and", [na, n.emit("logical_not", [nb])])])
        eq = n.emit("or", [eq, n.emit("and", [na, nb])])
    return gt, eq


def topk(n: NodeCtx) -> list[Value]:
    x = n.x(0)
    if x.type.dtype == dt.bool_:
        raise Reject("TopK of bool")
    rank = x.type.rank
    if rank < 1:
        raise Reject("TopK needs rank >= 1")
    axis = n.axis(int(n.attr("axis", -1)), rank)
    k = int(n.static_scalar(n.x(1), "K"))
    size = x.type.shape[axis]
    if not 0 <= k <= size:
        raise Reject(f"K={k} is outside [0, {size}]")
    largest = bool(int(n.attr("largest", 1)))
    # sorted=0 leaves the order unspecified; the sorted order is one valid answer

    perm = [i for i in range(rank) if i != axis] + [axis]
    xt = n.transpose(x, perm)
    lead = xt.type.shape[:-1]
    pair = (*lead, size, size)  # [..., i, j]
    xi = n.emit("broadcast_in_dim", [xt], {"shape": pair, "dims": (*range(len(lead)), rank - 1)})
    xj = n.emit("broadcast_in_dim", [xt], {"shape": pair, "dims": (*range(len(lead)), rank)})
    before, tie = _after(n, xj, xi) if largest else _after(n, xi, xj)
    ii = n.emit("iota", [], {"shape": pair, "dim": rank - 1, "dtype": dt.i64})
    jj = n.emit("iota", [], {"shape": pair, "dim": rank, "dtype": dt.i64})
    precedes = n.emit("or", [before, n.emit("and", [tie, n.emit("lt", [jj, ii])])])
    ranks = n.reduce("reduce_sum", n.cast(precedes, dt.i64), (rank,), False)  # [..., i]

    slots = (*lead, k, size)  # [..., p, i]
    r = n.emit("broadcast_in_dim", [ranks], {"shape": slots,
                                             "dims": (*range(len(lead)), rank)})
    p = n.emit("iota", [], {"shape": slots, "dim": rank - 1, "dtype": dt.i64})
    i_ = n.emit("iota", [], {"shape": slots, "dim": rank, "dtype": dt.i64})
    hit = n.emit("eq", [r, p])
    idx = n.reduce("reduce_sum", n.emit("select", [hit, i_, n.const(0, dt.i64, slots)]),
                   (rank,), False)  # [..., p]

    rows = numel(lead)
    flat = n.reshape(xt, (rows * size,))
    row = n.reshape(n.emit("iota", [], {"shape": (rows, k), "dim": 0, "dtype": dt.i64}),
                    (*lead, k))
    pos = n.emit("add", [n.reshape(idx, (*lead, k)), n.scalar_op("mul", row, size)])
    vals = n.emit("gather", [flat, pos], {"axis": 0})
    inv = [perm.index(i) for i in range(rank)]
    return [n.transpose(vals, inv), n.transpose(idx, inv)]
