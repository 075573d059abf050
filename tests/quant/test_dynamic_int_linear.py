"""``dynamic_int_linear``: the per-token dynamic int8 linear of rlx.quant.ptq as one op.

Its reference rule is the chain quantize_dynamic(granularity="token") writes (checked here
bit for bit against that chain on the numpy target); passes/dynamic_int_linear.py folds the
chain into the op where the CPU claims it, and the CPU's kernel (rows quantized per work item,
the packed int8 GEMM, dequantize and bias in the store; cpu/igemm_packed.py) matches the
reference on the tile this CPU picks, on the portable one, and without prepacking, with 8-bit
and with 7-bit codes (``weight_bits`` / ``activation_bits``: the AVX2 w77 tile)."""

from __future__ import annotations

import numpy as np
import pytest

import rlx_core as rlx
from rlx_core.errors import DTypeError
from rlx_core.frontend.tracer import spec
from rlx_core.quant import ptq
from rlx_core.targets.numpy_ref.quant_semantics import dynamic_int_linear
from tests.quant.portable_tile import assert_passes_on_portable_tile

# (input shape, out features, bias): rows around the 4-row tile and the 32-row work item,
# K around the 4-byte group, N around the 16-column panel and the 128-column work item
SHAPES = (((1, 8), 16, True), ((5, 7), 3, False), ((2, 19, 33), 130, True),
          ((37, 64), 17, True), ((1, 0, 12), 5, True))


@pytest.fixture
def cpu():
    ok, why = rlx.api.get_target("cpu").available()
    if not ok:
        pytest.skip(f"cpu: {why}")


# (weight bits, activation bits): exact int8, 7-bit codes (the w77 tile on AVX2), 7-bit
# weights with 8-bit activations (the w7 tile)
BITS = ((8, 8), (7, 7), (7, 8), (6, 7), (6, 8))  # 6-bit weights: the w66 / w77 tiles


def _model(shape, n, bias, seed=0, bits=(8, 8)):
    rng = np.random.default_rng(seed)
    k = shape[-1]
    w = rng.standard_normal((n, k)).astype(np.float32)
    b = rng.standard_normal(n).astype(np.float32) if bias else None
    g = rlx.trace(lambda x: rlx.nn.linear(x, w, b), spec(shape, "f32"))
    q = ptq.quantize_dynamic(g, granularity="token", weight_bits=bits[0],
                             activation_bits=bits[1])
    x = rng.standard_normal(shape).astype(np.float32) * 3
    if x.size:
        x.reshape(-1, k)[0] = 0.0  # a zero row: its scale is 1e-30 / 127
        x.reshape(-1, k)[-1, 0] *= 40  # a row with an outlier
    return q, x, b


def _reference(q, x, b, bits=(8, 8)):
    wq = next(v for k, v in q.graph.param_data.items() if k.endswith(".q"))
    ws = next(v for k, v in q.graph.param_data.items() if k.endswith(".scale"))
    assert np.abs(wq.astype(np.int32)).max(initial=0) <= 2 ** (bits[0] - 1) - 1
    return dynamic_int_linear([x, wq, ws] + ([b] if b is not None else []),
                              2 ** (bits[1] - 1) - 1)


def cases(shapes=SHAPES, bits_list=BITS[:2]) -> None:
    """Each shape on the CPU: the pass fired (one kernel, the fused one, with the chain's code
    width) and the result is the reference's up to the f32 rounding of the epilogue (a fused
    multiply-add may round once)."""
    for (shape, n, bias), bits in ((s, bt) for s in shapes for bt in bits_list):
        q, x, b = _model(shape, n, bias, bits=bits)
        exe = rlx.compile(q.graph, target="cpu")
        impls = {k["impl"] for k in exe.program.info["kernels"].values()}
        assert "rlx-igemm-dynamic" in impls and "generated-elementwise" not in impls, impls
        src = "".join(exe.trace.kernels.values())
        assert f", {2 ** (bits[1] - 1) - 1}, " in src.split("rlx_igd_block(i0")[1].split(";")[0]
        want = _reference(q, x, b, bits)
        got = np.asarray(exe(x))
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * (np.abs(want).max(initial=0) + 1))


