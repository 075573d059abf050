"""The quantization ops: hand-computed values, the requantization convention bit for bit
(TFLite's reference C transcribed scalar by scalar), and every executing target against the
numpy reference."""

from __future__ import annotations

import numpy as np
import pytest

import rlx_core as rlx
from rlx_core import quant as Q
from rlx_core.targets.numpy_ref import quant_semantics as ref

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1


# ---- TFLite's reference C (fixedpoint.h / MultiplyByQuantizedMultiplier), one scalar at a time

def _c_div(a: int, d: int) -> int:
    q = abs(a) // abs(d)
    return q if (a >= 0) == (d > 0) else -q


def srdhm(a: int, b: int) -> int:
    if a == b == INT32_MIN:
        return INT32_MAX
    ab = a * b
    nudge = (1 << 30) if ab >= 0 else 1 - (1 << 30)
    return _c_div(ab + nudge, 1 << 31)


def rdbpot(x: int, exponent: int) -> int:
    mask = (1 << exponent) - 1
    remainder = x & mask
    threshold = (mask >> 1) + (1 if x < 0 else 0)
    return (x >> exponent) + (1 if remainder > threshold else 0)


def tflite_mbqm(x: int, multiplier: int, shift: int) -> int:
    left, right = max(shift, 0), max(-shift, 0)
    xs = ((x << left) + 2**31) % 2**32 - 2**31  # int32 product (wraps)
    return rdbpot(srdhm(xs, multiplier), right)


def tflite_requant(acc, multiplier, shift, zp, lo, hi):
    return min(max(tflite_mbqm(int(acc), multiplier, shift) + zp, lo), hi)


def _trace_run(fn, args, target):
    exe = rlx.compile(fn, *args, target=target)
    return exe(*args)


TARGETS = ["numpy", "cpu"]


@pytest.fixture(params=TARGETS)
def target(request):
    ok, why = rlx.api.get_target(request.param).available()
    if not ok:
        pytest.skip(f"{request.param}: {why}")
    return request.param


# ---- host-side parameters --------------------------------------------------------------------

def test_quantize_multiplier_hand_values():
    assert Q.quantize_multiplier(0.5) == (1 << 30, 0)
    assert Q.quantize_multiplier(0.25) == (1 << 30, -1)
    assert Q.quantize_multiplier(1.0) == (1 << 30, 1)
    m, s = Q.quantize_multiplier(0.003)
    assert 2**30 <= m < 2**31 and abs(m * 2.0 ** (s - 31) - 0.003) < 1e-12
    assert Q.quantize_multiplier(0.0) == (0, 0)
    with pytest.raises(Q.QuantConfigError):
        Q.quantize_multiplier(-1.0)


def test_qparams_from_range_hand_values():
    p = Q.qparams_from_range(-2.0, 1.0, "i8", "symmetric")
    assert float(p.scale) == np.float32(2.0 / 127) and int(p.zero_point) == 0
    p = Q.qparams_from_range(-1.0, 3.0, "u8", "asymmetric")
    assert float(p.scale) == np.float32(4.0 / 255)
    assert int(p.zero_point) == round(1.0 / (4.0 / 255))  # 64: zero maps to 64
    p = Q.qparams_from_range(0.5, 2.0, "i8", "asymmetric")  # the range widens to hold 0
    assert float(p.scale) == np.float32(2.0 / 255) and int(p.zero_point) == -128
    p = Q.qparams_from_range(np.array([-1.0, 0.0]), np.array([4.0, 0.0]), "i8", axis=0)
    assert p.scale.tolist() == [np.float32(4.0 / 127), 1.0]  # an all-zero channel gets scale 1
    with pytest.raises(Q.QuantConfigError):
        Q.qparams_from_range(0, 1, "f32")


# ---- requantization: the convention, bit for bit ---------------------------------------------

