"""``static_int_linear``: a static PTQ linear (fixed activation parameters) as one op.

Its reference rule is the chain rlx.quant.ptq.quantize_static writes (quantize [-> the 7-bit
clamp] -> int_linear -> dequantize; checked here bit for bit against that chain on the numpy
target); passes/static_int_linear.py folds the chain where the CPU claims the op, and the
CPU's kernel (rows quantized per work item, the packed int8 GEMM, dequantize in the store;
cpu/igemm_packed.py) equals the reference bit for bit on the tile this CPU picks, on the
portable one and without prepacking, with 8-bit and 7-bit codes (the AVX2 w7 / w77 tiles),
u8 asymmetric and i8 symmetric activations."""

from __future__ import annotations

import numpy as np
import pytest

import rlx_core as rlx
from rlx_core.errors import DTypeError, ShapeError
from rlx_core.frontend.tracer import spec
from rlx_core.quant import ptq
from rlx_core.targets.numpy_ref.quant_semantics import static_int_linear
from tests.quant.portable_tile import assert_passes_on_portable_tile

# (input shape, out features, bias): rows around the 4-row tile and the 32-row work item,
# K around the 4-byte group and the 8-float quantize step, N around the 16-column panel
SHAPES = (((1, 8), 16, True), ((5, 7), 3, False), ((2, 19, 33), 130, True),
          ((37, 64), 17, True), ((3, 1), 5, True))
# (weight bits, activation bits, activation dtype): u8 asymmetric (quantize_static's
# default), i8 symmetric; 7-bit codes take the w77 / w7 tiles on AVX2, 6-bit weights the
# w77 pairing with 8-bit activations and w66 with 7-bit ones
BITS = ((8, 8, "u8"), (7, 7, "u8"), (7, 8, "u8"), (8, 7, "u8"), (8, 8, "i8"), (7, 7, "i8"),
        (6, 8, "u8"), (6, 7, "u8"))


@pytest.fixture
def cpu():
    ok, why = rlx.api.get_target("cpu").available()
    if not ok:
        pytest.skip(f"cpu: {why}")


def _model(shapes=SHAPES, seed=0, bits=(8, 8, "u8")):
    """One graph with a linear per shape (one compile for them all), quantized by
    quantize_static with ``bits``, and inputs beyond the calibrated ranges (clamped), with
    infinities."""
    rng = np.random.default_rng(seed)
    ws = [rng.standard_normal((n, s[-1])).astype(np.float32) for s, n, _ in shapes]
    bs = [rng.standard_normal(n).astype(np.float32) if b else None for _, n, b in shapes]

    def f(*xs):
        return tuple(rlx.nn.linear(x, w, b) for x, w, b in zip(xs, ws, bs, strict=True))

    g = rlx.trace(f, *[spec(s, "f32") for s, _, _ in shapes])
    cal = [tuple((rng.standard_normal(s) + 0.5).astype(np.float32) for s, _, _ in shapes)
           for _ in range(2)]
    scheme = "asymmetric" if bits[2] == "u8" else "symmetric"
    q = ptq.quantize_static(g, data=cal, target="numpy", method="minmax",
                            weight_bits=bits[0], activation_bits=bits[1],
                            activation_dtype=bits[2], activation_scheme=scheme)
    xs = []
    for s, _, _ in shapes:
        x = (rng.standard_normal(s) * 3).astype(np.float32)
        x.reshape(-1, s[-1])[0, 0] = np.inf
        x.reshape(-1, s[-1])[-1, -1] = -np.inf
        xs.append(x)
    return q, xs


def _reference(q, xs):
    """The op's rule on each layer's parameters (read from the explicit graph's nodes)."""
    g = q.graph
    prod = g.producers()
    consts = {n.name: n.attr("value") for n in g.nodes if n.op == "constant"}
    outs = []
    for out, x, layer in zip(g.outputs, xs, q.layers, strict=True):
        deq = prod[out]
        lin = prod[deq.inputs[0]]
        quant = prod[lin.inputs[0]]
        while quant.op != "quantize":  # the 7-bit clamps
            quant = prod[quant.inputs[0]]
        lo, hi = layer.input.qrange
        args = [x, g.param_data[lin.inputs[1]], np.asarray(consts[deq.inputs[1]], np.float32)]
        args += [g.param_data[lin.inputs[2]]] if len(lin.inputs) == 3 else []
        outs.append(static_int_linear(args, {
            "a_scale": float(consts[quant.inputs[1]]), "a_zero_point": int(
                consts[quant.inputs[2]]), "a_qmin": lo, "a_qmax": hi}))
    return outs


