"""Reference semantics of the quantization ops (rlx_core/ir/ops/quant.py), in numpy.

The rules every target matches bit for bit:

- ``quantize`` computes in f32: ``q = round_half_even(x / scale)`` (an f32 division, not a
  multiplication by 1/scale), ``q + f32(zp)``, then ``max(q, qmin)``, ``min(q, qmax)`` and a
  cast. ``dequantize`` is ``f32(i32(q) - zp) * scale``.
- ``requantize`` is TFLite's ``MultiplyByQuantizedMultiplier`` (the convention CMSIS-NN's
  ``arm_nn_requantize`` follows): with ``left = max(shift, 0)``, ``right = max(-shift, 0)``,
  ``x = wrap_i32(acc * 2^left)``, ``h = SaturatingRoundingDoublingHighMul(x, multiplier)`` =
  ``trunc((x * m + nudge) / 2^31)`` with ``nudge = 2^30`` for ``x * m >= 0`` else
  ``1 - 2^30``, and ``RoundingDivideByPOT(h, right)`` = ``floor(h / 2^right)`` plus one when
  the remainder exceeds half (ties away from zero); then ``+ zero_point`` and a clamp. A
  multiplier lies in [0, 2^31), so SRDHM's one saturating case (both INT32_MIN) cannot occur.
- ``int_linear`` accumulates exactly and wraps to i32 once (equal to wrapping at every step).
- ``int_conv2d`` is ``conv2d``'s geometry on the centred integers ``x - a_zp`` and
  ``w - b_zp`` (a padded tap is 0 after centring: it holds ``a_zp``), summed exactly and
  wrapped to i32 once, like ``int_linear``.
- ``int4_linear`` unpacks the codes (low nibble first), subtracts the zero (or reads the
  codes as signed), multiplies by the group's scale in f32, then contracts in f64 and rounds
  once, like ``linear``.
- ``fake_quantize`` is quantize-then-dequantize in f32 with a float zero point.
- ``dynamic_int_linear`` is the chain rlx.quant.ptq.quantize_dynamic(granularity="token")
  writes: ``s_i = max(max_k |x_ik|, 1e-30) / 127`` in f32, ``quantize`` to i8 with it (zero
  point 0), ``int_linear``, then ``(f32(acc) * w_scale[j]) * s_i``, then ``+ bias[j]``.
- ``static_int_linear`` is quantize_static's chain: ``quantize`` with the fixed parameters
  (NaN -> 0), the codes clamped to ``[a_qmin, a_qmax]``, ``int_linear`` with the i32 bias,
  then ``f32(acc) * acc_scale[j]``.
- ``requantized_int_linear`` is ``int_linear`` (wrapped to i32), ``requantize`` along the last
  axis, then the clamp to ``[qmin, qmax]``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from rlx_core.ir.graph import TensorType
from rlx_core.ir.ops.quant import qrange

Array = np.ndarray


def along(v: Array, rank: int, axis: int) -> Array:
    """A () or (C,) parameter shaped to broadcast against a rank-``rank`` tensor on ``axis``."""
    v = np.asarray(v)
    if v.ndim == 0:
        return v
    shape = [1] * rank
    shape[axis % rank] = v.shape[0]
    return v.reshape(shape)


def quantize(x: Array, scale: Array, zp: Array, axis: int, dtype: object) -> Array:
    lo, hi = qrange(dtype)
    r = x.ndim
    q = np.round(np.asarray(x, np.float32) / along(np.asarray(scale, np.float32), r, axis))
    q = q + along(np.asarray(zp).astype(np.float32), r, axis)
    # clamp in f64: f32 cannot hold i32's qmax (2^31 - 1 rounds to 2^31, which wrapped to
    # -2^31 for x = +inf); NaN gives 0, as the cast at the end of the decomposition does
    q = np.clip(q.astype(np.float64), lo, hi)
    return np.where(np.isnan(q), 0, q).astype(np.int64)


def dequantize(q: Array, scale: Array, zp: Array, axis: int) -> Array:
    r = q.ndim
    diff = np.asarray(q).astype(np.int32) - along(np.asarray(zp, np.int32), r, axis)
    return diff.astype(np.float32) * along(np.asarray(scale, np.float32), r, axis)


def _trunc_div(a: Array, d: int | Array) -> Array:
    """Integer division rounding toward zero (C's ``/``)."""
    return np.sign(a) * (np.abs(a) // d)


def multiply_by_quantized_multiplier(acc: Array, multiplier: Array, shift: Array) -> Array:
    """TFLite's MultiplyByQuantizedMultiplier on int64 arrays (see the module docstring)."""
    x = np.asarray(acc).astype(np.int64)
    m = np.asarray(multiplier).astype(np.int64)
    s = np.asarray(shift).astype(np.int64)
    left, right = np.maximum(s, 0), np.maximum(-s, 0)
    x = ((x << left) + 2**31) % 2**32 - 2**31  # the int32 product wraps, as in C
    ab = x * m
    nudge = np.where(ab >= 0, np.int64(1 << 30), np.int64(1 - (1 << 30)))
    high = _trunc_div(ab + nudge, np.int64(1 << 31))
    mask = (np.int64(1) << right) - 1
    rem = high & mask
    threshold = (mask >> 1) + (high < 0)
    return (high >> right) + (rem > threshold)


def requantize(acc: Array, a: dict[str, Any]) -> Array:
    r = acc.ndim
    axis = a["axis"]
    per = len(a["multiplier"]) > 1

    def param(vals: tuple[int, ...]) -> Array:
        arr = np.asarray(vals, np.int64)
        return along(arr, r, axis) if per else arr[0]

    y = multiply_by_quantized_multiplier(acc, param(a["multiplier"]), param(a["shift"]))
    lo, hi = qrange(a["dtype"])
    return np.clip(y + a["zero_point"], lo, hi)


def int_linear(a: dict[str, Any], args: list[Array]) -> Array:
    x = args[0].astype(np.int64) - a["a_zero_point"]
    w = args[1].astype(np.int64) - a["b_zero_point"]
    y = x @ w.T
    if len(args) == 3:
        y = y + args[2].astype(np.int64)
    return y


def int_conv2d(a: dict[str, Any], args: list[Array]) -> Array:
    """(N, C, H, W) x (O, C/groups, KH, KW) -> exact (N, O, OH, OW) sums, in i64."""
    x = args[0].astype(np.int64) - a["a_zero_point"]
    w = args[1].astype(np.int64) - a["b_zero_point"]
    (sh, sw), (ph, pw), (dh, dw), g = a["stride"], a["padding"], a["dilation"], a["groups"]
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    oh = (h + 2 * ph - dh * (kh - 1) - 1) // sh + 1
    ow = (wd + 2 * pw - dw * (kw - 1) - 1) // sw + 1
    xp = np.zeros((n, c, h + 2 * ph, wd + 2 * pw), np.int64)
    xp[:, :, ph:ph + h, pw:pw + wd] = x
    taps = np.empty((n, c, kh, kw, oh, ow), np.int64)
    for i in range(kh):
        for j in range(kw):
            taps[:, :, i, j] = xp[:, :, i * dh:i * dh + sh * (oh - 1) + 1:sh,
                                  j * dw:j * dw + sw * (ow - 1) + 1:sw]
    taps = taps.reshape(n, g, cg, kh, kw, oh, ow)
    y = np.einsum("ngcijhw,gocij->ngohw", taps, w.reshape(g, o // g, cg, kh, kw))
    y = y.reshape(n, o, oh, ow)
    if len(args) == 3:
        y = y + args[2].astype(np.int64)[None, :, None, None]
    return y


def unpack_int4(packed: Array, signed: bool) -> Array:
    """(N, K/2) bytes -> (N, K) codes, the even column in the low nibble."""
    lo = (packed & 0x0F).astype(np.int16)
    hi = (packed >> 4).astype(np.int16)
    q = np.stack([lo, hi], axis=-1).reshape(packed.shape[0], -1)
    return np.where(q >= 8, q - 16, q) if signed else q


def int4_weight(packed: Array, scale: Array, zero: Array | None, group: int) -> Array:
    """The f32 weight an int4_linear multiplies by (codes minus zero, times the scale)."""
    q = unpack_int4(packed, zero is None).astype(np.float32)
    n, k = q.shape
    q = q.reshape(n, k // group, group)
    if zero is not None:
        q = q - zero.astype(np.float32)[..., None]
    return (q * scale.astype(np.float32)[..., None]).reshape(n, k)


def int4_linear(a: dict[str, Any], args: list[Array]) -> Array:
    w = int4_weight(args[1], args[2], args[3] if len(args) == 4 else None, a["group"])
    return args[0].astype(np.float64) @ w.astype(np.float64).T


ROW_TINY = np.float32(1e-30)


def row_scales(x2: Array, qmax: float = 127.0) -> Array:
    """One dynamic i8 scale per row of a (rows, k) f32 array: max(max_k |x_ik|, 1e-30) / qmax
    (127; 63 for 7-bit codes)."""
    amax = np.abs(np.asarray(x2, np.float32)).max(axis=1, initial=np.float32(-np.inf))
    return (np.maximum(amax, ROW_TINY) / np.float32(qmax)).astype(np.float32)


def epilogue(y: Array, a: dict[str, Any], r: Array | None, t: TensorType | None) -> Array:
    """dynamic/static_int_linear's store epilogue: the reference ``gelu`` (rounded to f32),
    then ``+ residual`` in f32."""
    if a.get("act", "none") == "gelu":
        from rlx_core.targets.numpy_ref.semantics import COMPOSITES

        y = np.asarray(COMPOSITES["gelu"]({"approximate": "none"}, [y], t), np.float64).astype(
            np.float32)
    return y + np.asarray(r, np.float32) if r is not None else y


def dynamic_int_linear(args: list[Array], a_qmax: int = 127) -> Array:
    """quantize per row, int_linear, ``(f32(acc) * w_scale) * s_row (+ bias)``, in f32."""
    x, w, ws = args[:3]
    k, n = w.shape[1], w.shape[0]
    x2 = np.asarray(x, np.float32).reshape(-1, k)
    s = row_scales(x2, a_qmax)
    q = quantize(x2, s, np.zeros(s.shape, np.int32), 0, "i8")
    acc = (q @ np.asarray(w).astype(np.int64).T).astype(np.int32)  # k * 127 * 127 fits i32
    y = (acc.astype(np.float32) * np.asarray(ws, np.float32)) * s[:, None]
    if len(args) == 4:
        y = y + np.asarray(args[3], np.float32)
    return y.reshape(np.shape(x)[:-1] + (n,))


def static_codes(x: Array, a: dict[str, Any]) -> Array:
    """static_int_linear's activation codes: quantize with the fixed ``a_scale`` and
    ``a_zero_point`` to i32 (NaN -> 0), then clamped to ``[a_qmin, a_qmax]``."""
    q = quantize(x, np.float32(a["a_scale"]), np.int32(a["a_zero_point"]), -1, "i32")
    return np.clip(q, a["a_qmin"], a["a_qmax"])


def static_int_linear(args: list[Array], a: dict[str, Any]) -> Array:
    """The codes, ``int_linear`` (+ the i32 bias, wrapped to i32), then ``f32(acc) *
    acc_scale[j]``: the chain quantize -> int_linear -> dequantize of rlx.quant.ptq."""
    x, w, scale = args[:3]
    k, n = w.shape[1], w.shape[0]
    q = static_codes(np.asarray(x, np.float32).reshape(-1, k), a) - a["a_zero_point"]
    acc = q @ np.asarray(w).astype(np.int64).T
    if len(args) == 4:
        acc = acc + np.asarray(args[3]).astype(np.int64)
    acc = ((acc + 2**31) % 2**32 - 2**31).astype(np.int32)
    y = acc.astype(np.float32) * np.asarray(scale, np.float32)
    return y.reshape(np.shape(x)[:-1] + (n,))


def requantized_int_linear(a: dict[str, Any], args: list[Array]) -> Array:
    """(An f32 input's static codes,) ``int_linear`` wrapped to i32, ``requantize`` along the
    last axis, then the clamp to ``[qmin, qmax]``."""
    if np.asarray(args[0]).dtype == np.float32:  # the codes of static_int_linear's input
        args = [static_codes(args[0], a), *args[1:]]
    acc = int_linear({"a_zero_point": a["a_zero_point"], "b_zero_point": 0}, args)
    acc = (acc + 2**31) % 2**32 - 2**31
    y = requantize(acc, {**a, "axis": -1})
    return np.clip(y, a["qmin"], a["qmax"])


def fake_quantize(a: dict[str, Any], x: Array, scale: Array, zp: Array) -> Array:
    r, axis = x.ndim, a["axis"]
    s = along(np.asarray(scale, np.float32), r, axis)
    z = along(np.asarray(zp, np.float32), r, axis)
    q = np.round(np.asarray(x, np.float32) / s) + z
    q = np.minimum(np.maximum(q, np.float32(a["qmin"])), np.float32(a["qmax"]))
    return (q - z) * s


def eval_quant(op: str, a: dict[str, Any], args: list[Array], t: TensorType) -> Array:
    """The result of quantization op ``op`` (before ``finish`` brings it to ``t``'s host form)."""
    if op == "quantize":
        return quantize(args[0], args[1], args[2], a["axis"], a["dtype"])
    if op == "dequantize":
        return dequantize(args[0], args[1], args[2], a["axis"])
    if op == "requantize":
        return requantize(args[0], a)
    if op == "int_linear":
        return int_linear(a, args)
    if op == "int_conv2d":
        return int_conv2d(a, args)
    if op == "int4_linear":
        return int4_linear(a, args)
    if op == "requantized_int_linear":
        return requantized_int_linear(a, args)
    if op in ("dynamic_int_linear", "static_int_linear"):
        r = args[-1] if a.get("residual") else None
        args = args[:-1] if r is not None else args
        y = (dynamic_int_linear(args, a["a_qmax"]) if op == "dynamic_int_linear"
             else static_int_linear(args, a))
        return epilogue(y, a, r, t)
    assert op == "fake_quantize", op
    return fake_quantize(a, *args)


QUANT_OPS = ("quantize", "dequantize", "requantize", "int_linear", "int_conv2d", "int4_linear",
             "fake_quantize", "dynamic_int_linear", "static_int_linear",
             "requantized_int_linear")
