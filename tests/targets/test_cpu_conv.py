"""The CPU's convolution kernels (cpu/conv.py) and the epilogue fold (passes/conv_epilogue.py)
against the numpy reference target, on small shapes: strides, pads, dilations, groups,
depthwise with a channel multiplier, odd sizes, batch > 1, 1x1 convs as plain GEMMs."""

from __future__ import annotations

import numpy as np
import pytest

import rlx_core as rlx
from rlx_core import nn
from rlx_core.targets.cpu.toolchain import find_compiler

pytestmark = pytest.mark.skipif(find_compiler() is None, reason="no C compiler for the cpu target")

# (x shape, w shape, stride, padding, dilation, groups)
CASES = [
    ((1, 8, 10, 10), (8, 8, 3, 3), (1, 1), (1, 1), (1, 1), 1),
    ((2, 5, 9, 7), (12, 5, 3, 3), (2, 2), (1, 1), (1, 1), 1),  # odd sizes, batch 2
    ((2, 16, 6, 6), (40, 16, 1, 1), (1, 1), (0, 0), (1, 1), 1),  # 1x1: the plain GEMM
    ((1, 64, 5, 4), (70, 64, 1, 1), (2, 2), (0, 0), (1, 1), 1),  # strided 1x1: im2col
    ((1, 3, 20, 18), (20, 3, 7, 7), (2, 2), (3, 3), (1, 1), 1),  # a stem conv
    ((1, 4, 9, 11), (6, 4, 3, 2), (1, 2), (2, 0), (2, 1), 1),  # dilation, uneven window
    ((1, 8, 9, 9), (8, 2, 3, 3), (1, 1), (2, 2), (2, 2), 4),  # grouped
    ((1, 6, 11, 13), (6, 1, 3, 3), (1, 1), (1, 1), (1, 1), 6),  # depthwise
    ((2, 6, 11, 13), (12, 1, 5, 5), (2, 2), (2, 2), (1, 1), 6),  # depthwise, multiplier 2
    ((1, 100, 5, 5), (130, 100, 3, 3), (1, 1), (1, 1), (1, 1), 1),  # several row blocks
    ((1, 4, 8, 9), (8, 1, 2, 3), (1, 1), (1, 2), (2, 1), 4),  # depthwise, generic taps
    ((1, 3, 3, 2), (3, 1, 3, 3), (1, 1), (1, 1), (1, 1), 3),  # depthwise, edges only
    ((1, 16, 16, 18), (20, 16, 5, 3), (1, 1), (2, 1), (1, 2), 1),  # shifted: dilated, uneven
    ((2, 16, 12, 12), (12, 8, 3, 3), (1, 1), (1, 1), (1, 1), 2),  # shifted: grouped, batch 2
    ((1, 8, 30, 30), (8, 8, 3, 3), (1, 1), (0, 0), (1, 1), 1),  # shifted: no padding, items
]
SHIFTED = CASES[-3:]  # conv.use_shifted picks the shifted kernel for these


