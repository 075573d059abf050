"""The CPU's attention kernel (rlx_core/targets/cpu/attention.py): HIR attention kept whole in
f32. Checked against float64 numpy and against the same graph through the common-IR
decomposition (force-common), for every mask, both layouts, masks of several dtypes, shapes
split into row blocks, fully masked rows and NaN; and the transformer pattern (split heads,
attend, merge heads) compiled without a transpose kernel."""

from __future__ import annotations

import numpy as np
import pytest

import rlx_core as rlx
from rlx_core.targets.cpu.target import CpuTarget

cpu_ok, cpu_why = CpuTarget().available()
pytestmark = pytest.mark.skipif(not cpu_ok, reason=f"cpu target unavailable: {cpu_why}")


def _ref(q, k, v, mask: str, keep=None, layout: str = "bhsd") -> np.ndarray:
    """float64 attention: scores scaled, hidden keys set to the lowest f32, softmax, @ v."""
    q, k, v = (x.astype(np.float64) for x in (q, k, v))
    if layout == "bshd":
        q, k, v = (x.transpose(0, 2, 1, 3) for x in (q, k, v))
    s = np.einsum("bhqd,bhkd->bhqk", q, k) / np.sqrt(q.shape[-1])
    sq, sk = s.shape[-2:]
    vis = np.ones(s.shape, bool)
    if mask == "causal":
        vis &= np.tril(np.ones((sq, sk), bool))
    if mask == "padding":
        vis &= (keep != 0).reshape(keep.shape[0], 1, 1, sk)
    s = np.where(vis, s, np.finfo(np.float32).min)
    p = np.exp(s - s.max(-1, keepdims=True))
    out = np.einsum("bhqk,bhkd->bhqd", p / p.sum(-1, keepdims=True), v)
    return out.transpose(0, 2, 1, 3) if layout == "bshd" else out


def _fn(mask: str, layout: str = "bhsd"):
    def f(q, k, v, keep):
        return rlx.nn.attention(q, k, v, mask=mask, layout=layout,
                                padding_mask=keep if mask == "padding" else None)
    return f


def _impls(exe) -> list[str]:
    return [exe.program.info["kernels"][k.name]["impl"] for k in exe.lir.kernels]


