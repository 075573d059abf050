"""rlx's own f32 GEMM (rlx_core/targets/cpu/sgemm.py): every operand layout, tile and block edge,
team splits, the dispatch record, and the AVX2 and portable C tiles of machines without
AVX-512."""

from __future__ import annotations

import ctypes
import itertools

import numpy as np
import pytest

import rlx_core as rlx
from rlx_core.autodiff.api import value_and_grad
from rlx_core.targets.cpu import gemv, sgemm
from rlx_core.targets.cpu.target import CpuTarget
from rlx_core.targets.cpu.threads import num_threads, set_num_threads
from rlx_core.targets.cpu.toolchain import find_compiler
from tests.targets.checks import impl_set, rel_error
from tests.targets.own_sgemm import (
    ISAS,
    TWICE_PLUS_ONE,
    build_harness,
    skip_unless_own_sgemm,
    three_mlp_steps,
)

cpu_ok, cpu_why = CpuTarget().available()
pytestmark = pytest.mark.skipif(not cpu_ok, reason=f"cpu target unavailable: {cpu_why}")


# rows not a multiple of the 8-row tile, K past one 384-deep block, N past one 256-wide block
# and not a multiple of the 32-wide panel, and the exact tile sizes; with a row-major B in a
# call of at most 256 rows, full panels are read in place, one KC slice at a time (the last
# panels of (40, 100, 300) and (5, 3, 48) are partial and packed; B's rows there start at any
# float, not at a cache line)
SHAPES = [(1, 33, 32), (7, 5, 64), (8, 384, 32), (13, 77, 50), (64, 785, 300), (129, 1000, 97),
          (300, 20, 33), (40, 100, 300), (200, 384, 64), (5, 3, 48), (256, 385, 64)]


@pytest.mark.parametrize("m,k,n", SHAPES)
def test_linear_and_transposed_layouts_match_numpy(m: int, k: int, n: int) -> None:
    skip_unless_own_sgemm()
    rng = np.random.default_rng(m * 7 + k)
    x = rng.standard_normal((m, k), np.float32)
    w = rng.standard_normal((n, k), np.float32)  # x @ w.T: op(B) = W^T, the packing transpose
    wt = np.ascontiguousarray(w.T)
    # a call of 1-4 rows runs the GEMV on B as passed (gemv.py), packing nothing
    impl = gemv.IMPL if gemv.takes(m, 1, False) else sgemm.IMPL
    exe = rlx.compile(lambda a, b: rlx.nn.linear(a, b), x, w, target="cpu", record=False)
    assert impl in impl_set(exe)
    assert rel_error(exe(x, w), x @ w.T) < 1e-5
    exe2 = rlx.compile(lambda a, b: a @ b, x, wt, target="cpu", record=False)
    assert impl in impl_set(exe2)
    assert rel_error(exe2(x, wt), x @ wt) < 1e-5


