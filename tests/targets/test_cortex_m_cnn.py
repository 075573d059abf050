"""cortex-m: int_conv2d in the firmware (NCHW activations, the NHWC kernels of csrc/rlx_conv.h)
and a static-PTQ CNN (conv -> relu -> conv -> relu -> flatten -> linear -> argmax), bit for
bit against the numpy int8 reference under QEMU; convolutions the kernels lack are refused
with a code and a fix, on cortex-m and on fpga."""

from __future__ import annotations

import numpy as np
import pytest

import rlx_core as rlx
from rlx_core.quant import ops as qops
from rlx_core.quant import ptq
from rlx_core.targets.cortex_m.errors import NoInt8KernelError
from rlx_core.targets.registry import get_target

OK, WHY = get_target("cortex-m").available()
needs_tools = pytest.mark.skipif(not OK, reason=f"cortex-m cannot run here: {WHY}")


def _run(g, calls):
    from rlx_core.targets.cortex_m.runtime import firmware_of

    exe = rlx.compile(g, target="cortex-m")
    ref = rlx.compile(g, target="numpy")
    res = firmware_of(exe).run_calls([[x] for x in calls])
    for x, got in zip(calls, res.outputs, strict=True):
        for a, b in zip(got, ref(x) if isinstance(ref(x), tuple) else (ref(x),), strict=True):
            b = np.asarray(b)
            assert a.dtype == b.dtype and np.array_equal(a, b)
    return exe, res


