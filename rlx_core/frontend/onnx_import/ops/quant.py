"""Converters for ONNX linear quantization: QuantizeLinear, DequantizeLinear,
DynamicQuantizeLinear and the integer / quantized products (MatMulInteger, ConvInteger,
QLinearMatMul, QLinearConv).

Where ONNX's rule and rlx's own quantization ops (rlx_core/ir/ops/quant.py) compute the same
values, the import emits those ops, so a quantized model reads as rlx's explicit
``quantize`` / ``dequantize`` / ``int_linear`` (and the cpu runs its int8 GEMM): f32
QuantizeLinear / DequantizeLinear to or from u8, i8 and i16, per tensor or per axis; an
integer product whose B is an initializer. Everything else decomposes into primitives.

Each follows ONNX's reference arithmetic step by step, in the same dtypes: round half to even,
then saturate to the output type's range. Integer products run either in i32 (matmul) or on
f64 values that are exact integers (convolution, whose only float kernel is conv2d): every
product of 8-bit values minus zero points is below 2**17, so sums stay exact far beyond any
realistic reduction length.
"""

from __future__ import annotations

from typing import Any

from rlx_core.frontend.onnx_import import dtypes as odt
from rlx_core.frontend.onnx_import.context import NodeCtx
from rlx_core.frontend.onnx_import.errors import Reject
from rlx_core.frontend.onnx_import.ops import conv as conv_ops
from rlx_core.frontend.onnx_import.ops import nn
from rlx_core.ir import dtypes as dt
from rlx_core.ir.dtypes import DType
from rlx_core.ir.graph import Value

# the integer quantized types rlx has, with their saturation ranges
_RANGES: dict[str, tuple[int, int]] = {
    "u8": (0, 255), "i8": (-128, 127), "i16": (-32768, 32767),
}
_FLOATS = (dt.f32, dt.f16, dt.bf16)


def _range(d: DType, what: str) -> tuple[int, int]:
    if d.name not in _RANGES:
        raise Reject(f"{what} of type {d} (rlx quantizes to u8, i8 and i16)")
    return _RANGES[d.name]