def test_gradients_use_transposed_a_and_match_numpy() -> None:
    """The weight gradient of x @ w.T is g.T @ x: a transposed A (packed by the kernel)."""
    skip_unless_own_sgemm()
    rng = np.random.default_rng(1)
    x = rng.standard_normal((70, 200), np.float32)
    w = rng.standard_normal((96, 200), np.float32)

    def loss(w, x):
        return rlx.mean(rlx.nn.linear(x, w) ** 2)

    exe = rlx.compile(lambda w, x: value_and_grad(loss)(w, x), w, x, target="cpu", record=False)
    assert sgemm.IMPL in impl_set(exe)
    _, gw = exe(w, x)
    want = 2 * (x @ w.T).T @ x / (70 * 96)
    assert rel_error(gw, want) < 1e-5


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_team_splits_agree_with_numpy(threads: int) -> None:
    skip_unless_own_sgemm()
    before = num_threads()
    set_num_threads(threads)
    try:
        rng = np.random.default_rng(threads)
        x = rng.standard_normal((200, 300), np.float32)
        w = rng.standard_normal((160, 300), np.float32)
        q = rng.standard_normal((12, 40, 64), np.float32)  # batched: whole batches per thread
        # x @ w.T packs its transposed B in the call: threads claim chunks of its columns
        # (blas._splits_columns), here with a bias + relu epilogue narrowed to each
        # and so does a GEMM of fewer than 16 rows (too few to split): d^T e, 10 x 300 x 200
        d = rng.standard_normal((300, 10), np.float32)
        e = rng.standard_normal((300, 200), np.float32)
        # GEMMs of 164K multiply-adds (past TEAM_GEMM_MIN) split too: a 10-wide one on
        # OpenBLAS (128 x 128 x 10) and a 10-deep one (128 x 10 x 128)
        h = rng.standard_normal((128, 128), np.float32)
        w10 = rng.standard_normal((10, 128), np.float32)
        exe = rlx.compile(lambda a, b, c, d, e, h, w10: (
            rlx.nn.linear(a, b), c @ rlx.transpose(c, (0, 2, 1)),
            rlx.nn.relu(rlx.nn.linear(a, b) + 0.5), rlx.transpose(d, (1, 0)) @ e,
            rlx.nn.linear(h, w10), h[:, :10] @ w10),
            x, w, q, d, e, h, w10, target="cpu", record=False)
        y, s, r, de, hw, hk = exe(x, w, q, d, e, h, w10)
        src = "".join(exe.sources.values())
        # claimed chunks of whole panels of columns (team.claimed)
        assert src.count("const int64_t j0 = ch * ") >= 2 and "rlx_sgemm(10, 200, 300" in src
        assert "if (tid == 0)" not in src and "rlx_team_sync(" not in src
        assert rel_error(de, d.T @ e) < 1e-5
        assert rel_error(hw, h @ w10.T) < 1e-5
        assert rel_error(hk, h[:, :10] @ w10) < 1e-5
        assert rel_error(y, x @ w.T) < 1e-5
        assert rel_error(s, q @ q.transpose(0, 2, 1)) < 1e-5
        assert rel_error(r, np.maximum(x @ w.T + 0.5, 0)) < 1e-5
    finally:
        set_num_threads(before)


def test_narrow_gemms_and_other_dtypes_stay_on_openblas(monkeypatch: pytest.MonkeyPatch) -> None:
    skip_unless_own_sgemm()
    rng = np.random.default_rng(2)
    x = rng.standard_normal((64, 128), np.float32)
    w = rng.standard_normal((10, 128), np.float32)  # a 10-class head: narrower than a panel
    exe = rlx.compile(lambda a, b: rlx.nn.linear(a, b), x, w, target="cpu", record=False)
    assert impl_set(exe) == {"blas-sgemm"}
    xd, wd = x.astype(np.float64), rng.standard_normal((64, 128))
    exe_d = rlx.compile(lambda a, b: rlx.nn.linear(a, b), xd, wd, target="cpu", record=False)
    assert impl_set(exe_d) == {"blas-dgemm"}
    monkeypatch.setenv("RLX_NO_OWN_SGEMM", "1")
    w64 = rng.standard_normal((64, 128), np.float32)
    exe_off = rlx.compile(lambda a, b: rlx.nn.linear(a, b), x, w64, target="cpu", record=False)
    assert impl_set(exe_off) == {"blas-sgemm"}
    assert exe_off.program.info["own_sgemm_reason"] == "disabled by RLX_NO_OWN_SGEMM"
    assert rel_error(exe_off(x, w64), x @ w64.T) < 1e-5


_HARNESS = r"""
void run(int64_t m, int64_t n, int64_t k, const float *A, int64_t rm, int64_t rk, const float *B,
         int64_t brk, int64_t brn, float *C, int64_t n0, int64_t n1) {
    rlx_sgemm(m, n, k, A, rm, rk, B, brk, brn, C, n, n0, n1);
}
"""


def _harness(tmp_path, isa: str, harness: str) -> ctypes.CDLL:
    """sgemm.SOURCE and ``harness`` built by themselves for ``isa``."""
    return build_harness(tmp_path, isa, sgemm.SOURCE + harness)


