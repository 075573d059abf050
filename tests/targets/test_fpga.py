"""fpga: the int8 datapath in Verilog, simulated by Verilator, bit-exact with numpy.

Small layers in CI (a few images per simulator launch, several MAC-lane counts including one
that does not divide the layer width); the synthesis flow runs on the smallest design."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import rlx_core as rlx
from rlx_core.quant import ops as qops
from rlx_core.quant import ptq
from rlx_core.targets.fpga.errors import NoDatapathError
from rlx_core.targets.registry import get_target

TARGET = get_target("fpga")
OK, WHY = TARGET.available()
needs_verilator = pytest.mark.skipif(not OK, reason=f"fpga cannot simulate here: {WHY}")


def _mlp_graph(argmax: bool):
    rng = np.random.default_rng(0)
    p = {"w1": rng.normal(size=(12, 20)).astype(np.float32) * 0.3,
         "b1": rng.normal(size=12).astype(np.float32) * 0.1,
         "w2": rng.normal(size=(5, 12)).astype(np.float32) * 0.3,
         "b2": rng.normal(size=5).astype(np.float32) * 0.1}

    def logits(x):
        h = rlx.nn.relu(rlx.nn.linear(x, p["w1"], p["b1"]))
        return rlx.nn.linear(h, p["w2"], p["b2"])

    x = rng.random((1, 20)).astype(np.float32)
    calib = [rng.random((1, 20)).astype(np.float32) for _ in range(16)]
    return ptq.quantize_static(rlx.trace(logits, x), data=calib).graph, rng


def _sim(g, parallelism, pipeline=False):
    _, _, lir, ctx = rlx.lower(g, target="fpga", record=False)
    prog = TARGET.build(lir, ctx.options, parallelism=parallelism, pipeline=pipeline)
    return prog, prog.run_fn.__self__


@needs_verilator
@pytest.mark.parametrize("lanes", [5])
def test_mlp_logits_bit_exact(lanes):
    """u8 asymmetric activations, per-channel requantize, relu folded into the clamp; the
    logits (i32 accumulators dequantized on the host) equal the numpy reference's. The MAC
    lanes are pipelined (products registered, one cycle more a group); the argmax test below
    runs them unpipelined. 5 lanes over 12 outputs: three groups, the last one partial, and
    the serial requantize unit (36 cycles an output) longer than a group's 20 inputs, so the
    MAC array waits for it: the cycle model (verilog.layer_cycles) counts that."""
    g, rng = _mlp_graph(argmax=False)
    prog, sim = _sim(g, lanes, pipeline=True)
    assert prog.info["pipeline"] and ".PIPE(1)" in prog.sources["rlx_top.v"]
    ref = rlx.compile(g, target="numpy")
    xs = [rng.random((1, 20)).astype(np.float32) for _ in range(4)]
    res = sim.run_calls([[x] for x in xs])
    for x, got in zip(xs, res.outputs, strict=True):
        assert np.array_equal(got[0], np.asarray(ref(x)))
    assert len(set(res.instructions)) == 1 and res.instructions[0] > 0  # cycles, fixed
    assert abs(res.instructions[0] - prog.info["cycles_estimate"]) <= 32


@needs_verilator
def test_int8_argmax_in_the_datapath():
    """i8 input with a zero point, two requantized layers, argmax over int8 in hardware.
    Layer 0's weights fit a signed nibble (4-bit quantized, -8 and 7 included): its ROM and
    multipliers are 4-bit fields, next to layer 1's 8-bit ones, in one design."""
    rng = np.random.default_rng(5)
    w1 = rng.integers(-8, 8, (7, 9)).astype(np.int8)
    w1[0, :2] = (-8, 7)
    w2 = rng.integers(-127, 128, (4, 7)).astype(np.int8)
    b1 = rng.integers(-900, 900, 7).astype(np.int32)

    def model(x):
        h = qops.requantize(qops.int_linear(x, w1, b1, x_zero_point=-3),
                            [1 << 30] * 7, [-6, -5, -7, -4, -6, -8, -5], zero_point=-2,
                            dtype="i8")
        from rlx_core.frontend import ops as fops

        h = fops.binary("max", h, fops.constant(-2, "i8", (1, 7)))
        q = qops.requantize(qops.int_linear(h, w2, x_zero_point=-2), 1518500250, -9,
                            zero_point=1, dtype="i8")
        return rlx.argmax(q, axis=-1)

    g = rlx.trace(model, np.zeros((1, 9), np.int8))
    prog, sim = _sim(g, 3)
    assert sim.dp.argmax
    assert [ly["weight_bits"] for ly in prog.info["layers"]] == [4, 8]
    assert prog.info["weight_bytes"] == -(-7 * 9 // 2) + 4 * 7
    assert ".WB(4)" in prog.sources["rlx_top.v"] and ".WB(8)" in prog.sources["rlx_top.v"]
    rom = [(Path(prog.info["project_dir"]) / f"w{i}.hex").read_text().split() for i in (0, 1)]
    assert {len(w) for w in rom[0]} == {3} and {len(w) for w in rom[1]} == {6}  # 3 lanes
    ref = rlx.compile(g, target="numpy")
    xs = [rng.integers(-128, 128, (1, 9)).astype(np.int8) for _ in range(6)]
    res = sim.run_calls([[x] for x in xs])
    for x, got in zip(xs, res.outputs, strict=True):
        assert np.array_equal(got[0], np.asarray(ref(x)))


@needs_verilator
def test_serial_requantize_at_the_edges():
    """The serial requantize unit (magnitudes, shift-add multiply, TFLite's rounding) at the
    extremes: multipliers up to 2^31 - 1, left shifts up to 30, right shifts up to 31, biases
    of +-2^30 (the left shift wraps in 32 bits, as the reference's does)."""
    rng = np.random.default_rng(7)
    w = rng.integers(-127, 128, (7, 6)).astype(np.int8)
    b = np.array([2**30, -2**30, 5, -7, 123456, -99999, 0], np.int32)
    mult = [2**31 - 1, 2**30, 1518500250, 1, 2**30 + 1, 2**31 - 1, 1234567890]
    shift = [3, 0, -1, -31, -30, 30, -12]

    def model(x):
        return qops.requantize(qops.int_linear(x, w, b, x_zero_point=5), mult, shift,
                               zero_point=3, dtype="i8")

    g = rlx.trace(model, np.zeros((1, 6), np.uint8))
    prog, sim = _sim(g, 3)
    ref = rlx.compile(g, target="numpy")
    xs = [rng.integers(0, 256, (1, 6)).astype(np.uint8) for _ in range(24)]
    res = sim.run_calls([[x] for x in xs])
    for x, got in zip(xs, res.outputs, strict=True):
        assert np.array_equal(got[0], np.asarray(ref(x)))
    assert abs(res.instructions[0] - prog.info["cycles_estimate"]) <= 32


def test_graph_outside_the_datapath_is_typed():
    def model(x, y):
        return qops.int_linear(x, np.ones((3, 4), np.int8)), qops.int_linear(
            y, np.ones((3, 4), np.int8))

    _, _, lir, _ = rlx.lower(model, np.ones((1, 4), np.int8), np.ones((1, 4), np.int8),
                             target="fpga", record=False)
    with pytest.raises(NoDatapathError) as e:
        TARGET.project(lir)
    assert e.value.code == "RLX-U010" and "2 inputs" in str(e.value)


def test_float_model_is_refused_with_the_int8_rules():
    from rlx_core.targets.cortex_m.errors import FloatOpError

    with pytest.raises(FloatOpError):
        rlx.lower(lambda x: rlx.nn.linear(x, np.ones((3, 4), np.float32)),
                  np.ones((1, 4), np.float32), target="fpga", record=False)


def test_verilog_project_renders_without_tools():
    g, _ = _mlp_graph(argmax=False)
    _, _, lir, _ = rlx.lower(g, target="fpga", record=False)
    proj, dp, _ = TARGET.project(lir, 4)
    assert [(x.k, x.n) for x in dp.layers] == [(20, 12), (12, 5)]
    top = proj.files["rlx_top.v"]
    assert "module rlx_top" in top and "rlx_fc_layer #(" in top and "s_ready" in top
    assert len(proj.files["w0.hex"].split()) == 3 * 20  # ceil(12 / 4) groups x K words


def _synth_tools() -> str:
    from rlx_core.targets.fpga.toolchain import find_tool

    return "; ".join(why for path, why in (find_tool(t) for t in ("yosys", "nextpnr-ice40"))
                     if path is None)


@pytest.mark.slow  # about a minute of CPU: yosys twice and nextpnr on the HX8K
@pytest.mark.skipif(bool(_synth_tools()), reason=f"cannot synthesize here: {_synth_tools()}")
def test_smallest_design_synthesizes_and_places():
    """yosys synth_ice40 + nextpnr-ice40 on the 20-12-5 MLP at 2 lanes: the weight ROMs become
    block RAM (not LUTs), the design places on the HX8K and reports an fmax."""
    from rlx_core.targets.fpga.synth import synthesize

    g, _ = _mlp_graph(argmax=False)
    _, _, lir, _ = rlx.lower(g, target="fpga", record=False)
    proj, _, _ = TARGET.project(lir, 2)
    rep = synthesize(proj)
    assert rep.brams >= 1 and rep.lc_total == 7680 and rep.bram_total == 32
    assert 0 < rep.luts < 4000 and rep.ffs > 0 and rep.dsps == 0  # the HX8K has no DSP
    assert 0 < rep.lc_used < rep.lc_total and rep.fmax_mhz > 0 and rep.generic_cells > 0