def _same(got, want):
    got = got if isinstance(got, tuple) else (got,)
    assert len(got) == len(want)
    for a, b in zip(got, want, strict=True):
        assert np.array_equal(np.asarray(a), b)


@pytest.mark.parametrize("bits", BITS)
def test_reference_is_the_ptq_chain_bit_for_bit(bits):
    q, xs = _model(bits=bits)
    for layer in q.layers:
        lo, hi = layer.input.qrange
        assert hi - lo == (127 if bits[1] == 7 else 255)
        wq = q.graph.param_data[layer.weight + ".q"]
        assert np.abs(wq.astype(np.int32)).max(initial=0) <= 2 ** (bits[0] - 1) - 1
    _same(rlx.compile(q.graph, target="numpy")(*xs), _reference(q, xs))


def cases(shapes=SHAPES, bits_list=BITS) -> None:
    """Every shape on the CPU: the pass fired (one fused kernel per linear, nothing
    elementwise) and the result is the reference's bit for bit (an integer GEMM, one f32
    multiply in the store)."""
    for bits in bits_list:
        q, xs = _model(shapes, bits=bits)
        exe = rlx.compile(q.graph, target="cpu")
        impls = [k["impl"] for k in exe.program.info["kernels"].values()]
        assert impls.count("rlx-igemm-static") == len(shapes), impls
        assert "generated-elementwise" not in impls, impls
        _same(exe(*xs), _reference(q, xs))


def test_cpu_folds_the_chain_and_matches(cpu):
    # the tiles: sign trick, w77, w7, w7_s, w77 (6-bit weights, 8-bit x), w66
    cases(bits_list=BITS[:2] + BITS[3:4] + BITS[5:])


def test_cpu_without_prepacking_matches(cpu, monkeypatch):
    monkeypatch.setenv("RLX_NO_PREPACK", "1")  # the row-major dot kernels
    q, xs = _model(SHAPES[2:4], bits=BITS[1])
    exe = rlx.compile(q.graph, target="cpu")
    assert exe.program.info["prepacked"] == []
    _same(exe(*xs), _reference(q, xs))


def test_cpu_portable_tile_matches(cpu):
    """RLX_IGEMM_ISA=c in a process of its own (the kernel reads it once per program)."""
    assert_passes_on_portable_tile("import tests.quant.test_static_int_linear as t; "
                                   "t.cases(t.SHAPES[2:4], t.BITS[1:2] + t.BITS[4:5])")


def test_nan_input_takes_the_code_of_zero(cpu):
    q, xs = _model(SHAPES[1:2])
    xs[0][2, 3] = np.nan
    got = np.asarray(rlx.compile(q.graph, target="cpu")(*xs))
    assert np.isfinite(got).all()
    _same(got, _reference(q, xs))


def test_shared_input_is_folded_into_each_linear(cpu):
    """q, k and v read one input: one quantize after CSE, folded into each of the three."""
    rng = np.random.default_rng(2)
    ws = [rng.standard_normal((16, 24)).astype(np.float32) for _ in range(3)]

    def f(x):
        return tuple(rlx.nn.linear(x, w) for w in ws)

    g = rlx.trace(f, spec((4, 24), "f32"))
    q = ptq.quantize_static(g, data=[rng.standard_normal((4, 24)).astype(np.float32)],
                            target="numpy", activation_bits=7, weight_bits=7)
    x = rng.standard_normal((4, 24)).astype(np.float32)
    exe = rlx.compile(q.graph, target="cpu")
    impls = [k["impl"] for k in exe.program.info["kernels"].values()]
    assert impls.count("rlx-igemm-static") == 3 and "generated-elementwise" not in impls
    want = rlx.compile(q.graph, target="numpy")(x)
    for a, b in zip(exe(x), want, strict=True):
        assert np.array_equal(np.asarray(a), np.asarray(b))


