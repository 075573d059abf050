"""Converter for ONNX CausalConvWithState (opset 27), as ONNX's reference reads:

    padded = concat(past_state or 0, input) along length          (B, C, k-1+L)
    y[b, c, l] = sum_j weight[c, 0, j] * padded[b, c, l + j] + bias[c]   (depthwise, valid)
    output = y, or silu(y) computed in float32 (activation silu / swish)
    present_state = the last k-1 positions of padded

The depthwise convolution is k shifted slices multiplied and added, accumulated in float32
for half-precision inputs and rounded to the input type, as the reference's result is."""

from __future__ import annotations

from rlx_core.frontend.onnx_import.context import NodeCtx
from rlx_core.frontend.onnx_import.errors import Reject
from rlx_core.ir import dtypes as dt
from rlx_core.ir.graph import Value


def causal_conv_with_state(n: NodeCtx) -> list[Value]:
    x, w, bias, past = n.x(0), n.x(1), n.opt(2), n.opt(3)
    act = n.text("activation", "none")
    if act not in ("none", "silu", "swish"):
        raise Reject(f"activation {act!r} is not one of none, silu, swish")
    d = n.float_type(x)
    if x.type.rank != 3 or w.type.rank != 3:
        raise Reject(f"input {x.type} and weight {w.type} must be rank 3")
    b, c, length = x.type.shape
    if w.type.shape[:2] != (c, 1) or w.type.shape[2] < 1:
        raise Reject(f"weight {w.type} must be (channels={c}, 1, k) for a depthwise conv")
    k = w.type.shape[2]
    for name, v in (("weight", w), ("bias", bias), ("past_state", past)):
        if v is not None and v.type.dtype != d:
            raise Reject(f"{name} {v.type} is not {d} like the input")
    if bias is not None and bias.type.shape != (c,):
        raise Reject(f"bias {bias.type} must be ({c},)")
    if past is not None and past.type.shape != (b, c, k - 1):
        raise Reject(f"past_state {past.type} must be ({b}, {c}, {k - 1})")
    if k == 1:
        padded = x
    else:
        pad = past if past is not None else n.const(0.0, d, (b, c, k - 1))
        padded = x if length == 0 else n.emit("concat", [pad, x], {"axis": 2})
    acc_t = dt.f64 if d == dt.f64 else dt.f32
    pf = n.cast(padded, acc_t)
    wf = n.cast(w, acc_t)
    shape = (b, c, length)
    y = None
    for j in range(k):
        wj = n.reshape(n.slice_axis(wf, 2, j, j + 1), (c,))
        term = n.emit("mul", [n.slice_axis(pf, 2, j, j + length),
                              n.emit("broadcast_in_dim", [wj], {"shape": shape, "dims": (1,)})])
        y = term if y is None else n.emit("add", [y, term])
    if bias is not None:
        y = n.emit("add", [y, n.emit("broadcast_in_dim", [n.cast(bias, acc_t)],
                                     {"shape": shape, "dims": (1,)})])
    y = n.cast(y, d)
    if act != "none":  # the reference applies SiLU in float32 whatever the input type
        yf = n.cast(y, dt.f32)
        yf = n.emit("mul", [yf, n.emit("logistic", [yf])])
        y = n.cast(yf, d)
    total = padded.type.shape[2]
    present = n.slice_axis(padded, 2, total - (k - 1), total)
    return [y, present]