def test_the_shifted_cases_take_the_shifted_kernel() -> None:
    from rlx_core.targets.cpu.conv import use_shifted

    for xs, ws, (sh, sw), (ph, pw), (dh, dw), groups in SHIFTED:
        h, w = xs[2:]
        kh, kw = ws[2:]
        oh = h + 2 * ph - dh * (kh - 1)
        ow = w + 2 * pw - dw * (kw - 1)
        assert use_shifted(ws[1], ws[0] // groups, h, w, kh, kw, sh, sw, ph, pw, dh, dw, oh, ow)
    # a 7x7 output and a wide layer keep the packed panels
    assert not use_shifted(512, 512, 7, 7, 3, 3, 1, 1, 1, 1, 1, 1, 7, 7)
    assert not use_shifted(256, 256, 28, 28, 3, 3, 1, 1, 1, 1, 1, 1, 28, 28)


def test_conv_kernels_match_the_reference() -> None:
    """Every case in one program (one C compile), every other one with a bias."""
    rng = np.random.default_rng(0)
    args: list[np.ndarray] = []
    for k, (xs, ws, *_) in enumerate(CASES):
        args += [rng.standard_normal(xs).astype(np.float32),
                 rng.standard_normal(ws).astype(np.float32)]
        if k % 2 == 0:
            args.append(rng.standard_normal(ws[0]).astype(np.float32))

    def f(*a):
        outs, it = [], iter(a)
        for k, (_, _, stride, pad, dil, groups) in enumerate(CASES):
            x, w = next(it), next(it)
            b = next(it) if k % 2 == 0 else None
            outs.append(nn.conv2d(x, w, b, stride=stride, padding=pad, dilation=dil,
                                  groups=groups))
        return tuple(outs)

    exe = rlx.compile(f, *args, target="cpu")
    assert {k["impl"] for k in exe.program.info["kernels"].values()} == {"rlx-conv", "rlx-conv-shifted"}
    got = exe(*args)
    want = rlx.compile(f, *args, target="numpy")(*args)
    for case, g_, w_ in zip(CASES, got, want, strict=True):
        w_ = np.asarray(w_)
        np.testing.assert_allclose(np.asarray(g_), w_, rtol=1e-4, atol=1e-4 * np.abs(w_).max(),
                                   err_msg=str(case))


@pytest.mark.slow  # compiles several conv programs: run first (tests/conftest.py)
def test_epilogue_folds_into_the_conv() -> None:
    """relu(conv(x) + x), then a depthwise conv with ReLU6, then a conv whose result is also
    returned (not folded): three conv kernels and nothing else."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 8, 9, 9)).astype(np.float32)
    w1 = rng.standard_normal((8, 8, 3, 3)).astype(np.float32) * 0.2
    b1 = rng.standard_normal(8).astype(np.float32)
    w2 = rng.standard_normal((8, 1, 3, 3)).astype(np.float32)
    w3 = rng.standard_normal((4, 8, 1, 1)).astype(np.float32)

    def f(x, w1, b1, w2, w3):
        y = nn.relu(nn.conv2d(x, w1, b1, padding=1) + x)
        z = rlx.minimum(rlx.maximum(nn.conv2d(y, w2, None, padding=1, groups=8), 0.0), 6.0)
        u = nn.conv2d(z, w3)
        return u, nn.relu(u)

    args = [x, w1, b1, w2, w3]
    exe = rlx.compile(f, *args, target="cpu")
    got = exe(*args)
    want = rlx.compile(f, *args, target="numpy")(*args)
    for g_, w_ in zip(got, want, strict=True):
        np.testing.assert_allclose(np.asarray(g_), np.asarray(w_), rtol=1e-4, atol=1e-4)
    ops = [n.op for n in exe.lir.nodes]
    fused = [n for n in exe.lir.nodes if n.op == "conv2d_fused"]
    assert sorted((n.attr("act"), bool(n.attr("residual"))) for n in fused) == [
        ("clip", False), ("max", True)], ops
    assert [n.op for n in exe.lir.nodes if n.op.startswith("conv")].count("conv2d") == 1


DEPTHWISE = [  # (x shape, w shape, stride, padding, dilation, groups)
    ((1, 6, 11, 13), (6, 1, 3, 3), (1, 1), (1, 1), (1, 1), 6),
    ((2, 6, 11, 13), (12, 1, 5, 5), (2, 2), (2, 2), (1, 1), 6),  # multiplier 2, odd planes
    ((1, 4, 8, 9), (8, 1, 2, 3), (1, 1), (1, 2), (2, 1), 4),  # dilation, uneven window
    ((1, 3, 7, 7), (3, 1, 3, 3), (2, 2), (1, 1), (2, 2), 3),  # stride 2 + dilation, 4x4 out
    ((1, 5, 4, 3), (5, 1, 3, 3), (1, 1), (0, 1), (1, 1), 5),  # uneven padding, tiny plane
    ((1, 2, 9, 9), (2, 1, 3, 3), (3, 3), (1, 1), (1, 1), 2),  # stride 3: rows only
]


@pytest.mark.parametrize("flat", ["1", "0"])
def test_depthwise_phase_planes_and_rows_match_the_reference(
        flat: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The depthwise kernels, on the phase planes (rlx_conv_dw_flat) and per row
    (RLX_CONV_DW_FLAT=0), with bias, residual and ReLU6 on every other case."""
    from rlx_core.targets.cpu.depthwise import use_dw_flat

    monkeypatch.setenv("RLX_CONV_DW_FLAT", flat)
    assert use_dw_flat(1, 1, 3, 3) == (flat == "1") and not use_dw_flat(3, 3, 3, 3)
    rng = np.random.default_rng(7)
    args: list[np.ndarray] = []
    for xs, ws, *_ in DEPTHWISE:
        args += [rng.standard_normal(xs).astype(np.float32),
                 rng.standard_normal(ws).astype(np.float32),
                 rng.standard_normal(ws[0]).astype(np.float32)]

    def f(*a):
        outs, it = [], iter(a)
        for k, (_, _, stride, pad, dil, groups) in enumerate(DEPTHWISE):
            x, w, b = next(it), next(it), next(it)
            y = nn.conv2d(x, w, b if k % 2 == 0 else None, stride=stride, padding=pad,
                          dilation=dil, groups=groups)
            if k % 2 == 1:
                y = rlx.minimum(rlx.maximum(y + y, 0.0), 6.0)
            outs.append(y)
        return tuple(outs)

    exe = rlx.compile(f, *args, target="cpu")
    src = "\n".join(exe.program.sources.values())
    assert ("rlx_conv_dw_flat(&geo" in src) == (flat == "1")
    want = rlx.compile(f, *args, target="numpy")(*args)
    for case, g_, w_ in zip(DEPTHWISE, exe(*args), want, strict=True):
        w_ = np.asarray(w_)
        np.testing.assert_allclose(np.asarray(g_), w_, rtol=1e-4, atol=1e-4 * np.abs(w_).max(),
                                   err_msg=str(case))


_NO_CHANNELS = """hir @no_channels {
  input %x : f32[2,4,6,6]
  input %w : f32[5,4,3,3]
  input %e : f32[2,0,6,6]
  input %w1 : f32[3,0,1,1]
  input %w2 : f32[3,0,2,2]
  input %b : f32[3]
  input %r : f32[2,3,7,5]
  input %s : f32[2,2,11,11]
  param %wp : f32[3,0,3,3]
  param %wz : f32[3,0,1,1]
  param %ws : f32[3,2,1,1]
  %0 : f32[2,5,6,6] = conv2d(%x, %w) {dilation=(1, 1), groups=1, padding=(1, 1), stride=(1, 1)}
  %1 : f32[2,3,6,6] = conv2d(%e, %w1, %b) {dilation=(1, 1), groups=1, padding=(0, 0), stride=(1, 1)}
  %2 : f32[2,3,7,5] = conv2d_fused(%e, %w2, %b, %r) {act="max", dilation=(1, 1), groups=3, hi=6.0, lo=0.0, padding=(1, 0), residual=true, stride=(1, 1)}
  %3 : f32[2,3,6,6] = conv2d(%e, %wp, %b) {dilation=(1, 1), groups=1, padding=(1, 1), stride=(1, 1)}
  %4 : f32[2,3,6,6] = conv2d(%e, %wz, %b) {dilation=(1, 1), groups=1, padding=(0, 0), stride=(1, 1)}
  %5 : f32[2,3,6,6] = conv2d(%s, %ws, %b) {dilation=(1, 1), groups=1, padding=(0, 0), stride=(2, 2)}
  %6 : f32[2,3,6,6] = add(%4, %5)
  return %0, %1, %2, %3, %6
}"""


def test_convolutions_of_no_input_channels_write_their_epilogue() -> None:
    """A convolution of 0 input channels is its bias, residual and activation over zeros. The
    implicit GEMM stored nothing once a kernel before it had taken the thread's scratch (the
    empty K loop never ran: found by the fuzzer, a zero-channel grouped conv after a depthwise
    one in a pack), and a 3x3 filter parameter on the blocked kernel (a "stem") or a projection
    pair with an empty side died of SIGFPE. Two calls: the second finds the scratch taken."""
    from rlx_core.ir.parser import parse

    g = parse(_NO_CHANNELS)
    rng = np.random.default_rng(3)
    g.param_data.update(wp=np.zeros((3, 0, 3, 3), np.float32),
                        wz=np.zeros((3, 0, 1, 1), np.float32),
                        ws=rng.standard_normal((3, 2, 1, 1)).astype(np.float32))
    args = [rng.standard_normal(v.type.shape).astype(np.float32) for v in g.inputs]
    exe = rlx.compile(g, target="cpu", record=False)
    impls = {k["impl"] for k in exe.program.info["kernels"].values()}
    assert impls <= {"rlx-conv", "generated-elementwise"}  # not blocked, not a pair
    want = [np.asarray(v) for v in rlx.compile(g, target="numpy", record=False)(*args)]
    for _ in range(2):
        for got, w_ in zip(exe(*args), want, strict=True):
            np.testing.assert_allclose(np.asarray(got), w_, rtol=1e-5, atol=1e-5)
