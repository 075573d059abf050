"""The Winograd convolution (rlx_core/targets/cpu/winograd.py): 3x3 stride-1 groups-1 convs with
a parameter filter on F(4x4, 3x3) and F(2x2, 3x3), against the numpy reference: odd sizes
(partial tiles at the right and bottom), padding 0 and 1, batch > 1 (tiles of several images in
one item), every epilogue (bias, residual, ReLU, clip), NCHW8c sides in a chain, a filter bound
again (prepacked U and the filter transformed on the fly); what stays direct (stride 2, 1x1, 5x5, dilation, groups, channels not whole blocks);
the rule (conv.winograd_tile)."""

from __future__ import annotations

import numpy as np
import pytest

import rlx_core as rlx
from rlx_core import nn
from rlx_core.targets.cpu import conv, winograd
from rlx_core.targets.cpu.target import CpuTarget
from tests.targets.checks import rel_error
from tests.targets.simd import skip_unless_simd

cpu_ok, cpu_why = CpuTarget().available()
# slow: each test compiles programs with the blocked conv kernels (tens of seconds of C
# compile apiece on a cold cache); tests/conftest.py runs slow tests first
pytestmark = [pytest.mark.skipif(not cpu_ok, reason=f"cpu target unavailable: {cpu_why}"),
              pytest.mark.slow]
WINO = "rlx-conv-winograd"
NO_WINOGRAD = "Winograd runs on the blocked tile, picked only with AVX2 + FMA"


def _impls(exe) -> list[str]:
    return [k["impl"] for k in exe.program.info["kernels"].values()]


# (x shape, output channels, padding, epilogue)
CASES = [
    ((1, 16, 8, 8), 16, 1, "bias"),  # whole tiles
    ((2, 24, 9, 7), 32, 1, "relu"),  # odd sizes: partial tiles, 2 images, no bias
    ((3, 16, 10, 13), 8, 0, "clip"),  # unpadded, 3 images, one block of outputs
    ((1, 32, 11, 6), 24, 1, "residual"),  # bias + residual + ReLU (conv2d_fused)
    ((1, 16, 9, 9), 16, 1, "bias"),  # odd tile counts (9, 25): AVX-512's pairs get a zero tile
]


@pytest.mark.parametrize(("m", "family", "lazy"),
                         [(4, "native", "0"), (2, "native", "0"), (4, "avx2", "0"),
                          (4, "native", "1"), (2, "native", "1"), (4, "avx2", "1")])
