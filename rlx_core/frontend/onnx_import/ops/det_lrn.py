"""Converters for ONNX Det (opset 11, 22) and LRN (opset 1, 13).

Det expands the determinant of 1x1, 2x2 and 3x3 matrices (the rule of Sarrus); larger ones
would need pivoted elimination and are rejected. LRN follows the spec: over channels
c - floor((size-1)/2) .. c + ceil((size-1)/2), y = x / (bias + alpha/size * sum x^2)^beta.
"""

from __future__ import annotations

from rlx_core.frontend.onnx_import.context import NodeCtx
from rlx_core.frontend.onnx_import.errors import Reject
from rlx_core.ir.graph import Value


def det(n: NodeCtx) -> Value:
    x = n.x(0)
    n.float_type(x)
    if x.type.rank < 2 or x.type.shape[-1] != x.type.shape[-2]:
        raise Reject(f"Det needs (..., M, M) matrices, got {x.type}")
    m = x.type.shape[-1]
    if m not in (1, 2, 3):
        raise Reject(f"Det of {m}x{m} matrices (only up to 3x3 is expanded)")
    lead = x.type.shape[:-2]
    flat = n.reshape(x, (*lead, m * m))

    def e(i: int, j: int) -> Value:
        return n.reshape(n.slice_axis(flat, len(lead), i * m + j, i * m + j + 1), lead)

    if m == 1:
        return e(0, 0)
    if m == 2:
        return n.emit("sub", [n.emit("mul", [e(0, 0), e(1, 1)]),
                              n.emit("mul", [e(0, 1), e(1, 0)])])

    def prod(*ij: tuple[int, int]) -> Value:
        out = e(*ij[0])
        for p in ij[1:]:
            out = n.emit("mul", [out, e(*p)])
        return out

    pos = n.emit("add", [n.emit("add", [prod((0, 0), (1, 1), (2, 2)),
                                        prod((0, 1), (1, 2), (2, 0))]),
                         prod((0, 2), (1, 0), (2, 1))])
    neg = n.emit("add", [n.emit("add", [prod((0, 2), (1, 1), (2, 0)),
                                        prod((0, 0), (1, 2), (2, 1))]),
                         prod((0, 1), (1, 0), (2, 2))])
    return n.emit("sub", [pos, neg])


def lrn(n: NodeCtx) -> Value:
    x = n.x(0)
    n.float_type(x)
    if x.type.rank < 2:
        raise Reject(f"LRN needs (N, C, ...) input, got {x.type}")
    size = int(n.attr("size", 0))
    if size < 1:
        raise Reject("size must be a positive integer")
    alpha = float(n.attr("alpha", 1e-4))
    beta = float(n.attr("beta", 0.75))
    bias = float(n.attr("bias", 1.0))
    c = x.type.shape[1]
    lo, hi = (size - 1) // 2, size - 1 - (size - 1) // 2
    sq = n.emit("mul", [x, x])
    low = [0] * x.type.rank
    high = [0] * x.type.rank
    low[1], high[1] = lo, hi
    padded = n.emit("pad", [sq], {"low": tuple(low), "high": tuple(high), "value": 0.0})
    total = None
    for off in range(size):
        part = n.slice_axis(padded, 1, off, off + c)
        total = part if total is None else n.emit("add", [total, part])
    denom = n.scalar_op("add", n.scalar_op("mul", total, alpha / size), bias)
    return n.emit("div", [x, n.emit("pow", [denom, n.full_like(beta, denom)])])
