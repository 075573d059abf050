"""``requantized_int_linear``: a static int8 layer whose int8 output feeds the next one.

quantize_static chains two quantized linears through ``int_linear -> requantize [-> max(zp):
a ReLU] [-> min / max: 7-bit codes]`` (the first layer's f32 input quantized before it);
passes/requantized_int_linear.py folds that chain (and that quantize) where
the CPU claims the op, and the CPU's kernel (cpu/igemm_packed.py: the packed GEMM on the codes
in place, requantize in its store, int8 codes out) equals the unfused chain and the numpy
reference bit for bit: on the tile this CPU picks, on the portable one, without prepacking,
for u8 and i8 codes, per-tensor and per-channel multipliers, every shift."""

from __future__ import annotations

import numpy as np
import pytest

import rlx_core as rlx
from rlx_core.errors import DTypeError, RlxError
from rlx_core.frontend.tracer import spec
from rlx_core.ir import dtypes as dt
from rlx_core.ir.builder import Builder, NameGen
from rlx_core.ir.graph import Graph, Level, TensorType, Value, ValueKind
from rlx_core.quant import ptq
from tests.quant.portable_tile import assert_passes_on_portable_tile

OP = "requantized_int_linear"
# (weight bits, activation bits, activation dtype, scheme)
BITS = ((8, 8, "u8", "asymmetric"), (7, 7, "u8", "asymmetric"), (8, 8, "i8", "symmetric"))


@pytest.fixture
def cpu():
    ok, why = rlx.api.get_target("cpu").available()
    if not ok:
        pytest.skip(f"cpu: {why}")


def _mlp(bits, rows=37, dims=(40, 64, 33, 10), seed=0, per_channel=True):
    """A relu MLP (K not a multiple of 4, N not of 16, rows not of 4) PTQ'd statically."""
    rng = np.random.default_rng(seed)
    ws = [(rng.standard_normal((o, i)) * 0.2).astype(np.float32)
          for i, o in zip(dims[:-1], dims[1:], strict=True)]
    bs = [(rng.standard_normal(o) * 0.1).astype(np.float32) for o in dims[1:]]

    def f(x):
        for i, (w, b) in enumerate(zip(ws, bs, strict=True)):
            x = rlx.nn.linear(x, w, b if i != 1 else None)  # one layer without a bias
            x = rlx.nn.relu(x) if i < len(ws) - 1 else x
        return x

    g = rlx.trace(f, spec((rows, dims[0]), "f32"))
    cal = [(rng.standard_normal((rows, dims[0])) + 0.3).astype(np.float32) for _ in range(2)]
    q = ptq.quantize_static(g, data=cal, target="numpy", method="minmax",
                            per_channel=per_channel, weight_bits=bits[0],
                            activation_bits=bits[1], activation_dtype=bits[2],
                            activation_scheme=bits[3])
    x = (rng.standard_normal((rows, dims[0])) * 2).astype(np.float32)
    return q, x


def cases(bits_list=BITS, per_channel=True) -> None:
    """Each MLP on the CPU: both chained layers folded (no requantize, no elementwise clamp
    left) and the logits equal to the numpy target's (the unfused chain) bit for bit."""
    for bits in bits_list:
        q, x = _mlp(bits, per_channel=per_channel)
        assert [lay.requantized for lay in q.layers] == [True, True, False]
        exe = rlx.compile(q.graph, target="cpu")
        impls = [k["impl"] for k in exe.program.info["kernels"].values()]
        assert impls.count("rlx-igemm-requant") == 2, impls
        assert not any(n.op in ("requantize", "quantize") for n in exe.mir.nodes)
        first = next(n for n in exe.mir.nodes if n.op == OP)  # its f32 input quantized inside
        assert exe.mir.values()[first.inputs[0]].type.dtype == dt.f32
        want = np.asarray(rlx.compile(q.graph, target="numpy")(x))
        assert np.array_equal(np.asarray(exe(x)), want), bits


def test_cpu_folds_the_chain_and_matches(cpu):
    cases()


def test_per_tensor_multiplier_without_prepacking_matches(cpu, monkeypatch):
    monkeypatch.setenv("RLX_NO_PREPACK", "1")  # the row-major dot kernels, then the store
    cases(BITS[2:], per_channel=False)


def test_cpu_portable_tile_matches(cpu):
    """RLX_IGEMM_ISA=c in a process of its own (the kernel reads it once per program): the
    portable tile and the scalar requantize."""
    assert_passes_on_portable_tile("import tests.quant.test_requantized_int_linear as t; t.cases(t.BITS[1:2]); t.extremes()")