@pytest.mark.parametrize("isa", sorted(ISAS))
def test_the_c_source_is_right_with_and_without_vector_units(tmp_path, isa: str) -> None:
    """Built by itself: the plain-C tile (no AVX: other machines), the AVX2 6 x 16 tile and
    this machine's best, with column ranges [n0, n1) as the team hands them out. (The compiler
    builds AVX2 code anywhere; the calls are skipped where this CPU cannot run it.)"""
    fn = _harness(tmp_path, isa, _HARNESS).run
    fn.restype = None
    i64, ptr = ctypes.c_int64, ctypes.c_void_p
    fn.argtypes = [i64, i64, i64, ptr, i64, i64, ptr, i64, i64, ptr, i64, i64]
    rng = np.random.default_rng(3)
    # K = 784 and 433: two even KC slices (rlx_sgemm_kc); 64 rows: one block of A at K = 128
    # (rlx_sgemm_mc); 5 and 11 rows: edge tiles of every row count of the AVX2 tile; n = 64
    # and 48: B's rows an even and an odd number of cache lines apart (packed, read in place);
    # 300 rows: two blocks of A (a transposed A packed block by block, rlx_sgemm_pack_cols);
    # 64 x 128 x 784: the MLP's weight gradient, B read in place as one block of columns
    # wider than NC with a partial last panel, one vector wide (AVX-512: read in place too);
    # 48 x 128 x 40: the same for the AVX2 tile (a last panel of 8 columns, 48 = 8 x 6 rows)
    shapes = [(9, 400, 70), (16, 8, 300), (64, 784, 64), (11, 433, 48), (5, 130, 32),
              (64, 128, 48), (300, 40, 33), (64, 128, 784), (48, 128, 40)]
    for (m, k, n), ta, tb in itertools.product(shapes, [0, 1], [0, 1]):
        a = rng.standard_normal((k, m) if ta else (m, k), np.float32)
        b = rng.standard_normal((n, k) if tb else (k, n), np.float32)
        want = (a.T if ta else a) @ (b.T if tb else b)
        c = np.full((m, n), np.nan, np.float32)
        rm, rk = (1, m) if ta else (k, 1)
        brk, brn = (1, k) if tb else (n, 1)
        split = 64 if n > 64 else n  # two calls: [0, 64) and [64, n), as two threads would
        for n0, n1 in ((0, split), (split, n)):
            if n1 > n0:
                fn(m, n, k, a.ctypes.data, rm, rk, b.ctypes.data, brk, brn, c.ctypes.data, n0, n1)
        assert rel_error(c, want) < 1e-5, (m, k, n, ta, tb)


_EPI_HARNESS = TWICE_PLUS_ONE + r"""
void run_epi(int64_t m, int64_t n, int64_t k, const float *A, int64_t rm, int64_t rk,
             const float *B, int64_t brk, int64_t brn, float *C, int *seen, int64_t n0,
             int64_t n1, int packed) {
    epi_ctx e = {C, seen, n};
    if (!packed) {
        rlx_sgemm_epi(m, n, k, A, rm, rk, B, brk, brn, C, n, n0, n1, twice_plus_one, &e);
        return;
    }
    float *P = (float *)malloc((size_t)((n + 31) / 32 * 32 * k) * sizeof(float));
    rlx_sgemm_pack_b(n, k, B, brk, brn, P);
    rlx_sgemm_packed_epi(m, n, k, A, rm, rk, P, C, n, n0, n1, twice_plus_one, &e);
    free(P);
}
"""


@pytest.mark.parametrize("isa", sorted(ISAS))
def test_tile_epilogues_see_each_final_element_once(tmp_path, isa: str) -> None:
    """rlx_sgemm_epi / rlx_sgemm_packed_epi call the epilogue on every tile exactly once, after
    the last KC slice (K = 400 takes two): in place, 2 C + 1 then equals 2 (A B) + 1. Edge
    tiles (9 rows, 70 columns), B packed, in place or prepacked, column ranges as the team
    splits them."""
    fn = _harness(tmp_path, isa, _EPI_HARNESS).run_epi
    fn.restype = None
    i64, ptr = ctypes.c_int64, ctypes.c_void_p
    fn.argtypes = [i64, i64, i64, ptr, i64, i64, ptr, i64, i64, ptr, ptr, i64, i64, ctypes.c_int]
    rng = np.random.default_rng(4)
    cases = itertools.product([(9, 400, 70), (16, 8, 300), (300, 40, 64)], [0, 1], [0, 1], [0, 1])
    for (m, k, n), ta, tb, packed in cases:
        a = rng.standard_normal((k, m) if ta else (m, k), np.float32)
        b = rng.standard_normal((n, k) if tb else (k, n), np.float32)
        want = 2.0 * ((a.T if ta else a) @ (b.T if tb else b)) + 1.0
        c = np.full((m, n), np.nan, np.float32)
        seen = np.zeros((m, n), np.int32)
        rm, rk = (1, m) if ta else (k, 1)
        brk, brn = (1, k) if tb else (n, 1)
        split = 64 if n > 64 else n
        for n0, n1 in ((0, split), (split, n)):
            if n1 > n0:
                fn(m, n, k, a.ctypes.data, rm, rk, b.ctypes.data, brk, brn, c.ctypes.data,
                   seen.ctypes.data, n0, n1, packed)
        assert (seen == 1).all(), (m, k, n, ta, tb, packed)
        assert rel_error(c, want) < 1e-5, (m, k, n, ta, tb, packed)