def _accs(rng, n):
    edge = np.array([0, 1, -1, 2, -2, 3, -3, INT32_MIN, INT32_MAX, INT32_MIN + 1, 1 << 30,
                     -(1 << 30), 12345, -12345], np.int64)
    return np.concatenate([edge, rng.integers(INT32_MIN, INT32_MAX, n, endpoint=True),
                           rng.integers(-70000, 70000, n)]).astype(np.int32)


@pytest.mark.parametrize("real", [0.5, 0.25, 0.0017, 1.0 / 3, 0.75, 2.0, 7.3, 1e-9, 0.999999])
def test_multiply_by_quantized_multiplier_matches_tflite(real):
    rng = np.random.default_rng(1)
    acc = _accs(rng, 300)
    m, s = Q.quantize_multiplier(real)
    got = ref.multiply_by_quantized_multiplier(acc, m, s)
    want = [tflite_mbqm(int(a), m, s) for a in acc]
    assert got.tolist() == want


def test_rounding_is_tflites_double_rounding():
    # multiplier 2^30 with shift -1 is an exact 1/4: 2 -> 0.5 -> 1 and -2 -> -1 (ties away from
    # zero), 6 -> 2; but 1 -> 0.25 rounds twice (SRDHM's 0.5 up to 1, then 1/2 up to 1), and -1
    # does not (SRDHM's nudge for negatives truncates -0.5 to 0): TFLite's exact behaviour
    m, s = Q.quantize_multiplier(0.25)
    got = ref.multiply_by_quantized_multiplier(np.array([2, -2, 6, -6, 1, -1]), m, s)
    assert got.tolist() == [1, -1, 2, -2, 1, 0]
    assert got.tolist() == [tflite_mbqm(v, m, s) for v in (2, -2, 6, -6, 1, -1)]


def _requant(m, s, zp, dtype, axis):
    return lambda a: Q.requantize(a, m, s, zp, dtype, axis=axis)


def _qdq(s, z, dtype):
    def f(v):
        q = Q.quantize(v, s, z, dtype, axis=1)
        return q, Q.dequantize(q, s, z, axis=1)

    return f


def test_requantize_on_every_target_matches_tflite(target):
    rng = np.random.default_rng(2)
    acc = _accs(rng, 200).reshape(-1, 2)[:, :]
    acc = np.concatenate([acc, acc[:, :1]], axis=1)  # (N, 3): three channels
    reals = [0.0031, 1.7, 0.5]
    ms, ss = zip(*(Q.quantize_multiplier(r) for r in reals), strict=True)
    for dtype, zp, lo, hi in (("i8", -3, -128, 127), ("u8", 128, 0, 255)):
        got_t = _trace_run(_requant(ms[0], ss[0], zp, dtype, -1), [acc], target)
        got_c = _trace_run(_requant(ms, ss, zp, dtype, 1), [acc], target)
        want_t = [[tflite_requant(a, ms[0], ss[0], zp, lo, hi) for a in row] for row in acc]
        want_c = [[tflite_requant(a, ms[j], ss[j], zp, lo, hi) for j, a in enumerate(row)]
                  for row in acc]
        assert got_t.tolist() == want_t and got_c.tolist() == want_c


# ---- quantize / dequantize ---------------------------------------------------------------------

def test_quantize_hand_values(target):
    x = np.array([0.0, 0.05, 0.15, -0.25, 0.26, 100.0, -100.0, 1.0], np.float32)

    def f(v):
        q = Q.quantize(v, 0.1, 3, "i8")
        return q, Q.dequantize(q, 0.1, 3)

    q, d = _trace_run(f, [x], target)
    # x / 0.1 in f32: 0.5 -> 0 (half to even), 1.5 -> 2, -2.5 -> -2, 2.6 -> 3; then + 3, clamp
    assert q.tolist() == [3, 3, 5, 1, 6, 127, -128, 13]
    assert d.tolist() == ((q.astype(np.int32) - 3).astype(np.float32) * np.float32(0.1)).tolist()


