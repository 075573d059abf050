"""Converters for ONNX Runtime's quantized contrib ops (domain ``com.microsoft``), the ones its
``quantize_static(quant_format=QOperator)`` writes beside the standard QLinearMatMul and
QLinearConv: QLinearAdd, QLinearMul, QLinearSigmoid, QLinearLeakyRelu,
QLinearGlobalAveragePool, QLinearConcat and QGemm.

Each is what its contrib schema defines: dequantize the inputs with rlx's ``dequantize``,
compute in f32, quantize the result with rlx's ``quantize`` (round half to even, saturate).
ONNX Runtime's x86 kernels compute some of them another way (QLinearAdd / QLinearMul in
fixed point, the activations through a 256-entry table built with its own approximations),
so they can differ from these by one quantization step; QGemm's integer product is exact
(``int_linear``). tests/onnx/test_import_ort_quant.py states the tolerance per op.
"""

from __future__ import annotations

import math

from rlx_core.frontend.onnx_import.context import NodeCtx
from rlx_core.frontend.onnx_import.errors import Reject
from rlx_core.frontend.onnx_import.ops import quant
from rlx_core.ir import dtypes as dt
from rlx_core.ir.graph import Value

DOMAIN = "com.microsoft"


def _scalar_params(n: NodeCtx, x: Value, scale: Value,
                   zp: Value | None, what: str) -> tuple[Value, Value]:
    if scale.type.dtype != dt.f32 or scale.type.size != 1:
        raise Reject(f"{what}_scale must be one f32 value, got {scale.type}")
    if zp is not None and (zp.type.size != 1 or zp.type.dtype.name not in ("u8", "i8")):
        raise Reject(f"{what}_zero_point must be one u8 or i8 value, got {zp.type}")
    p = quant.rlx_params(n, x, scale, zp, 0)
    assert p is not None  # one f32 scale, one zero point
    return p


def _deq(n: NodeCtx, x: Value, scale: Value, zp: Value | None, what: str) -> Value:
    if x.type.dtype.name not in ("u8", "i8"):
        raise Reject(f"{what} of type {x.type.dtype} (u8 or i8)")
    return quant.rlx_dequantize(n, x, *_scalar_params(n, x, scale, zp, what), 0)


def _q(n: NodeCtx, y: Value, scale: Value, zp: Value | None, like: Value) -> Value:
    """Quantize f32 ``y`` to the output parameters; without a zero point the output takes
    ``like``'s type (the contrib schemas' rule)."""
    out = zp.type.dtype if zp is not None else like.type.dtype
    s, z = _scalar_params(n, y, scale, zp, "y")
    return quant.rlx_quantize(n, y, s, z, 0, out)


def binary(op: str):
    """QLinearAdd / QLinearMul: (A, A_scale, A_zp, B, B_scale, B_zp, C_scale, C_zp)."""

    def convert(n: NodeCtx) -> Value:
        a = _deq(n, n.x(0), n.x(1), n.opt(2), "A")
        b = _deq(n, n.x(3), n.x(4), n.opt(5), "B")
        return _q(n, n.binary(op, a, b), n.x(6), n.opt(7), n.x(0))

    return convert


def unary(fn: str):
    """QLinearSigmoid / QLinearLeakyRelu: (X, X_scale, X_zp, Y_scale, Y_zp)."""

    def convert(n: NodeCtx) -> Value:
        x = _deq(n, n.x(0), n.x(1), n.opt(2), "X")
        if fn == "sigmoid":
            y = n.emit("logistic", [x])
        else:
            alpha = float(n.attr("alpha", 0.01))
            y = n.select(n.emit("ge", [x, n.full_like(0.0, x)]), x,
                         n.scalar_op("mul", x, alpha))
        return _q(n, y, n.x(3), n.opt(4), n.x(0))

    return convert


