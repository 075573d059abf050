"""Integer quantization ops (HIR): quantize, dequantize, requantize, int_linear, int_conv2d,
the fused int8 linears, fake_quantize.

Each has a common-IR decomposition (rlx_core/dispatch/quant_decompositions.py), so every target
that runs the MIR primitives runs them; a target may claim one whole (the CPU's int8 GEMM).
The numeric rules are pinned in rlx_core/targets/numpy_ref/quant_semantics.py and documented
in docs/quantization.md:

- ``quantize(x, scale, zero_point)``: ``clamp(round_half_even(x / scale) + zp, qmin, qmax)``
  in f32, per tensor (``scale`` shape ``()``) or per channel (``scale`` shape ``(C,)`` along
  ``axis``), to i8, u8, i4 or i32 (ONNX QuantizeLinear's rule).
- ``dequantize(q, scale, zero_point)``: ``f32(q - zp) * scale``.
- ``requantize(acc)``: i32 -> i8/u8/i16 with integer multipliers and shifts as attributes, the
  TFLite / CMSIS-NN ``MultiplyByQuantizedMultiplier`` (SaturatingRoundingDoublingHighMul then
  RoundingDivideByPOT), then ``+ zero_point`` and a clamp to the dtype.
- ``int_linear(a, w[, bias])``: ``sum_k (a - a_zp)(w - w_zp)`` in i32 (+ an i32 bias), with
  ``w`` shaped (out, in) as ``linear``'s weight.
- ``int_conv2d(x, w[, bias])``: ``conv2d``'s geometry (NCHW input, OIHW weight, stride,
  padding, dilation, groups) on integers: ``sum (x - a_zp)(w - b_zp)`` over the taps in i32
  (+ an i32 bias); a padded tap holds ``a_zp``, so it adds nothing (TFLite / CMSIS-NN's rule).
- ``int4_linear(x, packed, scale[, zero])``: weight-only int4 (rlx_core/quant/int4.py's
  layout): ``x @ W.T`` with ``W = (codes - zero) * scale`` per group of ``group`` inputs.
- ``dynamic_int_linear(x, w_q, w_scale[, bias])``: dynamic int8 ``linear`` with one
  activation scale per row, ``s_i = max(max_k |x_ik|, 1e-30) / 127``: ``quantize`` the rows
  to i8, ``int_linear`` with the i8 weight, then ``(f32(acc) * w_scale[j]) * s_i (+ bias[j])``.
  rlx.quant.ptq writes that chain op by op; passes/dynamic_int_linear.py folds it into this
  op where a target runs it as one kernel (the CPU's packed int8 GEMM).
- ``static_int_linear(x, w_q, acc_scale[, bias])``: static int8 ``linear`` with fixed
  activation parameters (attributes ``a_scale``, ``a_zero_point`` and the codes' range
  ``[a_qmin, a_qmax]``): ``q = clamp(round_half_even(x / a_scale) + a_zero_point)`` (NaN ->
  ``clamp(0)``), ``acc = sum_k (q - a_zp) w + bias`` in i32, ``y = f32(acc) * acc_scale[j]``.
  rlx.quant.ptq.quantize_static writes it as quantize [-> min/max] -> int_linear ->
  dequantize; passes/static_int_linear.py folds that where a target runs it as one kernel.
  Both int8 linears take an epilogue into their store (passes/int_linear_epilogue.py):
  ``act`` (``gelu``, exact) on the result, then ``+ residual`` (``residual=True``: the last
  input, shaped like the output).
- ``requantized_int_linear(a, w[, bias])``: (an f32 ``a`` quantized first, as
  ``static_int_linear``'s input) ``int_linear`` (``b_zero_point`` 0) then
  ``requantize`` along the last axis to i8 / u8, clamped to ``[qmin, qmax]`` (a folded ReLU,
  7-bit codes): the static chain between two quantized layers, which
  passes/requantized_int_linear.py folds where a target runs it as one kernel (the CPU's
  packed GEMM writes the codes from its store: chained layers never leave the integers).
- ``fake_quantize(x, scale, zero_point)``: quantize then dequantize in f32, for QAT; its
  gradient is the straight-through estimator for ``x`` and LSQ's for ``scale``.
"""

