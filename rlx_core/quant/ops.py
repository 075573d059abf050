"""The quantization ops as traced functions: each records one HIR node (rlx_core/ir/ops/quant.py).

``scale`` and ``zero_point`` may be tensors (dynamic quantization computes them in the graph)
or host values/QParams (they become constants or parameters of the graph).
"""

from __future__ import annotations

from typing import Any

from rlx_core.frontend import ops
from rlx_core.frontend.tensor import Tensor
from rlx_core.frontend.tracer import current, flatten_nested
from rlx_core.ir import dtypes as dt


def _emit(op: str, args: list[Any], attrs: dict[str, Any]) -> Tensor:
    return Tensor(current().emit(op, [a.value for a in args], attrs))


def _param(v: Any, dtype: str) -> Tensor:
    if isinstance(v, Tensor):
        return ops.astype(v, dtype)
    if not hasattr(v, "shape"):  # Python numbers or nested lists: no numpy (Pyodide has none)
        flat, shape = flatten_nested(v)
        return ops.constant(tuple(flat) if shape else flat[0], dtype, shape)
    import numpy as np

    return ops.asarray(np.asarray(v, dtype=dt.to_numpy_name(dt.get(dtype))))


def _zp(zero_point: Any, scale: Tensor, dtype: str) -> Tensor:
    """The zero point as a tensor shaped like the scale (a scalar zero point is repeated per
    channel when the scale is a vector)."""
    z = _param(zero_point, dtype)
    if z.shape != scale.shape and z.ndim == 0:
        z = ops.broadcast_to(z, scale.shape)
    return z


def quantize(x: Any, scale: Any, zero_point: Any = 0, dtype: str = "i8",
             axis: int | None = None) -> Tensor:
    """``clamp(round_half_even(x / scale) + zero_point)`` to ``dtype``; per tensor (scalar
    scale) or per channel along ``axis`` (a vector of scales)."""
    s = _param(scale, "f32")
    return _emit("quantize", [ops.astype(ops.asarray(x), "f32"), s, _zp(zero_point, s, "i32")],
                 {"axis": -1 if axis is None else axis, "dtype": dt.get(dtype)})


def dequantize(q: Any, scale: Any, zero_point: Any = 0, axis: int | None = None) -> Tensor:
    """``f32(q - zero_point) * scale``."""
    s = _param(scale, "f32")
    return _emit("dequantize", [ops.asarray(q), s, _zp(zero_point, s, "i32")],
                 {"axis": -1 if axis is None else axis})


def requantize(acc: Any, multiplier: Any, shift: Any, zero_point: int = 0, dtype: str = "i8",
               axis: int = -1) -> Tensor:
    """i32 accumulators to ``dtype`` with TFLite's fixed-point (multiplier, shift) rescale
    (ints, or per-channel sequences along ``axis``); see rlx.quant.quantize_multiplier."""
    mult = tuple(int(m) for m in (multiplier if hasattr(multiplier, "__len__") else [multiplier]))
    sh = tuple(int(s) for s in (shift if hasattr(shift, "__len__") else [shift]))
    return _emit("requantize", [ops.asarray(acc)],
                 {"multiplier": mult, "shift": sh, "zero_point": int(zero_point), "axis": axis,
                  "dtype": dt.get(dtype)})


def int_linear(x: Any, weight: Any, bias: Any = None, x_zero_point: int = 0,
               w_zero_point: int = 0) -> Tensor:
    """``sum_k (x - x_zp) * (w - w_zp)`` in i32 (+ an i32 bias); ``weight`` is (out, in)."""
    args = [ops.asarray(x), ops.asarray(weight)] + ([_param(bias, "i32")] if bias is not None
                                                    else [])
    return _emit("int_linear", args, {"a_zero_point": int(x_zero_point),
                                      "b_zero_point": int(w_zero_point)})


def int_conv2d(x: Any, weight: Any, bias: Any = None, stride: int | tuple[int, int] = 1,
               padding: int | tuple[int, int] = 0, dilation: int | tuple[int, int] = 1,
               groups: int = 1, x_zero_point: int = 0, w_zero_point: int = 0) -> Tensor:
    """``conv2d`` on integers: ``sum (x - x_zp) * (w - w_zp)`` over the taps in i32 (+ an
    i32 bias); ``x`` is NCHW, ``weight`` OIHW (out, in / groups, KH, KW)."""
    def pair(v: int | tuple[int, int]) -> tuple[int, int]:
        return (int(v), int(v)) if isinstance(v, int) else (int(v[0]), int(v[1]))

    args = [ops.asarray(x), ops.asarray(weight)] + ([_param(bias, "i32")] if bias is not None
                                                    else [])
    return _emit("int_conv2d", args, {"stride": pair(stride), "padding": pair(padding),
                                      "dilation": pair(dilation), "groups": int(groups),
                                      "a_zero_point": int(x_zero_point),
                                      "b_zero_point": int(w_zero_point)})


def int4_linear(x: Any, weight: Any) -> Tensor:
    """``x @ W.T`` for an rlx.quant.int4.Int4Weight ``weight`` (packed codes, per-group scales
    and zeros become parameters), dequantized inside the matmul on targets with a kernel."""
    import numpy as np

    args = [ops.astype(ops.asarray(x), "f32"), ops.asarray(weight.packed),
            ops.asarray(np.asarray(weight.scale, np.float32))]
    if not weight.signed:
        args.append(ops.asarray(np.asarray(weight.zero, np.int8)))
    return _emit("int4_linear", args, {"group": int(weight.group)})


def fake_quantize(x: Any, scale: Any, zero_point: Any = 0.0, qmin: int = -128, qmax: int = 127,
                  axis: int | None = None) -> Tensor:
    """Quantize then dequantize in f32 (QAT). Differentiated, ``x`` gets the straight-through
    gradient (inside the range) and ``scale`` LSQ's gradient."""
    s = _param(scale, "f32")
    return _emit("fake_quantize", [ops.astype(ops.asarray(x), "f32"), s,
                                   _zp(zero_point, s, "f32")],
                 {"qmin": int(qmin), "qmax": int(qmax), "axis": -1 if axis is None else axis})
