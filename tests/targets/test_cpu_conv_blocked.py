"""The blocked direct convolution (rlx_core/targets/cpu/conv_blocked.py): filters that are graph
parameters are packed once per binding (prepack kind ``conv``) and run on the 6-pixel x
16-channel tile, against the numpy reference: channels and output channels not multiples of
the blocks (8, 16), padding, stride 2, dilation, uneven windows, a 7x7 stem, 1x1 convs, batch
> 1 and row blocks, every epilogue (bias, residual, ReLU, clip), grouped convs left to conv.py,
and a filter bound again."""

from __future__ import annotations

import numpy as np
import pytest

import rlx_core as rlx
from rlx_core import nn
from rlx_core.targets.cpu.target import CpuTarget
from tests.targets.checks import rel_error
from tests.targets.simd import skip_unless_simd

cpu_ok, cpu_why = CpuTarget().available()
# slow: each test compiles programs with the blocked conv kernels (tens of seconds of C
# compile apiece on a cold cache); tests/conftest.py runs slow tests first
pytestmark = [pytest.mark.skipif(not cpu_ok, reason=f"cpu target unavailable: {cpu_why}"),
              pytest.mark.slow]



# (x shape, w shape, stride, padding, dilation)
CASES = [
    ((1, 8, 10, 10), (16, 8, 3, 3), (1, 1), (1, 1), (1, 1)),  # whole blocks
    ((2, 5, 9, 7), (12, 5, 3, 3), (2, 2), (1, 1), (1, 1)),  # odd sizes, stride 2, batch 2
    ((1, 13, 7, 7), (33, 13, 3, 3), (1, 1), (1, 1), (1, 1)),  # 7x7: tiles across rows
    ((1, 64, 5, 4), (70, 64, 1, 1), (1, 1), (0, 0), (1, 1)),  # 1x1
    ((1, 24, 9, 9), (20, 24, 1, 1), (2, 2), (0, 0), (1, 1)),  # strided 1x1
    ((1, 3, 20, 18), (20, 3, 7, 7), (2, 2), (3, 3), (1, 1)),  # a stem conv
    # a 3x3 stem, rows of 35: two 16-pixel register interleaves (AVX-512) and 3 pixels
    ((2, 3, 6, 35), (32, 3, 3, 3), (2, 2), (1, 1), (1, 1)),
    ((1, 4, 9, 11), (6, 4, 3, 2), (1, 2), (2, 0), (2, 1)),  # dilation, uneven window
    ((3, 17, 6, 6), (9, 17, 3, 3), (1, 1), (0, 0), (1, 1)),  # no padding, 3 images
    # 5 blocks of 8 at 3x3: K in 3 slices (partial sums kept between them), full 6-pixel
    # tiles and a 4-pixel one on the flat tiles
    ((1, 40, 8, 8), (24, 40, 3, 3), (1, 1), (1, 1), (1, 1)),
    ((1, 16, 12, 12), (16, 16, 9, 9), (1, 1), (4, 4), (1, 1)),  # over RLX_CB_TAPS
    # a filter over RLX_CB_FILTER_L2 (663 KB): panel by panel over the 2 chunks
    ((1, 128, 10, 10), (144, 128, 3, 3), (1, 1), (1, 1), (1, 1)),
    # a 3-channel stem of 64 outputs: on AVX-512 8-pixel tiles of the 3-step asm K loop
    ((1, 3, 24, 24), (64, 3, 7, 7), (2, 2), (3, 3), (1, 1)),
]


def _param_conv(rng: np.random.Generator, shapes: dict, scale: float):
    """Random filters (``shapes``: name -> OIHW, times ``scale``) and biases as parameters:
    ``conv(v, name, bias=True, **kw)``, an nn.conv2d on them."""
    ws = {k: (rng.standard_normal(s) * scale).astype(np.float32) for k, s in shapes.items()}
    bs = {k: rng.standard_normal(s[0]).astype(np.float32) for k, s in shapes.items()}

    def conv(v, k, bias=True, **kw):
        return nn.conv2d(v, rlx.param(ws[k], k), rlx.param(bs[k], "b" + k) if bias else None,
                         **kw)

    return conv