@pytest.mark.parametrize("bits", BITS)
@pytest.mark.parametrize("shape,n,bias", SHAPES)
def test_reference_is_the_ptq_chain_bit_for_bit(shape, n, bias, bits):
    q, x, b = _model(shape, n, bias, bits=bits)
    got = np.asarray(rlx.compile(q.graph, target="numpy")(x))
    assert np.array_equal(got, _reference(q, x, b, bits))


def test_cpu_folds_the_chain_and_matches(cpu):
    cases()
    cases(SHAPES[2:4], BITS[2:])


def test_default_code_width_follows_the_cpu(monkeypatch):
    """7-bit codes by default only for per-token graphs on AVX2 without VNNI; the
    RLX_INT8_BITS override; any other width is a typed error."""
    from rlx_core.errors import RlxError
    from rlx_core.targets.cpu.igemm import isa_here

    monkeypatch.delenv("RLX_INT8_BITS", raising=False)
    assert ptq.fast_bits("token") == (7 if isa_here() == "avx2" else 8)
    assert ptq.fast_bits("tensor") == 8 and ptq.fast_bits("token", "numpy") == 8
    monkeypatch.setenv("RLX_INT8_BITS", "8")
    assert ptq.fast_bits("token") == 8
    g = rlx.trace(lambda x: rlx.nn.linear(x, np.ones((2, 3), np.float32)), spec((1, 3), "f32"))
    with pytest.raises(RlxError, match="8, 7 or 6 bits"):
        ptq.quantize_dynamic(g, granularity="token", weight_bits=5)
    with pytest.raises(RlxError, match="8 or 7 bits"):
        ptq.quantize_dynamic(g, granularity="token", activation_bits=6)


def test_cpu_without_prepacking_matches(cpu, monkeypatch):
    monkeypatch.setenv("RLX_NO_PREPACK", "1")  # the row-major dot kernels
    for bits in BITS[:2]:
        q, x, b = _model((2, 19, 33), 130, True, bits=bits)
        exe = rlx.compile(q.graph, target="cpu")
        assert exe.program.info["prepacked"] == []
        np.testing.assert_allclose(np.asarray(exe(x)), _reference(q, x, b, bits), rtol=1e-5,
                                   atol=1e-4)


def test_cpu_portable_tile_matches(cpu):
    """RLX_IGEMM_ISA=c in a process of its own (the kernel reads it once per program)."""
    assert_passes_on_portable_tile("import tests.quant.test_dynamic_int_linear as t; "
                                   "t.cases(t.SHAPES[2:4], t.BITS)")


def test_nan_row_gives_nan_outputs_on_cpu(cpu):
    q, x, b = _model((5, 7), 3, False)  # a shape cases() compiled already
    x[2, 3] = np.nan
    got = np.asarray(rlx.compile(q.graph, target="cpu")(x))
    want = _reference(q, x, b)
    assert np.isnan(got[2]).all() and np.isnan(want[2]).all()
    np.testing.assert_allclose(np.delete(got, 2, 0), np.delete(want, 2, 0), rtol=1e-5, atol=1e-4)


def test_per_tensor_chain_is_left_alone(cpu):
    """granularity="tensor" (one scale per call) is not this op: the chain stays as written."""
    rng = np.random.default_rng(1)
    w = rng.standard_normal((6, 8)).astype(np.float32)
    g = rlx.trace(lambda x: rlx.nn.linear(x, w), spec((3, 8), "f32"))
    exe = rlx.compile(ptq.quantize_dynamic(g, granularity="tensor").graph, target="cpu")
    impls = {k["impl"] for k in exe.program.info["kernels"].values()}
    assert "rlx-igemm-dynamic" not in impls and "rlx-igemm-packed" in impls


def test_shape_rule_rejects_a_float_weight():
    from rlx_core.ir import dtypes as dt
    from rlx_core.ir.builder import Builder, NameGen
    from rlx_core.ir.graph import TensorType, Value, ValueKind

    b = Builder(NameGen({}))
    x = Value("x", TensorType(dt.f32, (2, 4)), ValueKind.INPUT)
    w = Value("w", TensorType(dt.f32, (3, 4)), ValueKind.PARAM)
    s = Value("s", TensorType(dt.f32, (3,)), ValueKind.PARAM)
    with pytest.raises(DTypeError, match="weight must be i8"):
        b.emit("dynamic_int_linear", [x, w, s])