from __future__ import annotations

from typing import Any

from rlx_core.errors import DTypeError
from rlx_core.ir import dtypes as dt
from rlx_core.ir.graph import Level, TensorType
from rlx_core.ir.ops.base import AttrSpec, OpDef, normalize_axis, require

T = TensorType

QUANT_DTYPES = ("i8", "u8", "i4", "i16", "i32")  # what quantize may produce
INT_BOUNDS = {"i4": (-8, 7), "i8": (-128, 127), "u8": (0, 255), "i16": (-32768, 32767),
              "i32": (-(2**31), 2**31 - 1)}


def qrange(dtype: object) -> tuple[int, int]:
    """(qmin, qmax) of an integer quantized dtype."""
    return INT_BOUNDS[dt.get(dtype).name]


def _params(op: str, x: T, scale: T, zp: T, axis: int) -> None:
    """scale f32 and zero_point i32, both () (per tensor) or (C,) with C = x.shape[axis]."""
    require(scale.dtype == dt.f32, op, f"scale must be f32, got {scale}", exc=DTypeError)
    require(zp.dtype == dt.i32, op, f"zero_point must be i32, got {zp}",
            hint="zero points are integers: pass them as i32", exc=DTypeError)
    require(scale.shape == zp.shape, op, f"scale {scale} and zero_point {zp} shapes differ")
    require(scale.rank <= 1, op, f"scale must be a scalar or a vector, got {scale}")
    if scale.rank == 1:
        ax = normalize_axis(op, axis, x.rank)
        require(scale.shape[0] == x.shape[ax], op,
                f"per-channel scale {scale} does not match axis {axis} of {x}",
                hint="one scale per channel: the length of the quantized axis")


def _quantize(ins: list[T], a: dict[str, Any]) -> T:
    x, scale, zp = ins
    require(x.dtype == dt.f32, "quantize", f"needs an f32 input, got {x}",
            hint="cast to f32 first (x.astype('f32'))", exc=DTypeError)
    _params("quantize", x, scale, zp, a["axis"])
    out = dt.get(a["dtype"])
    require(out.name in QUANT_DTYPES, "quantize",
            f"dtype must be one of {', '.join(QUANT_DTYPES)}, got {out}", exc=DTypeError)
    return T(out, x.shape)


def _dequantize(ins: list[T], a: dict[str, Any]) -> T:
    q, scale, zp = ins
    require(q.dtype.name in QUANT_DTYPES, "dequantize",
            f"needs an integer quantized input ({', '.join(QUANT_DTYPES)}), got {q}",
            exc=DTypeError)
    _params("dequantize", q, scale, zp, a["axis"])
    return T(dt.f32, q.shape)


def _requantize(ins: list[T], a: dict[str, Any]) -> T:
    acc = ins[0]
    require(acc.dtype == dt.i32, "requantize", f"needs an i32 accumulator, got {acc}",
            exc=DTypeError)
    mult = _multipliers("requantize", a)
    if len(mult) > 1:
        ax = normalize_axis("requantize", a["axis"], acc.rank)
        require(acc.shape[ax] == len(mult), "requantize",
                f"{len(mult)} per-channel multipliers for axis {a['axis']} of {acc}")
    return T(_requant_dtype("requantize", a, ("i8", "u8", "i16", "i4")), acc.shape)


def _multipliers(op: str, a: dict[str, Any]) -> tuple[int, ...]:
    """requantize's (multiplier, shift) attributes checked; returns the multipliers."""
    mult, shift = tuple(a["multiplier"]), tuple(a["shift"])
    require(len(mult) == len(shift) >= 1, op,
            f"multiplier ({len(mult)}) and shift ({len(shift)}) need one entry each per channel")
    require(all(0 <= m < 2**31 for m in mult), op, "multipliers must lie in [0, 2^31)",
            hint="rlx.quant.quantize_multiplier(real_scale) gives (multiplier, shift)")
    require(all(-31 <= s <= 30 for s in shift), op, "shifts must lie in [-31, 30]")
    return mult