def test_chained_layers_stay_integer(cpu):
    """linear -> relu -> linear: the first layer's output stays int8 (requantize) and the
    second reads those integers (no quantize): neither is this op; the 7-bit clamp after the
    requantize keeps the whole equal to the numpy target bit for bit."""
    rng = np.random.default_rng(3)
    w1, w2 = (rng.standard_normal(s).astype(np.float32) for s in ((32, 20), (10, 32)))
    g = rlx.trace(lambda x: rlx.nn.linear(rlx.nn.relu(rlx.nn.linear(x, w1)), w2),
                  spec((6, 20), "f32"))
    cal = [rng.standard_normal((6, 20)).astype(np.float32) for _ in range(2)]
    for bits in (7,):
        q = ptq.quantize_static(g, data=cal, target="numpy", activation_bits=bits,
                                weight_bits=bits)
        assert q.layers[0].requantized and not q.layers[1].requantized
        x = rng.standard_normal((6, 20)).astype(np.float32)
        exe = rlx.compile(q.graph, target="cpu")
        impls = [k["impl"] for k in exe.program.info["kernels"].values()]
        assert "rlx-igemm-static" not in impls and "rlx-igemm-packed" in impls, impls
        assert np.array_equal(np.asarray(exe(x)),
                              np.asarray(rlx.compile(q.graph, target="numpy")(x)))


def test_bad_code_width_and_shapes_are_typed_errors():
    from rlx_core.errors import RlxError
    from rlx_core.ir import dtypes as dt
    from rlx_core.ir.builder import Builder, NameGen
    from rlx_core.ir.graph import TensorType, Value, ValueKind

    g = rlx.trace(lambda x: rlx.nn.linear(x, np.ones((2, 3), np.float32)), spec((1, 3), "f32"))
    with pytest.raises(RlxError, match="8 or 7 bits"):
        ptq.quantize_static(g, data=[np.ones((1, 3), np.float32)], activation_bits=6)
    b = Builder(NameGen({}))
    x = Value("x", TensorType(dt.f32, (2, 4)), ValueKind.INPUT)
    w = Value("w", TensorType(dt.f32, (3, 4)), ValueKind.PARAM)
    w8 = Value("w8", TensorType(dt.i8, (3, 4)), ValueKind.PARAM)
    s = Value("s", TensorType(dt.f32, (3,)), ValueKind.PARAM)
    with pytest.raises(DTypeError, match="weight must be i8"):
        b.emit("static_int_linear", [x, w, s])
    with pytest.raises(ShapeError, match="codes"):
        b.emit("static_int_linear", [x, w8, s], {"a_qmin": -10, "a_qmax": 200})


def test_gelu_and_residual_go_into_the_store(cpu):
    """A transformer FFN's pattern, static and dynamic int8: gelu(linear) and linear +
    residual fold into the int8 linears' store (passes/int_linear_epilogue.py), leaving no
    elementwise kernel; the result is the numpy target's up to the GELU's f32 erf."""
    rng = np.random.default_rng(4)
    w1, w2 = (rng.standard_normal(s).astype(np.float32) for s in ((48, 16), (16, 48)))
    b1, b2 = (rng.standard_normal(n).astype(np.float32) for n in (48, 16))

    def ffn(x):
        return rlx.nn.linear(rlx.nn.gelu(rlx.nn.linear(x, w1, b1)), w2, b2) + x

    g = rlx.trace(ffn, spec((2, 9, 16), "f32"))
    cal = [rng.standard_normal((2, 9, 16)).astype(np.float32) for _ in range(2)]
    x = rng.standard_normal((2, 9, 16)).astype(np.float32)
    for q, impl in ((ptq.quantize_static(g, data=cal, target="numpy", weight_bits=7),
                     "rlx-igemm-static"),
                    (ptq.quantize_dynamic(g, granularity="token"), "rlx-igemm-dynamic")):
        exe = rlx.compile(q.graph, target="cpu")
        impls = [k["impl"] for k in exe.program.info["kernels"].values()]
        assert impls.count(impl) == 2 and "generated-elementwise" not in impls, impls
        want = np.asarray(rlx.compile(q.graph, target="numpy")(x))
        np.testing.assert_allclose(np.asarray(exe(x)), want, rtol=1e-5, atol=1e-5)


