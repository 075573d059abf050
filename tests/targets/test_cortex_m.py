"""cortex-m: int8 firmware built by arm-none-eabi-gcc and run under qemu-system-arm.

Each kernel is compared bit for bit with the numpy reference (several calls per QEMU launch),
on the Cortex-M4 board with and without the DSP path and on the Cortex-M33 board; the strict
legalization names every offending node; the arena is the LIR planner's and is reused."""

from __future__ import annotations

import numpy as np
import pytest

import rlx_core as rlx
from rlx_core.frontend import ops as fops
from rlx_core.quant import ops as qops
from rlx_core.quant import ptq
from rlx_core.targets.cortex_m.errors import (
    BoardMemoryError,
    FloatOpError,
    NoInt8KernelError,
    ZeroSizeTensorError,
)
from rlx_core.targets.registry import get_target

TARGET = get_target("cortex-m")
OK, WHY = TARGET.available()
needs_tools = pytest.mark.skipif(not OK, reason=f"cortex-m cannot run here: {WHY}")


def _build(g, board=None, dsp=True):
    _, _, lir, ctx = rlx.lower(g, target="cortex-m", record=False)
    return TARGET.build(lir, ctx.options, board=board, dsp=dsp), lir


def _int_graph(xdtype: str):
    """int_linear (odd K, both zero points) -> per-channel requantize -> relu, plus argmax of
    the accumulators and the accumulators themselves: every kernel in one firmware."""
    rng = np.random.default_rng(3)
    k, n = 37, 6
    w = rng.integers(-127, 128, (n, k)).astype(np.int8)
    bias = rng.integers(-5000, 5000, n).astype(np.int32)
    mult = [int(m) for m in rng.integers(1 << 30, (1 << 31) - 1, n)]
    shift = [-12, -9, -1, 0, 1, -31][:n]
    lo = -128 if xdtype == "i8" else 0

    def model(x):
        acc = qops.int_linear(x, w, bias, x_zero_point=lo + 7, w_zero_point=3)
        q = qops.requantize(acc, mult, shift, zero_point=-5 if xdtype == "i8" else 9,
                            dtype=xdtype)
        r = fops.binary("max", q, fops.constant(2, xdtype, (3, n)))
        return r, rlx.argmax(acc, axis=-1), acc

    x0 = rng.integers(lo, lo + 256, (3, k)).astype(xdtype.replace("u8", "uint8").replace(
        "i8", "int8"))
    return rlx.trace(model, x0), rng, lo


@needs_tools
@pytest.mark.parametrize("xdtype,board,dsp", [("u8", "mps2-an386", True),
                                              ("i8", "mps2-an386", True),
                                              ("u8", "mps2-an386", False),
                                              ("i8", "mps2-an505", True)])
def test_kernels_bit_exact(xdtype, board, dsp):
    from rlx_core.targets.cortex_m.runtime import Firmware

    g, rng, lo = _int_graph(xdtype)
    prog, _ = _build(g, board=board, dsp=dsp)
    fw = prog.run_fn.__self__
    assert isinstance(fw, Firmware) and prog.info["dsp"] is dsp
    ref = rlx.compile(g, target="numpy")
    npt = np.uint8 if xdtype == "u8" else np.int8
    calls = [rng.integers(lo, lo + 256, (3, 37)).astype(npt) for _ in range(4)]
    calls[0][:] = lo + 255  # extreme accumulators
    res = fw.run_calls([[x] for x in calls])
    for x, got in zip(calls, res.outputs, strict=True):
        want = [np.asarray(v) for v in ref(x)]
        for a, b in zip(got, want, strict=True):
            assert a.dtype == b.dtype and np.array_equal(a, b)
    assert len(res.instructions) == 4 and min(res.instructions) > 0


@needs_tools
def test_quantized_mlp_argmax_and_logits():
    """A PTQ MLP (u8 asymmetric activations): the firmware's argmax and its logits
    (dequantized on the host) equal the numpy reference's exactly."""
    rng = np.random.default_rng(0)
    p = {"w1": rng.normal(size=(24, 64)).astype(np.float32) * 0.2,
         "b1": rng.normal(size=24).astype(np.float32) * 0.1,
         "w2": rng.normal(size=(10, 24)).astype(np.float32) * 0.3,
         "b2": np.zeros(10, np.float32)}

    def logits(x):
        h = rlx.nn.relu(rlx.nn.linear(x, p["w1"], p["b1"]))
        return rlx.nn.linear(h, p["w2"], p["b2"])

    x = rng.random((1, 64)).astype(np.float32)
    calib = [rng.random((1, 64)).astype(np.float32) for _ in range(16)]
    for fn in (logits, lambda v: rlx.argmax(logits(v), axis=-1)):
        q = ptq.quantize_static(rlx.trace(fn, x), data=calib).graph
        exe = rlx.compile(q, target="cortex-m")
        ref = rlx.compile(q, target="numpy")
        from rlx_core.targets.cortex_m.runtime import firmware_of

        xs = [rng.random((1, 64)).astype(np.float32) for _ in range(3)]
        res = firmware_of(exe).run_calls([[v] for v in xs])
        for v, got in zip(xs, res.outputs, strict=True):
            assert np.array_equal(got[0], np.asarray(ref(v)))
        assert np.array_equal(np.asarray(exe(xs[0])), np.asarray(ref(xs[0])))
        mem = exe.program.info["memory"]
        assert mem["weights_bytes"] >= 24 * 64 + 10 * 24 and mem["flash_bytes"] > 0