def global_average_pool(n: NodeCtx) -> Value:
    """QLinearGlobalAveragePool (X, x_scale, x_zp, y_scale, y_zp; channels_last)."""
    x = n.x(0)
    if x.type.rank < 3:
        raise Reject(f"needs (N, C, spatial...) input, got {x.type}")
    last = int(n.attr("channels_last", 0))
    axes = tuple(range(1, x.type.rank - 1)) if last else tuple(range(2, x.type.rank))
    xf = _deq(n, x, n.x(1), n.x(2), "X")
    count = math.prod(x.type.shape[a] for a in axes)
    y = n.scalar_op("div", n.reduce("reduce_sum", xf, axes, keepdims=True), float(count))
    return _q(n, y, n.x(3), n.x(4), x)


def concat(n: NodeCtx) -> Value:
    """QLinearConcat (Y_scale, Y_zp, then (X, X_scale, X_zp) per input; axis)."""
    if (len(n.inputs) - 2) % 3 or len(n.inputs) < 5:
        raise Reject("inputs must be Y_scale, Y_zero_point, then (X, scale, zero point) "
                     "triples")
    first = n.x(2)
    parts = [_deq(n, n.x(i), n.x(i + 1), n.x(i + 2), f"input {i // 3}")
             for i in range(2, len(n.inputs), 3)]
    axis = n.axis(int(n.attr("axis", 0)), first.type.rank)
    try:
        y = n.emit("concat", parts, {"axis": axis})
    except Exception as err:  # noqa: BLE001 - a shape error: a rejection
        raise Reject(str(err)) from None
    return _q(n, y, n.x(0), n.x(1), first)


def qgemm(n: NodeCtx) -> Value:
    """QGemm (A, a_scale, a_zp, B, b_scale, b_zp, C, y_scale, y_zp; alpha, transA, transB):
    ``alpha * a_scale * b_scale * ((A - a_zp) @ (B - b_zp) + C)`` with C an i32 bias, then
    quantized to (y_scale, y_zp), or f32 where y_scale is absent."""
    a, sa, za, b, sb, zb = (n.opt(i) for i in range(6))
    if a is None or b is None or sa is None or sb is None:
        raise Reject("A, a_scale, B and b_scale are required")
    if int(n.attr("transA", 0)):
        if a.type.rank != 2:
            raise Reject("transA needs a 2-D A")
        a = n.transpose(a, (1, 0))
    if int(n.attr("transB", 0)):
        bw = n.cx.static(b)
        if bw is None or b.type.rank != 2:
            raise Reject("transB needs B as a 2-D initializer")
        b = n.array(bw.T.copy(), b.type.dtype)
    acc = quant.int_product(n, a, b, za, zb)
    if acc is None:
        raise Reject("B must be a 2-D u8/i8 initializer and the zero points one value "
                     "(B's may be one per column)")
    c = n.opt(6)
    if c is not None:
        if c.type.dtype != dt.i32:
            raise Reject(f"C of type {c.type.dtype} (an i32 bias)")
        acc = n.binary("add", acc, c)
    cols = b.type.shape[1]
    if sa.type.size != 1 or sb.type.size not in (1, cols) or sa.type.dtype != dt.f32 \
            or sb.type.dtype != dt.f32:
        raise Reject("a_scale must be one f32 value, b_scale one or one per column")
    alpha = float(n.attr("alpha", 1.0))
    # the real scale of the accumulator, in f32 as the kernel's float output path
    scale = n.emit("mul", [n.broadcast(n.reshape(sa, ()), (sb.type.size,)),
                           n.reshape(sb, (sb.type.size,))])
    if alpha != 1.0:
        scale = n.scalar_op("mul", scale, alpha)
    y = n.emit("mul", [n.cast(acc, dt.f32), n.broadcast(scale, acc.type.shape)])
    sy = n.opt(7)
    if sy is None:
        return y
    return _q(n, y, sy, n.opt(8), n.x(0))