@needs_tools
@pytest.mark.parametrize("xdt,c,groups,o,stride,pad", [
    ("u8", 1, 1, 4, (2, 2), (1, 1)),  # one channel: no layout change on the way in
    ("i8", 3, 1, 5, (1, 2), (0, 1)),  # NCHW -> NHWC -> conv -> NCHW
    ("u8", 4, 4, 4, (1, 1), (1, 1)),  # depthwise
])
def test_int_conv2d_bit_exact(xdt, c, groups, o, stride, pad):
    rng = np.random.default_rng(5)
    npt, lo = (np.uint8, 0) if xdt == "u8" else (np.int8, -128)
    w = rng.integers(-127, 128, (o, c // groups, 3, 3)).astype(np.int8)
    b = rng.integers(-3000, 3000, o).astype(np.int32)

    def model(x):
        acc = qops.int_conv2d(x, w, b, stride=stride, padding=pad, groups=groups,
                              x_zero_point=lo + 5, w_zero_point=1)
        return qops.requantize(acc, [1 << 30] * o, list(range(-8, -8 + o)), zero_point=3,
                               dtype="i8", axis=1), acc

    calls = [rng.integers(lo, lo + 256, (1, c, 6, 5)).astype(npt) for _ in range(3)]
    calls[0][:] = lo + 255  # the largest sums
    exe, res = _run(rlx.trace(model, calls[0]), calls)
    assert min(res.instructions) > 0
    mem = exe.program.info["memory"]
    assert mem["scratch_bytes"] == (c > 1) * c * 30 + 4 * o * int(np.prod(
        np.asarray(res.outputs[0][1].shape[2:])))


def _cnn_params(rng):
    return {"c1": rng.normal(size=(4, 1, 3, 3)).astype(np.float32) * 0.5,
            "b1": rng.normal(size=4).astype(np.float32) * 0.1,
            "c2": rng.normal(size=(6, 4, 3, 3)).astype(np.float32) * 0.3,
            "b2": rng.normal(size=6).astype(np.float32) * 0.1,
            "w": rng.normal(size=(10, 54)).astype(np.float32) * 0.3,
            "b": rng.normal(size=10).astype(np.float32) * 0.1}


def _cnn(p):
    def logits(x):
        h = rlx.nn.relu(rlx.nn.conv2d(x, p["c1"], p["b1"], stride=2, padding=1))
        h = rlx.nn.relu(rlx.nn.conv2d(h, p["c2"], p["b2"], stride=2, padding=1))
        lg = rlx.nn.linear(rlx.reshape(h, (h.shape[0], -1)), p["w"], p["b"])
        return lg, rlx.argmax(lg, axis=-1)

    return logits


def _static_ptq(logits, shape, rng):
    """``logits`` traced at one input of ``shape`` and statically quantized (calibrated on the
    numpy target over 16 random inputs): the f32 graph and the PTQ result."""
    g = rlx.trace(logits, rng.random(shape).astype(np.float32))
    q = ptq.quantize_static(g, data=[rng.random(shape).astype(np.float32) for _ in range(16)],
                            target="numpy")
    return g, q


def _live(q, ops):
    """The quantized graph's nodes among ``ops``, in order."""
    return [n.op for n in q.graph.nodes if n.op in ops]


def _near_f32_and_firmware_steps(g, q, shape, rng):
    """On four random calls the numpy int8 reference's logits stay within 10% of the f32
    model's; then (skipped where the firmware cannot run) the firmware's outputs equal the
    int8 reference's on every call (``_run``): its step kinds, in order."""
    ref, f32 = rlx.compile(q.graph, target="numpy"), rlx.compile(g, target="numpy")
    calls = [rng.random(shape).astype(np.float32) for _ in range(4)]
    for v in calls:
        want, got = np.asarray(f32(v)[0]), np.asarray(ref(v)[0])
        assert np.abs(got - want).max() < 0.1 * np.abs(want).max()
    if not OK:
        pytest.skip(f"cortex-m cannot run here: {WHY}")
    exe, _ = _run(q.graph, calls)
    return [s.split()[0] for s in exe.program.info["steps"]]


def test_static_ptq_cnn_is_an_integer_chain_and_the_firmware_matches():
    """PTQ (calibrated on the numpy target) rewrites both convs, the flatten and the linear
    into one integer chain; its logits stay near the f32 model's; the firmware's logits and
    argmax equal the numpy int8 reference's on every call."""
    rng = np.random.default_rng(0)
    g, q = _static_ptq(_cnn(_cnn_params(rng)), (1, 1, 10, 10), rng)
    # one quantize at the input, the flatten on u8, requantize per channel between layers
    assert _live(q, ("int_conv2d", "int_linear", "requantize", "reshape", "quantize")) == [
        "quantize", "int_conv2d", "requantize", "int_conv2d", "requantize", "reshape",
        "int_linear"]
    assert [len(r.weight_scale) for r in q.layers] == [4, 6, 10]
    req = [n for n in q.graph.nodes if n.op == "requantize"]
    assert all(n.attr("axis") == 1 and len(n.attr("multiplier")) == n.type.shape[1]
               for n in req)
    steps = _near_f32_and_firmware_steps(g, q, (1, 1, 10, 10), rng)
    assert steps.count("conv") == 2 and "fc" in steps and "argmax" in steps


def test_static_ptq_keeps_a_max_pool_on_the_integers_and_the_firmware_matches():
    """A max pool between two quantized convs stays on the u8 codes (no dequantize /
    quantize around it: the max commutes with the quantization), and the firmware's pool
    step equals the numpy int8 reference."""
    rng = np.random.default_rng(1)
    p = _cnn_params(rng)
    p["w"] = rng.normal(size=(10, 24)).astype(np.float32) * 0.3

    def logits(x):
        h = rlx.nn.relu(rlx.nn.conv2d(x, p["c1"], p["b1"], stride=1, padding=1))
        h = rlx.nn.max_pool2d(h, 2)
        h = rlx.nn.relu(rlx.nn.conv2d(h, p["c2"], p["b2"], stride=2, padding=1))
        lg = rlx.nn.linear(rlx.reshape(h, (h.shape[0], -1)), p["w"], p["b"])
        return lg, rlx.argmax(lg, axis=-1)

    g, q = _static_ptq(logits, (1, 1, 8, 8), rng)
    live = _live(q, ("int_conv2d", "int_linear", "requantize", "max_pool2d", "quantize"))
    assert live[:5] == ["quantize", "int_conv2d", "requantize", "max_pool2d", "int_conv2d"]
    pool = next(n for n in q.graph.nodes if n.op == "max_pool2d")
    assert pool.type.dtype.name == "u8"
    steps = _near_f32_and_firmware_steps(g, q, (1, 1, 8, 8), rng)
    assert steps.count("conv") == 2 and "pool" in steps and "argmax" in steps


@needs_tools
def test_qat_cnn_converts_and_the_firmware_matches():
    """A few LSQ steps on the CNN (quant/qat.py: fake-quantized convs and linear), converted
    to int_conv2d / requantize / int_linear with the learned scales: the firmware's logits
    and argmax equal the numpy int8 reference's on every call."""
    from rlx_core.optim import Adam, compile_step
    from rlx_core.quant import qat

    rng = np.random.default_rng(3)
    p = _cnn_params(rng)
    f32 = {"conv1": {"weight": p["c1"], "bias": p["b1"]},
           "conv2": {"weight": p["c2"], "bias": p["b2"]},
           "fc1": {"weight": p["w"], "bias": p["b"]}}
    x = rng.random((4, 1, 10, 10)).astype(np.float32)
    y = rng.integers(0, 10, 4).astype(np.int32)
    step = compile_step(qat.cnn_loss(), Adam(1e-2), qat.init_qat(f32, [1.0, 2.0, 2.0]), x, y,
                        target="numpy")
    for _ in range(3):
        step(x, y)
    g = qat.convert_qat(step.params, x[:1], argmax=True).graph
    assert g.op_counts()["int_conv2d"] == 2
    exe, _ = _run(g, [rng.random((1, 1, 10, 10)).astype(np.float32) for _ in range(3)])
    assert [s.split()[0] for s in exe.program.info["steps"]].count("conv") == 2


def test_convolutions_without_a_kernel_are_refused_with_a_fix():
    x = np.zeros((1, 4, 8, 8), np.int8)

    def model(v):
        a = qops.int_conv2d(v, np.ones((4, 4, 3, 3), np.int8), dilation=2)
        b = qops.int_conv2d(v, np.ones((4, 2, 3, 3), np.int8), groups=2)
        return a, b

    with pytest.raises(NoInt8KernelError) as e:
        rlx.compile(rlx.trace(model, x), target="cortex-m")
    assert "dilation 1" in str(e.value) and "groups 2" in str(e.value)
    assert len(e.value.lines) == 2  # every offending node, each with its fix


def test_fpga_refuses_a_convolution_by_name():
    x = np.zeros((1, 1, 6, 6), np.uint8)
    g = rlx.trace(lambda v: qops.int_conv2d(v, np.ones((2, 1, 3, 3), np.int8)), x)
    with pytest.raises(NoInt8KernelError) as e:
        rlx.compile(g, target="fpga")
    assert "int_conv2d" in str(e.value) and "no int8 convolution unit on fpga" in str(e.value)