def _requant_dtype(op: str, a: dict[str, Any], allowed: tuple[str, ...]) -> dt.DType:
    """requantize's output dtype (one of ``allowed``), its zero point in the dtype's range."""
    out = dt.get(a["dtype"])
    require(out.name in allowed, op, f"dtype must be {' or '.join(allowed)}, got {out}",
            exc=DTypeError)
    lo, hi = qrange(out)
    require(lo <= a["zero_point"] <= hi, op,
            f"zero_point {a['zero_point']} is outside {out}'s range [{lo}, {hi}]")
    return out


def _int_linear(ins: list[T], a: dict[str, Any]) -> T:
    x, w = ins[0], ins[1]
    for t, what in ((x, "input"), (w, "weight")):
        require(t.dtype in (dt.i8, dt.u8), "int_linear", f"{what} must be i8 or u8, got {t}",
                hint="quantize it first (rlx.quant.quantize)", exc=DTypeError)
    require(w.rank == 2, "int_linear", f"weight must be 2-D (out, in), got {w}")
    require(x.rank >= 1 and x.shape[-1] == w.shape[1], "int_linear",
            f"input {x} does not match weight {w}: last axis != in_features {w.shape[1]}",
            hint="the weight is (out_features, in_features), as in torch.nn.Linear")
    if len(ins) == 3:
        require(ins[2].dtype == dt.i32 and ins[2].shape == (w.shape[0],), "int_linear",
                f"bias {ins[2]} must be i32[{w.shape[0]}]", exc=DTypeError)
    for key, t in (("a_zero_point", x), ("b_zero_point", w)):
        lo, hi = qrange(t.dtype)
        require(lo <= a[key] <= hi, "int_linear", f"{key} {a[key]} is outside {t.dtype}'s range")
    return T(dt.i32, x.shape[:-1] + (w.shape[0],))


def _conv_out(size: int, k: int, s: int, p: int, d: int) -> int:
    out = (size + 2 * p - d * (k - 1) - 1) // s + 1
    require(out >= 1, "int_conv2d", f"window {k} (dilation {d}) does not fit input size "
            f"{size} + 2*{p}")
    return out


def _int_conv2d(ins: list[T], a: dict[str, Any]) -> T:
    x, w = ins[0], ins[1]
    for t, what in ((x, "input"), (w, "weight")):
        require(t.dtype in (dt.i8, dt.u8), "int_conv2d", f"{what} must be i8 or u8, got {t}",
                hint="quantize it first (rlx.quant.quantize)", exc=DTypeError)
    require(x.rank == 4 and w.rank == 4, "int_conv2d",
            f"needs x (N,C,H,W) and w (O,C/groups,KH,KW), got {x}, {w}")
    g = a["groups"]
    require(g >= 1 and x.shape[1] == w.shape[1] * g and w.shape[0] % g == 0, "int_conv2d",
            f"channels: input {x.shape[1]} != {w.shape[1]} * groups {g}",
            hint="the weight is (out, in / groups, KH, KW), as in torch.nn.Conv2d")
    if len(ins) == 3:
        require(ins[2].dtype == dt.i32 and ins[2].shape == (w.shape[0],), "int_conv2d",
                f"bias {ins[2]} must be i32[{w.shape[0]}]", exc=DTypeError)
    for key, t in (("a_zero_point", x), ("b_zero_point", w)):
        lo, hi = qrange(t.dtype)
        require(lo <= a[key] <= hi, "int_conv2d", f"{key} {a[key]} is outside {t.dtype}'s range")
    (sh, sw), (ph, pw), (dh, dw) = a["stride"], a["padding"], a["dilation"]
    require(min(sh, sw, dh, dw) >= 1 and min(ph, pw) >= 0, "int_conv2d",
            f"stride {a['stride']} and dilation {a['dilation']} must be >= 1, padding "
            f"{a['padding']} >= 0")
    oh = _conv_out(x.shape[2], w.shape[2], sh, ph, dh)
    ow = _conv_out(x.shape[3], w.shape[3], sw, pw, dw)
    return T(dt.i32, (x.shape[0], w.shape[0], oh, ow))


