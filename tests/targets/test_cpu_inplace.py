"""The CPU's in-place arena shares (rlx_core/targets/cpu/inplace.py, plan_arena's ``over``
slots): a fused convolution written over its dying residual when both are NCHW8c, an
elementwise kernel over its dying operand; never where the conv reads the residual as its
input too, nor where the two layouts differ; the same values with the shares off."""

from __future__ import annotations

import numpy as np
import pytest

import rlx_core as rlx
from rlx_core import nn
from rlx_core.targets.cpu.target import CpuTarget
from tests.targets.simd import skip_unless_simd

cpu_ok, cpu_why = CpuTarget().available()
# slow: each test compiles programs with the blocked conv kernels (tens of seconds of C
# compile apiece on a cold cache); tests/conftest.py runs slow tests first
pytestmark = [pytest.mark.skipif(not cpu_ok, reason=f"cpu target unavailable: {cpu_why}"),
              pytest.mark.slow]



def _block(rng: np.random.Generator, tail: str):
    """A bottleneck block on 16 channels: y = conv3x3(a); r = relu(conv1x1(relu(conv1x1(y)))
    + y), then ``tail``: "conv" (a blocked conv reads r), "mean" (a reduction reads r: NCHW),
    "self" (r2 = conv1x1(r) + r: r is that conv's input and its residual)."""
    ws = {n: (rng.standard_normal(s) * 0.2).astype(np.float32) for n, s in (
        ("w0", (16, 16, 3, 3)), ("w1", (32, 16, 1, 1)), ("w2", (16, 32, 1, 1)),
        ("w3", (16, 16, 3, 3)), ("w4", (16, 16, 1, 1)))}
    bias = rng.standard_normal(16).astype(np.float32)

    def f(a):
        y = nn.conv2d(a, rlx.param(ws["w0"], "w0"), None, padding=1)
        z = nn.relu(nn.conv2d(y, rlx.param(ws["w1"], "w1")))
        r = nn.relu(nn.conv2d(z, rlx.param(ws["w2"], "w2"), rlx.param(bias, "b2")) + y)
        if tail == "mean":
            return rlx.mean(r, axis=(2, 3))
        if tail == "self":
            r = nn.conv2d(r, rlx.param(ws["w4"], "w4")) + r
        return nn.conv2d(r, rlx.param(ws["w3"], "w3"), None, padding=1)

    return f


def _compile(f, x, monkeypatch: pytest.MonkeyPatch, on: bool):
    monkeypatch.setenv("RLX_ARENA_INPLACE", "1" if on else "0")
    return rlx.compile(f, x, target="cpu", record=False)


def _residual_convs(exe) -> dict[str, str]:
    return {n.name: n.inputs[-1] for n in exe.lir.nodes
            if n.op == "conv2d_fused" and n.attr("residual")}


@pytest.mark.parametrize("batch", [1, 3])
def test_a_conv_writes_over_its_dying_blocked_residual(monkeypatch: pytest.MonkeyPatch,
                                                       batch: int) -> None:
    skip_unless_simd()
    rng = np.random.default_rng(batch)
    f = _block(rng, "conv")
    x = rng.standard_normal((batch, 16, 9, 7)).astype(np.float32)
    exe = _compile(f, x, monkeypatch, True)
    (conv, res), = _residual_convs(exe).items()
    assert exe.lir.plan.written_over() == {conv: res}
    assert {conv, res} <= set(exe.program.info["nchw8c"])
    # the pair's pointers are not restrict (one buffer arrives twice)
    k = next(k for k in exe.lir.kernels if k.outputs == (conv,))
    head = next(line for line in exe.program.info["source"].splitlines()
                if line.startswith("static") and f"_{k.name}(" in line)
    j, o = k.inputs.index(res), 0
    assert f"const float*  in{j}," in head and f"float*  out{o}," in head
    got = exe(x)
    off = _compile(f, x, monkeypatch, False)
    assert off.lir.plan.written_over() == {}
    np.testing.assert_array_equal(got, off(x))  # the same kernels, the same sums
    want = rlx.compile(f, x, target="numpy", record=False)(x)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("tail", ["mean", "self"])
def test_no_share_across_layouts_or_over_the_convs_own_input(
        monkeypatch: pytest.MonkeyPatch, tail: str) -> None:
    skip_unless_simd()
    rng = np.random.default_rng(7)
    f = _block(rng, tail)
    x = rng.standard_normal((2, 16, 9, 7)).astype(np.float32)
    exe = _compile(f, x, monkeypatch, True)
    convs = _residual_convs(exe)
    over = exe.lir.plan.written_over()
    if tail == "mean":  # r is NCHW (the reduction reads it), y NCHW8c: no share
        (conv, res), = convs.items()
        assert conv not in exe.program.info["nchw8c"] and res in exe.program.info["nchw8c"]
        assert over == {}
    else:  # the second conv reads r as input and residual: only the first one shares
        first, second = convs
        assert over == {first: convs[first]} and second not in over
    want = rlx.compile(f, x, target="numpy", record=False)(x)
    np.testing.assert_allclose(exe(x), want, rtol=1e-4, atol=1e-4)


def test_an_elementwise_kernel_writes_over_its_dying_operand(
        monkeypatch: pytest.MonkeyPatch) -> None:
    def f(a):
        t = rlx.concat([a, a], axis=0)
        return rlx.concat([rlx.exp(t) + t, a], axis=0)

    x = np.linspace(-2, 2, 48, dtype=np.float32).reshape(6, 8)
    exe = _compile(f, x, monkeypatch, True)
    assert len(exe.lir.plan.written_over()) == 1
    got = exe(x)
    np.testing.assert_array_equal(got, _compile(f, x, monkeypatch, False)(x))
    np.testing.assert_allclose(got, rlx.compile(f, x, target="numpy", record=False)(x),
                               rtol=1e-5, atol=1e-6)