def _per(n: NodeCtx, v: Value, x: Value, axis: int, block: int, what: str) -> Value:
    """A scale or zero point laid over ``x``: per tensor (one element), per axis (1-D along
    ``axis``) or blocked (``x``'s shape with ``axis`` cut into blocks of ``block``)."""
    shape = x.type.shape
    if v.type.size == 1:
        return n.broadcast(n.reshape(v, ()), shape)
    if not block:
        if v.type.rank != 1 or x.type.rank == 0 or v.type.shape[0] != shape[axis]:
            raise Reject(f"{what} {v.type} is neither one value nor one per element of axis "
                         f"{axis} of {x.type}")
        return n.emit("broadcast_in_dim", [v], {"shape": shape, "dims": (axis,)})
    nb = -(-shape[axis] // block)
    want = shape[:axis] + (nb,) + shape[axis + 1:]
    if v.type.shape != want:
        raise Reject(f"blocked {what} {v.type} must have shape {list(want)}")
    # (.., nb, ..) -> (.., nb, block, ..) -> (.., nb * block, ..), cut to the axis length
    big = shape[:axis] + (nb, block) + shape[axis + 1:]
    dims = tuple(i if i <= axis else i + 1 for i in range(len(shape)))
    y = n.emit("broadcast_in_dim", [v], {"shape": big, "dims": dims})
    y = n.reshape(y, shape[:axis] + (nb * block,) + shape[axis + 1:])
    return n.slice_axis(y, axis, 0, shape[axis])


def _geometry(n: NodeCtx, x: Value, scale: Value) -> tuple[int, int]:
    """(axis, block_size); the axis is only checked where a per-axis or blocked scale uses
    it (a rank-1 x with one scale is per-tensor whatever the default axis says)."""
    axis = int(n.attr("axis", 1))
    block = int(n.attr("block_size", 0))
    if block < 0:
        raise Reject(f"block_size {block}")
    if n.version < 13 and scale.type.size != 1:
        raise Reject("per-axis scales need opset 13")
    if scale.type.size == 1:
        return 0, block
    return n.axis(axis, x.type.rank), block


def _saturate(n: NodeCtx, q: Value, zp: Value | None, d: DType) -> Value:
    """round-to-integer float ``q`` (+ zero point) saturated into ``d``, in i32 as the
    reference computes it. ``q`` is first clamped well outside every range, so the i32
    conversion is exact and adding the zero point cannot overflow."""
    lo, hi = _range(d, "output")
    big = 65504.0 if q.type.dtype == dt.f16 else float(1 << 20)
    q = n.emit("min", [n.emit("max", [q, n.full_like(-big, q)]), n.full_like(big, q)])
    qi = n.cast(q, dt.i32)
    if zp is not None:
        qi = n.emit("add", [qi, n.cast(zp, dt.i32)])
    qi = n.emit("min", [n.emit("max", [qi, n.full_like(lo, qi)]), n.full_like(hi, qi)])
    return n.cast(qi, d)


def rlx_params(n: NodeCtx, x: Value, scale: Value, zp: Value | None,
               axis: int) -> tuple[Value, Value] | None:
    """(scale f32, zero point i32) shaped as rlx's quantize/dequantize take them (``()``, or
    ``(C,)`` along ``axis``), or None where they have another geometry."""
    if scale.type.dtype != dt.f32:
        return None
    if scale.type.size == 1:
        shape: tuple[int, ...] = ()
    elif scale.type.rank == 1 and x.type.rank and scale.type.shape[0] == x.type.shape[axis]:
        shape = scale.type.shape
    else:
        return None
    if zp is not None and zp.type.size != max(1, len(shape) and shape[0]):
        return None
    s = n.reshape(scale, shape)
    z = n.reshape(n.cast(zp, dt.i32), shape) if zp is not None else n.const(0, dt.i32, shape)
    return s, z


def rlx_quantize(n: NodeCtx, x: Value, s: Value, z: Value, axis: int, out: DType) -> Value:
    return n.emit("quantize", [x, s, z], {"axis": axis, "dtype": out})


def rlx_dequantize(n: NodeCtx, q: Value, s: Value, z: Value, axis: int) -> Value:
    return n.emit("dequantize", [q, s, z], {"axis": axis})


def quantize_linear(n: NodeCtx) -> Value:
    x, scale, zp = n.x(0), n.x(1), n.opt(2)
    out = odt.to_rlx(int(n.attr("output_dtype", 0))) if n.attr("output_dtype") else None
    if n.attr("output_dtype") and out is None:
        raise Reject(f"output_dtype {odt.onnx_type_name(int(n.attr('output_dtype')))}")
    if zp is not None:
        if out is not None and out != zp.type.dtype:
            raise Reject("output_dtype and the zero point's type differ")
        out = zp.type.dtype
    out = out or dt.u8
    _range(out, "output")
    axis, block = _geometry(n, x, scale)
    prec = n.attr("precision")
    if x.type.dtype == dt.f32 and not block and (not prec or odt.to_rlx(int(prec)) == dt.f32):
        p = rlx_params(n, x, scale, zp, axis)
        if p is not None:  # rlx's quantize: the same f32 division, rounding and saturation
            return rlx_quantize(n, x, *p, axis, out)
    if prec:
        d = odt.to_rlx(int(prec))
        if d not in _FLOATS:
            raise Reject(f"precision {odt.onnx_type_name(int(prec))}")
    else:
        # the reference divides in numpy's promoted type, the spec in the scale's: equal
        # only when x and the scale share a float type
        if x.type.dtype != scale.type.dtype or x.type.dtype not in _FLOATS:
            raise Reject(f"x {x.type.dtype} with a {scale.type.dtype} scale (the division's "
                         f"precision is only defined for one float type, or with precision=)")
        d = x.type.dtype
    s = _per(n, n.cast(scale, d), x, axis, block, "scale")
    q = n.emit("round", [n.emit("div", [n.cast(x, d), s])])  # half to even
    z = _per(n, zp, x, axis, block, "zero point") if zp is not None else None
    return _saturate(n, q, z, out)


def dequantize_linear(n: NodeCtx) -> Value:
    x, scale, zp = n.x(0), n.x(1), n.opt(2)
    d = x.type.dtype
    if d.name not in _RANGES and d != dt.i32:
        raise Reject(f"x of type {d}")
    if scale.type.dtype not in _FLOATS:
        raise Reject(f"scale of type {scale.type.dtype}")
    out = scale.type.dtype
    if n.attr("output_dtype"):
        out = odt.to_rlx(int(n.attr("output_dtype")))
        if out not in _FLOATS:
            raise Reject(f"output_dtype {odt.onnx_type_name(int(n.attr('output_dtype')))}")
    if zp is not None and zp.type.dtype != d:
        raise Reject("the zero point's type differs from x's")
    axis, block = _geometry(n, x, scale)
    if d.name in _RANGES and out == dt.f32 and not block:
        p = rlx_params(n, x, scale, zp, axis)
        if p is not None:  # rlx's dequantize: f32(i32(x) - zp) * scale, exact for 8/16 bits
            return rlx_dequantize(n, x, *p, axis)
    # the reference: float32(x) - zero point, times the scale, in numpy's promoted type (f32,
    # or f64 when an i32 zero point takes part), then converted to the output type
    work = dt.f64 if zp is not None and d == dt.i32 else dt.f32
    y = n.cast(n.cast(x, dt.f32), work)
    if zp is not None:
        y = n.emit("sub", [y, n.cast(_per(n, zp, x, axis, block, "zero point"), work)])
    y = n.emit("mul", [y, n.cast(_per(n, scale, x, axis, block, "scale"), work)])
    return n.cast(y, out)


def dynamic_quantize_linear(n: NodeCtx) -> list[Value]:
    """u8 quantization with the scale and zero point from x's range (widened to hold 0)."""
    x = n.x(0)
    if x.type.dtype != dt.f32:
        raise Reject(f"x of type {x.type.dtype}")
    axes = tuple(range(x.type.rank))
    zero = n.const(0.0, dt.f32)
    hi = n.emit("max", [n.emit("reduce_max", [x], {"axes": axes}), zero])
    lo = n.emit("min", [n.emit("reduce_min", [x], {"axes": axes}), zero])
    span = n.emit("select", [n.emit("eq", [hi, lo]), n.const(1.0, dt.f32),
                             n.emit("sub", [hi, lo])])
    scale = n.emit("div", [span, n.const(255.0, dt.f32)])
    zp = n.emit("sub", [zero, n.emit("div", [lo, scale])])
    zp = n.emit("round", [n.emit("min", [n.emit("max", [zp, zero]),
                                         n.const(255.0, dt.f32)])])
    q = n.emit("round", [n.emit("div", [x, n.broadcast(scale, x.type.shape)])])
    q = n.emit("add", [q, n.broadcast(zp, x.type.shape)])
    q = n.emit("min", [n.emit("max", [q, n.full_like(0.0, q)]), n.full_like(255.0, q)])
    return [n.cast(q, dt.u8), scale, n.cast(zp, dt.u8)]


def _centered(n: NodeCtx, v: Value, zp: Value | None, d: DType, what: str) -> Value:
    """``v - zp`` in ``d`` (the zero point one value: per-row/column ones are rejected, the
    reference broadcasts them along the wrong axis)."""
    if v.type.dtype.name not in ("u8", "i8"):
        raise Reject(f"{what} of type {v.type.dtype}")
    y = n.cast(v, d)
    if zp is None:
        return y
    if zp.type.dtype != v.type.dtype:
        raise Reject(f"{what}'s zero point has another type")
    if zp.type.size != 1:
        raise Reject(f"{what}'s zero point must be one value")
    return n.emit("sub", [y, n.broadcast(n.reshape(n.cast(zp, d), ()), y.type.shape)])


def _static_ints(n: NodeCtx, v: Value | None) -> Any | None:
    """The import-time value of a zero point as an int64 array, None if it has none."""
    if v is None:
        return None
    arr = n.cx.static(v)
    return None if arr is None else arr.astype("int64").reshape(-1)


def int_product(n: NodeCtx, a: Value, b: Value, za: Value | None,
                zb: Value | None) -> Value | None:
    """``(a - za) @ (b - zb)`` in i32 through rlx's ``int_linear`` when ``b`` is a 2-D
    initializer (the weight of every quantized MatMul ONNX Runtime writes); None otherwise.

    ``zb`` may be one value or one per column of ``b`` (ONNX Runtime's per-channel weights);
    ``za`` one value, known now or computed at run time (DynamicQuantizeLinear's). What
    int_linear's attributes cannot hold is corrected exactly in i32:
    ``sum_k (a - za)(w - zb_n) = sum_k (a - za_0)(w - zb_0) - ...`` with the column sums of
    the constant weight and the row sums of ``a``."""
    import numpy as np

    bw = n.cx.static(b)
    if bw is None or b.type.rank != 2 or a.type.rank < 1 or \
            a.type.dtype.name not in ("u8", "i8") or b.type.dtype.name not in ("u8", "i8"):
        return None
    for z, v in ((za, a), (zb, b)):
        if z is not None and z.type.dtype != v.type.dtype:
            raise Reject("a zero point's type differs from its operand's")
    k, cols = bw.shape
    zb_arr = _static_ints(n, zb) if zb is not None else np.zeros(1, np.int64)
    if zb_arr is None or zb_arr.size not in (1, cols):
        return None
    if za is not None and za.type.size != 1:
        return None
    za_arr = _static_ints(n, za) if za is not None else np.zeros(1, np.int64)
    za_attr = int(za_arr[0]) if za_arr is not None else 0
    zb_attr = int(zb_arr[0]) if zb_arr.size == 1 else 0
    w = np.ascontiguousarray(bw.T)
    acc = n.emit("int_linear", [a, n.array(w, b.type.dtype)],
                 {"a_zero_point": za_attr, "b_zero_point": zb_attr})
    shape = acc.type.shape
    if za_arr is None:  # a run-time zero point: minus za * sum_k (w - zb_attr), per column
        colsum = (w.astype(np.int64) - zb_attr).sum(axis=1).astype(np.int32)
        zav = n.broadcast(n.reshape(n.cast(za, dt.i32), ()), shape)
        acc = n.emit("sub", [acc, n.emit("mul", [zav, n.broadcast(n.array(colsum), shape)])])
    if zb_arr.size > 1 and zb_arr.any():  # per column: minus zb_n * sum_k (a - za)
        rows = n.emit("reduce_sum", [n.cast(a, dt.i32)], {"axes": (a.type.rank - 1,)})
        za_i = n.const(za_attr, dt.i32, ()) if za_arr is not None \
            else n.reshape(n.cast(za, dt.i32), ())
        rows = n.emit("sub", [rows, n.broadcast(n.emit("mul", [za_i, n.const(k, dt.i32)]),
                                                rows.type.shape)])
        rows = n.emit("broadcast_in_dim", [rows], {"shape": shape,
                                                   "dims": tuple(range(len(shape) - 1))})
        zbv = n.broadcast(n.array(zb_arr.astype(np.int32)), shape)
        acc = n.emit("sub", [acc, n.emit("mul", [rows, zbv])])
    return acc


def matmul_integer(n: NodeCtx) -> Value:
    acc = int_product(n, n.x(0), n.x(1), n.opt(2), n.opt(3))
    if acc is not None:
        return acc
    a = _centered(n, n.x(0), n.opt(2), dt.i32, "A")
    b = _centered(n, n.x(1), n.opt(3), dt.i32, "B")
    return nn.matmul_values(n, a, b)


def _scalar(n: NodeCtx, v: Value, what: str) -> Value:
    if v.type.size != 1:
        raise Reject(f"{what} must be one value (per-tensor quantization)")
    return n.reshape(v, ())


def _requantize(n: NodeCtx, acc: Value, mult: Value, zp: Value | None, d: DType) -> Value:
    """round(acc * mult + zp) saturated into ``d``, in f64 like the reference (an i32 array
    times a float array promotes to f64 in numpy)."""
    y = n.emit("mul", [n.cast(acc, dt.f64), n.cast(mult, dt.f64)])
    if zp is not None:
        y = n.emit("add", [y, n.broadcast(n.cast(zp, dt.f64), y.type.shape)])
    lo, hi = _range(d, "output")
    y = n.emit("round", [y])
    y = n.emit("min", [n.emit("max", [y, n.full_like(float(lo), y)]),
                       n.full_like(float(hi), y)])
    return n.cast(y, d)


def _multiplier(n: NodeCtx, sa: Value, sb: Value, sy: Value) -> Value:
    """a_scale * b_scale / y_scale in the scales' own float type, as the reference."""
    d = sa.type.dtype
    if d not in _FLOATS or sb.type.dtype != d or sy.type.dtype != d:
        raise Reject("the scales must share one float type")
    shape = n.bshape(sa, sb, sy)
    sa, sb, sy = (n.broadcast(v, shape) for v in (sa, sb, sy))
    return n.emit("div", [n.emit("mul", [sa, sb]), sy])


def qlinear_matmul(n: NodeCtx) -> Value:
    a, sa, za, b, sb, zb, sy, zy = (n.x(i) for i in range(8))
    acc = int_product(n, a, b, za, zb)
    if acc is not None and sb.type.size != 1:  # per column of b, as ONNX Runtime writes
        if sb.type.shape != (b.type.shape[1],):
            raise Reject(f"b_scale {sb.type} is neither one value nor one per column")
        mult = _multiplier(n, _scalar(n, sa, "a_scale"), sb, _scalar(n, sy, "y_scale"))
        return _requantize(n, acc, n.broadcast(mult, acc.type.shape),
                           _scalar(n, zy, "y_zero_point"), zy.type.dtype)
    if acc is None:
        acc = nn.matmul_values(n, _centered(n, a, za, dt.i32, "a"),
                               _centered(n, b, zb, dt.i32, "b"))
    mult = _multiplier(n, _scalar(n, sa, "a_scale"), _scalar(n, sb, "b_scale"),
                       _scalar(n, sy, "y_scale"))
    return _requantize(n, acc, n.broadcast(mult, acc.type.shape),
                       _scalar(n, zy, "y_zero_point"), zy.type.dtype)


def _int_conv(n: NodeCtx, x: Value, w: Value, xz: Value | None, wz: Value | None,
              bias: Value | None) -> Value:
    """Integer convolution (x - xz) * (w - wz) [+ bias] on exact f64 values."""
    if x.type.rank < 3 or w.type.rank != x.type.rank:
        raise Reject("needs (N, C, spatial...) x and a matching weight")
    xc = _centered(n, x, xz, dt.f64, "x")
    if w.type.dtype.name not in ("u8", "i8"):
        raise Reject(f"w of type {w.type.dtype}")
    wc = n.cast(w, dt.f64)
    if wz is not None:
        if wz.type.dtype != w.type.dtype:
            raise Reject("w's zero point has another type")
        m = w.type.shape[0]
        if wz.type.size == 1:
            wzv = n.broadcast(n.reshape(n.cast(wz, dt.f64), ()), w.type.shape)
        elif wz.type.shape == (m,):  # one per output channel
            wzv = n.emit("broadcast_in_dim", [n.cast(wz, dt.f64)],
                         {"shape": w.type.shape, "dims": (0,)})
        else:
            raise Reject(f"w's zero point {wz.type} is neither one value nor one per output "
                         f"channel")
        wc = n.emit("sub", [wc, wzv])
    if bias is not None:
        if bias.type.dtype != dt.i32 or bias.type.shape != (w.type.shape[0],):
            raise Reject(f"bias {bias.type} must be i32, one per output channel")
        bias = n.cast(bias, dt.f64)
    kernel = [int(s) for s in n.attr("kernel_shape", w.type.shape[2:])]
    if tuple(kernel) != w.type.shape[2:]:
        raise Reject("kernel_shape disagrees with the weight")
    return conv_ops.conv_values(n, xc, wc, bias)


def conv_integer(n: NodeCtx) -> Value:
    x, w = n.x(0), n.x(1)
    xz = n.opt(2)
    if xz is not None and xz.type.size != 1:
        raise Reject("x's zero point must be one value")
    return n.cast(_int_conv(n, x, w, xz, n.opt(3), None), dt.i32)


def qlinear_conv(n: NodeCtx) -> Value:
    x, sx, zx, w, sw, zw, sy, zy = (n.x(i) for i in range(8))
    acc = _int_conv(n, x, w, _scalar(n, zx, "x_zero_point"), zw, n.opt(8))
    m = w.type.shape[0]
    if sw.type.size != 1 and sw.type.shape != (m,):
        raise Reject(f"w_scale {sw.type} is neither one value nor one per output channel")
    sw = n.reshape(sw, (m,) if sw.type.size != 1 else ())
    sxv, syv = _scalar(n, sx, "x_scale"), _scalar(n, sy, "y_scale")
    mult = _multiplier(n, sxv, sw, syv)
    if mult.type.rank:  # per output channel: along axis 1 of (N, M, spatial...)
        mult = n.emit("broadcast_in_dim", [mult], {"shape": acc.type.shape, "dims": (1,)})
    else:
        mult = n.broadcast(mult, acc.type.shape)
    return _requantize(n, acc, mult, _scalar(n, zy, "y_zero_point"), zy.type.dtype)
