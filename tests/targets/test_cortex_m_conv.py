"""cortex-m conv2d NHWC, depthwise conv, max / average pooling (csrc/rlx_conv.h) under QEMU,
bit for bit against the numpy int8 reference (targets/numpy_ref/quant_conv.py).

Each case is one kernel call run alone (cortex_m/harness.py), several random inputs per
emulator launch, with padding, strides, odd sizes, both zero points and extreme inputs."""

from __future__ import annotations

import numpy as np
import pytest

from rlx_core.targets.cortex_m.harness import kernel_firmware, window
from rlx_core.targets.numpy_ref import quant_conv as ref
from rlx_core.targets.registry import get_target

OK, WHY = get_target("cortex-m").available()
pytestmark = pytest.mark.skipif(not OK, reason=f"cortex-m cannot run here: {WHY}")
CALLS = 4


def _inputs(rng, dtype: str, shape: tuple[int, ...]) -> list[np.ndarray]:
    lo, hi = (0, 255) if dtype == "u8" else (-128, 127)
    npt = np.uint8 if dtype == "u8" else np.int8
    xs = [rng.integers(lo, hi + 1, shape).astype(npt) for _ in range(CALLS)]
    xs[0][:] = hi  # the largest accumulators
    xs[1][:] = lo
    return xs


@pytest.mark.parametrize("dtype,board,dsp,stride,pad", [
    ("u8", "mps2-an386", True, (1, 1), (1, 1)),
    ("s8", "mps2-an386", False, (2, 1), (0, 2)),
    ("s8", "mps2-an505", True, (2, 2), (1, 0)),
])
def test_conv2d_nhwc(dtype, board, dsp, stride, pad):
    rng = np.random.default_rng(1)
    n, h, w, c, o, kh, kw = 2, 7, 6, 3, 5, 3, 2
    dt = "u8" if dtype == "u8" else "i8"
    wt = rng.integers(-127, 128, (o, kh, kw, c)).astype(np.int8)
    bias = rng.integers(-3000, 3000, o).astype(np.int32)
    xzp, wzp = (9 if dt == "u8" else -5), 2
    init, (oh, ow) = window(n, h, w, c, (kh, kw), stride, pad)
    call = (f"static const rlx_win_t g = {init}; "
            f"rlx_conv_nhwc_{dtype}(x, wt, bias, {xzp}, {wzp}, y, &g, {o});")
    fw = kernel_firmware(call, [("x", dt, (n, h, w, c))], [("y", "i32", (n, oh, ow, o))],
                         {"wt": wt, "bias": bias}, board=board, dsp=dsp)
    xs = _inputs(rng, dt, (n, h, w, c))
    res = fw.run_calls([[x] for x in xs])
    for x, got in zip(xs, res.outputs, strict=True):
        want = ref.int_conv2d_nhwc(x, wt, bias, xzp, wzp, stride, pad)
        assert got[0].dtype == np.int32 and np.array_equal(got[0], want)
    assert min(res.instructions) > 0


@pytest.mark.parametrize("dtype,stride,pad", [("u8", (1, 1), (1, 1)), ("s8", (2, 2), (2, 1))])
def test_depthwise_nhwc(dtype, stride, pad):
    rng = np.random.default_rng(2)
    n, h, w, c, kh, kw = 1, 6, 7, 4, 3, 3
    dt = "u8" if dtype == "u8" else "i8"
    wt = rng.integers(-127, 128, (kh, kw, c)).astype(np.int8)
    bias = rng.integers(-3000, 3000, c).astype(np.int32)
    xzp, wzp = (128 if dt == "u8" else 3), -1
    init, (oh, ow) = window(n, h, w, c, (kh, kw), stride, pad)
    call = (f"static const rlx_win_t g = {init}; "
            f"rlx_dwconv_nhwc_{dtype}(x, wt, bias, {xzp}, {wzp}, y, &g);")
    fw = kernel_firmware(call, [("x", dt, (n, h, w, c))], [("y", "i32", (n, oh, ow, c))],
                         {"wt": wt, "bias": bias})
    xs = _inputs(rng, dt, (n, h, w, c))
    for x, got in zip(xs, fw.run_calls([[x] for x in xs]).outputs, strict=True):
        assert np.array_equal(got[0], ref.int_depthwise_nhwc(x, wt, bias, xzp, wzp, stride, pad))


@pytest.mark.parametrize("kind,dtype,kernel,stride,pad,clamp", [
    ("max", "s8", (2, 2), (2, 2), (0, 0), (-128, 127)),
    ("max", "u8", (3, 3), (2, 2), (1, 1), (20, 255)),  # a fused relu: lo is the zero point
    ("avg", "s8", (3, 3), (2, 2), (1, 1), (-128, 127)),
    ("avg", "u8", (2, 3), (1, 2), (1, 1), (0, 200)),
])
def test_pooling_nhwc(kind, dtype, kernel, stride, pad, clamp):
    rng = np.random.default_rng(3)
    n, h, w, c = 2, 7, 8, 3
    dt = "u8" if dtype == "u8" else "i8"
    init, (oh, ow) = window(n, h, w, c, kernel, stride, pad)
    call = (f"static const rlx_win_t g = {init}; "
            f"rlx_{kind}pool_nhwc_{dtype}(x, y, &g, {clamp[0]}, {clamp[1]});")
    fw = kernel_firmware(call, [("x", dt, (n, h, w, c))], [("y", dt, (n, oh, ow, c))], {})
    fn = ref.max_pool_nhwc if kind == "max" else ref.avg_pool_nhwc
    xs = _inputs(rng, dt, (n, h, w, c))
    for x, got in zip(xs, fw.run_calls([[x] for x in xs]).outputs, strict=True):
        want = fn(x, kernel, stride, pad, *clamp)
        assert got[0].dtype == want.dtype and np.array_equal(got[0], want)


def test_reference_matches_float_conv():
    """The int reference itself: centred int8 values through a float conv give the same sums."""
    import torch

    rng = np.random.default_rng(4)
    x = rng.integers(0, 256, (1, 5, 6, 2)).astype(np.uint8)
    wt = rng.integers(-127, 128, (3, 3, 3, 2)).astype(np.int8)
    got = ref.int_conv2d_nhwc(x, wt, None, 7, 1, (1, 2), (1, 1))
    xt = torch.tensor(x.astype(np.float64) - 7).permute(0, 3, 1, 2)
    wf = torch.tensor(wt.astype(np.float64) - 1).permute(0, 3, 1, 2)
    # torch pads with 0 = the zero point after centring, as the kernel skips padded taps
    want = torch.nn.functional.conv2d(xt, wf, stride=(1, 2), padding=1).permute(0, 2, 3, 1)
    assert np.array_equal(got, want.numpy().astype(np.int64))
    avg = ref.avg_pool_nhwc(np.array([[[[5], [-6]], [[0], [0]]]], np.int8), (2, 2), (2, 2))
    assert avg.item() == 0  # -1 / 4 = -0.25 rounds to 0; (5 - 6 + 0 + 0) / 4
    assert ref.avg_pool_nhwc(np.array([[[[3], [3]], [[0], [0]]]], np.int8), (2, 2),
                             (2, 2)).item() == 2  # 6 / 4 = 1.5 rounds away from zero