def test_winograd_matches_the_reference(m: int, family: str, lazy: str,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """Every case in one program (one C compile), forced onto F(m, 3), on this CPU's own ISA
    path and on the AVX2 one (AVX-512 transforms two tiles a vector), with U prepacked and
    (lazy) transformed in each call from the direct kernel's packing, where the output
    channels are whole panels of 16 (the others keep U prepacked)."""
    from rlx_core.targets.cpu import isa

    if family != "native" and family not in isa.forced_paths():
        pytest.skip(f"this CPU does not run the {family} path")
    monkeypatch.setenv("RLX_CPU_ISA", family)
    skip_unless_simd(NO_WINOGRAD)
    monkeypatch.setenv("RLX_WINOGRAD", str(m))
    monkeypatch.setenv("RLX_WG_LAZY", lazy)
    rng = np.random.default_rng(m)
    xs = [rng.standard_normal(c[0]).astype(np.float32) for c in CASES]
    ws = [(rng.standard_normal((o, s[1], 3, 3)) / np.sqrt(9 * s[1])).astype(np.float32)
          for s, o, _, _ in CASES]
    bs = [rng.standard_normal(o).astype(np.float32) for _, o, _, _ in CASES]
    rs = [rng.standard_normal((s[0], o, s[2] + 2 * p - 2, s[3] + 2 * p - 2)).astype(np.float32)
          for s, o, p, _ in CASES]

    def f(*a):
        outs = []
        for k, (x, (_, _, pad, epi)) in enumerate(zip(a[:len(CASES)], CASES, strict=True)):
            y = nn.conv2d(x, rlx.param(ws[k], f"w{k}"),
                          None if epi == "relu" else rlx.param(bs[k], f"b{k}"), padding=pad)
            if epi == "relu":
                y = nn.relu(y)
            elif epi == "clip":
                y = rlx.minimum(rlx.maximum(y, 0.0), 6.0)
            elif epi == "residual":
                y = nn.relu(y + a[len(CASES)])
            outs.append(y)
        return tuple(outs)

    args = [*xs, rs[3]]
    exe = rlx.compile(f, *args, target="cpu", record=False)
    assert _impls(exe) == [WINO] * len(CASES)
    fused = [n for n in exe.lir.nodes if n.op == "conv2d_fused"]
    assert any(n.attr("residual") for n in fused)
    packed = {p["param"]: p for p in exe.program.info["prepacked"]}
    kinds = {f"w{k}": "winolazy" if lazy == "1" and o % 16 == 0 else f"wino{m}"
             for k, (_, o, _, _) in enumerate(CASES)}
    assert {k: p["kind"] for k, p in packed.items()} == kinds
    assert packed["w1"]["bytes"] == (winograd.lazy_packed_bytes(32, 24) if lazy == "1"
                                     else winograd.packed_bytes(32, 24, m))
    want = rlx.compile(f, *args, target="numpy", record=False)(*args)
    for _ in range(2):  # the second call reads the filters packed by the first
        for case, g_, w_ in zip(CASES, exe(*args), want, strict=True):
            assert rel_error(g_, w_) < 1e-5, case


def test_blocked_sides_in_a_chain() -> None:
    """Two Winograd convs and a 1x1 between them: NCHW8c inputs, outputs and a residual
    (layout.py), by the rule's own choice (F(4, 3) at 28 x 28, on the fly at 16 x 16 and
    3 x 9 x 9, F(2, 3) on 7 x 7)."""
    skip_unless_simd(NO_WINOGRAD)
    rng = np.random.default_rng(5)
    w1 = (rng.standard_normal((32, 16, 3, 3)) * 0.1).astype(np.float32)
    w2 = (rng.standard_normal((32, 32, 1, 1)) * 0.2).astype(np.float32)
    w3 = (rng.standard_normal((32, 32, 3, 3)) * 0.1).astype(np.float32)
    b3 = rng.standard_normal(32).astype(np.float32)

    def f(a):
        y = nn.relu(nn.conv2d(a, rlx.param(w1, "w1"), None, padding=1))
        z = nn.conv2d(y, rlx.param(w2, "w2"))
        return nn.relu(nn.conv2d(z, rlx.param(w3, "w3"), rlx.param(b3, "b3"), padding=1) + y)

    # 3 images of 9 x 9: 27 tiles, pairs across images and a lone last one (AVX-512)
    for shape, kind in (((1, 16, 28, 28), "wino4"), ((1, 16, 16, 16), "winolazy"),
                        ((1, 16, 7, 7), "wino2"), ((3, 16, 9, 9), "winolazy")):
        x = rng.standard_normal(shape).astype(np.float32)
        exe = rlx.compile(f, x, target="cpu", record=False)
        assert _impls(exe).count(WINO) == 2
        assert {p["kind"] for p in exe.program.info["prepacked"]} == {kind, "conv"}
        assert len(exe.program.info["nchw8c"]) >= 2  # y and z stay blocked
        want = rlx.compile(f, x, target="numpy", record=False)(x)
        assert rel_error(exe(x), want) < 1e-5


def test_what_stays_direct(monkeypatch: pytest.MonkeyPatch) -> None:
    """Even forced, only 3x3 stride-1 undilated groups-1 convs on whole blocks of 8 channels
    run on Winograd."""
    skip_unless_simd(NO_WINOGRAD)
    monkeypatch.setenv("RLX_WINOGRAD", "4")
    rng = np.random.default_rng(6)
    x = rng.standard_normal((1, 16, 12, 12)).astype(np.float32)
    x12 = rng.standard_normal((1, 12, 12, 12)).astype(np.float32)

    arrays: dict[str, np.ndarray] = {}  # drawn once: f is traced once per target

    def p(shape, name):
        if name not in arrays:
            arrays[name] = (rng.standard_normal(shape) * 0.2).astype(np.float32)
        return rlx.param(arrays[name], name)

    def f(a, a12):
        return (nn.conv2d(a, p((16, 16, 3, 3), "s2"), None, stride=2, padding=1),
                nn.conv2d(a, p((16, 16, 1, 1), "k1")),
                nn.conv2d(a, p((16, 16, 5, 5), "k5"), None, padding=2),
                nn.conv2d(a, p((16, 16, 3, 3), "dil"), None, padding=2, dilation=2),
                nn.conv2d(a, p((16, 8, 3, 3), "grp"), None, padding=1, groups=2),
                nn.conv2d(a12, p((16, 12, 3, 3), "c12"), None, padding=1),
                nn.conv2d(a, p((12, 16, 3, 3), "o12"), None, padding=1))

    exe = rlx.compile(f, x, x12, target="cpu", record=False)
    assert WINO not in _impls(exe)
    assert not any(p["kind"].startswith("wino") for p in exe.program.info["prepacked"])
    want = rlx.compile(f, x, x12, target="numpy", record=False)(x, x12)
    for g_, w_ in zip(exe(x, x12), want, strict=True):
        assert rel_error(g_, w_) < 1e-5


def test_binding_another_filter_transforms_it_again() -> None:
    skip_unless_simd(NO_WINOGRAD)
    rng = np.random.default_rng(7)
    x = rng.standard_normal((1, 16, 12, 12)).astype(np.float32)
    w = rng.standard_normal((16, 16, 3, 3)).astype(np.float32)
    exe = rlx.compile(lambda a: nn.conv2d(a, rlx.param(w, "w"), None, padding=1), x,
                      target="cpu", record=False)
    assert _impls(exe) == [WINO]
    ref = rlx.compile(lambda a, wi: nn.conv2d(a, wi, None, padding=1), x, w, target="numpy",
                      record=False)
    assert rel_error(exe(x), ref(x, w)) < 1e-5
    w_new = rng.standard_normal((16, 16, 3, 3)).astype(np.float32)
    exe.params["w"] = w_new
    assert rel_error(exe(x), ref(x, w_new)) < 1e-5


@pytest.mark.parametrize(("m", "family"), [(4, "native"), (2, "native"), (4, "avx2")])
def test_a_nonfinite_filter_matches_the_reference(m: int, family: str,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """An inf, a -inf and a NaN in a parameter filter: Winograd's transforms would make every
    output of those channels NaN (inf - inf), where the convolution gives +-inf, and NaN only
    where an inf weight meets a zero (of the padding too). Such a filter runs rlx_wg_direct;
    bound again finite, the same program is Winograd's again. One conv on NCHW sides, one
    with an NCHW8c input and residual (layout.py, between a 1x1 and a residual)."""
    from rlx_core.targets.cpu import isa

    if family != "native" and family not in isa.forced_paths():
        pytest.skip(f"this CPU does not run the {family} path")
    monkeypatch.setenv("RLX_CPU_ISA", family)
    skip_unless_simd(NO_WINOGRAD)
    monkeypatch.setenv("RLX_WINOGRAD", str(m))
    rng = np.random.default_rng(20 + m)
    wa = (rng.standard_normal((24, 16, 3, 3)) * 0.1).astype(np.float32)
    w1 = (rng.standard_normal((16, 16, 1, 1)) * 0.2).astype(np.float32)
    wb = (rng.standard_normal((16, 16, 3, 3)) * 0.1).astype(np.float32)
    ba, bb = (rng.standard_normal(n).astype(np.float32) for n in (24, 16))
    finite = {"wa": wa.copy(), "wb": wb.copy()}
    wa[3, 5, 0, 0], wa[10, 2, 1, 1], wa[17, 0, 2, 2] = np.inf, -np.inf, np.nan
    wb[6, 9, 2, 0] = -np.inf

    def f(x):
        y = nn.conv2d(x, rlx.param(wa, "wa"), rlx.param(ba, "ba"), padding=1)
        z = nn.conv2d(x, rlx.param(w1, "w1"))
        return y, nn.conv2d(z, rlx.param(wb, "wb"), rlx.param(bb, "bb"), padding=1) + x

    x = rng.standard_normal((2, 16, 9, 7)).astype(np.float32)
    exe = rlx.compile(f, x, target="cpu", record=False)
    assert _impls(exe).count(WINO) == 2
    assert exe.program.info["nchw8c"], "the second conv's sides are not blocked"
    kinds = {p["param"]: p["kind"] for p in exe.program.info["prepacked"]}
    assert kinds["wb"] == ("winolazy" if m == 4 else f"wino{m}")  # either packing's flag
    ref = rlx.compile(lambda a, p, q: (nn.conv2d(a, p, ba, padding=1),
                                       nn.conv2d(nn.conv2d(a, w1), q, bb, padding=1) + a),
                      x, wa, wb, target="numpy", record=False)
    want = ref(x, wa, wb)
    for w_ in want:
        w_ = np.asarray(w_)
        assert np.isinf(w_).any() and np.isnan(w_).any() and np.isfinite(w_).any()
    for _ in range(2):  # the second call reads the packed filters and their flags
        for g_, w_ in zip(exe(x), want, strict=True):
            np.testing.assert_allclose(np.asarray(g_), np.asarray(w_), rtol=1e-5, atol=1e-5)
    exe.params["wa"], exe.params["wb"] = finite["wa"], finite["wb"]
    for g_, w_ in zip(exe(x), ref(x, finite["wa"], finite["wb"]), strict=True):
        assert rel_error(g_, w_) < 1e-5


def test_the_rule(monkeypatch: pytest.MonkeyPatch) -> None:
    """F(m, 3) while the batch has WINO_MIN_TILES[m] of its tiles, larger m first, else direct;
    the switch turns it off."""
    monkeypatch.delenv("RLX_WINOGRAD", raising=False)
    monkeypatch.delenv("RLX_CONV_BLOCKED", raising=False)

    def tile(n: int, c: int, o: int, hw: int, s: int = 1, k: int = 3, groups: int = 1) -> int:
        return conv.winograd_tile(n, c, o, groups, k, k, s, s, 1, 1, hw, hw)

    assert tile(1, 64, 64, 28) == 4  # ResNet-50's first stage at 112 x 112
    assert tile(1, 256, 256, 7) == 2  # 4 tiles of F(4, 3), 16 of F(2, 3)
    assert tile(8, 256, 256, 7) == 4
    assert tile(1, 512, 512, 4) == 0  # 1 tile of F(4, 3), 4 of F(2, 3): direct
    assert tile(8, 512, 512, 4) == 4
    assert tile(1, 8, 64, 28) == 0  # too few input channels
    assert tile(1, 64, 64, 28, s=2) == tile(1, 64, 64, 28, k=1) == 0
    assert tile(1, 64, 64, 28, groups=2) == tile(1, 60, 64, 28) == 0
    monkeypatch.setenv("RLX_WINOGRAD", "0")
    assert tile(1, 64, 64, 28) == 0
    monkeypatch.setenv("RLX_WINOGRAD", "2")
    assert tile(1, 64, 64, 28) == 2


def test_the_filter_on_the_fly_rule(monkeypatch: pytest.MonkeyPatch) -> None:
    """F(4, 3) items of at most LAZY_TILES tiles and whole panels of 16 output channels
    transform their filter in each call; the switch forces it either way."""
    monkeypatch.delenv("RLX_WG_LAZY", raising=False)
    lazy = winograd.filter_on_the_fly
    assert lazy(4, 8, 512, 512, 4, 4)  # ResNet-50 b8's last stage: 8 tiles
    assert lazy(4, 8, 256, 256, 7, 7) and lazy(4, 1, 128, 128, 14, 14)  # 32, 16 tiles
    assert not lazy(4, 1, 64, 64, 28, 28)  # 49 tiles
    assert not lazy(4, 8, 128, 128, 14, 14)  # items of 56 tiles
    assert not lazy(2, 1, 256, 256, 7, 7)  # F(2, 3): U only 16 / 9 of the filter
    assert not lazy(4, 1, 16, 24, 8, 8)  # a half panel
    monkeypatch.setenv("RLX_WG_LAZY", "0")
    assert not lazy(4, 8, 512, 512, 4, 4)
    monkeypatch.setenv("RLX_WG_LAZY", "1")
    assert lazy(2, 1, 64, 64, 28, 28) and not lazy(4, 1, 16, 24, 8, 8)


def test_the_transform_matrices_compute_a_correlation() -> None:
    """A^T [(G g G^T) * (B^T d B)] A is the 3x3 correlation of d by g (exact fractions)."""
    for m in winograd.TILES:
        bt, g, at = (np.array(a, dtype=np.float64) for a in winograd.matrices(m))
        rng = np.random.default_rng(m)
        d, f = rng.standard_normal((m + 2, m + 2)), rng.standard_normal((3, 3))
        y = at @ ((g @ f @ g.T) * (bt @ d @ bt.T)) @ at.T
        ref = [[(d[i:i + 3, j:j + 3] * f).sum() for j in range(m)] for i in range(m)]
        assert np.abs(y - ref).max() < 1e-12