def test_the_gelu_in_the_store_uses_the_gemm_epilogue_erf(cpu):
    """The int8 linears' GELU (rlx_ig_epilogue) renders its erf with the f32 GEMMs' epilogue
    erf (cpu/epilogue_erf.py, one implementation for both): static and dynamic, it is within
    that erf's bound (1.25e-6) of the exact GELU of the same linear's output without the GELU,
    over outputs that cross the erf's clamp at |y| = 3.5 sqrt 2."""
    import math

    from rlx_core.targets.cpu import epilogue_erf
    from rlx_core.targets.cpu.renderer import render_program

    rng = np.random.default_rng(5)
    w = (rng.standard_normal((96, 64)) * 0.6).astype(np.float32)
    b = rng.standard_normal(96).astype(np.float32)
    x = rng.standard_normal((40, 64)).astype(np.float32)
    exact_gelu = np.vectorize(lambda v: v * (1.0 + math.erf(v / math.sqrt(2.0))) * 0.5)
    for quantize in (lambda g: ptq.quantize_static(g, data=[x], target="numpy"),
                     lambda g: ptq.quantize_dynamic(g, granularity="token")):
        exes = [rlx.compile(quantize(rlx.trace(lambda t, act=act: act(rlx.nn.linear(t, w, b)),
                                               spec((40, 64), "f32"))).graph,
                            target="cpu", record=False)
                for act in (rlx.nn.gelu, lambda t: t)]
        source = render_program(exes[0].lir).source
        assert f"#define RLX_IG_ERF(x) {epilogue_erf.NAME}(x)" in source
        assert "RLX_IG_ERF(yr[c]" in source
        got, y = (np.asarray(exe(x)).astype(np.float64) for exe in exes)
        assert np.abs(y).max() > 8.0 and np.abs(y).min() < 0.1  # both sides of the clamp
        np.testing.assert_array_less(np.abs(got - exact_gelu(y)),
                                     np.abs(y) * (0.5 * 1.25e-6 + 3 * 2.0 ** -24) + 1e-30)


def test_epilogue_folds_only_what_the_claim_lists():
    """A target that claims an int8 linear without the epilogue's attr_in constraints keeps
    its GELU and residual add (its kernel would ignore them)."""
    from rlx_core.dispatch.capabilities import OpClaim
    from rlx_core.passes.int_linear_epilogue import claimed
    from rlx_core.targets.cpu.caps import CAPS

    for op in ("static_int_linear", "dynamic_int_linear"):
        assert claimed(CAPS, op, "act", "gelu") and claimed(CAPS, op, "residual", True)

    class Bare:
        def claim_for(self, op):
            return OpClaim((op,), ("f32", "i8"))

    assert not claimed(Bare(), "static_int_linear", "act", "gelu")
    assert not claimed(None, "static_int_linear", "residual", True)


def test_code_widths_per_layer(cpu):
    """weight_bits / activation_bits as {weight-name substring: bits, "*": default}: each
    layer gets its own widths (6-bit weights here: the w77 / w66 tiles), an input shared by
    two layers keeps the widest asked for, and the CPU equals numpy bit for bit."""
    assert ptq.layer_bits(7, "any") == 7
    assert ptq.layer_bits({"dense": 6, "*": 7}, "l.0.dense.weight") == 6
    assert ptq.layer_bits({"dense": 6}, "l.0.query.weight") == 8
    rng = np.random.default_rng(4)
    ws = [rng.standard_normal(s).astype(np.float32) for s in ((16, 40), (24, 40), (8, 33))]

    def f(x, y):
        return rlx.nn.linear(x, ws[0]), rlx.nn.linear(x, ws[1]), rlx.nn.linear(y, ws[2])

    g = rlx.trace(f, spec((5, 40), "f32"), spec((6, 33), "f32"))
    names = [n.inputs[1] for n in ptq.quantizable(g)]
    cal = [(rng.standard_normal((5, 40)).astype(np.float32),
            rng.standard_normal((6, 33)).astype(np.float32)) for _ in range(2)]
    # first match wins: the names are param, param_1, param_2 here (the longest first)
    order = sorted(range(3), key=lambda i: -len(names[i]))
    q = ptq.quantize_static(g, data=cal, target="numpy",
                            weight_bits={names[i]: 8 if i == 1 else 6 for i in order},
                            activation_bits={names[i]: 8 if i == 1 else 7 for i in order})
    wmax = [int(np.abs(q.graph.param_data[f"{n}.q"].astype(np.int32)).max()) for n in names]
    assert wmax[0] <= 31 and wmax[2] <= 31 and wmax[1] > 63, wmax
    bits = {r.weight: r.input.bits for r in q.layers}
    assert bits[names[0]] is None and bits[names[1]] is None  # x: 8 bits (names[1] asks 8)
    assert bits[names[2]] == 7
    x, y = (rng.standard_normal(s).astype(np.float32) * 2 for s in ((5, 40), (6, 33)))
    got = rlx.compile(q.graph, target="cpu")(x, y)
    for a, b in zip(got, rlx.compile(q.graph, target="numpy")(x, y), strict=True):
        assert np.array_equal(np.asarray(a), np.asarray(b))