_PACKED_HARNESS = r"""
void run_packed(int64_t m, int64_t n, int64_t k, const float *A, const float *W, float *C,
                int64_t chunk) {
    float *P = (float *)malloc((size_t)((n + 31) / 32 * 32 * k) * sizeof(float));
    rlx_sgemm_pack_b(n, k, W, 1, k, P);  /* op(B) = W^T, W n x k as a linear layer holds it */
    for (int64_t j = 0; j < n; j += chunk)
        rlx_sgemm_packed(m, n, k, A, k, 1, P, C, n, j, j + chunk < n ? j + chunk : n);
    free(P);
}
"""


@pytest.mark.parametrize("isa", sorted(ISAS))
def test_prepacked_panels_fetched_ahead_in_chunks_or_whole(tmp_path, isa: str) -> None:
    """rlx_sgemm_packed fetches each next panel of the prepacked B ahead, on into the next
    claimed chunk's and never past B's last, where a block has RLX_SG_PPF_TILES row tiles
    (AVX-512: NR / 4, 64 rows, and 16 rows stream without; AVX2: every block, a tile's share
    spread over its k loop, RLX_SG_PF_LINES, so one to four lines every four k steps here):
    claimed 64-column chunks give the same bits as one call over all columns, as a build that
    fetches no panel ahead (RLX_SG_PPF 0, sgemm.panel_prefetch), and numpy's product (one or
    two KC slices, several blocks of rows, edge tiles, a partial last panel, one tile of one
    row, a slice depth not a multiple of four)."""
    (tmp_path / "off").mkdir()
    fns = {"on": build_harness(tmp_path, isa, sgemm.SOURCE + _PACKED_HARNESS).run_packed,
           "off": build_harness(tmp_path / "off", isa, "#define RLX_SG_PPF 0\n" + sgemm.SOURCE
                                + _PACKED_HARNESS).run_packed}
    i64, ptr = ctypes.c_int64, ctypes.c_void_p
    for fn in fns.values():
        fn.restype = None
        fn.argtypes = [i64, i64, i64, ptr, ptr, ptr, i64]
    rng = np.random.default_rng(6)
    for m, k, n in [(37, 200, 300), (300, 1000, 97), (8, 64, 64), (16, 384, 384), (64, 1536, 200),
                    (128, 1536, 384), (1, 384, 160), (12, 390, 160)]:
        a = rng.standard_normal((m, k), np.float32)
        w = rng.standard_normal((n, k), np.float32)
        out = {}
        for (name, fn), chunk in itertools.product(fns.items(), (64, n)):
            c = np.full((m, n), np.nan, np.float32)
            fn(m, n, k, a.ctypes.data, w.ctypes.data, c.ctypes.data, chunk)
            out[name, chunk] = c
        for key in out:
            assert np.array_equal(out[key], out["on", n]), (m, k, n, key)
        assert rel_error(out["on", 64], a @ w.T) < 1e-5, (m, k, n)