@pytest.mark.parametrize("layout", ["bhsd", "bshd"])
@pytest.mark.parametrize("mask", ["none", "causal", "padding"])
@pytest.mark.parametrize("shape", [(2, 3, 20, 16), (1, 1, 200, 40), (1, 2, 7, 5)])
def test_kernel_matches_numpy_and_the_decomposition(shape, mask: str, layout: str) -> None:
    b, h, s, d = shape
    rng = np.random.default_rng(sum(shape))
    dims = (b, h, s, d) if layout == "bhsd" else (b, s, h, d)
    q, k, v = (rng.standard_normal(dims).astype(np.float32) for _ in range(3))
    keep = rng.random((b, s)) > 0.3
    keep[:, 0] = True
    f = _fn(mask, layout)
    exe = rlx.compile(f, q, k, v, keep, target="cpu", record=False)
    assert _impls(exe) == ["rlx-attention"]  # one kernel: no split, merge or softmax kernels
    got = np.asarray(exe(q, k, v, keep))
    np.testing.assert_allclose(got, _ref(q, k, v, mask, keep, layout), rtol=2e-5, atol=2e-6)
    common = rlx.compile(f, q, k, v, keep, target="cpu", policy="force-common", record=False)
    assert "rlx-attention" not in _impls(common)
    # the decomposed GEMMs may run on OpenBLAS (narrow ones): equal to rounding
    np.testing.assert_allclose(got, np.asarray(common(q, k, v, keep)), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("dtype", ["int32", "float32", "uint8", "int64"])
def test_padding_masks_of_other_dtypes(dtype: str) -> None:
    rng = np.random.default_rng(2)
    q, k, v = (rng.standard_normal((2, 2, 9, 8)).astype(np.float32) for _ in range(3))
    keep = (rng.random((2, 9)) > 0.4).astype(dtype)
    keep[:, 1] = 3  # any nonzero is visible
    if dtype == "float32":
        keep[:, 2] = -0.0  # and a negative zero is not

    def f(q, k, v, m):
        return rlx.nn.attention(q, k, v, mask="padding", padding_mask=m)

    exe = rlx.compile(f, q, k, v, keep, target="cpu", record=False)
    want = _ref(q, k, v, "padding", keep)
    np.testing.assert_allclose(np.asarray(exe(q, k, v, keep)), want, rtol=2e-5, atol=2e-6)


def test_hidden_rows_average_v_and_nan_propagates_as_the_decomposition() -> None:
    rng = np.random.default_rng(3)
    q, k, v = (rng.standard_normal((1, 2, 6, 4)).astype(np.float32) for _ in range(3))
    keep = np.zeros((1, 6), bool)  # every key hidden: each row averages v (no NaN)
    f = _fn("padding")
    exe = rlx.compile(f, q, k, v, keep, target="cpu", record=False)
    got = np.asarray(exe(q, k, v, keep))
    np.testing.assert_allclose(got, np.broadcast_to(v.mean(2, keepdims=True), got.shape),
                               rtol=1e-6, atol=1e-6)
    q[0, 1, 2, 0] = np.nan
    common = rlx.compile(f, q, k, v, keep, target="cpu", policy="force-common", record=False)
    keep[:] = True
    np.testing.assert_array_equal(np.isnan(np.asarray(exe(q, k, v, keep))),
                                  np.isnan(np.asarray(common(q, k, v, keep))))


def test_head_split_and_merge_become_the_in_place_layout() -> None:
    """reshape -> transpose -> attention -> transpose -> reshape, as a transformer writes it,
    compiles to reshapes around one attention kernel reading (batch, seq, heads, dim) in
    place (algebraic_simplify.attention_in_place)."""
    rng = np.random.default_rng(4)
    b, s, h, d = 2, 24, 3, 8
    x = [rng.standard_normal((b, s, h * d)).astype(np.float32) for _ in range(3)]
    keep = np.ones((b, s), bool)
    keep[1, 20:] = False

    def f(a, c, e, m):
        sp = lambda t: t.reshape(b, s, h, d).transpose(0, 2, 1, 3)  # noqa: E731
        o = rlx.nn.attention(sp(a), sp(c), sp(e), mask="padding", padding_mask=m)
        return o.transpose(0, 2, 1, 3).reshape(b, s, h * d)

    exe = rlx.compile(f, *x, keep, target="cpu", record=False)
    att = [n for n in exe.mir.nodes if n.op == "attention"]
    assert len(att) == 1 and att[0].attr("layout") == "bshd"
    assert not any(n.op == "transpose" for n in exe.mir.nodes)
    # reshapes of the caller's inputs and of the returned value copy; nothing else runs
    assert {i for i in _impls(exe) if i not in ("alias", "copy")} == {"rlx-attention"}
    qs = [t.reshape(b, s, h, d) for t in x]
    want = _ref(*qs, "padding", keep, "bshd").reshape(b, s, h * d)
    np.testing.assert_allclose(np.asarray(exe(*x, keep)), want, rtol=2e-5, atol=2e-6)


def test_f64_attention_is_decomposed_and_says_why() -> None:
    q = np.random.default_rng(5).standard_normal((1, 1, 4, 4))
    exe = rlx.compile(lambda a: rlx.nn.attention(a, a, a), q, target="cpu")
    assert "rlx-attention" not in _impls(exe)
    dec = next(d for d in exe.trace.decisions if d["op"] == "attention")
    assert dec["route"] != "native"
    why = dec["rejected"][0]["reasons"][0]
    assert "not f64" in why["message"] and "f32" in why["hint"]


def test_bshd_layout_runs_on_the_numpy_reference_too() -> None:
    rng = np.random.default_rng(6)
    q, k, v = (rng.standard_normal((2, 5, 3, 4)).astype(np.float32) for _ in range(3))
    keep = np.ones((2, 5), bool)
    exe = rlx.compile(_fn("causal", "bshd"), q, k, v, keep, target="numpy", record=False)
    np.testing.assert_allclose(np.asarray(exe(q, k, v, keep)),
                               _ref(q, k, v, "causal", layout="bshd"), rtol=1e-5, atol=1e-6)


def test_an_attention_read_twice_keeps_its_layout() -> None:
    """The merge transpose folds only when it is the attention's one reader: another reader
    of the (batch, heads, seq, dim) result would make the attention run twice."""
    rng = np.random.default_rng(7)
    x = rng.standard_normal((1, 6, 2, 4)).astype(np.float32)

    def f(a):
        t = a.transpose(0, 2, 1, 3)
        o = rlx.nn.attention(t, t, t)
        return o.transpose(0, 2, 1, 3), o

    exe = rlx.compile(f, x, target="cpu", record=False)
    att = [n for n in exe.mir.nodes if n.op == "attention"]
    assert len(att) == 1 and att[0].attr("layout") == "bhsd"
    merged, o = (np.asarray(r) for r in exe(x))
    want = _ref(x, x, x, "none", layout="bshd")
    np.testing.assert_allclose(merged, want, rtol=2e-5, atol=2e-6)
    np.testing.assert_allclose(o, want.transpose(0, 2, 1, 3), rtol=2e-5, atol=2e-6)


_HARNESS = r"""
#include <stdio.h>
int main(void) {
    enum { S = 37, D = 12, DV = 9 };
    static float q[S * D], k[S * D], v[S * DV], o[S * DV];
    unsigned char mask[S];
    unsigned int x = 12345u;
    for (int i = 0; i < S * D; ++i) { x = x * 1103515245u + 12345u; q[i] = (float)(x >> 16) / 65536.0f - 0.5f; }
    for (int i = 0; i < S * D; ++i) { x = x * 1103515245u + 12345u; k[i] = (float)(x >> 16) / 65536.0f - 0.5f; }
    for (int i = 0; i < S * DV; ++i) { x = x * 1103515245u + 12345u; v[i] = (float)(x >> 16) / 65536.0f - 0.5f; }
    for (int j = 0; j < S; ++j) mask[j] = (unsigned char)(j % 5 != 3);
    rlx_attention_rows(0, S, S, D, DV, q, D, k, D, v, DV, o, DV, 0.3f, -3.4e38f, 1, mask, 1, 0);
    for (int i = 0; i < S * DV; ++i) printf("%.9g\n", o[i]);
    return 0;
}
"""


def _harness_outputs(tmp_path, harness: str, switch: str) -> list[list[str]]:
    """The words a C harness over the attention kernel prints, built as it ships and with
    ``switch`` (one -D flag that turns a path off): [as shipped, with the switch]."""
    import subprocess

    from rlx_core.targets.c_common.prelude import prelude
    from rlx_core.targets.cpu import attention, sgemm
    from rlx_core.targets.cpu.toolchain import find_compiler

    cc = find_compiler()
    src = tmp_path / "harness.c"
    src.write_text(prelude() + sgemm.SOURCE + attention.SOURCE + harness)
    outs = []
    for extra in ([], [switch]):
        exe = tmp_path / f"harness{len(outs)}"
        subprocess.run([cc.path, *cc.opt_flags, "-std=gnu11", *extra, str(src), "-o", str(exe),
                        "-lm"], check=True, capture_output=True)
        run = subprocess.run([str(exe)], check=True, capture_output=True, text=True)
        outs.append(run.stdout.split())
    return outs


def test_the_out_of_memory_path_computes_the_same_attention(tmp_path) -> None:
    """Without a scores buffer the kernel recomputes each score per pass, a row at a time;
    compiled with RLX_ATTN_NO_SCRATCH (the one switch of that path) it must agree."""
    outs = [np.array(words, dtype=np.float64)
            for words in _harness_outputs(tmp_path, _HARNESS, "-DRLX_ATTN_NO_SCRATCH")]
    assert outs[0].size == 37 * 9 and np.isfinite(outs[0]).all()
    np.testing.assert_allclose(outs[1], outs[0], rtol=1e-5, atol=1e-6)


_TINY_HARNESS = r"""
#include <stdio.h>
/* items of at most 16 keys (after the hidden ends are cut): query blocks, widths on and off
   the 16-float vector, masks, causal */
static void item(int64_t sq, int64_t sk, int64_t d, int64_t dv, int64_t r0, int64_t r1,
                 int causal, int hide, unsigned int seed) {
    static float q[64 * 80], k[64 * 80], v[64 * 80], o[64 * 80];
    unsigned char mask[64];
    unsigned int x = seed;
    const int64_t ld = 80;  /* rows of a (batch, seq, heads, dim) tensor: wider than a head */
    for (int i = 0; i < 64 * 80; ++i) { x = x * 1103515245u + 12345u; q[i] = (float)(x >> 16) / 65536.0f - 0.5f; }
    for (int i = 0; i < 64 * 80; ++i) { x = x * 1103515245u + 12345u; k[i] = (float)(x >> 16) / 16384.0f - 2.0f; }
    for (int i = 0; i < 64 * 80; ++i) { x = x * 1103515245u + 12345u; v[i] = (float)(x >> 16) / 65536.0f - 0.5f; o[i] = 0.0f; }
    for (int64_t j = 0; j < sk; ++j) mask[j] = (unsigned char)(!hide || (j % 5 != 3 && j < sk - 2));
    rlx_attention_rows(r0, r1, sk, d, dv, q, ld, k, ld, v, ld, o, ld, 0.35f, -3.4e38f, causal,
                       hide ? mask : 0, 1, 0);
    for (int64_t i = r0; i < r1; ++i)
        for (int64_t c = 0; c < dv; ++c) printf("%a\n", o[i * ld + c]);
}
int main(void) {
    item(8, 8, 32, 32, 0, 8, 0, 1, 1u);     /* MiniLM b2 s8's item */
    item(8, 8, 32, 32, 0, 8, 1, 0, 2u);
    item(13, 16, 5, 40, 0, 13, 0, 1, 3u);   /* odd widths, 13 rows: a short group */
    item(20, 11, 64, 17, 3, 20, 1, 1, 4u);  /* a block of rows from 3 */
    item(3, 1, 16, 16, 0, 3, 0, 0, 5u);     /* one key */
    item(40, 18, 32, 32, 0, 40, 0, 1, 6u);  /* 18 keys, 15 visible after the cut */
    return 0;
}
"""


def test_few_keys_give_the_bits_of_the_panel_path(tmp_path) -> None:
    """Items of at most RLX_ATTN_TINY keys skip the panels and rlx_sgemm_core
    (rlx_attn_tiny_scores, rlx_attn_tiny_out); built with the path off (-DRLX_ATTN_TINY=0)
    the kernel gives the same bits, and each output is finite."""
    outs = _harness_outputs(tmp_path, _TINY_HARNESS, "-DRLX_ATTN_TINY=0")
    assert len(outs[0]) == 8 * 32 * 2 + 13 * 40 + 17 * 17 + 3 * 16 + 40 * 32
    assert outs[0] == outs[1]
    assert np.isfinite(np.array([float.fromhex(t) for t in outs[0]])).all()


@pytest.mark.parametrize("layout", ["bhsd", "bshd"])
@pytest.mark.parametrize("mask", ["none", "causal", "padding"])
def test_queries_and_keys_of_different_lengths_and_value_width(mask: str, layout: str) -> None:
    """Cross attention: 7 queries over 11 keys, head dim 5, value dim 9 (causal stays
    top-left aligned, as in the decomposition)."""
    rng = np.random.default_rng(8)
    b, h, sq, sk, d, dv = 2, 3, 7, 11, 5, 9

    def shape(s: int, w: int) -> tuple[int, ...]:
        return (b, h, s, w) if layout == "bhsd" else (b, s, h, w)

    q = rng.standard_normal(shape(sq, d)).astype(np.float32)
    k = rng.standard_normal(shape(sk, d)).astype(np.float32)
    v = rng.standard_normal(shape(sk, dv)).astype(np.float32)
    keep = rng.random((b, sk)) > 0.3
    f = _fn(mask, layout)
    exe = rlx.compile(f, q, k, v, keep, target="cpu", record=False)
    assert _impls(exe) == ["rlx-attention"]
    want = np.asarray(rlx.compile(f, q, k, v, keep, target="numpy", record=False)(q, k, v, keep))
    np.testing.assert_allclose(np.asarray(exe(q, k, v, keep)), want, rtol=2e-5, atol=2e-6)


@pytest.mark.parametrize("layout", ["bhsd", "bshd"])
def test_keys_hidden_at_either_end_are_left_out_unless_v_is_not_finite(layout: str) -> None:
    """Padding hides a run of keys at the end (or, left-padded, at the start): an item reads
    only the keys from its first to its last visible one, which is exact (hidden keys weigh
    an exact 0). NaN or inf in a hidden key's row of V makes the product NaN, as in the
    decomposition, so such rows are read; NaN in a hidden key's row of K changes nothing."""
    rng = np.random.default_rng(9)
    b, h, s, d = 3, 2, 40, 8

    def arr() -> np.ndarray:
        dims = (b, h, s, d) if layout == "bhsd" else (b, s, h, d)
        return rng.standard_normal(dims).astype(np.float32)

    q, k, v = arr(), arr(), arr()
    keep = np.zeros((b, s), bool)
    keep[0, :9] = True  # right-padded
    keep[1, 30:] = True  # left-padded
    keep[2, 5:33] = True  # both, with a hole
    keep[2, 12] = False
    at = (lambda bb, j: (bb, slice(None), j)) if layout == "bhsd" else (lambda bb, j: (bb, j))
    k[at(0, 20)] = np.nan
    k[at(1, 3)] = np.inf
    f = _fn("padding", layout)
    exe = rlx.compile(f, q, k, v, keep, target="cpu", record=False)
    got = np.asarray(exe(q, k, v, keep))
    np.testing.assert_allclose(got, _ref(q, k, v, "padding", keep, layout), rtol=2e-5,
                               atol=2e-6)
    common = rlx.compile(f, q, k, v, keep, target="cpu", policy="force-common", record=False)
    v[at(0, 30)] = np.nan  # hidden, after the last visible key of batch 0
    v[at(1, 0)] = np.inf  # hidden, before the first visible key of batch 1
    got, want = np.asarray(exe(q, k, v, keep)), np.asarray(common(q, k, v, keep))
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    assert np.isnan(got[0]).any() and np.isnan(got[1]).any() and not np.isnan(got[2]).any()


_EXP_HARNESS = r"""
#include <stdio.h>
int main(void) {
    long bad = 0, n = 0, vbad = 0, vn = 0;
    float xs[16], cs[16];
    for (uint32_t b = 0x80000000u; b <= 0xff800000u && b >= 0x80000000u; b += 61) {
        float x, a, c;
        memcpy(&x, &b, 4);
        a = rlx_attn_exp(x);
        c = rlx_exp_f(x);
        bad += memcmp(&a, &c, 4) != 0;
        xs[n % 16] = x;
        cs[n % 16] = c;
        ++n;
#if defined(__AVX512F__)
        if (n % 16 == 0) {  /* the AVX-512 softmax's 16-lane form, on the same floats */
            float v[16];
            _mm512_storeu_ps(v, rlx_attn_exp16(_mm512_loadu_ps(xs)));
            for (int l = 0; l < 16; ++l) vbad += memcmp(&v[l], &cs[l], 4) != 0;
            vn += 16;
        }
#endif
    }
    const float nan = __builtin_nanf("");
    int vnan = 1;
#if defined(__AVX512F__)
    float v[16];
    _mm512_storeu_ps(v, rlx_attn_exp16(_mm512_set1_ps(nan)));
    vnan = v[3] != v[3];
#endif
    printf("%ld %ld %d %ld %ld %d\n", n, bad, rlx_attn_exp(nan) != rlx_attn_exp(nan), vn, vbad,
           vnan);
    return 0;
}
"""


def test_the_softmax_exp_equals_the_prelude_exp_on_every_negative_float(tmp_path) -> None:
    """rlx_attn_exp (x - max <= 0 only) gives rlx_exp_f's bits on every 61st float from -0
    to -inf, the subnormal results included, and keeps NaN; so does its AVX-512 form
    (rlx_attn_exp16) where the compiler targets AVX-512."""
    import subprocess

    from rlx_core.targets.c_common.prelude import prelude
    from rlx_core.targets.cpu import attention, sgemm
    from rlx_core.targets.cpu.toolchain import find_compiler

    cc = find_compiler()
    src = tmp_path / "exp.c"
    src.write_text(prelude() + sgemm.SOURCE + attention.SOURCE + _EXP_HARNESS)
    exe = tmp_path / "exp"
    subprocess.run([cc.path, *cc.opt_flags, "-std=gnu11", "-fno-math-errno",
                    "-fno-trapping-math", str(src), "-o", str(exe), "-lm"], check=True,
                   capture_output=True)
    out = subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout
    n, bad, nan, vn, vbad, vnan = (int(t) for t in out.split())
    assert n > 30_000_000 and bad == 0 and nan == 1
    assert vbad == 0 and vnan == 1
    if cc.avx512:  # the compiler emits AVX-512 here: the 16-lane form ran on every float
        assert vn == n - n % 16


@pytest.mark.parametrize("layout", ["bhsd", "bshd"])
def test_one_short_sequence_is_shared_by_heads_with_the_serial_bits(
        layout: str, two_threads: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """One sequence of 8 tokens, 12 heads (MiniLM at one short sentence): under the team's
    work threshold, yet its heads are claimed by the team (attention.SHARE_HEADS); the bits
    are those of the kernel run on one thread, and a batch of two keeps its own split."""
    import rlx_core.targets.cpu.attention as attention

    def build(b: int, share: bool):
        monkeypatch.setattr(attention, "SHARE_HEADS", share)
        dims = (b, 12, 8, 32) if layout == "bhsd" else (b, 8, 12, 32)
        rng = np.random.default_rng(b)
        q, k, v = (rng.standard_normal(dims).astype(np.float32) for _ in range(3))
        keep = np.ones((b, 8), bool)
        keep[:, 6:] = False
        exe = rlx.compile(_fn("padding", layout), q, k, v, keep, target="cpu", record=False)
        return exe, np.asarray(exe(q, k, v, keep)), _ref(q, k, v, "padding", keep, layout)

    shared, got, want = build(1, True)
    serial, base, _ = build(1, False)
    assert "rlx_team_take" in shared.program.info["source"]
    assert "rlx_team_take" not in serial.program.info["source"]
    assert np.array_equal(got, base)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    two = build(2, True)[0].program.info["source"]
    assert two == build(2, False)[0].program.info["source"]