def test_float_graph_lists_every_linear():
    rng = np.random.default_rng(0)
    ws = [rng.normal(size=(8, 8)).astype(np.float32) for _ in range(3)]

    def model(x):
        for w in ws:
            x = rlx.nn.linear(x, w)
        return rlx.nn.softmax(x, axis=-1)

    with pytest.raises(FloatOpError) as e:
        rlx.lower(model, np.ones((1, 8), np.float32), target="cortex-m", record=False)
    msg = str(e.value)
    assert e.value.code == "RLX-U001"
    assert msg.count("quantize_static") >= 3  # each linear, with the fix
    assert "softmax before argmax is order-preserving" in msg


def test_unsupported_int_op_is_typed():
    def model(x):
        return x * x  # an integer multiply has no int8 kernel

    with pytest.raises(NoInt8KernelError) as e:
        rlx.lower(model, np.ones((2, 4), np.int8), target="cortex-m", record=False)
    assert e.value.code == "RLX-U002" and "mul" in str(e.value)


@pytest.mark.parametrize("target", ["cortex-m", "fpga"])
def test_zero_size_tensor_is_refused_at_compile_time(target):
    """Regression (fuzz_long_cortex-m): an empty tensor made the firmware exit 1 under QEMU;
    now the strict check names every empty input and node before anything is built."""
    with pytest.raises(ZeroSizeTensorError) as e:
        rlx.lower(lambda x: x.reshape(0, 7, 1), np.zeros((3, 1, 0), np.int16), target=target,
                  record=False)
    assert e.value.code == "RLX-U014" and e.value.codes == ["RLX-U014", "RLX-U014"]
    assert "(3, 1, 0)" in e.value.lines[0] and "reshape" in e.value.lines[1]
    # the LIR-level check (build / render_sources) refuses it too, without any tool
    g = rlx.trace(lambda x: fops.binary("max", x, x), np.zeros((0, 4), np.uint8))
    _, _, lir, _ = rlx.lower(g, target="numpy", record=False)
    with pytest.raises(ZeroSizeTensorError):
        TARGET.render_sources(lir)


def test_model_larger_than_board(monkeypatch):
    g, _, _ = _int_graph("u8")
    monkeypatch.setenv("RLX_CORTEX_M_RAM", "1024")  # a part with 1 KiB of RAM
    monkeypatch.setenv("RLX_CORTEX_M_FLASH", "100")
    if not OK:
        pytest.skip(f"cortex-m cannot run here: {WHY}")
    with pytest.raises(BoardMemoryError) as e:
        _build(g)
    assert e.value.code == "RLX-U003" and "flash" in str(e.value) and "RAM" in str(e.value)


def test_arena_is_the_planners_and_reused():
    """Slots alive at the same time never overlap, and reuse makes the arena smaller than
    one buffer per value."""
    from rlx_core.targets.cortex_m.emitter import emit
    from rlx_core.targets.cortex_m.legalize import legalize

    rng = np.random.default_rng(1)
    ws = [rng.normal(size=(32, 32)).astype(np.float32) * 0.2 for _ in range(4)]

    def model(x):
        for w in ws[:-1]:
            x = rlx.nn.relu(rlx.nn.linear(x, w))
        return rlx.argmax(rlx.nn.linear(x, ws[-1]), axis=-1)

    x = rng.random((1, 32)).astype(np.float32)
    q = ptq.quantize_static(rlx.trace(model, x), data=[x]).graph
    _, _, lir, _ = rlx.lower(q, target="cortex-m", record=False)
    checked = legalize(lir)
    assert not checked.problems
    src = emit(lir, checked.steps)
    plan = src.plan
    assert plan.peak_bytes < plan.naive_bytes
    for a in plan.slots:
        for b in plan.slots:
            if a is b or a.alias or b.alias:
                continue
            live = a.first <= b.last and b.first <= a.last
            apart = a.offset + a.size <= b.offset or b.offset + b.size <= a.offset
            assert not live or apart
    assert "malloc" not in src.model_c and f"rlx_arena[{plan.peak_bytes}]" in src.model_c


@needs_tools
def test_cli_writes_the_firmware_project(tmp_path):
    """rlx compile MODEL --target cortex-m --out DIR: the ELF, its sources and a report."""
    import json
    from pathlib import Path

    from rlx_core.cli import main

    model = Path(__file__).resolve().parents[2] / "examples" / "models" / "mlp_int8.py"
    assert main(["compile", str(model), "--target", "cortex-m", "--out", str(tmp_path)]) == 0
    names = {p.name for p in tmp_path.iterdir()}
    assert {"firmware.elf", "model.c", "rlx_nn.h", "link.ld", "rlx_build.json"} <= names
    assert (tmp_path / "firmware.elf").read_bytes()[:4] == b"\x7fELF"
    report = json.loads((tmp_path / "rlx_build.json").read_text())
    assert report["memory"]["weights_bytes"] >= 128 * 784 and report["board"] == "mps2-an386"


def test_embedded_targets_share_the_int8_base(monkeypatch):
    """cortex-m and fpga are one Int8EmbeddedTarget each: availability, the strict check and
    the unavailable error come from the base (embedded_common/target.py)."""
    import sys

    from rlx_core.errors import TargetUnavailableError
    from rlx_core.targets.embedded_common.target import Int8EmbeddedTarget

    fpga = get_target("fpga")
    assert isinstance(TARGET, Int8EmbeddedTarget) and isinstance(fpga, Int8EmbeddedTarget)
    assert TARGET.caps.target == "cortex-m" and fpga.caps.target == "fpga"
    assert repr(TARGET) == "CortexMTarget()" and repr(fpga) == "FpgaTarget()"
    monkeypatch.setattr(sys, "platform", "emscripten")
    assert TARGET.available() == (False, "there is no cross compiler under Pyodide / WebAssembly")
    with pytest.raises(TargetUnavailableError, match="target 'fpga' is not available") as e:
        fpga.build(None)
    assert e.value.hint == "apt-get install verilator"