def test_parameter_filters_run_blocked_and_match_the_reference(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Every case in one program (one C compile), every other one with a bias; blocked
    whatever the rule table says (RLX_CONV_BLOCKED=all)."""
    skip_unless_simd()
    monkeypatch.setenv("RLX_CONV_BLOCKED", "all")
    rng = np.random.default_rng(0)
    xs = [rng.standard_normal(c[0]).astype(np.float32) for c in CASES]
    ws = [rng.standard_normal(c[1]).astype(np.float32) for c in CASES]
    bs = [rng.standard_normal(c[1][0]).astype(np.float32) for c in CASES]

    def f(*a):
        return tuple(nn.conv2d(x, rlx.param(ws[k], f"w{k}"),
                               rlx.param(bs[k], f"b{k}") if k % 2 == 0 else None,
                               stride=s, padding=p, dilation=d)
                     for k, (x, (_, _, s, p, d)) in enumerate(zip(a, CASES, strict=True)))

    exe = rlx.compile(f, *xs, target="cpu", record=False)
    assert {k["impl"] for k in exe.program.info["kernels"].values()} == {"rlx-conv-blocked"}
    packed = {p["param"]: p for p in exe.program.info["prepacked"]}
    assert set(packed) == {f"w{k}" for k in range(len(CASES))}
    o, c, kh, kw = CASES[2][1]  # 33 x 13: 3 panels of 16, 2 blocks of 8
    assert packed["w2"]["kind"] == "conv" and packed["w2"]["bytes"] == 48 * 16 * kh * kw * 4
    want = rlx.compile(f, *xs, target="numpy", record=False)(*xs)
    for _ in range(2):  # the second call reads the filters packed by the first
        for case, g_, w_ in zip(CASES, exe(*xs), want, strict=True):
            assert rel_error(g_, w_) < 1e-5, case


def test_the_rule_table() -> None:
    from rlx_core.targets.cpu.conv_blocked import use_blocked

    assert use_blocked(64, 64, 1, 3, 3, 1, 1, 28, 28)
    assert use_blocked(256, 256, 1, 3, 3, 1, 1, 7, 7)
    assert not use_blocked(512, 512, 1, 3, 3, 1, 1, 4, 4)  # one implicit-GEMM tile
    assert not use_blocked(64, 256, 1, 1, 1, 1, 1, 28, 28)  # 1x1: the GEMM
    assert use_blocked(3, 64, 1, 7, 7, 2, 2, 56, 56)  # a stem: one block of 3 channels
    assert use_blocked(3, 32, 1, 3, 3, 2, 2, 56, 56)  # a 3x3 stem too
    assert not use_blocked(3, 64, 1, 2, 2, 1, 1, 56, 56)  # narrow, few taps: not measured
    assert not use_blocked(64, 64, 4, 3, 3, 1, 1, 28, 28)  # grouped


@pytest.mark.parametrize("act", ["relu", "relu6"])
def test_epilogues_fold_into_the_blocked_store(act: str) -> None:
    """relu(conv(x) + b + x) and clip(conv(x) + b, 0, 6) on 20 channels (a partial panel and
    a partial block) at 7x7, batch 2: conv2d_fused with a residual / clip, blocked by the
    rule table."""
    skip_unless_simd()
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 20, 7, 7)).astype(np.float32)
    w = (rng.standard_normal((20, 20, 3, 3)) * 0.2).astype(np.float32)
    b = rng.standard_normal(20).astype(np.float32)

    def f(a):
        y = nn.conv2d(a, rlx.param(w, "w"), rlx.param(b, "b"), padding=1)
        if act == "relu":
            return nn.relu(y + a)
        return rlx.minimum(rlx.maximum(y, 0.0), 6.0)

    exe = rlx.compile(f, x, target="cpu", record=False)
    fused = [n for n in exe.lir.nodes if n.op == "conv2d_fused"]
    assert len(fused) == 1 and bool(fused[0].attr("residual")) == (act == "relu")
    assert {k["impl"] for k in exe.program.info["kernels"].values()} == {"rlx-conv-blocked"}
    want = rlx.compile(f, x, target="numpy", record=False)(x)
    assert rel_error(exe(x), want) < 1e-5


def test_grouped_and_input_filters_stay_on_the_implicit_gemm(
        monkeypatch: pytest.MonkeyPatch) -> None:
    skip_unless_simd()
    monkeypatch.setenv("RLX_CONV_BLOCKED", "all")
    rng = np.random.default_rng(2)
    x = rng.standard_normal((1, 8, 9, 9)).astype(np.float32)
    wg = rng.standard_normal((8, 2, 3, 3)).astype(np.float32)
    w = rng.standard_normal((8, 8, 3, 3)).astype(np.float32)

    def f(a, wi):
        return (nn.conv2d(a, rlx.param(wg, "wg"), None, padding=1, groups=4),
                nn.conv2d(a, wi, None, padding=1))

    exe = rlx.compile(f, x, w, target="cpu", record=False)
    assert "rlx-conv-blocked" not in {k["impl"] for k in exe.program.info["kernels"].values()}
    assert exe.program.info["prepacked"] == []
    want = rlx.compile(f, x, w, target="numpy", record=False)(x, w)
    for g_, w_ in zip(exe(x, w), want, strict=True):
        assert rel_error(g_, w_) < 1e-5


def test_binding_another_filter_packs_it_again(monkeypatch: pytest.MonkeyPatch) -> None:
    skip_unless_simd()
    monkeypatch.setenv("RLX_WINOGRAD", "0")  # a 3x3 stride-1 conv: direct, not Winograd
    rng = np.random.default_rng(3)
    x = rng.standard_normal((1, 16, 8, 8)).astype(np.float32)
    w = rng.standard_normal((24, 16, 3, 3)).astype(np.float32)
    exe = rlx.compile(lambda a: nn.conv2d(a, rlx.param(w, "w"), None, padding=1), x,
                      target="cpu", record=False)
    assert [p["kind"] for p in exe.program.info["prepacked"]] == ["conv"]
    ref = rlx.compile(lambda a, wi: nn.conv2d(a, wi, None, padding=1), x, w, target="numpy",
                      record=False)
    assert rel_error(exe(x), ref(x, w)) < 1e-5
    w_new = rng.standard_normal((24, 16, 3, 3)).astype(np.float32)
    exe.params["w"] = w_new
    assert rel_error(exe(x), ref(x, w_new)) < 1e-5


def test_the_switch_turns_the_blocked_kernel_off(monkeypatch: pytest.MonkeyPatch) -> None:
    skip_unless_simd()
    monkeypatch.setenv("RLX_CONV_BLOCKED", "0")
    rng = np.random.default_rng(4)
    x = rng.standard_normal((1, 16, 8, 8)).astype(np.float32)
    w = rng.standard_normal((16, 16, 3, 3)).astype(np.float32)
    exe = rlx.compile(lambda a: nn.conv2d(a, rlx.param(w, "w"), None, padding=1), x,
                      target="cpu", record=False)
    assert "rlx-conv-blocked" not in {k["impl"] for k in exe.program.info["kernels"].values()}
    assert exe.program.info["prepacked"] == []


@pytest.mark.parametrize(("o", "pool"), [(4, False), (16, True)])
def test_a_one_channel_stem_runs_blocked_not_as_a_depthwise_conv(o: int, pool: bool) -> None:
    """A groups-1 conv on one input channel has one filter channel, like a depthwise conv
    with a channel multiplier; under the rule table's stem rule (3x3 windows and up) its
    filter is packed, so it must run on the blocked kernel (before the fix the program called
    rlx_cb_pack without its source: a load error; and a 16-channel output planned NCHW8c for
    the pool after it would have been written as NCHW)."""
    skip_unless_simd()
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 1, 8, 8)).astype(np.float32)
    w = rng.standard_normal((o, 1, 3, 3)).astype(np.float32)
    b = rng.standard_normal(o).astype(np.float32)

    def f(x):
        y = nn.relu(nn.conv2d(x, rlx.param(w, "w"), rlx.param(b, "b"), padding=1))
        return nn.max_pool2d(y, 2, 2) if pool else y

    want = rlx.compile(f, x, target="numpy", record=False)(x)
    exe = rlx.compile(f, x, target="cpu", record=False)
    assert "rlx-conv-blocked" in {k["impl"] for k in exe.program.info["kernels"].values()}
    assert rel_error(exe(x), want) < 1e-5


def test_the_tiles_store_a_blocked_output_with_its_epilogue() -> None:
    """Where a conv's output is NCHW8c the tiles apply act((acc + bias) + res) and store it
    themselves on the last K slice (rlx_cb_epi): full 6-pixel tiles (asm) and partial ones,
    16-wide and a last 8-wide panel, two K slices (208 channels, 1x1), a blocked residual,
    bias or none, ReLU, clip and no activation, and a 3-channel stem (rlx_cb_tile: its full
    panel fused, its last 8 channels through the store pass); a NaN in the input stays NaN
    through ReLU as in the reference (rlx_max_f), wherever it spreads."""
    skip_unless_simd()
    rng = np.random.default_rng(5)
    shapes = {"w0": (32, 16, 1, 1), "w1": (40, 32, 3, 3), "w2": (208, 40, 1, 1),
              "w3": (40, 208, 1, 1), "w4": (8, 40, 1, 1), "s0": (24, 3, 3, 3),
              "s1": (8, 24, 1, 1)}
    conv = _param_conv(rng, shapes, 0.3)

    def f(a, b):
        y0 = nn.relu(conv(a, "w0"))  # 63 pixels: 48 + 15, tiles of 6 and of 3
        y1 = rlx.minimum(rlx.maximum(conv(y0, "w1", stride=2, padding=1), 0.0), 6.0)
        y2 = conv(y1, "w2", bias=False)  # no epilogue at all
        y3 = nn.relu(conv(y2, "w3") + y1)  # 2 K slices, a last panel of 8, residual
        s0 = rlx.minimum(rlx.maximum(conv(b, "s0", stride=2, padding=1), 0.0), 6.0)
        return conv(y3, "w4"), conv(s0, "s1")  # the graph outputs: NCHW

    x = rng.standard_normal((2, 16, 7, 9)).astype(np.float32)
    x2 = rng.standard_normal((2, 3, 13, 11)).astype(np.float32)  # 7 x 6: 42 pixels
    exe = rlx.compile(f, x, x2, target="cpu", record=False)
    assert {k["impl"] for k in exe.program.info["kernels"].values()} == {"rlx-conv-blocked"}
    convs = [n.name for n in exe.lir.nodes if n.op.startswith("conv2d")]
    assert len(convs) == 7 and set(exe.program.info["nchw8c"]) == set(convs) - set(
        exe.lir.outputs)
    ref = rlx.compile(f, x, x2, target="numpy", record=False)
    for g_, w_ in zip(exe(x, x2), ref(x, x2), strict=True):
        assert rel_error(g_, w_) < 1e-5
    x[1, 3, 2, 4] = np.nan
    got, want = np.asarray(exe(x, x2)[0]), np.asarray(ref(x, x2)[0])
    assert np.isnan(want).any() and not np.isnan(want).all()
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    keep = ~np.isnan(want)
    assert rel_error(got[keep], want[keep]) < 1e-5


def test_blocked_outputs_of_a_last_panel_of_8_write_only_their_blocks(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Convs of 24, 40 and 56 output channels writing NCHW8c (a last filter panel of 8; on
    AVX-512 the last unit of two panels, or a lone panel, half empty): each stores its blocks
    and no more. All six outputs stay live until the 1x1 convs that read them at the end, so a
    block written past one output's end would change a neighbour in the arena: each of the
    three sizes twice, in both orders, so some neighbour was written before. Every conv on
    the direct blocked kernel (no Winograd, the 1x1 heads too)."""
    skip_unless_simd()
    monkeypatch.setenv("RLX_CONV_BLOCKED", "all")
    monkeypatch.setenv("RLX_WINOGRAD", "0")
    rng = np.random.default_rng(7)
    outs = (24, 40, 56, 56, 40, 24)
    ws = [(rng.standard_normal((o, 16, 3, 3)) * 0.2).astype(np.float32) for o in outs]
    bs = [rng.standard_normal(o).astype(np.float32) for o in outs]
    heads = [(rng.standard_normal((16, o, 1, 1)) * 0.2).astype(np.float32) for o in outs]

    def f(a):
        mids = [nn.relu(nn.conv2d(a, rlx.param(w, f"w{k}"), rlx.param(b, f"b{k}"), padding=1))
                for k, (w, b) in enumerate(zip(ws, bs, strict=True))]
        return tuple(nn.conv2d(m, rlx.param(h, f"h{k}"))
                     for k, (m, h) in enumerate(zip(mids, heads, strict=True)))

    x = rng.standard_normal((2, 16, 9, 7)).astype(np.float32)
    exe = rlx.compile(f, x, target="cpu", record=False)
    assert {k["impl"] for k in exe.program.info["kernels"].values()} == {"rlx-conv-blocked"}
    assert len(exe.program.info["nchw8c"]) == len(outs)
    want = rlx.compile(f, x, target="numpy", record=False)(x)
    for g_, w_ in zip(exe(x), want, strict=True):
        assert rel_error(g_, w_) < 1e-5


def test_images_fold_into_one_call_where_the_input_is_read_in_place(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A thread alone runs the 1x1 convs on NCHW8c inputs several images a call
    (images_per_call, RLX_CB_FOLD=2 here: folds of 2, 2 and 1 of 5 images), a strided one, one
    with a residual written over it and a pair among them; the padded 3x3 keeps one image a
    call. The values are the unfolded program's, bit for bit, and the reference's."""
    skip_unless_simd()
    from rlx_core.targets.cpu import conv_blocked

    rng = np.random.default_rng(11)
    shapes = {"w0": (32, 16, 3, 3), "w1": (48, 32, 1, 1), "w2": (40, 48, 1, 1),
              "w3": (40, 32, 1, 1), "w4": (40, 40, 1, 1), "w5": (24, 40, 3, 3)}
    conv = _param_conv(rng, shapes, 0.3)

    def f(a):
        y0 = nn.relu(conv(a, "w0", padding=1))
        y1 = nn.relu(conv(y0, "w1", stride=2))  # strided 1x1, read in place
        y2 = nn.relu(conv(y1, "w2") + conv(y0, "w3", stride=2))  # a pair (RLX_CONV_PAIR=all)
        y3 = nn.relu(conv(y2, "w4") + y2)  # its residual dies here: written over it
        return conv(y3, "w5", padding=1)

    x = rng.standard_normal((5, 16, 9, 10)).astype(np.float32)
    monkeypatch.setenv("RLX_CONV_PAIR", "all")
    outs = {}
    for fold in ("0", "2"):
        monkeypatch.setenv("RLX_CB_FOLD", fold)
        exe = rlx.compile(f, x, target="cpu", record=False)
        assert "conv2d_pair" in [n.op for n in exe.lir.nodes]
        assert ("rlx_cb_imgs im" in exe.program.info["source"]) == (fold == "2")
        outs[fold] = np.asarray(exe(x))
    np.testing.assert_array_equal(outs["2"], outs["0"])
    want = rlx.compile(f, x, target="numpy", record=False)(x)
    assert rel_error(outs["2"], want) < 1e-5
    # the rule: a filter over FILTER_L2 read in place folds as many images as FOLD_BYTES holds
    monkeypatch.delenv("RLX_CB_FOLD")
    big = conv_blocked.FILTER_L2 + 1
    assert conv_blocked.images_per_call(8, conv_blocked.FOLD_BYTES // 3, big, True) == 3
    assert conv_blocked.images_per_call(8, 1024, big, True) == 8
    assert conv_blocked.images_per_call(8, 1024, conv_blocked.FILTER_L2, True) == 1
    assert conv_blocked.images_per_call(8, 1024, big, False) == 1
    assert conv_blocked.images_per_call(1, 1024, big, True) == 1


def test_the_whole_tile_asm_gives_the_intrinsics_bits(monkeypatch: pytest.MonkeyPatch) -> None:
    """The AVX-512 tile in one asm statement (conv_tilez_asm.py) against the same build with
    RLX_CB_WHOLEZ 0 (accumulators through memory, the epilogue as intrinsics): bit for bit,
    NaN and inf included. Tiles of 8 and 7 pixels (8x8 and 7x7 outputs), a 3-channel 7x7 stem
    (3 K steps a tap), one K slice (the sums start at the bias) and several (64 channels at
    3x3, 256 at 1x1: partial sums through out, the bias added at the end), a residual read in
    place, ReLU, clip, no bias, and the graph's NCHW outputs through the store pass."""
    skip_unless_simd()
    from rlx_core.targets.cpu import conv_blocked
    from rlx_core.targets.cpu.toolchain import find_compiler

    if not find_compiler().avx512:
        pytest.skip("the whole-tile asm is the AVX-512 tile's")
    monkeypatch.setenv("RLX_CONV_BLOCKED", "all")
    monkeypatch.setenv("RLX_WINOGRAD", "0")
    rng = np.random.default_rng(11)
    shapes = {"s": (64, 3, 7, 7), "a": (64, 64, 1, 1), "b": (64, 64, 3, 3),
              "c": (256, 64, 1, 1), "d": (64, 256, 1, 1), "e": (96, 64, 3, 3)}
    conv = _param_conv(rng, shapes, 0.2)

    def f(x):
        s = nn.relu(conv(x, "s", stride=2, padding=3))  # 8x8: tiles of 8
        a = rlx.minimum(rlx.maximum(conv(s, "a"), -0.5), 0.5)
        b = nn.relu(conv(a, "b", padding=1) + s)  # 4 K slices, a residual
        c = conv(b, "c", bias=False)
        d = nn.relu(conv(c, "d") + b)  # 2 K slices: the bias at the end, in place
        e = conv(d, "e", stride=2, padding=1)  # 4x4, NCHW out
        g = nn.relu(conv(conv(s, "a", padding=0, stride=1)[:, :, :7, :7], "b", padding=1))
        return e, g  # g: 7x7, tiles of 7

    x = rng.standard_normal((2, 3, 16, 16)).astype(np.float32)
    x[0, 1, 3, 4], x[1, 2, 9, 9], x[1, 0, 0, 0] = np.nan, np.inf, -np.inf
    got = {}
    for whole in ("1", "0"):
        monkeypatch.setattr(conv_blocked, "SOURCE", conv_blocked.SOURCE.replace(
            "#define RLX_CB_WHOLEZ 1", f"#define RLX_CB_WHOLEZ {whole}"))
        exe = rlx.compile(f, x, target="cpu", record=False)
        assert "rlx-conv-blocked" in {k["impl"] for k in exe.program.info["kernels"].values()}
        got[whole] = [np.asarray(v) for v in exe(x)]
    want = rlx.compile(f, x, target="numpy", record=False)(x)
    for new, old, ref in zip(got["1"], got["0"], want, strict=True):
        assert np.isnan(new).any() and np.isfinite(new).mean() > 0.2
        np.testing.assert_array_equal(new.view(np.uint32), old.view(np.uint32))
        np.testing.assert_array_equal(np.isnan(new), np.isnan(ref))
        keep = np.isfinite(np.asarray(ref))
        assert rel_error(new[keep], np.asarray(ref)[keep]) < 1e-5