def test_quantize_per_channel_every_target_matches_reference(target):
    rng = np.random.default_rng(3)
    x = (rng.normal(size=(6, 5)) * 4).astype(np.float32)
    x[0, :] = np.float32([0.25, 0.75, -0.25, 1.25, 2.5])  # exact ties under scale 0.5
    s = np.float32([0.5, 0.5, 0.03, 0.2, 0.5])
    for dtype, z in (("i8", np.int32([0, 2, -5, 0, 1])), ("u8", np.int32([128, 0, 17, 255, 3]))):
        q, d = _trace_run(_qdq(s, z, dtype), [x], target)
        want = ref.quantize(x, s, z, 1, dtype)
        assert q.tolist() == want.tolist()
        assert np.array_equal(d, ref.dequantize(want, s, z, 1))


# ---- integer matmul ------------------------------------------------------------------------------

@pytest.mark.parametrize("xdt,xzp,wzp", [("i8", 0, 0), ("u8", 128, 0), ("i8", -5, 3),
                                         ("u8", 7, 0)])
def test_int_linear_decomposed_matches_formula(xdt, xzp, wzp):
    # the numpy target runs the decomposition; the CPU's own kernel: test_igemm.py
    target = "numpy"
    rng = np.random.default_rng(4)
    info = np.iinfo(np.dtype({"i8": "int8", "u8": "uint8"}[xdt]))
    for m, k, n in ((1, 37, 5), (7, 64, 33), (3, 300, 9)):
        x = rng.integers(info.min, info.max, (m, k), endpoint=True).astype(info.dtype)
        w = rng.integers(-128, 127, (n, k), endpoint=True).astype(np.int8)
        bias = rng.integers(-1000, 1000, n).astype(np.int32)

        def f(a, b, c):
            return Q.int_linear(a, b, c, xzp, wzp)

        got = _trace_run(f, [x, w, bias], target)
        want = (x.astype(np.int64) - xzp) @ (w.astype(np.int64) - wzp).T + bias
        assert got.dtype == np.int32 and got.tolist() == want.tolist()


def test_bad_quant_op_inputs_are_typed():
    x = np.zeros((2, 3), np.float32)
    with pytest.raises(rlx.ShapeError):  # a per-channel scale of the wrong length
        rlx.compile(lambda v: Q.quantize(v, np.float32([1, 2]), np.int32([0, 0]), axis=1), x)
    with pytest.raises(rlx.DTypeError):  # int_linear wants quantized integers
        rlx.compile(lambda v: Q.int_linear(v, np.zeros((4, 3), np.float32)), x)
    with pytest.raises(rlx.ShapeError):  # a multiplier out of Q31
        rlx.compile(lambda v: Q.requantize(v, 2**31, 0), np.zeros(3, np.int32))


def test_plain_python_scales_zero_points_and_biases_trace_without_numpy(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Pyodide has no numpy: a Python scale, zero point or bias list becomes a constant of the
    op's dtype without importing it (was a raw ImportError from quant/ops.py's _param)."""
    import sys

    def f(x, w):
        q = Q.quantize(x, 0.05, 3, dtype="u8")
        acc = Q.int_linear(q, w, [1, -2], x_zero_point=3)
        return Q.dequantize(acc, [0.01, 0.02], 0, axis=1)

    monkeypatch.setitem(sys.modules, "numpy", None)  # any `import numpy` now raises
    hir = rlx.trace(f, rlx.spec((4, 3)), rlx.spec((2, 3), "i8"))
    monkeypatch.undo()
    consts = {n.out.type.shape: n for n in hir.nodes if n.op == "constant"}
    assert consts[(2,)].attr("dtype").name in ("i32", "f32")
    x = np.linspace(-1, 1, 12, dtype=np.float32).reshape(4, 3)
    w = np.array([[1, -2, 3], [-4, 5, -6]], np.int8)
    got = rlx.compile(hir, x, w, target="numpy")(x, w)
    qx = np.clip(np.round(x / 0.05) + 3, 0, 255).astype(np.int32)
    acc = (qx - 3) @ w.astype(np.int32).T + np.array([1, -2])
    np.testing.assert_allclose(got, acc * np.array([0.01, 0.02], np.float32), rtol=1e-6)
