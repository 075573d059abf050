"""Converters for ONNX losses: NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss."""

from __future__ import annotations

from rlx_core.frontend.onnx_import.context import NodeCtx
from rlx_core.frontend.onnx_import.errors import Reject
from rlx_core.ir import dtypes as dt
from rlx_core.ir.graph import Value


def _reduction(n: NodeCtx) -> str:
    red = n.attr("reduction", b"mean")
    red = red.decode() if isinstance(red, bytes) else red
    if red not in ("none", "sum", "mean"):
        raise Reject(f"reduction {red!r}")
    return red


def nll_values(n: NodeCtx, x: Value, target: Value, weight: Value | None) -> Value:
    """loss[n, d...] = -x[n, t, d...] * w[t] with t = target[n, d...]; ignored targets give 0.

    The class is picked with a one-hot mask over axis 1 (no gather: an ignored target may lie
    outside [0, C)), so every element is computed exactly as ONNX's definition reads.
    """
    d = n.float_type(x)
    if x.type.rank < 2 or target.type.shape != (x.type.shape[0],) + x.type.shape[2:]:
        raise Reject(f"target {target.type} does not match input {x.type} (N, C, d...)")
    if not target.type.dtype.is_int:
        raise Reject("target must be integers")
    red = _reduction(n)
    shape = x.type.shape
    c = shape[1]
    t = n.cast(target, dt.i64)
    dims = (0,) + tuple(range(2, x.type.rank))
    tb = n.emit("broadcast_in_dim", [t], {"shape": shape, "dims": dims})
    ramp = n.emit("iota", [], {"shape": shape, "dim": 1, "dtype": dt.i64})
    hot = n.emit("eq", [tb, ramp])
    zero = n.full_like(0.0, x)
    picked = n.reduce("reduce_sum", n.emit("select", [hot, x, zero]), (1,), False)
    if weight is not None:
        if weight.type.shape != (c,) or weight.type.dtype != d:
            raise Reject(f"weight {weight.type} must be [{c}] of {d}")
        wb = n.emit("broadcast_in_dim", [weight], {"shape": shape, "dims": (1,)})
        w = n.reduce("reduce_sum", n.emit("select", [hot, wb, zero]), (1,), False)
    else:
        w = n.full_like(1.0, picked)
    if n.has("ignore_index"):
        keep = n.emit("ne", [t, n.full_like(int(n.attr("ignore_index")), t)])
        w = n.emit("select", [keep, w, n.full_like(0.0, w)])
    loss = n.emit("neg", [n.emit("mul", [picked, w])])
    if red == "none":
        return loss
    axes = tuple(range(loss.type.rank))
    total = n.reduce("reduce_sum", loss, axes, False)
    if red == "sum":
        return total
    return n.emit("div", [total, n.reduce("reduce_sum", w, axes, False)])


def nll(n: NodeCtx) -> Value:
    return nll_values(n, n.x(0), n.x(1), n.opt(2))


def softmax_cross_entropy(n: NodeCtx) -> list[Value | None]:
    x = n.x(0)
    n.float_type(x)
    if x.type.rank < 2:
        raise Reject("scores must be (N, C, d...)")
    logp = n.emit("log_softmax", [x], {"axis": 1})
    loss = nll_values(n, logp, n.x(1), n.opt(2))
    return [loss, logp if n.output_wanted(1) else None]