@pytest.mark.parametrize("isa", sorted(ISAS))
def test_each_row_of_a_call_has_the_bits_of_that_row_alone(tmp_path, isa: str) -> None:
    """Whatever tile a row of A falls in (a full tile, an edge tile, or, on the AVX2 path, the
    4 + 4 / 4 + 3 tiles a block ending 1-2 rows past a whole tile is cut into: rlx_sgemm_rows),
    its row of C has the bits of the same row computed alone (m = 1): on prepacked B, W^T
    packed in the call and a row-major B (read in place), and numpy's product."""
    lib = _rows_harness(tmp_path, isa)
    rng = np.random.default_rng(10)
    # 8 = 6 + 2 and 13 = 6 + 7 rows (4 + 4, 6 + 4 + 3 on AVX2); 128 x 1536 x 384: MiniLM's
    # FFN down, row blocks of 66 and 62 = 10 x 6 + 2; 62 x 800 x 40: two KC slices
    for m, k, n in [(8, 300, 64), (13, 200, 48), (128, 1536, 384), (62, 800, 40)]:
        a = rng.standard_normal((m, k), np.float32)
        w = rng.standard_normal((n, k), np.float32)
        for form in ("packed", "w_t", "b"):
            whole = _rows_times_w_t(lib, form, a, w)
            alone = np.concatenate([_rows_times_w_t(lib, form, a[i:i + 1], w)
                                    for i in range(m)])
            assert np.array_equal(whole, alone), (m, k, n, form)
            assert rel_error(whole, a @ w.T) < 1e-5, (m, k, n, form)