def _int4_linear(ins: list[T], a: dict[str, Any]) -> T:
    x, packed, scale = ins[:3]
    require(x.dtype == dt.f32, "int4_linear", f"needs an f32 input, got {x}", exc=DTypeError)
    require(packed.dtype == dt.u8 and packed.rank == 2, "int4_linear",
            f"packed weight must be u8 (out, in / 2), got {packed}", exc=DTypeError)
    n, k = packed.shape[0], packed.shape[1] * 2
    g = a["group"]
    require(g > 0 and g % 2 == 0 and k % g == 0, "int4_linear",
            f"group {g} does not divide the input dimension {k}",
            hint="rlx.quant.int4.quantize_int4 chooses a group that divides it")
    require(x.rank >= 1 and x.shape[-1] == k, "int4_linear",
            f"input {x} does not match the packed weight: last axis != in_features {k}")
    require(scale.dtype == dt.f32 and scale.shape == (n, k // g), "int4_linear",
            f"scale must be f32[{n},{k // g}], got {scale}")
    if len(ins) == 4:
        require(ins[3].dtype == dt.i8 and ins[3].shape == (n, k // g), "int4_linear",
                f"zero must be i8[{n},{k // g}], got {ins[3]}", exc=DTypeError)
    return T(dt.f32, x.shape[:-1] + (n,))


LINEAR_ACTS = ("none", "gelu")  # the activations dynamic/static_int_linear apply in the store


def _epilogue(op: str, ins: list[T], a: dict[str, Any]) -> list[T]:
    """Check the store's epilogue attributes (``act``; ``residual``: the last input, added
    after ``act``) and return the inputs without the residual."""
    require(a["act"] in LINEAR_ACTS, op, f"act must be one of {LINEAR_ACTS}, got {a['act']!r}")
    if not a["residual"]:
        return ins
    require(len(ins) >= 4, op, "residual=True needs the residual as the last input")
    x, w, r = ins[0], ins[1], ins[-1]
    out = T(dt.f32, x.shape[:-1] + (w.shape[0],)) if w.rank == 2 else None
    require(r == out, op, f"residual {r} must be {out}", exc=DTypeError)
    return ins[:-1]


def _int8_weight(op: str, x: T, w: T, x_dtype: dt.DType, ptq_fn: str) -> None:
    """The int8 linears' shared rule: ``x`` of ``x_dtype`` with last axis ``in``, an i8
    weight ``(out, in)`` (written by ``rlx.quant.ptq.<ptq_fn>``)."""
    ok = x.dtype == x_dtype if x_dtype != dt.i8 else x.dtype in (dt.i8, dt.u8)
    want = "i8 or u8" if x_dtype == dt.i8 else str(x_dtype)
    require(ok, op, f"needs an {want} input, got {x}", exc=DTypeError)
    require(w.dtype == dt.i8 and w.rank == 2, op, f"weight must be i8 (out, in), got {w}",
            hint=f"rlx.quant.ptq.{ptq_fn} quantizes the weight", exc=DTypeError)
    require(x.rank >= 1 and x.shape[-1] == w.shape[1], op,
            f"input {x} does not match weight {w}: last axis != in_features {w.shape[1]}",
            hint="the weight is (out_features, in_features), as in torch.nn.Linear")


def _dynamic_int_linear(ins: list[T], a: dict[str, Any]) -> T:
    op = "dynamic_int_linear"
    ins = _epilogue(op, ins, a)
    x, w, scale = ins[:3]
    _int8_weight(op, x, w, dt.f32, "quantize_dynamic")
    require(1 <= a["a_qmax"] <= 127, op, f"a_qmax must be in [1, 127], got {a['a_qmax']}")
    for t, what in zip(ins[2:], ("w_scale", "bias"), strict=False):
        require(t.dtype == dt.f32 and t.shape == (w.shape[0],), op,
                f"{what} must be f32[{w.shape[0]}], got {t}", exc=DTypeError)
    return T(dt.f32, x.shape[:-1] + (w.shape[0],))


def _static_codes(op: str, a: dict[str, Any]) -> None:
    """The fixed activation parameters of an f32 input quantized in the op: ``a_scale``,
    ``a_zero_point`` and the codes' range ``[a_qmin, a_qmax]``."""
    lo, hi, zp = a["a_qmin"], a["a_qmax"], a["a_zero_point"]
    require((-128 <= lo < hi <= 127) or (0 <= lo < hi <= 255), op,
            f"codes [{lo}, {hi}] must lie in i8's or u8's range",
            hint="the activation codes are int8: [-128, 127] or [0, 255] or narrower")
    require(lo <= zp <= hi, op, f"a_zero_point {zp} is outside the codes [{lo}, {hi}]")
    sc = a["a_scale"]
    require(sc > 0 and sc != float("inf"), op, f"a_scale must be finite and > 0, got {sc}")


def _static_int_linear(ins: list[T], a: dict[str, Any]) -> T:
    op = "static_int_linear"
    ins = _epilogue(op, ins, a)
    x, w, scale = ins[:3]
    _int8_weight(op, x, w, dt.f32, "quantize_static")
    _static_codes(op, a)
    require(scale.dtype == dt.f32 and scale.shape == (w.shape[0],), op,
            f"acc_scale must be f32[{w.shape[0]}], got {scale}", exc=DTypeError)
    if len(ins) == 4:
        require(ins[3].dtype == dt.i32 and ins[3].shape == (w.shape[0],), op,
                f"bias {ins[3]} must be i32[{w.shape[0]}]", exc=DTypeError)
    return T(dt.f32, x.shape[:-1] + (w.shape[0],))


def _requantized_int_linear(ins: list[T], a: dict[str, Any]) -> T:
    op = "requantized_int_linear"
    x, w = ins[0], ins[1]
    _int8_weight(op, x, w, dt.f32 if x.dtype == dt.f32 else dt.i8, "quantize_static")
    n = w.shape[0]
    if len(ins) == 3:
        require(ins[2].dtype == dt.i32 and ins[2].shape == (n,), op,
                f"bias {ins[2]} must be i32[{n}]", exc=DTypeError)
    if x.dtype == dt.f32:  # quantized first, as static_int_linear's input
        _static_codes(op, a)
    else:
        lo, hi = qrange(x.dtype)
        require(lo <= a["a_zero_point"] <= hi, op,
                f"a_zero_point {a['a_zero_point']} is outside {x.dtype}'s range")
    mult = _multipliers(op, a)
    require(len(mult) in (1, n), op,
            f"{len(mult)} multipliers for {n} output channels: one, or one per channel")
    out = _requant_dtype(op, a, ("i8", "u8"))
    lo, hi = qrange(out)
    require(lo <= a["qmin"] < a["qmax"] <= hi, op,
            f"the output codes [{a['qmin']}, {a['qmax']}] must lie in {out}'s range "
            f"[{lo}, {hi}]", hint="qmin/qmax narrow the requantized codes (a ReLU, 7 bits)")
    return T(out, x.shape[:-1] + (n,))


def _fake_quantize(ins: list[T], a: dict[str, Any]) -> T:
    x, scale, zp = ins
    require(x.dtype == dt.f32 and scale.dtype == dt.f32 and zp.dtype == dt.f32, "fake_quantize",
            f"x, scale and zero_point must be f32, got {x}, {scale}, {zp}", exc=DTypeError)
    require(scale.shape == zp.shape and scale.rank <= 1, "fake_quantize",
            f"scale {scale} and zero_point {zp} must be equal scalars or vectors")
    if scale.rank == 1:
        ax = normalize_axis("fake_quantize", a["axis"], x.rank)
        require(scale.shape[0] == x.shape[ax], "fake_quantize",
                f"per-channel scale {scale} does not match axis {a['axis']} of {x}")
    require(a["qmin"] < a["qmax"], "fake_quantize", f"qmin {a['qmin']} >= qmax {a['qmax']}")
    return x


def quant_defs() -> dict[str, OpDef]:
    hir = Level.HIR
    axis = AttrSpec("int", -1)
    t: dict[str, OpDef] = {}

    def add(name, arity, attrs, infer, doc):
        t[name] = OpDef(name, hir, "composite", arity, attrs, infer, doc)

    add("quantize", (3, 3), {"axis": axis, "dtype": AttrSpec("dtype", dt.i8)}, _quantize,
        "clamp(round_half_even(x / scale) + zero_point) to dtype; scale per tensor or along axis")
    add("dequantize", (3, 3), {"axis": axis}, _dequantize,
        "f32(q - zero_point) * scale; scale per tensor or along axis")
    add("requantize", (1, 1), {"multiplier": AttrSpec("ints"), "shift": AttrSpec("ints"),
                               "zero_point": AttrSpec("int", 0), "axis": axis,
                               "dtype": AttrSpec("dtype", dt.i8)}, _requantize,
        "i32 -> dtype: TFLite MultiplyByQuantizedMultiplier(acc, multiplier, shift) + zero_point, "
        "clamped; one (multiplier, shift) per tensor or per channel along axis")
    add("int_linear", (2, 3), {"a_zero_point": AttrSpec("int", 0),
                               "b_zero_point": AttrSpec("int", 0)}, _int_linear,
        "sum_k (x - a_zp) * (w - b_zp) in i32 (+ i32 bias); w is (out, in)")
    pair = lambda v: AttrSpec("ints", v)  # noqa: E731
    add("int_conv2d", (2, 3), {"stride": pair((1, 1)), "padding": pair((0, 0)),
                               "dilation": pair((1, 1)), "groups": AttrSpec("int", 1),
                               "a_zero_point": AttrSpec("int", 0),
                               "b_zero_point": AttrSpec("int", 0)}, _int_conv2d,
        "conv2d on integers: sum over the taps of (x - a_zp) * (w - b_zp) in i32 (+ i32 bias); "
        "NCHW input, OIHW weight; a padded tap is a_zp (adds nothing)")
    add("int4_linear", (3, 4), {"group": AttrSpec("int", 32)}, _int4_linear,
        "x @ W.T with W unpacked from int4 codes (two a byte, low nibble first; signed "
        "[-8, 7], or unsigned [0, 15] minus a per-group zero) times per-group scales")
    epi = {"act": AttrSpec("str", "none"), "residual": AttrSpec("bool", False)}
    add("dynamic_int_linear", (3, 5), {"a_qmax": AttrSpec("int", 127), **epi},
        _dynamic_int_linear,
        "x @ W.T in int8 with a per-row dynamic activation scale max|x_i| / a_qmax (127; 63: "
        "7-bit codes): quantize, int_linear, (f32(acc) * w_scale[j]) * s_i (+ bias[j]); then "
        "act (none, gelu) and + the residual (residual=True: the last input)")
    add("static_int_linear", (3, 5), {"a_scale": AttrSpec("float", 1.0),
                                      "a_zero_point": AttrSpec("int", 0),
                                      "a_qmin": AttrSpec("int", -128),
                                      "a_qmax": AttrSpec("int", 127), **epi},
        _static_int_linear,
        "x @ W.T in int8 with fixed activation parameters: q = clamp(round(x / a_scale) + "
        "a_zp, a_qmin, a_qmax), acc = (q - a_zp) @ W.T (+ i32 bias), f32(acc) * acc_scale[j]; "
        "then act (none, gelu) and + the residual (residual=True: the last input)")
    add("requantized_int_linear", (2, 3), {
        "a_zero_point": AttrSpec("int", 0), "multiplier": AttrSpec("ints"),
        "shift": AttrSpec("ints"), "zero_point": AttrSpec("int", 0),
        "dtype": AttrSpec("dtype", dt.i8), "qmin": AttrSpec("int", -128),
        "qmax": AttrSpec("int", 127), "a_scale": AttrSpec("float", 1.0),
        "a_qmin": AttrSpec("int", -128), "a_qmax": AttrSpec("int", 127)},
        _requantized_int_linear,
        "int_linear (w i8 (out, in), b_zero_point 0) then requantize along the last axis "
        "(one (multiplier, shift) or one per output channel) to dtype, clamped to [qmin, "
        "qmax]: a static int8 layer whose int8 output feeds the next one; an f32 x is "
        "quantized first as static_int_linear's (a_scale, a_zero_point, [a_qmin, a_qmax])")
    add("fake_quantize", (3, 3), {"qmin": AttrSpec("int", -128), "qmax": AttrSpec("int", 127),
                                  "axis": axis}, _fake_quantize,
        "(clamp(round(x / scale) + zp, qmin, qmax) - zp) * scale in f32 (QAT; STE/LSQ gradient)")
    return t
