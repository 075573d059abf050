"""The CPU's depthwise convolution in NCHW8c (rlx_core/targets/cpu/depthwise.py: rlx_dw_b)
against the numpy reference: windows 3x3 and 5x5 at stride 1 and 2 (the unrolled copies) and
the generic path (7x7, uneven, dilated, stride 3), outputs from 1x1 to 9x8 so a row is all
edges, all inner groups of pixels, or both (AVX-512: 3x3 maps up to 16 wide through the
padded small-map copy, odd widths with a last ymm pixel); bias, ReLU6 and a residual. Each
depthwise conv sits between two 1x1 convs so layout.py keeps it blocked; every case is one output of one
program (one C compile)."""

from __future__ import annotations

import numpy as np
import pytest

import rlx_core as rlx
from rlx_core import nn
from rlx_core.targets.cpu.target import CpuTarget
from tests.targets.simd import skip_unless_simd

cpu_ok, cpu_why = CpuTarget().available()
pytestmark = pytest.mark.skipif(not cpu_ok, reason=f"cpu target unavailable: {cpu_why}")

C = 16  # channels: two blocks of 8, enough for the 1x1 convs to run blocked
# (h, w, kernel, stride, padding, dilation, bias, relu6, residual)
CASES = [
    (7, 7, (3, 3), (1, 1), (1, 1), (1, 1), True, True, False),  # MobileNetV2's 7x7 layers
    (4, 4, (3, 3), (1, 1), (1, 1), (1, 1), True, True, True),  # 4x4: 2 of 4 columns edges
    (14, 13, (3, 3), (1, 1), (1, 1), (1, 1), False, False, True),  # inner groups + the rest
    (5, 16, (3, 3), (1, 1), (1, 1), (1, 1), True, True, True),  # 14 inner: groups 8, 4, 2
    (9, 11, (3, 3), (2, 2), (1, 1), (1, 1), True, True, False),  # stride 2, odd sizes
    (3, 2, (3, 3), (1, 1), (1, 1), (1, 1), True, False, False),  # every column an edge
    (1, 1, (3, 3), (1, 1), (1, 1), (1, 1), True, True, False),  # one pixel, one tap
    (8, 9, (5, 5), (1, 1), (2, 2), (1, 1), True, False, True),  # 5x5
    (10, 7, (5, 5), (2, 2), (2, 2), (1, 1), False, True, False),  # 5x5 stride 2
    (9, 8, (7, 7), (1, 1), (3, 3), (1, 1), True, True, False),  # generic taps, wide pad
    (9, 10, (2, 3), (1, 2), (1, 0), (2, 1), True, False, False),  # uneven, dilated
    (11, 10, (3, 3), (3, 3), (0, 1), (1, 1), False, True, False),  # stride 3, no row pad
    (6, 6, (3, 3), (1, 1), (0, 0), (1, 1), True, False, False),  # no padding: no edges
    (3, 16, (3, 3), (1, 1), (1, 1), (1, 1), True, True, True),  # small map, 8 pixel pairs
]


def _program(rng: np.random.Generator):
    arrays: dict[str, np.ndarray] = {}

    def p(shape, name):
        if name not in arrays:
            arrays[name] = (rng.standard_normal(shape) * 0.3).astype(np.float32)
        return rlx.param(arrays[name], name)

    def f(*xs):
        outs = []
        for i, (x, (_, _, k, s, pad, dil, bias, relu6, res)) in enumerate(
                zip(xs, CASES, strict=True)):
            z = nn.conv2d(x, p((C, C, 1, 1), f"e{i}"))  # blocked output
            y = nn.conv2d(z, p((C, 1, *k), f"d{i}"), p((C,), f"b{i}") if bias else None,
                          stride=s, padding=pad, dilation=dil, groups=C)
            if res:  # same geometry: the residual fold (stride 1, same size)
                y = y + z
            if relu6:
                y = rlx.minimum(rlx.maximum(y, 0.0), 6.0)
            outs.append(nn.conv2d(y, p((C, C, 1, 1), f"s{i}")))  # reads it blocked
        return tuple(outs)

    return f


@pytest.mark.parametrize("family", ["native", "avx2"])
def test_blocked_depthwise_matches_the_reference(family: str,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """On this CPU's own ISA path and on the AVX2 one (AVX-512 runs stride-1 interiors two
    pixels a vector, in groups of 8 and 2 pixels, the rest as AVX2 does)."""
    from rlx_core.targets.cpu import isa

    if family != "native" and family not in isa.forced_paths():
        pytest.skip(f"this CPU does not run the {family} path")
    monkeypatch.setenv("RLX_CPU_ISA", family)
    skip_unless_simd()
    rng = np.random.default_rng(0)
    f = _program(rng)
    xs = [rng.standard_normal((2, C, h, w)).astype(np.float32) for h, w, *_ in CASES]
    exe = rlx.compile(f, *xs, target="cpu", record=False)
    info = exe.program.info
    dw = [k for k in info["kernels"].values() if k["impl"] == "rlx-conv-blocked-dw"]
    assert len(dw) == len(CASES), "every depthwise conv runs blocked"
    want = rlx.compile(f, *xs, target="numpy", record=False)(*xs)
    for i, (got, ref) in enumerate(zip(exe(*xs), want, strict=True)):
        err = float(np.abs(got - ref).max() / max(np.abs(ref).max(), 1e-30))
        assert err < 1e-5, f"case {i} {CASES[i]}: relative error {err:.2e}"


def test_blocked_depthwise_runs_backward_over_a_large_batch(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """An input above conv_blocked.L3_BYTES (0 here) is read from the last (image, block) item
    to the first, where the conv before it left it in the cache; same results, residual and
    epilogue included, 3 images."""
    skip_unless_simd()
    from rlx_core.targets.cpu import conv_blocked
    from rlx_core.targets.cpu.renderer import render_program

    monkeypatch.setattr(conv_blocked, "L3_BYTES", 0)
    rng = np.random.default_rng(4)
    e, d, s = (rng.standard_normal(sh).astype(np.float32) * 0.3
               for sh in ((C, C, 1, 1), (C, 1, 3, 3), (C, C, 1, 1)))
    b = rng.standard_normal(C).astype(np.float32)

    def f(x):
        z = nn.conv2d(x, rlx.param(e, "e"))
        y = nn.conv2d(z, rlx.param(d, "d"), rlx.param(b, "b"), padding=1, groups=C) + z
        return nn.conv2d(rlx.minimum(rlx.maximum(y, 0.0), 6.0), rlx.param(s, "s"))

    x = rng.standard_normal((3, C, 9, 10)).astype(np.float32)
    exe = rlx.compile(f, x, target="cpu", record=False)
    assert "rlx-conv-blocked-dw" in {k["impl"] for k in exe.program.info["kernels"].values()}
    assert f"const int64_t it = {3 * C // 8 - 1} - ir;" in render_program(exe.lir).source
    want = rlx.compile(f, x, target="numpy", record=False)(x)
    got = exe(x)
    assert float(np.abs(got - want).max() / np.abs(want).max()) < 1e-5