@pytest.mark.parametrize("isa", sorted(ISAS))
def test_the_asm_k_steps_of_the_avx512_tile_change_no_bits(tmp_path, isa: str,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """RLX_SG_ASM8=1 (sgemm.asm8) builds the full AVX-512 tile's k steps as inline asm: the same
    bits as the C form on prepacked B, W^T packed in the call, a row-major B read in place or
    packed, and a transposed A (the MLP's weight gradient g^T x), with edge tiles, two KC
    slices, partial panels and a depth not a multiple of four, and numpy's product. Where the
    build targets AVX-512 the asm is in the compiler's assembly, and only there."""
    monkeypatch.setenv("RLX_SG_ASM8", "1")
    on = sgemm.defines()
    assert "#define RLX_SG_ASM8 1\n" in on
    monkeypatch.setenv("RLX_SG_ASM8", "0")
    assert "RLX_SG_ASM8" not in sgemm.defines()
    (tmp_path / "asm8").mkdir()
    libs = [_rows_harness(tmp_path, isa), _rows_harness(tmp_path / "asm8", isa, on)]
    rng = np.random.default_rng(11)
    for m, k, n in [(128, 784, 128), (37, 390, 100), (64, 1000, 48), (16, 131, 64)]:
        a = rng.standard_normal((m, k), np.float32)
        w = rng.standard_normal((n, k), np.float32)
        for form in ("packed", "w_t", "b"):
            got = [_rows_times_w_t(lib, form, a, w) for lib in libs]
            assert np.array_equal(got[0], got[1]), (m, k, n, form)
            assert rel_error(got[1], a @ w.T) < 1e-5, (m, k, n, form)
        # a^T @ x as the weight gradient g^T x: op(A) = a^T (rm = 1, k rows m deep), x row-major
        x = rng.standard_normal((m, n), np.float32)
        got = []
        for lib in libs:
            c = np.full((k, n), np.nan, np.float32)
            lib.run(k, n, m, a.ctypes.data, 1, k, x.ctypes.data, n, 1, c.ctypes.data, 0, n)
            got.append(c)
        assert np.array_equal(got[0], got[1]), (m, k, n, "a^T x")
        assert rel_error(got[1], a.T @ x) < 1e-5, (m, k, n, "a^T x")
    assert ("rlx_sg_asm8" in _assembly(isa, on + sgemm.SOURCE + _HARNESS)) is \
        ("__AVX512F__" in _assembly(isa, "", "-dM", "-E")), isa
    assert "rlx_sg_asm8" not in _assembly(isa, sgemm.SOURCE + _HARNESS)


@pytest.mark.parametrize(("ports", "flip", "want"),
                         [(None, False, False), (2, False, False), (1, True, False),
                          (None, True, False), (2, True, True)])
def test_the_asm_k_steps_are_opt_in_and_only_ever_default_on_two_fma_ports(
        monkeypatch: pytest.MonkeyPatch, ports: int | None, flip: bool, want: bool) -> None:
    """RLX_SG_ASM8 is off by default; with sgemm.ASM8_ON_TWO_PORTS it would be on only on a core
    measured at two FMA ports for the path's vectors; RLX_SG_ASM8 (0 or 1) overrides it."""
    _measured_ports(monkeypatch, ports)
    monkeypatch.setattr(sgemm, "ASM8_ON_TWO_PORTS", flip)
    monkeypatch.delenv("RLX_SG_ASM8", raising=False)
    assert sgemm.asm8() is want
    assert ("#define RLX_SG_ASM8 1\n" in sgemm.defines()) is want
    for value, on in (("0", False), ("1", True)):
        monkeypatch.setenv("RLX_SG_ASM8", value)
        assert sgemm.asm8() is on, value


def test_the_mlp_step_with_the_asm_k_steps_has_the_same_parameters(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """784-128-10 at batch 128, three SGD steps: built with RLX_SG_ASM8=1 its parameters are
    the C form's bit for bit."""
    skip_unless_own_sgemm()
    monkeypatch.setenv("RLX_SG_ASM8", "0")
    plain = three_mlp_steps()
    monkeypatch.setenv("RLX_SG_ASM8", "1")
    asm = three_mlp_steps()
    assert "#define RLX_SG_ASM8 1\n" in sgemm.defines()  # (what the renderer puts before SOURCE)
    for layer in ("fc1", "fc2"):
        for leaf in ("weight", "bias"):
            np.testing.assert_array_equal(np.asarray(plain.params[layer][leaf]),
                                          np.asarray(asm.params[layer][leaf]))


def _assembly(isa: str, source: str, *mode: str) -> str:
    """``source`` compiled for ``isa`` (ISAS' flags) to assembly, or with ``mode`` (``-dM
    -E``: the predefined macros)."""
    import shutil
    import subprocess

    cc = shutil.which("cc") or shutil.which("gcc")
    return subprocess.run([cc, "-O2", *ISAS[isa], "-std=gnu11", *(mode or ("-S",)), "-o", "-",
                           "-x", "c", "-"], input=source, capture_output=True, text=True,
                          check=True).stdout


def _measured_ports(monkeypatch: pytest.MonkeyPatch, ports: int | None) -> None:
    """The peaks store as if this core's FMA ports had been measured at ``ports`` (None:
    never measured), for the choices that follow them (sgemm.panel_prefetch, wt_set_rows,
    asm8)."""
    from dataclasses import replace

    from rlx_core.targets.cpu import peaks

    row = peaks.Peaks(gflops=100.0, gbps=30.0, threads=1, cpu="test", measured="now")

    def stored(threads=None):
        return None if ports is None else replace(row, fma_ports=ports)

    monkeypatch.setattr(peaks, "machine_peaks", stored)


def _rows_harness(tmp_path, isa: str, defines: str = "") -> ctypes.CDLL:
    """``defines``, sgemm.SOURCE and both harness entries (run, run_packed) built for ``isa``
    and typed, for _rows_times_w_t."""
    lib = build_harness(tmp_path, isa, defines + sgemm.SOURCE + _HARNESS + _PACKED_HARNESS)
    i64, ptr = ctypes.c_int64, ctypes.c_void_p
    lib.run.restype = lib.run_packed.restype = None
    lib.run.argtypes = [i64, i64, i64, ptr, i64, i64, ptr, i64, i64, ptr, i64, i64]
    lib.run_packed.argtypes = [i64, i64, i64, ptr, ptr, ptr, i64]
    return lib


def _rows_times_w_t(lib: ctypes.CDLL, form: str, rows: np.ndarray, w: np.ndarray) -> np.ndarray:
    """rows @ w.T through the harness: on w^T prepacked (``packed``), packed in the call
    (``w_t``) or as a row-major B (``b``: read in place where its rows spread)."""
    r, k = rows.shape
    n = w.shape[0]
    a = np.ascontiguousarray(rows)
    c = np.full((r, n), np.nan, np.float32)
    if form == "packed":
        lib.run_packed(r, n, k, a.ctypes.data, w.ctypes.data, c.ctypes.data, n)
    elif form == "w_t":
        lib.run(r, n, k, a.ctypes.data, k, 1, w.ctypes.data, 1, k, c.ctypes.data, 0, n)
    else:
        b = np.ascontiguousarray(w.T)
        lib.run(r, n, k, a.ctypes.data, k, 1, b.ctypes.data, n, 1, c.ctypes.data, 0, n)
    return c


@pytest.mark.parametrize(("ports", "want"), [(None, True), (1, False), (2, True)])
def test_the_panel_prefetch_follows_the_measured_fma_ports(
        monkeypatch: pytest.MonkeyPatch, ports: int | None, want: bool) -> None:
    """A prepacked B's next panel is fetched ahead except on a core measured at one FMA port
    for this ISA family's vectors (never measured: as tuned, on); the renderer's macros carry
    the choice, and RLX_SG_PPF (0 or 1) overrides it; any other value is a typed error."""
    from rlx_core.errors import ArgumentError

    _measured_ports(monkeypatch, ports)
    monkeypatch.delenv("RLX_SG_PPF", raising=False)
    monkeypatch.delenv("RLX_SG_APF", raising=False)
    assert sgemm.panel_prefetch() is want
    assert ("#define RLX_SG_PPF 0\n" in sgemm.defines()) is not want
    for value, on in (("0", False), ("1", True), (" ", want)):
        monkeypatch.setenv("RLX_SG_PPF", value)
        assert sgemm.panel_prefetch() is on, value
        assert ("#define RLX_SG_PPF 0\n" in sgemm.defines()) is not on, value
    for bad in ("2", "-1", "on"):
        monkeypatch.setenv("RLX_SG_PPF", bad)
        with pytest.raises(ArgumentError, match="RLX_SG_PPF"):
            sgemm.panel_prefetch()


@pytest.mark.parametrize("isa", sorted(ISAS))
def test_fetching_the_next_rows_of_a_changes_no_bits(tmp_path, isa: str, monkeypatch) -> None:
    """x @ W^T with W^T packed in the call (the MLP's forward GEMM) fetches each next tile's
    rows of A ahead (rlx_sgemm_next_a: the next row tile, block of rows, KC slice): built with
    RLX_SG_APF=0 (sgemm.defines) it gives the same bits, column chunks as the team's."""
    monkeypatch.setenv("RLX_SG_APF", "0")
    off = sgemm.defines()
    assert "#define RLX_SG_APF 0\n" in off
    monkeypatch.delenv("RLX_SG_APF")
    assert "RLX_SG_APF" not in sgemm.defines()
    (tmp_path / "off").mkdir()
    _same_bits_x_w_t([_harness(tmp_path, isa, _HARNESS).run,
                      build_harness(tmp_path / "off", isa, off + sgemm.SOURCE + _HARNESS).run],
                     [(128, 784, 128), (300, 433, 70), (13, 200, 64)], seed=8, width=32)


def _same_bits_x_w_t(fns: list, shapes: list[tuple[int, int, int]], seed: int,
                     width: int) -> None:
    """x @ W^T with W per call through each harness build (_HARNESS's ``run``), in column
    chunks of ``width`` as the team's: every build gives the first's bits, and numpy's product."""
    i64, ptr = ctypes.c_int64, ctypes.c_void_p
    for fn in fns:
        fn.restype = None
        fn.argtypes = [i64, i64, i64, ptr, i64, i64, ptr, i64, i64, ptr, i64, i64]
    rng = np.random.default_rng(seed)
    for m, k, n in shapes:
        a = rng.standard_normal((m, k), np.float32)
        w = rng.standard_normal((n, k), np.float32)
        out = []
        for fn in fns:
            c = np.full((m, n), np.nan, np.float32)
            for n0 in range(0, n, width):
                fn(m, n, k, a.ctypes.data, k, 1, w.ctypes.data, 1, k, c.ctypes.data, n0,
                   min(n, n0 + width))
            out.append(c)
        assert all(np.array_equal(out[0], c) for c in out[1:]), (m, k, n)
        assert rel_error(out[0], a @ w.T) < 1e-5, (m, k, n)


@pytest.mark.parametrize("isa", sorted(ISAS))
def test_packing_w_t_in_a_pass_changes_no_bits(tmp_path, isa: str) -> None:
    """x @ W^T with W per call: a panel of W^T whose rows of W crowd the L1's sets (K >= 1024,
    rows a 4 KB way apart) is packed in a pass before its tiles where RLX_SG_WT_SET_ROWS is
    below 32 (sgemm.wt_set_rows), else by its first tile as it runs (rlx_sgemm_acc_wt): both
    builds give the same bits, in 64-column chunks as the team's, and numpy's product."""
    (tmp_path / "pass").mkdir()
    _same_bits_x_w_t([_harness(tmp_path, isa, _HARNESS).run,
                      build_harness(tmp_path / "pass", isa,
                                    "#define RLX_SG_WT_SET_ROWS 0\n" + sgemm.SOURCE + _HARNESS).run],
                     [(128, 1536, 384), (37, 1024, 100), (16, 3072, 64), (64, 784, 96),
                      (13, 1040, 70)], seed=9, width=64)


@pytest.mark.parametrize(("ports", "want"), [(None, 32), (1, sgemm.WT_SET_ROWS), (2, 32)])
def test_w_t_packing_follows_the_measured_fma_ports(
        monkeypatch: pytest.MonkeyPatch, ports: int | None, want: int) -> None:
    """W^T's panels are packed by their first tile (32: whatever the sets) except on a core
    measured at one FMA port for this ISA family's vectors; the renderer's macros carry the
    bound, RLX_SG_WT_SET_ROWS (0 to 32) overrides it, and anything else is a typed error."""
    from rlx_core.errors import ArgumentError

    _measured_ports(monkeypatch, ports)
    monkeypatch.delenv("RLX_SG_WT_SET_ROWS", raising=False)
    assert sgemm.wt_set_rows() == want
    assert ("#define RLX_SG_WT_SET_ROWS" in sgemm.defines()) is (want != 32)
    monkeypatch.setenv("RLX_SG_WT_SET_ROWS", "0")
    assert sgemm.wt_set_rows() == 0
    assert "#define RLX_SG_WT_SET_ROWS 0\n" in sgemm.defines()
    for bad in ("33", "-1", "many"):
        monkeypatch.setenv("RLX_SG_WT_SET_ROWS", bad)
        with pytest.raises(ArgumentError, match="RLX_SG_WT_SET_ROWS"):
            sgemm.wt_set_rows()


def test_b_is_read_in_place_only_where_its_rows_spread_over_the_cache_sets() -> None:
    """sgemm.spreads: rows an odd number of 64-byte lines apart, or not whole lines, spread
    over the L1's sets; an even number of lines (512 or 768 floats) maps them onto a few."""
    assert sgemm.spreads(784) and sgemm.spreads(48) and sgemm.spreads(100)
    assert not sgemm.spreads(512) and not sgemm.spreads(768) and not sgemm.spreads(64)
    from rlx_core.targets.c_common.matmul import Strides

    assert sgemm.reads_b_in_place(Strides((), 784, 1), 128, 128)
    assert not sgemm.reads_b_in_place(Strides((), 512, 1), 128, 128)
    assert not sgemm.reads_b_in_place(Strides((), 784, 1), sgemm.DIRECT_ROWS + 1, 128)


def test_the_dispatch_record_names_the_tile() -> None:
    """program.info says which vector ISA the own kernel was built for."""
    skip_unless_own_sgemm()
    rng = np.random.default_rng(5)
    x, w = rng.standard_normal((64, 96), np.float32), rng.standard_normal((48, 96), np.float32)
    exe = rlx.compile(lambda a, b: rlx.nn.linear(a, b), x, w, target="cpu", record=False)
    info = exe.program.info
    comp = find_compiler()
    assert info["own_sgemm"] and info["own_sgemm_isa"] == sgemm.isa(comp)
    assert info["own_sgemm_isa"] == ("avx512" if comp.avx512 else "avx2")
    assert rel_error(exe(x, w), x @ w.T) < 1e-5


def test_a_b_deeper_than_one_slice_is_packed_on_the_avx512_path() -> None:
    """sgemm.direct_depth: with AVX-512 a B read in place is at most one KC slice deep (the
    C side's RLX_SG_DIRECT_DEPTH); AVX2 reads any depth in place."""
    from rlx_core.targets.c_common.matmul import Strides

    sb, depth = Strides((), 784, 1), sgemm.direct_depth()
    assert sgemm.reads_b_in_place(sb, 128, 128)
    if depth is None:
        assert sgemm.reads_b_in_place(sb, 128, 1024)
    else:
        assert sgemm.reads_b_in_place(sb, 128, depth)
        assert not sgemm.reads_b_in_place(sb, 128, depth + 1)