def _op_graph(rows, k, n, a_dtype, attrs, bias=True, seed=0):
    """One requantized_int_linear on an input and parameter weight (and bias)."""
    rng = np.random.default_rng(seed)
    lo, hi = (0, 255) if a_dtype == "u8" else (-128, 127)
    x = Value("x", TensorType(dt.get(a_dtype), (rows, k)), ValueKind.INPUT)
    w = Value("w", TensorType(dt.i8, (n, k)), ValueKind.PARAM)
    data = {"w": rng.integers(-127, 128, (n, k)).astype(np.int8)}
    ins = [x, w]
    if bias:
        ins.append(Value("b", TensorType(dt.i32, (n,)), ValueKind.PARAM))
        data["b"] = rng.integers(-(2**31), 2**31 - 1, n).astype(np.int32)
    b = Builder(NameGen({"x": 0, "w": 0, "b": 0}))
    y = b.emit(OP, ins, attrs)
    g = Graph("rq", Level.HIR, (x,), tuple(ins[1:]), tuple(b.nodes), (y.name,),
              param_data=data)
    xs = rng.integers(lo, hi + 1, (rows, k)).astype(dt.to_numpy_name(dt.get(a_dtype)))
    return g, xs


def extremes() -> None:
    """Accumulators across i32 (random i32 biases wrap them), every shift in [-31, 30] and
    multipliers up to 2^31 - 1 per channel, u8 and i8 codes out with a narrowed range: the
    CPU's store equals the numpy reference."""
    rng = np.random.default_rng(5)
    n = 62  # three full 16-column panels and a partial one
    shifts = np.concatenate([np.arange(-31, 31), [0, -1]])[:n]
    mults = rng.integers(0, 2**31, n)
    mults[:4] = (0, 1, 2**30, 2**31 - 1)
    for a_dtype, out, zp, qmin, qmax in (("u8", "u8", 3, 3, 200), ("i8", "i8", -5, -128, 127)):
        attrs = {"a_zero_point": 7 if a_dtype == "u8" else -2,
                 "multiplier": tuple(int(m) for m in mults), "shift": tuple(int(s) for s in shifts),
                 "zero_point": zp, "dtype": dt.get(out), "qmin": qmin, "qmax": qmax}
        g, xs = _op_graph(9, 37, n, a_dtype, attrs)
        want = np.asarray(rlx.compile(g, target="numpy")(xs))
        exe = rlx.compile(g, target="cpu")
        assert [k["impl"] for k in exe.program.info["kernels"].values()] == ["rlx-igemm-requant"]
        assert np.array_equal(np.asarray(exe(xs)), want), (a_dtype, out)


def test_extreme_requantize_parameters_match(cpu):
    extremes()


def test_decomposition_is_the_chain():
    """On a target that runs the MIR primitives (the numpy reference's every-op check is in
    tests/dispatch/test_decompositions.py), the op is the explicit chain."""
    attrs = {"a_zero_point": 4, "multiplier": (1 << 30,), "shift": (-7,), "zero_point": 2,
             "dtype": dt.u8, "qmin": 2, "qmax": 127}
    g, xs = _op_graph(5, 9, 6, "u8", attrs, bias=False)
    from rlx_core.targets.numpy_ref.quant_semantics import int_linear, requantize

    acc = int_linear({"a_zero_point": 4, "b_zero_point": 0}, [xs, g.param_data["w"]])
    want = np.clip(requantize(acc, {**attrs, "axis": -1}), 2, 127)
    assert np.array_equal(np.asarray(rlx.compile(g, target="numpy")(xs)), want)


def test_bad_attributes_are_typed_errors():
    b = Builder(NameGen({}))
    x = Value("x", TensorType(dt.u8, (2, 4)), ValueKind.INPUT)
    xi = Value("xi", TensorType(dt.i32, (2, 4)), ValueKind.INPUT)
    xf = Value("xf", TensorType(dt.f32, (2, 4)), ValueKind.INPUT)
    w = Value("w", TensorType(dt.i8, (3, 4)), ValueKind.PARAM)
    ok = {"multiplier": (1 << 30,), "shift": (0,), "dtype": dt.u8, "qmin": 0, "qmax": 255}
    with pytest.raises(DTypeError, match="i8 or u8 input"):
        b.emit(OP, [xi, w], ok)
    with pytest.raises(RlxError, match="a_scale must be finite"):  # an f32 x's codes
        b.emit(OP, [xf, w], {**ok, "a_scale": 0.0})
    with pytest.raises(RlxError, match="multipliers for 3 output channels"):
        b.emit(OP, [x, w], {**ok, "multiplier": (1, 2), "shift": (0, 0)})
    with pytest.raises(RlxError, match="output codes"):
        b.emit(OP, [x, w], {**ok, "qmin": 0, "qmax": 300})
    with pytest.raises(DTypeError, match="dtype must be"):
        b.emit(OP, [x, w], {**ok, "dtype": dt.i16, "qmin": 0, "qmax": 5})
