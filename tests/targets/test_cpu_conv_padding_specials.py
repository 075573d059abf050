"""A convolution's padding is zeros, so a weight that is inf or NaN on a tap over the padding
makes that output NaN (0 * inf): the reference pads with np.pad, the decomposition with
pad_hw. The depthwise kernels that skip the taps outside the input (rlx_conv_dw_row,
rlx_dw_b) set those outputs afterwards (depthwise.py: rlx_dw_pad_nan). Found by the cpu fuzz
(seed 20261206, case 20526/9487: a one-channel conv with stride (1, 2), an inf weight,
2 of 6 outputs 0 instead of NaN; tests/fuzz/cases holds the shrunk case)."""

from __future__ import annotations

import numpy as np
import pytest

import rlx_core as rlx
from rlx_core import nn
from rlx_core.targets.cpu.toolchain import find_compiler

pytestmark = pytest.mark.skipif(find_compiler() is None, reason="no C compiler for the cpu target")

# (x shape, w shape, stride, padding, dilation, groups): every kernel family
CASES = [
    ((1, 1, 3, 3), (2, 1, 3, 1), (1, 2), (1, 1), (2, 1), 1),  # the fuzz case: dw rows
    ((1, 1, 3, 3), (2, 1, 3, 1), (1, 1), (1, 1), (1, 1), 1),  # dw phase planes
    ((1, 4, 7, 9), (4, 1, 3, 3), (3, 3), (1, 1), (1, 1), 4),  # dw rows, stride 3
    ((1, 4, 9, 20), (8, 1, 3, 3), (1, 1), (1, 1), (1, 1), 4),  # dw, multiplier 2, wide rows
    ((1, 3, 6, 6), (4, 3, 3, 3), (1, 2), (1, 1), (1, 1), 1),  # implicit GEMM (packed cols)
    ((1, 16, 16, 18), (20, 16, 5, 3), (1, 1), (2, 1), (1, 2), 1),  # shifted
]
SPECIALS = [np.inf, -np.inf, np.nan]


def _inputs(rng: np.random.Generator, special: float) -> list[np.ndarray]:
    args = []
    for xs, ws, *_ in CASES:
        w = rng.standard_normal(ws).astype(np.float32)
        w[0, 0, 0, 0] = special  # the top-left tap: over the padding at the top-left outputs
        w[-1, -1, -1, -1] = special if ws[2] * ws[3] > 1 else w[-1, -1, -1, -1]
        args += [rng.standard_normal(xs).astype(np.float32), w]
    return args


def _same(got: np.ndarray, want: np.ndarray, what: str) -> None:
    got, want = np.asarray(got), np.asarray(want)
    assert (np.isnan(got) == np.isnan(want)).all(), (
        f"{what}: NaN at {np.argwhere(np.isnan(got) != np.isnan(want))[:4].tolist()} differs")
    keep = ~np.isnan(want)
    np.testing.assert_allclose(got[keep], want[keep], rtol=1e-4, atol=1e-4, err_msg=what)


@pytest.mark.parametrize("flat", ["1", "0"])
@pytest.mark.parametrize("family", ["native", "avx2"])
def test_nonfinite_weight_over_padding_is_nan(family: str, flat: str,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """Each kernel family, on this CPU's own ISA path and the AVX2 one, with the depthwise
    phase planes on and off (RLX_CONV_DW_FLAT=0: every depthwise conv per row)."""
    from rlx_core.targets.cpu import isa

    if family != "native" and family not in isa.forced_paths():
        pytest.skip(f"this CPU does not run the {family} path")
    monkeypatch.setenv("RLX_CPU_ISA", family)
    monkeypatch.setenv("RLX_CONV_DW_FLAT", flat)

    def f(*a):
        return tuple(nn.conv2d(a[2 * k], a[2 * k + 1], stride=s, padding=p, dilation=d,
                               groups=g) for k, (_, _, s, p, d, g) in enumerate(CASES))

    rng = np.random.default_rng(11)
    for special in SPECIALS:
        args = _inputs(rng, special)
        exe = rlx.compile(f, *args, target="cpu", record=False)
        want = rlx.compile(f, *args, target="numpy", record=False)(*args)
        for case, got, ref in zip(CASES, exe(*args), want, strict=True):
            assert np.isnan(np.asarray(ref)).any(), f"{case}: the case reaches no padding"
            _same(got, ref, f"{case} weight {special}")


def test_blocked_depthwise_nonfinite_weight_over_padding_is_nan() -> None:
    """NCHW8c (rlx_dw_b, between two 1x1 convs so layout.py keeps it blocked): an inf tap in
    one channel and a -inf tap in another (a NaN tap would make every output NaN), a
    parameter filter, bias and ReLU6; the 1x1 conv after it carries a NaN pixel to all its
    channels, the other pixels stay finite."""
    comp = find_compiler()
    if not (comp.avx2_fma or comp.avx512):
        pytest.skip("the blocked kernels are picked only where the compiler targets AVX2 + FMA")
    c = 16
    rng = np.random.default_rng(12)
    e, s = (rng.standard_normal((c, c, 1, 1)).astype(np.float32) * 0.3 for _ in range(2))
    d = rng.standard_normal((c, 1, 3, 3)).astype(np.float32) * 0.3
    d[3, 0, 0, 0], d[12, 0, 2, 1] = np.inf, -np.inf
    b = rng.standard_normal(c).astype(np.float32)

    def f(x):
        z = nn.conv2d(x, rlx.param(e, "e"))
        y = nn.conv2d(z, rlx.param(d, "d"), rlx.param(b, "b"), padding=1, groups=c)
        return nn.conv2d(rlx.minimum(rlx.maximum(y, 0.0), 6.0), rlx.param(s, "s"))

    x = rng.standard_normal((2, c, 9, 10)).astype(np.float32)
    exe = rlx.compile(f, x, target="cpu", record=False)
    assert "rlx-conv-blocked-dw" in {k["impl"] for k in exe.program.info["kernels"].values()}
    want = np.asarray(rlx.compile(f, x, target="numpy", record=False)(x))
    assert np.isnan(want).any() and not np.isnan(want).all()
    _same(exe(x), want, "blocked depthwise, then a 1x1 conv")
