"""Converters for ONNX RotaryEmbedding (opset 23) and SwiGLU (opset 28), as ONNX's reference:

RotaryEmbedding: x as (B, S, H, D) [4-D (B, H, S, D) is transposed, 3-D split into heads];
the first rotary_embedding_dim features rotate (halves, or even/odd pairs when interleaved)
by cos/sin rows picked by position_ids: real = cos*x1 - sin*x2, imag = sin*x1 + cos*x2.
SwiGLU: a * logistic(alpha * a) * b over equal shapes (no broadcasting).
"""

from __future__ import annotations

from rlx_core.frontend.onnx_import.context import NodeCtx
from rlx_core.frontend.onnx_import.errors import Reject
from rlx_core.ir.graph import Value


def rotary_embedding(n: NodeCtx) -> Value:
    x, cos, sin, pos = n.x(0), n.x(1), n.x(2), n.opt(3)
    d = n.float_type(x)
    if cos.type.dtype != d or sin.type.dtype != d:
        raise Reject("cos_cache and sin_cache must have the input's dtype")
    shape = x.type.shape
    if x.type.rank == 4:
        x4 = n.transpose(x, (0, 2, 1, 3))
    elif x.type.rank == 3:
        heads = int(n.attr("num_heads", 0))
        if heads <= 0 or shape[2] % heads:
            raise Reject(f"3-D input {x.type} needs num_heads dividing the hidden size")
        x4 = n.reshape(x, (shape[0], shape[1], heads, shape[2] // heads))
    else:
        raise Reject(f"input {x.type} must be 3-D or 4-D")
    b, s, _, hd = x4.type.shape
    rot = int(n.attr("rotary_embedding_dim", 0)) or hd
    if rot > hd or rot % 2:
        raise Reject(f"rotary_embedding_dim {rot} must be even and at most the head size {hd}")
    half = rot // 2
    if pos is not None:
        if not pos.type.dtype.is_int or pos.type.shape != (b, s):
            raise Reject(f"position_ids {pos.type} must be (batch, sequence) integers")
        if cos.type.rank != 2 or sin.type.rank != 2:
            raise Reject("with position_ids the caches are (max_position, rotary_dim / 2)")
        cos = n.emit("gather", [cos, pos], {"axis": 0})
        sin = n.emit("gather", [sin, pos], {"axis": 0})
    if cos.type.shape != (b, s, half) or sin.type.shape != (b, s, half):
        raise Reject(f"caches {cos.type}, {sin.type} must end up (batch, sequence, {half})")
    full = x4.type.shape[:3] + (half,)
    to4 = {"shape": full, "dims": (0, 1, 3)}
    cos4 = n.emit("broadcast_in_dim", [cos], to4)
    sin4 = n.emit("broadcast_in_dim", [sin], to4)
    xr = n.slice_axis(x4, 3, 0, rot)
    if int(n.attr("interleaved", 0)):
        x1, x2 = n.slice_axis(xr, 3, 0, rot, 2), n.slice_axis(xr, 3, 1, rot, 2)
    else:
        x1, x2 = n.slice_axis(xr, 3, 0, half), n.slice_axis(xr, 3, half, rot)
    real = n.emit("sub", [n.emit("mul", [cos4, x1]), n.emit("mul", [sin4, x2])])
    imag = n.emit("add", [n.emit("mul", [sin4, x1]), n.emit("mul", [cos4, x2])])
    if int(n.attr("interleaved", 0)):
        pair = full + (1,)
        y = n.emit("concat", [n.reshape(real, pair), n.reshape(imag, pair)], {"axis": 4})
        y = n.reshape(y, full[:3] + (rot,))
    else:
        y = n.emit("concat", [real, imag], {"axis": 3})
    if rot < hd:
        y = n.emit("concat", [y, n.slice_axis(x4, 3, rot, hd)], {"axis": 3})
    return n.transpose(y, (0, 2, 1, 3)) if x.type.rank == 4 else n.reshape(y, shape)


def swiglu(n: NodeCtx) -> Value:
    a, b = n.x(0), n.x(1)
    n.float_type(a, "A")
    if a.type != b.type:
        raise Reject(f"A {a.type} and B {b.type} must have one shape and dtype")
    alpha = float(n.attr("alpha", 1.0))
    gate = n.emit("logistic", [n.scalar_op("mul", a, alpha)])
    return n.emit("mul", [n.emit("mul", [a, gate]), b])
